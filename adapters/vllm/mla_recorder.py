"""Stand-ins for the kernels vLLM's MLA backends launch: each records which keys it reads.

Decode (the latent path, MQA over the paged latent cache) hands its kernel a block table and
per-row key counts; those are recorded as handed: FlashMLA's flash_mla_with_kvcache (and the tile
schedule get_mla_metadata made for it, checked against the call: plan-run:cache_seqlens,
:q_tokens), the Triton decode kernel decode_attention_fwd (one kernel row per query), FlashAttention
MLA's flash_attn_varlen_func with a block table (and FA3's schedule, recorder.py's check).

Prefill (MHA over the new tokens, then over the context gathered from the cache chunk by chunk)
hands FlashAttention dense K/V, so what it reads is told by tags: mla_latent.py fills Q with each
token's batch index + 1 and the new tokens' latent and the cache's every row with its slot + 1;
the gather (gather_and_maybe_dequant_cache) copies cache rows into the workspace as the kernel
does — row i of a chunk is request b = token_to_seq[i] (0.3x) or the b with cu_seq_lens[b] <= i <
cu_seq_lens[b + 1] (0.1x), position seq_starts[b] + i - cu_seq_lens[b] of b's block-table row — and
kv_b_proj carries a latent's tag into K and V (mla_backends.TagProjection). A prefill call then
names, per row, the queries (Q's tags) and the slots of its keys (K's tags).

Under a FULL CUDA graph (mla_graph.py) the decode calls made while capturing keep the tensors they
were handed and are read when the graph replays (replayed()): block table, seq_lens, cu_seqlens_q
and FlashMLA's schedule as the replay's metadata build left them in those buffers.

    rec = MlaRecorder(setup); attn.recorder = rec
    attn.forward(impl, layer, q, kv_c_normed, k_pe, kv_cache, metadata, output)   # -> rec.decode, rec.prefill
"""
import torch

from engine.tensors import host
from recorder import Recorder


def tag_cache(cache, slot_tags):
    """Fill the latent cache's rows with their tags (slot_tags: [blocks, page] of slot + 1): each value
    of a model-dtype cache; an fp8 cache (bytes, --kv-cache-dtype fp8) holds them as int32 words,
    which the gather stand-in reads back (a tag is no fp8 value)."""
    if cache.element_size() == 1:
        words = cache.view(torch.uint8).view(*cache.shape[:-1], -1, 4).view(torch.int32).squeeze(-1)
        words.copy_(slot_tags.to(torch.int32).unsqueeze(-1).expand_as(words))
    else:
        cache.copy_(slot_tags.to(cache.dtype).unsqueeze(-1).expand_as(cache))


def cache_rows(cache):
    """The latent cache's rows as the tags tag_cache wrote: [slots, width]."""
    if cache.element_size() == 1:
        return cache.contiguous().view(torch.uint8).reshape(-1, cache.shape[-1]).view(torch.int32)
    return cache.reshape(-1, cache.shape[-1])


def tags(t, what):
    """The tags of a tagged tensor's rows (first value of each, minus 1); rows must be uniform."""
    rows = t.reshape(t.shape[0], -1).to(torch.float64)
    if rows.numel() and not torch.equal(rows, rows[:, :1].expand_as(rows)):
        raise RuntimeError(f"{what}: a row mixes values of different tokens")
    return (rows[:, 0].round().to(torch.int64) - 1) if rows.shape[1] else torch.zeros(0, dtype=torch.int64)


