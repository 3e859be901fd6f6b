#!/usr/bin/env bash
# adapters/triage.py: a finding that matches a known issue is reported under its id (exit 0),
# one that matches none is NEW (exit 1), a malformed issues file is bad input (exit 2).
# Usage: triage_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
TRIAGE="python3 $SRC/adapters/triage.py"
ISSUES="--issues $SRC/adapters/sglang/known_issues.json"
rm -rf "$WORK" && mkdir -p "$WORK/known" "$WORK/new"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

finding() {  # finding DIR PROPERTY MODE LAYER_KIND: a saved finding of sglang_fa_0_5_10_post1:fa
  local dir=$1 prop=$2 mode=$3 kind=$4
  local base="$dir/$prop-sglang_fa_0_5_10_post1-fa-7"
  cat >"$base.json" <<JSON
{"version": 2, "model": {"layers": [{"kind": "$kind", "window": 2, "chunk": 4}]},
 "cache": {"page_size": 4, "swa_pages": 0}, "batch": {"mode": "$mode", "graph_bs": 0}}
JSON
  printf 'case 7 (seed 1): 1 requests\nsglang_fa_0_5_10_post1:fa: %s: something\n' "$prop" >"$base.txt"
}

finding "$WORK/known" cache-extent mixed chunked
finding "$WORK/known" stride-divide decode chunked
$TRIAGE "$WORK/known" $ISSUES >"$WORK/known.out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "known findings: exit $rc"
grep -q "^kvfuzz-fa-mixed-local *cache-extent" "$WORK/known.out" || fail "mixed chunked not triaged as kvfuzz-fa-mixed-local"
grep -q "^sglang#32902 *stride-divide" "$WORK/known.out" || fail "chunked ps>1 decode not triaged as sglang#32902"

# The deterministic planner (sglang_planner.py --deterministic, name suffix _det) has its own issues.
mkdir -p "$WORK/det" "$WORK/ragged"
for dir in det ragged; do
  suffix=$([ $dir = det ] && echo _det)
  base="$WORK/$dir/oracle-sglang_flashinfer_0_5_10_post1$suffix-flashinfer_paged-9"
  cat >"$base.json" <<JSON
{"version": 2, "model": {"layers": [{"kind": "sliding_window", "window": 0}]},
 "cache": {"page_size": 1, "swa_pages": 2}, "batch": {"mode": "extend", "graph_bs": 0}}
JSON
  printf 'case 9 (seed 1): 1 requests\nsglang_flashinfer_0_5_10_post1%s:flashinfer_paged: oracle: x\n' "$suffix" >"$base.txt"
  $TRIAGE "$WORK/$dir" $ISSUES >"$WORK/$dir.out" 2>&1 || fail "$dir SWA extend: exit $?"
done
grep -q "^sglang#31501 *oracle" "$WORK/det.out" || fail "a deterministic-mode SWA extend not triaged as sglang#31501"
grep -q "^sglang#26513 *oracle" "$WORK/ragged.out" || fail "a default-mode SWA extend not triaged as sglang#26513"

finding "$WORK/new" oracle decode full
$TRIAGE "$WORK/new" $ISSUES >"$WORK/new.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "unknown finding: exit $rc, expected 1"
grep -q "^NEW *oracle" "$WORK/new.out" || fail "an unmatched finding is not reported NEW"

