#!/usr/bin/env bash
# Executor servers (--adapter-servers, backends/external/adapter_server.h) on the CPU: the numpy
# executor served by shared processes finds what per-job workers find, case for case, for the same
# seed: a planted kernel bug (drop_last_key: cache-extent), a crash of some cases only
# (segfault_layers: every multi-layer case, and no other; single-layer cases in flight on the
# process it killed, when there were any, pass alone) and a hang (each case's own, found alone); and with cases of one
# shape batched into one kernel call, a planted bug and a crash of some cases of a batch, for the
# page_table family, and a planted bug through the paged_csr and mla families' merges.
# A batch's opener waiting for the server is woken by the server's releases, not by its 100 ms net
# (the C++ executor through kvfuzz-worker: requests of a millisecond).
# Usage: adapter_server_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR WORKER CPP_LIBRARY
set -uo pipefail
K=$1 SRC=$2 WORK=$3 WORKER=$4 CPP=$5
python3 -c "import numpy" 2>/dev/null || { echo "SKIPPED: python3 with numpy not found"; exit 0; }
rm -rf "$WORK" && mkdir -p "$WORK"
EXEC="python3 $SRC/adapters/examples/numpy_page_table.py"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# campaign NAME SERVERS CASES BREAK [flags]: exit status in $WORK/NAME.rc, output in $WORK/NAME.out
campaign() {
  local name=$1 servers=$2 cases=$3 brk=$4
  shift 4
  # shellcheck disable=SC2086 # PROFILES: several flags
  "$K" run --cases "$cases" --seed 5 ${PROFILES:---profile tiny --profile small} --jobs "${JOBS:-3}" --no-shrink \
    --max-saved 1 \
    --adapter "KVFUZZ_EXAMPLE_BREAK=$brk ${EXEC_OF:-$EXEC}" --backend "${BACKEND:-numpy_page_table}" \
    --adapter-servers "$servers" \
    --out "$WORK/$name" "$@" >"$WORK/$name.out" 2>&1
  echo $? >"$WORK/$name.rc"
}

# same_findings WORKERS SERVERS PROPERTY: both exited 1 with the same findings, some of PROPERTY.
# shellcheck source=fuzz/tests/same_findings.sh
source "$SRC/fuzz/tests/same_findings.sh"

campaign bug_workers 0 24 drop_last_key
campaign bug_servers 2 24 drop_last_key
same_findings bug_workers bug_servers cache-extent
grep -q "servers: 2 (no GPU, no GPU)" "$WORK/bug_servers.out" || fail "bug_servers: no servers line"

campaign crash_workers 0 16 segfault_layers
campaign crash_servers 1 16 segfault_layers
same_findings crash_workers crash_servers crash
# Only the multi-layer cases crashed, and the shared server lost others' requests, re-run alone.
python3 - "$WORK" <<'PY' || fail "crash attribution"
import json, re, sys
work = sys.argv[1]
crashed = {json.loads(l)["case_index"] for l in open(f"{work}/crash_servers/index.jsonl")}
text = open(f"{work}/crash_servers.out").read()
m = re.search(r"(\d+) requests re-run alone after a failure on a shared server, (\d+) of them failed alone too", text)
if not m:
    sys.exit("no re-run line in crash_servers.out")
reruns, failed = int(m.group(1)), int(m.group(2))
print(f"crash_servers: {len(crashed)} cases crashed; {reruns} requests re-run alone, {failed} failed alone")
if failed < len(crashed):
    sys.exit("expected every crashed case to fail alone")
# Requests lost beside a crash (bystanders) pass alone: a bystander blamed would be a crash finding
# per-job workers do not have (`same` above). Whether a crash had bystanders depends on timing.
print(f"crash_servers: {reruns - failed} bystanders re-run alone passed")
PY

