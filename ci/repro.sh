#!/usr/bin/env bash
# kvfuzz's standalone reproducers of real findings (docs/repro.md): each generated from its minimal
# case (the inputs are committed, the scripts are not), run on the release that has the bug and with
# the fix (or on the fixed release), and the upstream issue drafts written from those runs.
#
#   bash ci/repro.sh install   # FlashInfer 0.7.2.post1's Python files into .flashinfer/ (its CPU
#                              # reproducer reads prefill.py); sglang's releases come from ci/sglang.sh
#   bash ci/repro.sh generate  # every reproducer into REPRO_DIR (default build/repro): NAME.py, the
#                              # script a report links (at most 150 lines), and beside it the harness
#                              # it imports (kvfuzz_repro_<target>.py); their lengths
#   bash ci/repro.sh check     # generate (into a scratch folder): each script at most 150 lines; each
#                              # CPU run's exit status as recorded in RUNS (a run whose package is not
#                              # here is skipped), from a copy outside the checkout
#   bash ci/repro.sh reports   # corpus/*/reports/<issue>.md: the drafts, quoting the CPU runs and,
#                              # for sglang's metadata findings, kvfuzz explain through adapters/sglang
#   bash ci/repro.sh run DIR   # only the runs, outputs in DIR (ci/gpu_repro.sh: the GPU runs), of the
#                              # reproducers generated now (or, without kvfuzz, those in REPRO_DIR)
#
# KVFUZZ: the kvfuzz binary (default build/fuzz/kvfuzz). PY: a Python with numpy and torch (default
# .sglang/venv/bin/python, which ci/sglang.sh installs, else python3). GPU_OUTPUTS: folders of GPU
# runs (ci/gpu_repro.sh's OUT/flashinfer and OUT/kernels) whose runs the reports quote as well.
# check: about 140 s on 2 idle cores before the scripts were generated (measured then); generating the 25
# scripts adds 2 s and the cascade, fa-verify-local and fa-draft-local fixes' runs one FA run each (the
# last two 17 s and 21 s at load 7, 2026-11-27) (29 runs, Triton's interpreter the slowest; the
# FA3 stand-in's test 3 s of CPU; and the packed 0.5.23 source against the whole release). Measured
# 2026-11-27 on a machine loaded by 7 builds: 554 s wall. 4 min for reports
# (REPRO_FULL=1: the 6 runs of FULL_RUNS too, about 45 s more).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/retrying.sh
source ci/retrying.sh
KVFUZZ=${KVFUZZ:-build/fuzz/kvfuzz}
PY=${PY:-$( [ -x .sglang/venv/bin/python ] && echo .sglang/venv/bin/python || echo python3 )}
FLASHINFER=.flashinfer/0.7.2.post1
REPRO_DIR=${REPRO_DIR:-build/repro}
# The longest script a report may link (the harness it imports is beside it)
MAX_LINES=150

