"""A stand-in for FlashAttention 3's paged-KV kernel and sgl-kernel's merge_state_v2, in plain torch.

Where it sits: the one piece of an FA reproducer (adapters/repro/sglang_metadata.py, backend fa)
that is not from upstream. sglang's FlashAttentionBackend runs unchanged, metadata and forward;
only the kernel it calls, sgl-kernel's flash_attn_with_kvcache (an 852 MB library), is replaced by
this function, which computes what the kernel's documentation (the docstring of
flash_attn_with_kvcache in sgl_kernel/flash_attn.py and in sglang's own
kernels/ops/attention/flash_attention.py) says it computes from the arguments it is handed, and
refuses and faults where FA3's host code (hopper/flash_api.cpp) and tile loop (hopper/block.h,
hopper/tile_size.h) would: no knowledge of requests, positions or the right answer.
adapters/tests/fa3_standin_test.py checks it against a float64 attention from logical positions.

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
as softcap * tanh(s / softcap) when softcap > 0; with qv (MLA's absorbed query, [total_q, heads, dv],
sglang's FA backend on an MLA model) they are (q.k + qv.v) * softmax_scale, taken only for head dims
<= 64 and V >= 256 (flash_api.cpp:1028-1041). A query with no key gets 0 (lse -inf). Sinks (one
bf16 logit per q head: FA3 refuses other dtypes, "sinks must have dtype bfloat16", H100) add
e^sink to each query's denominator once and to its LSE (as FA3 does on rows with keys, computed by
adapters/gpu/fa3_sinks_lse.py); a query with no key then gets 0 and lse = sink, where FA3 returns
lse -inf (adapters/gpu/fa3_mechanisms.py sinks, H100): not modelled, the documented semantics are. Queries past
max_seqlen_q in their entry are not computed by the kernel (its grid covers max_seqlen_q rows): NaN
here. softmax_lse is [heads, total_q] (varlen) or [batch, heads, seqlen_q], natural log.

What FA3 refuses, refused here with its message (RuntimeError, as TORCH_CHECK raises), from
Dao-AILab/flash-attention hopper/flash_api.cpp at commit 0251105a2fb19d2957484b7f023cd8c115286ced
(read, not run): dtypes other than fp16 / bf16 / fp8 e4m3 (:715), K or V of another dtype than Q (:721-722), page_table not int32 (:735),
cu_seqlens_q not int32 or without max_seqlen_q (:744-745), head dim above 256 (:780), heads not a
multiple of KV heads (:781), V head dim unlike Q/K's outside (128, 192] x (96, 128] or Q/K <= 64 x
V <= 512 (:783), either head dim not a multiple of 8 (of 16 for fp8, :854-856). fp8 e4m3 (q, k and v
all e4m3): the output in bf16 (:859), and q_descale / k_descale / v_descale, each float32 (batch,
kv_heads) or None (1), read only for fp8 (:1115-1144, CHECK_SHAPE: RuntimeError on another shape):
entry b's scores use q * q_descale[b, kv head of the q head] and k * k_descale[b, kv head], its output
v * v_descale[b, kv head]; with 16-bit inputs FA3 ignores them, and so does this. FA3's fp8 kernels
round P to e4m3 before P.V and tile by 1-byte sizes: not modelled (the fault model below uses the
16-bit tiles). Taken but computed otherwise by
FA3, and computed here as documented: V unlike Q/K with both <= 64 on a paged cache (FA3's (64, 64)
kernel loads V with K's column predicate, paged_kv.h:130: V's channels past Q/K's width come back 0;
adapters/gpu/fa3_mechanisms.py vdim, H100).

Where FA3 faults: a page id outside k_cache is a fault only for keys the kernel loads. FA3 loads
whole tiles of kBlockN keys, for each block of kBlockM (packed) query rows those from n_block_min to
n_block_max (block.h:22-52: the causal / window / chunk bounds of the block's first and last rows),
the tile sizes of tile_size.h:10-40 (sm90, 16-bit; paged KV without TMA unless page_size is a
multiple of kBlockN, flash_api.cpp:415-424; GQA packed, :426-439). A page id outside the cache in a
loaded tile raises IndexError (the kernel reads outside k_cache, whether or not the mask then drops
the key); one in a tile no block loads (a window or chunk masks it out for every row) is never read:
no fault, as in FA3.

scheduler_metadata / num_splits: get_scheduler_metadata below returns a schedule of FA3's size
(flash_api.cpp:623-636: 1 + round_up(batch, 4) x (2 + [not local] + [causal or local]) int32)
that records the num_splits it was made for. A call handed a schedule checks its size as FA3 does
(:1005-1008: CHECK_SHAPE, RuntimeError). FA3 does not compare the num_splits values: the kernel takes
each batch's split count from the schedule (tile_scheduler.hpp:112, block.h:48-51,
flash_fwd_combine_kernel.h:465) while the split buffers are sized for the call's num_splits
(flash_api.cpp:1094-1104), so a call whose num_splits differs from its schedule's reads and writes
splits that were not allocated (vllm#25490's illegal memory access): this stand-in raises
RuntimeError for it, where FA3 has undefined behaviour. A schedule this module did not make is
refused (NotImplementedError). Arguments that change the math and that sglang does not pass on
these paths (new K/V, rotary, score/mask mods, leftpad, batch index) raise
NotImplementedError rather than being ignored.
"""
import math

