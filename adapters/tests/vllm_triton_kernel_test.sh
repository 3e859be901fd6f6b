#!/usr/bin/env bash
# vLLM's own Triton attention kernel (adapters/gpu/vllm_triton.py) in Triton's interpreter on the
# CPU (TRITON_INTERPRET=1), fed by vLLM's own Triton metadata builder (adapters/vllm/vllm_planner.py
# --backend triton): vLLM's metadata and vLLM's kernel, end to end, with every property.
#  - corpus/vllm/triton_kernel_fp8_scales.json (triton_kernel_verify_swa.json, which is
#    verify_chain_swa.json at head size 32, the smallest vLLM's Triton backend takes: a verify chain
#    under a FULL CUDA graph, a sliding layer in the SWA pool past its window, an fp8 cache; with
#    per-layer k_scale / v_scale, 2^-8 among them, where the largest values saturate) is clean on
#    the newest release and on 0.11.0, whose kernel lives in vllm/attention/ops/ and dequantizes
#    every fp8 tile (0.33.0's only with the kv_quant_mode FP8_PER_TENSOR the adapter passes);
#  - a copy of the newest release's kernel file whose window is one key wider
#    (the launch's `SLIDING_WINDOW=(2 + window_size[0] if window_size[0] >= 0 else 0)`; full layers
#    keep none) must be caught on it: the executor runs the kernel
#    it is pointed at (VLLM_SITE), so a kernel bug is a finding;
#  - and so must a copy whose `_cast_kv_tile` ignores the per-tensor scale (`data.to(tl.float32)`
#    without `* tl.load(tensor_scale)`): a kernel reading the stored fp8 values unscaled, on the
#    layers with a scale other than 1 (all three).
# About 25 s on 2 idle cores (the scale mutant runs beside the window mutant) (100 s on a loaded machine: the interpreter runs the kernel and the builder's slot mapping).
# ctest reports it skipped where the releases are not under .vllm/ (ci/vllm.sh install) or there
# is no .sglang/venv with torch and triton (ci/sglang.sh).
# Usage: vllm_triton_kernel_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
OLDER=0.11.0
export TRITON_INTERPRET=1
CASE=$SRC/corpus/vllm/triton_kernel_fp8_scales.json

check() {  # check NAME RELEASE KERNEL_SITE: planner of RELEASE, kernel from KERNEL_SITE; rc and output in WORK/NAME.*
  local name=vllm_triton_${2//./_}
  "$K" check "$CASE" --backend "$name:vllm_triton" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $SRC/.vllm/$2 --backend triton --name $name" \
    --adapter "VLLM_SITE=$3 $PY $SRC/adapters/gpu/vllm_triton.py" >"$WORK/$1.out" 2>&1
  echo $? >"$WORK/$1.rc"
}

# The mutant kernels: the newest release with one line of its kernel file changed.
mutant_site() {  # mutant_site DIR SED_EXPR CHECK_REGEX
  mkdir -p "$1" && cp -r "$SRC/.vllm/$NEWEST/." "$1/"
  local kernel=$1/vllm/v1/attention/ops/triton_unified_attention.py
  sed -i "$2" "$kernel"
  grep -q "$3" "$kernel" || fail "the mutant $(basename "$1") did not apply to $kernel"
}
mutant=$WORK/mutant-site
mutant_site "$mutant" 's/SLIDING_WINDOW=(1 + window_size\[0\])/SLIDING_WINDOW=(2 + window_size[0] if window_size[0] >= 0 else 0)/' \
  'SLIDING_WINDOW=(2 + window_size\[0\] if'
unscaled=$WORK/unscaled-site
mutant_site "$unscaled" 's/return (data.to(tl.float32) \* tl.load(tensor_scale)).to(Q.dtype)/return data.to(tl.float32).to(Q.dtype)/' \
  'return data.to(tl.float32).to(Q.dtype)'

check newest $NEWEST "$SRC/.vllm/$NEWEST" &
check older $OLDER "$SRC/.vllm/$OLDER" &
wait
check mutant $NEWEST "$mutant" &
check unscaled $NEWEST "$unscaled" &
wait

for name in newest older; do
  { [ "$(cat "$WORK/$name.rc")" = 0 ] && grep -q ": ok (every property)" "$WORK/$name.out"; } ||
    { fail "$name: vLLM's builder and kernel are not clean on $(basename "$CASE") (exit $(cat "$WORK/$name.rc"))"; tail -8 "$WORK/$name.out"; }
done
{ [ "$(cat "$WORK/mutant.rc")" = 1 ] && grep -q "layer 2 (sliding_window)" "$WORK/mutant.out" && ! grep -q "layer [01] (full)" "$WORK/mutant.out"; } ||
  { fail "a kernel whose window is one key wider was not caught (exit $(cat "$WORK/mutant.rc"))"; tail -8 "$WORK/mutant.out"; }
{ [ "$(cat "$WORK/unscaled.rc")" = 1 ] && grep -q "oracle: layer 0 (full)" "$WORK/unscaled.out"; } ||
  { fail "a kernel that ignores the fp8 scales was not caught (exit $(cat "$WORK/unscaled.rc"))"; tail -8 "$WORK/unscaled.out"; }
grep -h "vllm_triton" "$WORK"/*.out | head -8
[ "$failures" = 0 ] && echo "vllm_triton_kernel_test: ok" || echo "vllm_triton_kernel_test: $failures failure(s)"
exit $((failures > 0))