# The reproducers: file (under REPRO_DIR) : minimal case : planner:executor
REPROS="gpu/repro/flashinfer_page_mask_indptr.py:corpus/gpu/flashinfer_mask_indptr_empty_row.json:flashinfer_paged:flashinfer_paged_csr
gpu/repro/flashinfer_page_mask_indptr_crash.py:corpus/gpu/flashinfer_mask_indptr_crash.json:flashinfer_paged:flashinfer_paged_csr
gpu/repro/sglang_triton_window0.py:corpus/gpu/sglang_triton_window0.json:triton:sglang_triton
gpu/repro/sglang_39287_triton.py:corpus/sglang/triton_verify_tree_window.json:triton:sglang_triton
gpu/repro/triton_sm90_extend_narrow_v.py:corpus/gpu/sglang_triton_extend_narrow_v.json:triton:sglang_triton
gpu/repro/pytorch_flex_int32_offsets.py:corpus/gpu/flex_long_int32_offsets.json:fa:flex_page_table
sglang/repro/sglang_32087_triton_decode_window.py:corpus/sglang/triton_swa_decode_window.json:sglang_triton_0_5_23:triton
sglang/repro/kvfuzz_triton_no_local.py:corpus/sglang/triton_no_local.json:sglang_triton_0_5_23:triton
sglang/repro/sglang_39287_triton_backend.py:corpus/sglang/triton_verify_tree_window.json:sglang_triton_0_5_23:triton
sglang/repro/sglang_26651_triton_draft_extend_v2_graph.py:corpus/sglang/triton_draft_extend_v2_graph.json:sglang_triton_0_5_12_post1:triton
sglang/repro/kvfuzz_triton_draft_swa.py:corpus/sglang/triton_draft_swa.json:sglang_triton_0_5_23:triton
sglang/repro/kvfuzz_flashinfer_ragged_window.py:corpus/sglang/flashinfer_ragged_window.json:sglang_flashinfer_0_5_23:flashinfer_paged
sglang/repro/sglang_39287_flashinfer_backend.py:corpus/sglang/flashinfer_verify_swa_start.json:sglang_flashinfer_0_5_23:flashinfer_paged
sglang/repro/sglang_31501_flashinfer_det_window.py:corpus/sglang/flashinfer_det_swa_window.json:sglang_flashinfer_0_5_13_det:flashinfer_paged
sglang/repro/sglang_22679_flashinfer_verify_swa.py:corpus/sglang/flashinfer_verify_swa.json:sglang_flashinfer_0_5_13:flashinfer_paged
sglang/repro/sglang_26513_flashinfer_swa_ragged.py:corpus/sglang/flashinfer_swa_ragged.json:sglang_flashinfer_0_5_12_post1:flashinfer_paged
sglang/repro/sglang_39287_flashinfer_mask.py:corpus/sglang/flashinfer_verify_swa_mask.json:sglang_flashinfer_0_5_23:flashinfer_paged
sglang/repro/kvfuzz_flashinfer_swa_full_prefix.py:corpus/sglang/flashinfer_swa_full_prefix.json:sglang_flashinfer_0_5_13:flashinfer_paged
sglang/repro/kvfuzz_flashinfer_graph_decode_swa.py:corpus/sglang/flashinfer_graph_decode_swa.json:sglang_flashinfer_0_5_23:flashinfer_paged
sglang/repro/kvfuzz_fa_mixed_local.py:corpus/sglang/fa_mixed_local.json:sglang_fa_0_5_23:fa
sglang/repro/kvfuzz_fa_draft_extend_local.py:corpus/sglang/fa_draft_extend_local.json:sglang_fa_0_5_23:fa
sglang/repro/kvfuzz_fa_verify_local.py:corpus/sglang/fa_verify_local.json:sglang_fa_0_5_23:fa
sglang/repro/kvfuzz_fa_draft_local.py:corpus/sglang/fa_draft_local.json:sglang_fa_0_5_23:fa
sglang/repro/kvfuzz_fa_draft_swa_cascade.py:corpus/sglang/fa_draft_swa_cascade.json:sglang_fa_0_5_23:fa
sglang/repro/sglang_32902_fa_local_token_table.py:corpus/regressions/fa__fa_local_token_table.json:sglang_fa_0_5_13:fa
sglang/repro/sglang_24617_fa_swa_spec.py:corpus/regressions/fa__fa_swa_spec_untranslated.json:sglang_fa_0_5_11:fa"

