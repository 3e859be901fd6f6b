#!/usr/bin/env bash
# A sharded kvfuzz campaign on a real Slurm: a single-node cluster on this machine (slurmctld and
# slurmd on loopback, munge for authentication; config, state and logs in one folder), a job array
# of N shards, a merge job that runs after all of them succeeded (--dependency=afterok), then triage.
#
#   bash ci/slurm.sh install                  # Debian's slurm-wlm and munge (apt-get; sudo when not root)
#   bash ci/slurm.sh start DIR                # the cluster; exit 77 (saying why) where it cannot start
#   bash ci/slurm.sh campaign DIR N RUN_ARGS...   # N shards of `kvfuzz run RUN_ARGS`, merge, triage
#   bash ci/slurm.sh stop DIR                 # ends the daemons `start` began (by their pid files)
#
# `campaign` submits DIR/jobs/shard.sbatch as --array=0-(N-1) (each task `kvfuzz run RUN_ARGS
# --shard $SLURM_ARRAY_TASK_ID/N --out DIR/out/shard-$SLURM_ARRAY_TASK_ID`; exit 1, findings, counts
# as success) and DIR/jobs/merge.sbatch with --dependency=afterok on the array (`kvfuzz merge
# DIR/out/merged DIR/out/shard-*`, then adapters/triage.py on it), waits for the merge job and
# prints every job's state and output. Exit: 0 when the merge job completed, 1 otherwise.
#   KVFUZZ            the kvfuzz binary (default build/fuzz/kvfuzz)
#   KVFUZZ_ISSUES     the known-issues file triage reads (default adapters/gpu/known_issues.json)
#   KVFUZZ_SLURM_PORT slurmctld's port, slurmd's is the next (default 6817)
#   KVFUZZ_SLURM_WAIT seconds `campaign` waits for the merge job (default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD

say() { echo "ci/slurm.sh: $*" >&2; }

start() {
  local dir=$1 port=${KVFUZZ_SLURM_PORT:-6817}
  for tool in munged slurmctld slurmd sbatch; do
    command -v "$tool" > /dev/null || { say "SKIPPED: $tool not installed (bash ci/slurm.sh install)"; return 77; }
  done
  mkdir -p "$dir"/state "$dir"/spool "$dir"/munge
  chmod 700 "$dir"/munge
  local node
  node=$(hostname -s)
  # munge: a key of our own, its socket in DIR (no system service touched).
  [ -f "$dir"/munge/munge.key ] || { dd if=/dev/urandom of="$dir"/munge/munge.key bs=1024 count=1 2> /dev/null; chmod 600 "$dir"/munge/munge.key; }
  if ! munged --force --key-file="$dir"/munge/munge.key --socket="$dir"/munge/munge.socket \
      --pid-file="$dir"/munge/munged.pid --log-file="$dir"/munge/munged.log --seed-file="$dir"/munge/munged.seed 2> "$dir"/munge/start.err; then
    say "SKIPPED: munged does not start here: $(tail -1 "$dir"/munge/start.err)"
    return 77
  fi
  cat > "$dir"/slurm.conf << EOF
ClusterName=kvfuzz
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=kvfuzz Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  if ! slurmctld -f "$SLURM_CONF" 2> "$dir"/slurmctld.err || ! slurmd -f "$SLURM_CONF" -N "$node" 2> "$dir"/slurmd.err; then
    say "SKIPPED: the Slurm daemons do not start here: $(cat "$dir"/slurmctld.err "$dir"/slurmd.err | tail -2)"
    stop "$dir"
    return 77
  fi
  for _ in $(seq 1 40); do
    if [ "$(sinfo -h -n "$node" -o %t 2> /dev/null)" = idle ]; then
      say "cluster up: node $node idle ($(nproc) CPUs), SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.5
  done
  say "SKIPPED: node $node never became idle: $(sinfo -h -o '%t %E' 2>&1 | head -1); $(tail -2 "$dir"/slurmd.log 2> /dev/null)"
  stop "$dir"
  return 77
}

stop() {
  local dir=$1
  for pid_file in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid; do
    [ -f "$pid_file" ] || continue
    local pid
    pid=$(cat "$pid_file")
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2> /dev/null || break; sleep 0.25; done
    rm -f "$pid_file"
  done
}

campaign() {
  local dir=$1 n=$2
  shift 2
  local kvfuzz=${KVFUZZ:-build/fuzz/kvfuzz} issues=${KVFUZZ_ISSUES:-adapters/gpu/known_issues.json}
  export SLURM_CONF=$dir/slurm.conf
  mkdir -p "$dir"/jobs "$dir"/out
  local args
  args=$(printf ' %q' "$@")
  cat > "$dir"/jobs/shard.sbatch << EOF
#!/bin/bash
# One shard of the campaign: exit 1 (findings) is a shard that worked.
$kvfuzz run$args --shard \$SLURM_ARRAY_TASK_ID/$n --out $dir/out/shard-\$SLURM_ARRAY_TASK_ID
rc=\$?
exit \$(( rc == 1 ? 0 : rc ))
EOF
  cat > "$dir"/jobs/merge.sbatch << EOF
#!/bin/bash
set -e
$kvfuzz merge $dir/out/merged $(for i in $(seq 0 $((n - 1))); do printf ' %s' "$dir/out/shard-$i"; done)
rc=0
python3 adapters/triage.py $dir/out/merged --issues $issues || rc=\$?
echo "triage exit: \$rc"
EOF
  local array merge
  array=$(sbatch --parsable --job-name=kvfuzz-shard --array=0-$((n - 1)) --cpus-per-task=1 --chdir="$here" \
    --output="$dir"/jobs/shard-%a.out "$dir"/jobs/shard.sbatch)
  merge=$(sbatch --parsable --job-name=kvfuzz-merge --dependency=afterok:"$array" --kill-on-invalid-dep=yes \
    --cpus-per-task=1 --chdir="$here" --output="$dir"/jobs/merge.out "$dir"/jobs/merge.sbatch)
  say "submitted: job array $array (shards 0-$((n - 1))), merge job $merge (afterok:$array)"
  local state="" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "${KVFUZZ_SLURM_WAIT:-300}" ]; do
    state=$(scontrol show job "$merge" -o 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 1
  done
  say "after $((SECONDS - t0)) s:"
  scontrol show job "$array" -o | grep -o 'JobId=[0-9]* ArrayJobId=[0-9]* ArrayTaskId=[0-9]*\|JobState=[A-Z_]*\|ExitCode=[0-9:]*' | paste -d' ' - - - >&2
  scontrol show job "$merge" -o | grep -o 'JobId=[0-9]*\|JobState=[A-Z_]*\|ExitCode=[0-9:]*\|Dependency=[^ ]*' | paste -d' ' - - - - >&2
  for f in "$dir"/jobs/shard-*.out "$dir"/jobs/merge.out; do
    [ -f "$f" ] || continue
    echo "==> $f <=="
    cat "$f"
  done
  [ "$state" = COMPLETED ]
}

case ${1:-} in
  install)
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if command -v slurmctld > /dev/null && command -v munged > /dev/null; then exit 0; fi
    $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends slurm-wlm munge ;;
  start) start "$(realpath -m "$2")" ;;
  stop) stop "$(realpath -m "$2")" ;;
  campaign) dir=$(realpath -m "$2"); shift 2; campaign "$dir" "$@" ;;
  *) sed -n 2,20p "$0"; exit 2 ;;
esac
