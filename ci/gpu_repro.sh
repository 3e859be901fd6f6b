#!/usr/bin/env bash
# The reproducers (docs/repro.md; generated from their committed cases by `bash ci/repro.sh generate`
# into build/repro, which the GPU call carries: `carry: ["build/repro"]`) on a CUDA machine: FlashInfer's
# masked paged prefill through its wrapper (with and without the proposed fix), sglang's Triton
# extend kernel as compiled for this GPU (the window-0 convention, sglang#39287's Triton half, the
# sm90 narrow-V bug), and flex attention over the long case's 2^31-element pool. Each run's exit
# status against the expected one, its output in OUT (ci/repro.sh reports quotes them with
# GPU_OUTPUTS=OUT). Offline: the pinned packages from .gpu/wheels, installed as ci/gpu.sh does
# (python3 ci/gpu_wheels.py fetches them elsewhere). No kvfuzz build needed. About 3 to 6 minutes
# (FlashInfer's JIT builds are most of it). sglang's own backends with their kernels on the GPU (the
# production pair, build/repro/sglang/repro/: TritonAttnBackend and FlashInferAttnBackend) run on each
# release's Python source, .gpu/wheels/sglang_src-RELEASE.tgz (ci/gpu_sglang_src.py packs it here; a
# run whose archive is missing is skipped); OUT/pair_table.md is then every run's row
# (ci/gpu_pair_table.py: exit, max error, keys read vs visible; corpus/sglang/README.md).
#   OUT=/tmp/repro bash ci/gpu_repro.sh          # GPU_REPRO_PARTS="pair fipair": only those streams;
#                                                # GPU_REPRO_ONLY=REGEX: only the runs whose line matches it
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${OUT:-findings-repro}")
site=$PWD/.gpu/site
wheels=.gpu/wheels
mkdir -p "$out"
if [ ! -f "$site/flashinfer/__init__.py" ] || [ ! -d "$site/msgspec" ]; then
  mkdir -p "$site"
  python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
fi
# FlashInfer's CUTLASS headers (ci/gpu_cutlass.py), where packed beside the slim wheel: then sglang's
# FlashInferAttnBackend runs its ragged wrapper on the backend it asks for, "auto" (the sm90 kernels on
# Hopper; adapters/repro/sglang_metadata.py says which FlashInfer resolved); without them on fa2.
if ls $wheels/flashinfer_cutlass-* >/dev/null 2>&1 && ! python3 ci/gpu_cutlass.py present "$site"; then
  python3 ci/gpu_cutlass.py install "$wheels" "$site" || exit 2
fi
for release in 0.5.23 0.5.10.post1; do
  [ -d ".gpu/sglang/$release" ] || [ ! -f "$wheels/sglang_kernels-$release.zip" ] ||
    python3 -m zipfile -e "$wheels/sglang_kernels-$release.zip" ".gpu/sglang/$release"
