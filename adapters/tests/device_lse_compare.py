"""vllm_triton.py with vLLM's kernel skipped and each call's device LSE (adapters/gpu/device_lse.py)
compared with the numpy re-derivation it replaced (page_table_parts.call_lse before 2026-11-28: row by
row through numpy_attention.attend, float64; below with its own visibility rule): one JSON line per call in $CMP_OUT
(values, float32 and float64 differences, the largest relative one, whether the -inf pattern is the
same). A check by hand, not a ctest (about a minute on 2 cores):

    TRITON_INTERPRET=1 kvfuzz run --cases 80 --seed 5 --profile tiny --profile small --profile medium \\
        --backend vllm_triton --jobs 2 --no-shrink --out /tmp/lse-cmp \\
        --adapter "CMP_OUT=/tmp/lse-cmp.jsonl TRITON_INTERPRET=1 .sglang/venv/bin/python adapters/tests/device_lse_compare.py"
    python3 -c 'import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; print(len(r), "calls,",
        sum(x["values"] for x in r), "LSEs,", sum(x["f32_diff"] for x in r), "float32 differences")' /tmp/lse-cmp.jsonl
"""
import json
import os
import sys

ADAPTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ADAPTERS, os.path.join(ADAPTERS, "examples"), os.path.join(ADAPTERS, "gpu")]
import numpy as np  # noqa: E402

import device_lse  # noqa: E402
import vllm_triton  # noqa: E402
from numpy_attention import attend  # noqa: E402
from page_table_parts import call_rows  # noqa: E402


class Skipped:  # kernel_unified_attention[grid](...) launches nothing: only the LSE is compared
    def __getitem__(self, grid):
        return lambda **kwargs: None


def numpy_lse(case, layer, call, prefix, window_left, n_slots):
    """The rows' keys as page_table_parts.call_rows lists them, their visibility and LSE as the numpy
    re-derivation computed them (its own visibility rule, not page_table_parts.visible)."""
    lse = np.full((case.num_tokens, case.q[layer].shape[1]), -np.inf)
    for q0, q1, slots, q_pos in call_rows(case, call, prefix, window_left, n_slots):
        keys = np.arange(len(slots))
        visible = np.ones((q1 - q0, len(slots)), bool)
        if call["causal"] or window_left >= 0:
            visible &= keys[None, :] <= q_pos[:, None]
        if window_left >= 0:
            visible &= keys[None, :] >= q_pos[:, None] - window_left
        k = case.pool_rows(layer, "k", slots) * np.float32(case.k_scale(layer))
        v = case.pool_rows(layer, "v", slots) * np.float32(case.v_scale(layer))
        _, lse[q0:q1] = attend(case.q[layer][q0:q1], k, v, visible, case.sm_scale, case.softcap)
    return lse


def compared(case, layer, call, prefix, window_left, keys):
    got = device_lse.call_lse(case, layer, call, prefix, window_left, keys)
    want, g = numpy_lse(case, layer, call, prefix, window_left, keys(layer)[1].shape[0]), got.cpu().numpy()
    finite = np.isfinite(want)
    line = dict(values=int(want.size), f32_diff=int((want.astype(np.float32) != g.astype(np.float32)).sum()),
                f64_diff=int((want != g).sum()),
                max_rel=float(np.max(np.abs(want - g)[finite] / np.maximum(1, np.abs(want[finite])), initial=0)),
                inf_same=bool(np.array_equal(finite, np.isfinite(g)) and np.array_equal(want[~finite], g[~finite])),
                softcap=float(case.softcap), window_left=int(window_left), dtype=case.dtype)
    with open(os.environ["CMP_OUT"], "a") as f:
        f.write(json.dumps(line) + "\n")
    return got


if __name__ == "__main__":
    vllm_triton.KERNEL_MODULE.kernel_unified_attention = Skipped()
    vllm_triton.call_lse = compared
    vllm_triton.kv.serve(vllm_triton.run)
