#!/usr/bin/env bash
# A sharded campaign on a real Slurm (ci/slurm.sh): a single-node cluster on this machine, a job
# array of 3 shards of a campaign with a planted fault, a merge job after it (afterok) that merges
# and triages; the merged folder indexes the same (case seed, fingerprint key) pairs as the single
# campaign of that seed, and triage exits 1 (the planted fault is NEW). SKIPPED (exit 77, saying
# why) where Slurm is not installed or its daemons cannot start (bash ci/slurm.sh install).
# Usage: slurm_campaign_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: slurmd runs jobs as root here; not root"; exit 77; }
export KVFUZZ_SLURM_PORT=${KVFUZZ_SLURM_PORT:-6857} KVFUZZ=$K KVFUZZ_SLURM_WAIT=240
bash "$SRC/ci/slurm.sh" start "$WORK/cluster" 2>&1
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: ci/slurm.sh start exited $rc"; exit 1; }
trap 'bash "$SRC/ci/slurm.sh" stop "$WORK/cluster"' EXIT
run=(--cases 120 --seed 5 --backend fa --fault fa_local_token_table --profile tiny --profile small --jobs 1 --no-shrink)
t0=$SECONDS
bash "$SRC/ci/slurm.sh" campaign "$WORK/cluster" 3 "${run[@]}" > campaign.log 2>&1
rc=$?
cat campaign.log
echo "slurm campaign: $((SECONDS - t0)) s"
[ $rc = 0 ] || fail "the merge job did not complete (ci/slurm.sh campaign exited $rc)"
for i in 0 1 2; do
  grep -q "^\[shard $i/3 .* cases" "$WORK/cluster/jobs/shard-$i.out" || fail "shard $i's job log has no progress line"
done
grep -q "kvfuzz merge: 3 shard(s) of campaign seed 5" "$WORK/cluster/jobs/merge.out" || fail "no merge in the merge job"
grep -q "^triage exit: 1$" "$WORK/cluster/jobs/merge.out" || fail "triage did not exit 1 (NEW: the planted fault)"
"$K" run "${run[@]}" --out single > /dev/null 2>&1
pairs() { python3 -c 'import json,sys; [print(e["case_seed"], e["key"]) for e in map(json.loads, open(sys.argv[1]))]' "$1" | sort; }
[ -s single/index.jsonl ] || fail "the planted fault found nothing: the test proves nothing"
[ "$(pairs single/index.jsonl)" = "$(pairs "$WORK/cluster/out/merged/index.jsonl")" ] ||
  fail "the merged Slurm shards differ from the single campaign"
[ $failures = 0 ] && echo "slurm_campaign_test: all passed"
exit $((failures > 0))
