"""A plain-torch stand-in of FlashMLA's dense decode (sgl-kernel's sgl_kernel.flash_mla), for CPU runs
of the code that calls it: what FlashMLA is documented to compute, from the arguments it is handed.

    tile_md, num_splits = get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k)
    out, lse = flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                                      tile_md, num_splits, softmax_scale=None, causal=False)

As FlashMLA's dense decode interface has it (deepseek-ai/FlashMLA csrc/api/dense_decode.h, read at
1aeef780; sgl-kernel 0.4.3 vendors an earlier FlashMLA whose interface takes the same arguments):
  - q [b, s_q, h_q, d] bf16 / fp16, d 576 (or 512); k_cache [blocks, 64, h_k, d] of q's dtype, pages of
    64 ("Currently page_block_size must be 64"); head_dim_v 512, V the first 512 values of K;
    cache_seqlens [b] int32, block_table [b, width] int32: row r reads keys k < cache_seqlens[r], key k
    at k_cache[block_table[r][k // 64], k % 64];
  - causal is bottom-right (query i of a row of s_q sees keys k <= seqlen - s_q + i), turned off for
    s_q == 1; scale default d ** -0.5;
  - the schedule: tile_scheduler_metadata must be [num_sm_parts, 8] int32 with num_sm_parts =
    max(num_sms / h_k / ceil(s_q * h_q / h_k / 64), 1) (the call's shape check; num_sms 132, an H100),
    num_splits [b + 1]. FlashMLA does not check that the schedule was made for the call's cache_seqlens
    (its splits follow the schedule); this stand-in refuses one it did not make for them
    (NotImplementedError): the outcome is not documented;
  - out [b, s_q, h_q, 512] in q's dtype, lse [b, h_q, s_q] float32, natural log; a row with no key gets
    out 0 and lse -inf here (what FlashMLA returns there is not documented). Precision: float32 throughout
    (FlashMLA rounds P to bf16 before P.V and merges split partials: flashmla.py declares it).
A block table entry outside k_cache for a key the row reads raises IndexError where FlashMLA reads
whatever lies there. The executor that calls it: adapters/gpu/flashmla.py (its CPU dry run,
ci/gpu_mla_pairs.sh --dry-run).
"""
import math

import torch

NUM_SMS = 132  # an H100 SXM's SM count: the schedule's shape depends on it
_META = 8  # int32 words of one tile's schedule entry
_SCHEDULES = {}  # id(tile metadata) -> (the tensor, cache_seqlens it was made for, q tokens per KV head, h_k)


def _check(ok, message):
    if not ok:
        raise RuntimeError(message)


def _sm_parts(q_tokens_per_head_k, num_heads_k):
    return max(NUM_SMS // num_heads_k // -(-q_tokens_per_head_k // 64), 1)


def get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, *more, **kw):
    """A schedule of FlashMLA's shape for a call with these cache_seqlens and q tokens per KV head."""
    _check(cache_seqlens.dtype == torch.int32, "seqlens_k must have dtype int32")
    parts = _sm_parts(int(num_q_tokens_per_head_k), int(num_heads_k))
    tile = torch.zeros(parts, _META, dtype=torch.int32, device=cache_seqlens.device)
    splits = torch.zeros(int(cache_seqlens.shape[0]) + 1, dtype=torch.int32, device=cache_seqlens.device)
    _SCHEDULES[id(tile)] = (tile, cache_seqlens.clone(), int(num_q_tokens_per_head_k), int(num_heads_k))
    return tile, splits


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits, softmax_scale=None, causal=False, **others):
    """FlashMLA's dense decode over the paged latent cache, computed as documented (module docstring)."""
    for name, value in others.items():
        if value is not None:
            raise NotImplementedError(f"the FlashMLA stand-in does not model flash_mla_with_kvcache({name}=...)")
    _check(q.dtype in (torch.bfloat16, torch.float16), "q must be bf16 or fp16")
    _check(k_cache.dtype == q.dtype, "query and key must have the same dtype")
    _check(cache_seqlens.dtype == torch.int32, "seqlens_k must have dtype int32")
    _check(block_table.dtype == torch.int32, "block_table must have dtype torch.int32")
    b, s_q, h_q, d = q.shape
    blocks, page, h_k = k_cache.shape[0], k_cache.shape[1], k_cache.shape[2]
    _check(d in (576, 512), "Only head_size_k == 576 or 512 is supported")
    _check(head_dim_v == 512, "Only head_size_v == 512 is supported")
    _check(page == 64, "Currently page_block_size must be 64")
    _check(b > 0, "batch size must be positive")
    _check(h_q % h_k == 0, "Number of heads in key/value must divide number of heads in query")
    _check(tuple(cache_seqlens.shape) == (b,) and block_table.shape[0] == b, "seqlens_k / block_table: batch size")
    q_tokens = s_q * h_q // h_k
    parts = _sm_parts(q_tokens, h_k)
    _check(tuple(tile_scheduler_metadata.shape) == (parts, _META),
           f"tile_scheduler_metadata must have shape ({parts}, {_META}), got {list(tile_scheduler_metadata.shape)}")
    _check(tuple(num_splits.shape) == (b + 1,), f"num_splits must have shape ({b + 1}), got {list(num_splits.shape)}")
    made = _SCHEDULES.get(id(tile_scheduler_metadata))
    if made is None or made[0] is not tile_scheduler_metadata:
        raise NotImplementedError("the FlashMLA stand-in models schedules made by its own get_mla_metadata only")
    if not torch.equal(made[1].cpu(), cache_seqlens.cpu()) or made[2] != q_tokens or made[3] != h_k:
        raise NotImplementedError("the schedule was made for other cache_seqlens or q tokens than the call's: "
                                  "FlashMLA does not check it, the outcome is not documented")
    if s_q == 1:
        causal = False
    scale = softmax_scale if softmax_scale is not None else d ** -0.5
    lens, table = cache_seqlens.long().cpu(), block_table.long().cpu()
    out = torch.zeros(b, s_q, h_q, head_dim_v, dtype=torch.float32, device=q.device)
    lse = torch.full((b, h_q, s_q), -math.inf, dtype=torch.float32, device=q.device)
    for r in range(b):
        n = int(lens[r])
        if n <= 0:
            continue
        j = torch.arange(n)
        if (n - 1) // page >= table.shape[1]:
            raise IndexError(f"cache_seqlens {n} is past the block table's {table.shape[1]} pages of {page}")
        pages = table[r, j // page]
        bad = torch.nonzero((pages < 0) | (pages >= blocks)).flatten()
        if len(bad):
            raise IndexError(f"block_table holds page {int(pages[bad[0]])} outside k_cache's {blocks} blocks, "
                             f"read for key {int(bad[0])} of row {r}")
        k = k_cache[pages.to(q.device), (j % page).to(q.device)].float()  # [n, h_k, d]
        k = k.repeat_interleave(h_q // h_k, dim=1)
        s = torch.einsum("qhd,khd->hqk", q[r].float(), k) * scale
        if causal:
            last = torch.arange(s_q)[:, None] + n - s_q
            s = s.masked_fill(~(j[None, :] <= last).to(q.device)[None], -math.inf)
        row_lse = torch.logsumexp(s, dim=-1)  # [h_q, s_q]
        p = torch.exp(s - row_lse.clamp_min(-1e30)[..., None])
        out[r] = torch.einsum("hqk,khd->qhd", p, k[..., :head_dim_v])
        lse[r] = row_lse
    return out.to(q.dtype), lse
