#!/bin/bash -eu
# ClusterFuzzLite's build step, run in the image of .clusterfuzzlite/Dockerfile with $CC, $CXX,
# $CFLAGS, $CXXFLAGS, $LIB_FUZZING_ENGINE and $OUT set for the engine and sanitizer of the job:
# ci/oss_fuzz_build.sh does the work. OSS-Fuzz's clang has no OpenMP headers or runtime of its own,
# so the distribution's libomp (libomp-dev) is put on the compiler's paths.
omp_h=$(find /usr/lib/llvm-*/ -name omp.h 2>/dev/null | head -n 1)
omp_so=$(find /usr/lib/llvm-*/lib -name 'libomp.so' 2>/dev/null | head -n 1)
if [ -n "$omp_h" ] && [ -n "$omp_so" ]; then
  export CPATH="$(dirname "$omp_h")${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$(dirname "$omp_so")${LIBRARY_PATH:+:$LIBRARY_PATH}"
fi
bash ci/oss_fuzz_build.sh  # the working directory is the checkout (the Dockerfile's WORKDIR)
