#!/usr/bin/env bash
# fp8 KV caches with per-tensor scales (model.layers[i].k_scale / v_scale, docs/cases.md) through
# the protocol: an executor gets the stored values and the scales, and must read stored * scale.
#  - cases of the fp8 profile are clean on the numpy executors of four families (page_table,
#    token_csr, paged_csr; mla on an MLA seed), which dequantize as a kernel does;
#  - numpy_page_table with the scales ignored (KVFUZZ_EXAMPLE_BREAK=kv_scale_ignored) or applied
#    twice (kv_scale_twice) is caught on every case (oracle findings), and the same planted bugs are
#    clean on the same cases without scales (so what is caught is the scale path);
#  - a scale that is not a 4-bit float32 is refused, naming the field (exit 2).
# Usage: fp8_scales_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
SEEDS="1 2 3"
cases=() plain=()
for seed in $SEEDS; do
  "$K" gen --seed "$seed" --profile fp8 >"$WORK/scaled$seed.json" || fail "gen --profile fp8 --seed $seed"
  grep -q '"k_scale"\|"v_scale"' "$WORK/scaled$seed.json" || fail "fp8 seed $seed has no scale"
  sed -E 's/, "[kv]_scale": [0-9.e-]+//g' "$WORK/scaled$seed.json" >"$WORK/plain$seed.json"
  cases+=("$WORK/scaled$seed.json") plain+=("$WORK/plain$seed.json")
done

# check NAME EXECUTOR BREAK CASES...: kvfuzz check of every case with the executor; exit in $rc
check() {
  local name=$1 ex=$2 variant=$3
  shift 3
  "$K" check "$@" --adapter "KVFUZZ_EXAMPLE_BREAK=$variant python3 $SRC/adapters/examples/$ex.py" --backend "$ex" \
    >"$WORK/$name.out" 2>&1
  rc=$?
}
n=$(echo $SEEDS | wc -w)
for ex in numpy_page_table numpy_token_csr numpy_paged_csr; do
  check "$ex" "$ex" "" "${cases[@]}"
  { [ "$rc" = 0 ] && [ "$(grep -c ": ok (every property)" "$WORK/$ex.out")" -ge "$n" ]; } ||
    { fail "$ex is not clean on the fp8 profile's scaled cases (exit $rc)"; tail -5 "$WORK/$ex.out"; }
done
# an MLA model (fp8 seed 15, a mixed batch): the latent's one scale, k_scale, read for K and for V (its prefix)
"$K" gen --seed 15 --profile fp8 >"$WORK/mla.json"
grep -q '"mla": true' "$WORK/mla.json" && grep -q '"k_scale"' "$WORK/mla.json" || fail "fp8 seed 15 is no scaled MLA case"
check numpy_mla numpy_mla "" "$WORK/mla.json"
{ [ "$rc" = 0 ] && grep -q ": ok (every property)" "$WORK/numpy_mla.out"; } ||
  { fail "numpy_mla is not clean on a scaled MLA case (exit $rc)"; tail -5 "$WORK/numpy_mla.out"; }
for variant in kv_scale_ignored kv_scale_twice; do
  check "$variant" numpy_page_table "$variant" "${cases[@]}"
  found=$(awk '/^== /{c=$2} /: oracle: /{print c}' "$WORK/$variant.out" | sort -u | wc -l)
  { [ "$rc" = 1 ] && [ "$found" = "$n" ]; } ||
    { fail "$variant was caught on $found of $n scaled cases (exit $rc)"; tail -5 "$WORK/$variant.out"; }
  check "$variant.plain" numpy_page_table "$variant" "${plain[@]}"
  [ "$rc" = 0 ] || { fail "$variant is a finding on the cases without scales (exit $rc)"; tail -5 "$WORK/$variant.plain.out"; }
done

sed -E '0,/"kind": "full"/s//"kind": "full", "k_scale": 0.1/' "$WORK/plain1.json" >"$WORK/bad.json"
"$K" check "$WORK/bad.json" --backend fa >"$WORK/bad.out" 2>&1
rc=$?
{ [ "$rc" = 2 ] && grep -q 'model.layers\[[0-9]*\].k_scale: expected a float32 value' "$WORK/bad.out"; } ||
  { fail "a k_scale of 0.1 was not refused naming the field (exit $rc)"; cat "$WORK/bad.out"; }

[ "$failures" = 0 ] && echo "fp8_scales_test: ok" || echo "fp8_scales_test: $failures failure(s)"
exit $((failures > 0))
