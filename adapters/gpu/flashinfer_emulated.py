"""A float64 numpy model of the FlashInfer calls flashinfer_paged_csr.py makes (KVFLASHINFER_EMULATE=1).

Same signatures as flashinfer_kernels.py, written from FlashInfer's documented semantics: row r of
a paged call reads pages kv_indices[kv_indptr[r]:kv_indptr[r + 1]] of the [pages, ps, Hkv, D]
cache, (pages - 1) * ps + last_page_len[r] keys; a ragged row reads k[kv_indptr[r]:kv_indptr[r + 1]];
query i of q_len sits at key index k_len - q_len + i (bottom-right); window_left >= 0 keeps keys at
or after that index - window_left; a custom mask (flattened bool) replaces the causal rule, row r's
q_len x k_len block starting where FlashInfer's plan puts it: the sum of the earlier rows' q_len
times (pages - 1) * ps + last_page_len (prefill.py _compute_page_mask_indptr), which for a row of
no pages is 1 - ps + ... rather than 0 (the mask offsets of later rows shift; a negative one is
read out of bounds here, an IndexError, where the GPU faults). An fp8 cache's pages hold the stored
values; a paged run's scales act as FlashInfer applies them: q_scale and k_scale folded into sm_scale,
the output times v_scale (flashinfer_kernels.py).
BatchMLAPagedAttentionWrapper (flashinfer_mla.py; mla/_batch_mla/_planning.py, mla.cuh): plan
checks its metadata as FlashInfer's Python does (the dense form: batch sizes agree, width >= the
live pages; the CSR form: indptrs from 0 and nondecreasing, kv_indptr's page counts
ceil(kv_len / page_size), enough kv_indices) and derives the CSR from the dense form (row r's first
ceil(seq_len / ps) table entries); run reads key k of row r at page kv_indices[kv_indptr[r] + k // ps],
offset k % ps, of the packed [pages, ps, ckv + kpe] cache, logits over all ckv + kpe columns, output
over the ckv columns, causal bottom-right (key k of query i masked when k + q_len > kv_len + i), LSE
base 2; tokens no row covers keep what torch.empty left (NaN here). Not modelled: the plan's
refusals that depend on the device (work-item capacity, the causal tile bound).
It checks the adapters' argument building on a CPU, not FlashInfer.
The executors' array side is numpy's here (flashinfer_kernels.py's works on device tensors): nothing
to fetch (FETCH None), index arrays as they are.
"""
import numpy as np

from numpy_attention import LOG2E, attend, merge_base2, outputs, take  # noqa: F401  (outputs: the array side)

FETCH = None


def full(shape, value):
    return np.full(shape, value, np.float32)


def index(a):
    return a


def where(mask, a, b):
    return np.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)


def natural_lse(base2):
    return base2 / LOG2E


def merge_natural(acc, part):
    return merge_base2(acc, part, natural_exp=True)


def _rows(q, qo_indptr, kv_indptr, key_rows, mask_len, causal, custom_mask, window_left, sm_scale, softcap, k, v):
    out = np.zeros((q.shape[0], q.shape[1], v.shape[-1]))
    lse = np.full(q.shape[:2], -np.inf)
    mask_at = 0
    for r in range(len(qo_indptr) - 1):
        q0, q1 = int(qo_indptr[r]), int(qo_indptr[r + 1])
        rows = key_rows(r)
        k_len, q_len = len(rows), q1 - q0
        keys = np.arange(k_len)
        q_abs = k_len - q_len + np.arange(q_len)[:, None]
        visible = np.ones((q_len, k_len), bool)
        if custom_mask is not None:
            visible = take(custom_mask, mask_at + np.arange(q_len * k_len)).reshape(q_len, k_len).astype(bool)
            mask_at += q_len * mask_len(r)
        elif causal:
            visible &= keys[None, :] <= q_abs
        if window_left >= 0:
            visible &= keys[None, :] >= q_abs - window_left
        o, s = attend(q[q0:q1], take(k, rows), take(v, rows), visible, sm_scale, softcap)
        out[q0:q1], lse[q0:q1] = o, s * LOG2E
    return out, lse


def pages(case, layer, which, slots, page_size, width):
    pool = case.k_cache(layer) if which == "k" else case.v_cache(layer)
    out = np.zeros((slots, pool.shape[1], width), np.float32)
    out[:len(pool), :, :pool.shape[2]] = pool
    return out.reshape(-1, page_size, pool.shape[1], width)


def _paged_mask_len(kv_indptr, last_page_len, page_size):
    return lambda r: (int(kv_indptr[r + 1]) - int(kv_indptr[r]) - 1) * page_size + int(take(last_page_len, r))


