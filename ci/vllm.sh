#!/usr/bin/env bash
# vLLM's real attention-metadata builders under kvfuzz (adapters/vllm/): the release's own
# FlashAttentionMetadataBuilder or TritonAttentionMetadataBuilder (and the ChunkedLocalAttention
# builder over it), FlashInferMetadataBuilder or TreeAttentionMetadataBuilder, BlockTable and
# KV-cache grouping build each case's metadata; kvfuzz's checked page_table (fa, triton) or
# paged_csr (flashinfer, tree: flashinfer_paged) executor runs it.
#
#   bash ci/vllm.sh install            # installs the release, those of the releases table and those of the
#                                      # known issues' minimal cases (for ctest);
#                                      # needs no kvfuzz build (every other command does)
#   bash ci/vllm.sh seeds              # the seed cases on the release (VLLM_VERSION): each as the newest release does it
#   bash ci/vllm.sh releases           # known bugs found in the release that shipped them, gone in the
#                                      # release that fixed them (installs those releases too)
#   bash ci/vllm.sh matrix             # every seed case against every release (RELEASES)
#   bash ci/vllm.sh known              # each known issue's minimal case at its release, fingerprinted:
#                                      # triaged as that issue (adapters/vllm/known_issues.json)
#   bash ci/vllm.sh fingerprint CASE BACKEND [PLANNER FLAGS]   # one case's fingerprints at the release
#                                      # (VLLM_VERSION): what `kvfuzz bisect` runs at each release
#   bash ci/vllm.sh campaign [N]       # N generated cases (default 2000; vLLM's FlashAttention runs block
#                                      # sizes of 16 and up, so most generated cases are unsupported) per
#                                      # backend (BACKENDS, default "fa triton flashinfer"; "tree" on
#                                      # 0.10.x and 0.11.x, TreeAttention; MLA: mla_flashmla mla_flashattn
#                                      # mla_triton), each finding triaged against
#                                      # adapters/vllm/known_issues.json; ADAPTER_FLAGS: planner flags
#                                      # for the campaign (e.g. "--cudagraphs every-step --cascade always")
#
# Installs, once, into .vllm/ (ignored, never committed): the release's Python source
# (VLLM_VERSION, default 0.33.0, the newest on PyPI; 0.10.2 and any release from 0.11.0 on), unpacked from its
# wheel (about 340 MB, downloaded once into .vllm/wheels; only its .py files are kept), and
# pydantic into .vllm/pyextra. PyTorch + Triton: the venv ci/sglang.sh makes (.sglang/venv,
# ci/engine_env.sh). DEVICE=cpu (default) runs the Triton slot-mapping kernel in Triton's interpreter.
# KVFUZZ: the kvfuzz binary (default build/fuzz/kvfuzz; ci/build.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${VLLM_VERSION:-0.33.0}
DEVICE=${DEVICE:-cpu}
KVFUZZ=${KVFUZZ:-build/fuzz/kvfuzz}
ROOT=.vllm

usage() { echo "usage: bash ci/vllm.sh install | seeds | releases | matrix | known | campaign [CASES]" >&2; exit 2; }
[ $# -ge 1 ] || usage
# install needs only Python: every other command runs kvfuzz.
[ "$1" = install ] || [ -x "$KVFUZZ" ] || { echo "ci/vllm.sh: $KVFUZZ not found: build kvfuzz first (bash ci/build.sh)" >&2; exit 2; }
case $VERSION in
  0.10.2|0.1[1-9]*|0.[2-9][0-9]*) ;;
  *) echo "ci/vllm.sh: VLLM_VERSION=$VERSION: the adapter drives 0.10.2 and the releases from 0.11.0 on" >&2; exit 2 ;;
esac

source ci/engine_env.sh
PY=$(python_with_torch)
torch_cuda_libs
# pydantic: vLLM's configuration classes are pydantic dataclasses (real, not stubbed).
if ! PYTHONPATH=$ROOT/pyextra "$PY" -c 'import pydantic' 2>/dev/null; then
  retrying "$PY" -m pip install -q --no-deps --target "$ROOT/pyextra" "pydantic==2.12.5" "pydantic-core==2.41.5" \
    "annotated-types==0.7.0" "typing-inspection==0.4.2" >&2
