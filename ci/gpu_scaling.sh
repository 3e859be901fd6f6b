#!/usr/bin/env bash
# Every GPU of the host, measured in one call: for each executor, ci/gpu.sh's campaign on one GPU
# (the first visible one, on its share of the cores: what a host of one GPU would give it), on every
# GPU from one kvfuzz process, and on every GPU with a kvfuzz process a GPU (KVFUZZ_GPU_PER_GPU=1),
# after a fill of the compile caches on every GPU; then one table (ci/gpu_scaling.py): the rates, the
# ratios to one GPU, the rate a GPU and the target (1.8x on 2 GPUs, 3.4x on 4).
#   KVFUZZ_GPU_SECONDS        each measured campaign (default 20)
#   KVFUZZ_GPU_SCALING_FILL   the fill's seconds, seed 1 on every GPU (default 30; 0: none, the caches
#                             as they are)
#   KVFUZZ_GPU_SCALING_OUT    the runs' folders and the table (default findings-gpu-scaling)
#   every other ci/gpu.sh variable (KVFUZZ_GPU_ADAPTERS, default cuda_page_table sglang_triton here;
#   KVFUZZ_GPU_SEED, default 2 here: new cases on the fill's shapes; KVFUZZ_GPU_FLASHINFER_BACKENDS,
#   fa2 only here). Shrinking and memcheck are off.
# Needs two visible GPUs or more (CUDA_VISIBLE_DEVICES, else nvidia-smi): exit 2 otherwise. Exit 1
# when a run failed or a table cell could not be read.
#   KVFUZZ_GPU_ADAPTERS="cuda_page_table sglang_triton" bash ci/gpu_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${KVFUZZ_GPU_SCALING_OUT:-findings-gpu-scaling}")
fill=${KVFUZZ_GPU_SCALING_FILL:-30}
[[ $fill =~ ^[0-9]+$ ]] || { echo "gpu_scaling.sh: KVFUZZ_GPU_SCALING_FILL must be whole seconds, not '$fill'" >&2; exit 2; }
export KVFUZZ_GPU_ADAPTERS=${KVFUZZ_GPU_ADAPTERS:-cuda_page_table sglang_triton}
export KVFUZZ_GPU_SECONDS=${KVFUZZ_GPU_SECONDS:-20} KVFUZZ_GPU_SHRINK_SECONDS=0 KVFUZZ_GPU_MEMCHECK_CASES=0
export KVFUZZ_GPU_FLASHINFER_BACKENDS=${KVFUZZ_GPU_FLASHINFER_BACKENDS:-fa2}  # a FlashInfer executor's row is its name
gpu_ids=()
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then IFS=, read -r -a gpu_ids <<<"$CUDA_VISIBLE_DEVICES"
else mapfile -t gpu_ids < <(nvidia-smi -L 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*/\1/p'); fi
n=${#gpu_ids[@]}
[ "$n" -ge 2 ] || { echo "gpu_scaling.sh: needs two visible GPUs or more, found $n (CUDA_VISIBLE_DEVICES, nvidia-smi -L)" >&2; exit 2; }
all=$(IFS=,; echo "${gpu_ids[*]}")
mapfile -t cpus < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
slice=$(printf '%s\n' "${cpus[@]:0:$(( ${#cpus[@]} / n ))}" | paste -sd, -)
rm -rf "$out" && mkdir -p "$out"
echo "$n" >"$out/gpus"
# run NAME [VAR=V...]: ci/gpu.sh into OUT/NAME (its log OUT/NAME.txt), under PIN (a taskset, or
# none); its exit status is the table's to judge
pin=()
run() {
  local name=$1
  shift
  echo "== $name: $* ${pin[*]}"
  "${pin[@]}" env "$@" KVFUZZ_GPU_OUT="$out/$name" bash ci/gpu.sh >"$out/$name.txt" 2>&1 ||
    echo "   (ci/gpu.sh exited $?: $out/$name.txt)"
}
[ "$fill" = 0 ] || run fill CUDA_VISIBLE_DEVICES="$all" KVFUZZ_GPU_SEED=1 KVFUZZ_GPU_SECONDS="$fill"
seed=${KVFUZZ_GPU_SEED:-2}
if command -v taskset >/dev/null; then pin=(taskset -c "$slice")
else echo "gpu_scaling.sh: no taskset: one GPU runs on every core (a higher baseline than a one-GPU host's)"; fi
run one CUDA_VISIBLE_DEVICES="${gpu_ids[0]}" KVFUZZ_GPU_SEED="$seed"
pin=()
run all CUDA_VISIBLE_DEVICES="$all" KVFUZZ_GPU_SEED="$seed"
run per_gpu CUDA_VISIBLE_DEVICES="$all" KVFUZZ_GPU_SEED="$seed" KVFUZZ_GPU_PER_GPU=1
read -r -a names <<<"$KVFUZZ_GPU_ADAPTERS"
python3 ci/gpu_scaling.py "$out" "${names[@]}" | tee "$out/table.txt"
