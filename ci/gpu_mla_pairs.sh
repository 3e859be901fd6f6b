#!/usr/bin/env bash
# sglang's MLA backends paired with the real kernels (docs/gpu.md "sglang's MLA backends with the real
# kernels"): sglang's own metadata code (adapters/sglang/sglang_planner.py --backend B on the release's
# Python source) hands its plan to the kernel sglang calls for it, one short campaign per pair, then one
# table (ci/gpu_table.py: findings triaged against adapters/gpu/ and adapters/sglang/known_issues.json):
#   flashmla        sglang_flashmla_R:flashmla              FlashMLA (adapters/gpu/flashmla.py; its decode
#                                                           path: extend runs on FlashInfer MLA, unsupported)
#   flashinfer_mla  sglang_flashinfer_mla_R:flashinfer_mla  FlashInfer's BatchMLAPagedAttentionWrapper (auto, as
#                                                           sglang asks, where the CUTLASS headers are
#                                                           installed; else fa2)
#   fa3_mla         sglang_fa3_mla_R:fa3_mla                FA3's flash_attn_with_kvcache(qv=...) (adapters/gpu/fa3_mla.py)
#
#   bash ci/gpu_mla_pairs.sh              # a GPU machine, after ci/gpu.sh's packages (.gpu/site, .gpu/flashmla)
#   bash ci/gpu_mla_pairs.sh --dry-run    # here, no GPU: the same pairs, each kernel replaced by its CPU
#                                         # stand-in (FlashMLA: adapters/repro/flashmla_standin.py; FlashInfer
#                                         # MLA: KVFLASHINFER_EMULATE=1's numpy model; FA3: fa3_standin.py),
#                                         # the executors' own argument building run; .sglang (ci/sglang.sh install)
# Settings (environment):
#   KVFUZZ_MLA_PAIRS    which pairs (default "flashmla flashinfer_mla fa3_mla"; fa3_mla skipped, saying so,
#                       where FA3's library is not at KVFUZZ_FA3)
#   KVFUZZ_MLA_SECONDS  campaign length per pair on the GPU (default 60); --dry-run: KVFUZZ_MLA_CASES cases (default 3)
#   KVFUZZ_MLA_SEED     campaign seed (default 1)
#   KVFUZZ_MLA_SGLANG   the release (default 0.5.23): GPU .gpu/sglang_src/R (unpacked from
#                       .gpu/wheels/sglang_src-R.tgz, ci/gpu_sglang_src.py), --dry-run .sglang/R
#   KVFUZZ_MLA_OUT      findings and logs (default findings-mla-pairs; --dry-run findings-mla-pairs-dry)
#   KVFUZZ_FA3          FA3's library (default .gpu-fa3/sgl_fa3; python3 ci/gpu_fa3.py unpack --to DIR ...)
#   KVFUZZ_MLA_PLANNER_SITE  a folder put first on the planner's PYTHONPATH (default .gpu/planner_site, made
#                       from .gpu/planner_wheels/*.whl where that holds wheels): sglang's metadata code runs
#                       its Triton kernels under Triton's interpreter, which fails on numpy 2.5, the GPU
#                       machine's (docs/gpu.md "sglang's MLA backends with the real kernels"): a numpy 2.3
#                       wheel there, `python3 -m pip download numpy==2.3.5 --no-deps --only-binary=:all:
#                       --python-version 3.12 --platform manylinux_2_28_x86_64 -d .gpu/planner_wheels`
#                       (15.8 MiB). A planner on the CPU with numpy 2.5 or later: exit 2, saying so
#   KVFUZZ_MLA_VERSIONS "flashinfer=0.7.2.post1 torch=2.11.0 ...": the kernels' releases, for the known issues' ranges
#   KVFUZZ_MLA_PLANNER_DEVICE  cpu (default: Triton's interpreter) or cuda (the planner's --device)
# Exit: 0 every campaign ran and every finding is known; 1 a NEW finding or a regression, a campaign that
# failed; 2 bad input (an unknown pair or option, a missing release or package, named).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dry=0
case "${1:-}" in
  "") ;;
  --dry-run) dry=1 ;;
  *) echo "gpu_mla_pairs.sh: unknown option $1 (--dry-run, or none)" >&2; exit 2 ;;