import torch

# Arguments accepted at their default only (any other value would change the math modelled here).
_ONLY_DEFAULT = ("k", "v", "rotary_cos", "rotary_sin", "cache_batch_idx", "cache_leftpad", "rotary_seqlens", "score_mod", "aux_tensors", "mask_mod", "sfq", "sfk",
                 "sfv", "rel_bias", "rel_bias_prep_cache")
# Arguments that only tune the schedule (which keys are read does not depend on them).
_SCHEDULE = ("cu_seqlens_k_new", "rotary_interleaved", "sm_margin", "ver", "only_qv", "max_seqlen_k")
FP8 = getattr(torch, "float8_e4m3fn", None)
_DTYPES = (torch.float16, torch.bfloat16, FP8)
# The stand-in's schedules: id(tensor) -> the num_splits it was made for (its data is FA3's size only)
_SCHEDULES = {}


def _check(ok, message):
    """FA3's TORCH_CHECK: a RuntimeError with FA3's message."""
    if not ok:
        raise RuntimeError(message)


def _check_shapes(q_dtype, k_dtype, v_dtype, d, dv, heads, kv_heads):
    """flash_api.cpp's refusals of dtypes and head dims (mha_fwd, :715-856)."""
    _check(q_dtype in _DTYPES, "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type")
    _check(k_dtype == q_dtype, "query and key must have the same dtype")
    _check(v_dtype == q_dtype, "query and value must have the same dtype")
    _check(d <= 256, "FlashAttention forward only supports head dimension at most 256")
    _check(heads % kv_heads == 0, "Number of heads in key/value must divide number of heads in query")
    _check(dv == d or (128 < d <= 192 and 96 < dv <= 128) or (d <= 64 and dv <= 512),
           "If V headdim is different from Q/K dim, we only support Q/K headdim in (128, 192] and V headdim in "
           "(96, 128], or (Q/K <= 64 and V <= 512).")
    alignment = 16 if q_dtype == FP8 else 8
    _check(d % alignment == 0, f"head_size should be a multiple of {alignment}")
    _check(dv % alignment == 0, f"head_size_v should be a multiple of {alignment}")


def refusal(q_dtype, d, dv, heads, kv_heads):
    """What FA3 says refusing these dtypes and head dims (None: it takes them). Usage:
    refusal(torch.float32, 64, 64, 8, 1) -> 'FlashAttention only supports fp16, bf16, and fp8_e4m3 data type'"""
    try:
        _check_shapes(q_dtype, q_dtype, q_dtype, d, dv, heads, kv_heads)
    except (RuntimeError, NotImplementedError) as e:
        return str(e)
    return None


def _round_headdim(d, v=False):
    """round_up_headdim / round_up_headdimv (flash_api.cpp:492-518)."""
    return next((r for r in (64, 96, 128, 192, 256) if d <= r), 512 if v else 256)


def _tile(d, dv, is_causal, is_local, paged_non_tma):
    """tile_size_fwd_sm90 for 16-bit types (tile_size.h:10-40): (kBlockM, kBlockN)."""
    d, dv = _round_headdim(d), (_round_headdim(d) if dv == d else _round_headdim(dv, True))
    if d <= 64:
        if dv == 512:
            return 64, 64
        if dv == 256:
            return 128, 96
        return 192, 128 if is_causal or is_local or paged_non_tma else 192
    if d <= 96:
        return 192, 128 if is_local or paged_non_tma else 144
    if d <= 128:
        return 128, 128 if is_causal or is_local or paged_non_tma else 176
    if d <= 192:
        return 128, 96 if paged_non_tma or is_local else (128 if dv <= 128 else 112)
    return 128, 64 if is_local else 80


