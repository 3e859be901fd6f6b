#!/usr/bin/env bash
# What ci/sglang.sh and ci/vllm.sh share: a Python with PyTorch + Triton (CPU-usable) to run an
# engine's metadata code in, and a release's Python source unpacked from its wheel. Sourced, with
# ROOT set to the engine's install folder (.sglang, .vllm); the venv is always .sglang/venv.
#
#   source ci/engine_env.sh
#   PY=$(python_with_torch)
#   unpack_wheel vllm 0.33.0 .vllm/0.33.0 --python-version 3.12 --platform manylinux_2_28_x86_64

python_with_torch() {
  if python3 -c 'import torch, triton, numpy' 2>/dev/null; then echo python3; return; fi
  local venv=.sglang/venv
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

# The PyPI torch wheel's CUDA libraries not in the CUDA toolkit come from the nvidia-* wheels.
torch_cuda_libs() {
  local lib
  for lib in .sglang/venv/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$lib" ] && export LD_LIBRARY_PATH="$(realpath "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  return 0
}

# unpack_wheel PACKAGE VERSION SITE [pip download platform flags...]: the release's Python files and
# its .dist-info from its wheel (downloaded once into $ROOT/wheels), never its compiled extensions.
unpack_wheel() {
  local package=$1 version=$2 site=$3
  shift 3
  [ -d "$site/$package" ] && return
  echo "== installing $package $version's source into $site" >&2
  mkdir -p "$ROOT/wheels"
  ls "$ROOT"/wheels/"$package"-"$version"-*.whl >/dev/null 2>&1 ||
    python3 -m pip download -q --no-deps --only-binary=:all: "$@" "$package==$version" -d "$ROOT/wheels" >&2
  rm -rf "$site.tmp" && mkdir -p "$site.tmp"
  python3 - "$(ls "$ROOT"/wheels/"$package"-"$version"-*.whl | head -1)" "$site.tmp" <<'PY'
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
wheel.extractall(sys.argv[2], members=[n for n in wheel.namelist() if n.endswith(".py") or ".dist-info/" in n])
PY
  mv "$site.tmp" "$site"
}