fi
# install VERSION: the release's Python source. Every vLLM wheel is one cp38-abi3 x86_64 manylinux
# build, but its glibc tag moves between releases (0.21.0's is manylinux_2_24; with only
# manylinux1, _2_28 and _2_31 listed pip found no wheel of 0.20.0 to 0.21.0) and pip takes a
# --platform tag literally (it widens manylinux2014 and manylinux2010 only), so every manylinux tag is
# listed; only the wheel's .py files are kept.
PLATFORMS=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64)
for glibc in $(seq 5 45); do PLATFORMS+=(--platform "manylinux_2_${glibc}_x86_64"); done
install() {
  unpack_wheel vllm "$1" "$ROOT/$1" --python-version 3.12 "${PLATFORMS[@]}"
}
install "$VERSION"
BACKENDS=${BACKENDS:-fa triton flashinfer}
family_executor() { case $1 in fa|triton) echo fa ;; flashinfer|tree) echo flashinfer_paged ;; mla_*) echo mla ;; esac; }
adapter() { echo "$PY adapters/vllm/vllm_planner.py --site $ROOT/$1 --device $DEVICE --backend $2"; }
# found_each BACKEND RELEASE FILE...: check_kinds's lines for the cases, one adapter process for all
# ("unsupported" where the adapter answers so, which the verdicts count as not found); SEED_FLAGS:
# more planner flags
found_each() {
  local backend=$1 release=$2
  shift 2
  check_kinds "vllm_${backend}_${release//./_}:$(family_executor "$backend")" \
    "$(adapter "$release" "$backend")${SEED_FLAGS:+ $SEED_FLAGS}" "$@"
}
found() { found_each "$1" "$3" "$2" | cut -f2; }  # found BACKEND CASE RELEASE: the case's kinds
# What ci/engine_env.sh's releases_table and known_table call.
found_at() { found "$1" "$2" "$3"; }
backend_name() { echo "vllm_$1_${2//./_}"; }
adapter_at() { adapter "$2" "$1"; }

# The seed cases: backend : case file : what the newest release does with it [: planner flags, the
# words joined by commas]
#   clean      every property holds (the metadata path the case exercises works)
#   found=ID   a finding, triaged by adapters/vllm/known_issues.json entry ID
seeds="fa:corpus/vllm/fa_group_window_full_layer.json:clean
       fa:corpus/vllm/fa_local_mixed.json:clean
       fa:corpus/vllm/fa_hybrid_swa_null_blocks.json:clean
       fa:corpus/vllm/fa_local_graph_decode.json:clean
       fa:corpus/vllm/fa_full_graph_decode.json:clean
       fa:corpus/vllm/v2_graph_decode_swa.json:clean
       fa:corpus/vllm/verify_chain_swa.json:clean
       triton:corpus/vllm/verify_chain_swa.json:clean
       triton:corpus/vllm/fa_full_graph_decode.json:clean
       fa:corpus/vllm/draft_decode_rejected.json:clean
       triton:corpus/vllm/draft_decode_rejected.json:clean
       fa:corpus/vllm/draft_extend_v2.json:clean
       fa:corpus/vllm/draft_decode_groups_gpt_oss.json:clean
       triton:corpus/vllm/draft_decode_groups_gpt_oss.json:clean
       flashinfer:corpus/vllm/flashinfer_decode_swa.json:clean
       flashinfer:corpus/vllm/flashinfer_mixed_swa.json:clean
       flashinfer:corpus/vllm/fa_full_graph_decode.json:clean
       flashinfer:corpus/vllm/flashinfer_graph_decode_swa.json:clean
       flashinfer:corpus/vllm/flashinfer_graph_mixed_swa.json:clean
       mla_flashmla:corpus/vllm/mla_decode.json:clean
       mla_flashattn:corpus/vllm/mla_mixed_context.json:clean
       mla_triton:corpus/vllm/mla_mixed_context.json:clean
       mla_flashmla:corpus/vllm/mla_graph_decode.json:clean
       mla_flashmla:corpus/vllm/mla_verify_chain.json:clean
       mla_flashattn:corpus/vllm/mla_verify_chain.json:clean
       fa:corpus/vllm/gpt_oss_sinks_graph_decode.json:clean
       triton:corpus/vllm/gpt_oss_sinks_graph_decode.json:clean
       fa:corpus/vllm/fa_sinks_cascade_heuristic.json:clean
       mla_flashmla:corpus/vllm/mla_fp8_graph_decode.json:clean:--kv-cache-dtype,fp8
       fa:corpus/vllm/fa_fp8_scales.json:clean:--kv-cache-dtype,fp8
       fa:corpus/vllm/fa_dcp_mixed.json:clean:--dcp,2
       fa:corpus/vllm/fa_dcp_decode.json:clean:--dcp,2"

# Known bugs in the last release that shipped them and gone in the first release with the fix,
# unpatched: backend : case file : upstream PR : last release with it : first release without
rows="fa:corpus/vllm/fa_local_graph_decode.json:26034:0.10.2:0.11.0
      fa:corpus/vllm/fa_aot_num_splits.json:25490:0.10.2:0.11.0
      fa:corpus/vllm/fa_group_window_full_layer.json:51756:0.27.1:0.28.0
      fa:corpus/vllm/draft_decode_rejected.json:29845:0.11.0:0.27.1
      fa:corpus/vllm/draft_decode_max_seq_len.json:32312:0.11.0:0.27.1"

