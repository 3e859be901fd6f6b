#!/usr/bin/env bash
# vLLM's fp8 KV-cache paths on FlashAttention and FlashInfer (vllm_planner.py --kv-cache-dtype fp8):
# the impls built for an fp8 cache with each layer's k_scale / v_scale, the scales every kernel call
# is handed (FlashAttention's q/k/v_descale, FlashInfer's run(q_scale, k_scale, v_scale)) recorded
# into the plan's descales (engine/descales.py) and consumed by kvfuzz's executors
# (backends/descales.h). Planted in a copy of vLLM 0.33.0:
#  - fa-descale-swapped: flash_attn.py:1295-1296 builds k_descale from layer._v_scale and v_descale
#    from layer._k_scale, caught on corpus/vllm/fa_fp8_scales.json;
#  - fa-descale-dropped (not run by ctest): no k_descale (the kernel reads the fp8 keys unscaled);
#  - flashinfer-scale-swapped: flashinfer.py:2639-2640 (the decode wrapper's run) hands k_scale the
#    layer's _v_scale_float and v_scale its _k_scale_float, caught on
#    corpus/vllm/flashinfer_fp8_mixed_swa.json;
# each as a metadata finding (the descale against the layer's scale) and an oracle one (the values
# attended with it). fa_fp8_scales.json is clean on 0.33.0 in ci/vllm.sh seeds (vllm_seeds_test); the
# FlashInfer seeds are checked by hand (docs/vllm.md: a FlashInfer check takes 9 to 12 s here).
# ctest runs fa-descale-swapped alone (5 s on 2 shared cores at load 2 to 4, 2026-11-28); the others:
#   MUTANTS="fa-descale-dropped flashinfer-scale-swapped" bash adapters/tests/vllm_fa_fp8_test.sh $PWD build/fuzz/kvfuzz /tmp/fp8-test
# Usage: vllm_fa_fp8_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"
MUTANTS=${MUTANTS:-fa-descale-swapped}
want() { [[ " $MUTANTS " == *" $1 "* ]]; }

# mutant NAME BACKEND FAMILY FILE CASE OLD NEW: FILE (under vllm/v1/attention/backends/) edited in a copy
# of the release (links to everything but the folders on the file's path, and the file copied), CASE
# checked in the background into $WORK/NAME.out
mutant() {
  local name=$1 backend=$2 family=$3 file=vllm/v1/attention/backends/$4 case=$5 site=$WORK/site-$1
  local from dir=""
  from=$(realpath "$SRC/.vllm/$NEWEST")
  mkdir -p "$site"
  for part in $(dirname "$file" | tr / ' '); do  # each folder on the way: a real one of links
    for entry in "$from/$dir"*; do [ "$(basename "$entry")" = "$part" ] || ln -s "$entry" "$site/$dir"; done
    dir=$dir$part/
    mkdir -p "$site/$dir"
  done
  # (not the file's compiled copies: Python writes the edited file's own under the copy)
  for entry in "$from/$dir"*; do
    [ "$entry" = "$from/$file" ] || [ "$(basename "$entry")" = __pycache__ ] || ln -s "$entry" "$site/$dir"
  done
  cp "$from/$file" "$site/$file"
  replace "$site/$file" "$6" "$7" || return
  "$K" check "$case" --backend "vllm_${backend}_${NEWEST//./_}:$family" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend $backend --kv-cache-dtype fp8" \
    >"$WORK/$name.out" 2>&1 &
}
FA_CASE=corpus/vllm/fa_fp8_scales.json FI_CASE=corpus/vllm/flashinfer_fp8_mixed_swa.json
want fa-descale-swapped && mutant fa-descale-swapped fa fa flash_attn.py $FA_CASE \
  '        k_descale = layer._k_scale.expand(descale_shape)
        v_descale = layer._v_scale.expand(descale_shape)' '        k_descale = layer._v_scale.expand(descale_shape)
        v_descale = layer._k_scale.expand(descale_shape)'
want fa-descale-dropped && mutant fa-descale-dropped fa fa flash_attn.py $FA_CASE \
  '        k_descale = layer._k_scale.expand(descale_shape)' '        k_descale = None'
want flashinfer-scale-swapped && mutant flashinfer-scale-swapped flashinfer flashinfer_paged flashinfer.py $FI_CASE \
  '                        k_scale=layer._k_scale_float,
                        v_scale=layer._v_scale_float,
                        out=out_decode,' '                        k_scale=layer._v_scale_float,
                        v_scale=layer._k_scale_float,
                        out=out_decode,'
wait
# caught: metadata names the descale against the layer's scale (layer 0: k_scale 2^-8, v_scale 0.375),
# and the oracle sees the values
expect() {
  local name=$1 case=$2 pattern=$3
  want "$name" || return 0
  if grep -q "finding(s)" "$WORK/$name.out" && grep -q -- "$pattern" "$WORK/$name.out" && grep -q ": oracle: " "$WORK/$name.out"; then
    echo "ok: $name is caught by $(basename "$case")"
  else fail "$name is not caught by $case"; tail -5 "$WORK/$name.out"; fi
}
expect fa-descale-swapped $FA_CASE "layer 0: call vllm.full.0 is handed k_descale\[0\]\[0\] = 0.375000, the layer.s scale is 0.003906"
expect fa-descale-dropped $FA_CASE "layer 0: call vllm.full.0 is handed k_descale\[0\]\[0\] = 1.000000, the layer.s scale is 0.003906"
expect flashinfer-scale-swapped $FI_CASE "layer 0: call flashinfer.0 is handed k_descale\[0\]\[0\] = 0.003906, the layer.s scale is 0.375000"

[ "$failures" = 0 ] && echo "vllm_fa_fp8_test: ok" || echo "vllm_fa_fp8_test: $failures failure(s)"
exit $((failures > 0))
