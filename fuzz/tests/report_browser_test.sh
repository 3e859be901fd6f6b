#!/usr/bin/env bash
# ctest report_browser_test: a real campaign's report opened in headless chromium
# (report_browser_check.sh): it renders, every finding group of the index is there with its
# triage label, every picture loads; the same page with one picture broken, or missing a group,
# must fail the check; a folder that is not a campaign's is refused with exit 2.
# The campaign carries two planted faults on fa: fa_local_token_table, known to
# adapters/tests/planted_known_issues.json, and fa_draft_extend_v2_prefix, which is not, so the
# page shows known and NEW groups. About 40 s on 2 cores.
# Usage: report_browser_test.sh KVFUZZ SOURCE_DIR WORKDIR
set -euo pipefail
kvfuzz=$1 src=$2 work=$3
here=$(dirname "$(realpath "$0")")
rm -rf "$work" && mkdir -p "$work"
out=$work/findings
status=0
"$kvfuzz" run --cases 48 --jobs 2 --backend fa --fault fa_local_token_table --fault fa_draft_extend_v2_prefix \
  --shrink-seconds 2 --max-saved 1 --out "$out" >"$work/run.log" 2>&1 || status=$?
[ $status = 1 ] || { echo "the campaign with planted faults exited $status, expected 1:"; cat "$work/run.log"; exit 1; }
status=0
python3 "$src/adapters/triage.py" "$out" --issues "$src/adapters/tests/planted_known_issues.json" >"$work/triage.log" 2>&1 ||
  status=$?
[ $status -le 1 ] || { echo "triage exited $status:"; cat "$work/triage.log"; exit 1; }
"$kvfuzz" report "$out" -o "$work/report.html"
# The groups the page must show: every key of the index, labelled as triage.json says.
python3 - "$out" >"$work/keys" <<'PY'
import json, os, sys
out = sys.argv[1]
labels = {g["key"]: g["label"] for g in json.load(open(os.path.join(out, "triage.json")))["groups"]}
keys = {json.loads(l)["key"] for l in open(os.path.join(out, "index.jsonl")) if l.strip()}
for k in sorted(keys):
    print(f"{labels.get(k, 'untriaged')}\t{k}")
PY
grep -q "^known" "$work/keys" && grep -q "^NEW" "$work/keys" ||
  { echo "expected known and NEW groups from the two faults, got:"; cat "$work/keys"; exit 1; }
status=0
bash "$here/report_browser_check.sh" "$work/report.html" "$work/keys" "$work/report.png" || status=$?
[ $status = 0 ] || exit $status
# The check must be able to fail: one picture's data made unreadable ...
sed '0,/base64,[A-Za-z0-9+\/]/s//base64,!!!!/' "$work/report.html" >"$work/broken.html"
if bash "$here/report_browser_check.sh" "$work/broken.html" "$work/keys" >"$work/broken.log"; then
  echo "a page with a broken picture passed the check:"; cat "$work/broken.log"; exit 1
fi
grep -q "pictures did not load" "$work/broken.log" || { echo "the broken picture was not named:"; cat "$work/broken.log"; exit 1; }
# ... a group the page lacks, or a label it shows differently.
head -1 "$work/keys" | sed 's/^[a-zA-Z]*\t/regression\t/' >"$work/keys-relabelled"
{ cat "$work/keys"; printf 'NEW\tproperty backend mode nowhere\n'; } >"$work/keys-extra"
for wrong in keys-relabelled keys-extra; do
  if bash "$here/report_browser_check.sh" "$work/report.html" "$work/$wrong" >"$work/$wrong.log"; then
    echo "the check passed against $wrong:"; cat "$work/$wrong.log"; exit 1
  fi
done
# A folder that is not a campaign's: exit 2, naming the file.
mkdir -p "$work/empty"
status=0
"$kvfuzz" report "$work/empty" -o "$work/empty.html" >"$work/empty.log" 2>&1 || status=$?
[ $status = 2 ] && grep -q "campaign.json not found" "$work/empty.log" ||
  { echo "an empty folder gave exit $status:"; cat "$work/empty.log"; exit 1; }
echo "report_browser_test: ok ($(grep -c . "$work/keys") groups: $(cut -f1 "$work/keys" | sort | uniq -c | xargs))"
