# shellcheck shell=bash
# The start of the test scripts that run GPU executors on the CPU with .sglang/venv's torch, sourced
# with the script's arguments:
#   source "$(dirname "$0")/torch_test_env.sh" "$@"     # SOURCE_DIR KVFUZZ_BIN WORK_DIR
# sets SRC K WORK and PY (.sglang/venv's Python); prints "SKIPPED: ..." and exits 0 (ctest: skipped,
# never passed) where that venv has no torch (ci/sglang.sh); empties WORK; fail MESSAGE [LOG] prints the
# message and LOG's last 30 lines, and exits 1.
set -uo pipefail
# shellcheck disable=SC2034  # K: the sourcing script's
SRC=$1 K=$2 WORK=$3
PY=$SRC/.sglang/venv/bin/python
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "SKIPPED: no .sglang/venv with torch (bash ci/sglang.sh install)"; exit 0; }
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && tail -30 "$2"; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK"
