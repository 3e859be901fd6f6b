"""Upstream fixes, re-expressed here, applied on top of a pinned release (--fix N).

kvfuzz finds a bug in the release that shipped it; applying the upstream fix must make the finding
go away, while every other case stays clean (one entry, 26512, is an upstream change that was
reverted: kvfuzz finds the bug it introduces). Each fix below is written from the pull request's
description (cited), as the smallest change to the release's own functions (five, fa-extend-local,
fa-draft-swa-cascade, fa-verify-local, fa-draft-local and triton-draft-swa-short, are fixes kvfuzz
proposes in report drafts, with no upstream PR yet); where a later release with the fix is installable, run that release instead.
"""
import contextlib
import functools
import importlib
import inspect


def _fa():
    import importlib

    return importlib.import_module("sglang.srt.layers.attention.flashattention_backend")


def fix_24617(sg):
    """sglang #24617: FA3 target verify with topk > 1 on sliding-window layers of a hybrid-SWA pool
    builds swa_spec_metadata.page_table from full-pool slots; the fix translates both source
    tables with translate_loc_from_full_to_swa before prepare_swa_spec_page_table_triton."""
    fa = _fa()
    original = fa.FlashAttentionBackend._init_sliding_window_attn_spec_metadata
    prepare = fa.prepare_swa_spec_page_table_triton

    @functools.wraps(original)
    def patched(self, metadata, metadata_expand, metadata_swa=None):
        if not self.use_sliding_window_kv_pool:
            return original(self, metadata, metadata_expand, metadata_swa)
        pool = self.token_to_kv_pool

        def translated(dst, a, b, *rest):
            return prepare(dst, pool.translate_loc_from_full_to_swa(a), pool.translate_loc_from_full_to_swa(b), *rest)

        with _swapped(fa, "prepare_swa_spec_page_table_triton", translated):
            return original(self, metadata, metadata_expand, metadata_swa)

    fa.FlashAttentionBackend._init_sliding_window_attn_spec_metadata = patched


def fix_26512(sg):
    """sglang #26512, reverted by #26628: it took DRAFT_EXTEND_V2's forward_batch.seq_lens for the
    cache length before the step's tokens and added the extend lengths to FA's cache_seqlens, eagerly
    and in CUDA-graph replay. The v2 worker's seq_lens already include them
    (eagle_info_v2.prepare_for_extend_to_fill_draft_kvcache), so the change reads past the cache:
    kvfuzz finds it with the change applied (ci/sglang.sh seeds, change=26512) and not without."""
    fa = _fa()
    original = fa.FlashAttentionBackend.init_forward_metadata
    replay = fa.FlashAttentionBackend.init_forward_metadata_replay_cuda_graph

    @functools.wraps(replay)
    def patched_replay(self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info,
                       seq_lens_cpu, **kwargs):
        if forward_mode.is_draft_extend_v2():
            extend = spec_info.extend_seq_lens_tensor.to(seq_lens.dtype)
            seq_lens = seq_lens + extend
            seq_lens_cpu = seq_lens_cpu + extend.cpu().to(seq_lens_cpu.dtype)
            seq_lens_sum = int(seq_lens_cpu.sum())
        return replay(self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info,
                      seq_lens_cpu, **kwargs)

    fa.FlashAttentionBackend.init_forward_metadata_replay_cuda_graph = patched_replay

    @functools.wraps(original)
    def patched(self, forward_batch):
        if not forward_batch.forward_mode.is_draft_extend_v2():
            return original(self, forward_batch)
        import torch

        seq_lens, seq_lens_cpu = forward_batch.seq_lens, forward_batch.seq_lens_cpu
        try:
            forward_batch.seq_lens = seq_lens + forward_batch.extend_seq_lens
            forward_batch.seq_lens_cpu = seq_lens_cpu + torch.tensor(forward_batch.extend_seq_lens_cpu)
            return original(self, forward_batch)
        finally:
            forward_batch.seq_lens, forward_batch.seq_lens_cpu = seq_lens, seq_lens_cpu

    fa.FlashAttentionBackend.init_forward_metadata = patched


