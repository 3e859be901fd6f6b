#!/usr/bin/env bash
# The `long` profile end to end on a CPU machine, kept to one cheap seed (one layer, 2 x 128 KV
# heads, 131137 keys, a K pool of 2^31 + elements per layer): the same bytes for a seed, the numpy
# example executor passes every property that runs at that scale with the sparse exchange (the
# column probes are skipped, with a note), and kvfuzz-worker answers the sparse pools unsupported.
# Usage: long_profile_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR WORKER_BIN CPP_PAGE_TABLE_LIB
set -uo pipefail
K=$1 SRC=$2 WORK=$3 WORKER=$4 LIB=$5
SEED=7  # generate(7, long): fp32, one full layer, page size 64, three requests; about 20 s here
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$K" gen --seed $SEED --profile long >"$WORK/a.json" || fail "gen exited $?"
"$K" gen --seed $SEED --profile long >"$WORK/b.json" || fail "gen exited $?"
cmp -s "$WORK/a.json" "$WORK/b.json" || fail "gen --profile long is not deterministic"
grep -q '"page_size": 64' "$WORK/a.json" || fail "seed $SEED is no longer the cheap case this test expects"

"$K" check "$WORK/a.json" --backend numpy_page_table \
  --adapter "python3 $SRC/adapters/examples/numpy_page_table.py" >"$WORK/numpy.out" 2>&1
rc=$?
[ $rc = 0 ] || { fail "check with numpy_page_table exited $rc"; tail -20 "$WORK/numpy.out"; }
grep -q "extent not checked: [0-9]* probe sets needed" "$WORK/numpy.out" || fail "no extent-not-checked note"
grep -q "ok (every property)" "$WORK/numpy.out" || fail "numpy_page_table did not pass"

"$K" check "$WORK/a.json" --backend cpp_page_table --adapter "$WORKER $LIB" >"$WORK/worker.out" 2>&1
rc=$?
[ $rc = 0 ] || { fail "check with kvfuzz-worker exited $rc"; tail -20 "$WORK/worker.out"; }
grep -q "unsupported.*came sparse" "$WORK/worker.out" || { fail "kvfuzz-worker did not answer unsupported"; tail -5 "$WORK/worker.out"; }

[ $failures = 0 ] && echo "long profile: ok"
exit $((failures > 0))
