#!/usr/bin/env bash
# The adapter contract end to end, through the kvfuzz binary: the numpy examples pass clean
# campaigns; each broken variant is caught with the property that owns it, its shrunk case
# replays, and the campaign survives crashes and hangs; bad adapters are bad input (exit 2).
# Usage: adapter_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
EXEC="python3 $SRC/adapters/examples/numpy_page_table.py"
PLANNER="python3 $SRC/adapters/examples/numpy_page_table_planner.py"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect EXIT PATTERN NAME -- command...: the command exits EXIT and its output matches PATTERN.
expect() {
  local want=$1 pattern=$2 name=$3
  shift 4
  "$@" >"$WORK/$name.out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then fail "$name: exit $got, expected $want"; tail -20 "$WORK/$name.out"; return; fi
  grep -qE "$pattern" "$WORK/$name.out" || { fail "$name: output lacks /$pattern/"; tail -20 "$WORK/$name.out"; return; }
  echo "ok: $name"
}

campaign() {  # campaign OUT CASES ADAPTER BACKEND [extra flags]
  local out=$1 cases=$2 adapter=$3 backend=$4
  shift 4
  "$K" run --cases "$cases" --profile tiny --profile small --jobs 2 --adapter "$adapter" --backend "$backend" \
    --out "$WORK/$out" --max-saved 1 "$@"
}

expect 0 "no findings" clean_executor -- campaign clean 40 "$EXEC" numpy_page_table --no-shrink
expect 0 "no findings" clean_planner -- campaign planner 100 "$PLANNER" numpy_pt_planner --no-shrink
# Each broken variant is caught by its property, shrunk through the worker, and survived (the
# campaign ends normally, exit 1, whatever the adapter did); the shrunk cases replay below.
for v in "drop_last_key cache-extent" "segfault crash" "next_page in-bounds" "lse_base2 oracle" \
         "freed_slot in-bounds" "oob_write in-bounds" "hang hang"; do
  set -- $v
  expect 1 "^$2/fa:numpy_page_table" "broken_$1" -- campaign "$1" 8 "KVFUZZ_EXAMPLE_BREAK=$1 $EXEC" numpy_page_table \
    --adapter-timeout 2 --shrink-seconds 3
done
expect 1 "^stride-divide/numpy_pt_planner:fa" broken_planner -- \
  campaign token_table 120 "KVFUZZ_EXAMPLE_BREAK=token_table $PLANNER" numpy_pt_planner --shrink-seconds 5
# A disagreement the planner reports between its plan and run steps is a plan-run finding named by
# the argument, on a case with a sliding-window layer (and none without the break); a malformed one
# is a contract finding.
"$K" gen --seed 6 --profile tiny >"$WORK/swa.json"  # a decode batch, one sliding-window layer (window 3)
expect 0 "" plan_run_clean -- "$K" check "$WORK/swa.json" --adapter "$PLANNER"
expect 1 "plan-run: .*window_left is -1 at the plan step, 3 at the run step" plan_run_found -- \
  "$K" check "$WORK/swa.json" --adapter "KVFUZZ_EXAMPLE_BREAK=plan_run $PLANNER"
expect 0 '"mechanism":"plan-run:window_left"' plan_run_fingerprint -- \
  "$K" fingerprint "$WORK/swa.json" --backend numpy_pt_planner:fa --adapter "KVFUZZ_EXAMPLE_BREAK=plan_run $PLANNER"
expect 1 "contract.*plan_run" plan_run_malformed -- "$K" check "$WORK/swa.json" --adapter "KVFUZZ_EXAMPLE_BREAK=bad_plan_run $PLANNER"

# Attention sinks: the plan hands them to one call of a cascade (a topk>1 verify), which folds them
# into its softmax; folding them into every call counts them twice (the oracle says so). The probes
# that recover an opaque kernel's reads take each head's sink term off (about 2 s).
SINKS=$SRC/corpus/regressions/fa__fa_sink_every_part.json
expect 0 "ok \(every property\)" sinks_clean -- "$K" check "$SINKS" --backend fa:numpy_page_table --adapter "$EXEC"
expect 1 "oracle: layer" sinks_every_part -- "$K" check "$SINKS" --backend fa:numpy_page_table \
  --adapter "KVFUZZ_EXAMPLE_BREAK=sink_every_part $EXEC"

