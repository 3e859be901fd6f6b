#!/usr/bin/env bash
# fa3_mla.py's arguments on the CPU: FA3's real library cannot run here, so KVFUZZ_FA3 names a folder
# whose sgl_kernel/flash_attn.py is FA3's stand-in (adapters/repro/fa3_standin.py, which models qv), on
# host tensors (TRITON_INTERPRET=1: cuda_arrays.DEV). Checks: cases of kvfuzz's mla planner (latent
# decode and prefill plans) clean through it; a copy of the executor that drops qv (the latent half of
# every score) caught on the same cases. The pairs with sglang's MLA metadata: ci/gpu_mla_pairs.sh
# --dry-run (about a minute); on the GPU with the real library: docs/gpu.md. Needs torch (.sglang/venv,
# ci/sglang.sh): without it, SKIPPED.
#   fa3_mla_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
set -uo pipefail
SRC=$1 K=$2 WORK=$3
PY=$SRC/.sglang/venv/bin/python
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "SKIPPED: no .sglang/venv with torch (bash ci/sglang.sh install)"; exit 0; }
fail() { echo "FAIL: $1"; [ -f "${2:-}" ] && tail -30 "$2"; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/fa3/sgl_kernel"
: >"$WORK/fa3/sgl_kernel/__init__.py"
printf 'import sys\nsys.path.append("%s/adapters/repro")\nfrom fa3_standin import flash_attn_with_kvcache  # noqa: E402,F401\n' \
  "$SRC" >"$WORK/fa3/sgl_kernel/flash_attn.py"
export TRITON_INTERPRET=1 OMP_NUM_THREADS=1 KVFUZZ_FA3=$WORK/fa3

campaign() {  # campaign NAME EXECUTOR: 4 cases of kvfuzz's mla planner through EXECUTOR and the stand-in
  "$K" run --cases 4 --seed 5 --profile tiny --jobs 2 --no-shrink --backend mla:fa3_mla \
    --adapter "$PY $2" --out "$WORK/$1" >"$WORK/$1.log" 2>&1
}
campaign clean "$SRC/adapters/gpu/fa3_mla.py"
rc=$?
[ $rc -eq 0 ] || fail "the clean campaign exited $rc, expected 0" "$WORK/clean.log"
checked=$(awk '$1 == "mla:fa3_mla" {print $2}' "$WORK/clean.log")
[ "${checked:-0}" -ge 4 ] || fail "the clean campaign checked ${checked:-0} cases, expected 4" "$WORK/clean.log"
# both plan paths ran: latent decode (decode, draft decode) and prefill (extend, draft extend)
python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))["coverage"]["by_backend"]["mla:fa3_mla"]["mode_layer"]
sys.exit(not ({"decode", "draft_decode"} & set(m) and {"extend", "draft_extend_v2", "mixed"} & set(m)))' \
  "$WORK/clean/campaign.json" || fail "the clean campaign did not run both plan paths (latent decode and prefill)" "$WORK/clean.log"

mkdir -p "$WORK/adapters" && cp -r "$SRC/adapters/gpu" "$SRC/adapters/examples" "$SRC/adapters/kvfuzz_adapter" "$WORK/adapters/"
mutant=$WORK/adapters/gpu/fa3_mla.py
sed -i 's/qv=q\[..., :CKV\], \*\*args)/qv=None, **args)/' "$mutant"
grep -q 'qv=None, \*\*args)' "$mutant" || fail "the qv mutant did not apply to $mutant"
campaign mutant "$mutant"
rc=$?
[ $rc -eq 1 ] || fail "the qv mutant's campaign exited $rc, expected 1 (a finding)" "$WORK/mutant.log"
grep -q "oracle/mla:fa3_mla" "$WORK/mutant.log" || fail "the qv mutant's findings are not the oracle's" "$WORK/mutant.log"
echo "PASS: 4 cases of the mla planner clean through fa3_mla and FA3's stand-in; the executor without qv caught"
