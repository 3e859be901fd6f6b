#!/usr/bin/env bash
# Lanes (`--server-lanes`, backends/external/adapter_server.h): one executor server process works on
# several requests at once, each on its own thread. On the CPU: the numpy executor (serve.py's
# lanes) and the C++ one (kvfuzz-worker's lanes, a library declaring "thread_safe") find, on one
# server with 4 lanes, what they find with one lane, case for case, for the same seed (a planted
# bug; crashes, the requests in flight re-run alone); the lanes overlap (4 lanes: at least 2.5
# calls at once); a hang in one lane while the others answer is noticed within --adapter-timeout
# (the process killed, the case re-run alone); a bad --server-lanes, or more lanes declared than
# offered, is exit 2, naming it.
# Usage: adapter_lanes_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR WORKER CPP_LIBRARY
set -uo pipefail
K=$1 SRC=$2 WORK=$3 WORKER=$4 CPP=$5
python3 -c "import numpy" 2>/dev/null || { echo "SKIPPED: python3 with numpy not found"; exit 0; }
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
EXEC="python3 $SRC/adapters/examples/numpy_page_table.py"

# campaign NAME LANES ADAPTER BACKEND [flags]: CASES cases (16) of seed 5 on one server; exit
# status in $WORK/NAME.rc, output in $WORK/NAME.out.
campaign() {
  local name=$1 lanes=$2 adapter=$3 backend=$4
  shift 4
  "$K" run --cases "${CASES:-16}" --seed 5 --profile tiny --jobs 4 --no-shrink --max-saved 1 --no-batch --adapter "$adapter" \
    --backend "$backend" --adapter-servers 1 --server-lanes "$lanes" --out "$WORK/$name" "$@" >"$WORK/$name.out" 2>&1
  echo $? >"$WORK/$name.rc"
}
# declared NAME [restarts]: the campaign's lanes line says its server declared 4 lanes; with
# `restarts` 0, its process served the whole campaign (no answer failed or went astray).
declared() {
  grep -q "lanes: 4 offered, 4 declared" "$WORK/$1.out" || { fail "$1: the server did not declare 4 lanes"; grep lanes "$WORK/$1.out"; }
  [ -z "${2:-}" ] || grep -q "servers: 1 (no GPU), $2 restarts" "$WORK/$1.out" ||
    { fail "$1: expected $2 server restarts"; grep restarts "$WORK/$1.out"; }
}

# shellcheck source=fuzz/tests/same_findings.sh
source "$SRC/fuzz/tests/same_findings.sh"

# The planted bug, one lane and four: the same findings.
campaign bug_1 1 "KVFUZZ_EXAMPLE_BREAK=drop_last_key $EXEC" numpy_page_table
campaign bug_4 4 "KVFUZZ_EXAMPLE_BREAK=drop_last_key $EXEC" numpy_page_table
same_findings bug_1 bug_4 cache-extent
declared bug_4 0

# The C++ executor through kvfuzz-worker: its library declares "thread_safe", the worker 4 lanes. A
# planted bug, and a crash of every case (a failed answer retires the process; the requests in
# flight on it are re-run alone, each failing alone): the same findings as one lane.
for brk in drop_last_key:cache-extent segfault:crash; do
  campaign "cpp_${brk%%:*}_1" 1 "KVFUZZ_EXAMPLE_BREAK=${brk%%:*} $WORKER $CPP" cpp_page_table
  campaign "cpp_${brk%%:*}_4" 4 "KVFUZZ_EXAMPLE_BREAK=${brk%%:*} $WORKER $CPP" cpp_page_table
  same_findings "cpp_${brk%%:*}_1" "cpp_${brk%%:*}_4" "${brk#*:}"
  declared "cpp_${brk%%:*}_4" "$([ "${brk%%:*}" = drop_last_key ] && echo 0)"
done

# calls NAME: a python script's argument: the call log of campaign NAME (lanes_test_adapter.py).
# The lanes overlap: 30 ms a call, four lanes; the calls' summed time over the span they cover (1.0:
# one at a time) is at least 2.5.
# overlapping NAME: campaign NAME's calls (lanes_test_adapter.py's log) ran at least 2.5 at once.
overlapping() {
  [ "$(cat "$WORK/$1.rc")" = 0 ] || { fail "$1: exit $(cat "$WORK/$1.rc"), expected 0"; tail -5 "$WORK/$1.out"; }
  python3 - "$WORK/$1.calls" "$1" <<'PY' || fail "$1: the 4 lanes did not overlap"
import sys
calls = [(float(r[0]), float(r[1])) for r in (line.split() for line in open(sys.argv[1])) if r[-1] == "call"]
busy = sum(b - a for a, b in calls)
span = max(b for _, b in calls) - min(a for a, _ in calls)
print(f"{sys.argv[2]}: {len(calls)} calls, {busy:.2f} s of calls in {span:.2f} s: {busy / span:.2f} at once")
if busy / span < 2.5:
    sys.exit("fewer than 2.5 calls at once on average")
PY
}
CASES=8 campaign overlap 4 "LANES_TEST_LOG=$WORK/overlap.calls KVFUZZ_EXAMPLE_DELAY=0.03 python3 $SRC/fuzz/tests/lanes_test_adapter.py" \
  numpy_page_table
