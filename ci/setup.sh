#!/usr/bin/env bash
# Installs everything kvfuzz needs to build and test, from Debian packages only.
# Idempotent: a second run installs nothing. Usage: bash ci/setup.sh [browser]
#   browser   also Debian's chromium, for the report's headless-browser test (ci/test.sh, level >= 1)
set -euo pipefail

packages=(
  build-essential cmake ninja-build       # C++20 toolchain and build
  libgtest-dev                            # GoogleTest
  librapidcheck-dev                       # RapidCheck, with its GoogleTest integration
  nlohmann-json3-dev                      # case files
  libcli11-dev                            # command line
  clang libclang-rt-14-dev libomp-14-dev  # libFuzzer build, sanitizers
  zstd                                    # ci/gpu_fa3.py packs FA3 for the GPU machine (ctest ci_gpu_fa3_test)
)
for extra in "$@"; do
  case $extra in
    browser) packages+=(chromium) ;;       # fuzz/tests/report_browser_test.sh opens kvfuzz report's page
    *) echo "setup: unknown extra '$extra' (extras: browser)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! command -v python3 >/dev/null; then missing+=(python3 python3-pip); fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python adapters (adapters/kvfuzz_adapter and its examples) need numpy, from PyPI.
if ! python3 -c "import numpy" 2>/dev/null; then
  echo "setup: installing numpy for python3 ($(command -v python3))"
  python3 -m pip install --quiet numpy 2>/dev/null || python3 -m pip install --quiet --break-system-packages numpy
fi