# A --adapter-servers value that is neither a count nor gpus[:K] is bad input: exit 2, naming it.
"$K" run --cases 1 --adapter "$EXEC" --adapter-servers many >"$WORK/bad.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "adapter-servers.*many" "$WORK/bad.out"; } && echo "ok: --adapter-servers many: exit 2" ||
  { fail "--adapter-servers many: exit $rc"; cat "$WORK/bad.out"; }

# Batching (backends/external/batch_request.h): with shapes reused, cases of one shape waiting for
# the one server go as one kernel call. The same seed finds the same findings, case for case, as
# per-job workers running one case a call: the planted bug, and a crash of some cases of a shape
# only (segfault_keys), which a failed batch attributes by re-running its cases alone.
# batched NAME: the campaign's batches line says some request carried several cases, and more
# kernel runs than cases (the cases' probe value sets went in the same call).
batched() {
  python3 - "$WORK/$1.out" <<'PY' || fail "$1: no request carried several cases"
import re, sys
m = re.search(r"batches: (\d+) requests carried (\d+) cases, (\d+) failed.*; (\d+) kernel runs", open(sys.argv[1]).read())
if not m:
    sys.exit("no batches line")
print(f"{sys.argv[1]}: {m.group(1)} batches carried {m.group(2)} cases ({m.group(4)} runs), {m.group(3)} failed")
if int(m.group(2)) <= int(m.group(1)):
    sys.exit("no batch of more than one case")
if int(m.group(4)) <= int(m.group(2)):
    sys.exit("no batch carried a case's value sets")
PY
}
# One mode and a 30 ms kernel: six jobs queue for the one server and their cases meet.
batch_env="KVFUZZ_EXAMPLE_MODES=extend KVFUZZ_EXAMPLE_DELAY=0.03"
JOBS=6 campaign batch_bug_workers 0 24 "drop_last_key $batch_env" --reuse-shapes 1000
JOBS=6 campaign batch_bug_servers 1 24 "drop_last_key $batch_env" --reuse-shapes 1000
same_findings batch_bug_workers batch_bug_servers cache-extent
batched batch_bug_servers
JOBS=6 campaign batch_crash_workers 0 24 "segfault_keys $batch_env" --reuse-shapes 1000
JOBS=6 campaign batch_crash_servers 1 24 "segfault_keys $batch_env" --reuse-shapes 1000
same_findings batch_crash_workers batch_crash_servers crash
batched batch_crash_servers
grep -Eq "batches: .*, [1-9][0-9]* failed" "$WORK/batch_crash_servers.out" || fail "batch_crash_servers: no batch failed"
# Batch openers wait for the one server on their own condition variable, woken by its releases
# (Adapter::server_released). With requests of a millisecond (the C++ executor) and eight jobs, at
# most a quarter of the waits may run to the 100 ms net (a stall of this machine); with the releases
# unwired every wait does (measured: 678 of 678, and the campaign 3.4x slower; wired: 3 of 848).
KVFUZZ_EXAMPLE_BATCH=1 "$K" run --cases 600 --seed 5 --profile tiny --profile small --jobs 8 --no-shrink \
  --reuse-shapes 1000 --shape-run 64 --adapter "$WORKER $CPP" --backend cpp_page_table --adapter-servers 1 \
  --out "$WORK/woken" >"$WORK/woken.out" 2>&1
rc=$?
[ $rc = 0 ] || { fail "woken: exit $rc, expected 0"; tail -5 "$WORK/woken.out"; }
python3 - "$WORK/woken.out" <<'PY' || fail "woken: batch openers were not woken by the server's releases"
import re, sys
m = re.search(r"openers waited for a server (\d+) times, (\d+) of them until the 100 ms net", open(sys.argv[1]).read())
if not m:
    sys.exit("no openers figure on the batches line")
waits, ran_out = int(m.group(1)), int(m.group(2))
print(f"woken: openers waited {waits} times, {ran_out} ran out")
if waits == 0 or 4 * ran_out > waits:
    sys.exit(f"{ran_out} of {waits} waits ran out")
