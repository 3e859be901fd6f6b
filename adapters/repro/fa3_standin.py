"""A stand-in for FlashAttention 3's paged-KV kernel and sgl-kernel's merge_state_v2, in plain torch.

Where it sits: the one piece of an FA reproducer (adapters/repro/sglang_metadata.py, backend fa)
that is not from upstream. sglang's FlashAttentionBackend runs unchanged, metadata and forward;
only the kernel it calls, sgl-kernel's flash_attn_with_kvcache (an 852 MB library), is replaced by
this function, which computes what the kernel's documentation (the docstring of
flash_attn_with_kvcache in sgl_kernel/flash_attn.py and in sglang's own
kernels/ops/attention/flash_attention.py) says it computes from the arguments it is handed, and
nothing else: no knowledge of requests, positions or the right answer. adapters/tests/
fa3_standin_test.py checks it against a float64 attention from logical positions.

    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, page_table=pt, cache_seqlens=lens,
                                       cu_seqlens_q=cu, max_seqlen_q=m, causal=True,
                                       window_size=(w, -1), return_softmax_lse=True)

The semantics, per batch entry b (seqlen_q = cu_seqlens_q[b+1] - cu_seqlens_q[b], seqlen_k =
cache_seqlens[b]): key j (0 <= j < seqlen_k) is k_cache[page_table[b, j // page], j % page]; query
i attends key j when, with d = i + seqlen_k - seqlen_q (the bottom-right alignment),
  causal:                j <= d
  window_size (l, r):    d - l <= j (l >= 0) and j <= d + r (r >= 0)
  attention_chunk c > 0: j >= d // c * c
GQA: query head h reads KV head h // (heads / kv_heads). Scores are q.k * softmax_scale, soft-capped
as softcap * tanh(s / softcap) when softcap > 0. A query with no key gets 0 (lse -inf). Queries past
max_seqlen_q in their entry are not computed by the kernel (its grid covers max_seqlen_q rows): NaN
here. softmax_lse is [heads, total_q] (varlen) or [batch, heads, seqlen_q], natural log. A page id
outside k_cache raises IndexError, as the kernel would fault. Arguments that change the math and
that sglang does not pass on these paths (new K/V, rotary, descales, sinks, score/mask mods,
leftpad, batch index) raise NotImplementedError rather than being ignored.
"""
import math

import torch

# Arguments accepted at their default only (any other value would change the math modelled here).
_ONLY_DEFAULT = ("k", "v", "qv", "rotary_cos", "rotary_sin", "cache_batch_idx", "cache_leftpad", "rotary_seqlens",
                 "q_descale", "k_descale", "v_descale", "sinks", "score_mod", "aux_tensors", "mask_mod", "sfq", "sfk",
                 "sfv", "rel_bias", "rel_bias_prep_cache")
# Arguments that only tune the schedule (which keys are read does not depend on them).
_SCHEDULE = ("cu_seqlens_k_new", "rotary_interleaved", "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin",
             "ver", "only_qv", "max_seqlen_k")


