"""What an engine's MLA kernels read, as a kvfuzz `mla` plan (FAMILIES.md), one plan for all layers.

Two shapes, as the family has them:
  - latent_decode: every batch row is one kernel row of its queries (one; 1 + k in a verify step,
    bottom-right causal) reading keys [0, seq_len) through its block-table row (FlashMLA, Triton MLA,
    FlashAttention MLA decode); vLLM's CUDA-graph padded rows, after the batch's, read nothing
    (empty_padded_rows);
  - prefill: each batch row's keys as the pool slots they were read from, in the order the kernel
    combined them (context, then the new tokens: bottom-right causal over the whole), linear per-token
    K/V (block_size 1). Rows whose keys came through a block table (decode rows of a mixed batch)
    become slots with `table_slots`.

    meta, arrays = latent_decode(case, block_table, seq_lens)            # [rows, width], [rows]
    meta, arrays = latent_decode(case, table, seq_lens, q_lens=[3, 3, 0], empty_padded_rows=True)
    meta, arrays = prefill(case, [np.array([slot, ...]), ...])          # one array per batch row
    meta, arrays = prefill(case, keys_by_row, q_lens=[2, 5])            # the queries as the kernel had them
"""
import numpy as np

from engine.tensors import int32


def table_slots(row, keys, page_size, what):
    """The pool slots of keys [0, keys) through one block-table row (page ids), as a kernel reads them."""
    k = np.arange(int(keys))
    if k.size and (k[-1] // page_size) >= len(row):
        raise RuntimeError(f"{what} reads key {int(k[-1])}, past its block-table row of {len(row)} pages")
    return np.asarray(row, np.int64)[k // page_size] * page_size + k % page_size


def _base(case, path):
    return {"path": path, "page_size": int(case.page_size), "hybrid": False,
            "layer_pools": [x["pool"] for x in case.layers]}, {"positions": int32(_t(case.array("positions")), "positions")}


def _t(a):
    import torch

    return torch.from_numpy(np.ascontiguousarray(np.asarray(a, np.int64)))


def _empty_decode():
    return {"rows": 0, "row_capacity": 0, "width": 0, "steps": 1, "step": 0, "rows_per_request": 1, "max_seqlen_q": 1,
            "max_seqlen_k": 0, "num_splits": 1, "tree_mask": False}


def _empty_prefill():
    return {"max_seqlen_q": 0, "max_seqlen_k": 0, "block_size": 1}


def _arrays(arrays, prefix, named):
    for key, values in named.items():
        arrays[f"{prefix}.{key}"] = int32(_t(values), f"{prefix}.{key}")


def latent_decode(case, block_table, seq_lens, q_lens=None, empty_padded_rows=False):
    """block_table [rows, width] page ids, seq_lens [rows]; q_lens [rows] the queries of each row
    (default one: a decode batch); empty_padded_rows: the rows past the batch's are vLLM's padding."""
    block_table, seq_lens = np.asarray(block_table, np.int64), np.asarray(seq_lens, np.int64)
    rows, width = block_table.shape
    q_lens = np.ones(rows, np.int64) if q_lens is None else np.asarray(q_lens, np.int64)
    meta, arrays = _base(case, "latent_decode")
    meta["decode"] = dict(_empty_decode(), rows=rows, row_capacity=rows, width=width,
                          max_seqlen_q=int(q_lens.max()) if rows else 1,
                          max_seqlen_k=int(seq_lens.max()) if rows else 0, empty_padded_rows=bool(empty_padded_rows))
    meta["prefill"] = _empty_prefill()
    _arrays(arrays, "decode", {"block_table": block_table.reshape(-1), "cache_seqlens": seq_lens,
                               "cu_seqlens_q": np.concatenate([[0], np.cumsum(q_lens)]), "swa_block_table": np.zeros(0)})
    arrays["decode.mask_indptr"] = np.zeros(0, np.int64)
    arrays["decode.custom_mask"] = np.zeros(0, np.uint8)
    _arrays(arrays, "prefill", {k: np.zeros(0) for k in ("qo_indptr", "kv_lens", "kv_indptr", "kv_indices",
                                                         "swa_kv_indices", "linear_kv_indptr", "linear_kv_indices")})
    return meta, arrays


def prefill(case, keys_by_row, padded_rows=0, q_lens=None):
    """keys_by_row: per batch row, the pool slots its queries read, in order (bottom-right causal);
    padded_rows: vLLM's padded rows after them, which read nothing (empty_padded_rows); q_lens: the
    queries of each row as the kernel was handed them (default: the batch's extend lengths)."""
    if q_lens is not None:
        q_lens = np.asarray(q_lens, np.int64)
    elif case.batch["mode"] == "decode":
        q_lens = np.ones(len(keys_by_row), np.int64)
    else:
        q_lens = np.asarray(case.array("extend_seq_lens")[: len(keys_by_row)], np.int64)
    q_lens = np.concatenate([q_lens, np.zeros(padded_rows, np.int64)])
    k_lens = np.array([len(k) for k in keys_by_row] + [0] * padded_rows, np.int64)
    kv_indptr = np.concatenate([[0], np.cumsum(k_lens)])
    meta, arrays = _base(case, "prefill")
    meta["decode"] = _empty_decode()
    meta["prefill"] = dict(_empty_prefill(), max_seqlen_q=int(q_lens.max()) if q_lens.size else 0,
                           max_seqlen_k=int(k_lens.max()) if k_lens.size else 0)
    if padded_rows:
        meta["prefill"]["empty_padded_rows"] = True
    slots = np.concatenate(keys_by_row) if keys_by_row else np.zeros(0, np.int64)
    _arrays(arrays, "prefill", {"qo_indptr": np.concatenate([[0], np.cumsum(q_lens)]), "kv_lens": k_lens,
                                "kv_indptr": kv_indptr, "kv_indices": slots, "swa_kv_indices": np.zeros(0),
                                "linear_kv_indptr": kv_indptr, "linear_kv_indices": np.arange(slots.size)})
    _arrays(arrays, "decode", {k: np.zeros(0) for k in ("block_table", "swa_block_table", "cache_seqlens",
                                                        "cu_seqlens_q")})
    arrays["decode.mask_indptr"] = np.zeros(0, np.int64)
    arrays["decode.custom_mask"] = np.zeros(0, np.uint8)
    return meta, arrays