class _Params:
    """What mha_fwd / get_scheduler_metadata derive from the arguments (flash_api.cpp:148-160 and
    :795-804): window bounds, causal / local, tile sizes, GQA packing, the schedule's size."""

    def __init__(self, batch, seqlen_q, seqlen_k, heads, kv_heads, d, dv, page_size, causal, window, chunk,
                 num_splits, pack_gqa, varlen_q):
        left, right = window  # mha_fwd :796-804; get_scheduler_metadata :576-584, the same
        if left >= seqlen_k - 1:
            left = -1
        if right >= seqlen_q - 1:
            right = -1
        if seqlen_q == 1 and left == -1 and right == -1 and chunk == 0 and (d <= 64 or d > 128 or not page_size):
            causal = False
        if causal:
            right = 0
        self.is_causal = left < 0 and right == 0 and chunk == 0
        self.is_local = (left >= 0 or right >= 0 or chunk >= 1) and not self.is_causal
        left = seqlen_k - 1 if left < 0 else left
        right = seqlen_q - 1 if right < 0 else right
        if chunk > 0:
            left, right = min(left, chunk - 1), min(right, chunk - 1)
        self.left, self.right, self.chunk = left, right, chunk
        m, n = _tile(d, dv, self.is_causal, self.is_local, False)
        tma = bool(page_size) and page_size % n == 0 and seqlen_q * (heads // kv_heads) > m  # :415-424
        self.block_m, self.block_n = _tile(d, dv, self.is_causal, self.is_local, bool(page_size) and not tma)
        self.num_splits = num_splits
        if pack_gqa is None:  # get_pack_gqa, :426-439 (num_splits 0: the heuristic's, packed when split)
            pack_gqa = (bool(page_size) and not tma) or num_splits != 1 or (heads != kv_heads and varlen_q)
        self.qhead_per_khead = heads // kv_heads if pack_gqa else 1
        # the schedule's size: mha_fwd (varlen: seqused_k is cache_seqlens) :995-1003, get_scheduler_metadata :623-636
        vectors = 2 + (not self.is_local) + (self.is_causal or self.is_local)
        self.metadata_size = 1 + (batch + 3) // 4 * 4 * vectors

    def loaded(self, seqlen_q, seqlen_k, computed):
        """The keys the kernel loads for one batch entry of seqlen_q queries (the first `computed` of
        them run): the union over its blocks of kBlockM packed query rows of the tiles n_block_min ..
        n_block_max - 1 (block.h:22-52), cut at seqlen_k."""
        out = torch.zeros(seqlen_k, dtype=torch.bool)
        rows = computed * self.qhead_per_khead
        for m_block in range(-(-rows // self.block_m)):
            n_max = -(-seqlen_k // self.block_n)
            if self.is_causal or self.is_local:
                m_idx_max = ((m_block + 1) * self.block_m - 1) // self.qhead_per_khead + 1
                n_idx = m_idx_max + seqlen_k - seqlen_q
                n_right = n_idx + self.right if self.is_local else n_idx
                if self.is_local and self.chunk > 0:
                    n_right = min(n_right, -(-n_idx // self.chunk) * self.chunk)
                n_max = min(n_max, -(-n_right // self.block_n))
            n_min = 0
            if self.is_local:
                n_idx = m_block * self.block_m // self.qhead_per_khead + seqlen_k - seqlen_q
                n_left = n_idx - self.left
                if self.chunk > 0:
                    n_left = max(n_left, n_idx // self.chunk * self.chunk)
                n_min = max(0, int(n_left / self.block_n))  # C++ division truncates toward zero
            if n_max > n_min:
                out[n_min * self.block_n:min(n_max * self.block_n, seqlen_k)] = True
        return out


def _entry(q, k_cache, v_cache, table, seqlen_k, scale, causal, window, chunk, softcap, loaded, sinks=None, qv=None,
           descales=(None, None, None)):
    """One batch entry: q [seqlen_q, H, D] -> (out [seqlen_q, H, Dv] float32, lse [H, seqlen_q]); sinks [H]
    (one logit per q head) or None; qv [seqlen_q, H, Dv] (MLA's absorbed query, scored against V) or None;
    descales: the entry's (q, k, v) descale rows, each [kv_heads] float32 or None (1)."""
    sq, heads = q.shape[0], q.shape[1]
    page = k_cache.shape[1]
    j = torch.arange(seqlen_k, device=q.device)
    if seqlen_k and (seqlen_k - 1) // page >= table.shape[0]:
        raise IndexError(f"cache_seqlens {seqlen_k} is past the page table's {table.shape[0]} pages of {page}")
    pages = table[j // page].long().cpu() if seqlen_k else j.cpu()
    outside = (pages < 0) | (pages >= k_cache.shape[0])
    bad = torch.nonzero(outside & loaded).flatten()
    if len(bad):
        key = int(bad[0])
        raise IndexError(f"page_table holds page {int(pages[key])} outside k_cache's {k_cache.shape[0]} pages, read "
                         f"for key {key} (its tile of the kernel's loop is loaded)")
    pages = torch.where(outside, torch.zeros_like(pages), pages).to(q.device)  # never loaded: masked below
    k = k_cache[pages, j % page].float()  # [seqlen_k, Hk, D]
    v = v_cache[pages, j % page].float()
    group = heads // k.shape[1]
    q = q.float()
    qd, kd, vd = (None if d is None else d.float().to(q.device) for d in descales)
    if qd is not None:
        q = q * qd.repeat_interleave(group)[None, :, None]
    if kd is not None:
        k = k * kd[None, :, None]
    if vd is not None:
        v = v * vd[None, :, None]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [seqlen_k, H, *]
    s = torch.einsum("qhd,khd->hqk", q, k)
    if qv is not None:  # FA3 scores q.k + qv.v (0251105a mainloop_fwd_sm90_tma_gmma_ws.hpp:1144-1147, Qv.V into S)
        s = s + torch.einsum("qhd,khd->hqk", qv.float(), v)
    s = s * scale
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
    if sinks is not None:  # e^sink joins every query's denominator once, and the LSE (module docstring)
        lse = torch.logaddexp(lse, sinks.float().to(q.device)[:, None].expand_as(lse))
    p = torch.where(keep[None], torch.exp(s - lse.clamp_min(-1e30)[..., None]), torch.zeros_like(s))
    return torch.einsum("hqk,khd->qhd", p, v), lse


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads=None, num_heads_k=None, headdim=None,
                           cache_seqlens=None, qkv_dtype=torch.bfloat16, headdim_v=None, cu_seqlens_q=None,
                           cu_seqlens_k_new=None, cache_leftpad=None, page_size=None, max_seqlen_k_new=0, causal=False,
                           window_size=(-1, -1), attention_chunk=0, has_softcap=False, num_splits=0, pack_gqa=None,
                           sm_margin=0, num_heads_q=None, num_heads_kv=None):
    """get_scheduler_metadata as sgl-kernel's flash_attn.py exposes it (sglang passes num_heads /
    num_heads_k; FA3's flash_attn_interface.py names them num_heads_q / num_heads_kv: either): a
    schedule of FA3's size for a later call with the same arguments, recording the num_splits it was
    made for."""
    num_heads = num_heads if num_heads is not None else num_heads_q
    num_heads_k = num_heads_k if num_heads_k is not None else num_heads_kv
    headdim_v = headdim if headdim_v is None else headdim_v
    _check_shapes(qkv_dtype, qkv_dtype, qkv_dtype, headdim, headdim_v, num_heads, num_heads_k)
    p = _Params(batch_size, int(max_seqlen_q), int(max_seqlen_k), num_heads, num_heads_k, headdim, headdim_v,
                page_size, causal, tuple(window_size), int(attention_chunk or 0), int(num_splits), pack_gqa, True)
    schedule = torch.zeros(p.metadata_size, dtype=torch.int32, device=cache_seqlens.device)
    _SCHEDULES[id(schedule)] = (schedule, int(num_splits))
    return schedule


def _check_schedule(schedule, params, num_splits):
    """A call's scheduler_metadata: FA3's size check, then the num_splits it was made for."""
    _check(schedule.dtype == torch.int32, "scheduler_metadata must have dtype int32")
    _check(tuple(schedule.shape) == (params.metadata_size,), f"scheduler_metadata must have shape (metadata_size)"
           f" [{params.metadata_size}; got {list(schedule.shape)}]")
    made = _SCHEDULES.get(id(schedule))
    if made is None or made[0] is not schedule:
        raise NotImplementedError("the FA3 stand-in models schedules made by its own get_scheduler_metadata only")
    _check(made[1] == num_splits, f"scheduler_metadata was made for num_splits={made[1]} and the call passes "
           f"num_splits={num_splits}: FA3 does not check this, its kernel takes each batch's splits from the "
           f"schedule while the split buffers are sized for the call's (undefined: vllm#25490)")


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                            max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            attention_chunk=None, softcap=0.0, return_softmax_lse=False, out=None,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sinks=None, qv=None,
                            q_descale=None, k_descale=None, v_descale=None, **other):
    """FA3's flash_attn_with_kvcache over a paged cache, computed as documented (module docstring)."""
    for name, value in other.items():
        if name in _ONLY_DEFAULT and value is not None:
            raise NotImplementedError(f"the FA3 stand-in does not model flash_attn_with_kvcache({name}=...)")
        if name not in _ONLY_DEFAULT and name not in _SCHEDULE:
            raise NotImplementedError(f"the FA3 stand-in does not know flash_attn_with_kvcache's argument {name}")
    if page_table is None or cache_seqlens is None:
        raise NotImplementedError("the FA3 stand-in models the paged path (page_table, cache_seqlens) only")
    heads, dv = q.shape[-2], v_cache.shape[-1]
    _check_shapes(q.dtype, k_cache.dtype, v_cache.dtype, q.shape[-1], dv, heads, k_cache.shape[-2])
    _check(page_table.dtype == torch.int32, "page_table must have dtype torch.int32")
    if sinks is not None:
        _check(sinks.dtype == torch.bfloat16, "sinks must have dtype bfloat16")
        _check(tuple(sinks.shape) == (heads,), f"sinks must have shape ({heads}), got {list(sinks.shape)}")
    varlen = cu_seqlens_q is not None
    if qv is not None:  # flash_api.cpp:1028-1041 (0251105a)
        _check(q.shape[-1] <= 64, "q_v is only supported for head_size <= 64")
        _check(dv >= 256, "q_v is only supported for hdim_v >= 256.")
        _check(qv.dtype == q.dtype, "q_v must have the same dtype as query")
        _check(tuple(qv.shape) == tuple(q.shape[:-1]) + (dv,), f"q_v must have shape {list(q.shape[:-1]) + [dv]}, "
               f"got {list(qv.shape)}")
    if varlen:
        _check(cu_seqlens_q.dtype == torch.int32, "cu_seqlens_q must have dtype torch.int32")
        _check(max_seqlen_q is not None, "max_seqlen_q must be provided if cu_seqlens_q is provided")
    qs = q if varlen else q.reshape(-1, *q.shape[2:])
    qvs = None if qv is None else (qv if varlen else qv.reshape(-1, *qv.shape[2:]))
    batch = page_table.shape[0]
    cu = cu_seqlens_q.long().cpu() if varlen else torch.arange(batch + 1) * q.shape[1]
    lens = cache_seqlens.long().cpu() if torch.is_tensor(cache_seqlens) else torch.full((batch,), int(cache_seqlens))
    limit = int(max_seqlen_q) if varlen else q.shape[1]
    chunk = int(attention_chunk or 0)
    window = (int(window_size[0]), int(window_size[1]))
    params = _Params(batch, limit, page_table.shape[1] * k_cache.shape[1], heads, k_cache.shape[-2], q.shape[-1], dv,
                     k_cache.shape[1], causal, window, chunk, int(num_splits), pack_gqa, varlen)
    if scheduler_metadata is not None:
        _check_schedule(scheduler_metadata, params, int(num_splits))
    descales = (q_descale, k_descale, v_descale) if q.dtype == FP8 else (None, None, None)  # :1115: fp8 only
    for name, d in zip(("q_descale", "k_descale", "v_descale"), descales):
        if d is not None:
            _check(tuple(d.shape) == (batch, k_cache.shape[-2]), f"{name} must have shape ({batch}, "
                   f"{k_cache.shape[-2]}), got {list(d.shape)}")
    # default scale with qv: (d + dv) ** -0.5 (flash_attn_interface.py:670)
    scale = softmax_scale if softmax_scale is not None else (q.shape[-1] + (0 if qv is None else dv)) ** -0.5
    result = torch.full((qs.shape[0], heads, dv), math.nan, dtype=torch.float32, device=q.device)
    lse = torch.full((heads, qs.shape[0]), math.nan, dtype=torch.float32, device=q.device)
    for b in range(batch):
        lo, hi = int(cu[b]), int(cu[b + 1])
        if hi == lo:
            continue
        n = min(hi - lo, limit)  # rows past max_seqlen_q: not computed
        loaded = params.loaded(hi - lo, int(lens[b]), n)
        o, l_ = _entry(qs[lo:hi], k_cache, v_cache, page_table[b], int(lens[b]), scale, causal, window, chunk,
                       float(softcap or 0.0), loaded, sinks, None if qv is None else qvs[lo:hi],
                       tuple(None if d is None else d[b] for d in descales))
        result[lo:lo + n], lse[:, lo:lo + n] = o[:n], l_[:, :n]
    result = result.to(torch.bfloat16 if q.dtype == FP8 else q.dtype)  # :859
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