esac
release=${KVFUZZ_MLA_SGLANG:-0.5.23}
seed=${KVFUZZ_MLA_SEED:-1}
read -r -a pairs <<<"${KVFUZZ_MLA_PAIRS:-flashmla flashinfer_mla fa3_mla}"
fa3=$(realpath -m "${KVFUZZ_FA3:-.gpu-fa3/sgl_fa3}")
K=$PWD/build/fuzz/kvfuzz
[ -x "$K" ] || { echo "gpu_mla_pairs.sh: no $K (bash ci/build.sh)" >&2; exit 2; }
for p in "${pairs[@]}"; do
  case $p in flashmla | flashinfer_mla | fa3_mla) ;; *) echo "gpu_mla_pairs.sh: unknown pair $p (flashmla flashinfer_mla fa3_mla)" >&2; exit 2 ;; esac
done

if [ "$dry" = 1 ]; then
  out=$(realpath -m "${KVFUZZ_MLA_OUT:-findings-mla-pairs-dry}")
  py=$PWD/.sglang/venv/bin/python
  src=$PWD/.sglang/$release
  [ -x "$py" ] && [ -d "$src/sglang" ] || { echo "gpu_mla_pairs.sh: no .sglang/venv or .sglang/$release (bash ci/sglang.sh install)" >&2; exit 2; }
  planner_env="" planner_py=$py
  # The stand-ins under the kernels' names: sgl_kernel.flash_mla and sgl_kernel.flash_attn.
  shim=$out/standins
  rm -rf "$shim"
  # shellcheck source=adapters/repro/standins.sh
  . adapters/repro/standins.sh && standin_library "$shim/flashmla" flashmla && standin_library "$shim/fa3" fa3 || exit 2
  fa3=$shim/fa3
  # host tensors (cuda_arrays.DEV), one intra-op thread (a shared CPU: OpenMP spinning stalled the stand-ins)
  exec_env="TRITON_INTERPRET=1 OMP_NUM_THREADS=1 KVFUZZ_FLASHMLA_DIR=$shim/flashmla KVFLASHINFER_EMULATE=1 KVFUZZ_FA3=$fa3"
  length=(--cases "${KVFUZZ_MLA_CASES:-3}") jobs=2 servers=() shrink=(--no-shrink)
