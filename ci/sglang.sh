#!/usr/bin/env bash
# sglang's real attention backends under kvfuzz (adapters/sglang/): the release's own metadata code
# (FlashAttentionBackend, TritonAttnBackend, FlashInferAttnBackend; the MLA backends FlashMLABackend,
# FlashInferMLAAttnBackend, FlashAttentionBackend on MLA models) builds each case's metadata and kvfuzz's checked
# executor of that family runs it.
#
#   bash ci/sglang.sh seeds            # each seed bug found in the release, gone with its upstream fix
#                                      # (MLA_EXTRA=1: FA3 MLA's seed and the MLA mutant too)
#   bash ci/sglang.sh releases         # seed bugs found in the release that shipped them, gone in the
#                                      # release that fixed them (installs those releases too)
#   bash ci/sglang.sh matrix           # every seed case against every release (RELEASES; SEEDS_OF: only the
#                                      # seeds of these backends)
#   bash ci/sglang.sh known            # each known issue's minimal case at its release, fingerprinted: triaged
#                                      # as that issue, nothing NEW (installs the releases it names)
#   bash ci/sglang.sh fingerprint CASE BACKEND [PLANNER FLAGS]   # one case's fingerprints at the release
#                                      # (SGLANG_VERSION): what `kvfuzz bisect` runs at each release
#   bash ci/sglang.sh campaign [N]     # N generated cases (default 300) per backend (BACKENDS, default
#                                      # "fa triton flashinfer"; the MLA backends flashmla, flashinfer_mla,
#                                      # fa3_mla run MLA models; NAME_det, e.g. flashinfer_det, serves as
#                                      # --enable-deterministic-inference does), each finding triaged
#                                      # against known_issues.json
#
# Installs, once, into .sglang/ (ignored, never committed): the pinned sglang release's Python
# source (SGLANG_VERSION, default 0.5.10.post1; 0.5.11, 0.5.12.post1, 0.5.13, 0.5.23 too) and, where
# the Python running this has no PyTorch, torch 2.11.0 + triton 3.6.0 in .sglang/venv. DEVICE=cpu
# (default) runs the Triton metadata kernels in Triton's interpreter; DEVICE=cuda on a GPU.
# KVFUZZ: the kvfuzz binary (default build/fuzz/kvfuzz; ci/build.sh builds it). For the offline test of
# the campaign's exit path (adapters/tests/sglang_campaign_test.sh): SGLANG_ROOT (default .sglang) and
# SGLANG_ADAPTER, a planner command used instead of sglang_planner.py, which skips the installs.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${SGLANG_VERSION:-0.5.10.post1}
DEVICE=${DEVICE:-cpu}
KVFUZZ=${KVFUZZ:-build/fuzz/kvfuzz}
ROOT=${SGLANG_ROOT:-.sglang}
SITE=$ROOT/$VERSION