# sglang's own backends: msgspec (0.5.23's configuration classes), where ci/sglang.sh installed it
SGENV=PYTHONPATH=.sglang/pyextra
# Runs beyond CI's (REPRO_FULL=1 adds them; about 60 s more): the other fixes and fixed releases
FULL_RUNS="sglang/repro/kvfuzz_fa_draft_extend_local|sglang 0.5.23 with the proposed fix fa-extend-local, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix fa-extend-local|0
sglang/repro/kvfuzz_triton_draft_swa|sglang 0.5.23 with the proposed fix triton-draft-swa-short, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix triton-draft-swa-short|0
sglang/repro/sglang_32902_fa_local_token_table|sglang 0.5.13 with fix 32902, CPU|.sglang/0.5.13|$SGENV|--site .sglang/0.5.13 --fix 32902|0
sglang/repro/sglang_24617_fa_swa_spec|sglang 0.5.11, FlashAttentionBackend with the FA3 stand-in kernel, CPU|.sglang/0.5.11|$SGENV|--site .sglang/0.5.11|1
sglang/repro/sglang_24617_fa_swa_spec|sglang 0.5.11 with fix 24617, CPU|.sglang/0.5.11|$SGENV|--site .sglang/0.5.11 --fix 24617|0
sglang/repro/sglang_24617_fa_swa_spec|sglang 0.5.12.post1 (the fixed release), CPU|.sglang/0.5.12.post1|$SGENV|--site .sglang/0.5.12.post1|0"

