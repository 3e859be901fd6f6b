#!/usr/bin/env bash
# Installs everything kvfuzz needs to build and test, from Debian packages only.
# Idempotent: a second run installs nothing. Usage: bash ci/setup.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build       # C++20 toolchain and build
  libgtest-dev                            # GoogleTest
  librapidcheck-dev                       # RapidCheck, with its GoogleTest integration
  nlohmann-json3-dev                      # case files
  libcli11-dev                            # command line
  clang libclang-rt-14-dev libomp-14-dev  # libFuzzer build, sanitizers
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
