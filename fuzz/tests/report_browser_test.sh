#!/usr/bin/env bash
# ctest report_browser_test: a real campaign's report opened in headless chromium
# (report_browser_check.sh): it renders, every finding group of the index is there, every picture
# loads; the same page with one picture broken must fail the check; a folder that is not a
# campaign's is refused with exit 2. Usage: report_browser_test.sh KVFUZZ WORKDIR
# About 40 s on 2 cores (a 16-case campaign with a planted fault, shrinking capped at 3 s).
set -euo pipefail
kvfuzz=$1 work=$2
here=$(dirname "$(realpath "$0")")
rm -rf "$work" && mkdir -p "$work"
status=0
"$kvfuzz" run --cases 16 --jobs 2 --backend fa --fault fa_local_token_table --shrink-seconds 3 \
  --out "$work/findings" >"$work/run.log" 2>&1 || status=$?
[ $status = 1 ] || { echo "the campaign with a planted fault exited $status, expected 1:"; cat "$work/run.log"; exit 1; }
"$kvfuzz" report "$work/findings" -o "$work/report.html"
python3 -c 'import json, sys
print("\n".join(sorted({json.loads(l)["key"] for l in open(sys.argv[1]) if l.strip()})))' \
  "$work/findings/index.jsonl" >"$work/keys"
[ -s "$work/keys" ] || { echo "the campaign indexed no finding"; exit 1; }
status=0
bash "$here/report_browser_check.sh" "$work/report.html" "$work/keys" "$work/report.png" || status=$?
[ $status = 0 ] || exit $status
# The check must be able to fail: one picture's data made unreadable.
sed '0,/base64,[A-Za-z0-9+\/]/s//base64,!!!!/' "$work/report.html" >"$work/broken.html"
if bash "$here/report_browser_check.sh" "$work/broken.html" "$work/keys" >"$work/broken.log"; then
  echo "a page with a broken picture passed the check:"; cat "$work/broken.log"; exit 1
fi
grep -q "pictures did not load" "$work/broken.log" || { echo "the broken picture was not named:"; cat "$work/broken.log"; exit 1; }
# And a group missing from the page.
echo "property backend mode nowhere" >>"$work/keys"
if bash "$here/report_browser_check.sh" "$work/report.html" "$work/keys" >/dev/null; then
  echo "a page missing a finding group passed the check"; exit 1
fi
# A folder that is not a campaign's: exit 2, naming the file.
mkdir -p "$work/empty"
status=0
"$kvfuzz" report "$work/empty" -o "$work/empty.html" >"$work/empty.log" 2>&1 || status=$?
[ $status = 2 ] && grep -q "campaign.json not found" "$work/empty.log" ||
  { echo "an empty folder gave exit $status:"; cat "$work/empty.log"; exit 1; }
echo "report_browser_test: ok"
