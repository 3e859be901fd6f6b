#!/usr/bin/env bash
# The GPU campaign, for owners of an NVIDIA GPU: installs the pinned kernel packages into an
# isolated folder (.gpu/site, never committed), builds kvfuzz with CUDA, runs a campaign against
# each real executor and prints one table: backend, cases checked, unsupported, findings by
# property, cases/s, share of the time inside the kernel's adapter. Then a compute-sanitizer
# memcheck campaign of kvfuzz's own CUDA executor.
#   KVFUZZ_GPU_SECONDS    campaign length per executor (default 300)
#   KVFUZZ_GPU_ADAPTERS   executors to run (default: sglang_triton flashinfer_paged_csr flashinfer_mla
#                         flashmla flex_page_table vllm_triton cuda_page_table): adapters/gpu/<name>.py, or
#                         cuda_page_table (C ABI, built here)
#   KVFUZZ_GPU_FLASHINFER_BACKENDS  FlashInfer's kernel backends flashinfer_paged_csr and flashinfer_mla
#                         run on, each a campaign and a table row of its own: NAME (fa2), NAME.fa3 (the sm90
#                         kernels), NAME.auto (FlashInfer's pick; KVFLASHINFER_BACKEND). Default "fa2 fa3" where
#                         FlashInfer's CUTLASS headers are installed (.gpu/wheels/flashinfer_cutlass-*, packed
#                         by ci/gpu_wheels.py, installed into .gpu/site here, checked: a bad one exits 2), else
#                         "fa2"; fa3 or auto without the headers exits 2. Each sm90 variant is a JIT build on
#                         first use (docs/gpu.md "FlashInfer's sm90 kernels")
#   KVFUZZ_GPU_SERVERS    the executor's processes (kvfuzz run --adapter-servers): "gpus:4": four
#                         executor servers per visible GPU, shared by every job (every GPU of the host is
#                         used; each kernel variant loads once per server, not per job; docs/gpu.md
#                         "Executor servers"); "gpus": one per GPU (one CUDA context a GPU); N: N servers
#                         taking the GPUs in turn (default gpus:4); 0: one worker process per job (each
#                         its own context).
#                         The memcheck campaign always runs per-job workers
#   KVFUZZ_GPU_LANES      with servers, the requests each server works on at once (kvfuzz run
#                         --server-lanes): executors that declare "lanes" (cuda_page_table,
#                         sglang_triton) answer that many at once, each on a thread and CUDA stream of
#                         its own (docs/gpu.md "Executor servers"). Default 4 for sglang_triton (one
#                         H200, 16 cores, 4 servers, warm: 127.8 checked/s with one lane, 229.6 with 2,
#                         and 265.9 / 345.0 with 2 / 4 on a 16-core slice of a 4-GPU host), else 1
#   KVFUZZ_GPU_BATCH      with servers, 1 (default): cases of one shape waiting for a server go as one
#                         kernel call to an executor that declared "batch": true (cuda_page_table;
#                         docs/gpu.md "Batching"); 0: one case a call (kvfuzz run --no-batch)
#   KVFUZZ_GPU_JOBS       kvfuzz run's --jobs (default: sixteen per core with servers, at most 1024, four
#                         where the campaign draws medium or larger cases; one without)
#   KVFUZZ_GPU_PARALLEL   1: the campaigns run at once, each with nproc / count jobs (default 0: one
#                         after another, nproc jobs each)
#   KVFUZZ_GPU_PROFILES   size profiles (default "tiny small"; flashmla: KVFUZZ_GPU_FLASHMLA_PROFILES,
#                         default "medium large", the first with FlashMLA's page size of 64; vllm_triton:
#                         KVFUZZ_GPU_VLLM_PROFILES, default "small medium", where block sizes of 16 and up are drawn)
#   KVFUZZ_GPU_SEED       campaign seed (default 1; another seed continues a campaign with new cases)
#   KVFUZZ_GPU_SHRINK_SECONDS  shrink budget per saved fingerprint (default 30; 0: no shrinking)
#   KVFUZZ_GPU_MEMCHECK_CASES  cases of the memcheck campaign (default 100; 0 skips it)
#   KVFUZZ_GPU_LONG_CASES      cases of the `long` profile (>= 128k keys, pools > 2^31 elements) per
#                              Python executor, 2 jobs each, after the campaigns (default 0: none;
#                              about 16 GB of RAM per job, README "Size profiles")
#   KVFUZZ_GPU_REUSE_SHAPES  each shape (page size, model, dtype: what a kernel compiles a variant
#                         for) serves about this many cases of a Python executor, a new one every N
#                         cases (kvfuzz run --reuse-shapes; default 100; 0: every case its own);
#                         cuda_page_table: KVFUZZ_GPU_CUDA_REUSE_SHAPES (default 0 with per-job
#                         workers: it compiles nothing per shape; with servers the same as the others,
#                         so that its cases of one shape batch)
#   KVFUZZ_GPU_SHAPE_RUN  runs of this many consecutive cases share one shape (kvfuzz run --shape-run), so
#                         cases of one shape wait for a server together and batch (default 64 with servers
#                         and batching, else 1: each case picks its own among the shapes)
#   KVFUZZ_GPU_COMPILE_AHEAD  with servers and shape runs, 1: each server builds the next runs' kernel
#                         variants (a warm-up case each, answer discarded) while it serves the current run
#                         (kvfuzz run --compile-ahead; docs/gpu.md "Executor servers"); 0 (default: not yet
#                         measured on a GPU)
#   KVFUZZ_GPU_FLASHINFER_PREBUILD  1: before each flashinfer_paged_csr campaign, FlashInfer's JIT kernels
#                         of every variant it can meet are built, as many at once as cores
#                         (adapters/gpu/flashinfer_prebuild.py), into KVFUZZ_GPU_CACHE; 0 (default: not yet
#                         measured on a GPU)
#   KVFUZZ_GPU_SHAPE_SEED  seed of those shapes (default 1): kept while KVFUZZ_GPU_SEED changes, a new
#                         campaign draws new cases on the shapes whose kernels the caches hold
#   KVFUZZ_GPU_CACHE      the compile caches, kept between runs (Triton's, Inductor's, FlashInfer's JIT;
#                         default .gpu-cache, outside .gpu so a fresh copy of .gpu keeps them)
#   KVFUZZ_GPU_OUT        findings and logs (default findings-gpu)
#   KVFUZZ_GPU_PER_GPU    1: one kvfuzz process a visible GPU (CUDA_VISIBLE_DEVICES, else nvidia-smi), each
#                         a shard of the campaign (--shard I/N) with that GPU's servers, its share of the
#                         cores (taskset, where there is one) and of the jobs, the shards' folders joined by
#                         `kvfuzz merge` into OUT/NAME and their logs into OUT/NAME.log (ci/gpu_table.py adds
#                         them up); 0 (default): one process for every GPU (on a 2x H200 host one process
#                         checked more: docs/gpu.md "One kvfuzz process a GPU", measured when a shard of
#                         2 drew one profile only, since fixed: fuzz/shard.h). Needs servers and a
#                         visible GPU; not with KVFUZZ_GPU_SHARD (exit 2)
#   KVFUZZ_GPU_SHARD      I/N: each campaign runs only part I of N (kvfuzz run --shard; `kvfuzz merge`
#                         joins the parts' OUT/<executor> folders, docs/cluster.md)
#   KVFUZZ_GPU_SGLANG     the sglang release whose Triton kernels sglang_triton runs (default 0.5.23;
#                         0.5.10.post1 also fetched): its kernel files, unpacked into .gpu/sglang/RELEASE
#   KVFUZZ_FA3            the folder holding sgl-kernel's FA3 library, sgl_kernel/ (default .gpu-fa3/sgl_fa3:
#                         `python3 ci/gpu_fa3.py unpack --to DIR ...`, docs/gpu.md "Real FA3"). Where it is
#                         there, fa3_page_table (FA3's real flash_attn_with_kvcache, paired with kvfuzz's fa
#                         planner) joins the default executors, on KVFUZZ_GPU_FA3_PROFILES (default "tiny small
#                         gpt-oss": gpt-oss's sinks), and a memcheck campaign of it follows the CUDA
#                         executor's (KVFUZZ_GPU_FA3_MEMCHECK_CASES, default 20); where it is not, both are
#                         skipped, saying so
# Needs python3 with torch and triton on a CUDA machine, and network the first time:
# `python3 ci/gpu_wheels.py` fetches the pinned wheels into .gpu/wheels. A machine without network:
# run that elsewhere with `--python X.Y` (its Python), add the three Debian packages kvfuzz builds
# with (`mkdir -p .gpu/debs && cd .gpu/debs && apt-get download nlohmann-json3-dev libcli11-dev
# librapidcheck-dev`), and copy .gpu/ over. Saved findings are triaged against
# adapters/gpu/known_issues.json by fingerprint, every finding of each campaign's index (ci/gpu_table.py).
# Exit 1 on a NEW finding or a regression, a finding triage cannot read, a campaign that failed, or a
# memcheck error.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${KVFUZZ_GPU_SECONDS:-300}
out=$(realpath -m "${KVFUZZ_GPU_OUT:-findings-gpu}")
profiles=${KVFUZZ_GPU_PROFILES:-tiny small}
memcheck_cases=${KVFUZZ_GPU_MEMCHECK_CASES:-100}
site=$PWD/.gpu/site
wheels=.gpu/wheels
sglang_release=${KVFUZZ_GPU_SGLANG:-0.5.23}
cache=$(realpath -m "${KVFUZZ_GPU_CACHE:-.gpu-cache}")
mkdir -p "$cache"

