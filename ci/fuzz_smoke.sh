#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs each for a bounded
# time on its corpus. Usage: bash ci/fuzz_smoke.sh [SECONDS per target, default 30] [TARGET...]
# SECONDS 0 only builds; the default targets are all of them (`failing`, a target that fails on
# purpose for fuzz/tests/fuzz_smoke_test.sh, only when named).
# A target fails the smoke when its fuzzer exits non-zero, runs no input
# (stat::number_of_executed_units), or leaves a crash-, leak-, timeout- or oom- file in
# build-fuzz/crashes/<target>/; the script then exits 1. Each log is build-fuzz/logs/<target>.log.
#   KVFUZZ_FUZZ_TIMEOUT   seconds one input may take before it is a timeout (default 60)
#   KVFUZZ_FUZZ_PARALLEL  how many targets run at once (default: the number of cores)
# The build is OSS-Fuzz's: -O1 -gline-tables-only (symbolized stack traces, a third less compile time
# than -O2 -g).
set -euo pipefail
cd "$(dirname "$0")/.."
all="case_parser backends planners fa flashinfer triton mla"
seconds=${1:-30}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz smoke: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
timeout_s=${KVFUZZ_FUZZ_TIMEOUT:-60}
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || { echo "fuzz smoke: KVFUZZ_FUZZ_TIMEOUT must be a positive whole number, got '$timeout_s'" >&2; exit 2; }
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || read -ra targets <<<"$all"
for target in "${targets[@]}"; do
  case " $all failing " in
    *" $target "*) ;;
    *) echo "fuzz smoke: unknown target '$target' (targets: $all, failing)" >&2; exit 2 ;;
  esac
done

cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DKVFUZZ_FUZZ=ON -DKVFUZZ_TESTS=OFF \
  -DKVFUZZ_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_UNITY_BUILD="${KVFUZZ_UNITY:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
ninja -C build-fuzz "${targets[@]/%/_fuzzer}"
[ "$seconds" -gt 0 ] || exit 0

# smoke TARGET: runs the target and prints its verdict (after its output lines); exits 1 when it failed.
smoke() {
  local target=$1 work=build-fuzz/corpus/$1 crashes=build-fuzz/crashes/$1 log=build-fuzz/logs/$1.log
  local seeds=() status=0 units artifacts problems=()
  rm -rf "$crashes"
  mkdir -p "$work" "$crashes" build-fuzz/logs
  [ -d "corpus/$target" ] && seeds=("corpus/$target")
  "build-fuzz/fuzz/targets/${target}_fuzzer" -max_total_time="$seconds" -timeout="$timeout_s" -max_len=16384 \
    -artifact_prefix="$crashes/" -print_final_stats=1 "$work" "${seeds[@]}" >"$log" 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY" "$log" || true
  units=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  artifacts=$(find "$crashes" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
    -printf '%f ')
  [ -z "$artifacts" ] || problems+=("left ${artifacts% } in $crashes")
  [ "$status" -eq 0 ] || problems+=("exited with status $status")
  [ "${units:-0}" -gt 0 ] || problems+=("ran no input (stat::number_of_executed_units: ${units:-not printed})")
  if [ ${#problems[@]} -eq 0 ]; then
    echo "fuzz smoke: ok $target (${units} inputs)"
  else
    echo "fuzz smoke: FAIL $target: $(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g') — last lines of $log:"
    tail -n 25 "$log"
    return 1
  fi
}

# The targets run side by side, one per core (each fuzzer is one process); each one's lines are
# printed together, in the targets' order, as it ends.
parallel=${KVFUZZ_FUZZ_PARALLEL:-$(nproc)}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz smoke: KVFUZZ_FUZZ_PARALLEL must be a positive whole number, got '$parallel'" >&2; exit 2; }
echo "fuzz smoke: ${#targets[@]} target(s) for ${seconds}s each, $parallel at a time: ${targets[*]}"
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
pids=()
for i in "${!targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  (if smoke "${targets[$i]}" >"$results/$i" 2>&1; then echo 0; else echo 1; fi >"$results/$i.status") &
  pids+=($!)
done
failed=()
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || true
  cat "$results/$i"
  [ "$(cat "$results/$i.status" 2>/dev/null)" = 0 ] || failed+=("${targets[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz smoke: failed: ${failed[*]}"
  exit 1
fi
