#!/usr/bin/env bash
# Builds every libFuzzer target the OSS-Fuzz way: compiler and flags from $CC, $CXX, $CFLAGS and
# $CXXFLAGS (sanitizers and coverage included), the engine from $LIB_FUZZING_ENGINE, and writes to
# $OUT each <target>_fuzzer, its seeds ($OUT/<target>_fuzzer_seed_corpus.zip, from corpus/<target>/)
# and the case-file dictionary ($OUT/<target>_fuzzer.dict, fuzz/targets/case.dict). OSS-Fuzz and
# ClusterFuzzLite run it as their build.sh (.clusterfuzzlite/build.sh). By hand, as OSS-Fuzz sets
# the variables for libFuzzer + AddressSanitizer:
#   export CC=clang CXX=clang++ LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/ossfuzz-out
#   export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address \
#     -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link" CXXFLAGS="$CFLAGS"
#   bash ci/oss_fuzz_build.sh
#   KVFUZZ_OSS_FUZZ_BUILD  the CMake build folder (default: $WORK/kvfuzz-build, else build-oss-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
for v in CXX CXXFLAGS LIB_FUZZING_ENGINE OUT; do
  [ -n "${!v:-}" ] || { echo "oss_fuzz_build: \$$v is not set (see the usage at the top of $0)" >&2; exit 2; }
done
targets="case_parser backends planners fa flashinfer triton mla"
build=${KVFUZZ_OSS_FUZZ_BUILD:-${WORK:+$WORK/kvfuzz-build}}
build=${build:-build-oss-fuzz}

# No build type: CXXFLAGS alone set optimization and debug info. No -march=native: the binaries
# run on other machines. No tests and no CUDA.
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCMAKE_BUILD_TYPE=None -DKVFUZZ_FUZZ=ON -DKVFUZZ_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" -DKVFUZZ_NATIVE=OFF \
  -DKVFUZZ_TESTS=OFF -DKVFUZZ_CUDA=OFF -DCMAKE_BUILD_RPATH='$ORIGIN/lib' >/dev/null
# shellcheck disable=SC2086  # a list of targets
ninja -C "$build" -j "$(nproc)" ${targets// /_fuzzer }_fuzzer

mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)
for target in $targets; do
  cp "$build/fuzz/targets/${target}_fuzzer" "$out/"
  cp fuzz/targets/case.dict "$out/${target}_fuzzer.dict"
  rm -f "$out/${target}_fuzzer_seed_corpus.zip"
  (cd "corpus/$target" && zip -q -j "$out/${target}_fuzzer_seed_corpus.zip" ./*)
done
# The OpenMP runtime is not on the machines that run the fuzzers: ship it beside them ($ORIGIN/lib).
omp=$(ldd "$out/fa_fuzzer" | awk '/libomp|libgomp|libiomp/ {print $3}')
if [ -n "$omp" ]; then
  mkdir -p "$out/lib"
  cp -L "$omp" "$out/lib/"
fi
echo "oss_fuzz_build: $(echo "$targets" | wc -w) targets, their seed corpora and dictionaries in $out"