PY

# The token_csr family's merge (sglang's Triton kernels): decode and extend batches of the numpy
# token_csr executor, checked against the oracle case by case, find nothing.
"$K" run --cases 24 --seed 5 --profile tiny --profile small --jobs 6 --no-shrink --reuse-shapes 1000 \
  --adapter "KVFUZZ_EXAMPLE_MODES=decode,extend KVFUZZ_EXAMPLE_DELAY=0.03 python3 $SRC/adapters/examples/numpy_token_csr.py" \
  --backend numpy_token_csr --adapter-servers 1 --out "$WORK/batch_csr" >"$WORK/batch_csr.out" 2>&1
rc=$?
[ $rc = 0 ] || { fail "batch_csr: exit $rc, expected 0"; tail -5 "$WORK/batch_csr.out"; }
batched batch_csr

# The paged_csr (FlashInfer's wrapper calls, as sglang and FlashInfer users plan them) and mla
# (FlashMLA's latent decode, MLA prefill) families' merges: the numpy executor of each, batched on
# one server, finds what per-job workers find, case for case, with a planted bug (a row reading one
# key fewer), over decode (paged rows), extend (ragged + prefix calls; the gather CSR) and verify
# (custom masks) batches (mla: verify is the latent decode path, with its tree mask). A 10 ms
# kernel makes the jobs queue enough that each path batches (a merge that dropped mla's decode
# tables' pool offsets was caught in 1 run of 2 without it, in 4 of 4 with it and 32 cases, 3 of 4
# with 24).
declare -A modes=([paged_csr]=decode,extend,target_verify [mla]=extend,target_verify) cases=([paged_csr]=24 [mla]=32)
for fam in paged_csr mla; do
  for servers in 0 1; do
    EXEC_OF="KVFUZZ_EXAMPLE_MODES=${modes[$fam]} KVFUZZ_EXAMPLE_DELAY=0.01 python3 $SRC/adapters/examples/numpy_$fam.py" \
      BACKEND=numpy_$fam PROFILES="--profile tiny" JOBS=6 \
      campaign "batch_${fam}_$servers" "$servers" "${cases[$fam]}" drop_last_key --reuse-shapes 1000
  done
  same_findings "batch_${fam}_0" "batch_${fam}_1" cache-extent
  batched "batch_${fam}_1"
done

# Attention sinks (the gpt-oss profile) go with the batch: a batch's calls are handed its cases'
# sinks (one set: cases of other sinks are of another shape), so a clean executor finds nothing.
# A merge that dropped them (main's before) failed this in 2 runs of 2.
EXEC_OF="KVFUZZ_EXAMPLE_MODES=extend KVFUZZ_EXAMPLE_DELAY=0.01 $EXEC" PROFILES="--profile gpt-oss" JOBS=6 \
  campaign batch_sinks 1 32 "" --reuse-shapes 10 --shape-run 16
[ "$(cat "$WORK/batch_sinks.rc")" = 0 ] || { fail "batch_sinks: exit $(cat "$WORK/batch_sinks.rc"), expected 0"; tail -5 "$WORK/batch_sinks.out"; }
batched batch_sinks

campaign hang_workers 0 3 hang --adapter-timeout 2
campaign hang_servers 1 3 hang --adapter-timeout 2
same_findings hang_workers hang_servers hang

