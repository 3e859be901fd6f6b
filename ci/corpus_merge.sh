#!/usr/bin/env bash
# Merges new inputs into a target's corpus, keeping only those that add coverage (libFuzzer
# -merge=1). Usage: bash ci/corpus_merge.sh TARGET DIR...   (TARGET: case_parser, backends, planners,
# fa, flashinfer, triton, mla)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: ci/corpus_merge.sh TARGET DIR...}
shift
[ -x "build-fuzz/fuzz/targets/${target}_fuzzer" ] || bash ci/fuzz_smoke.sh 0 >/dev/null
mkdir -p "corpus/$target"
ASAN_OPTIONS=detect_leaks=0 "build-fuzz/fuzz/targets/${target}_fuzzer" -merge=1 "corpus/$target" "$@"
