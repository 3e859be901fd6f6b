#!/usr/bin/env bash
# ci/sglang.sh campaign's exit path, offline: a stand-in planner (the numpy page_table example,
# named as sglang 0.5.23's FA planner) instead of sglang. Clean: every finding known (none) -> 0;
# broken (it hands the token-granular table, a mechanism no sglang known issue has) -> the
# triage's NEW -> 1, never 0.
# Usage: sglang_campaign_test.sh KVFUZZ SOURCE_DIR WORK_DIR
set -uo pipefail
KVFUZZ=$(realpath "$1") SRC=$2 WORK=$(realpath -m "$3")
rm -rf "$WORK" && mkdir -p "$WORK/root/0.5.23/sglang"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
campaign() {  # campaign NAME [BREAK]: runs the campaign, prints its exit code
  (cd "$SRC" && KVFUZZ=$KVFUZZ SGLANG_ROOT="$WORK/root" SGLANG_OUT="$WORK/findings" SGLANG_VERSION=0.5.23 BACKENDS=fa \
    KVFUZZ_EXAMPLE_PLANNER_NAME=sglang_fa_0_5_23 KVFUZZ_EXAMPLE_BREAK=${2:-} \
    SGLANG_ADAPTER="python3 $SRC/adapters/examples/numpy_page_table_planner.py" \
    bash ci/sglang.sh campaign 60 >"$WORK/$1.out" 2>&1)
  echo $?
}
rc=$(campaign clean)
[ "$rc" -eq 0 ] || fail "a clean campaign: exit $rc, expected 0"
grep -q "0 NEW, 0 regression" "$WORK/clean.out" || fail "the clean campaign's triage summary"
rc=$(campaign broken token_table)
[ "$rc" -eq 1 ] || fail "a campaign with a new mechanism: exit $rc, expected 1"
grep -q "^NEW " "$WORK/broken.out" || fail "the broken campaign's findings are not reported NEW"
[ $failures -eq 0 ] && echo "sglang campaign exit path: all passed" || { tail -n 20 "$WORK"/*.out; exit 1; }
