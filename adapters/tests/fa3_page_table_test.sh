#!/usr/bin/env bash
# fa3_page_table.py's argument building on the CPU: FA3's real library cannot run here, so
# KVFUZZ_FA3 points at a folder whose sgl_kernel/flash_attn.py is FA3's stand-in
# (adapters/repro/fa3_standin.py, which refuses and computes as FA3's source says), and the executor
# runs under TRITON_INTERPRET=1 on host tensors (cuda_arrays.DEV). Checks:
#  - without a library (KVFUZZ_FA3 unset, or a folder without sgl_kernel/) the executor exits 2 naming it;
#  - a campaign of kvfuzz's fa planner through it is clean;
#  - a copy of the executor that hands FA3 no window (window_size (-1, -1) on sliding layers) is caught.
# The GPU campaign with the real library: docs/gpu.md "Real FA3". Needs torch (.sglang/venv, ci/sglang.sh):
# without it, SKIPPED.
#   fa3_page_table_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
set -uo pipefail
SRC=$1 K=$2 WORK=$3
PY=$SRC/.sglang/venv/bin/python
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "SKIPPED: no .sglang/venv with torch (bash ci/sglang.sh install)"; exit 0; }
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && tail -30 "$2"; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/fa3/sgl_kernel"
: >"$WORK/fa3/sgl_kernel/__init__.py"
echo 'from fa3_standin import flash_attn_with_kvcache  # noqa: F401 (FA3 stand-in under its name)' \
  >"$WORK/fa3/sgl_kernel/flash_attn.py"
export TRITON_INTERPRET=1

# No library: exit 2, saying what is missing.
env -u KVFUZZ_FA3 "$PY" "$SRC/adapters/gpu/fa3_page_table.py" </dev/null >"$WORK/unset.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "KVFUZZ_FA3 is not set" "$WORK/unset.out" || fail "KVFUZZ_FA3 unset: exit $rc" "$WORK/unset.out"
KVFUZZ_FA3=$WORK/none "$PY" "$SRC/adapters/gpu/fa3_page_table.py" </dev/null >"$WORK/none.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no sgl_kernel/flash_attn.py" "$WORK/none.out" || fail "KVFUZZ_FA3 without a library: exit $rc" "$WORK/none.out"

campaign() {  # campaign NAME EXECUTOR: 10 tiny cases of kvfuzz's fa planner through EXECUTOR and the stand-in
  KVFUZZ_FA3=$WORK/fa3 "$K" run --cases 10 --seed 3 --profile tiny --jobs 2 --no-shrink --backend fa:fa3_page_table \
    --adapter "$PY $2" --out "$WORK/$1" >"$WORK/$1.log" 2>&1
}
campaign clean "$SRC/adapters/gpu/fa3_page_table.py"
rc=$?
[ $rc -eq 0 ] || fail "the clean campaign exited $rc, expected 0" "$WORK/clean.log"
checked=$(awk '$1 == "fa:fa3_page_table" {print $2}' "$WORK/clean.log")
[ "${checked:-0}" -ge 10 ] || fail "the clean campaign checked ${checked:-0} cases, expected 10" "$WORK/clean.log"

# The mutant: the executor's copy, in a copy of adapters/, passing no window.
cp -r "$SRC/adapters" "$WORK/adapters"
mutant=$WORK/adapters/gpu/fa3_page_table.py
sed -i 's/window_size=(int(window_left), 0) if window_left >= 0 else (-1, -1)/window_size=(-1, -1)/' "$mutant"
grep -q 'window_size=(-1, -1), softcap' "$mutant" || fail "the window mutant did not apply to $mutant"
campaign mutant "$mutant"
rc=$?
[ $rc -eq 1 ] || fail "the window mutant's campaign exited $rc, expected 1 (a finding)" "$WORK/mutant.log"
grep -q "sliding_window" "$WORK/mutant.log" || fail "the window mutant's findings name no sliding-window layer" "$WORK/mutant.log"
echo "PASS: no library exits 2; 10 cases clean through the stand-in; the window mutant caught"
