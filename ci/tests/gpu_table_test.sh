#!/usr/bin/env bash
# ci/gpu_table.py: a campaign's row (checked, unsupported, checked/s, when the first 100 checked cases
# were done, the campaign's whole time (OUT/NAME.wall), cases per batch (a log of several shards: added up), the draws outside the declaration, shapes, share in the kernel from the log's own job
# count, cases with findings by property), its time breakdown with the host's CPU busy (OUT/NAME.cpu), every finding of its index triaged by
# fingerprint: known only -> exit 0; a NEW one -> exit 1; a saved finding without its fingerprint
# record (triage exit 3) -> exit 1, never "clean"; a campaign kvfuzz failed -> exit 1 with its last line.
# Usage: gpu_table_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK/sglang_triton"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat >"$WORK/sglang_triton.log" <<'LOG'
kvfuzz run: seed 1, 1 backend(s), 4 job(s), 270 s, findings in /tmp/fg/sglang_triton/
campaign: 1531 cases in 200.0 s (7.7 cases/s)
backend                  checked  unsupported
triton:sglang_triton         512         1019
drawn within support: 3000 draws for 1531 cases; outside each backend's declared support: triton:sglang_triton 49%
first 100 checked cases: 41.3 s after the start
shapes: 16 (page size, model, dtype), each reused by 95.7 cases on average
adapter sglang_triton: 1677 requests, 0 crashes; 400.0 s inside the adapter's function
adapter sglang_triton batches: 40 requests carried 84 cases, 0 failed
adapter sglang_triton time: kernel 80.00 s, first calls of a variant 40.00 s, adapter code 8.00 s, exchange 16.00 s (kvfuzz writes 4.00), server queue 400.00 s
oracle: 8.00 s in run_oracle
LOG
echo 1 >"$WORK/sglang_triton.rc"
echo 213 >"$WORK/sglang_triton.wall"
echo 0.517 >"$WORK/sglang_triton.cpu"  # ci/gpu.sh's cpu_busy: the host's cores busy over the campaign
finding() {  # finding PROPERTY WINDOW MECHANISM CASE: one line of the campaign's index
  python3 - "$WORK/sglang_triton/index.jsonl" "$@" <<'PY'
import json, sys
path, prop, window, mechanism, case = sys.argv[1:]
fp = {"property": prop, "backend": "triton:sglang_triton", "planner": "triton", "executor": "sglang_triton",
      "release": "", "mode": "extend", "layer": {"kind": "sliding_window", "window": int(window), "chunk": 0},
      "mechanism": mechanism, "variant": "",
      "context": {"page_size": 1, "topk": 1, "hybrid": False, "graph": False, "deterministic": False,
                  "pool_elements": 4096, "head_dim": 8, "v_head_dim": 8}}
fp["key"] = f"{prop}/triton:sglang_triton/extend/sliding_window: {mechanism}"
with open(path, "a") as f:
    f.write(json.dumps({"key": fp["key"], "fingerprint": fp, "case_index": int(case), "case_seed": 7,
                        "profile": "tiny", "count": 3, "message": "x", "saved": None, "replay": "kvfuzz ..."}) + "\n")
PY
}
finding cache-extent 0 extra-before 9
finding oracle 0 reads:extra-before 9
finding cache-extent 0 extra-before 11
KVFUZZ_GPU_VERSIONS="sglang=0.5.23" python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/known.out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "known findings only: exit $rc"
grep -Eq "^sglang_triton +512 +1019 +2.6 +41 s +213 s +2.1 +49% +16 +50% +2  cache-extent 2, oracle 1$" "$WORK/known.out" ||
  fail "row: $(grep '^sglang_triton' "$WORK/known.out")"
# The breakdown: shares of the job time (200 s x 4 jobs) and the host's CPU busy.
grep -Eq "^sglang_triton +800.0 s +10% +5% +1% +2% +1% +50% +31% +52%$" "$WORK/known.out" ||
  fail "breakdown: $(grep -A1 'kvfuzz rest' "$WORK/known.out")"
grep -Eq "kvfuzz rest +host CPU$" "$WORK/known.out" || fail "no host CPU column"
: >"$WORK/sglang_triton.cpu"  # no time between the samples: "-", not a failure
KVFUZZ_GPU_VERSIONS="sglang=0.5.23" python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/nocpu.out" 2>&1
grep -Eq "^sglang_triton +800.0 s .* +31% +-$" "$WORK/nocpu.out" || fail "an empty host CPU sample is not shown as -"