def _paged_rows(kv_indptr, kv_indices, last_page_len, page_size):
    def key_rows(r):
        p0, p1 = int(kv_indptr[r]), int(kv_indptr[r + 1])
        if p1 <= p0:
            return np.zeros(0, np.int64)
        k_len = (p1 - p0 - 1) * page_size + int(take(last_page_len, r))
        keys = np.arange(k_len)
        return take(kv_indices, p0 + keys // page_size).astype(np.int64) * page_size + keys % page_size
    return key_rows


def _flat(pages):
    return pages.reshape(-1, *pages.shape[2:])


def _scaled(sm_scale, scales):
    """(sm_scale with q_scale and k_scale folded in, a function giving the output times v_scale)."""
    q_scale, k_scale, v_scale = scales
    for s in (q_scale, k_scale):
        sm_scale *= 1.0 if s is None else s
    return sm_scale, lambda o, lse: (o * (1.0 if v_scale is None else v_scale), lse)


def decode(q, k_pages, v_pages, kv_indptr, kv_indices, last_page_len, *, page_size, use_tensor_cores,
           num_qo_heads, num_kv_heads, sm_scale, logits_soft_cap, window_left, dtype, scales=(None, None, None)):
    rows = np.arange(len(kv_indptr), dtype=np.int64)
    sm_scale, finish = _scaled(sm_scale, scales)
    return finish(*_rows(q, rows, kv_indptr, _paged_rows(kv_indptr, kv_indices, last_page_len, page_size), None, True,
                         None, window_left, sm_scale, logits_soft_cap, _flat(k_pages), _flat(v_pages)))


def prefill_paged(q, k_pages, v_pages, qo_indptr, kv_indptr, kv_indices, last_page_len, *, page_size, causal,
                  custom_mask, num_qo_heads, num_kv_heads, sm_scale, logits_soft_cap, window_left, dtype,
                  scales=(None, None, None)):
    sm_scale, finish = _scaled(sm_scale, scales)
    return finish(*_rows(q, qo_indptr, kv_indptr, _paged_rows(kv_indptr, kv_indices, last_page_len, page_size),
                         _paged_mask_len(kv_indptr, last_page_len, page_size), causal,
                         custom_mask, window_left, sm_scale, logits_soft_cap, _flat(k_pages), _flat(v_pages)))


def prefill_ragged(q, k, v, qo_indptr, kv_indptr, *, causal, custom_mask, num_qo_heads, num_kv_heads, sm_scale,
                   logits_soft_cap, window_left, dtype):
    def key_rows(r):
        return np.arange(int(kv_indptr[r]), int(kv_indptr[r + 1]), dtype=np.int64)
    return _rows(q, qo_indptr, kv_indptr, key_rows, lambda r: len(key_rows(r)), causal, custom_mask, window_left,
                 sm_scale, logits_soft_cap, k, v)


def merge_state(out_a, lse_a, out_b, lse_b, dtype):
    return merge_base2((out_a, lse_a), (out_b, lse_b))


def _indptr(name, a):
    a = np.asarray(a, np.int64)
    if a.size == 0 or a[0] != 0 or np.any(np.diff(a) < 0):
        raise ValueError(f"{name} metadata must start at zero and be nondecreasing")
    return a


def mla_plan(metadata, *, num_heads, head_dims, page_size, causal, sm_scale, dtype):
    if page_size <= 0:
        raise ValueError(f"page_size must be a positive int, got {page_size}")
    if "block_tables" in metadata:  # the dense form, lowered to the CSR the fa2 kernel reads
        qo_indptr = _indptr("cum_seq_lens_q", metadata["cum_seq_lens_q"])
        table, kv_len = np.asarray(metadata["block_tables"]), np.asarray(metadata["seq_lens"], np.int64)
        if table.shape[0] != len(qo_indptr) - 1 or len(kv_len) != len(qo_indptr) - 1:
            raise ValueError("dense metadata batch dimensions must agree")
        pages = -(-kv_len // page_size)
        if np.any(kv_len < 0) or (len(pages) and pages.max() > table.shape[1]):
            raise ValueError("seq_lens must be nonnegative and fit the block_tables width")
        kv_indptr = np.concatenate([[0], np.cumsum(pages)])
        kv_indices = np.concatenate([table[r, :pages[r]] for r in range(len(pages))] + [np.zeros(0, table.dtype)])
    else:
        qo_indptr = _indptr("qo_indptr", metadata["qo_indptr"])
        kv_indptr = _indptr("kv_indptr", metadata["kv_indptr"])
        kv_indices, kv_len = np.asarray(metadata["kv_indices"]), np.asarray(metadata["kv_len_arr"], np.int64)
        if len(kv_indptr) != len(qo_indptr) or len(kv_len) != len(qo_indptr) - 1:
            raise ValueError("CSR metadata batch dimensions must agree")
        if kv_indptr[-1] > len(kv_indices) or np.any(kv_len < 0):
            raise ValueError("kv_indices shorter than kv_indptr[-1], or a negative kv_len_arr")
        if not np.array_equal(np.diff(kv_indptr), -(-kv_len // page_size)):
            raise ValueError("CSR metadata page counts in kv_indptr must equal ceil(kv_len_arr / page_size)")
    return dict(qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices, kv_len=kv_len, ckv=head_dims[0],
                width=sum(head_dims), page_size=page_size, causal=causal, sm_scale=sm_scale)


def mla_run(plan, q, kv_cache, *, dtype):
    ps, ckv = plan["page_size"], plan["ckv"]
    if q.shape[-1] != plan["width"] or kv_cache.shape[1:] != (ps, plan["width"]):
        raise ValueError(f"packed q {q.shape} / kv_cache {kv_cache.shape} do not match the plan")
    keys = kv_cache.reshape(-1, 1, plan["width"])
    out = np.full(q.shape[:2] + (ckv,), np.nan)  # torch.empty: only the rows' tokens are written
    lse = np.full(q.shape[:2], np.nan)
    for r in range(len(plan["kv_len"])):
        q0, q1, k_len = int(plan["qo_indptr"][r]), int(plan["qo_indptr"][r + 1]), int(plan["kv_len"][r])
        tokens = np.arange(q0, q1)
        k = np.arange(k_len)
        slots = take(plan["kv_indices"], plan["kv_indptr"][r] + k // ps).astype(np.int64) * ps + k % ps
        visible = np.ones((len(tokens), k_len), bool)
        if plan["causal"]:
            visible = k[None, :] + len(tokens) <= k_len + np.arange(len(tokens))[:, None]
        rows = take(keys, slots)
        o, s = attend(take(q, tokens), rows, rows[..., :ckv], visible, plan["sm_scale"], 0.0)
        out[q0:q1], lse[q0:q1] = o, s * LOG2E
    return out, lse
