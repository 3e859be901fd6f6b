#!/usr/bin/env bash
# sglang's real attention backends under kvfuzz (adapters/sglang/): the release's own metadata code
# (FlashAttentionBackend, TritonAttnBackend, FlashInferAttnBackend) builds each case's metadata and kvfuzz's checked
# executor of that family runs it.
#
#   bash ci/sglang.sh seeds            # each seed bug found in the release, gone with its upstream fix
#   bash ci/sglang.sh campaign [N]     # N generated cases (default 300) per backend (BACKENDS, default
#                                      # "fa triton flashinfer"; NAME_det, e.g. flashinfer_det, serves as
#                                      # --enable-deterministic-inference does), each finding triaged
#                                      # against known_issues.json
#
# Installs, once, into .sglang/ (ignored, never committed): the pinned sglang release's Python
# source (SGLANG_VERSION, default 0.5.10.post1, the newest this project's registry serves) and, where
# the Python running this has no PyTorch, torch 2.11.0 + triton 3.6.0 in .sglang/venv. DEVICE=cpu
# (default) runs the Triton metadata kernels in Triton's interpreter; DEVICE=cuda on a GPU.
# KVFUZZ: the kvfuzz binary (default build/fuzz/kvfuzz; ci/build.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${SGLANG_VERSION:-0.5.10.post1}
DEVICE=${DEVICE:-cpu}
KVFUZZ=${KVFUZZ:-build/fuzz/kvfuzz}
ROOT=.sglang
SITE=$ROOT/$VERSION

