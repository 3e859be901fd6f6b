#!/usr/bin/env bash
# vLLM's FlashAttention fp8 path (vllm_planner.py --backend fa --kv-cache-dtype fp8): the impls built
# for an fp8 cache with each layer's k_scale / v_scale, the q/k/v_descale every kernel call is handed
# recorded into the plan (recorder.py, engine/page_table_plan.py) and consumed by kvfuzz's fa
# executor (backends/fa/fa_executor.cc). Planted in a copy of 0.33.0's flash_attn.py (:1295-1296):
#  - descale-swapped: k_descale from layer._v_scale and v_descale from layer._k_scale;
#  - descale-dropped: no k_descale (the kernel reads the fp8 keys unscaled);
# both caught on corpus/vllm/fa_fp8_scales.json (metadata: the descale against the layer's scale;
# oracle: the values attended with it). The seed itself is clean on 0.33.0 in ci/vllm.sh seeds
# (vllm_seeds_test). ctest runs descale-swapped alone: one kvfuzz check, 5 s on 2 shared cores at
# load 5 (2026-11-28); both side by side 16 s at load 6.
# Usage: vllm_fa_fp8_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"
CASE=corpus/vllm/fa_fp8_scales.json
FILE=v1/attention/backends/flash_attn.py

# mutant NAME OLD NEW: flash_attn.py edited in a copy of the release (a tree of links, the file copied),
# checked in the background into $WORK/NAME.out
mutant() {
  local name=$1 site=$WORK/site-$1
  cp -rs "$(realpath "$SRC/.vllm/$NEWEST")" "$site" && rm "$site/vllm/$FILE" && cp "$SRC/.vllm/$NEWEST/vllm/$FILE" "$site/vllm/$FILE"
  replace "$site/vllm/$FILE" "$2" "$3" || return
  "$K" check "$CASE" --backend "vllm_fa_${NEWEST//./_}:fa" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend fa --kv-cache-dtype fp8" >"$WORK/$name.out" 2>&1 &
}
# ctest runs the first (MUTANTS="descale-swapped descale-dropped" runs both, side by side)
MUTANTS=${MUTANTS:-descale-swapped}
want() { [[ " $MUTANTS " == *" $1 "* ]]; }
want descale-swapped && mutant descale-swapped '        k_descale = layer._k_scale.expand(descale_shape)
        v_descale = layer._v_scale.expand(descale_shape)' '        k_descale = layer._v_scale.expand(descale_shape)
        v_descale = layer._k_scale.expand(descale_shape)'
want descale-dropped && mutant descale-dropped '        k_descale = layer._k_scale.expand(descale_shape)' '        k_descale = None'
wait
# caught: metadata names the descale against the layer's scale, and the oracle sees the values
expect() {
  local name=$1 pattern=$2
  if grep -q "finding(s)" "$WORK/$name.out" && grep -q -- "$pattern" "$WORK/$name.out" && grep -q ": oracle: " "$WORK/$name.out"; then
    echo "ok: $name is caught by $(basename "$CASE")"
  else fail "$name is not caught by $CASE"; tail -5 "$WORK/$name.out"; fi
}
want descale-swapped && expect descale-swapped "k_descale\[0\]\[0\] = 0.375000, the layer.s scale is 0.003906"
want descale-dropped && expect descale-dropped "k_descale\[0\]\[0\] = 1.000000, the layer.s scale is 0.003906"

[ "$failures" = 0 ] && echo "vllm_fa_fp8_test: ok" || echo "vllm_fa_fp8_test: $failures failure(s)"
exit $((failures > 0))