def _entry(q, k_cache, v_cache, table, seqlen_k, scale, causal, window, chunk, softcap):
    """One batch entry: q [seqlen_q, H, D] -> (out [seqlen_q, H, Dv] float32, lse [H, seqlen_q])."""
    sq, heads = q.shape[0], q.shape[1]
    page = k_cache.shape[1]
    j = torch.arange(seqlen_k, device=q.device)
    pages = table[j // page].long() if seqlen_k else j
    if seqlen_k and (pages.min() < 0 or pages.max() >= k_cache.shape[0]):
        raise IndexError(f"page_table holds page {int(pages.max() if pages.max() >= k_cache.shape[0] else pages.min())}"
                         f" outside k_cache's {k_cache.shape[0]} pages")
    k = k_cache[pages, j % page].float()  # [seqlen_k, Hk, D]
    v = v_cache[pages, j % page].float()
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [seqlen_k, H, *]
    s = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    d = torch.arange(sq, device=q.device)[:, None] + seqlen_k - sq  # [seqlen_q, 1]
    keep = torch.ones(sq, seqlen_k, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j[None, :] <= d
    if window[0] >= 0:
        keep &= j[None, :] >= d - window[0]
    if window[1] >= 0:
        keep &= j[None, :] <= d + window[1]
    if chunk:
        keep &= j[None, :] >= torch.div(d, chunk, rounding_mode="floor") * chunk
    s = s.masked_fill(~keep[None], -math.inf)
    lse = torch.logsumexp(s, dim=-1)  # [H, seqlen_q]; -inf for a query with no key
    p = torch.where(keep[None], torch.exp(s - lse.clamp_min(-1e30)[..., None]), torch.zeros_like(s))
    return torch.einsum("hqk,khd->qhd", p, v), lse


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                            max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            attention_chunk=None, softcap=0.0, return_softmax_lse=False, out=None, **other):
    """FA3's flash_attn_with_kvcache over a paged cache, computed as documented (module docstring)."""
    for name, value in other.items():
        if name in _ONLY_DEFAULT and value is not None:
            raise NotImplementedError(f"the FA3 stand-in does not model flash_attn_with_kvcache({name}=...)")
        if name not in _ONLY_DEFAULT and name not in _SCHEDULE:
            raise NotImplementedError(f"the FA3 stand-in does not know flash_attn_with_kvcache's argument {name}")
    if page_table is None or cache_seqlens is None:
        raise NotImplementedError("the FA3 stand-in models the paged path (page_table, cache_seqlens) only")
    varlen = cu_seqlens_q is not None
    qs = q if varlen else q.reshape(-1, *q.shape[2:])
    heads, dv = q.shape[-2], v_cache.shape[-1]
    batch = page_table.shape[0]
    cu = cu_seqlens_q.long().cpu() if varlen else torch.arange(batch + 1) * q.shape[1]
    lens = cache_seqlens.long().cpu() if torch.is_tensor(cache_seqlens) else torch.full((batch,), int(cache_seqlens))
    limit = int(max_seqlen_q) if varlen and max_seqlen_q is not None else int((cu[1:] - cu[:-1]).max(initial=0))
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    result = torch.full((qs.shape[0], heads, dv), math.nan, dtype=torch.float32, device=q.device)
    lse = torch.full((heads, qs.shape[0]), math.nan, dtype=torch.float32, device=q.device)
    for b in range(batch):
        lo, hi = int(cu[b]), int(cu[b + 1])
        if hi == lo:
            continue
        o, l_ = _entry(qs[lo:hi], k_cache, v_cache, page_table[b], int(lens[b]), scale, causal,
                       (int(window_size[0]), int(window_size[1])), int(attention_chunk or 0), float(softcap or 0.0))
        n = min(hi - lo, limit)  # rows past max_seqlen_q: not computed
        result[lo:lo + n], lse[:, lo:lo + n] = o[:n], l_[:, :n]
    result = result.to(q.dtype)
    if not varlen:
        result = result.reshape(*q.shape[:2], heads, dv)
        lse = lse.reshape(heads, batch, -1).permute(1, 0, 2)
    if out is not None:
        out.copy_(result.view(out.shape))
        result = out
    return (result, lse) if return_softmax_lse else result


def merge_state_v2(v_a, s_a, v_b, s_b, v_merged=None, s_merged=None):
    """sgl-kernel's merge_state_v2: two partial attentions over disjoint keys merged by their LSEs
    (v [tokens, heads, D], s [tokens, heads], natural log); a side with lse -inf weighs nothing."""
    m = torch.maximum(s_a, s_b)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    wa, wb = torch.exp(s_a - m), torch.exp(s_b - m)
    total = wa + wb
    v = (v_a.float() * wa[..., None] + v_b.float() * wb[..., None]) / total.clamp_min(1e-30)[..., None]
    s = m + torch.log(total)
    v = v.to(v_a.dtype)
    if v_merged is not None:
        v_merged.copy_(v)
        v = v_merged
    if s_merged is not None:
        s_merged.copy_(s)
        s = s_merged
    return v, s
