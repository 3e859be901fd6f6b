#!/usr/bin/env bash
# Sharded campaigns (kvfuzz run --shard I/N) and kvfuzz merge (fuzz/campaign_merge.h):
# 1. equivalence: 3 shards (and 2) of a --cases campaign with a planted fault, merged, index the same set
#    of (case seed, fingerprint key) as the single campaign of that seed; saved cases at most
#    --max-saved per key, each in the merged folder; replay lines of a kept and of a left-out saved
#    case reproduce (exit 1); triage.py and kvfuzz report read the merged folder; each of 2 shards
#    draws both profiles;
# 2. bad input exits 2 naming it: --shard out of range, a shard twice, a missing shard, another
#    seed's folder, an index cut short, an unfinished shard, a non-empty OUT, a bad shard_block, a
#    shard of the rule before (every N-th case).
# Usage: shard_merge_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The fault of the fault benchmark's first entry: sglang #23757 (local attention handed the
# token-granular table).
run=(--cases 240 --backend fa --fault fa_local_token_table --profile tiny --profile small --jobs 2)
pairs() {  # the sorted (case seed, key) pairs of a campaign folder's index
  python3 -c 'import json,sys; [print(e["case_seed"], e["key"]) for e in map(json.loads, open(sys.argv[1]))]' "$1/index.jsonl" | sort
}

# 1. Equivalence.
"$K" run "${run[@]}" --seed 5 --no-shrink --out single > single.log 2>&1
[ $? = 1 ] || fail "the single campaign should exit 1 (findings): $(tail -3 single.log)"
for i in 0 1 2; do
  "$K" run "${run[@]}" --seed 5 --shard $i/3 --shrink-seconds 0.5 --max-saved 2 --out shard-$i > shard-$i.log 2> shard-$i.err
  rc=$?
  [ $rc = 1 ] || [ $rc = 0 ] || fail "shard $i exited $rc: $(tail -3 shard-$i.err)"
  grep -q "^\[shard $i/3 .* cases (.*/s), findings" shard-$i.err || fail "shard $i's progress line does not name it: $(head -3 shard-$i.err)"
done
"$K" merge merged shard-0 shard-1 shard-2 > merge.log 2>&1 || fail "merge exited $?: $(cat merge.log)"
[ -s single/index.jsonl ] || fail "the planted fault found nothing: the test proves nothing"
pairs single > single.pairs
pairs merged > merged.pairs
cmp -s single.pairs merged.pairs ||
  fail "merged shards differ from the single campaign: $(diff single.pairs merged.pairs | head -5)"
echo "single campaign: $(wc -l < single.pairs) index lines, merged shards: $(wc -l < merged.pairs)"
python3 - merged << 'EOF' || fail "merged folder: see above"
import collections, json, os, shlex, sys
out = sys.argv[1]
lines = [json.loads(l) for l in open(os.path.join(out, "index.jsonl"))]
rec = json.load(open(os.path.join(out, "campaign.json")))
assert [l["case_index"] for l in lines] == sorted(l["case_index"] for l in lines), "not ordered by case"
per_key = collections.Counter(l["key"] for l in lines if l["saved"])
assert max(per_key.values()) <= 2, f"more than --max-saved saved per key: {per_key}"
for l in lines:
    if l["saved"]:
        assert l["saved"].startswith(out + "/") and os.path.exists(l["saved"]), l["saved"]
        assert shlex.quote(l["saved"]) in l["replay"] or l["saved"] in l["replay"], l["replay"]
        report = open(l["saved"][:-5] + ".txt").read()
        assert not any(f"shard-{i}/" in report for i in range(3)), "a report still names a shard's file"
    else:
        assert " gen --seed " in l["replay"].split(" && ")[0], l["replay"]
assert rec["rates"]["cases"] == 240 and rec["settings"]["shards"] == 3, rec["rates"]
assert len(rec["shards"]) == 3 and all(s["seconds"] > 0 for s in rec["shards"]), rec["shards"]
assert rec["rates"]["findings"] == sum(1 for l in lines), (rec["rates"], len(lines))
single = json.load(open("single/campaign.json"))
assert rec["coverage"]["by_backend"] == single["coverage"]["by_backend"], "coverage counts differ from the single run"
assert rec["coverage"]["line"] == single["coverage"]["line"], (rec["coverage"]["line"], single["coverage"]["line"])
# one kept and one left-out saved case, to replay
kept = next(l for l in lines if l["saved"])
dropped = next((l for l in lines if not l["saved"] and "&&" in l["replay"]), None)
open("replays.sh", "w").write("\n".join(l["replay"] for l in (kept, dropped) if l) + "\n")
EOF
while read -r replay; do
  (mkdir -p "$WORK/elsewhere" && cd "$WORK/elsewhere" && eval "$replay") > replay.log 2>&1  # as pasted, from another directory
  rc=$?
  [ $rc = 1 ] || fail "replay exited $rc, not 1: $replay"