overlapping overlap
# With batching too: a batch goes while the server has a lane free, not only when it is idle (1.6
# calls at once when batches waited for an idle server; 3.8 since).
"$K" run --cases 48 --seed 5 --profile tiny --jobs 16 --no-shrink --max-saved 1 --reuse-shapes 1000 --shape-run 64 \
  --adapter "LANES_TEST_LOG=$WORK/batched.calls KVFUZZ_EXAMPLE_DELAY=0.05 python3 $SRC/fuzz/tests/lanes_test_adapter.py" \
  --backend numpy_page_table --adapter-servers 1 --server-lanes 4 --out "$WORK/batched" >"$WORK/batched.out" 2>&1
echo $? >"$WORK/batched.rc"
grep -Eq "batches: [1-9][0-9]* requests" "$WORK/batched.out" || fail "batched: no batch was sent"
overlapping batched

# A hang in one lane (the campaign's first call sleeps) while the other three answer: killed within
# the timeout of its start (2 s; the watch that restarted the clock at every answer let it hang
# until the others ran out of work: 4.6 s), its case re-run alone (and passing: it hangs once).
CASES=24 campaign hang 4 "LANES_TEST_LOG=$WORK/hang.calls LANES_TEST_HANG_ONCE=1 KVFUZZ_EXAMPLE_DELAY=0.05 python3 $SRC/fuzz/tests/lanes_test_adapter.py" \
  numpy_page_table --adapter-timeout 2
[ "$(cat "$WORK/hang.rc")" = 0 ] || { fail "hang: exit $(cat "$WORK/hang.rc"), expected 0"; tail -5 "$WORK/hang.out"; }
grep -Eq "1 restarts; [1-9][0-9]* requests re-run alone" "$WORK/hang.out" || fail "hang: no restart, no request re-run alone"
python3 - "$WORK/hang.calls" <<'PY' || fail "hang: not noticed within the timeout while the other lanes answered"
import sys
rows = [line.split() for line in open(sys.argv[1])]
hung = next(r for r in rows if r[-1] == "hang")
t, pid = float(hung[0]), hung[1]
killed = min(float(r[0]) for r in rows if r[-1] == "start" and r[1] != pid and float(r[0]) > t)
answered = sum(1 for r in rows if r[-1] == "call" and r[2] == pid and t < float(r[1]) < killed)
print(f"hang: the next process started {killed - t:.2f} s after the hang; {answered} calls of the other lanes meanwhile")
if killed - t > 3.0:
    sys.exit("the hung request ran more than 1 s past its 2 s timeout")
if answered < 10:
    sys.exit("the other lanes did not answer meanwhile")
PY

# --server-lanes that is not a number >= 1 is bad input: exit 2, naming it.
"$K" run --cases 1 --adapter "$EXEC" --adapter-servers 1 --server-lanes 0 >"$WORK/bad.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "server-lanes.*'0'" "$WORK/bad.out"; } && echo "ok: --server-lanes 0: exit 2" ||
  { fail "--server-lanes 0: exit $rc"; cat "$WORK/bad.out"; }

# An adapter declaring more lanes than offered is bad input: exit 2, naming "lanes".
"$K" run --cases 1 --adapter-servers 1 --server-lanes 2 --out "$WORK/over" \
  --adapter 'echo "{\"kvfuzz_adapter\":1,\"name\":\"x\",\"role\":\"executor\",\"family\":\"page_table\",\"lanes\":3}" >&4; sleep 30' \
  >"$WORK/over.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q 'declared "lanes": 3; expected an integer from 1' "$WORK/over.out"; } &&
  echo "ok: \"lanes\": 3 of 2 offered: exit 2" || { fail "\"lanes\": 3 of 2 offered: exit $rc"; cat "$WORK/over.out"; }

# A lane whose context fails on entry ends its process (a message, exit 1), which kvfuzz sees die:
# crash findings naming the error, no lane left silent until the hang watch (20 s here) kills it.
CASES=4 campaign ctxfail 4 "LANES_TEST_LOG=$WORK/ctxfail.calls LANES_TEST_CONTEXT_FAILS=1 python3 $SRC/fuzz/tests/lanes_test_adapter.py" \
  numpy_page_table --adapter-timeout 20
{ [ "$(cat "$WORK/ctxfail.rc")" = 1 ] && grep -q "crash: RuntimeError: LANES_TEST_CONTEXT_FAILS" "$WORK/ctxfail.out" &&
  grep -q " 0 hangs" "$WORK/ctxfail.out"; } && echo "ok: a lane's failed context: crash findings naming it" ||
  { fail "a lane's failed context: exit $(cat "$WORK/ctxfail.rc"), expected crash findings naming it"; tail -8 "$WORK/ctxfail.out"; }

[ "$failures" = 0 ] && echo "PASS" || { echo "$failures failure(s)"; exit 1; }
