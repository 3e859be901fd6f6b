#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs each for a bounded
# time on its corpus. Usage: bash ci/fuzz_smoke.sh [seconds per target, default 30]
# A crash leaves its input in build-fuzz/crashes/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DKVFUZZ_FUZZ=ON -DKVFUZZ_TESTS=OFF \
  -DKVFUZZ_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets="case_parser backends planners fa flashinfer triton mla"
# shellcheck disable=SC2086  # a list of targets
ninja -C build-fuzz ${targets// /_fuzzer }_fuzzer
for target in $targets; do
  work=build-fuzz/corpus/$target crashes=build-fuzz/crashes/$target
  rm -rf "$crashes"
  mkdir -p "$work" "$crashes"
  echo "fuzz smoke: $target for ${seconds}s"
  ASAN_OPTIONS=detect_leaks=0 "build-fuzz/fuzz/targets/${target}_fuzzer" -max_total_time="$seconds" -max_len=16384 \
    -artifact_prefix="$crashes/" -print_final_stats=1 "$work" "corpus/$target" 2>&1 |
    grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|==[0-9]+==|Done" || true
  if [ -n "$(find "$crashes" -type f | head -1)" ]; then
    echo "fuzz smoke: $target found a crash: $(ls "$crashes")"
    exit 1
  fi
done