# 1. Packages: Debian (or the offline copies in .gpu/debs) and the pinned wheels.
cmake_args=(-DKVFUZZ_TESTS=OFF -DKVFUZZ_NATIVE=OFF -DKVFUZZ_WERROR=OFF)
if ls .gpu/debs/*.deb >/dev/null 2>&1; then  # an offline machine: the packages' files, no apt
  mkdir -p .gpu/deps
  for deb in .gpu/debs/*.deb; do dpkg -x "$deb" .gpu/deps; done
  cmake_args+=("-DCMAKE_PREFIX_PATH=$PWD/.gpu/deps/usr")
else
  bash ci/setup.sh
fi
ls $wheels/flashinfer_python-*.whl $wheels/sglang_kernels-*.zip $wheels/sgl_flashmla-*.zip $wheels/vllm_kernels-*.zip >/dev/null 2>&1 ||
  python3 ci/gpu_wheels.py "$wheels"
if [ ! -f "$site/flashinfer/__init__.py" ]; then
  mkdir -p "$site"
  python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
fi
# FlashInfer's CUTLASS headers (its sm90 kernels' JIT builds include them; ci/gpu_cutlass.py), where
# ci/gpu_wheels.py packed them beside the slim wheel: checked and installed into the site.
if ls $wheels/flashinfer_cutlass-* >/dev/null 2>&1 && ! python3 ci/gpu_cutlass.py present "$site"; then
  python3 ci/gpu_cutlass.py install "$wheels" "$site"
fi
# sglang's Triton kernels: the files of the release that sglang_triton loads (the package would pull in
# the whole server).
[ -d ".gpu/sglang/$sglang_release" ] ||
  python3 -m zipfile -e "$wheels/sglang_kernels-$sglang_release.zip" ".gpu/sglang/$sglang_release"
# FlashMLA (flashmla.py): sgl-kernel's library and wrapper, under a package of their own.
[ -d .gpu/flashmla/sgl_kernel ] || python3 -m zipfile -e "$(ls $wheels/sgl_flashmla-*.zip | head -1)" .gpu/flashmla
# vLLM's Triton attention kernel (vllm_triton.py): the kernel and the files it imports.
[ -d .gpu/vllm/vllm ] || python3 -m zipfile -e "$(ls $wheels/vllm_kernels-*.zip | head -1)" .gpu/vllm

# 2. Build (CUDA code when nvcc is found).
targets="kvfuzz kvfuzz-worker"
command -v nvcc >/dev/null && targets="$targets cuda_page_table"
KVFUZZ_BUILD_TARGETS=$targets bash ci/build.sh "${cmake_args[@]}"
export PYTHONUNBUFFERED=1

# sgl-kernel's FA3 library (optional: packed in parts by ci/gpu_fa3.py, too large for the wheels folder)
fa3=$(realpath -m "${KVFUZZ_FA3:-.gpu-fa3/sgl_fa3}")
fa3_present=0
[ -f "$fa3/sgl_kernel/flash_attn.py" ] && fa3_present=1

# FlashInfer's kernel backends the FlashInfer executors run on, each its own campaign and table row
# (NAME for fa2, NAME.fa3, NAME.auto; KVFLASHINFER_BACKEND, adapters/gpu/flashinfer_kernels.py).
cutlass_present=0
python3 ci/gpu_cutlass.py present "$site" && cutlass_present=1
fi_backends_default="fa2 fa3"
[ "$cutlass_present" = 1 ] || fi_backends_default=fa2
read -r -a fi_backends <<<"${KVFUZZ_GPU_FLASHINFER_BACKENDS:-$fi_backends_default}"
for b in "${fi_backends[@]}"; do
  case $b in
    fa2) ;;
    fa3 | auto) [ "$cutlass_present" = 1 ] || {
      echo "gpu.sh: KVFUZZ_GPU_FLASHINFER_BACKENDS has $b, whose sm90 kernels need FlashInfer's CUTLASS headers:" \
        "none in $site (python3 ci/gpu_wheels.py packs .gpu/wheels/flashinfer_cutlass-*.tar.xz)" >&2; exit 2; } ;;
    *) echo "gpu.sh: KVFUZZ_GPU_FLASHINFER_BACKENDS: $b is not fa2, fa3 or auto" >&2; exit 2 ;;
  esac
done
[ "${#fi_backends[@]}" -gt 0 ] || { echo "gpu.sh: KVFUZZ_GPU_FLASHINFER_BACKENDS names no backend" >&2; exit 2; }

# The adapter command carries its environment, so the replay line every finding prints reproduces
# it when pasted into a fresh shell.
adapter_command() {  # NAME: an executor, or a FlashInfer executor's row NAME.BACKEND
  local fi_env=
  [[ $1 == *.* ]] && fi_env="KVFLASHINFER_BACKEND=${1#*.} "
  set -- "${1%%.*}"
  case $1 in
    cuda_page_table) echo "$PWD/build/backends/kvfuzz-worker $PWD/build/adapters/libcuda_page_table.so" ;;
    *) [ -f "adapters/gpu/$1.py" ] || { echo "gpu.sh: no executor adapters/gpu/$1.py" >&2; exit 2; }
       echo "${fi_env}PYTHONPATH=$site:$PWD/adapters KVFUZZ_FA3=$fa3 KVFUZZ_FLASHMLA_DIR=$PWD/.gpu/flashmla VLLM_SITE=$PWD/.gpu/vllm FLASHINFER_WORKSPACE_BASE=$cache TRITON_CACHE_DIR=$cache/triton" \
            "TORCHINDUCTOR_CACHE_DIR=$cache/inductor SGLANG_TRITON_RELEASE=$sglang_release python3 $PWD/adapters/gpu/$1.py" ;;
  esac
}

# 3. Campaigns.
read -r -a names <<<"${KVFUZZ_GPU_ADAPTERS:-sglang_triton flashinfer_paged_csr flashinfer_mla flashmla flex_page_table vllm_triton cuda_page_table fa3_page_table}"
if [ "$fa3_present" = 0 ] && [[ " ${names[*]} " == *" fa3_page_table "* ]]; then
  echo "== fa3_page_table skipped: no FA3 library at $fa3 (python3 ci/gpu_fa3.py unpack --to DIR ...; KVFUZZ_FA3=DIR)"
  read -r -a names <<<"$(printf '%s\n' "${names[@]}" | grep -vx fa3_page_table | tr '\n' ' ')"
fi
rows=()
for name in "${names[@]}"; do
  case $name in
    flashinfer_paged_csr | flashinfer_mla)
      for b in "${fi_backends[@]}"; do [ "$b" = fa2 ] && rows+=("$name") || rows+=("$name.$b"); done ;;
    *) rows+=("$name") ;;
  esac
done
names=("${rows[@]}")
servers=${KVFUZZ_GPU_SERVERS:-gpus:4}
# With servers a job mostly waits for its answer, and a batch gathers from the cases waiting at once:
# sixteen jobs a core (at most kvfuzz's 1024). H200, 16 cores, 4 servers (docs/gpu.md): cuda_page_table
# 672 checked/s with 16 jobs, 1024 with 64 and 1139 against 1628 with 256; sglang_triton 31.7 with 64,
# 41.5 and 54.7 with 256 (batches of 4.0 cases, 7.8 and 6.8). Campaigns that draw medium or larger
# cases keep four a core: those cases are the host's work (their oracle), and with 256 jobs the ones
# in flight at the deadline outlast it (flashmla, medium + large: 18 checked in 40 s, ran 51.7 s;
# vllm_triton, small + medium: ran 50.8 s for 45).
# jobs_of NAME: the campaign's --jobs.
jobs_of() {
  local per=16 jobs
  [[ " $(profiles_of "$1")" =~ " --profile "(medium|large|long) ]] && per=4
  jobs=$(nproc)
  [ "$servers" != 0 ] && jobs=$(( per * $(nproc) > 1024 ? 1024 : per * $(nproc) ))
  jobs=${KVFUZZ_GPU_JOBS:-$jobs}
  [ "${KVFUZZ_GPU_PARALLEL:-0}" = 1 ] && jobs=$(( jobs / ${#names[@]} > 0 ? jobs / ${#names[@]} : 1 ))
  echo "$jobs"
}
# lanes_of NAME: the campaign's --server-lanes.
lanes_of() {
  local lanes=1
  [ "${1%%.*}" = sglang_triton ] && lanes=4
  echo "${KVFUZZ_GPU_LANES:-$lanes}"
}
shrink_seconds=${KVFUZZ_GPU_SHRINK_SECONDS:-30}
shrink_args=(--shrink-seconds "$shrink_seconds")
[ "$shrink_seconds" = 0 ] && shrink_args=(--no-shrink)
profile_args=()
for p in $profiles; do profile_args+=(--profile "$p"); done
# profiles_of NAME: FlashMLA's pages hold 64 tokens, a page size the generator draws from medium up.
profiles_of() {
  local p list=$profiles
  set -- "${1%%.*}"
  [ "$1" = flashmla ] && list=${KVFUZZ_GPU_FLASHMLA_PROFILES:-medium large}
  [ "$1" = vllm_triton ] && list=${KVFUZZ_GPU_VLLM_PROFILES:-small medium}
  [ "$1" = fa3_page_table ] && list=${KVFUZZ_GPU_FA3_PROFILES:-tiny small gpt-oss}
  for p in $list; do printf -- '--profile %s ' "$p"; done
}
shape_run=1
[ "$servers" != 0 ] && [ "${KVFUZZ_GPU_BATCH:-1}" = 1 ] && shape_run=64
shape_run=${KVFUZZ_GPU_SHAPE_RUN:-$shape_run}
mkdir -p "$out"
# The host's CPU busy between two /proc/stat "cpu" lines, 0..1 (user to steal; idle and iowait not
# busy; guest is inside user): ci/gpu_table.py's "host CPU".
cpu_busy() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x); split(b, y); t = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]
    if (t > 0) printf "%.3f\n", 1 - ((y[5] - x[5]) + (y[6] - x[6])) / t }'
}
# The visible GPUs, as kvfuzz's --adapter-servers gpus counts them: CUDA_VISIBLE_DEVICES, else nvidia-smi.
gpu_ids=()
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then IFS=, read -r -a gpu_ids <<<"$CUDA_VISIBLE_DEVICES"
else mapfile -t gpu_ids < <(nvidia-smi -L 2>/dev/null | sed -n 's/^GPU \([0-9]*\):.*/\1/p'); fi
per_gpu=${KVFUZZ_GPU_PER_GPU:-0}
case "$per_gpu" in
  0) ;;
  1) [ -z "${KVFUZZ_GPU_SHARD:-}" ] || { echo "ci/gpu.sh: KVFUZZ_GPU_PER_GPU=1 shards each campaign itself; it does not take KVFUZZ_GPU_SHARD" >&2; exit 2; }
     [ "$servers" != 0 ] || { echo "ci/gpu.sh: KVFUZZ_GPU_PER_GPU=1 needs executor servers (KVFUZZ_GPU_SERVERS is 0)" >&2; exit 2; }
     [ "${#gpu_ids[@]}" -gt 0 ] || { echo "ci/gpu.sh: KVFUZZ_GPU_PER_GPU=1 but no GPU is visible" >&2; exit 2; } ;;
  *) echo "ci/gpu.sh: KVFUZZ_GPU_PER_GPU must be 0 or 1, not '$per_gpu'" >&2; exit 2 ;;