def fix_32902(sg):
    """sglang #32902: eager local-attention metadata hands make_local_attention_virtual_batches
    the token-granular page table; the fix strides and divides it to page ids first (page_size > 1)."""
    fa = _fa()
    original = fa.FlashAttentionBackend._maybe_init_local_attn_metadata
    make = fa.make_local_attention_virtual_batches

    @functools.wraps(original)
    def patched(self, forward_batch, metadata, device):
        if self.page_size == 1:
            return original(self, forward_batch, metadata, device)

        def paged(chunk, cu_q, seq_lens, table, page_size):
            return make(chunk, cu_q, seq_lens, table[:, ::page_size] // page_size, page_size)

        with _swapped(fa, "make_local_attention_virtual_batches", paged):
            return original(self, forward_batch, metadata, device)

    fa.FlashAttentionBackend._maybe_init_local_attn_metadata = patched


def fix_32087(sg):
    """sglang PR 32087 (open): the Triton decode window CSR keeps min(seq_len, W) keys, but the
    decode query (position seq_len - 1) sees W + 1; the decode paths (eager and CUDA-graph replay)
    must take min(seq_len, W + 1). Extend and verify prefixes need W, as they have."""
    import importlib

    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    cls = tb.TritonAttnBackend

    def widened(name):
        original = getattr(tb, name)
        at = list(inspect.signature(original).parameters).index("sliding_window_size")

        def call(*args, **kwargs):
            args = list(args)
            args[at] += 1
            return original(*args, **kwargs)

        return call

    def decode_only(method, mode_of):
        @functools.wraps(method)
        def patched(self, *args, **kwargs):
            if not mode_of(args, kwargs).is_decode_or_idle():
                return method(self, *args, **kwargs)
            with _swapped(tb, "update_sliding_window_buffer", widened("update_sliding_window_buffer")), \
                    _swapped(tb, "update_sliding_window_buffer_cuda_graph",
                             widened("update_sliding_window_buffer_cuda_graph")):
                return method(self, *args, **kwargs)

        return patched

    cls.init_forward_metadata = decode_only(cls.init_forward_metadata, lambda a, k: a[0].forward_mode)
    cls.init_forward_metadata_replay_cuda_graph = decode_only(
        cls.init_forward_metadata_replay_cuda_graph, lambda a, k: k.get("forward_mode", a[5] if len(a) > 5 else None))


def fix_31501(sg):
    """sglang #31501: the sliding-window paged prefill wrapper is planned without window_left, so
    FlashInfer compiles its per-key window mask out and a window_left given at forward() only moves
    the tile start (paged-only prefill: --enable-deterministic-inference, SGLANG_FLASHINFER_USE_PAGED,
    piecewise CUDA graphs, multimodal models). The fix passes window_left at plan time for the window
    wrapper in a normal extend (not in speculative verify, which keeps its tree mask)."""
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    updater = fi.FlashInferIndicesUpdaterPrefill
    original = updater.update_sliding_window

    @functools.wraps(original)
    def patched(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens, prefill_wrappers,
                use_ragged, encoder_lens, spec_info, *args, **kwargs):
        window = prefill_wrappers[0]
        if spec_info is not None or use_ragged:
            return original(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens,
                            prefill_wrappers, use_ragged, encoder_lens, spec_info, *args, **kwargs)
        plan = window.begin_forward
        window.begin_forward = functools.partial(plan, window_left=self.sliding_window_size)
        try:
            return original(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens,
                            prefill_wrappers, use_ragged, encoder_lens, spec_info, *args, **kwargs)
        finally:
            window.begin_forward = plan

    updater.update_sliding_window = patched


def fix_fa_extend_local(sg):
    """kvfuzz's proposed fix for kvfuzz-fa-mixed-local and kvfuzz-fa-draft-extend-local (no upstream
    PR; adapters/repro/reports.json): FA3's eager init_forward_metadata builds the local-attention
    metadata of the extend branch only when forward_mode == EXTEND; the fix builds it for every mode
    of that branch (MIXED, DRAFT_EXTEND, DRAFT_EXTEND_V2), as
    is_extend_or_draft_extend_or_mixed(include_draft_extend_v2=True) would test it. Re-expressed as:
    after the release's own init_forward_metadata, the same _maybe_init_local_attn_metadata call on
    the metadata it built, for those modes."""
    fa = _fa()
    cls = fa.FlashAttentionBackend
    original = cls.init_forward_metadata
    takes_batch = "forwardbatch" in inspect.signature(cls._maybe_init_local_attn_metadata).parameters  # up to 0.5.21

    @functools.wraps(original)
    def patched(self, forward_batch):
        result = original(self, forward_batch)
        mode = forward_batch.forward_mode
        if mode.name in ("MIXED", "DRAFT_EXTEND", "DRAFT_EXTEND_V2"):
            args = (forward_batch,) if takes_batch else ()
            self._maybe_init_local_attn_metadata(*args, self.forward_metadata, forward_batch.seq_lens.device)
        return result

    cls.init_forward_metadata = patched


def fix_fa_draft_swa_cascade(sg):
    """kvfuzz's proposed fix for kvfuzz-fa-draft-swa-cascade (no upstream PR; adapters/repro/reports.json):
    FA3 draft decode with topk > 1 runs a sliding-window layer as a cascade whose prefix call hands a
    row's topk branch queries to the kernel as one query block aligned bottom-right, so branch i's
    window ends topk - 1 - i keys early. Draft decode has no expanded window metadata to fall back to
    (excluding window layers from the cascade would leave them without their draft chain), so the fix
    keeps the cascade and gives its prefix call one query per branch, each branch its own entry over
    the row's prefix, with the window reduced by step + 1: the draft at step s sits at position
    seq_len + s, the expand call reads its s + 1 chain tokens, and the prefix keeps positions from
    seq_len + s - W on (none when W < s + 1). Re-expressed as: forward_decode of such a layer with the
    prefix call's arguments rewritten so; the expand call and the merge unchanged."""
    import torch

    fa = _fa()
    cls = fa.FlashAttentionBackend
    original = cls.forward_decode

    @functools.wraps(original)
    def patched(self, q, k, v, layer, forward_batch, *args, **kwargs):
        window = getattr(layer, "sliding_window_size", None)
        if forward_batch.spec_info is None or self.topk <= 1 or window is None or window < 0 or self.use_mla:
            return original(self, q, k, v, layer, forward_batch, *args, **kwargs)
        kernel, expand = fa.flash_attn_with_kvcache, self.forward_metadata_spec_decode_expand
        left = window - (self.speculative_step_id + 1)

        def per_branch(*a, **kw):
            if kw.get("page_table") is expand.page_table:  # the expand call: each branch's chain, as it is
                return kernel(*a, **kw)
            rows = kw["page_table"].shape[0]
            lens = kw["cache_seqlens"].repeat_interleave(self.topk)
            kw.update(page_table=kw["page_table"].repeat_interleave(self.topk, dim=0),
                      cache_seqlens=lens if left >= 0 else torch.zeros_like(lens),
                      cu_seqlens_q=torch.arange(rows * self.topk + 1, dtype=torch.int32, device=lens.device),
                      max_seqlen_q=1, window_size=(max(left, 0), 0))
            return kernel(*a, **kw)

        with _swapped(fa, "flash_attn_with_kvcache", per_branch):
            return original(self, q, k, v, layer, forward_batch, *args, **kwargs)

    cls.forward_decode = patched



def _per_query_rows(kernel, kw, expand, per, chunk):
    """One kernel row per query of the cascade's prefix call: the request's committed keys (the
    call's page table, as token slots), then the query's own tail from the expand metadata (its tree
    ancestors in verify, its draft chain in draft decode; position order, the query last), so that key
    k of a row sits at position k; causal, with FA3's attention_chunk = chunk. Shapes follow the
    tables' widths, not the data (a CUDA graph can capture it)."""
    import torch

    k_cache, v_cache, table, lens = kw["k_cache"], kw["v_cache"], kw["page_table"], kw["cache_seqlens"]
    ps = int(k_cache.shape[1])
    cols = torch.arange(table.shape[1] * ps, device=table.device)
    prefix = (table[:, cols // ps] * ps + cols % ps).repeat_interleave(per, dim=0)  # [rows, keys]: token slots
    lens = lens.repeat_interleave(per)
    tails, tail_lens = expand.page_table, expand.cache_seqlens_int32
    n, width = prefix.shape[0], prefix.shape[1] + tails.shape[1]
    at = torch.arange(width, device=table.device).expand(n, width)
    from_prefix = prefix.gather(1, at.clamp(max=prefix.shape[1] - 1))
    from_tail = tails.to(prefix.dtype).gather(1, (at - lens[:, None]).clamp(0, tails.shape[1] - 1))
    kw.update(k_cache=k_cache.reshape(-1, 1, *k_cache.shape[2:]), v_cache=v_cache.reshape(-1, 1, *v_cache.shape[2:]),
              page_table=torch.where(at < lens[:, None], from_prefix, from_tail).to(torch.int32),
              cache_seqlens=(lens + tail_lens).to(torch.int32), cu_seqlens_k_new=None,
              cu_seqlens_q=torch.arange(n + 1, dtype=torch.int32, device=table.device), max_seqlen_q=1,
              causal=True, window_size=(-1, -1), attention_chunk=chunk)
    return kernel(**kw)


def _fix_chunked_spec(sg, forward_name, applies, rows_per_request):
    """The chunked-attention fix of one speculative path: forward_name (forward_extend for target
    verify, forward_decode for draft decode) on the batches `applies(backend, forward_batch)` names.
    Their metadata builds no local virtual batches (_maybe_init_local_attn_metadata leaves
    local_attn_metadata None), and a chunked layer's forward takes the release's non-local path with
    FA3's native attention_chunk = C: topk = 1, on the plain call (a row's queries bottom-right over
    the prefix and the drafts, so each query's chunk is its own); topk > 1, the cascade's prefix call
    becomes one row per query over its committed keys and its own tail (_per_query_rows), and the
    expand call and the LSE merge are not made (the row holds the tail)."""
    fa = _fa()
    cls = fa.FlashAttentionBackend
    init, forward = cls.init_forward_metadata, getattr(cls, forward_name)

    def no_local(self, *args):  # ([forward_batch,] metadata, device): forward_batch dropped in 0.5.22
        args[-2].local_attn_metadata = None

    def has_local(backend):  # the local builder (0.5.22 on), has_local_attention before
        return getattr(backend, "local_attn_builder", None) is not None or getattr(backend, "has_local_attention", False)

    @functools.wraps(init)
    def patched_init(self, forward_batch):
        if not has_local(self) or not applies(self, forward_batch):
            return init(self, forward_batch)
        with _swapped(cls, "_maybe_init_local_attn_metadata", no_local):
            return init(self, forward_batch)

    def keep_prefix(o, s, *unused):  # merge_state_v2(o, s, o_expand, s_expand): the row's own result
        return o, s

    @functools.wraps(forward)
    def patched_forward(self, q, k, v, layer, forward_batch, *args, **kwargs):
        if not has_local(self) or not getattr(layer, "use_irope", False) \
                or not applies(self, forward_batch):
            return forward(self, q, k, v, layer, forward_batch, *args, **kwargs)
        kernel, expand = fa.flash_attn_with_kvcache, self.forward_metadata_spec_decode_expand
        chunk, per = self.attention_chunk_size, rows_per_request(self)

        def chunked(*a, **kw):
            if self.topk <= 1:
                return kernel(*a, **kw, attention_chunk=chunk)
            if kw.get("page_table") is not expand.page_table:  # the prefix call
                chunked.rows = _per_query_rows(kernel, kw, expand, per, chunk)
            return chunked.rows  # the expand call: its keys are already in the rows

        metadata = self.forward_metadata
        local, metadata.local_attn_metadata = metadata.local_attn_metadata, None
        merges = [name for name in ("merge_state_v2", "merge_state_v2_wrapper") if hasattr(fa, name)]
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(_swapped(fa, "flash_attn_with_kvcache", chunked))
                if hasattr(self, "flash_attn_with_kvcache"):  # 0.5.10.post1: forward_extend calls the instance's (line 620)
                    stack.enter_context(_swapped(self, "flash_attn_with_kvcache", chunked))
                for name in merges:
                    stack.enter_context(_swapped(fa, name, keep_prefix))
                return forward(self, q, k, v, layer, forward_batch, *args, **kwargs)
        finally:
            metadata.local_attn_metadata = local

    cls.init_forward_metadata = patched_init
    setattr(cls, forward_name, patched_forward)


def fix_fa_verify_local(sg):
    """kvfuzz's proposed fix for kvfuzz-fa-verify-local (no upstream PR; adapters/repro/reports.json):
    FA3 target verify builds Llama-4's local metadata only eagerly with topk = 1, so chunked layers
    read the whole context with topk > 1 and in every CUDA graph. The fix (_fix_chunked_spec) runs
    a chunked layer's verify with FA3's native attention_chunk instead of virtual batches: topk = 1
    on the plain verify call; topk > 1 one row per draft over the prefix and its tree ancestors (the
    expand metadata's sorted ancestors, positions seq_len .. seq_len + depth), outside the cascade."""
    _fix_chunked_spec(sg, "forward_extend", lambda backend, fb: fb.forward_mode.is_target_verify(),
                      lambda backend: backend.speculative_num_draft_tokens)


def fix_fa_draft_local(sg):
    """kvfuzz's proposed fix for kvfuzz-fa-draft-local (no upstream PR; adapters/repro/reports.json):
    FA3 draft decode with topk > 1 builds the local virtual batches from topk queries per row (wrong
    chunks, or an IndexError on a 1-token context) and its local path drops the draft chain. The fix
    (_fix_chunked_spec) builds no virtual batches for it and runs a chunked layer with FA3's native
    attention_chunk on one row per branch: the committed keys, then the branch's chain (the expand
    metadata's step + 1 tokens), the draft last at position seq_len + step."""
    _fix_chunked_spec(sg, "forward_decode", lambda backend, fb: fb.forward_mode.is_decode()
                      and fb.spec_info is not None and backend.topk > 1, lambda backend: backend.topk)


def fix_triton_draft_swa_short(sg):
    """kvfuzz's proposed fix for kvfuzz-triton-draft-swa-short (no upstream PR; adapters/repro/
    reports.json), for the releases with the window rail (0.5.23; before it a no-op): TritonMultiStepDraftBackend's window rail keeps min(total, W) keys of a
    window-W layer (cache_locs.generate_draft_decode_window_kv_indices) where a draft token sees W + 1,
    and every buffer the rail fills is sized bs * W. Re-expressed as: the multi-step backend's own
    sliding_window_size, which only the rail reads (its kernel's window, the buffers' width and the
    per-step slices), is W + 1; the per-step backends keep W."""
    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    cls = tb.TritonMultiStepDraftBackend
    original = cls.__init__

    @functools.wraps(original)
    def patched(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if getattr(self, "window_rail", False):  # the rail (releases before it: no-op)
            self.sliding_window_size += 1

    cls.__init__ = patched


def fix_39287(sg):
    """sglang PR 39287 (open), FlashInfer half, for 0.5.23: EAGLE target verify on a sliding-window
    layer trims the prefix to the window (update_sliding_window: paged_kernel_lens = min(seq_lens, W),
    kv_start_idx = seq_lens - W), but EagleVerifyInput.generate_attn_arg_prefill is not handed
    kv_start_idx (call_begin_forward passes it for DFLASH only), so it gathers from column 0, and it
    returns the custom mask laid out for the full prefix (seq_len + D columns a row) while FlashInfer
    reads it with the trimmed width. The fix, as the PR describes it: gather from kv_start_idx and
    compact each request's mask to the kept columns, masking every key (prefix or draft ancestor)
    before each draft's own window (a draft sits at seq_len + depth, the depth read off the tree mask)."""
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    eagle = importlib.import_module("sglang.srt.speculative.eagle_info")
    import torch

    updater = fi.FlashInferIndicesUpdaterPrefill
    begin = updater.call_begin_forward
    generate = eagle.EagleVerifyInput.generate_attn_arg_prefill

    @functools.wraps(begin)
    def patched_begin(self, wrapper_ragged, wrapper_paged, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum,
                      seq_lens, prefix_lens, kv_start_idx, *args, **kwargs):
        spec = args[3] if len(args) > 3 else kwargs.get("spec_info")
        window = getattr(self, "sliding_window_size", None)
        if isinstance(spec, eagle.EagleVerifyInput) and kv_start_idx is not None and window is not None:
            is_window_wrapper = wrapper_paged is self.attn_backend.prefill_wrappers_verify[0]
            spec._kvfuzz_trim = (kv_start_idx, seq_lens, window if is_window_wrapper else None)
        try:
            return begin(self, wrapper_ragged, wrapper_paged, req_pool_indices, paged_kernel_lens,
                         paged_kernel_lens_sum, seq_lens, prefix_lens, kv_start_idx, *args, **kwargs)
        finally:
            if isinstance(spec, eagle.EagleVerifyInput):
                spec._kvfuzz_trim = None

    @functools.wraps(generate)
    def patched_generate(self, *, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, translator, plan,
                         kind=eagle.IdSpaceKind.FULL):
        trim = getattr(self, "_kvfuzz_trim", None)
        if trim is None:
            return generate(self, req_pool_indices=req_pool_indices, paged_kernel_lens=paged_kernel_lens,
                            paged_kernel_lens_sum=paged_kernel_lens_sum, translator=translator, plan=plan, kind=kind)
        start, seq_lens, window = trim
        d = self.draft_token_num
        bs = req_pool_indices.numel()
        device = req_pool_indices.device
        qo_indptr = torch.arange(0, (1 + bs) * d, step=d, dtype=torch.int32, device=device)
        lens = paged_kernel_lens + d
        indptr = torch.zeros((bs + 1,), dtype=torch.int32, device=device)
        indptr[1:] = torch.cumsum(lens, dim=0)
        kv_indices = torch.empty(paged_kernel_lens_sum + d * bs, dtype=torch.int32, device=device)
        translator.pack_read_stream(plan, req_pool_indices=req_pool_indices, seq_lens=lens, indptr=indptr,
                                    out=kv_indices, kv_start_idx=start, kind=kind)
        full, rows, at = self.custom_mask, [], 0
        for i in range(bs):
            seq, s0 = int(seq_lens[i]), int(start[i])
            block = full[at:at + d * (seq + d)].view(d, seq + d)
            at += d * (seq + d)
            kept = block[:, s0:].clone()
            if window is not None:  # key positions: the kept prefix, then each draft at seq + depth
                depth = block[:, seq:].sum(dim=1) - 1
                keys = torch.cat([torch.arange(s0, seq, device=device), seq + depth])
                kept &= keys[None, :] >= (seq + depth - window)[:, None]
            rows.append(kept.reshape(-1))
        return kv_indices, indptr, qo_indptr, torch.cat(rows)

    updater.call_begin_forward = patched_begin
    eagle.EagleVerifyInput.generate_attn_arg_prefill = patched_generate


@contextlib.contextmanager
def _swapped(module, name, value):
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


FIXES = {"24617": fix_24617, "26512": fix_26512, "31501": fix_31501, "32087": fix_32087, "32902": fix_32902,
         "39287": fix_39287, "fa-extend-local": fix_fa_extend_local, "triton-draft-swa-short": fix_triton_draft_swa_short,
         "fa-draft-swa-cascade": fix_fa_draft_swa_cascade, "fa-verify-local": fix_fa_verify_local,
         "fa-draft-local": fix_fa_draft_local}


def apply(sg, number):
    FIXES[number](sg)
