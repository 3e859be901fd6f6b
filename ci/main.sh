#!/usr/bin/env bash
# Installs, builds and runs kvfuzz's main job on built-in defaults: a fuzz campaign over every
# backend. The README's first command. Findings (shrunk, with a replay command) go to
# ${KVFUZZ_OUT:-findings}/; exit 1 if there are any.
#   KVFUZZ_SECONDS   campaign length (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
KVFUZZ_BUILD_TARGETS=kvfuzz bash ci/build.sh  # the command line only; ci/test.sh builds the tests
exec ./build/fuzz/kvfuzz run --seconds "${KVFUZZ_SECONDS:-120}" --backend all --out "${KVFUZZ_OUT:-findings}"
