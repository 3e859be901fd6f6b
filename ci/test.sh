#!/usr/bin/env bash
# Installs what kvfuzz needs, builds it and runs every test. The README's test command.
# KVFUZZ_TEST_LEVEL scales the generated-case counts (0 quick, 1 CI default, 2+ soak).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
bash ci/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
