#!/usr/bin/env bash
# Configures and builds kvfuzz (Release, g++) into build/. Usage: bash ci/build.sh [extra cmake args]
#   KVFUZZ_BUILD_TARGETS   ninja targets to build (default: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVFUZZ_WERROR=ON "$@" >/dev/null
# shellcheck disable=SC2086  # a list of targets
ninja -C build ${KVFUZZ_BUILD_TARGETS:-}
