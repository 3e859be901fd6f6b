#!/usr/bin/env bash
# ci/gpu_table.py: a campaign's row (checked, unsupported, checked/s, share in the kernel from the
# log's own job count, findings by property), its saved findings triaged: known only -> exit 0, a
# NEW one -> exit 1, a campaign kvfuzz failed -> exit 1 with its last line.
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
finding (property/backend)            count  first case  saved as
cache-extent/triton:sglang_triton        27           9  /tmp/x.min.json
oracle/triton:sglang_triton              70           9  /tmp/y.min.json
adapter sglang_triton: 1677 requests, 0 crashes; 400.0 s inside the adapter's function
LOG
echo 1 >"$WORK/sglang_triton.rc"
finding() {  # finding PROPERTY WINDOW CASE
  cat >"$WORK/sglang_triton/$1-triton-sglang_triton-$3.json" <<JSON
{"version": 2, "model": {"layers": [{"kind": "sliding_window", "window": $2}]},
 "cache": {"page_size": 1, "swa_pages": 0}, "batch": {"mode": "extend", "graph_bs": 0}}
JSON
  printf 'case %s (seed 1): 1 requests\ntriton:sglang_triton: %s: something\n' "$3" "$1" \
    >"$WORK/sglang_triton/$1-triton-sglang_triton-$3.txt"
}
finding cache-extent 0 9
finding oracle 0 9
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/known.out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "known findings only: exit $rc"
grep -Eq "^sglang_triton +512 +1019 +2.6 +50% +2  cache-extent 27, oracle 70$" "$WORK/known.out" ||
  fail "row: $(grep '^sglang_triton' "$WORK/known.out")"

finding oracle 5 12
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/new.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a NEW finding: exit $rc, expected 1"
grep -q "2 + 1 NEW" "$WORK/new.out" || fail "the NEW finding is not counted"

echo 2 >"$WORK/sglang_triton.rc"
echo "kvfuzz: --adapter: no such file" >>"$WORK/sglang_triton.log"
python3 "$SRC/ci/gpu_table.py" "$WORK" sglang_triton >"$WORK/failed.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a failed campaign: exit $rc, expected 1"
grep -q "kvfuzz exited 2: kvfuzz: --adapter: no such file" "$WORK/failed.out" || fail "a failed campaign's last line"

[ $failures -eq 0 ] && echo "gpu_table test: all passed" || { cat "$WORK"/*.out; exit 1; }
