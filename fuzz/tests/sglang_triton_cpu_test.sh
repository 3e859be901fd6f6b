#!/usr/bin/env bash
# sglang's real Triton kernels (adapters/gpu/sglang_triton.py) in Triton's interpreter on the CPU
# (TRITON_INTERPRET=1), for each release whose kernel files are here: every property passes on seven
# generated tiny cases (fp16 and fp32: the interpreter has no bf16 tl.dot) that between them run
# decode (split KV, GQA, CUDA-graph rows), extend, mixed, draft extend and target verify (custom
# mask), windows, softcap and page sizes 1 to 8; and the minimal W = 0 window case, in fp16, is
# caught reading the key its window excludes (sglang-triton-window0, a known convention difference:
# the kernel's output reaches the properties). A wrong argument in the adapter's calls (a scale, a
# window, a mask offset) fails it. ctest reports it skipped without a Python that imports torch and
# triton (KVFUZZ_TORCH_PYTHON, python3, or ci/sglang.sh's .sglang/venv) or without any release's
# kernel files: .gpu/sglang/RELEASE (ci/gpu.sh unpacks ci/gpu_wheels.py's archives there) or
# .sglang/RELEASE (ci/sglang.sh).
# Usage: sglang_triton_cpu_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
# tiny seed:mode; about 20 s a release on 2 cores. 195: fp32, GQA 4:1, softcap, page size 7, a
# CUDA-graph row, 4 splits; 252: fp16, window 18 + full; 9: fp32, softcap, 15 splits, graph rows; 235:
# fp16, window 11, GQA (window_kv_offsets); 40: fp16, window 6, GQA; 12: fp16, GQA; 8: fp32, window + full.
SEEDS="195:decode 252:decode 9:target_verify 235:target_verify 40:extend 12:mixed 8:draft_extend_v2"
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

py=""
for p in ${KVFUZZ_TORCH_PYTHON:-} python3 "$SRC/.sglang/venv/bin/python"; do
  if "$p" -c 'import numpy, torch, triton' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "SKIPPED: no Python with torch and triton (KVFUZZ_TORCH_PYTHON)"; exit 0; }

check() {  # check SEED: every property on the seed's case, its output and exit status beside it
  "$K" check "$out/$1.json" --backend sglang_triton --adapter "$adapter" >"$out/$1.out" 2>&1
  echo $? >"$out/$1.rc"
}

ran=0
for release in 0.5.23 0.5.10.post1; do
  site=""
  for s in "$SRC/.gpu/sglang/$release" "$SRC/.sglang/$release"; do
    [ -d "$s/sglang" ] && { site=$s; break; }
  done
  [ -n "$site" ] || { echo "sglang $release: no kernel files here, not run"; continue; }
  ran=$((ran + 1))
  adapter="TRITON_INTERPRET=1 SGLANG_SITE=$site $py $SRC/adapters/gpu/sglang_triton.py"
  out=$WORK/$release && mkdir -p "$out"
  for entry in $SEEDS; do  # two at a time
    seed=${entry%%:*} mode=${entry#*:}
    "$K" gen --seed "$seed" --profile tiny >"$out/$seed.json" || fail "gen --seed $seed exited $?"
    grep -q "\"mode\": \"$mode\"" "$out/$seed.json" || fail "tiny seed $seed is no longer a $mode case"
    [ "$(jobs -r | wc -l)" -lt 2 ] || wait -n
    check "$seed" &
  done
  wait
  for entry in $SEEDS; do
    seed=${entry%%:*}
    { [ "$(cat "$out/$seed.rc")" = 0 ] && grep -q "ok (every property)" "$out/$seed.out"; } ||
      { fail "sglang $release: tiny seed $seed (exit $(cat "$out/$seed.rc"))"; tail -12 "$out/$seed.out"; }
  done

  sed 's/"bf16"/"fp16"/' "$SRC/corpus/gpu/sglang_triton_window0.json" >"$WORK/window0.json"
  "$K" check "$WORK/window0.json" --backend sglang_triton --adapter "$adapter" >"$out.window0" 2>&1
  rc=$?
  { [ $rc = 1 ] && grep -q "extra  *0$" "$out.window0"; } ||
    { fail "sglang $release: the W = 0 case (exit $rc) is not caught reading key 0"; tail -10 "$out.window0"; }
done
[ $ran -gt 0 ] || { echo "SKIPPED: no sglang kernel files (.gpu/sglang/RELEASE or .sglang/RELEASE)"; exit 0; }
[ $failures = 0 ] && echo "sglang_triton on the CPU: ok"
exit $((failures > 0))
