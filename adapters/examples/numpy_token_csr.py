"""A token_csr executor written from scratch with numpy: sglang's Triton attention kernels.

Reads the token_csr metadata (backends/triton/triton_plan_io.cc). Layer l reads CSR
plan["layer_csr"][l] ("csrs.<c>.": kv_indptr over kernel rows, kv_indices = token slots of the
layer's pool, full or SWA: case.k_cache(layer) is already the right one), with the kernel
plan["kernel"]:
  - "decode" (decode_attention.py, split-KV): kernel row r is one query, batch token r; its keys are
    kv_indices[kv_indptr[r] ..kv_indptr[r + 1]], all visible. The row's kv_len keys are cut into
    chunks of ceil32(ceil(kv_len / s)) keys, s = max(1, num_kv_splits[r]); split j < max_kv_splits
    covers [chunk * j, min(chunk * (j + 1), kv_len)) and is skipped when empty; the splits are merged
    by LSE in split order (stage 2).
  - "extend" (extend_attention.py): request row i has query tokens qo_indptr[i] .. qo_indptr[i + 1]
    and reads, in ONE softmax, its prefix keys kv_indices[kv_indptr[i] + k] (k < prefix) and then
    its q_len new tokens from k_new / v_new. New token n is visible to query m when n <= m, or with
    use_custom_mask when custom_mask[mask_indptr[i] + m * (prefix + q_len + off) + off + prefix + n]
    is set (off = kv_offsets[i]; the mask's prefix columns are skipped). Window and chunk CSRs add a
    mask on positions: prefix key k sits at off + k, new token n at positions[q0 + n], the query at
    positions[q0 + m]; a window of radius W keeps pos_q - pos_k <= W, a chunk of C keeps
    pos_k >= pos_q // C * C.
  - "none": nothing runs.

    kvfuzz check case.json --adapter "python3 adapters/examples/numpy_token_csr.py" --backend numpy_token_csr

It declares "batch": true (docs/gpu.md "Batching"); KVFUZZ_EXAMPLE_DELAY and KVFUZZ_EXAMPLE_MODES:
example_env.py.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_adapter as kv  # noqa: E402
from example_env import declared_modes, kernel_delay  # noqa: E402
from numpy_attention import attend, dequantize, merge, take  # noqa: E402

MIN_BLOCK_KV = 32  # decode_attention.py: a split's keys are a multiple of this


def split_range(kv_len, splits, split):
    """Keys [begin, end) that split `split` of a row of kv_len keys handles (empty: skipped)."""
    if kv_len <= 0:
        return 0, 0
    per = -(-kv_len // splits)
    chunk = -(-per // MIN_BLOCK_KV) * MIN_BLOCK_KV
    begin = chunk * split
    return begin, min(begin + chunk, kv_len)


def trunc_div(a, b):
    """C++ integer division (toward zero)."""
    if b == 0:
        raise ZeroDivisionError("chunk size 0")
    return np.sign(a) * np.sign(b) * (np.abs(a) // abs(b))


def run_decode(case, csr, prefix, layer, out, lse):
    kv_indptr = case.array(prefix + "kv_indptr").astype(np.int64)
    kv_indices = case.array(prefix + "kv_indices").astype(np.int64)
    num_kv_splits = case.array(prefix + "num_kv_splits").astype(np.int64)
    k_pool = dequantize(case.k_cache(layer), case.k_scale(layer))  # an fp8 cache read by its scales
    v_pool = dequantize(case.v_cache(layer), case.v_scale(layer))
    q_all = case.q[layer]
    rows = case.plan["rows"]
    for split in range(case.plan["max_kv_splits"]):
        for r in range(rows):
            start = int(take(kv_indptr, r))
            kv_len = int(take(kv_indptr, r + 1)) - start
            begin, end = split_range(kv_len, max(1, int(take(num_kv_splits, r))), split)
            if end <= begin:
                continue  # stage 1 stores nothing, stage 2 skips it
            slots = take(kv_indices, start + np.arange(begin, end))
            token = np.array([r])  # one query per kernel row
            o, l = attend(take(q_all, token), take(k_pool, slots), take(v_pool, slots),
                          np.ones((1, end - begin), dtype=bool), case.sm_scale, case.softcap)
            out[token], lse[token] = merge(out[token], lse[token], o, l)


def run_extend(case, csr, prefix, layer, out, lse):
    plan = case.plan
    qo_indptr = case.array("qo_indptr").astype(np.int64)
    positions = case.array("positions").astype(np.int64)
    kv_indptr = case.array(prefix + "kv_indptr").astype(np.int64)
    kv_indices = case.array(prefix + "kv_indices").astype(np.int64)
    kv_offsets = case.array(prefix + "kv_offsets").astype(np.int64)
    if plan["use_custom_mask"]:
        mask = case.array("custom_mask")
        mask_indptr = case.array("mask_indptr").astype(np.int64)
    k_pool = dequantize(case.k_cache(layer), case.k_scale(layer))  # an fp8 cache read by its scales
    v_pool = dequantize(case.v_cache(layer), case.v_scale(layer))
    q_all, k_new, v_new = case.q[layer], case.k_new[layer], case.v_new[layer]
    for i in range(plan["padded_bs"]):
        q0 = int(take(qo_indptr, i))
        q_len = max(0, int(take(qo_indptr, i + 1)) - q0)
        start = int(take(kv_indptr, i))
        n_prefix = max(0, int(take(kv_indptr, i + 1)) - start)
        offset = int(take(kv_offsets, i))
        tokens = q0 + np.arange(q_len)
        slots = take(kv_indices, start + np.arange(n_prefix))
        k = np.concatenate([take(k_pool, slots), take(k_new, tokens)])
        v = np.concatenate([take(v_pool, slots), take(v_new, tokens)])
        m = np.arange(q_len)[:, None]
        n = np.arange(q_len)[None, :]
        if plan["use_custom_mask"]:
            stride = n_prefix + q_len + offset
            new_visible = take(mask, take(mask_indptr, i) + m * stride + offset + n_prefix + n) != 0
        else:
            new_visible = n <= m
        visible = np.concatenate([np.ones((q_len, n_prefix), dtype=bool), new_visible], axis=1)
        if csr["kind"] != "full" and q_len > 0:
            pos_q = take(positions, tokens)[:, None]
            pos_k = np.concatenate([offset + np.arange(n_prefix), take(positions, tokens)])[None, :]
            if csr["kind"] == "sliding_window":
                visible &= pos_q - pos_k <= csr["window_or_chunk"]
            else:  # chunked
                visible &= pos_k >= trunc_div(pos_q, csr["window_or_chunk"]) * csr["window_or_chunk"]
        o, l = attend(take(q_all, tokens), k, v, visible, case.sm_scale, case.softcap)
        out[tokens], lse[tokens] = o, l


@kv.executor(name="numpy_token_csr", family="token_csr", batch=True,
             supports={"modes": declared_modes(), "dtypes": ["fp32", "fp16", "bf16", "fp8_e4m3"], "kv_scales": True, "page_sizes": "any",
                       "mla": True, "non_mla": True},
             precision={"p_dtype": "fp32", "out_dtype": "fp32"})
def run(case):
    """numpy token_csr executor (sglang Triton decode / extend kernel semantics)"""
    kernel_delay(case)
    out_shape, lse_shape = case.output_shapes()
    out = np.zeros(out_shape)
    lse = np.full(lse_shape, -np.inf)
    kernel = {"decode": run_decode, "extend": run_extend}.get(case.plan["kernel"])
    if kernel is None:
        return out.astype(np.float32), lse.astype(np.float32)
    for layer in range(len(case.layers)):
        c = case.plan["layer_csr"][layer]
        kernel(case, case.plan["csrs"][c], f"csrs.{c}.", layer, out[layer], lse[layer])
    return out.astype(np.float32), lse.astype(np.float32)


if __name__ == "__main__":
    kv.serve(run)
