#!/usr/bin/env bash
# Configures and builds kvfuzz (Release, g++) into build/. Usage: bash ci/build.sh [extra cmake args]
#   KVFUZZ_BUILD_TARGETS   ninja targets to build (default: everything, tests included)
#   KVFUZZ_UNITY           ON (default): a unity build, 16 sources a compile, about half the CPU time
#                          of one compile per source (so two files of one target cannot both define
#                          a helper of the same name); OFF for one compile per source
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVFUZZ_WERROR=ON -DCMAKE_UNITY_BUILD="${KVFUZZ_UNITY:-ON}" \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 "$@" >/dev/null
# shellcheck disable=SC2086  # a list of targets
ninja -C build ${KVFUZZ_BUILD_TARGETS:-}
