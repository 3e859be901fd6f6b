#!/bin/bash
# Records the fingerprints of the GPU known issues' minimal cases (corpus/gpu/fingerprints.jsonl): each
# case through its executor with kvfuzz fingerprint, packages installed as ci/gpu.sh does.
#   OUT=/tmp/fp bash ci/gpu_corpus_fingerprints.sh && cp /tmp/fp/gpu_corpus.jsonl corpus/gpu/fingerprints.jsonl
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${OUT:-findings-gpu-corpus}"); mkdir -p "$OUT"; : >"$OUT/gpu_corpus.jsonl"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
site=$PWD/.gpu/site
[ -f "$site/flashinfer/__init__.py" ] || python3 -m pip install --quiet --no-index --no-deps --target "$site" .gpu/wheels/*.whl
[ -d .gpu/sglang/0.5.23 ] || python3 -m zipfile -e .gpu/wheels/sglang_kernels-0.5.23.zip .gpu/sglang/0.5.23
[ -x build/fuzz/kvfuzz ] || { KVFUZZ_GPU_SECONDS=1 KVFUZZ_GPU_ADAPTERS=cuda_page_table KVFUZZ_GPU_MEMCHECK_CASES=0 bash ci/gpu.sh > $OUT/build.log 2>&1; }
ad() { echo "PYTHONPATH=$site:$PWD/adapters FLASHINFER_WORKSPACE_BASE=$PWD/.gpu SGLANG_TRITON_RELEASE=0.5.23 python3 $PWD/adapters/gpu/$1.py"; }
fp() { timeout ${3:-150} build/fuzz/kvfuzz fingerprint "$2" --backend "$1" --adapter "$(ad $1)" --adapter-timeout 600 >> $OUT/gpu_corpus.jsonl 2>>$OUT/gpu_corpus.err; }
fp flex_page_table corpus/gpu/flex_long_int32_offsets.json 300 &
fp flashinfer_paged_csr corpus/gpu/flashinfer_mask_indptr_empty_row.json &
fp sglang_triton corpus/gpu/sglang_triton_window0.json &
fp sglang_triton corpus/gpu/sglang_triton_extend_narrow_v.json &
fp sglang_triton corpus/sglang/triton_verify_tree_window.json &
[ -d "${KVFUZZ_FA3:-/tmp/sgl_fa3}/sgl_kernel" ] && for c in corpus/gpu/fa3_paged_v_wider.json corpus/gpu/fa3_sinks_empty_row.json; do
  # FA3 unpacked as docs/gpu.md "Real FA3" says (KVFUZZ_FA3, default /tmp/sgl_fa3); else skipped
  timeout 150 build/fuzz/kvfuzz fingerprint "$c" --backend fa:fa3_page_table --adapter \
    "KVFUZZ_FA3=${KVFUZZ_FA3:-/tmp/sgl_fa3} python3 adapters/gpu/fa3_page_table.py" >>$OUT/gpu_corpus.jsonl 2>>$OUT/gpu_corpus.err &
done
wait
fp flashinfer_paged_csr corpus/gpu/flashinfer_mask_indptr_crash.json
echo "fingerprints done after $(( $(date +%s) - t0 )) s" >> $OUT/c.log
