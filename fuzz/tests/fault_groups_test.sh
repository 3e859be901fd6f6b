#!/usr/bin/env bash
# One bug, few groups; two bugs, two groups (properties/root_cause.h): `kvfuzz faults --groups`
# runs a 300-case tiny campaign per named fault, and exits 0 only when each fault's findings fall
# into at most 3 root-cause groups and no group holds findings of two faults. This also requires
# every named fault to be found (keys > 0) and its keys to outnumber its groups, so a run that
# finds nothing, or groups nothing, fails.
# Usage: fault_groups_test.sh KVFUZZ BACKEND FAULT...
set -uo pipefail
KVFUZZ=$1 BACKEND=$2
shift 2
only=$(printf -- '--only %s ' "$@")
# shellcheck disable=SC2086  # one flag per fault
out=$("$KVFUZZ" faults --groups 300 --backend "$BACKEND" $only 2>/dev/null)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: kvfuzz faults --groups exited $rc"; exit 1; }
for fault in "$@"; do
  read -r keys groups < <(echo "$out" | awk -v f="$fault" '$1 == f { print $4, $5 }')
  [ -n "${keys:-}" ] || { echo "FAIL: no row for $fault"; exit 1; }
  [ "$keys" -gt 0 ] || { echo "FAIL: $fault: no findings"; exit 1; }
  [ "$keys" -gt "$groups" ] || { echo "FAIL: $fault: $keys keys in $groups groups: nothing grouped"; exit 1; }
  echo "ok: $fault: $keys keys in $groups root-cause groups"
done
