#!/usr/bin/env bash
# How a campaign ends (fuzz/campaign.cc, fuzz/cli/cmd_run.cc), with a planted fault whose findings
# take long to shrink:
# 1. SIGTERM while a finding is being shrunk (as a scheduler's time limit sends it): the shard
#    stops within 10 s, says so, keeps every written finding (each index line's saved case is
#    there), writes campaign.json finished and stopped, and its folder merges;
# 2. SIGINT: the same, and it says it was interrupted by SIGINT;
# 3. --seconds bounds the whole campaign, shrinking included: the target is 10% (measured alone,
#    docs/cluster.md); the test allows 40%, since CI runs it beside other tests on 2 cores (17 s
#    seen there), and the bug it guards ran 44 s for --seconds 10.
# Usage: campaign_stop_test.sh KVFUZZ_BIN WORK_DIR
set -uo pipefail
K=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }  # calc EXPRESSION: its value (1/0 for a comparison)
# Large cases of the fault benchmark's first fault: each check takes a while, so shrinking one
# finding takes far longer than 10 s.
run=(--seed 3 --backend fa --fault fa_local_token_table --profile large --jobs 1 --shrink-seconds 120)

stop_test() {  # stop_test SIGNAL: a campaign given SIGNAL while it shrinks its first finding
  local sig=$1 out=stop-$1
  "$K" run --seconds 300 "${run[@]}" --out "$out" > "$out.log" 2> "$out.err" &
  local pid=$! t0
  t0=$(now)
  # the first saved case is written before its shrinking starts
  while [ -z "$(ls "$out"/*-*.txt 2> /dev/null)" ] && kill -0 $pid 2> /dev/null; do sleep 0.1; done
  sleep 1
  local sent
  sent=$(now)
  kill -"$sig" $pid
  wait $pid
  local rc=$? stopped_in
  stopped_in=$(calc "$(now) - $sent")
  echo "$sig sent $(calc "$sent - $t0") s after the start, while shrinking; the campaign ended $stopped_in s later (exit $rc)"
  [ "$(calc "$stopped_in < 10")" = 1 ] || fail "$sig: still running $stopped_in s after the signal"
  [ $rc = 1 ] || fail "$sig: exit $rc, not 1 (findings were written)"
  grep -q "interrupted by SIG$sig after" "$out.err" || fail "$sig: does not say it was interrupted: $(tail -2 "$out.err")"
  grep -q "stopping: no new case starts" "$out.err" || fail "$sig: no stopping line: $(tail -2 "$out.err")"
  python3 - "$out" << 'EOF' || fail "$sig: the stopped folder: see above"
import json, os, sys
d = sys.argv[1]
rec = json.load(open(os.path.join(d, "campaign.json")))
assert rec["finished"] and rec["stopped"], (rec["finished"], rec["stopped"])
lines = [json.loads(l) for l in open(os.path.join(d, "index.jsonl"))]
assert lines, "no finding indexed"
for l in lines:
    assert l["saved"] is None or os.path.exists(l["saved"]), l["saved"]
EOF
  "$K" merge "$out-merged" "$out" > "$out.merge" 2>&1 || fail "$sig: the stopped folder does not merge: $(cat "$out.merge")"
}
stop_test TERM
stop_test INT

# 3. --seconds 15, shrinking included.
t0=$(now)
"$K" run --seconds 15 "${run[@]}" --out seconds > seconds.log 2> seconds.err
took=$(calc "$(now) - $t0")
echo "--seconds 15 with shrinking ran $took s"
[ "$(calc "$took < 21")" = 1 ] || fail "--seconds 15 ran $took s (more than 40% over)"
[ -s seconds/index.jsonl ] || fail "--seconds 15 found nothing: the test proves nothing"

[ $failures = 0 ] && echo "campaign_stop_test: all passed"
exit $((failures > 0))
