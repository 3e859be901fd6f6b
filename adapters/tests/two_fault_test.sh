#!/usr/bin/env bash
# A green triage means no new bug: a campaign that carries one known fault (fa_local_token_table,
# known to adapters/tests/planted_known_issues.json) triages all known (exit 0), and the same
# campaign with a second, different fault (fa_draft_extend_v2_prefix, which also breaks chunked
# layers of the same backend) triages NEW (exit 1), on each of 10 campaign seeds. By root cause
# (properties/root_cause.h): the one-fault campaign's groups are all known, and the second fault
# has a NEW group of its own, not folded into the known fault's.
# Usage: two_fault_test.sh KVFUZZ SOURCE_DIR WORK_DIR [CASES]
set -uo pipefail
KVFUZZ=$1 SRC=$2 WORK=$3 CASES=${4:-120}
ISSUES=$SRC/adapters/tests/planted_known_issues.json
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
for seed in 1 2 3 4 5 6 7 8 9 10; do
  for faults in "fa_local_token_table" "fa_local_token_table fa_draft_extend_v2_prefix"; do
    out=$WORK/seed$seed-$(echo "$faults" | wc -w)
    flags=$(printf -- '--fault %s ' $faults)
    # shellcheck disable=SC2086  # one flag per fault
    "$KVFUZZ" run --cases "$CASES" --seed "$seed" --backend fa $flags --out "$out" --no-shrink --max-saved 1 \
      --jobs 2 >"$out.log" 2>&1
    rc=$?
    [ $rc -le 1 ] || { echo "FAIL: seed $seed ($faults): kvfuzz run exited $rc"; failures=$((failures + 1)); continue; }
    python3 "$SRC/adapters/triage.py" "$out" --issues "$ISSUES" >"$out.triage" 2>&1
    rc=$?
    want=$([ "$faults" = fa_local_token_table ] && echo 0 || echo 1)
    summary=$(tail -2 "$out.triage" | tr "\n" ";")
    # "N finding line(s), G root-cause group(s): K known, M NEW, R regression(s)"
    new_groups=$(sed -n 's/.* root-cause group(s): [0-9]* known, \([0-9]*\) NEW.*/\1/p' "$out.triage")
    want_groups=$([ "$want" = 0 ] && echo "= 0" || echo "> 0")
    if [ $rc -ne "$want" ]; then
      echo "FAIL: seed $seed, faults '$faults': triage exited $rc, expected $want ($summary)"
      failures=$((failures + 1))
    elif ! [ "${new_groups:--1}" $([ "$want" = 0 ] && echo -eq || echo -gt) 0 ]; then
      echo "FAIL: seed $seed, faults '$faults': ${new_groups:-no} NEW root-cause groups, expected $want_groups"
      failures=$((failures + 1))
    else
      echo "ok: seed $seed, faults '$faults': triage exit $rc ($summary)"
    fi
  done
done
[ $failures -eq 0 ] && echo "two-fault triage: 10 of 10 seeds" || exit 1
