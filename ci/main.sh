#!/usr/bin/env bash
# Installs, builds and runs kvfuzz's main job on built-in defaults: a fuzz campaign over every
# backend, then its report. The README's first command. Findings (shrunk, with a replay command)
# go to ${KVFUZZ_OUT:-findings}/, the report to ${KVFUZZ_OUT:-findings}/report.html (its path is
# the last line printed); exit 1 if there are any findings.
#   KVFUZZ_SECONDS   campaign length (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
KVFUZZ_BUILD_TARGETS=kvfuzz bash ci/build.sh  # the command line only; ci/test.sh builds the tests
out=${KVFUZZ_OUT:-findings}
status=0
./build/fuzz/kvfuzz run --seconds "${KVFUZZ_SECONDS:-120}" --backend all --out "$out" || status=$?
[ "$status" -le 1 ] || exit "$status"
./build/fuzz/kvfuzz report "$out" -o "$out/report.html" >/dev/null
echo "report: $out/report.html"
exit "$status"
