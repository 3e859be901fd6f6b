#!/usr/bin/env bash
# sglang's real Triton kernels (adapters/gpu/sglang_triton.py) in Triton's interpreter on the CPU
# (TRITON_INTERPRET=1), for each release whose kernel files are here (0.5.23, 0.5.10.post1):
#  - every property passes on seven generated tiny cases (fp16 and fp32: the interpreter has no bf16
#    tl.dot) that between them run decode (split KV, GQA, CUDA-graph rows), extend, mixed, draft
#    extend and target verify (custom mask), windows, softcap and page sizes 1 to 8;
#  - corpus/gpu/sglang_triton_mha_decode_fp16_logits.json exceeds the oracle's bound in 0.5.10.post1
#    (stage 1 sums q * k in fp16) and passes in 0.5.23 (in fp32): the release asked for is the one run;
#  - corpus/gpu/sglang_triton_window0.json, in fp16, is caught reading the key its window excludes
#    (the known convention difference sglang-triton-window0).
# A wrong argument in the adapter's calls (a 5% scale, no window, zero window_kv_offsets) fails it.
# ctest reports it skipped without a Python that imports torch and triton (KVFUZZ_TORCH_PYTHON,
# python3, or ci/sglang.sh's .sglang/venv) or without any release's kernel files: .gpu/sglang/RELEASE
# (ci/gpu.sh unpacks ci/gpu_wheels.py's archives there) or .sglang/RELEASE (ci/sglang.sh).
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

check() {  # check NAME CASE: every property on the case, its output and exit status in $out/NAME.*
  "$K" check "$2" --backend sglang_triton --adapter "$adapter" >"$out/$1.out" 2>&1
  echo $? >"$out/$1.rc"
}
spawn() {  # check in the background, two at a time
  [ "$(jobs -r | wc -l)" -lt 2 ] || wait -n
  check "$@" &
}
expect() {  # expect NAME RC PATTERN WHAT: NAME exited RC and its output holds PATTERN, else fail WHAT
  { [ "$(cat "$out/$1.rc")" = "$2" ] && grep -q "$3" "$out/$1.out"; } ||
    { fail "sglang $release: $4 (exit $(cat "$out/$1.rc"))"; tail -12 "$out/$1.out"; }
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
  sed 's/"bf16"/"fp16"/' "$SRC/corpus/gpu/sglang_triton_window0.json" >"$out/window0.json"
  spawn window0 "$out/window0.json"
  spawn mha "$SRC/corpus/gpu/sglang_triton_mha_decode_fp16_logits.json"
  for entry in $SEEDS; do
    seed=${entry%%:*} mode=${entry#*:}
    "$K" gen --seed "$seed" --profile tiny >"$out/$seed.json" || fail "gen --seed $seed exited $?"
    grep -q "\"mode\": \"$mode\"" "$out/$seed.json" || fail "tiny seed $seed is no longer a $mode case"
    spawn "$seed" "$out/$seed.json"
  done
  wait
  for entry in $SEEDS; do
    expect "${entry%%:*}" 0 "ok (every property)" "tiny seed ${entry%%:*}"
  done
  expect window0 1 "extra  *0$" "the W = 0 case is not caught reading key 0"
  # MHA decode, fp16: 0.5.10.post1's stage 1 sums q * k in fp16, past the bound; 0.5.23 sums in fp32.
  case $release in
    0.5.10.post1) expect mha 1 "oracle: layer 0 (full)" "the fp16 MHA decode logits are not caught" ;;
    *) expect mha 0 "ok (every property)" "the fp16 MHA decode case" ;;
  esac
done
[ $ran -gt 0 ] || { echo "SKIPPED: no sglang kernel files (.gpu/sglang/RELEASE or .sglang/RELEASE)"; exit 0; }
[ $failures = 0 ] && echo "sglang_triton on the CPU: ok"
exit $((failures > 0))