esac
# run_kvfuzz NAME JOBS OUT [ARG...]: NAME's campaign into OUT (findings) and OUT.log.
run_kvfuzz() {
  local name=$1 jobs=$2 dir=$3 reuse=${KVFUZZ_GPU_REUSE_SHAPES:-100}
  shift 3
  # compiled ahead: no variant to wait for, but with servers its cases of one shape batch
  [ "$name" = cuda_page_table ] && { [ "$servers" = 0 ] && reuse=${KVFUZZ_GPU_CUDA_REUSE_SHAPES:-0} ||
    reuse=${KVFUZZ_GPU_CUDA_REUSE_SHAPES:-$reuse}; }
  # shellcheck disable=SC2046  # profiles_of prints whole words
  ./build/fuzz/kvfuzz run --seconds "$seconds" --seed "${KVFUZZ_GPU_SEED:-1}" $(profiles_of "$name") --jobs "$jobs" \
    --reuse-shapes "$reuse" --shape-run "$shape_run" --shape-seed "${KVFUZZ_GPU_SHAPE_SEED:-1}" \
    --adapter "$(adapter_command "$name")" --adapter-servers "$servers" --server-lanes "$(lanes_of "$name")" \
    $([ "${KVFUZZ_GPU_BATCH:-1}" = 0 ] && echo --no-batch) \
    $([ "${KVFUZZ_GPU_COMPILE_AHEAD:-0}" = 1 ] && echo --compile-ahead) --backend "${name%%.*}" --out "$dir" --max-saved 2 \
    "$@" "${shrink_args[@]}" --adapter-timeout 600 >"$dir.log" 2>&1
}
# per_gpu_campaign NAME: shard i of N on GPU i, with core slice i of N (taskset, where there is one)
# and jobs / N; the shards merged into OUT/NAME, their logs one after the other in OUT/NAME.log.
per_gpu_campaign() {
  local name=$1 n=${#gpu_ids[@]} i rc=0 r pids=() cpus=() slice parts=() jobs
  jobs=$(( $(jobs_of "$name") / n ))
  [ "$jobs" -gt 0 ] || jobs=1
  mapfile -t cpus < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
  for i in "${!gpu_ids[@]}"; do
    slice=$(printf '%s\n' "${cpus[@]}" | awk -v i="$i" -v n="$n" -v c="${#cpus[@]}" \
      'NR > int(i * c / n) && NR <= int((i + 1) * c / n)' | paste -sd, -)
    parts+=("$out/$name.shard$i")
    rm -rf "$out/$name.shard$i"
    (
      export CUDA_VISIBLE_DEVICES=${gpu_ids[$i]}
      # this subshell on its slice of the cores, and so everything it starts
      command -v taskset >/dev/null && [ -n "$slice" ] && taskset -cp "$slice" "$BASHPID" >/dev/null
      run_kvfuzz "$name" "$jobs" "$out/$name.shard$i" --shard "$i/$n"
    ) &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    r=0; wait "${pids[$i]}" || r=$?
    [ "$r" -gt "$rc" ] && rc=$r
  done
  rm -rf "${out:?}/$name"
  for i in "${!parts[@]}"; do echo "== shard $i/$n, GPU ${gpu_ids[$i]}"; cat "${parts[$i]}.log"; done >"$out/$name.log"
  if [ "$rc" -le 1 ]; then
    ./build/fuzz/kvfuzz merge "$out/$name" "${parts[@]}" >>"$out/$name.log" 2>&1 || rc=2
  fi
  return "$rc"
}
# prebuild NAME: FlashInfer's JIT kernels of flashinfer_paged_csr's every variant, built before its
# campaign by as many processes as cores (adapters/gpu/flashinfer_prebuild.py; its log OUT/NAME.prebuild.log)
prebuild() {
  local t0=$SECONDS backend=fa2
  [[ $1 == *.* ]] && backend=${1#*.}
  echo "== $1: FlashInfer's kernels built ahead (log $out/$1.prebuild.log)"
  KVFLASHINFER_BACKEND=$backend PYTHONPATH="$site:$PWD/adapters" FLASHINFER_WORKSPACE_BASE="$cache" \
    python3 adapters/gpu/flashinfer_prebuild.py --jobs "$(nproc)" >"$out/$1.prebuild.log" 2>&1 ||
    echo "   some variants failed to build: their cases will fail the same way in the campaign"
  echo "   $(tail -n 1 "$out/$1.prebuild.log") ($((SECONDS - t0)) s)"
}
campaign() {
  local name=$1 rc=0 t0 cpu0
  [ "${KVFUZZ_GPU_FLASHINFER_PREBUILD:-0}" = 1 ] && [ "${name%%.*}" = flashinfer_paged_csr ] && prebuild "$name"
  t0=$SECONDS
  cpu0=$(head -n 1 /proc/stat)
  if [ "$per_gpu" = 1 ]; then per_gpu_campaign "$name" || rc=$?
  else run_kvfuzz "$name" "$(jobs_of "$name")" "$out/$name" ${KVFUZZ_GPU_SHARD:+--shard "$KVFUZZ_GPU_SHARD"} || rc=$?
  fi
  echo "$rc" >"$out/$name.rc"
  echo $((SECONDS - t0)) >"$out/$name.wall"  # the whole campaign, shrinking included, against --seconds
  cpu_busy "$cpu0" "$(head -n 1 /proc/stat)" >"$out/$name.cpu"
}
for name in "${names[@]}"; do
  adapter_command "$name" >/dev/null
  echo "== $name: ${seconds} s campaign, $(jobs_of "$name") jobs, --adapter-servers $servers, --server-lanes $(lanes_of "$name")$([ "$per_gpu" = 1 ] && echo ", one kvfuzz process on each of ${#gpu_ids[@]} GPUs (a shard each, the jobs split)") (log $out/$name.log)"
  if [ "${KVFUZZ_GPU_PARALLEL:-0}" = 1 ]; then campaign "$name" & else campaign "$name"; fi
done
wait

# 4. The long profile: 32-bit index arithmetic of the real kernels (rows NAME.long of the table).
long_cases=${KVFUZZ_GPU_LONG_CASES:-0}
if [ "$long_cases" -gt 0 ]; then
  for name in "${names[@]}"; do
    [ "$name" = cuda_page_table ] && continue  # the C ABI takes dense pools only
    echo "== $name: $long_cases cases of the long profile"
    rc=0
    ./build/fuzz/kvfuzz run --cases "$long_cases" --profile long --jobs 2 --no-shrink \
      --adapter "$(adapter_command "$name")" --backend "${name%%.*}" --out "$out/$name.long" --adapter-timeout 600 \
      >"$out/$name.long.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$name.long.rc"
    names+=("$name.long")
  done
fi

# 5. compute-sanitizer memcheck campaigns (per-job workers, one case's process under the sanitizer at a time):
# kvfuzz's own CUDA executor, then FA3's (PyTorch's caching allocator off, so that a read past a tensor
# leaves its allocation).
memcheck_lines=()
sanitized() {  # sanitized COMMAND DIR: COMMAND with compute-sanitizer before its program (after its VAR=VALUE words)
  local w words=() placed=0
  for w in $1; do
    [ "$placed" = 0 ] && [[ $w != *=* ]] && { words+=(compute-sanitizer --tool memcheck --log-file "$2/%p.log"); placed=1; }
    words+=("$w")
  done
  echo "${words[*]}"
}
memcheck() {  # memcheck NAME CASES PROFILE_ARGS ENVIRONMENT: OUT/memcheck[-NAME]/, a line for the table
  local name=$1 cases=$2 dir=$out/memcheck${1:+-$1} rc=0 errors logs
  [ -n "$name" ] || name=cuda_page_table
  rm -rf "$dir" && mkdir -p "$dir"
  echo "== memcheck: $cases cases of $name under compute-sanitizer"
  # shellcheck disable=SC2086  # the profile arguments are whole words
  ./build/fuzz/kvfuzz run --cases "$cases" $3 --jobs "$(nproc)" --no-shrink \
    --adapter "$4 $(sanitized "$(adapter_command "$name")" "$dir")" \
    --backend "$name" --out "$dir/findings" --adapter-timeout 600 >"$dir.log" 2>&1 || rc=$?
  errors=$( { cat "$dir"/*.log 2>/dev/null || true; } | sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' | awk '{s += $1} END {print s + 0}')
  logs=$(find "$dir" -maxdepth 1 -name '*.log' | wc -l)
  memcheck_lines+=("memcheck $name: $cases cases, kvfuzz exit $rc, $logs worker logs, $errors memcheck errors (logs $dir/)")
  { [ "$rc" -le 1 ] && [ "$errors" -eq 0 ] && [ "$logs" -gt 0 ]; } || echo 1 >"$out/memcheck.rc"
}
if [ "$memcheck_cases" -gt 0 ] && command -v compute-sanitizer >/dev/null; then
  echo 0 >"$out/memcheck.rc"
  [ -f build/adapters/libcuda_page_table.so ] && memcheck "" "$memcheck_cases" "${profile_args[*]}" KVFUZZ_CUDA_EXACT_BUFFERS=1
  if [ "$fa3_present" = 1 ] && [ "${KVFUZZ_GPU_FA3_MEMCHECK_CASES:-20}" -gt 0 ]; then
    memcheck fa3_page_table "${KVFUZZ_GPU_FA3_MEMCHECK_CASES:-20}" "$(profiles_of fa3_page_table)" PYTORCH_NO_CUDA_MEMORY_CACHING=1
  elif [ "$fa3_present" = 0 ]; then
    echo "== memcheck of fa3_page_table skipped: no FA3 library at $fa3"
  fi
fi

# 6. The table.
status=0
echo
# The packages' releases, for the known issues' affected ranges (a fixed bug that comes back is a regression).
KVFUZZ_GPU_VERSIONS="sglang=$sglang_release $(PYTHONPATH=$site python3 -c '
import importlib.metadata as m
for dist, name in (("flashinfer-python", "flashinfer"), ("torch", "torch"), ("triton", "triton")):
    try: print(name + "=" + m.version(dist).split("+")[0], end=" ")
    except m.PackageNotFoundError: pass')" KVFUZZ_GPU_SECONDS=$seconds python3 ci/gpu_table.py "$out" "${names[@]}" || status=1
if [ "${#memcheck_lines[@]}" -gt 0 ]; then
  printf '%s\n' "${memcheck_lines[@]}"
  [ "$(cat "$out/memcheck.rc")" -eq 0 ] || status=1
fi
exit $status