usage() { echo "usage: bash ci/sglang.sh seeds | releases | matrix | known | campaign [CASES] | fingerprint CASE BACKEND [FLAGS]" >&2; exit 2; }
[ $# -ge 1 ] || usage
[ -x "$KVFUZZ" ] || { echo "ci/sglang.sh: $KVFUZZ not found: build kvfuzz first (bash ci/build.sh)" >&2; exit 2; }

source ci/engine_env.sh
if [ -n "${SGLANG_ADAPTER:-}" ]; then PY=python3; else PY=$(python_with_torch); fi
# msgspec: 0.5.23's ServerArgs, runtime context and KV index tables are msgspec Structs (real, not
# stubbed). Installed into .sglang/pyextra (sglang_planner.py puts it on sys.path), from .gpu/wheels
# on a machine without network (ci/gpu_wheels.py fetches it), else from the index.
if [ -z "${SGLANG_ADAPTER:-}" ] && ! PYTHONPATH=$ROOT/pyextra "$PY" -c 'import msgspec' 2>/dev/null; then
  "$PY" -m pip install -q --no-deps --target "$ROOT/pyextra" --no-index --find-links .gpu/wheels "msgspec==0.22.0" \
    2>/dev/null || retrying "$PY" -m pip install -q --no-deps --target "$ROOT/pyextra" "msgspec==0.22.0" >&2
fi
torch_cuda_libs
# install VERSION: the release's Python source, unpacked from its wheel (0.5.11 on the wheels are
# CPython-3.11 manylinux builds; only their Python source is used, so any tag serves).
install() {
  local version=$1 site=$ROOT/$1
  [ -d "$site/sglang" ] && return
  echo "== installing sglang $version's source into $site" >&2
  mkdir -p "$ROOT/wheels"
  retrying python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_34_x86_64 \
    --platform any "sglang==$version" -d "$ROOT/wheels"
  rm -rf "$site.tmp" && mkdir -p "$site.tmp"
  python3 -m zipfile -e "$(ls "$ROOT"/wheels/sglang-"$version"-*.whl | head -1)" "$site.tmp"
  mv "$site.tmp" "$site"
}
install "$VERSION"
RELEASE=${VERSION//./_}
BACKENDS=${BACKENDS:-fa triton flashinfer}
adapter() { echo "${SGLANG_ADAPTER:-$PY adapters/sglang/sglang_planner.py --site $SITE --device $DEVICE $*}"; }
# found_each BACKEND SITE NAME "ADAPTER FLAGS" FILE...: check_kinds's lines for the cases, one adapter
# process for all ("unsupported" where the adapter answers so, which the seed verdicts count as not found)
found_each() {
  local backend=$1 site=$2 name=$3 flags=$4
  shift 4
  check_kinds "$name:$(family_executor "$backend")" \
    "$PY adapters/sglang/sglang_planner.py --site $site --device $DEVICE --backend $backend${flags:+ $flags}" "$@"
}
# found BACKEND CASE SITE NAME [ADAPTER FLAGS]: the case's kinds
found() {
  local backend=$1 file=$2 site=$3 name=$4
  shift 4
  found_each "$backend" "$site" "$name" "$*" "$file" | cut -f2
}
family_executor() {
  case $1 in fa) echo fa ;; triton) echo triton ;; flashinfer) echo flashinfer_paged ;; flashmla | flashinfer_mla | fa3_mla) echo mla ;; esac
}
# What ci/engine_env.sh's releases_table and known_table call (DET True: --deterministic).
found_at() { found "$1" "$2" "$ROOT/$3" "sglang_$1_${3//./_}"; }
backend_name() { echo "sglang_$1_${2//./_}$([ "${3:-False}" = True ] && echo _det)"; }
adapter_at() { echo "$PY adapters/sglang/sglang_planner.py --site $ROOT/$2 --device $DEVICE --backend $1$([ "${3:-False}" = True ] && echo " --deterministic")"; }

# The seed cases: backend : case file : what the release does with it : mode
#   fix=N     found in the release, gone with upstream fix N re-applied (adapters/sglang/fixes.py)
#   change=N  clean in the release, found with upstream change N applied (one later reverted)
#   -         found in the release, no upstream fix: adapters/sglang/known_issues.json triages it
#   clean     clean in the release (a path the adapter drives, e.g. a CUDA-graph replay); its mutants
#             below must be caught
# mode "det": the planner serves as --enable-deterministic-inference does; a fifth field names the
# release the seed runs at (default SGLANG_VERSION)
seeds="fa:corpus/regressions/fa__fa_swa_spec_untranslated.json:fix=24617
       fa:corpus/regressions/fa__fa_draft_extend_v2_double.json:change=26512
       fa:corpus/regressions/fa__fa_local_token_table.json:fix=32902
       triton:corpus/sglang/triton_swa_decode_window.json:fix=32087
       fa:corpus/sglang/fa_mixed_local.json:-
       fa:corpus/sglang/fa_draft_swa_cascade.json:-
       fa:corpus/sglang/fa_draft_local.json:-
       triton:corpus/sglang/triton_no_local.json:-
       triton:corpus/sglang/triton_draft_swa.json:-
       triton:corpus/sglang/triton_verify_tree_window.json:-
       flashinfer:corpus/sglang/flashinfer_swa_ragged.json:-
       flashinfer:corpus/sglang/flashinfer_verify_swa.json:-
       flashinfer:corpus/sglang/flashinfer_softcap_plan.json:-
       flashinfer:corpus/sglang/flashinfer_det_swa_window.json:fix=31501:det
       flashinfer:corpus/sglang/flashinfer_det_draft_extend_window.json:fix=31501:det
       flashinfer:corpus/sglang/flashinfer_graph_decode_swa.json:clean
       fa:corpus/sglang/fa_draft_extend_v2_graph.json:clean::0.5.23"