usage() { echo "usage: bash ci/sglang.sh seeds | campaign [CASES]" >&2; exit 2; }
[ $# -ge 1 ] || usage
[ -x "$KVFUZZ" ] || { echo "ci/sglang.sh: $KVFUZZ not found: build kvfuzz first (bash ci/build.sh)" >&2; exit 2; }

python_with_torch() {
  if python3 -c 'import torch, triton, numpy' 2>/dev/null; then echo python3; return; fi
  local venv=$ROOT/venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, triton, numpy' 2>/dev/null; then
    echo "== installing torch 2.11.0 + triton 3.6.0 into $venv (about 900 MB, once)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --no-deps torch==2.11.0 triton==3.6.0 nvidia-cufile==1.15.1.6 \
      nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 >&2
    # numpy < 2.4: Triton 3.6's interpreter converts 1-element arrays with int().
    "$venv/bin/pip" install -q --no-deps "numpy<2.4" packaging filelock typing_extensions "sympy==1.14.0" "mpmath<1.4" \
      networkx jinja2 markupsafe fsspec >&2
  fi
  echo "$venv/bin/python"
}

PY=$(python_with_torch)
# The PyPI torch wheel's CUDA libraries not in the CUDA toolkit come from the nvidia-* wheels.
for lib in "$ROOT"/venv/lib/python3*/site-packages/nvidia/*/lib; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="$(realpath "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
if [ ! -d "$SITE/sglang" ]; then
  echo "== installing sglang $VERSION's source into $SITE" >&2
  mkdir -p "$ROOT/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: "sglang==$VERSION" -d "$ROOT/wheels"
  mkdir -p "$SITE.tmp" && python3 -m zipfile -e "$ROOT/wheels/sglang-$VERSION-py3-none-any.whl" "$SITE.tmp"
  mv "$SITE.tmp" "$SITE"
fi
RELEASE=${VERSION//./_}
BACKENDS=${BACKENDS:-fa triton flashinfer}
adapter() { echo "$PY adapters/sglang/sglang_planner.py --site $SITE --device $DEVICE $*"; }
family_executor() { case $1 in fa) echo fa ;; triton) echo triton ;; flashinfer) echo flashinfer_paged ;; esac; }

case "$1" in
  seeds)
    # backend : case file : the upstream fix that removes it (adapters/sglang/fixes.py)
    seeds="fa:corpus/regressions/fa__fa_swa_spec_untranslated.json:24617
           fa:corpus/regressions/fa__fa_draft_extend_v2_prefix.json:26512
           fa:corpus/regressions/fa__fa_draft_extend_v2_double.json:26512
           fa:corpus/regressions/fa__fa_local_token_table.json:32902
           triton:corpus/sglang/triton_swa_decode_window.json:32087
           fa:corpus/sglang/fa_mixed_local.json:-
           fa:corpus/sglang/fa_draft_swa_cascade.json:-
           fa:corpus/sglang/fa_draft_local.json:-
           triton:corpus/sglang/triton_no_local.json:-
           triton:corpus/sglang/triton_draft_swa.json:-
           triton:corpus/sglang/triton_verify_tree_window.json:-
           flashinfer:corpus/sglang/flashinfer_swa_ragged.json:-
           flashinfer:corpus/sglang/flashinfer_draft_extend_v2.json:-
           flashinfer:corpus/sglang/flashinfer_verify_swa.json:-
           flashinfer:corpus/sglang/flashinfer_det_swa_window.json:31501:det"
    # (fix "-": found in the release, no upstream fix: adapters/sglang/known_issues.json triages it;
    # a fourth field "det": the planner serves as --enable-deterministic-inference does)
    failed=0
    printf '%-10s %-34s %-7s %-44s %-13s %s\n' backend case fix "sglang $VERSION" "with the fix" verdict
    for seed in $seeds; do
      IFS=: read -r backend file fix mode <<<"$seed"
      det="" suffix=""
      [ "$mode" = det ] && det=--deterministic suffix=_det
      name=sglang_${backend}_$RELEASE pair=$(family_executor "$backend")
      found=$("$KVFUZZ" check "$file" --backend "$name$suffix:$pair" --adapter "$(adapter --backend "$backend" $det)" 2>&1 |
              grep -o "^$name$suffix:$pair: [a-z-]*" | sed "s/^$name$suffix:$pair: //" | sort -u | tr '\n' ' ' || true)
      rc=0 after=-
      if [ "$fix" != - ]; then
        "$KVFUZZ" check "$file" --backend "${name}_fix$fix$suffix:$pair" \
          --adapter "$(adapter --backend "$backend" --fix "$fix" $det)" \
          >/dev/null 2>&1 || rc=$?
        after=$([ $rc -eq 0 ] && echo clean || echo "exit $rc")
        fix="#$fix"
      fi
      verdict=ok
      if [ -z "$found" ] || [ "$found" = "ok " ]; then verdict="NOT FOUND in the release"; failed=1; fi
      if [ "$rc" -ne 0 ]; then verdict="$verdict; NOT GONE with the fix (exit $rc)"; failed=1; fi
      printf '%-10s %-34s %-7s %-44s %-13s %s\n' "$backend" "$(basename "$file" .json)" "$fix" "${found:-clean}" \
        "$after" "$verdict"
    done
    exit $failed ;;
  campaign)
    # Findings are expected (the release has known bugs): the exit is the triage's, 1 only for a
    # finding that matches no entry of adapters/sglang/known_issues.json.
    out=findings-sglang/$VERSION
    for token in $BACKENDS; do  # fa, triton, flashinfer; NAME_det: served as --enable-deterministic-inference
      backend=${token%_det} det="" suffix=""
      [ "$token" != "$backend" ] && det=--deterministic suffix=_det
      echo "== sglang $VERSION $token backend: ${2:-300} cases"
      rm -rf "${out:?}/$token"
      "$KVFUZZ" run --cases "${2:-300}" --profile tiny \
        --backend "sglang_${backend}_$RELEASE$suffix:$(family_executor "$backend")" \
        --adapter "$(adapter --backend "$backend" $det)" --out "$out/$token" --no-shrink --jobs "$(nproc)" || [ $? -eq 1 ]
    done
    status=0
    for backend in $BACKENDS; do
      echo "== triage of $out/$backend (adapters/sglang/known_issues.json)"
      python3 adapters/triage.py "$out/$backend" --issues adapters/sglang/known_issues.json || status=$?
    done
    exit $status ;;
  *) usage ;;
esac
