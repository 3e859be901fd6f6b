"""An mla executor written from scratch with numpy: sglang's MLA kernels (FlashMLA, MLA prefill).

Reads the mla metadata (backends/mla/mla_plan_io.cc). MLA models keep one latent KV head; V is the
first v_head_dim values of K (case.v_cache(layer) is that view). Layer l reads its pool (full or
SWA: case.k_cache(layer)) through plan["decode"] or plan["prefill"], by plan["path"]:
  - "latent_decode" (flash_mla_with_kvcache): kernel row r has query tokens cu_seqlens_q[r] ..
    cu_seqlens_q[r + 1] and reads k_len = cache_seqlens[step * row_capacity + r] keys, key k at slot
    table[(step * row_capacity + r) * width + k // ps] * ps + k % ps, table = decode.swa_block_table
    when plan["layer_pools"][l] is "swa", else decode.block_table. Query i of q_len sees keys up to
    k_len - q_len + i (bottom-right causal), or with tree_mask those set in custom_mask[mask_indptr[r]
    + i * k_len + k]. The keys are cut into num_splits chunks of ceil(k_len / num_splits), each a
    partial result, merged by LSE in split order.
  - "prefill": the gather kernel copies pool slot kv_indices[e] (swa_kv_indices[e] for SWA layers)
    into linear entry e, e < kv_indptr[rows]; row r (rows = len(kv_lens)) has query tokens
    qo_indptr[r] .. qo_indptr[r + 1] and reads kv_lens[r] keys, key k at linear entry
    linear_kv_indices[linear_kv_indptr[r] + k // block_size] * block_size + k % block_size,
    bottom-right causal.
Both keep only keys at positions >= the layer's lowest position for the query's position
positions[token] (window W: P - W, at least 0; chunk C: P // C * C; mla_visibility.h). A key's
position is its index k, except the verify tree's own drafts (k >= k_len - q_len with tree_mask),
which sit at positions[q0 + k - (k_len - q_len)].

    kvfuzz check case.json --adapter "python3 adapters/examples/numpy_mla.py" --backend numpy_mla

KVFUZZ_EXAMPLE_BREAK=drop_last_key: a row reads one key fewer. KVFUZZ_EXAMPLE_DELAY and
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
from numpy_attention import attend, dequantize, merge, take  # noqa: E402


def lowest_positions(layer, positions):
    """Per query position, the lowest key position the layer keeps."""
    if layer["kind"] == "sliding_window":
        return np.maximum(0, positions - layer["window"])
    if layer["kind"] == "chunked":
        if layer["chunk"] == 0:
            raise ZeroDivisionError("chunk size 0")
        return np.sign(positions) * (np.abs(positions) // layer["chunk"]) * layer["chunk"]  # C++ division
    return np.zeros_like(positions)


def run_latent_decode(case, layer, out, lse):
    plan, m = case.plan, case.plan["decode"]
    table = case.array("decode.swa_block_table" if plan["layer_pools"][layer] == "swa" else "decode.block_table")
    table = table.astype(np.int64)
    cache_seqlens = case.array("decode.cache_seqlens").astype(np.int64)
    cu_q = case.array("decode.cu_seqlens_q").astype(np.int64)
    positions = case.array("positions").astype(np.int64)
    if m["tree_mask"]:
        mask = case.array("decode.custom_mask")
        mask_indptr = case.array("decode.mask_indptr").astype(np.int64)
    k_pool = dequantize(case.k_cache(layer), case.k_scale(layer))  # an fp8 cache read by its scales
    v_pool = dequantize(case.v_cache(layer), case.v_scale(layer))
    q_all = case.q[layer]
    ps, splits = plan["page_size"], max(1, m["num_splits"])
    if ps <= 0:
        raise ValueError(f"page_size {ps}")
    parts = [(np.zeros(out.shape), np.full(lse.shape, -np.inf)) for _ in range(splits)]
    for r in range(m["rows"]):
        q0 = int(take(cu_q, r))
        tokens = np.arange(q0, max(q0, int(take(cu_q, r + 1))))
        q_len = len(tokens)
        k_len = cut_last_key(int(take(cache_seqlens, m["step"] * m["row_capacity"] + r)))
        row_offset = (m["step"] * m["row_capacity"] + r) * m["width"]
        lowest = lowest_positions(case.layers[layer], take(positions, tokens))[:, None]
        if k_len <= 0:
            continue
        keys = np.arange(k_len)
        i = np.arange(q_len)[:, None]
        drafts_from = k_len - q_len  # verify: keys from here on are the row's own drafts
        if m["tree_mask"]:
            structural = take(mask, take(mask_indptr, r) + i * k_len + keys[None, :]) != 0
            drafts = keys >= drafts_from
            key_pos = keys.copy()
            key_pos[drafts] = take(positions, q0 + keys[drafts] - drafts_from)
        else:
            structural = keys[None, :] <= drafts_from + i
            key_pos = keys
        visible = structural & (key_pos[None, :] >= lowest)
        q = take(q_all, tokens)
        chunk = max(1, -(-k_len // splits))
        for s in range(splits):
            lo, hi = s * chunk, min(k_len, (s + 1) * chunk)
            if lo >= hi:
                continue
            part = keys[lo:hi]
            slots = take(table, row_offset + part // ps) * ps + part % ps
            o, l = attend(q, take(k_pool, slots), take(v_pool, slots), visible[:, lo:hi], case.sm_scale, case.softcap)
            parts[s][0][tokens], parts[s][1][tokens] = o, l
    acc = parts[0]
    for part in parts[1:]:
        acc = merge(acc[0], acc[1], part[0], part[1])
    out[...], lse[...] = acc


def gather(case):
    """The linear buffers the gather kernel fills: pool slot of each linear entry, per pool."""
    kv_lens = case.array("prefill.kv_lens")
    total = int(take(case.array("prefill.kv_indptr"), len(kv_lens)))
    entries = np.arange(max(total, 0))
    full = take(case.array("prefill.kv_indices").astype(np.int64), entries)
    swa = take(case.array("prefill.swa_kv_indices").astype(np.int64), entries) if case.plan["hybrid"] else entries[:0]
    return {"full": full, "swa": swa}


def run_prefill(case, layer, linear, out, lse):
    kv_lens = case.array("prefill.kv_lens").astype(np.int64)
    qo_indptr = case.array("prefill.qo_indptr").astype(np.int64)
    linear_indptr = case.array("prefill.linear_kv_indptr").astype(np.int64)
    linear_indices = case.array("prefill.linear_kv_indices").astype(np.int64)
    positions = case.array("positions").astype(np.int64)
    bs = case.plan["prefill"]["block_size"]
    if bs <= 0:
        raise ValueError(f"block_size {bs}")
    k_pool = dequantize(case.k_cache(layer), case.k_scale(layer))  # an fp8 cache read by its scales
    v_pool = dequantize(case.v_cache(layer), case.v_scale(layer))
    q_all = case.q[layer]
    for r in range(len(kv_lens)):
        q0 = int(take(qo_indptr, r))
        tokens = np.arange(q0, max(q0, int(take(qo_indptr, r + 1))))
        q_len = len(tokens)
        k_len = cut_last_key(int(kv_lens[r]))
        first = int(take(linear_indptr, r))
        lowest = lowest_positions(case.layers[layer], take(positions, tokens))[:, None]
        keys = np.arange(max(k_len, 0))
        slots = take(linear, take(linear_indices, first + keys // bs) * bs + keys % bs)
        visible = (keys[None, :] <= k_len - q_len + np.arange(q_len)[:, None]) & (keys[None, :] >= lowest)
        o, l = attend(take(q_all, tokens), take(k_pool, slots), take(v_pool, slots), visible, case.sm_scale,
                      case.softcap)
        out[tokens], lse[tokens] = o, l


@kv.executor(name="numpy_mla", family="mla", batch=True,
             supports={"modes": declared_modes(), "dtypes": ["fp32", "fp16", "bf16", "fp8_e4m3"], "kv_scales": True, "page_sizes": "any",
                       "mla": True, "non_mla": False},
             precision={"p_dtype": "fp32", "out_dtype": "fp32"})
def run(case):
    """numpy mla executor (FlashMLA latent decode, gathered MLA prefill)"""
    kernel_delay(case)
    out_shape, lse_shape = case.output_shapes()
    out = np.zeros(out_shape)
    lse = np.full(lse_shape, -np.inf)
    prefill = case.plan["path"] == "prefill"
    linear = gather(case) if prefill else None
    for layer in range(len(case.layers)):
        if prefill:
            run_prefill(case, layer, linear[case.plan["layer_pools"][layer]], out[layer], lse[layer])
        else:
            run_latent_decode(case, layer, out[layer], lse[layer])
    return out.astype(np.float32), lse.astype(np.float32)


if __name__ == "__main__":
    kv.serve(run)