case "$1" in
  install)
    for row in $rows; do
      IFS=: read -r _ _ _ shipped fixed <<<"$row"
      install "$shipped" && install "$fixed"
    done
    # and the release of every known issue's minimal case (`known` runs each there)
    for release in $(python3 -c 'import json, sys; print(*sorted({i["minimal_case"]["release"] for i in json.load(open(sys.argv[1]))["issues"]}))' adapters/vllm/known_issues.json); do
      install "$release"
    done ;;
  seeds)
    failed=0
    printf '%-8s %-32s %-10s %-30s %s\n' backend case expect "vllm $VERSION" verdict
    declare -A kinds  # "backend:flags file" -> kinds: each backend's seeds of one set of flags checked by one adapter process
    for run in $(for seed in $seeds; do IFS=: read -r b _ _ f <<<"$seed"; echo "$b:$f"; done | sort -u); do
      IFS=: read -r backend flags <<<"$run"
      while IFS=$'\t' read -r file got; do kinds["$run $file"]=$got; done < <(SEED_FLAGS=${flags//,/ } found_each "$backend" "$VERSION" \
        $(for seed in $seeds; do IFS=: read -r b f _ fl <<<"$seed"; [ "$b:$fl" != "$run" ] || echo "$f"; done))
    done
    for seed in $seeds; do
      IFS=: read -r backend file expect flags <<<"$seed"
      got=${kinds["$backend:$flags $file"]}
      verdict=ok
      case $expect in
        clean) [ -z "$got" ] || verdict="NOT CLEAN" ;;
        *)     is_finding "$got" || verdict="NOT FOUND" ;;
      esac
      [ "$verdict" = ok ] || failed=1
      printf '%-8s %-32s %-10s %-30s %s\n' "$backend" "$(basename "$file" .json)${flags:+ (${flags//,/ })}" "$expect" "${got:-clean}" "$verdict"
    done
    exit $failed ;;
  releases)
    releases_table "$rows" adapters/vllm/known_issues.json vllm ;;
  matrix)
    releases=${RELEASES:-0.10.2 0.11.0 0.14.0 0.19.0 0.24.0 0.25.0 0.27.1 0.28.0 0.33.0}
    printf '%-6s %-30s' backend case
    for r in $releases; do install "$r"; printf ' %-16s' "$r"; done
    echo
    for seed in $seeds; do
      IFS=: read -r backend file expect <<<"$seed"
      printf '%-6s %-30s' "$backend" "$(basename "$file" .json)"
      for r in $releases; do
        kinds=$(found "$backend" "$file" "$r")
        printf ' %-16s' "$(echo "${kinds:-clean}" | sed 's/ $//; s/ /,/g')"
      done
      echo
    done ;;
  known)
    # Every known issue's minimal case at its release, fingerprinted: triaged as that issue (ci/engine_env.sh).
    known_table adapters/vllm/known_issues.json ;;
  campaign)
    # Findings may be expected (known issues): the exit is the triage's, 1 only for a finding that
    # matches no entry of adapters/vllm/known_issues.json.
    out=findings-vllm/$VERSION
    for backend in $BACKENDS; do
      echo "== vllm $VERSION $backend backend: ${2:-2000} cases"
      rm -rf "${out:?}/$backend"
      "$KVFUZZ" run --cases "${2:-2000}" --profile small medium \
        --backend "vllm_${backend}_${VERSION//./_}:$(family_executor "$backend")" \
        --adapter "$(adapter "$VERSION" "$backend")${ADAPTER_FLAGS:+ $ADAPTER_FLAGS}" --out "$out/$backend" --no-shrink \
        --jobs "$(nproc)" || [ $? -eq 1 ]
    done
    status=0
    for backend in $BACKENDS; do
      echo "== triage of $out/$backend (adapters/vllm/known_issues.json)"
      python3 adapters/triage.py "$out/$backend" --issues adapters/vllm/known_issues.json || status=$?
    done
    exit $status ;;
  fingerprint)
    # kvfuzz fingerprint's lines of CASE on BACKEND at the release.
    [ $# -ge 3 ] && [ -n "$(family_executor "$3")" ] ||
      { echo "usage: bash ci/vllm.sh fingerprint CASE BACKEND [PLANNER FLAGS] (BACKEND: fa triton flashinfer tree mla_*)" >&2; exit 2; }
    file=$2 backend=$3
    shift 3
    "$KVFUZZ" fingerprint "$file" --backend "$(backend_name "$backend" "$VERSION"):$(family_executor "$backend")" \
      --adapter "$(adapter_at "$backend" "$VERSION") $*" ;;
  *) usage ;;
esac