class MlaRecorder(Recorder):
    """Recorder (recorder.py) gives the FA3 schedule and its plan-run check; this adds MLA's kernels."""

    def __init__(self, setup):
        super().__init__(setup)
        self.decode = {}   # layer -> [{rows, q_per_row, block_table [rows, width], seq_lens [rows]}]
        self.prefill = {}  # layer -> [{causal, cu_seqlens_q, cu_seqlens_k, q_tags, k_tags}]
        self.mla_schedules = []
        # FlashMLA's schedule made by the kernel's first call from that call's seq_lens (0.2x on:
        # get_mla_metadata returns an empty FlashMLASchedMeta; in a graph, the call replays it),
        # else at metadata build from the seq_lens get_mla_metadata is shown (0.1x)
        self.lazy_schedule = hasattr(setup.attn.module, "FlashMLASchedMeta")

    # -- decode --------------------------------------------------------------------------------------
    def _decode(self, block_table, seq_lens, kernel, q_per_row=None, cu_seqlens_q=None, schedule=None):
        """One decode kernel call: its rows' queries are q_per_row each or told by cu_seqlens_q; schedule:
        (FlashMLA's tile schedule as handed, its num_splits or None, its q_tokens). While capturing, the tensors are kept and
        read at replay (replayed())."""
        call = {"kernel": kernel, "layer": self.layer, "block_table": block_table, "seq_lens": seq_lens,
                "q_per_row": q_per_row, "cu_seqlens_q": cu_seqlens_q, "schedule": schedule}
        self.decode.setdefault(self.layer, []).append(call if self.capturing else self._read(call))

    def _read(self, call):
        """A decode call as its kernel reads it: {kernel, rows, q_lens, block_table, seq_lens} on the host,
        FlashMLA's schedule checked against the seq_lens the kernel reads (plan-run:cache_seqlens)."""
        kernel = call["kernel"]
        bt = host(call["block_table"], "block_table").to(torch.int64)
        sl = host(call["seq_lens"], "seq_lens").to(torch.int64)
        if bt.shape[0] < sl.shape[0]:
            raise RuntimeError(f"{kernel}: {sl.shape[0]} rows of seq_lens but a block table of {bt.shape[0]} rows")
        rows = int(sl.shape[0])
        if call["cu_seqlens_q"] is not None:
            cu = host(call["cu_seqlens_q"], "cu_seqlens_q").to(torch.int64)
            q_lens = (cu[1:rows + 1] - cu[:rows]).tolist()
        else:
            q_lens = [call["q_per_row"]] * rows
        if call["schedule"] is not None:
            self._check_mla_schedule(*call["schedule"], call["seq_lens"], call["layer"])
        return {"kernel": kernel, "rows": rows, "q_lens": q_lens, "block_table": bt[:rows], "seq_lens": sl}

    def replayed(self):
        """The calls as the graph replays them: what the captured tensors hold now."""
        super().replayed()
        self.decode = {l: [c if "rows" in c else self._read(c) for c in calls] for l, calls in self.decode.items()}

    def flash_mla(self, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata=None,
                  num_splits=None, softmax_scale=None, causal=False, **others):
        """FlashMLA: q [batch, q_per_row, heads, d], one row per request, bottom-right causal; the output
        is in the model's dtype (an fp8 cache's query is e4m3)."""
        if not causal and q.shape[1] > 1:
            raise NotImplementedError("flash_mla_with_kvcache(causal=False) over several queries is not modelled")
        self._check_page_size(int(k_cache.shape[1]), "flash_mla_with_kvcache")
        schedule = None
        if tile_scheduler_metadata is not None and torch.is_tensor(tile_scheduler_metadata):
            splits = num_splits if torch.is_tensor(num_splits) else None
            schedule = (tile_scheduler_metadata, splits, int(q.shape[1]) * int(q.shape[2]))
        self._decode(block_table, cache_seqlens, "flash_mla_with_kvcache", q_per_row=int(q.shape[1]), schedule=schedule)
        b, s, h = q.shape[0], q.shape[1], q.shape[2]
        return torch.zeros(b, s, h, head_dim_v, dtype=self.setup.dtype), torch.zeros(b, h, s, dtype=torch.float32)

    def mla_schedule(self, cache_seqlens, num_q_tokens_per_head_k, num_heads_k, *args, lazy=None, **kwargs):
        """get_mla_metadata: FlashMLA's tile schedule, made at metadata build for the seq_lens it is
        shown (lazy: by the kernel's first call, self.lazy_schedule by default); what it returns (the
        tile schedule, num_splits) holds the schedule's index (1-based), which the kernel call looks up."""
        lazy = self.lazy_schedule if lazy is None else lazy
        seq_lens = None if lazy else host(cache_seqlens, "cache_seqlens").to(torch.int64)
        self.mla_schedules.append({"seq_lens": seq_lens,
                                   "q_tokens": int(num_q_tokens_per_head_k)})
        marker = torch.full((1, 8), len(self.mla_schedules), dtype=torch.int32)
        return marker, torch.full((int(cache_seqlens.shape[0]) + 1,), len(self.mla_schedules), dtype=torch.int32)

    def mla_schedule_fp8(self, cache_seqlens, num_q_tokens_per_head_k, num_heads_k):
        """get_mla_metadata_dense_fp8 (0.15 on, fp8 KV cache): the fp8 kernel's tile schedule and
        num_splits, made at metadata build from the seq_lens it is shown (a tensor pair, as 0.1x's
        get_mla_metadata made; a FULL graph replays the tensors the capture was handed)."""
        return self.mla_schedule(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, lazy=False)

    def flash_mla_fp8(self, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits,
                      softmax_scale=None, causal=False, descale_q=None, descale_k=None):
        """flash_mla_with_kvcache_fp8: FlashMLA's decode over the fp8 latent cache, the same rows,
        table and schedule as flash_mla_with_kvcache's (the per-tensor descales scale values only)."""
        return self.flash_mla(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                              num_splits, softmax_scale, causal)

    def _check_mla_schedule(self, marker, num_splits, q_tokens, cache_seqlens, layer):
        """The schedule the kernel is handed against the seq_lens it reads: its tile schedule's (and
        num_splits', where handed) schedule must be one made for these seq_lens."""
        index = int(host(marker, "tile_scheduler_metadata").reshape(-1)[0]) - 1
        where = f"flash_mla_with_kvcache against FlashMLA schedule {index}"
        if not 0 <= index < len(self.mla_schedules):
            self.agree.note("tile_scheduler_metadata", "a schedule of this step", "none of them", layer, where)
            return
        s = self.mla_schedules[index]
        ran = host(cache_seqlens, "cache_seqlens").to(torch.int64)
        if s["seq_lens"] is None:  # made now, by this first call
            s["seq_lens"] = ran
        if not torch.equal(s["seq_lens"], ran):
            self.agree.note("cache_seqlens", s["seq_lens"].tolist(), ran.tolist(), layer, where)
        self.agree.check("q_tokens", s["q_tokens"], q_tokens, layer, where)
        if num_splits is not None:  # the kernel reads batch + 1 of them
            splits = host(num_splits, "num_splits").to(torch.int64)[: int(ran.shape[0]) + 1] - 1
            self.agree.check("mla_num_splits", [index] * (int(ran.shape[0]) + 1), splits.tolist(), layer, where)

    def triton_decode(self, q, k_buffer, v_buffer, o, *rest, **kwargs):
        """Triton MLA: one kernel row per query, each reading keys [0, b_seq_len[row]). Arguments after
        o: [lse,] req_to_token, b_seq_len, attn_logits, num_kv_splits, sm_scale[, page_size] (0.10
        passes no lse)."""
        if rest and rest[0].is_floating_point():
            rest = rest[1:]
        req_to_token, b_seq_len = rest[0], rest[1]
        page_size = rest[5] if len(rest) > 5 else kwargs.get("page_size", 1)
        self._check_page_size(int(page_size), "decode_attention_fwd")
        self._decode(req_to_token, b_seq_len, "decode_attention_fwd", q_per_row=1)

    def fa_decode(self, q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, seqused_k=None, block_table=None,
                  causal=False, scheduler_metadata=None, num_splits=0, return_softmax_lse=False, **others):
        """FlashAttention MLA's decode: rows of cu_seqlens_q over the paged latent cache."""
        if block_table is None or seqused_k is None:
            raise NotImplementedError("FlashAttention MLA decode without a block table is not modelled")
        if int(max_seqlen_q) > 1 and not causal:
            raise NotImplementedError("FlashAttention MLA decode, causal=False over several queries, is not modelled")
        if scheduler_metadata is not None and not self.capturing:  # a captured call's: the eager rerun checks it
            self._check_schedule(scheduler_metadata, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal,
                                 list(others.get("window_size") or [-1, -1]), int(k.shape[1]), int(num_splits or 0))
        self._check_page_size(int(k.shape[1]), "flash_attn_varlen_func")
        self._decode(block_table, seqused_k, "flash_attn_varlen_func", cu_seqlens_q=cu_seqlens_q)
        out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype)
        return (out, torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32)) if return_softmax_lse else out

    def _check_page_size(self, page_size, kernel):
        if page_size != self.setup.page_size:
            raise RuntimeError(f"{kernel} views the latent cache in pages of {page_size}; the cache's are "
                               f"{self.setup.page_size}")

    # -- prefill -------------------------------------------------------------------------------------
    def gather(self, src_cache, dst, block_table, cu_seq_lens, *args, token_to_seq=None, num_tokens=None,
               batch_size=None, seq_starts=None, **kwargs):
        """gather_and_maybe_dequant_cache: workspace row i <- the cache row of its request's position."""
        bt = host(block_table, "block_table").to(torch.int64)
        cu = host(cu_seq_lens, "cu_seq_lens").to(torch.int64)
        starts = host(seq_starts, "seq_starts").to(torch.int64) if seq_starts is not None else None
        if token_to_seq is not None:
            seqs = host(token_to_seq, "token_to_seq").to(torch.int64)[: int(num_tokens)]
        else:
            batch = int(batch_size)
            seqs = torch.repeat_interleave(torch.arange(batch), cu[1:batch + 1] - cu[:batch])
        ps = int(src_cache.shape[1])
        flat = cache_rows(src_cache)
        rows = torch.arange(seqs.shape[0])
        position = (starts[seqs] if starts is not None else 0) + rows - cu[seqs]
        outside = (position < 0) | (position // ps >= bt.shape[1])
        if bool(outside.any()):
            i = int(torch.nonzero(outside)[0])
            raise RuntimeError(f"gather_and_maybe_dequant_cache: row {i} (request {int(seqs[i])}) reads position "
                               f"{int(position[i])}, outside its block-table row of {bt.shape[1]} blocks")
        read = flat[bt[seqs, position // ps] * ps + position % ps]
        if read.shape[-1] != dst.shape[-1]:  # an fp8 cache's int32 words: the tags, dequantized as values
            read = (tags(read, "an fp8 latent cache row") + 1).unsqueeze(-1).expand(-1, dst.shape[-1])
        dst[: seqs.shape[0]] = read.to(dst.dtype)

    def fa_prefill(self, q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k=None, causal=False,
                   return_softmax_lse=False, block_table=None, seqused_k=None, out=None, **others):
        """A prefill FlashAttention call over dense K/V (the new tokens, or one context chunk)."""
        if block_table is not None or seqused_k is not None or cu_seqlens_k is None:
            raise NotImplementedError("an MLA prefill call over paged K/V is not modelled")
        for name in ("window_size", "alibi_slopes", "softcap"):
            if others.get(name) not in (None, 0, 0.0, (-1, -1), [-1, -1]):
                raise NotImplementedError(f"an MLA prefill call with {name}={others[name]} is not modelled")
        self.prefill.setdefault(self.layer, []).append({
            "causal": bool(causal), "cu_seqlens_q": host(cu_seqlens_q, "cu_seqlens_q").to(torch.int64),
            "cu_seqlens_k": host(cu_seqlens_k, "cu_seqlens_k").to(torch.int64),
            "q_tags": tags(q[:, :1], "the prefill query"), "k_tags": tags(k, "the prefill keys"),
            "v_tags": tags(v[..., :1], "the prefill values")})
        result = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype)
        return (result, torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32)) if return_softmax_lse else result
