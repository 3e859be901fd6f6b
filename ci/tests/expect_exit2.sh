# Shared by the tests of ci/'s packing scripts (gpu_fa3_test.sh, gpu_cutlass_test.sh), sourced after
# WORK is set: fail MESSAGE prints it and counts it in $failures; expect_exit2 RUN WHAT MESSAGE ARGS...
# runs the function RUN with ARGS (RUN writes its output to $WORK/log) and fails unless it exits 2
# naming MESSAGE.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_exit2() {
  local run=$1 what=$2 message=$3 rc
  shift 3
  "$run" "$@"
  rc=$?
  [ $rc = 2 ] && grep -q -- "$message" "$WORK/log" || fail "$what: exit $rc, expected 2 with '$message': $(cat "$WORK/log")"
}
