#!/usr/bin/env bash
# Minimizes a target's corpus to the smallest set of inputs with the same coverage (libFuzzer
# -merge=1 into an empty folder), then swaps it in. Usage: bash ci/corpus_minimize.sh TARGET
# (TARGET: case_parser, backends, planners, fa, flashinfer, triton, mla)
# Regression cases (corpus/regressions/) are shrunk with `kvfuzz shrink`, not here.
#
# Safe: the merge goes into a temporary folder beside the corpus (same file system); only a merge
# that exits 0 with at least one input replaces the corpus, by renames (old -> temp, new ->
# corpus; the old one is put back if the second rename fails). Otherwise the corpus is untouched
# and the script exits 1. Exit 2: usage.
#   KVFUZZ_FUZZER       the fuzzer binary (default build-fuzz/fuzz/targets/TARGET_fuzzer, built if missing)
#   KVFUZZ_CORPUS_ROOT  the folder holding the corpora (default corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
root=${KVFUZZ_CORPUS_ROOT:-corpus}
if [ -z "$target" ] || [ "$target" = regressions ] || [ ! -d "$root/$target" ]; then
  echo "usage: ci/corpus_minimize.sh TARGET  (a folder under $root/ other than regressions; got '${target}')" >&2
  exit 2
fi
corpus="$root/$target"
before=$(find "$corpus" -maxdepth 1 -type f | wc -l)
if [ "$before" -eq 0 ]; then
  echo "corpus_minimize: $corpus is empty; nothing to minimize" >&2
  exit 1
fi
fuzzer=${KVFUZZ_FUZZER:-build-fuzz/fuzz/targets/${target}_fuzzer}
if [ -z "${KVFUZZ_FUZZER:-}" ] && [ ! -x "$fuzzer" ]; then bash ci/fuzz_smoke.sh 0 >/dev/null; fi

tmp=$(mktemp -d "$root/.${target}.minimize.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/new"
if ! ASAN_OPTIONS=detect_leaks=0 "$fuzzer" -merge=1 "$tmp/new" "$corpus"; then
  echo "corpus_minimize: the merge failed; $corpus is untouched" >&2
  exit 1
fi
after=$(find "$tmp/new" -maxdepth 1 -type f | wc -l)
if [ "$after" -eq 0 ]; then
  echo "corpus_minimize: the merge kept no input; refusing to empty $corpus (untouched)" >&2
  exit 1
fi
mv "$corpus" "$tmp/old"
if ! mv "$tmp/new" "$corpus"; then
  mv "$tmp/old" "$corpus"
  echo "corpus_minimize: could not move the merged corpus in; $corpus restored" >&2
  exit 1
fi
echo "$corpus: $before -> $after inputs"
