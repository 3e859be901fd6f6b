#!/usr/bin/env bash
# FlashMLA (adapters/gpu/flashmla.py) through real campaigns on a GPU: a clean campaign checks cases
# and finds nothing; the planted bug KVFUZZ_FLASHMLA_BROKEN=drop_last_key is found as cache-extent.
# Without a CUDA device, torch, or FlashMLA's library unpacked (ci/gpu.sh unpacks it into
# .gpu/flashmla), it prints SKIPPED and ctest reports the test skipped, never passed.
#
#   flashmla_gpu_test.sh ROOT KVFUZZ
set -uo pipefail
root=$1 kvfuzz=$2
dir=${KVFUZZ_FLASHMLA_DIR:-$root/.gpu/flashmla}
site=$root/.gpu/site
if ! PYTHONPATH=$dir python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIPPED: no CUDA device (or no torch)"; exit 0
fi
[ -f "$dir/sgl_kernel/flash_mla.py" ] || { echo "SKIPPED: FlashMLA's library is not in $dir (ci/gpu.sh unpacks it)"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
campaign() {  # campaign NAME [ENV]: 40 medium cases (FlashMLA's pages of 64 come from medium up)
  "$kvfuzz" run --seed 5 --cases 40 --profile medium --jobs 4 --no-shrink --reuse-shapes 20 --shape-seed 1 \
    --backend flashmla --adapter "$2 KVFUZZ_FLASHMLA_DIR=$dir PYTHONPATH=$site python3 $root/adapters/gpu/flashmla.py" \
    --out "$out/$1" >"$out/$1.log" 2>&1
}
fail() { echo "FAIL: $1"; cat "$out/$2.log"; exit 1; }
campaign clean ""
rc=$?
[ $rc -eq 0 ] || fail "the clean campaign exited $rc, expected 0" clean
checked=$(awk '$1 == "mla:flashmla" {print $2}' "$out/clean.log")
[ "${checked:-0}" -gt 0 ] || fail "FlashMLA checked ${checked:-0} cases" clean
campaign broken KVFUZZ_FLASHMLA_BROKEN=drop_last_key
rc=$?
[ $rc -eq 1 ] || fail "the planted bug's campaign exited $rc, expected 1" broken
grep -q "^cache-extent/mla:flashmla/.*missing-newest" "$out/broken.log" || fail "no cache-extent missing-newest finding" broken
echo "flashmla: clean campaign checked $checked cases, no finding; drop_last_key found"