# The MLA backends (MLA models; docs/engines.md): FlashMLA's MIXED crash, then clean runs of each
# backend's CUDA-graph decode / verify and prefill paths (the vLLM MLA seeds serve as cases).
seeds+=" flashmla:corpus/sglang/flashmla_mixed.json:- flashmla:corpus/vllm/mla_graph_decode.json:clean
         flashmla:corpus/vllm/mla_verify_chain.json:clean"
seeds+=" flashinfer_mla:corpus/sglang/flashinfer_mla_ragged.json:clean flashinfer_mla:corpus/vllm/mla_mixed_context.json:clean
         flashinfer_mla:corpus/vllm/mla_verify_chain.json:clean flashinfer_mla:corpus/sglang/mla_draft_extend.json:clean"
# MLA_EXTRA=1: FA3 MLA's seed too (one more adapter process, about 10 s; CI leaves it out for time)
[ "${MLA_EXTRA:-0}" = 0 ] || seeds+=" fa3_mla:corpus/vllm/mla_verify_chain.json:clean"

# Mutants of clean seeds, each in a copy: NAME : where (adapters: a copy of adapters/; release: of one of
# the release's backend files) : the finding kind that must be reported : backend : the clean seed it
# runs. Planted by mutant() below. The FlashInfer two add about 10 s to `seeds` (measured on 2 cores
# under load 4, 2026-11-27; the clean seed itself rides in the FlashInfer process).
#   replay-capture-seq-lens  the adapter replays with the capture batch's seq_lens (the fill value 1):
#                            sglang_release.init_metadata, both the <= 0.5.12 and the >= 0.5.13 path
#   swa-schedule-unclamped   the release's window wrapper scheduled (global_override_indptr_cpu) from
#                            the unclamped seq_lens_cpu: only fast_decode_plan reads it (plan-run)
#   mla-graph-indptr         FlashInfer MLA's decode graph replay schedules from a host kv_indptr one
#                            too large (what fast_mla_decode_plan hands the kernel): rows read the
#                            next entries of the captured kv_indices. Only with MLA_EXTRA=1 (about
#                            20 s more; CI leaves it out: ctest sglang_mla_kernels_test checks what the
#                            recorder reads at replay)
mutants="replay-capture-seq-lens:adapters:plan-run:flashinfer:corpus/sglang/flashinfer_graph_decode_swa.json
         swa-schedule-unclamped:release:plan-run:flashinfer:corpus/sglang/flashinfer_graph_decode_swa.json"
[ "${MLA_EXTRA:-0}" = 0 ] ||
  mutants+=" mla-graph-indptr:release:stride-divide:flashinfer_mla:corpus/vllm/mla_graph_decode.json"

# release_copy DIR FILE: a copy of the release under DIR (links) whose FILE (under sglang/srt/layers/attention/)
# is a real copy, to plant in; prints FILE's path in the copy
release_copy() {
  local site=$1/site file=sglang/srt/layers/attention/$2
  cp -rs "$(realpath "$SITE")" "$site" && rm "$site/$file" && cp "$SITE/$file" "$site/$file" && echo "$site/$file"
}
# mutant NAME DIR BACKEND: plants NAME in a copy under DIR; prints the adapter command that runs it
mutant() {
  local name=$1 dir=$2 backend=$3 adapters=adapters site=$SITE file
  case $name in
    replay-capture-seq-lens)
      cp -r adapters "$dir/adapters" && adapters=$dir/adapters
      ln -s "$(realpath "$ROOT")" "$dir/.sglang"  # the planner's msgspec (.sglang/pyextra, 0.5.23)
      plant "$adapters/sglang/sglang_release.py" "replay(n, fb.req_pool_indices, fb.seq_lens, " \
        "replay(n, fb.req_pool_indices, seq_lens, " &&
        plant "$adapters/sglang/sglang_release.py" $'\n        seq_lens.copy_(fb.seq_lens)\n' $'\n' || return 1 ;;
    swa-schedule-unclamped|mla-graph-indptr)  # ci/plant.py's release mutants
      file=$(python3 ci/plant.py --file "$name") && release_copy "$dir" "${file#sglang/srt/layers/attention/}" >/dev/null &&
        site=$dir/site && python3 ci/plant.py --release "$name" "$site" || return 1 ;;
  esac
  echo "$PY $adapters/sglang/sglang_planner.py --site $site --device $DEVICE --backend $backend"
}
# plant FILE OLD NEW: OLD (exactly once in FILE) replaced by NEW
plant() { python3 ci/plant.py "$@"; }

