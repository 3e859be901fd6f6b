#!/usr/bin/env bash
# cpp_adapter_test.sh for a CUDA example executor, when this machine has a GPU: run by ctest
# (fuzz/tests/CMakeLists.txt), which reports the test skipped on the line below otherwise.
#
#   cuda_adapter_test.sh bash cpp_adapter_test.sh KVFUZZ WORKER LIBRARY clean|broken NAME PROP
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIPPED: no CUDA device"
  exit 0
fi
exec "$@"
