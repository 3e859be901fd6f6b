#!/usr/bin/env bash
# sglang's real attention backends under kvfuzz (adapters/sglang/): the release's own metadata code
# (FlashAttentionBackend) builds each case's metadata and kvfuzz's checked executor runs it.
#
#   bash ci/sglang.sh seeds            # each seed bug found in the release, gone with its upstream fix
#   bash ci/sglang.sh campaign [N]     # N generated cases (default 300) against the release, then
#                                      # each finding triaged against adapters/sglang/known_issues.json
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
    "$venv/bin/pip" install -q "numpy<2.4" packaging filelock typing_extensions "sympy==1.14.0" "mpmath<1.4" \
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
NAME=sglang_fa_${VERSION//./_}
adapter() { echo "$PY adapters/sglang/sglang_planner.py --site $SITE --device $DEVICE $*"; }

case "$1" in
  seeds)
    # regression case : the upstream fix that removes it (adapters/sglang/fixes.py)
    seeds="fa__fa_swa_spec_untranslated:24617 fa__fa_draft_extend_v2_prefix:26512
           fa__fa_draft_extend_v2_double:26512 fa__fa_local_token_table:32902"
    failed=0
    printf '%-34s %-7s %-30s %-14s %s\n' case fix "sglang $VERSION" "with the fix" verdict
    for seed in $seeds; do
      file=corpus/regressions/${seed%%:*}.json fix=${seed##*:}
      found=$("$KVFUZZ" check "$file" --backend "$NAME:fa" --adapter "$(adapter)" 2>&1 | grep -o "^$NAME:fa: [a-z-]*" |
              sed "s/^$NAME:fa: //" | sort -u | tr '\n' ' ' || true)
      rc=0; "$KVFUZZ" check "$file" --backend "${NAME}_fix$fix:fa" --adapter "$(adapter --fix "$fix")" >/dev/null 2>&1 || rc=$?
      verdict=ok
      if [ -z "$found" ] || [ "$found" = "ok " ]; then verdict="NOT FOUND in the release"; failed=1; fi
      if [ "$rc" -ne 0 ]; then verdict="$verdict; NOT GONE with the fix (exit $rc)"; failed=1; fi
      printf '%-34s %-7s %-30s %-14s %s\n' "${seed%%:*}" "#$fix" "${found:-clean}" "$([ $rc -eq 0 ] && echo clean || echo "exit $rc")" "$verdict"
    done
    exit $failed ;;
  campaign)
    # Findings are expected (the release has known bugs): the campaign's exit is the triage's,
    # 1 only for a finding that matches no entry of adapters/sglang/known_issues.json.
    rm -rf "findings-sglang/$VERSION"
    "$KVFUZZ" run --cases "${2:-300}" --profile tiny --backend "$NAME:fa" --adapter "$(adapter)" \
      --out "findings-sglang/$VERSION" --no-shrink --jobs "$(nproc)" || [ $? -eq 1 ]
    echo "== triage (adapters/sglang/known_issues.json)"
    python3 adapters/sglang/triage.py "findings-sglang/$VERSION" ;;
  *) usage ;;
esac