# --seconds bounds the checks in flight: with a 1 s kernel, two servers and every case running its
# metamorphic variants (a dozen requests a case), a case started before the deadline would run
# long past it; at the deadline every further request is refused and the cases in flight are
# dropped: the servers' processes are killed, the start of the adapters counts. Measured: 5 s; before
# (every request of a case in flight answered), --seconds 6 with a 0.5 s kernel ran 11.2 s.
# deadline NAME SECONDS MOST ADAPTER [ARG...]: a campaign of --seconds SECONDS on two servers ends,
# exit 0, within MOST seconds, its campaign.json finished and not marked stopped by a signal.
deadline() {
  local name=$1 seconds=$2 most=$3 adapter=$4 t0 rc took
  shift 4
  t0=$(date +%s)
  "$K" run --seconds "$seconds" --seed 5 --profile tiny --jobs 4 --no-shrink "$@" --adapter "$adapter" \
    --backend numpy_page_table --adapter-servers "${SERVERS:-2}" --out "$WORK/$name" >"$WORK/$name.out" 2>&1
  rc=$? took=$(($(date +%s) - t0))
  echo "$name: --seconds $seconds: exit $rc after $took s"
  [ $rc = 0 ] || fail "$name: exit $rc, expected 0 (the refused requests are no findings)"
  [ $took -le "$most" ] || fail "$name: --seconds $seconds ran $took s: the campaign went on past its deadline"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["finished"] and not r["stopped"], r' \
    "$WORK/$name/campaign.json" || fail "$name: campaign.json not finished, or marked stopped by a signal"
}
deadline deadline 5 9 "KVFUZZ_EXAMPLE_DELAY=1 $EXEC" --metamorphic-every 1
# Servers start at once, the first (whose declaration is the adapter's) and the others beside it,
# not the others at the jobs' first requests (a torch import and a CUDA context of seconds each).
# A server still starting at the deadline is killed too, and serves no one. Two servers on two
# named GPUs (`gpus`, CUDA_VISIBLE_DEVICES=0,1: one each): the first declares after 3 s, the
# second after 12 s, past --seconds 7. Each start writes its time. Measured: 7 s, the second start
# 0.0 s after the first; before, the second started after the first's declaration (3.1 s later).
# Earlier (the starting server was not killed and, started, served the jobs): 10-11 s.
CUDA_VISIBLE_DEVICES=0,1 SERVERS=gpus deadline deadline_start 7 9 \
  "date +%s.%N >>$WORK/starts; if [ \$CUDA_VISIBLE_DEVICES = 1 ]; then sleep 12; else sleep 3; fi; exec $EXEC"
python3 - "$WORK/starts" <<'PY' || fail "deadline_start: the second server did not start beside the first"
import sys
starts = sorted(float(x) for x in open(sys.argv[1]))
print(f"deadline_start: {len(starts)} server starts, the second {starts[1] - starts[0]:.1f} s after the first")
assert len(starts) == 2 and starts[1] - starts[0] < 2, starts
PY
# Compile-bound first cases: the first call of the shape in each server takes 4 s (a JIT compile),
# every later call milliseconds (one shape: --reuse-shapes 1000). On servers the deadline cut bounds
# a case in flight, so cases start until the deadline (fuzz/start_rule.h), and the campaign still
# ends within its bound (`deadline`). Measured: 762 cases in 7.2 s of --seconds 7 (wall 7.2 s);
# before (no case started that would, as long as the mean check so far, end past the budget), the
# first four cases (one a job, 4 s each) were the last: 4 cases in 4.8 s.
deadline first_calls 7 9 "KVFUZZ_EXAMPLE_FIRST_CALL_DELAY=4 $EXEC" --metamorphic-every 0 --reuse-shapes 1000
python3 - "$WORK/first_calls/campaign.json" <<'PY' || fail "first_calls: cases stopped starting after the first calls"
import json, sys
r = json.load(open(sys.argv[1]))["rates"]
print(f"first_calls: {r['cases']} cases in {r['seconds']:.1f} s of --seconds 7")
if r["cases"] < 20:
    sys.exit("fewer than 20 cases: none started after the first four (one a job)")
if r["seconds"] < 0.9 * 7:
    sys.exit("ended before 90% of its budget")
PY

[ "$failures" = 0 ] && echo "PASS" || { echo "$failures failure(s)"; exit 1; }
