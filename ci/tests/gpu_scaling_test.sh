#!/usr/bin/env bash
# ci/gpu_scaling.py and ci/gpu_scaling.sh: the table of one GPU, every GPU from one process and a
# process a GPU, from the runs' logs (synthetic here: the GPU runs are ci/gpu_scaling.sh's): rates,
# ratios to one GPU, the better run over the GPUs, the target met or missed; a run missing or failed
# shows "-" with its reason and exits 1; ci/gpu_scaling.sh with fewer than two GPUs or a bad fill: exit 2.
# Usage: gpu_scaling_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"/{one,all,per_gpu}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# log RUN CHECKED SECONDS [SHARDS]: a campaign log of RUN for cuda_page_table (a log of SHARDS shards:
# their logs one after the other, ci/gpu.sh's per-GPU run)
log() {
  local run=$1 checked=$2 seconds=$3 shards=${4:-1} i
  for ((i = 0; i < shards; i++)); do
    printf 'kvfuzz run: seed 2, 1 backend(s), 256 job(s), 20 s\ncampaign: %s cases in %s s (1.0 cases/s)\n' "$checked" "$seconds"
    printf 'backend                  checked  unsupported\nfa:cuda_page_table   %s   0\n' "$checked"
  done >"$WORK/$run/cuda_page_table.log"
  echo 0 >"$WORK/$run/cuda_page_table.rc"
}
echo 4 >"$WORK/gpus"
log one 40000 20.0        # 2000/s
log all 100000 20.0       # 5000/s: 2.50x
log per_gpu 35000 20.0 4  # 4 shards of 35000 in 20 s: 7000/s, 3.50x, 1750 a GPU
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/met.out" 2>&1 || fail "every run read: exit $?, expected 0"
grep -Eq "^cuda_page_table +2000.0 +5000.0 +2.50x +7000.0 +3.50x +1750.0  3.4x: met$" "$WORK/met.out" ||
  fail "met row: $(grep '^cuda_page_table' "$WORK/met.out")"
log per_gpu 30000 20.0 4  # 6000/s: 3.00x, and the one process 2.50x: missed
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/missed.out" 2>&1
grep -Eq " 3.00x +1500.0  3.4x: missed$" "$WORK/missed.out" || fail "missed row: $(grep '^cuda_page_table' "$WORK/missed.out")"
# A failed run: "-", its last line under the table, exit 1; a missing one the same.
echo 2 >"$WORK/all/cuda_page_table.rc"
echo "kvfuzz: --adapter: no such file" >>"$WORK/all/cuda_page_table.log"
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/failed.out" 2>&1
rc=$?
[ $rc = 1 ] || fail "a failed run: exit $rc, expected 1"
grep -Eq "^cuda_page_table +2000.0 +- +- +6000.0 +3.00x" "$WORK/failed.out" || fail "failed row: $(grep '^cuda_page_table' "$WORK/failed.out")"
grep -q "all/cuda_page_table: kvfuzz exited 2: kvfuzz: --adapter: no such file" "$WORK/failed.out" || fail "the failed run's reason"
rm "$WORK/one/cuda_page_table.log"
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/missing.out" 2>&1
[ $? = 1 ] && grep -q "one/cuda_page_table: no log" "$WORK/missing.out" || fail "a missing run is not reported"
# Two GPUs: the 1.8x target.
log one 1000 10.0; log all 1900 10.0; log per_gpu 900 10.0 2
echo 2 >"$WORK/gpus"
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/two.out" 2>&1
grep -Eq "^cuda_page_table +100.0 +190.0 +1.90x +180.0 +1.80x +95.0  1.8x: met$" "$WORK/two.out" ||
  fail "two GPUs row: $(grep '^cuda_page_table' "$WORK/two.out")"
rm "$WORK/gpus"
python3 "$SRC/ci/gpu_scaling.py" "$WORK" cuda_page_table >"$WORK/nogpus.out" 2>&1
[ $? = 2 ] || fail "no GPU count: expected exit 2"

# ci/gpu_scaling.sh refuses a host of one GPU and a bad fill before it runs anything.
CUDA_VISIBLE_DEVICES=0 KVFUZZ_GPU_SCALING_OUT="$WORK/sh" bash "$SRC/ci/gpu_scaling.sh" >"$WORK/one_gpu.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "needs two visible GPUs or more, found 1" "$WORK/one_gpu.out"; } || fail "one GPU: exit $rc"
KVFUZZ_GPU_SCALING_FILL=soon bash "$SRC/ci/gpu_scaling.sh" >"$WORK/fill.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "KVFUZZ_GPU_SCALING_FILL must be whole seconds, not 'soon'" "$WORK/fill.out"; } || fail "bad fill: exit $rc"
[ ! -e "$WORK/sh" ] || fail "gpu_scaling.sh wrote its folder before refusing"

[ $failures -eq 0 ] && echo "gpu_scaling test: all passed" || { cat "$WORK"/*.out; exit 1; }
