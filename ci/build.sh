#!/usr/bin/env bash
# Configures and builds kvfuzz (Release, g++) into build/. Usage: bash ci/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVFUZZ_WERROR=ON "$@" >/dev/null
ninja -C build