# The CPU runs: reproducer (its path under corpus/, no .py) | label | what it needs (a folder) | environment | arguments | expected exit status
# (REPRO_RUNS replaces them: ci/gpu_repro.sh's GPU runs)
RUNS=${REPRO_RUNS:-"gpu/repro/flashinfer_page_mask_indptr|flashinfer 0.7.2.post1, CPU|$FLASHINFER|PYTHONPATH=$FLASHINFER|--cpu|1
gpu/repro/flashinfer_page_mask_indptr|flashinfer 0.7.2.post1 with the proposed fix, CPU|$FLASHINFER|PYTHONPATH=$FLASHINFER|--cpu --apply-fix|0
gpu/repro/flashinfer_page_mask_indptr_crash|flashinfer 0.7.2.post1, CPU|$FLASHINFER|PYTHONPATH=$FLASHINFER|--cpu|1
gpu/repro/flashinfer_page_mask_indptr_crash|flashinfer 0.7.2.post1 with the proposed fix, CPU|$FLASHINFER|PYTHONPATH=$FLASHINFER|--cpu --apply-fix|0
gpu/repro/sglang_triton_window0|sglang 0.5.23, Triton interpreter|.sglang/0.5.23||--site .sglang/0.5.23|1
gpu/repro/sglang_triton_window0|sglang 0.5.10.post1, Triton interpreter|.sglang/0.5.10.post1||--site .sglang/0.5.10.post1|1
gpu/repro/sglang_39287_triton|sglang 0.5.23, Triton interpreter|.sglang/0.5.23||--site .sglang/0.5.23|1
gpu/repro/sglang_39287_triton|sglang 0.5.10.post1, Triton interpreter|.sglang/0.5.10.post1||--site .sglang/0.5.10.post1|1
gpu/repro/triton_sm90_extend_narrow_v|sglang 0.5.23, Triton interpreter (the source is right; the sm90 build is not)|.sglang/0.5.23||--site .sglang/0.5.23|0
sglang/repro/sglang_32087_triton_decode_window|sglang 0.5.10.post1, TritonAttnBackend and its kernels, CPU|.sglang/0.5.10.post1|$SGENV|--site .sglang/0.5.10.post1|1
sglang/repro/sglang_32087_triton_decode_window|sglang 0.5.10.post1 with fix 32087, CPU|.sglang/0.5.10.post1|$SGENV|--site .sglang/0.5.10.post1 --fix 32087|0
sglang/repro/sglang_32087_triton_decode_window|sglang 0.5.23, TritonAttnBackend and its kernels, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_triton_no_local|sglang 0.5.23, TritonAttnBackend and its kernels, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/sglang_39287_triton_backend|sglang 0.5.23, TritonAttnBackend and its kernels, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/sglang_26651_triton_draft_extend_v2_graph|sglang 0.5.12.post1, TritonAttnBackend and its kernels, CPU|.sglang/0.5.12.post1|$SGENV|--site .sglang/0.5.12.post1|1
sglang/repro/sglang_26651_triton_draft_extend_v2_graph|sglang 0.5.13 (the fixed release), CPU|.sglang/0.5.13|$SGENV|--site .sglang/0.5.13|0
sglang/repro/kvfuzz_triton_draft_swa|sglang 0.5.23 (the window rail one key short), TritonMultiStepDraftBackend and its kernels, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_triton_draft_swa|sglang 0.5.13 (kv_indices=None), TritonMultiStepDraftBackend and its kernels, CPU|.sglang/0.5.13|$SGENV|--site .sglang/0.5.13|1
sglang/repro/kvfuzz_fa_mixed_local|sglang 0.5.23, FlashAttentionBackend with the FA3 stand-in kernel, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_fa_mixed_local|sglang 0.5.23 with the proposed fix fa-extend-local, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix fa-extend-local|0
sglang/repro/kvfuzz_fa_draft_extend_local|sglang 0.5.23, FlashAttentionBackend with the FA3 stand-in kernel, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_fa_verify_local|sglang 0.5.23, FlashAttentionBackend with the FA3 stand-in kernel, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_fa_verify_local|sglang 0.5.23 with the proposed fix fa-verify-local, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix fa-verify-local|0
sglang/repro/kvfuzz_fa_draft_local|sglang 0.5.23, FlashAttentionBackend (draft step 0) with the FA3 stand-in kernel, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_fa_draft_local|sglang 0.5.23 with the proposed fix fa-draft-local, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix fa-draft-local|0
sglang/repro/kvfuzz_fa_draft_swa_cascade|sglang 0.5.23, FlashAttentionBackend (draft step 0) with the FA3 stand-in kernel, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|1
sglang/repro/kvfuzz_fa_draft_swa_cascade|sglang 0.5.23 with the proposed fix fa-draft-swa-cascade, CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23 --fix fa-draft-swa-cascade|0
sglang/repro/sglang_32902_fa_local_token_table|sglang 0.5.13, FlashAttentionBackend with the FA3 stand-in kernel, CPU|.sglang/0.5.13|$SGENV|--site .sglang/0.5.13|1
sglang/repro/sglang_32902_fa_local_token_table|sglang 0.5.23 (the fixed release), CPU|.sglang/0.5.23|$SGENV|--site .sglang/0.5.23|0${REPRO_FULL:+
$FULL_RUNS}"}

# The drafts: issue id | minimal case | planner:executor | reproducer (its path under corpus/, the runs
# above quoted) or, for sglang's other metadata findings, the sglang backend kvfuzz explain runs
# through adapters/sglang
REPORTS="flashinfer-page-mask-indptr|corpus/gpu/flashinfer_mask_indptr_empty_row.json|flashinfer_paged:flashinfer_paged_csr|gpu/repro/flashinfer_page_mask_indptr
triton-sm90-extend-narrow-v|corpus/gpu/sglang_triton_extend_narrow_v.json|triton:sglang_triton|gpu/repro/triton_sm90_extend_narrow_v
kvfuzz-flashinfer-ragged-window|corpus/sglang/flashinfer_ragged_window.json|sglang_flashinfer_0_5_23:flashinfer_paged|flashinfer
kvfuzz-fa-mixed-local|corpus/sglang/fa_mixed_local.json|sglang_fa_0_5_23:fa|sglang/repro/kvfuzz_fa_mixed_local
kvfuzz-triton-no-local|corpus/sglang/triton_no_local.json|sglang_triton_0_5_23:triton|sglang/repro/kvfuzz_triton_no_local
kvfuzz-fa-draft-swa-cascade|corpus/sglang/fa_draft_swa_cascade.json|sglang_fa_0_5_23:fa|sglang/repro/kvfuzz_fa_draft_swa_cascade
kvfuzz-fa-draft-local|corpus/sglang/fa_draft_local.json|sglang_fa_0_5_23:fa|sglang/repro/kvfuzz_fa_draft_local
kvfuzz-fa-verify-local|corpus/sglang/fa_verify_local.json|sglang_fa_0_5_23:fa|sglang/repro/kvfuzz_fa_verify_local
kvfuzz-fa-draft-extend-local|corpus/sglang/fa_draft_extend_local.json|sglang_fa_0_5_23:fa|sglang/repro/kvfuzz_fa_draft_extend_local
kvfuzz-triton-draft-swa-short|corpus/sglang/triton_draft_swa.json|sglang_triton_0_5_23:triton|sglang/repro/kvfuzz_triton_draft_swa"

usage() { echo "usage: bash ci/repro.sh install | check | reports | run DIR" >&2; exit 2; }
case $# in
  1) [ "$1" != run ] || usage ;;
  2) [ "$1" = run ] || usage ;;
  *) usage ;;