# The same window-0 configuration, another mechanism (the window's oldest key missing): NEW.
finding oracle 0 reads:missing-oldest 12
KVFUZZ_GPU_VERSIONS="sglang=0.5.23" python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/new.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a NEW finding: exit $rc, expected 1"
grep -q "2 + 1 NEW" "$WORK/new.out" || fail "the NEW finding is not counted"
# KVFUZZ_GPU_ISSUES adds known-issue lists (ci/gpu_mla_pairs.sh: sglang's): the same finding known in one.
echo '{"issues": [{"id": "extra-list", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "sglang", "first": "0.5.10.post1", "fixed": null}, "match": {"property": "oracle", "backend": "triton:sglang_triton", "mechanisms": ["missing-oldest"]}}]}' >"$WORK/extra.json"
KVFUZZ_GPU_ISSUES="$WORK/extra.json" KVFUZZ_GPU_VERSIONS="sglang=0.5.23" python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton \
  >"$WORK/extra.out" 2>&1 || fail "the NEW finding known in KVFUZZ_GPU_ISSUES' list: exit $?, expected 0"
grep -Eq " 3  cache-extent 2, oracle 2$" "$WORK/extra.out" || fail "KVFUZZ_GPU_ISSUES row: $(grep '^sglang_triton' "$WORK/extra.out")"

# A saved finding without its fingerprint record: triage cannot read it, the table fails.
head -n 3 "$WORK/sglang_triton/index.jsonl" >"$WORK/sglang_triton/index.tmp" && mv "$WORK/sglang_triton/index.tmp" "$WORK/sglang_triton/index.jsonl"
echo '{"version": 2}' >"$WORK/sglang_triton/oracle-triton-sglang_triton-9-abcdef.json"
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/unreadable.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "an unreadable finding: exit $rc, expected 1"
grep -q "triage exited 3" "$WORK/unreadable.out" || fail "an unreadable finding is not reported as such"
# A saved finding with its record but without its report (.txt): the same.
echo '{"fingerprints": []}' >"$WORK/sglang_triton/oracle-triton-sglang_triton-9-abcdef.finding.json"
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/notxt.out" 2>&1
[ $? -eq 1 ] && grep -q "triage exited 3" "$WORK/notxt.out" || fail "a saved finding without its .txt is not an error"
rm "$WORK/sglang_triton/oracle-triton-sglang_triton-9-abcdef."*

# One kvfuzz process a GPU (ci/gpu.sh): the shards' logs one after the other add up (checked,
# jobs, batches, times), the wall time is the longest, first 100 the soonest shard's. Two shards,
# the second 150 s long and first to 100 at 30 s: 1024 checked in 200 s (5.1/s), 8 jobs.
cp "$WORK/sglang_triton.log" "$WORK/one.log"
sed -e 's/in 200.0 s (7.7/in 150.0 s (10.2/' -e 's/cases: 41.3 s/cases: 30.0 s/' "$WORK/one.log" >>"$WORK/sglang_triton.log"
echo 0.517 >"$WORK/sglang_triton.cpu"
KVFUZZ_GPU_VERSIONS="sglang=0.5.23" python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/shards.out" 2>&1
grep -Eq "^sglang_triton +1024 +2038 +5.1 +30 s +213 s +2.1 +49% +16 +50% " "$WORK/shards.out" ||
  fail "shards' row: $(grep '^sglang_triton' "$WORK/shards.out")"
# job time 200 s x 8 jobs; the parts doubled: the same shares as one shard's
grep -Eq "^sglang_triton +1600.0 s +10% +5% +1% +2% +1% +50% +31% +52%$" "$WORK/shards.out" ||
  fail "shards' breakdown: $(grep -A1 'kvfuzz rest' "$WORK/shards.out")"
cp "$WORK/one.log" "$WORK/sglang_triton.log"

echo 2 >"$WORK/sglang_triton.rc"
echo "kvfuzz: --adapter: no such file" >>"$WORK/sglang_triton.log"
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/failed.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a failed campaign: exit $rc, expected 1"
grep -q "kvfuzz exited 2: kvfuzz: --adapter: no such file" "$WORK/failed.out" || fail "a failed campaign's last line"

[ $failures -eq 0 ] && echo "gpu_table test: all passed" || { cat "$WORK"/*.out; exit 1; }
