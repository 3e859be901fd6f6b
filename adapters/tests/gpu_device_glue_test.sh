#!/usr/bin/env bash
# The GPU executors' device side on the CPU (torch tensors on the host under TRITON_INTERPRET=1): what
# they build on the device instead of copying each layer's outputs to the host (docs/gpu.md "One wait
# for the device a request"). Checks:
#  - device_outputs.merge gives numpy_attention.merge's float32 values on random merges (float64 parts,
#    -inf LSEs among them), within 1e-14 before the rounding (torch's exp is not numpy's); divided is numpy's float32
#    division by a Python float; padded_rows pads with its fill;
#  - flashinfer_paged_csr and flashinfer_mla through their device glue (flashinfer_kernels.py's array
#    side around flashinfer_emulated.py's model: adapters/tests/flashinfer_device_glue.py) are clean,
#    every case checked: the token selection, merges (flashinfer_base2 and natural_exp), LSE base change
#    and cuda_arrays.fetch in torch. flashinfer_kernels.py's array side has no other CPU run;
#  - with the planner's natural_exp fault (merge_natural in torch) the same findings, case by case, as
#    flashinfer_paged_csr under KVFLASHINFER_EMULATE=1 (numpy): values may differ in a float32 last bit
#    (torch's exp is not numpy's), the findings do not.
# The other converted executors run on the CPU in fa3_page_table_test (fa3_page_table, fa3_mla),
# gpu_descales_test and vllm_triton_kernel_test. Needs torch (.sglang/venv, ci/sglang.sh): else SKIPPED.
#   gpu_device_glue_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
source "$(dirname "$0")/torch_test_env.sh" "$@"
export TRITON_INTERPRET=1 OMP_NUM_THREADS=1

PYTHONPATH=$SRC/adapters/gpu:$SRC/adapters/examples "$PY" - >"$WORK/merge.out" 2>&1 <<'PY' || fail "device_outputs against numpy" "$WORK/merge.out"
import numpy as np, torch
import device_outputs
from numpy_attention import merge
rng = np.random.default_rng(0)
values = 0
for i in range(500):
    n, h, d = (int(x) for x in rng.integers(1, 9, 3))
    lse = [rng.normal(size=(n, h)) * 8 for _ in "ab"]
    for s in lse:
        s[rng.random((n, h)) < 0.3] = -np.inf
    out = [rng.normal(size=(n, h, d)).astype(np.float32).astype(np.float64) for _ in "ab"]
    want = merge(out[0], lse[0], out[1], lse[1])
    got = [t.numpy() for t in device_outputs.merge(*(torch.from_numpy(a) for a in (out[0], lse[0], out[1], lse[1])))]
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, g.shape)
        assert np.array_equal(w.astype(np.float32), g.astype(np.float32)), f"merge {i}: float32 values differ"
        assert np.allclose(w, g, rtol=1e-14, atol=1e-14), f"merge {i}: float64 values further apart than exp's last bits"
        values += w.size
s = (rng.normal(size=10000) * 30).astype(np.float32)
assert np.array_equal(device_outputs.divided(torch.from_numpy(s), 1.4426950408889634).numpy(), s / 1.4426950408889634)
p = device_outputs.padded_rows(torch.ones(2, 3), 5, -np.inf).numpy()
assert p.shape == (5, 3) and (p[:2] == 1).all() and np.isneginf(p[2:]).all()
print(f"device_outputs: {values} merged values as numpy's in float32; divided, padded_rows")
PY

glue() {  # glue NAME BACKEND CASES: the executor through its device glue, a clean campaign, every case checked
  "$K" run --cases "$3" --seed 1 --profile tiny --profile small --jobs 2 --no-shrink --backend "$2" \
    --adapter "TRITON_INTERPRET=1 OMP_NUM_THREADS=1 $PY $SRC/adapters/tests/flashinfer_device_glue.py $SRC/adapters/gpu/$1.py" \
    --out "$WORK/$1" >"$WORK/$1.log" 2>&1 || fail "$1 through its device glue: exit $?, expected 0" "$WORK/$1.log"
  checked=$(awk -v b="$2" '$1 == b {print $2}' "$WORK/$1.log")
  [ "${checked:-0}" -ge "$4" ] || fail "$1 through its device glue checked ${checked:-0} cases, expected $4" "$WORK/$1.log"
}
glue flashinfer_paged_csr flashinfer:flashinfer_paged_csr 24 24
glue flashinfer_mla mla:flashinfer_mla 8 7

# natural_exp merges (sglang's Triton merge_state fallback, kvfuzz's planner fault): through the glue
# (merge_natural in torch) the same findings as through the numpy emulation, case by case.
fault() {  # fault NAME ADAPTER
  "$K" run --cases 8 --seed 1 --profile tiny --profile small --jobs 2 --no-shrink --backend flashinfer:flashinfer_paged_csr \
    --fault flashinfer_lse_base_mismatch --adapter "$2" --out "$WORK/$1" >"$WORK/$1.log" 2>&1
  [ $? = 1 ] || fail "$1: the natural_exp campaign found nothing (exit 1 expected)" "$WORK/$1.log"
  (cd "$WORK/$1" && ls -- *.finding.json) >"$WORK/$1.findings"
}
fault natural_glue "TRITON_INTERPRET=1 OMP_NUM_THREADS=1 $PY $SRC/adapters/tests/flashinfer_device_glue.py $SRC/adapters/gpu/flashinfer_paged_csr.py"
fault natural_numpy "KVFLASHINFER_EMULATE=1 $PY $SRC/adapters/gpu/flashinfer_paged_csr.py"
[ -s "$WORK/natural_glue.findings" ] && cmp -s "$WORK/natural_glue.findings" "$WORK/natural_numpy.findings" ||
  fail "natural_exp merges: the device glue's findings are not the numpy emulation's ($(wc -l <"$WORK/natural_glue.findings") and $(wc -l <"$WORK/natural_numpy.findings"))"
echo "PASS: device_outputs as numpy; flashinfer_paged_csr and flashinfer_mla clean through their device glue;" \
  "natural_exp merges found as the numpy emulation finds them"
