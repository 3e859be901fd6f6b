#!/usr/bin/env bash
# The committed reproducers (corpus/gpu/repro/, docs/repro.md) on a CUDA machine: FlashInfer's
# masked paged prefill through its wrapper (with and without the proposed fix), sglang's Triton
# extend kernel as compiled for this GPU (the window-0 convention, sglang#39287's Triton half, the
# sm90 narrow-V bug), and flex attention over the long case's 2^31-element pool. Each run's exit
# status against the expected one, its output in OUT (ci/repro.sh reports quotes them with
# GPU_OUTPUTS=OUT). Offline: the pinned packages from .gpu/wheels, installed as ci/gpu.sh does
# (python3 ci/gpu_wheels.py fetches them elsewhere). No kvfuzz build needed. About 3 to 6 minutes
# (FlashInfer's first JIT build of its masked prefill kernel is most of it). sglang's own
# TritonAttnBackend with its kernels on the GPU (the production pair, corpus/sglang/repro/) runs
# where the release's whole source is at .sglang/0.5.23 (ci/sglang.sh; 131 MB), else is skipped.
#   OUT=/tmp/repro bash ci/gpu_repro.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${OUT:-findings-repro}")
site=$PWD/.gpu/site
wheels=.gpu/wheels
mkdir -p "$out"
if [ ! -f "$site/flashinfer/__init__.py" ]; then
  mkdir -p "$site"
  python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
fi
for release in 0.5.23 0.5.10.post1; do
  [ -d ".gpu/sglang/$release" ] || python3 -m zipfile -e "$wheels/sglang_kernels-$release.zip" ".gpu/sglang/$release"
done
nvidia-smi -L >"$out/gpu.txt" 2>&1
fi_env="PYTHONPATH=$site FLASHINFER_WORKSPACE_BASE=$PWD/.gpu"
# file | label | needs | environment | arguments | expected exit status (ci/repro.sh's RUNS format)
flashinfer_runs="gpu/repro/flashinfer_page_mask_indptr|flashinfer 0.7.2.post1, GPU|$site|$fi_env||1
gpu/repro/flashinfer_page_mask_indptr|flashinfer 0.7.2.post1 with the proposed fix, GPU|$site|$fi_env|--apply-fix|0
gpu/repro/flashinfer_page_mask_indptr_crash|flashinfer 0.7.2.post1, GPU|$site|$fi_env||1
gpu/repro/flashinfer_page_mask_indptr_crash|flashinfer 0.7.2.post1 with the proposed fix, GPU|$site|$fi_env|--apply-fix|0"
kernel_runs="gpu/repro/sglang_triton_window0|sglang 0.5.23, GPU|.gpu/sglang/0.5.23||--site .gpu/sglang/0.5.23|1
gpu/repro/sglang_triton_window0|sglang 0.5.10.post1, GPU|.gpu/sglang/0.5.10.post1||--site .gpu/sglang/0.5.10.post1|1
gpu/repro/sglang_39287_triton|sglang 0.5.23, GPU|.gpu/sglang/0.5.23||--site .gpu/sglang/0.5.23|1
gpu/repro/sglang_39287_triton|sglang 0.5.10.post1, GPU|.gpu/sglang/0.5.10.post1||--site .gpu/sglang/0.5.10.post1|1
gpu/repro/triton_sm90_extend_narrow_v|sglang 0.5.23, GPU (Triton 3.6)|.gpu/sglang/0.5.23||--site .gpu/sglang/0.5.23|1
gpu/repro/triton_sm90_extend_narrow_v|sglang 0.5.10.post1, GPU (Triton 3.6)|.gpu/sglang/0.5.10.post1||--site .gpu/sglang/0.5.10.post1|1
sglang/repro/sglang_32087_triton_decode_window|sglang 0.5.23's TritonAttnBackend and kernels, GPU|.sglang/0.5.23||--site .sglang/0.5.23 --adapters adapters/sglang|1
sglang/repro/kvfuzz_triton_no_local|sglang 0.5.23's TritonAttnBackend and kernels, GPU|.sglang/0.5.23||--site .sglang/0.5.23 --adapters adapters/sglang|1
sglang/repro/sglang_39287_triton_backend|sglang 0.5.23's TritonAttnBackend and kernels, GPU|.sglang/0.5.23||--site .sglang/0.5.23 --adapters adapters/sglang|1
gpu/repro/pytorch_flex_int32_offsets|torch $(python3 -c "import torch; print(torch.__version__)" 2>/dev/null), GPU|.|PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True||1"
# two streams at once (FlashInfer's JIT build takes the longest); each run in its own process
PY=python3 REPRO_TIMEOUT=300 REPRO_RUNS=$flashinfer_runs bash ci/repro.sh run "$out/flashinfer" >"$out/flashinfer.txt" 2>&1 &
PY=python3 REPRO_TIMEOUT=300 REPRO_RUNS=$kernel_runs bash ci/repro.sh run "$out/kernels" >"$out/kernels.txt" 2>&1
wait
cat "$out/gpu.txt" "$out/flashinfer.txt" "$out/kernels.txt"