# A kernel that loads unowned slots and masks them with weight 0 is right: a clean campaign, and
# the masked reads show as a note (the NaN-poison run) on a case that has a partly filled page.
expect 0 "no findings" masked_tail -- campaign masked 24 "KVFUZZ_EXAMPLE_BREAK=masked_tail $EXEC" numpy_page_table --no-shrink
# A case answered unsupported at run time is counted unsupported, not a finding; the worker stays.
expect 0 "[1-9][0-9]* answered unsupported; 0 workers replaced" answered_unsupported -- \
  campaign unsupported 24 "KVFUZZ_EXAMPLE_BREAK=unsupported $EXEC" numpy_page_table --no-shrink
"$K" gen --seed 1 --profile small >"$WORK/masked.json"
expect 0 "note: masked-read" masked_note -- "$K" check "$WORK/masked.json" --adapter "KVFUZZ_EXAMPLE_BREAK=masked_tail $EXEC" \
  --backend numpy_page_table
# A per-case precision out of range is a malformed answer: a contract finding naming the field.
expect 1 "contract.*'tile_keys' must be an integer in \[1, 4096\]" bad_precision -- "$K" check "$WORK/masked.json" \
  --adapter "KVFUZZ_EXAMPLE_BREAK=bad_precision $EXEC" --backend numpy_page_table

# The shrunk findings of each broken variant (campaigns save and shrink one case per fingerprint
# key: the first two keys of each) replay with the line their reports print, pasted as it is in
# another directory (kvfuzz is not on PATH: the line names it by its absolute path, fuzz/replay.h).
for dir in "$WORK"/{drop_last_key,segfault,next_page,lse_base2,freed_slot,oob_write,hang,token_table}; do
  reports=$(ls "$dir"/*.min.txt 2>/dev/null | head -2)
  [ -n "$reports" ] || { fail "no shrunk report in $dir"; continue; }
  for report in $reports; do
    line=$(sed -n 's/^replay: //p' "$report" | head -1)
    (cd / && eval "$line") >"$WORK/replay.out" 2>&1
    rc=$?
    [ "$rc" = 1 ] && echo "ok: replay of $(basename "$report")" || fail "replay of $report exited $rc: $line"
  done
done

# Bad adapters: exit 2 before any case, naming the adapter and what is wrong.
expect 2 "did not start" adapter_missing -- "$K" backends --adapter "/nonexistent/adapter"
expect 2 "not a known family" adapter_bad_family -- "$K" backends --adapter \
  "python3 -c 'import os; os.write(4, b\"{\\\"kvfuzz_adapter\\\": 1, \\\"name\\\": \\\"x\\\", \\\"role\\\": \\\"executor\\\", \\\"family\\\": \\\"nope\\\"}\\n\"); import time; time.sleep(5)'"
# A kvfuzz_adapter declaration of an unknown family: one line naming it, exit 2, no traceback.
printf 'import sys\nsys.path.insert(0, "%s/adapters")\nimport kvfuzz_adapter as kv\n@kv.executor(name="x", family="pagetable")\ndef run(case):\n    pass\nkv.serve(run)\n' \
  "$SRC" >"$WORK/bad_family.py"
expect 2 "kvfuzz_adapter: @kv.executor\(name='x'\): unknown family 'pagetable'; known: page_table" adapter_bad_family_python -- \
  "$K" backends --adapter "python3 $WORK/bad_family.py"
! grep -q Traceback "$WORK/adapter_bad_family_python.out" || fail "adapter_bad_family_python: a traceback"
expect 2 "first message must be the declaration" adapter_garbage -- "$K" backends --adapter \
  "python3 -c 'import os; os.write(4, b\"{}\\n\"); import time; time.sleep(5)'"
expect 0 "fa:numpy_page_table" adapter_listed -- "$K" backends --adapter "$EXEC"

if [ "$failures" -gt 0 ]; then
  echo "adapter tests: $failures failed"
  exit 1
fi
echo "adapter tests: all passed"
