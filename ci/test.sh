#!/usr/bin/env bash
# Installs what kvfuzz needs, builds it and runs every test. The README's test command; CI runs it.
# KVFUZZ_TEST_LEVEL picks how much (docs/testing.md):
#   0  quick local run: the g++ build, the fault benchmark, every test at a tenth of its case counts
#      (the browser test skips without chromium);
#   1  the default, what CI runs: level 0 at full counts, plus chromium (the report's browser test
#      must run), a bounded libFuzzer smoke on every target (clang, ASan + UBSan) with the test that
#      the smoke fails when a fuzzer fails, and sglang's real attention backends (ci/sglang.sh:
#      installs PyTorch and the pinned releases into .sglang/ once): each seed bug found in
#      0.5.10.post1, gone with its upstream fix (seeds), found in the release that shipped it,
#      gone in the one that fixed it (releases), and each known issue's minimal case triaged by
#      fingerprint as that issue (known);
#      Debian's slurm-wlm and munge (ci/slurm.sh install), so that ctest slurm_campaign_test runs a
#      sharded campaign as a real Slurm job array and merge job (it skips, saying why, where the
#      daemons cannot start);
#   every level: FlashInfer 0.7.2.post1's Python files for the reproducers (ci/repro.sh install: one
#      22 MB wheel; ctest repro_committed runs them), and vLLM's releases for ctest vllm_seeds_test
#      (ci/vllm.sh install: their Python source from the wheels);
#   2+ soak: level 1 with ten times the case counts per level above 1, a 300 s smoke per target,
#      and every seed case against every sglang release (ci/sglang.sh matrix).
# KVFUZZ_FUZZ_SECONDS sets the smoke time per target (default 8 at level 1, 300 above; seven targets).
# Each part's wall time is printed as it ends and in a table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
level=${KVFUZZ_TEST_LEVEL:-1}
[[ $level =~ ^[0-9]+$ ]] || { echo "ci/test.sh: KVFUZZ_TEST_LEVEL must be a whole number, got '$level'" >&2; exit 2; }
times=()
# part NAME COMMAND...: runs COMMAND under "== NAME", records its wall time (a failing part too).
part() {
  local name=$1 start=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  times+=("$(printf '%6d s  %s%s' $((SECONDS - start)) "$name" "$([ $status = 0 ] || echo " (FAILED, exit $status)")")")
  echo "== $name: $((SECONDS - start)) s"
  return $status
}
# The table of part times closes the log, whether every part passed or one failed.
print_times() {
  echo "== wall time of each part (KVFUZZ_TEST_LEVEL=$level)"
  printf '%s\n' "${times[@]}"
  echo "$(printf '%6d s' "$SECONDS")  in all"
}
trap print_times EXIT
# The engines' sources are unpacked from their wheels without bytecode: let Python cache it, so each
# of the tests' hundreds of adapter processes does not compile vLLM's and sglang's modules anew.
unset PYTHONDONTWRITEBYTECODE
if [ "$level" -ge 1 ]; then
  part "setup (packages, chromium for the report's browser test)" bash ci/setup.sh browser
  export KVFUZZ_REQUIRE_BROWSER=1
else
  part "setup (packages)" bash ci/setup.sh
fi
part "build (g++, every target)" bash ci/build.sh
part "fault benchmark" ./build/fuzz/kvfuzz faults --shrink-seconds 20
if [ "$level" -ge 1 ]; then
  fuzz_seconds=${KVFUZZ_FUZZ_SECONDS:-$([ "$level" -ge 2 ] && echo 300 || echo 8)}
  part "fuzz smoke (${fuzz_seconds} s per target, clang build included)" bash ci/fuzz_smoke.sh "$fuzz_seconds"
  part "fuzz smoke fails when a fuzzer fails" bash fuzz/tests/fuzz_smoke_test.sh
  part "sglang: seed bugs found in the release, gone with their fixes (torch + release installs included)" bash ci/sglang.sh seeds
  part "sglang: seed bugs in the release that shipped them, gone in the one that fixed them" bash ci/sglang.sh releases
  part "sglang: each known issue's minimal case fingerprinted and triaged as that issue" bash ci/sglang.sh known
fi
if [ "$level" -ge 1 ]; then
  part "slurm: Debian's slurm-wlm and munge, for ctest slurm_campaign_test (a real job array and merge job)" bash ci/slurm.sh install
fi
part "reproducers: FlashInfer's Python files for the CPU reproducer of its mask offsets (ctest repro_committed)" bash ci/repro.sh install
part "vLLM's releases (ctest vllm_seeds_test runs their seeds and known bugs)" bash ci/vllm.sh install
if [ "$level" -ge 2 ]; then
  part "sglang: every seed case against every release" bash ci/sglang.sh matrix
fi
part "tests (ctest, level $level)" ctest --test-dir build --output-on-failure -j "$(nproc)"