case "$1" in
  seeds)
    failed=0
    printf '%-14s %-34s %-13s %-44s %-13s %s\n' backend case upstream "sglang $VERSION" "with it" verdict
    declare -A jobs kinds  # each (backend, fix, mode)'s seeds go to one adapter process; the table reads kinds
    for seed in $seeds; do
      IFS=: read -r backend file effect mode release <<<"$seed"
      at=${release:-$VERSION}
      jobs["$backend:-:$mode:$at"]+=" $file"
      case $effect in fix=*|change=*) jobs["$backend:${effect#*=}:$mode:$at"]+=" $file" ;; esac
    done
    for job in "${!jobs[@]}"; do
      IFS=: read -r backend n mode at <<<"$job"
      install "$at"
      name=sglang_${backend}_${at//./_} flags=""
      [ "$n" = - ] || { name+=_fix$n flags="--fix $n"; }
      [ "$mode" != det ] || { name+=_det flags+=" --deterministic"; }
      # shellcheck disable=SC2086  # the files are words
      while IFS=$'\t' read -r file got; do kinds["$job:$file"]=$got; done < <(found_each "$backend" "$ROOT/$at" "$name" "$flags" ${jobs[$job]})
    done
    for seed in $seeds; do
      IFS=: read -r backend file effect mode release <<<"$seed"
      at=${release:-$VERSION}
      before=${kinds["$backend:-:$mode:$at:$file"]-unreadable }
      after=- verdict=ok
      case $effect in fix=*|change=*) after=${kinds["$backend:${effect#*=}:$mode:$at:$file"]-unreadable } ;; esac
      case $effect in
        fix=*)    is_finding "$before" || verdict="NOT FOUND in the release"
                  [ -z "$after" ] || verdict="$verdict; NOT GONE with the fix" ;;
        change=*) [ -z "$before" ] || verdict="FOUND in the release"
                  is_finding "$after" || verdict="$verdict; NOT FOUND with the change" ;;
        clean)    [ -z "$before" ] || verdict="NOT CLEAN in the release" ;;
        *)        is_finding "$before" || verdict="NOT FOUND in the release" ;;
      esac
      [ "$verdict" = ok ] || { verdict=${verdict#; }; failed=1; }
      upstream=-
      case $effect in fix=*|change=*) upstream="${effect%%=*} #${effect#*=}" ;; esac
      printf '%-14s %-34s %-13s %-44s %-13s %s\n' "$backend" "$(basename "$file" .json)${release:+ @$release}" "$upstream" \
        "${before:-clean}" "$([ "$after" = - ] && echo - || echo "${after:-clean}")" "$verdict"
    done
    work=$(mktemp -d)
    for entry in $mutants; do
      IFS=: read -r name where kind backend seed <<<"$entry"
      mkdir -p "$work/$name"
      got=unreadable verdict="NOT CAUGHT"
      if command=$(mutant "$name" "$work/$name" "$backend"); then
        got=$(check_kinds "sglang_${backend}_$RELEASE:$(family_executor "$backend")" "$command" "$seed" | cut -f2)
        [[ " $got" == *" $kind "* ]] && verdict=ok
      fi
      [ "$verdict" = ok ] || failed=1
      printf '%-14s %-34s %-13s %-44s %-13s %s\n' "$backend" "mutant $name" "($where)" "${got:-clean}" - "$verdict"
    done
    rm -rf "$work"
    exit $failed ;;
  releases)
    # Seed bugs in the releases that shipped them and gone in the release that fixed them, unpatched:
    # backend : case file : upstream PR : shipped in : fixed in
    # (the last two rows also drive the releases' per-release differences: 0.5.14's runtime_context without
    # publish and its attention CP group; 0.5.19 and 0.5.20's ParallelState on the runner, publish path)
    rows="fa:corpus/regressions/fa__fa_swa_spec_untranslated.json:24617:0.5.11:0.5.12.post1
          triton:corpus/sglang/triton_draft_extend_v2_graph.json:26651:0.5.12.post1:0.5.13
          flashinfer:corpus/sglang/flashinfer_swa_ragged.json:26513:0.5.12.post1:0.5.13
          flashinfer:corpus/sglang/flashinfer_verify_swa.json:22679:0.5.13.post1:0.5.14
          fa:corpus/regressions/fa__fa_local_token_table.json:32902:0.5.19:0.5.20"
    releases_table "$rows" adapters/sglang/known_issues.json sglang ;;
  matrix)
    # Every seed case against every release (RELEASES, default all five): the finding kinds each shows.
    # SEEDS_OF: only the seeds of these backends (e.g. "flashmla flashinfer_mla fa3_mla"); default all.
    releases=${RELEASES:-0.5.10.post1 0.5.11 0.5.12.post1 0.5.13 0.5.23}
    printf '%-14s %-32s' backend case
    for r in $releases; do install "$r"; printf ' %-22s' "$r"; done
    echo
    for seed in $seeds triton:corpus/sglang/triton_draft_extend_v2_graph.json:-; do
      IFS=: read -r backend file effect mode _ <<<"$seed"
      [ -z "${SEEDS_OF:-}" ] || [[ " $SEEDS_OF " == *" $backend "* ]] || continue
      det="" suffix=""
      [ "$mode" = det ] && det=--deterministic suffix=_det
      printf '%-14s %-32s' "$backend" "$(basename "$file" .json)"
      for r in $releases; do
        kinds=$(found "$backend" "$file" "$ROOT/$r" "sglang_${backend}_${r//./_}$suffix" $det)
        printf ' %-22s' "$(echo "${kinds:-clean}" | sed 's/ $//; s/ /,/g')"
      done
      echo
    done ;;
  campaign)
    # Findings are expected (the release has known bugs): the exit is the triage's (every finding of
    # each campaign's index, by fingerprint): 1 for a NEW finding or a regression, 3 for a finding
    # it cannot read, 0 only when every finding is known.
    out=${SGLANG_OUT:-findings-sglang/$VERSION}
    for token in $BACKENDS; do  # fa, triton, flashinfer; NAME_det: served as --enable-deterministic-inference
      backend=${token%_det} det="" suffix=""
      [ "$token" != "$backend" ] && det=--deterministic suffix=_det
      # FlashMLA takes pages of 64 only: the first profile whose pages reach 64 (reference/generate.cc)
      profile=tiny
      [ "$backend" != flashmla ] || profile=medium
      echo "== sglang $VERSION $token backend: ${2:-300} $profile cases"
      rm -rf "${out:?}/$token"
      "$KVFUZZ" run --cases "${2:-300}" --profile $profile \
        --backend "sglang_${backend}_$RELEASE$suffix:$(family_executor "$backend")" \
        --adapter "$(adapter --backend "$backend" $det)" --out "$out/$token" --no-shrink --jobs "$(nproc)" || [ $? -eq 1 ]
    done
    status=0
    for backend in $BACKENDS; do
      echo "== triage of $out/$backend (adapters/sglang/known_issues.json)"
      python3 adapters/triage.py "$out/$backend" --issues adapters/sglang/known_issues.json || { rc=$?; [ $status -ne 0 ] || status=$rc; }
    done
    exit $status ;;
  known)
    # Every known issue's minimal case at its release, fingerprinted: triaged as that issue (ci/engine_env.sh).
    known_table adapters/sglang/known_issues.json ;;
  fingerprint)
    # kvfuzz fingerprint's lines of CASE on BACKEND at the release (--deterministic among the flags: _det).
    [ $# -ge 3 ] && [ -n "$(family_executor "$3")" ] || usage
    file=$2 backend=$3
    shift 3
    suffix=""
    case " $* " in *" --deterministic "*) suffix=_det ;; esac
    "$KVFUZZ" fingerprint "$file" --backend "sglang_${backend}_$RELEASE$suffix:$(family_executor "$backend")" \
      --adapter "$(adapter --backend "$backend" "$@")" ;;
  *) usage ;;
esac
