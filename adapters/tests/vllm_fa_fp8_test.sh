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
# attended with it). The same planted bugs with the GPU executors that hand the plan's descales to the
# real kernels (adapters/gpu/fa3_page_table.py, FA3's k/v_descale; flashinfer_paged_csr.py, FlashInfer's
# run(k_scale, v_scale)), on the CPU through FA3's stand-in and KVFLASHINFER_EMULATE=1:
#  - fa3-descale-swapped: fa-descale-swapped's vLLM with fa3_page_table: caught (metadata and oracle);
#  - fa3-descales-ignored: the same with a copy of fa3_page_table.py that hands FA3 the layer's scales
#    instead of the plan's: the metadata finding only, no oracle one (what fa3-descale-swapped's oracle
#    check tells apart: an executor ignoring the descales hides the planner's bug from the oracle);
#  - flashinfer-csr-scale-swapped (not run by ctest): flashinfer-scale-swapped's vLLM with
#    flashinfer_paged_csr.py, caught.
# ctest gpu_descales_test runs the two fa3 ones. fa_fp8_scales.json is clean on 0.33.0 in ci/vllm.sh seeds (vllm_seeds_test); the
# FlashInfer seeds are checked by hand (docs/vllm.md: a FlashInfer check takes 9 to 12 s here).
# ctest runs fa-descale-swapped alone (5 s on 2 shared cores at load 2 to 4, 2026-11-28); the others:
#   MUTANTS="fa-descale-dropped flashinfer-scale-swapped" bash adapters/tests/vllm_fa_fp8_test.sh $PWD build/fuzz/kvfuzz /tmp/fp8-test
# Usage: vllm_fa_fp8_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"
MUTANTS=${MUTANTS:-fa-descale-swapped}
want() { [[ " $MUTANTS " == *" $1 "* ]]; }

# mutant NAME BACKEND FAMILY FILE CASE OLD NEW [EXECUTOR ADAPTER]: FILE (under vllm/v1/attention/backends/)
# edited in a copy of the release (links to everything but the folders on the file's path, and the file
# copied), CASE checked in the background into $WORK/NAME.out, by kvfuzz's FAMILY executor or by the
# external EXECUTOR (its adapter command ADAPTER)
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
  "$K" check "$case" --backend "vllm_${backend}_${NEWEST//./_}:${8:-$family}" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend $backend --kv-cache-dtype fp8" \
    ${9:+--adapter "$9"} >"$WORK/$name.out" 2>&1 &
}
FA_CASE=corpus/vllm/fa_fp8_scales.json FI_CASE=corpus/vllm/flashinfer_fp8_mixed_swa.json
FA_SWAP=('        k_descale = layer._k_scale.expand(descale_shape)
        v_descale = layer._v_scale.expand(descale_shape)' '        k_descale = layer._v_scale.expand(descale_shape)
        v_descale = layer._k_scale.expand(descale_shape)')
FI_SWAP=('                        k_scale=layer._k_scale_float,
                        v_scale=layer._v_scale_float,
                        out=out_decode,' '                        k_scale=layer._v_scale_float,
                        v_scale=layer._k_scale_float,
                        out=out_decode,')
want fa-descale-swapped && mutant fa-descale-swapped fa fa flash_attn.py $FA_CASE "${FA_SWAP[@]}"
if want fa3-descale-swapped || want fa3-descales-ignored; then  # FA3's stand-in as sgl_kernel, tensors on the host
  . "$SRC/adapters/repro/standins.sh" && standin_library "$WORK/fa3" fa3 || fail "the FA3 stand-in's library"
  GPU_ENV="KVFUZZ_FA3=$WORK/fa3 TRITON_INTERPRET=1 KVFLASHINFER_EMULATE=1"
fi
want fa3-descale-swapped && mutant fa3-descale-swapped fa fa flash_attn.py $FA_CASE "${FA_SWAP[@]}" \
  fa3_page_table "$GPU_ENV $PY $SRC/adapters/gpu/fa3_page_table.py"
if want fa3-descales-ignored; then  # the executor's copy, in a copy of adapters/, ignoring the plan's descales
  cp -r "$SRC/adapters" "$WORK/adapters"
  replace "$WORK/adapters/gpu/fa3_page_table.py" '    d = case.descales(layer, part)' '    d = None' &&
    mutant fa3-descales-ignored fa fa flash_attn.py $FA_CASE "${FA_SWAP[@]}" \
      fa3_page_table "$GPU_ENV $PY $WORK/adapters/gpu/fa3_page_table.py"
fi
want fa-descale-dropped && mutant fa-descale-dropped fa fa flash_attn.py $FA_CASE \
  '        k_descale = layer._k_scale.expand(descale_shape)' '        k_descale = None'
want flashinfer-scale-swapped && mutant flashinfer-scale-swapped flashinfer flashinfer_paged flashinfer.py $FI_CASE \
  "${FI_SWAP[@]}"
want flashinfer-csr-scale-swapped && mutant flashinfer-csr-scale-swapped flashinfer flashinfer_paged flashinfer.py \
  $FI_CASE "${FI_SWAP[@]}" flashinfer_paged_csr "KVFLASHINFER_EMULATE=1 $PY $SRC/adapters/gpu/flashinfer_paged_csr.py"
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
expect fa3-descale-swapped $FA_CASE "layer 0: call vllm.full.0 is handed k_descale\[0\]\[0\] = 0.375000, the layer.s scale is 0.003906"
expect flashinfer-csr-scale-swapped $FI_CASE "layer 0: call flashinfer.0 is handed k_descale\[0\]\[0\] = 0.003906, the layer.s scale is 0.375000"
if want fa3-descales-ignored; then  # the metadata finding, and no oracle one
  if grep -q "is handed k_descale\[0\]\[0\] = 0.375000" "$WORK/fa3-descales-ignored.out" &&
    ! grep -q ": oracle: " "$WORK/fa3-descales-ignored.out"; then
    echo "ok: fa3-descales-ignored gives the metadata finding and no oracle one"
  else fail "fa3-descales-ignored: expected the metadata finding and no oracle finding"; tail -5 "$WORK/fa3-descales-ignored.out"; fi
fi

[ "$failures" = 0 ] && echo "vllm_fa_fp8_test: ok" || echo "vllm_fa_fp8_test: $failures failure(s)"
exit $((failures > 0))