# The GPU list's fields: the finding's property and the layers' windows.
gpu_finding() {  # gpu_finding DIR PROPERTY WINDOW: a saved finding of triton:sglang_triton
  local base="$1/$2-triton-sglang_triton-9"
  cat >"$base.json" <<JSON
{"version": 2, "model": {"layers": [{"kind": "sliding_window", "window": $3}]},
 "cache": {"page_size": 1, "swa_pages": 0}, "batch": {"mode": "extend", "graph_bs": 0}}
JSON
  printf 'case 9 (seed 1): 1 requests\ntriton:sglang_triton: %s: something\n' "$2" >"$base.txt"
}
GPU_ISSUES="--issues $SRC/adapters/gpu/known_issues.json"
mkdir -p "$WORK/gpu_known" "$WORK/gpu_new_window" "$WORK/gpu_new_property"
gpu_finding "$WORK/gpu_known" cache-extent 0
$TRIAGE "$WORK/gpu_known" $GPU_ISSUES >"$WORK/gpu_known.out" 2>&1 || fail "window-0 Triton finding: exit $?"
grep -q "^sglang-triton-window0 *cache-extent" "$WORK/gpu_known.out" || fail "window 0 not triaged as sglang-triton-window0"
gpu_finding "$WORK/gpu_new_window" cache-extent 3
$TRIAGE "$WORK/gpu_new_window" $GPU_ISSUES >"$WORK/gpu_new_window.out" 2>&1
[ $? -eq 1 ] || fail "a window-3 finding matched the window-0 issue"
gpu_finding "$WORK/gpu_new_property" crash 0
$TRIAGE "$WORK/gpu_new_property" $GPU_ISSUES >"$WORK/gpu_new_property.out" 2>&1
[ $? -eq 1 ] || fail "a crash matched an issue listing only oracle and cache-extent"

# gpu_case NAME FINDING CASE_JSON "BACKEND: PROPERTY: ...": one saved finding in $WORK/NAME, triaged
# against the GPU list into $WORK/NAME.out, exit status last.
gpu_case() {
  mkdir -p "$WORK/$1"
  echo "$3" >"$WORK/$1/$2.json"
  printf 'case 3 (seed 1): 1 requests\n%s\n' "$4" >"$WORK/$1/$2.txt"
  $TRIAGE "$WORK/$1" $GPU_ISSUES >"$WORK/$1.out" 2>&1
  echo "rc=$?" >>"$WORK/$1.out"
}

# The pool size: flex attention's 32-bit offsets are known past 2^31 elements per K pool only.
for pages in 1048576 1024; do  # x page size 16 x 2 heads x 128 = 2^32 / 2^22 elements
  gpu_case "flex$pages" crash-fa-flex_page_table-3 \
    '{"version": 2, "model": {"kv_heads": 2, "head_dim": 128, "v_head_dim": 128, "layers": [{"kind": "full"}]},
      "cache": {"page_size": 16, "full_pages": '"$pages"', "swa_pages": 0}, "batch": {"mode": "extend", "graph_bs": 0}}' \
    "fa:flex_page_table: crash: illegal memory access"
done
grep -q "^pytorch-flex-int32-offsets *crash" "$WORK/flex1048576.out" || fail "a flex crash past 2^31 elements not known"
grep -q "^rc=1" "$WORK/flex1024.out" || fail "a flex crash in a small pool matched the 2^31 issue"

# V narrower than Q/K at small head dims: sglang's Triton extend kernel on sm90; 128 / 64 is not it.
for dims in "32 16" "128 64"; do
  set -- $dims
  gpu_case "narrow$1" oracle-triton-sglang_triton-5 \
    '{"version": 2, "model": {"kv_heads": 4, "head_dim": '"$1"', "v_head_dim": '"$2"',
      "layers": [{"kind": "sliding_window", "window": 29}]},
      "cache": {"page_size": 8, "full_pages": 4, "swa_pages": 4}, "batch": {"mode": "draft_extend_v2", "graph_bs": 0}}' \
    "triton:sglang_triton: oracle: x"
done
grep -q "^triton-sm90-extend-narrow-v *oracle" "$WORK/narrow32.out" || fail "Lq 32 / Lv 16 not triaged as triton-sm90-extend-narrow-v"
grep -q "^rc=1" "$WORK/narrow128.out" || fail "Lq 128 / Lv 64 matched the small-dims issue"

echo '{"issues": [{"id": "x", "match": {"colour": "red"}}]}' >"$WORK/bad.json"
$TRIAGE "$WORK/known" --issues "$WORK/bad.json" >"$WORK/bad.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "malformed issues file: exit $rc, expected 2"
grep -q "unknown match field" "$WORK/bad.out" || fail "malformed issues file: no message naming the field"

[ $failures -eq 0 ] && echo "triage test: all passed" || { cat "$WORK"/*.out; exit 1; }
