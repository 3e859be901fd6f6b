#!/usr/bin/env bash
# Installs what kvfuzz needs, builds it and runs every test. The README's test command; CI runs it.
#   1. the g++ build and its fault benchmark: every named planner fault must be caught;
#   2. a bounded libFuzzer smoke on every target (clang, ASan + UBSan), then the test that the
#      smoke fails when a fuzzer fails (fuzz/tests/fuzz_smoke_test.sh);
#   3. sglang's real attention backends (ci/sglang.sh: installs PyTorch and the pinned releases
#      into .sglang/ once): each seed bug found in 0.5.10.post1, gone with its upstream fix (seeds),
#      and found in the release that shipped it, gone in the one that fixed it (releases), and each
#      known issue's minimal case triaged by fingerprint as that issue (known);
#   4. vLLM's releases for the vllm_seeds_test ctest (ci/vllm.sh install: the newest and those of its
#      known-bug table, about 1 GB of wheels of which only the Python source is kept);
#   5. every test (GoogleTest + RapidCheck through ctest), last, so its summary closes the log.
# KVFUZZ_TEST_LEVEL scales the generated-case counts (0 quick, 1 the default, 2+ soak);
# KVFUZZ_FUZZ_SECONDS sets the smoke time per target (default 30; seven targets).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
bash ci/build.sh
echo "== fault benchmark"
./build/fuzz/kvfuzz faults --shrink-seconds 20
echo "== fuzz smoke"
bash ci/fuzz_smoke.sh "${KVFUZZ_FUZZ_SECONDS:-30}"
bash fuzz/tests/fuzz_smoke_test.sh
echo "== sglang's real attention backends: seed bugs found in the release, gone with their fixes"
bash ci/sglang.sh seeds
echo "== sglang's real attention backends: seed bugs in the release that shipped them, gone in the one that fixed them"
bash ci/sglang.sh releases
echo "== sglang's real attention backends: each known issue's minimal case fingerprinted and triaged as that issue"
bash ci/sglang.sh known
echo "== vLLM's releases (the vllm_seeds_test ctest runs their seeds and known bugs)"
bash ci/vllm.sh install
echo "== tests"
ctest --test-dir build --output-on-failure -j "$(nproc)"