else
  out=$(realpath -m "${KVFUZZ_MLA_OUT:-findings-mla-pairs}")
  site=$PWD/.gpu/site
  cache=$(realpath -m "${KVFUZZ_GPU_CACHE:-.gpu-cache}")
  [ -f "$site/flashinfer/__init__.py" ] && [ -d .gpu/flashmla/sgl_kernel ] ||
    { echo "gpu_mla_pairs.sh: no .gpu/site or .gpu/flashmla (bash ci/gpu.sh installs them)" >&2; exit 2; }
  src=$PWD/.gpu/sglang_src/$release
  if [ ! -d "$src" ]; then
    [ -f ".gpu/wheels/sglang_src-$release.tgz" ] ||
      { echo "gpu_mla_pairs.sh: no .gpu/wheels/sglang_src-$release.tgz (python3 ci/gpu_sglang_src.py $release)" >&2; exit 2; }
    mkdir -p "$src.tmp" && tar -xzf ".gpu/wheels/sglang_src-$release.tgz" -C "$src.tmp" && mv "$src.tmp" "$src"
  fi
  planner_site=$(realpath -m "${KVFUZZ_MLA_PLANNER_SITE:-.gpu/planner_site}")
  if [ ! -d "$planner_site" ] && ls .gpu/planner_wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install --quiet --no-index --no-deps --target "$planner_site" .gpu/planner_wheels/*.whl
  fi
  planner_env="PYTHONPATH=$planner_site:$site"
  planner_py=python3
  exec_env="PYTHONPATH=$site:$PWD/adapters KVFUZZ_FA3=$fa3 KVFUZZ_FLASHMLA_DIR=$PWD/.gpu/flashmla FLASHINFER_WORKSPACE_BASE=$cache"
  # sglang 0.5.23's FlashInfer MLA backend asks for "auto" (flashinfer_mla_backend.py:296, 302, 306): the
  # sm90 kernel on Hopper, where FlashInfer's CUTLASS headers are installed (ci/gpu_cutlass.py), else fa2
  python3 ci/gpu_cutlass.py present "$site" && exec_env="KVFLASHINFER_MLA_BACKEND=auto $exec_env"
  length=(--seconds "${KVFUZZ_MLA_SECONDS:-60}") jobs=$(nproc) servers=(--adapter-servers gpus:4) shrink=(--shrink-seconds 10)
  py=python3
fi
device=${KVFUZZ_MLA_PLANNER_DEVICE:-cpu}
numpy=$(${planner_env:+env $planner_env} "$planner_py" -c 'import numpy; print(numpy.__version__)' 2>&1 | tail -1)
if [ "$device" = cpu ] && python3 -c 'import sys; v = sys.argv[1].split("."); sys.exit(not (len(v) > 1 and v[0].isdigit() and v[1].isdigit() and (int(v[0]), int(v[1])) >= (2, 5)))' "$numpy"; then
  # Triton's interpreter converts a loaded length to an int (range(num_loop) in sglang's index kernels), which
  # numpy 2.5 refuses ("only 0-dimensional arrays can be converted to Python scalars"): every case would crash
  echo "gpu_mla_pairs.sh: the planner's numpy is $numpy: sglang's Triton metadata kernels fail under Triton's interpreter" \
    "with numpy 2.5 or later; put a numpy 2.3 wheel in .gpu/planner_wheels (this script's header) or set" \
    "KVFUZZ_MLA_PLANNER_SITE, or KVFUZZ_MLA_PLANNER_DEVICE=cuda" >&2
  exit 2
fi
mkdir -p "$out"
echo "== sglang $release's MLA backends with $([ "$dry" = 1 ] && echo "CPU stand-ins (dry run)" || echo "the real kernels"); planner on $device," \
  "numpy $numpy; findings in $out"

profiles() {  # FlashMLA's pages hold 64 tokens, drawn from the medium profile up (sglang forces 64)
  [ "$1" = flashmla ] && echo "--profile medium" || echo "--profile tiny --profile small"
}
names=()
for p in "${pairs[@]}"; do
  if [ "$p" = fa3_mla ] && [ ! -f "$fa3/sgl_kernel/flash_attn.py" ]; then
    echo "== fa3_mla skipped: no FA3 library at $fa3 (python3 ci/gpu_fa3.py unpack --to DIR ...; KVFUZZ_FA3=DIR)"
    continue
  fi
  name=sglang_$p t0=$SECONDS rc=0
  planner="${planner_env:+$planner_env }$planner_py $PWD/adapters/sglang/sglang_planner.py --site $src --backend $p --device $device"
  echo "== $name: sglang_${p}_${release//./_}:$p ($out/$name.log)"
  # shellcheck disable=SC2046  # profiles prints whole words
  "$K" run "${length[@]}" --seed "$seed" $(profiles "$p") --jobs "$jobs" "${servers[@]}" "${shrink[@]}" \
    --adapter-timeout 300 --max-saved 2 --backend "sglang_${p}_${release//./_}:$p" \
    --adapter "$planner" --adapter "$exec_env $py $PWD/adapters/gpu/$p.py" --out "$out/$name" >"$out/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$out/$name.rc"
  echo $((SECONDS - t0)) >"$out/$name.wall"
  names+=("$name")
done
[ "${#names[@]}" -gt 0 ] || { echo "gpu_mla_pairs.sh: no pair ran" >&2; exit 2; }
echo
KVFUZZ_GPU_ISSUES=adapters/sglang/known_issues.json KVFUZZ_GPU_SECONDS=$([ "$dry" = 1 ] && echo "- (a dry run: --cases)" || echo "${KVFUZZ_MLA_SECONDS:-60}") \
  KVFUZZ_GPU_VERSIONS="sglang=$release ${KVFUZZ_MLA_VERSIONS:-}" python3 ci/gpu_table.py "$out" "${names[@]}"
