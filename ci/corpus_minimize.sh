#!/usr/bin/env bash
# Minimizes a target's corpus to the smallest set of inputs with the same coverage (libFuzzer
# -merge=1 into an empty folder). Usage: bash ci/corpus_minimize.sh TARGET   (TARGET: case_parser,
# backends, planners, fa, flashinfer, triton, mla)
# Regression cases (corpus/regressions/) are shrunk with `kvfuzz shrink`, not here.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: ci/corpus_minimize.sh TARGET}
[ -x "build-fuzz/fuzz/targets/${target}_fuzzer" ] || bash ci/fuzz_smoke.sh 0 >/dev/null
tmp=$(mktemp -d)
mkdir -p "$tmp/min"
ASAN_OPTIONS=detect_leaks=0 "build-fuzz/fuzz/targets/${target}_fuzzer" -merge=1 "$tmp/min" "corpus/$target"
rm -f "corpus/$target"/*
cp "$tmp/min"/* "corpus/$target/"
rm -rf "$tmp"
echo "corpus/$target: $(ls "corpus/$target" | wc -l) inputs"