done
src=.gpu/sglang_src  # each release's Python source, for sglang's own backend (ci/gpu_sglang_src.py)
for archive in "$wheels"/sglang_src-*.tgz; do
  [ -f "$archive" ] || continue
  release=$(basename "$archive" .tgz) release=${release#sglang_src-}
  [ -d "$src/$release" ] || { mkdir -p "$src/$release.tmp" && tar -xzf "$archive" -C "$src/$release.tmp" &&
    mv "$src/$release.tmp" "$src/$release"; }
done
# A planted mutant of 0.5.23 (ci/plant.py): only fast_decode_plan reads what it changes, so the real
# FlashInfer's replay path is what can show it
mutated=$src/0.5.23+swa-schedule-unclamped
if [ -d "$src/0.5.23" ] && [ ! -d "$mutated" ]; then
  cp -r "$src/0.5.23" "$mutated.tmp" && python3 ci/plant.py --release swa-schedule-unclamped "$mutated.tmp" &&
    mv "$mutated.tmp" "$mutated"
fi
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
gpu/repro/pytorch_flex_int32_offsets|torch $(python3 -c "import torch; print(torch.__version__)" 2>/dev/null), GPU|.|PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True||1"
# The production pair: sglang's own backend class (its metadata code) calling its real kernels on
# this GPU, each known issue's minimal case on the release with the bug and with the fix. Triton:
# TritonAttnBackend / TritonMultiStepDraftBackend; FlashInfer: FlashInferAttnBackend with FlashInfer's
# own wrappers from the site (and its JIT workspace). msgspec, which 0.5.23's configuration classes
# need, comes from the site too.
pair() {  # kernels reproducer release expected [label suffix] [extra arguments] [extra environment]
  local env="PYTHONPATH=$site${7:+ $7}"
  [ "$1" = FlashInfer ] && env=$fi_env
  printf 'sglang/repro/%s|sglang %s%s, its %s backend and kernels, GPU|%s|%s|--site %s %s|%s\n' \
    "$2" "$3" "${5:-}" "$1" "$src/$3" "$env" "$src/$3" "${6:-}" "$4"
}
pair_runs="$(pair Triton sglang_32087_triton_decode_window 0.5.10.post1 1)
$(pair Triton sglang_32087_triton_decode_window 0.5.10.post1 0 ' with fix 32087' '--fix 32087')
$(pair Triton sglang_32087_triton_decode_window 0.5.23 1)
$(pair Triton kvfuzz_triton_no_local 0.5.23 1)
$(pair Triton sglang_39287_triton_backend 0.5.23 1)
$(pair Triton sglang_26651_triton_draft_extend_v2_graph 0.5.12.post1 1)
$(pair Triton sglang_26651_triton_draft_extend_v2_graph 0.5.13 0 ' (the fixed release)')
$(pair Triton kvfuzz_triton_draft_swa 0.5.23 1)
$(pair Triton kvfuzz_triton_draft_swa 0.5.13 1)"
fipair_runs="$(pair FlashInfer kvfuzz_flashinfer_ragged_window 0.5.23 1)
$(pair FlashInfer sglang_39287_flashinfer_backend 0.5.23 1)
$(pair FlashInfer sglang_31501_flashinfer_det_window 0.5.13 1 ' (deterministic)')
$(pair FlashInfer sglang_31501_flashinfer_det_window 0.5.10.post1 0 ' (deterministic) with fix 31501' '--fix 31501')
$(pair FlashInfer sglang_31501_flashinfer_det_window 0.5.23 0 ' (deterministic; the fixed release)')
$(pair FlashInfer sglang_22679_flashinfer_verify_swa 0.5.13 1 ' (TypeError)')
$(pair FlashInfer sglang_22679_flashinfer_verify_swa 0.5.23 1 ' (no TypeError; sglang#39287 reads the wrong keys)')
$(pair FlashInfer sglang_26513_flashinfer_swa_ragged 0.5.12.post1 1)
$(pair FlashInfer sglang_26513_flashinfer_swa_ragged 0.5.13 0 ' (the fixed release)')
$(pair FlashInfer sglang_39287_flashinfer_mask 0.5.23 1)
$(pair FlashInfer sglang_39287_flashinfer_mask 0.5.23 0 ' with fix 39287' '--fix 39287')
$(pair FlashInfer kvfuzz_flashinfer_swa_full_prefix 0.5.13 1)
$(pair FlashInfer kvfuzz_flashinfer_graph_decode_swa 0.5.23 0 ' (CUDA graph: FlashInfer'"'"'s fast_decode_plan at the replay)')
$(pair FlashInfer kvfuzz_flashinfer_graph_decode_swa 0.5.10.post1 0 ' (CUDA graph: FlashInfer'"'"'s fast_decode_plan at the replay)')
$(pair FlashInfer kvfuzz_flashinfer_graph_decode_swa 0.5.23+swa-schedule-unclamped 0 ' (a planted mutant: the window wrapper scheduled from unclamped lengths; right on the real kernel at these lengths, H200)')"
# sglang's FlashAttentionBackend, every FA known issue's minimal case (bf16, head dim 64: shapes FA3
# takes) on the release with the bug and with the fix, twice: FA3's plain-torch stand-in (stream fa)
# and FA3's real kernel (stream fa3: sgl-kernel 0.4.3's library, unpacked from its parts by
# ci/gpu_fa3.py into $fa3; the stream is skipped when it is not there). OUT/fa3_table.md: the two side by
# side (ci/gpu_fa3_table.py).
fa3=${KVFUZZ_FA3:-$PWD/.gpu-fa3/sgl_fa3}
unset KVFUZZ_FA3  # the stand-in's runs must not inherit it: only stream fa3's environment names it
fa_runs() {  # KERNEL [ENVIRONMENT]: the FA runs with that kernel (reproducer|release|expected|label suffix|arguments)
  local name release expect suffix args
  while IFS='|' read -r name release expect suffix args; do
    pair "$1" "$name" "$release" "$expect" "$suffix" "$args" "${2:-}"
  done <<'RUNS'
kvfuzz_fa_mixed_local|0.5.23|1||
kvfuzz_fa_mixed_local|0.5.23|0| with fix fa-extend-local|--fix fa-extend-local
kvfuzz_fa_draft_extend_local|0.5.23|1||
kvfuzz_fa_draft_extend_local|0.5.23|0| with fix fa-extend-local|--fix fa-extend-local
kvfuzz_fa_verify_local|0.5.23|1||
kvfuzz_fa_verify_local|0.5.23|0| with fix fa-verify-local|--fix fa-verify-local
kvfuzz_fa_draft_local|0.5.23|1||
kvfuzz_fa_draft_local|0.5.23|0| with fix fa-draft-local|--fix fa-draft-local
kvfuzz_fa_draft_swa_cascade|0.5.23|1||
kvfuzz_fa_draft_swa_cascade|0.5.23|0| with fix fa-draft-swa-cascade|--fix fa-draft-swa-cascade
sglang_32902_fa_local_token_table|0.5.13|1||
sglang_32902_fa_local_token_table|0.5.13|0| with fix 32902|--fix 32902
sglang_32902_fa_local_token_table|0.5.23|0| (the fixed release)|
sglang_24617_fa_swa_spec|0.5.11|1||
sglang_24617_fa_swa_spec|0.5.11|0| with fix 24617|--fix 24617
sglang_24617_fa_swa_spec|0.5.12.post1|0| (the fixed release)|
RUNS
}
fa_standin_runs=$(fa_runs "FA (FA3 stand-in)")
fa_real_runs=$(fa_runs "FA (real FA3)" "KVFUZZ_FA3=$fa3")
# Four streams at once (FlashInfer's JIT builds take the longest), each run in its own process;
# GPU_REPRO_PARTS picks some (default all: flashinfer kernels pair fipair).
parts=" ${GPU_REPRO_PARTS:-flashinfer kernels pair fipair fa fa3} "
if [[ "$parts" == *" fa3 "* ]] && [ ! -f "$fa3/sgl_kernel/flash_attn.py" ]; then
  echo "gpu_repro: no FA3 library at $fa3 (python3 ci/gpu_fa3.py unpack --to DIR ...; KVFUZZ_FA3=DIR): stream fa3 skipped" |
    tee "$out/fa3.txt"
  parts=${parts/ fa3 / }
fi
stream() {  # stream NAME RUNS TIMEOUT: ci/repro.sh's runs into OUT/NAME, its summary in OUT/NAME.txt
  [[ "$parts" == *" $1 "* ]] || return 0
  local runs=$2
  [ -z "${GPU_REPRO_ONLY:-}" ] || runs=$(grep -E -- "$GPU_REPRO_ONLY" <<<"$runs" || true)
  [ -n "$runs" ] || return 0
  PY=python3 REPRO_TIMEOUT=$3 REPRO_RUNS=$runs bash ci/repro.sh run "$out/$1" >"$out/$1.txt" 2>&1
}
stream flashinfer "$flashinfer_runs" 300 &
stream pair "$pair_runs" 240 &
stream fipair "$fipair_runs" 300 &
stream fa "$fa_standin_runs" 240 &
stream fa3 "$fa_real_runs" 240 &
stream kernels "$kernel_runs" 300
wait
cat "$out/gpu.txt" "$out"/{flashinfer,kernels,pair,fipair,fa,fa3}.txt 2>/dev/null
python3 ci/gpu_pair_table.py "$out" -o "$out/pair_table.md"
[ ! -d "$out/fa" ] || [ ! -d "$out/fa3" ] || python3 ci/gpu_fa3_table.py "$out/fa" "$out/fa3" -o "$out/fa3_table.md"