done < replays.sh
python3 "$SRC/adapters/triage.py" merged --issues "$SRC/adapters/gpu/known_issues.json" > triage.log 2>&1
[ $? = 1 ] || fail "triage of the merged folder should exit 1 (NEW: the planted fault): $(tail -3 triage.log)"
"$K" report merged -o merged/report.html > report.log 2>&1 || fail "kvfuzz report on the merged folder: $(tail -3 report.log)"

# Every shard draws every profile (fuzz/shard.h: blocks of one case per profile): with two
# profiles and two shards, taking every other case gave shard 0 only tiny cases. The planted
# fault's findings name their profiles.
for i in 0 1; do
  "$K" run "${run[@]}" --seed 5 --no-shrink --shard $i/2 --out half-$i > half-$i.log 2>&1
  profiles=$(python3 -c 'import json,sys; print(" ".join(sorted({json.loads(l)["profile"] for l in open(sys.argv[1])})))' half-$i/index.jsonl)
  [ "$profiles" = "small tiny" ] || fail "shard $i/2 drew the profiles '$profiles', not both"
done
"$K" merge halves half-0 half-1 > halves.log 2>&1 || fail "merging 2 shards exited $?: $(cat halves.log)"
pairs halves | cmp -s single.pairs - || fail "2 merged shards differ from the single campaign"

# 2. Bad input: exit 2 and a message naming it.
expect_2() {  # expect_2 WHAT PATTERN COMMAND...
  local what=$1 pattern=$2
  shift 2
  "$@" > bad.log 2>&1
  local rc=$?
  [ $rc = 2 ] || fail "$what: exit $rc, not 2"
  grep -q -- "$pattern" bad.log || fail "$what: message does not say '$pattern': $(cat bad.log)"
}
expect_2 "--shard 3/3" "--shard 3/3" "$K" run --cases 1 --shard 3/3 --out x
expect_2 "--shard x" "--shard x" "$K" run --cases 1 --shard x --out x
expect_2 "a shard twice" "shard-1 and shard-1b are both shard 1/3" bash -c "cp -r shard-1 shard-1b && '$K' merge m1 shard-0 shard-1 shard-1b shard-2"
expect_2 "a missing shard" "shard(s) 2 of 3 missing" "$K" merge m2 shard-0 shard-1
"$K" run "${run[@]}" --seed 6 --shard 2/3 --no-shrink --out other > /dev/null 2>&1
expect_2 "another seed" "other: another campaign than shard-0's (seed 6, not 5)" "$K" merge m3 shard-0 shard-1 other
cp -r shard-2 cut && truncate -s -5 cut/index.jsonl
expect_2 "a cut index" "cut/index.jsonl line .*: cut short" "$K" merge m4 shard-0 shard-1 cut
cp -r shard-2 lost && sed -i '$d' lost/index.jsonl
expect_2 "a lost line" "lost/index.jsonl: .* finding line(s), but campaign.json counts" "$K" merge m5 shard-0 shard-1 lost
cp -r shard-2 running && sed -i 's/"finished": true/"finished": false/' running/campaign.json
expect_2 "an unfinished shard" "running: its campaign did not finish" "$K" merge m6 shard-0 shard-1 running
expect_2 "a non-empty OUT" "merged: exists and is not an empty folder" "$K" merge merged shard-0 shard-1 shard-2
cp -r shard-2 block && sed -i 's/"shard_block": 2/"shard_block": 0/' block/campaign.json
expect_2 "a bad shard_block" 'block/campaign.json: settings "shard_block"' "$K" merge m7 shard-0 shard-1 block
# a shard of the rule before (every N-th case: no shard_block) is another campaign's part
cp -r shard-2 before && sed -i '/"shard_block": 2/d; s/"shard": "2\/3",/"shard": "2\/3"/' before/campaign.json
expect_2 "a shard of the rule before" "before: another campaign than shard-0's (shard_block null, not 2)" \
  "$K" merge m8 shard-0 shard-1 before
for m in m1 m2 m3 m4 m5 m6 m7 m8; do [ -e $m/campaign.json ] && fail "$m: a refused merge wrote a campaign"; done

[ $failures = 0 ] && echo "shard_merge_test: all passed"
exit $((failures > 0))
