#!/usr/bin/env bash
# The fuzz smoke fails when a fuzzer fails: ci/fuzz_smoke.sh must exit 1, naming why, for each way
# the `failing` target (fuzz/targets/failing.cc, chosen by KVFUZZ_FAIL) fails, exit 0 for it
# unset and for a real target, and exit 2 for an unknown target. ci/test.sh runs it after the
# smoke, in the fuzz build. Usage: bash fuzz/tests/fuzz_smoke_test.sh   (about a minute)
set -euo pipefail
cd "$(dirname "$0")/../.."
failures=0

# expect STATUS TEXT MODE TARGET: the smoke on TARGET with KVFUZZ_FAIL=MODE exits STATUS and
# prints TEXT. Only the timeout mode gets a 1 s timeout: a slow stack trace must not be one.
expect() {
  local want=$1 text=$2 mode=$3 target=$4 out status=0 timeout=60
  [ "$mode" != timeout ] || timeout=1
  out=$(KVFUZZ_FAIL=$mode KVFUZZ_FUZZ_TIMEOUT=$timeout bash ci/fuzz_smoke.sh 3 "$target" 2>&1) || status=$?
  if [ "$status" -eq "$want" ] && grep -qF -- "$text" <<<"$out"; then
    echo "ok: $target with KVFUZZ_FAIL='$mode': exit $status, \"$text\""
  else
    echo "FAIL: $target with KVFUZZ_FAIL='$mode': exit $status (want $want), want \"$text\" in:"
    tail -n 30 <<<"$out"
    failures=$((failures + 1))
  fi
}

expect 1 "left crash-" crash failing
expect 1 "left leak-" leak failing
expect 1 "left timeout-" timeout failing
expect 1 "left oom-" oom failing
expect 1 "exited with status 1" exit failing
expect 1 "ran no input" quit failing
expect 0 "fuzz smoke: ok failing" "" failing
expect 0 "fuzz smoke: ok case_parser" "" case_parser
expect 2 "unknown target 'nonesuch'" "" nonesuch
[ "$failures" -eq 0 ] || { echo "fuzz smoke test: $failures failed"; exit 1; }
echo "fuzz smoke test: all passed"