esac

install_flashinfer() {  # the wheel's package __init__, prefill.py and metadata: all the CPU reproducer reads
  [ -f "$FLASHINFER/flashinfer/prefill.py" ] && return
  local wheel
  wheel=$(ls .gpu/wheels/flashinfer_python-0.7.2.post1-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    mkdir -p .flashinfer/wheels
    retrying python3 -m pip download -q --no-deps --only-binary=:all: "flashinfer-python==0.7.2.post1" -d .flashinfer/wheels
    wheel=$(ls .flashinfer/wheels/flashinfer_python-0.7.2.post1-*.whl | head -1)
  fi
  rm -rf "$FLASHINFER.tmp" && mkdir -p "$FLASHINFER.tmp"
  python3 - "$wheel" "$FLASHINFER.tmp" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n in ("flashinfer/__init__.py", "flashinfer/prefill.py") or n.endswith(".dist-info/METADATA"):
        z.extract(n, sys.argv[2])
EOF
  mv "$FLASHINFER.tmp" "$FLASHINFER"
}

# run_all OUTDIR: every CPU run whose package is here; OUTDIR/<file>.<n>.out and .label; the failures
run_all() {
  local dir=$1 n=0 failures=0 ran=0 file label needs args expect rc
  "$PY" -c 'import numpy, torch' 2>/dev/null || { skipped="$PY has no numpy and torch (PY)"; return 0; }
  while IFS='|' read -r path label needs environment args expect; do
    n=$((n + 1))
    file=$(basename "$path")
    if [ ! -d "$needs" ]; then
      printf '%-34s %-70s skipped (no %s)\n' "$file" "$label" "$needs"
      continue
    fi
    ran=$((ran + 1))
    # a copy outside the checkout runs: the script imports nothing of kvfuzz but its harness beside it
    cp "$gen/$path.py" "$dir/$file.py"
    cp "$gen/$(dirname "$path")"/kvfuzz_repro_*.py "$dir/"
    # shellcheck disable=SC2086  # the environment and the arguments are words
    env $environment timeout "${REPRO_TIMEOUT:-600}" "$PY" "$dir/$file.py" $args >"$dir/$file.$n.out" 2>&1 &&
      rc=0 || rc=$?
    printf '%s: exit %s' "$label" "$rc" >"$dir/$file.$n.label"
    printf '%-34s %-70s exit %s (expected %s)\n' "$file" "$label" "$rc" "$expect"
    if [ "$rc" != "$expect" ]; then
      tail -15 "$dir/$file.$n.out"
      echo "FAIL: $file on $label exited $rc, expected $expect"
      failures=$((failures + 1))
    fi
  done <<<"$RUNS"
  [ $ran -gt 0 ] || skipped="no package of any reproducer here (bash ci/repro.sh install; bash ci/sglang.sh known)"
  return $failures
}

# generate DIR: every reproducer of REPROS into DIR (its harness beside it); prints each script's and
# harness's length; fails when a script is longer than MAX_LINES
generate() {
  local dir=$1 failures=0 file case planner executor lines
  while IFS=: read -r file case planner executor; do
    mkdir -p "$dir/$(dirname "$file")"
    if ! "$KVFUZZ" repro "$case" --backend "$planner:$executor" -o "$dir/$file"; then
      echo "FAIL: $KVFUZZ repro $case --backend $planner:$executor -o $dir/$file"
      failures=$((failures + 1))
      continue
    fi
    lines=$(wc -l <"$dir/$file")
    harness=$(sed -n 's/^import \(kvfuzz_repro_[a-z0-9_]*\) as kv.*/\1.py/p' "$dir/$file")
    printf '%-56s %4s lines (its harness %s: %s lines)\n' "$file" "$lines" "$harness" \
      "$(wc -l <"$dir/$(dirname "$file")/$harness")"
    [ "$lines" -le $MAX_LINES ] || { echo "FAIL: $file is $lines lines, more than $MAX_LINES"; failures=$((failures + 1)); }
  done <<<"$REPROS"
  return $failures
}

case "$1" in
  install) install_flashinfer ;;
  generate)
    [ -x "$KVFUZZ" ] || { echo "ci/repro.sh: $KVFUZZ not found: build kvfuzz first (bash ci/build.sh)" >&2; exit 2; }
    rm -rf "$REPRO_DIR" && generate "$REPRO_DIR" ;;
  run)  # only the runs (RUNS or REPRO_RUNS), outputs in DIR
    mkdir -p "$2"
    failures=0 skipped="" gen=$REPRO_DIR
    if [ -x "$KVFUZZ" ]; then
      gen=$(mktemp -d)
      generate "$gen" >"$2/generate.txt" || { cat "$2/generate.txt"; exit 1; }
    elif [ ! -d "$gen" ]; then
      echo "ci/repro.sh: neither $KVFUZZ nor generated reproducers in $REPRO_DIR (bash ci/repro.sh generate)" >&2; exit 2
    fi
    run_all "$2" || failures=$?
    echo "${skipped:+SKIPPED: }${skipped:-runs: $failures not as expected}"
    exit $((failures > 0))
    ;;
  check|reports)
    [ -x "$KVFUZZ" ] || { echo "ci/repro.sh: $KVFUZZ not found: build kvfuzz first (bash ci/build.sh)" >&2; exit 2; }
    failures=0
    out=$(mktemp -d) skipped=""
    gen=$out/generated
    generate "$gen" || failures=$((failures + $?))
    run_all "$out" || failures=$((failures + $?))
    # The FA reproducers' one piece not from upstream, FA3's stand-in kernel, against float64 (about 2 s)
    if [ -z "$skipped" ]; then
      "$PY" adapters/tests/fa3_standin_test.py >"$out/fa3_standin.txt" 2>&1 && rc=0 || rc=$?
      printf '%-34s %-70s exit %s (expected 0)\n' "fa3_standin_test.py" "the FA3 stand-in against a float64 oracle" "$rc"
      [ $rc = 0 ] || { cat "$out/fa3_standin.txt"; failures=$((failures + 1)); }
    fi
    # The template does not cry wolf: generated cases the kernel gets right (tiny seed 40: extend,
    # window 6, GQA; 235: target verify, window 11, GQA) exit 0 through sglang 0.5.23's Triton kernel.
    if [ -z "$skipped" ] && [ -d .sglang/0.5.23 ]; then
      for seed in 40 235; do
        "$KVFUZZ" gen --seed $seed --profile tiny >"$out/clean$seed.json"
        "$KVFUZZ" repro "$out/clean$seed.json" --backend triton:sglang_triton -o "$out/clean$seed.py"
        "$PY" "$out/clean$seed.py" --site .sglang/0.5.23 >"$out/clean$seed.txt" 2>&1 && rc=0 || rc=$?
        printf '%-34s %-70s exit %s (expected 0)\n' "tiny seed $seed" "sglang 0.5.23, Triton interpreter" "$rc"
        [ $rc = 0 ] || { tail -5 "$out/clean$seed.txt"; echo "FAIL: a clean case exits $rc"; failures=$((failures + 1)); }
      done
    fi
    # What the GPU machine carries of a release (ci/gpu_sglang_src.py's archive, ci/gpu_repro.sh)
    # runs the production pair as the whole release does: the same output, line for line.
    if [ -z "$skipped" ] && [ -f .sglang/0.5.23/sglang/__init__.py ]; then
      mkdir -p "$out/src"
      if python3 ci/gpu_sglang_src.py --folder "$out/gpu/wheels" 0.5.23 >"$out/pack.txt" 2>&1 &&
        tar -xzf "$out/gpu/wheels/sglang_src-0.5.23.tgz" -C "$out/src"; then
        for repro in kvfuzz_triton_draft_swa sglang_39287_triton_backend; do
          for site in .sglang/0.5.23 "$out/src"; do
            env $SGENV "$PY" "$gen/sglang/repro/$repro.py" --site "$site" >"$out/$repro.${site//\//_}.txt" 2>&1 &&
              rc=0 || rc=$?
            echo "exit $rc" >>"$out/$repro.${site//\//_}.txt"
          done
          same=$(cmp -s "$out/$repro..sglang_0.5.23.txt" "$out/$repro.${out//\//_}_src.txt" && echo same || echo DIFFERENT)
          printf '%-34s %-70s %s\n' "$repro" "sglang 0.5.23 from its packed source vs the whole release" "$same"
          [ "$same" = same ] || { diff "$out/$repro..sglang_0.5.23.txt" "$out/$repro.${out//\//_}_src.txt" | tail -5 || true
                                  echo "FAIL: the packed source runs $repro otherwise"; failures=$((failures + 1)); }
        done
      else
        cat "$out/pack.txt"
        echo "FAIL: ci/gpu_sglang_src.py could not pack and unpack sglang 0.5.23"
        failures=$((failures + 1))
      fi
    fi
    # The runs as ci/gpu_pair_table.py tabulates them: a row per run, each with its known issue
    if [ -z "$skipped" ] && ls "$out"/*.out >/dev/null 2>&1; then
      if ! python3 ci/gpu_pair_table.py "$out" >"$out/table.md" 2>&1 ||
        [ "$(grep -c '^| `' "$out/table.md")" != "$(ls "$out"/*.out | wc -l)" ] || grep -q '| ? |' "$out/table.md"; then
        cat "$out/table.md"
        echo "FAIL: ci/gpu_pair_table.py does not give every run a row with its known issue"
        failures=$((failures + 1))
      fi
    fi
    if [ "$1" = reports ]; then
      while IFS='|' read -r id case backend how; do
        dir=$(dirname "$case")/reports
        mkdir -p "$dir"
        runs=()
        if [ -f "$gen/$how.py" ]; then
          for dir_ in "$out" ${GPU_OUTPUTS:-}; do
            for label in "$dir_/$(basename "$how")".*.label; do
              [ -f "$label" ] && runs+=(--run-output "$(cat "$label")=${label%.label}.out")
            done
          done
        else  # sglang's own metadata code through adapters/sglang, kvfuzz's executor: expected vs read keys
          "$KVFUZZ" explain "$case" --backend "$backend" \
            --adapter "$PY adapters/sglang/sglang_planner.py --site .sglang/0.5.23 --backend $how" >"$out/$id.explain" 2>&1 || true
          runs+=(--run-output "sglang 0.5.23's own metadata code (adapters/sglang, CPU), kvfuzz explain (the keys each failing query should read and did read, or the exception it raised)=$out/$id.explain")
        fi
        for f in "$out"/*.out "$out"/*.explain; do [ -f "$f" ] && sed -i "s#$PWD/##g" "$f"; done  # no local paths
        "$KVFUZZ" repro "$case" --backend "$backend" --report --issue "$id" "${runs[@]}" -o "$dir/$id.md"
        echo "wrote $dir/$id.md"
      done <<<"$REPORTS"
    fi
    rm -rf "$out"
    [ $failures = 0 ] && echo "${skipped:+SKIPPED: }${skipped:-reproducers: ok}"
    exit $((failures > 0))
    ;;
  *) usage ;;
esac
