"""A paged_csr executor written from scratch with numpy: FlashInfer's wrapper calls.

Reads the paged_csr metadata (backends/flashinfer/flashinfer_plan_io.cc) the way FlashInfer's
BatchDecode / BatchPrefill wrappers do. Layer l runs the calls of group plan["group_of_layer"][l],
in order; in call c ("groups.<g>.calls.<c>."), kernel row r holds the batch query tokens
qo_indptr[r] .. qo_indptr[r + 1] and
  - a paged call (every role but "ragged") reads kv_indptr[r + 1] - kv_indptr[r] pages of the
    layer's pool (full or SWA: case.k_cache(layer) is already the right one), key k at slot
    kv_indices[kv_indptr[r] + k // ps] * ps + k % ps, (pages - 1) * ps + kv_last_page_len[r] keys;
  - a ragged call reads the batch's new K/V, key k at batch token kv_indptr[r] + k.
Query i of q_len sits at key index k_len - q_len + i (bottom-right); window_left >= 0 drops keys
below that index - window_left; then the custom mask (custom_mask[mask_indptr[r] + i * k_len + k])
when has_mask, else the causal rule when causal. Each call's LSE is FlashInfer's base 2; the calls
are merged in order by plan["merge"]: "flashinfer_base2" (cascade.cuh MergeState, exp2 on base-2
LSEs: a correct merge) or "natural_exp" (sglang's triton merge_state fallback, exp on the same
base-2 values: the fault mode, reproduced as kvfuzz's executor computes it).

    kvfuzz check case.json --adapter "python3 adapters/examples/numpy_paged_csr.py" --backend numpy_paged_csr

KVFUZZ_EXAMPLE_BREAK=drop_last_key: a paged row reads one key fewer. KVFUZZ_EXAMPLE_DELAY and
KVFUZZ_EXAMPLE_MODES: example_env.py. It declares "batch": true (cases of one shape may come as
one, on executor servers: docs/gpu.md "Batching").
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_adapter as kv  # noqa: E402
from example_env import cut_last_key, declared_modes, kernel_delay  # noqa: E402
from numpy_attention import LOG2E, attend, dequantize, merge_base2, take  # noqa: E402


def run_call(case, call, prefix, layer, out, lse):
    """One wrapper call into out [tokens, q_heads, v_head_dim] and natural-log lse [tokens, q_heads]."""
    qo_indptr = case.array(prefix + "qo_indptr").astype(np.int64)
    kv_indptr = case.array(prefix + "kv_indptr").astype(np.int64)
    paged = call["role"] != "ragged"
    ps = call["page_size"]
    if paged and ps <= 0:
        raise ValueError(f"page_size {ps}")
    window_left = call["window_left"]
    if paged:
        indices = case.array(prefix + "kv_indices").astype(np.int64)
        last_page_len = case.array(prefix + "kv_last_page_len").astype(np.int64)
        k_src = dequantize(case.k_cache(layer), case.k_scale(layer))  # an fp8 cache read by its scales
        v_src = dequantize(case.v_cache(layer), case.v_scale(layer))
    else:
        k_src, v_src = case.k_new[layer], case.v_new[layer]
    if call["has_mask"]:
        mask = case.array(prefix + "custom_mask")
        mask_indptr = case.array(prefix + "mask_indptr").astype(np.int64)
    q_all = case.q[layer]
    for r in range(call["rows"]):
        q0, q1 = int(take(qo_indptr, r)), int(take(qo_indptr, r + 1))
        if q1 < q0:
            raise ValueError(f"qo_indptr decreases at row {r}: {q0} then {q1}")
        kv0 = int(take(kv_indptr, r))
        entries = int(take(kv_indptr, r + 1)) - kv0
        if paged:
            k_len = 0 if entries == 0 else cut_last_key((entries - 1) * ps + int(take(last_page_len, r)))
        else:
            k_len = entries
        keys = np.arange(max(k_len, 0))
        # every key of the extent is addressed (a kernel loads whole tiles), masked or not
        rows = take(indices, kv0 + keys // ps) * ps + keys % ps if paged else kv0 + keys
        k, v = take(k_src, rows), take(v_src, rows)
        tokens = np.arange(q0, q1)
        q_len = len(tokens)
        q_abs = k_len - q_len + np.arange(q_len)[:, None]  # bottom-right: query i's own key index
        visible = np.ones((q_len, len(keys)), dtype=bool)
        if window_left >= 0:
            visible &= keys[None, :] >= q_abs - window_left
        if call["has_mask"]:
            at = take(mask_indptr, r) + np.arange(q_len)[:, None] * k_len + keys[None, :]
            allowed = np.zeros_like(visible)
            allowed[visible] = take(mask, at[visible]) != 0  # the mask is read where the window keeps
            visible = allowed
        elif call["causal"]:
            visible &= keys[None, :] <= q_abs
        o, l = attend(take(q_all, tokens), k, v, visible, case.sm_scale, case.softcap)
        out[tokens], lse[tokens] = o, l


@kv.executor(name="numpy_paged_csr", family="paged_csr", batch=True,
             supports={"modes": declared_modes(), "dtypes": ["fp32", "fp16", "bf16", "fp8_e4m3"], "kv_scales": True, "page_sizes": "any",
                       "mla": True, "non_mla": True},
             precision={"p_dtype": "fp32", "out_dtype": "fp32"})
def run(case):
    """numpy paged_csr executor (FlashInfer wrapper semantics)"""
    kernel_delay(case)
    out_shape, lse_shape = case.output_shapes()
    out = np.zeros(out_shape)
    lse = np.full(lse_shape, -np.inf)
    natural_exp = case.plan["merge"] == "natural_exp"
    for layer in range(len(case.layers)):
        g = case.plan["group_of_layer"][layer]
        acc = None  # (out, base-2 lse) of the calls so far
        for c, call in enumerate(case.plan["groups"][g]["calls"]):
            o = np.zeros(out_shape[1:])
            l = np.full(lse_shape[1:], -np.inf)
            run_call(case, call, f"groups.{g}.calls.{c}.", layer, o, l)
            acc = merge_base2(acc, (o, l * LOG2E), natural_exp)  # FlashInfer returns log2-sum-exp
        if acc is not None:
            out[layer], lse[layer] = acc[0], acc[1] / LOG2E
    return out.astype(np.float32), lse.astype(np.float32)


if __name__ == "__main__":
    kv.serve(run)
