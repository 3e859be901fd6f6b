"""The mla plan's latent decode rows and DeepSeek's packed latent layout, shared by the MLA kernel
executors (flashinfer_mla.py, flashmla.py, fa3_mla.py): all take Q and K as [ckv | kpe] with ckv 512 and
kpe 64 wide (FA3's MLA path as two tensors, q / qv and k / v), and all read the plan's block tables
(backends/contract/FAMILIES.md, `mla`).

    cu_q, seq_lens, table = decode_rows(case)          # the step's rows, as the kernel gets them
    kv = paged(case.k_cache(0), page_size=64, v_head_dim=vd)   # [pages, 64, 576]
"""
import numpy as np

import kvfuzz_adapter as kv
from numpy_attention import take

CKV, KPE = 512, 64  # DeepSeek's latent widths: head_dim_ckv (V's part, the latent), head_dim_kpe (rope)


def check_dims(case):
    """Unsupported unless the case's head dims fit the packed layout."""
    vd, d = case.model["v_head_dim"], case.model["head_dim"]
    if vd > CKV or d - vd > KPE:
        raise kv.Unsupported(f"head dims {d} / {vd}: the latent part past {CKV} or the rope part past {KPE}")


def latent(a, v_head_dim, rows):
    """[n, H, d] (Q or K as kvfuzz holds them) -> [rows, H, CKV + KPE] float32: the first v_head_dim
    values at 0 (ckv), the rest at CKV (kpe), zeros elsewhere (rows past n too). Zeros change
    neither q.k nor the kept V channels."""
    out = np.zeros((rows,) + a.shape[1:-1] + (CKV + KPE,), np.float32)
    out[:len(a), ..., :v_head_dim] = a[..., :v_head_dim]
    out[:len(a), ..., CKV:CKV + a.shape[-1] - v_head_dim] = a[..., v_head_dim:]
    return out


def paged(keys, page_size, v_head_dim):
    """Pool rows [n, 1, d] -> the packed paged cache [ceil(n / ps), ps, CKV + KPE]."""
    if page_size <= 0:
        raise ValueError(f"page size {page_size}")
    return latent(keys, v_head_dim, len(keys) + (-len(keys) % page_size)).reshape(-1, page_size, CKV + KPE)


def layer_keys(case, layer):
    """What the kernel reads keys from: the pool, or for prefill the linear buffer the gather fills
    (linear entry e is pool slot prefill.kv_indices[e])."""
    pool = case.k_cache(layer)
    if case.plan["path"] != "prefill":
        return pool
    total = int(take(case.array("prefill.kv_indptr"), len(case.array("prefill.kv_lens"))))
    return take(pool, take(case.array("prefill.kv_indices"), np.arange(total)))


def decode_rows(case):
    """(cu_seqlens_q [rows + 1], cache_seqlens [rows], block_table [rows, width]) of the step the
    plan's latent decode path runs; a verify's tree mask must be the kernels' causal rule."""
    m = case.plan["decode"]
    rows, width, base = m["rows"], m["width"], m["step"] * m["row_capacity"]
    cu_q = take(case.array("decode.cu_seqlens_q"), np.arange(rows + 1))
    seq_lens = take(case.array("decode.cache_seqlens"), base + np.arange(rows))
    table = take(case.array("decode.block_table"), base * width + np.arange(rows * width)).reshape(rows, width)
    if m["tree_mask"]:
        require_causal_chain(case, np.diff(cu_q), seq_lens)
    return cu_q, seq_lens, table


def require_causal_chain(case, q_lens, kv_lens):
    """Verify: every row's tree mask must be the bottom-right causal rule, the only mask FlashInfer's
    MLA wrapper and FlashMLA have (key k of query i visible when k <= kv_len - q_len + i)."""
    mask, indptr = case.array("decode.custom_mask"), case.array("decode.mask_indptr")
    for r, (q_len, k_len) in enumerate(zip(q_lens, kv_lens)):
        block = take(mask, int(take(indptr, r)) + np.arange(q_len * k_len)).reshape(q_len, k_len) != 0
        if not np.array_equal(block, np.arange(k_len)[None, :] <= k_len - q_len + np.arange(q_len)[:, None]):
            raise kv.Unsupported(f"row {r}'s tree mask is not a causal chain (topk > 1): "
                                 "the MLA kernels take no custom mask")
