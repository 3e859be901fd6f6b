#!/usr/bin/env bash
# Installs, builds and runs kvfuzz's main job on built-in defaults. The README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
bash ci/build.sh
out=${KVFUZZ_OUT:-out}
mkdir -p "$out"
for seed in $(seq 1 20); do
  ./build/fuzz/kvfuzz gen --seed "$seed" --profile small > "$out/case-$seed.json"
  ./build/fuzz/kvfuzz oracle "$out/case-$seed.json" | head -1
done
