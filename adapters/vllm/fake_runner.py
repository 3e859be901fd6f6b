"""The smallest vLLM v1 model runner state that its attention metadata builders accept.

Built from one kvfuzz planner request (adapters/kvfuzz_adapter/case.py PlanCase), as
gpu_model_runner.py builds it each step:
- KV-cache groups as the hybrid KV-cache manager forms them: with an SWA pool (kvfuzz's hybrid
  cache) full layers, each sliding window and each chunk size are groups of their own; without
  one (the manager disabled, or a model of one kind) every layer is in one group, whose chunked
  layers still form an attention group of their own (their backend is ChunkedLocalAttention). A group's block
  table comes from the pool its layers read: full pool rows are kvfuzz's req_to_token at page
  granularity; SWA rows translate each page's first token through full_to_swa, so a page every
  window has left is block 0, vLLM's null block, as its sliding-window manager frees it.
- vLLM's own BlockTable (vllm/v1/worker/block_table.py) holds those rows, one per batch row in
  batch order, and computes the slot mapping of the step's tokens, checked against kvfuzz's writes.
- CommonAttentionMetadata: query_start_loc, seq_lens, block table and slot mapping per group;
  padded CUDA-graph rows as _build_attention_metadata pads them (null block, seq_len 0, no tokens).
  Under Model Runner V2 (setup.v2, v2_runner.py) V2's own code makes it from the same groups and rows.
- The layers: kvfuzz's sliding-window radius W is vLLM's sliding_window W + 1 (the impl passes
  window_size (W, 0)); chunked layers are ChunkedLocalAttention of the case's chunk.
- Spec-decode verify (target_verify) as vLLM's runner schedules it with num_speculative_tokens
  k = D - 1: per request the last sampled token and its k drafts, D query tokens at positions
  num_computed_tokens + arange(D) over seq_len + D keys (a uniform batch of query length k + 1,
  causal over the new tokens). kvfuzz's D tokens (root + drafts, stored at columns seq_len ..
  seq_len + D - 1) are exactly those; only chains (topk 1) are what vLLM's FlashAttention and
  Triton backends verify.
- EAGLE drafting (draft_decode, draft_extend_v2): the runner state is the target step the proposer
  drafts after (eagle_drafting.target_step, from the case's history); block tables cover the
  drafting layout's pages (table_lens).

    setup = Setup(vl, case, torch.device("cpu"))            # FlashAttention's KV-cache layout
    setup = Setup(vl, case, dev, vl.triton_attn.TritonAttentionBackend)
    setup.groups[0].common        # the CommonAttentionMetadata of group 0
"""
import collections
import dataclasses
import types

import numpy as np
import torch

import eagle_drafting
import vllm_release


class UnsupportedCase(Exception):
    """The case needs something this vLLM release or adapter does not model (not a finding)."""


MODES = ("decode", "extend", "mixed", "target_verify", "draft_decode", "draft_extend_v2", "draft_q_only")


def construct(cls, **fields):
    """A vLLM dataclass of the fields this release declares (releases add and drop fields)."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in fields.items() if k in names})


class Group:
    """One attention group: layers of one KV-cache group (kv_gid, its spec and block table) served by
    one backend (kind "attention", or "chunked" with its chunk)."""

    def __init__(self, gid, kind, chunk, pool, layer_ids):
        self.gid, self.kind, self.chunk, self.pool = gid, kind, chunk, pool
        self.layer_ids = layer_ids
        self.kv_gid = self.spec = self.block_table = None

    def __repr__(self):
        return f"group {self.gid} ({self.kind}, {self.pool} pool, layers {self.layer_ids})"


class Setup:
    """backend: the AttentionBackend class the layers run (default the release's, vl.backend_cls);
    attn: what the layers' attention backend answers (block sizes, head size, KV-cache spec and
    shape): MLA's (mla_backends.py), else the release's own answers for `backend`."""

    def __init__(self, vl, case, device, backend=None, attn=None, every_step=False, dcp=(1, 1)):
        self.vl, self.case, self.device = vl, case, device
        self.backend = backend or vl.backend_cls
        self.attn = attn or vl.layers_of(self.backend)
        b = case.batch
        self.mode = b["mode"]
        if self.mode == "idle":
            raise UnsupportedCase("an empty batch: vLLM's runner builds no attention metadata for it")
        if self.mode not in MODES:
            raise UnsupportedCase(f"mode {self.mode}: not a step vLLM's runner takes")
        if self.mode == "draft_decode" and int(b.get("topk") or 1) != 1:
            raise UnsupportedCase(f"tree drafting (topk {b['topk']}): vLLM's EAGLE proposer drafts chains on "
                                  "FlashAttention and Triton (its tree drafting needs TREE_ATTN, not modelled)")
        self.draft_tokens = int(b.get("draft_tokens") or 0)
        if self.mode == "target_verify" and int(b.get("topk") or 1) != 1 and self.backend.__name__ != "TreeAttentionBackend":
            raise UnsupportedCase(f"a spec tree (topk {b['topk']}): vLLM's FlashAttention and Triton backends verify "
                                  "chains only (a tree needs TREE_ATTN, not modelled)")
        if bool(case.model["mla"]) != self.attn.mla:
            raise UnsupportedCase(f"an {'MLA' if case.model['mla'] else 'MHA'} model: this backend runs "
                                  f"{'MLA' if self.attn.mla else 'MHA'} layers only")
        self.bs, self.padded_bs = int(b["bs"]), int(b["padded_bs"])
        self.graph = bool(b.get("captured")) or self.padded_bs != self.bs
        # every_step (vllm_planner.py --cudagraphs every-step): the engine captures the step's size too,
        # as vLLM does every size up to its largest (cudagraph_capture_sizes); the release's
        # dispatcher then gives the step its mode (cudagraph_dispatch.py). Drafting runs eagerly.
        self.graph = self.graph or (every_step and self.mode in ("decode", "extend", "mixed", "target_verify"))
        self.padded_rows = self.bs  # padded_bs where the batch replays a FULL CUDA graph (the planner says)
        # vLLM's uniform_decode_query_len: the query length of the batches FULL decode graphs serve (1 + k)
        self.uniform_query_len = self.draft_tokens if self.mode == "target_verify" else 1
        self.draft_steps, self.draft_step = int(b.get("draft_steps") or 0), int(b.get("draft_step") or 0)
        self.cascade = "heuristic"  # cascade attention over shared prefix blocks (cascade.py MODES)
        self.allocation = None  # vLLM's KVCacheManager's blocks mapped onto kvfuzz's pages (kv_cache_manager.py)
        self.v2 = None  # Model Runner V2's inputs (v2_runner.V2Inputs) where it runs the step, else the V1 runner's
        self.page_size = int(case.page_size)
        # decode-context parallelism (dcp.py): kvfuzz's page is vLLM's scheduler block of block_size x R
        # tokens (resolve_dcp_kv_block_size), each rank's block (the spec's and BlockTable's) block_size
        self.dcp_world, self.dcp_interleave = dcp
        if self.page_size % (self.dcp_world * self.dcp_interleave):
            raise UnsupportedCase(f"page size {self.page_size} is not a multiple of {self.dcp_world} DCP ranks x "
                                  f"interleave {self.dcp_interleave} (a rank's block holds whole interleave runs)")
        self.block_size = self.page_size // self.dcp_world
        self.dcp_writes = {}  # gid -> the step's slot mapping on this DCP rank (dcp.py reads it)
        self.r2t = case.array("req_to_token")
        self.model = m = case.model
        self.head_size = self.attn.head_size(m["head_dim"])
        self.dtype = self.attn.dtype
        self.total_tokens = int(case.num_tokens)  # padded tokens of a CUDA-graph batch included
        self.vllm_config = self._config()
        if hasattr(self.attn, "configure"):
            self.attn.configure(self.vllm_config, self)
        vl.publish(self.vllm_config)
        if not self.attn.supports_block_size(self.block_size):
            raise UnsupportedCase(f"vLLM {vl.version}'s {self.attn.name} backend does not run block size {self.block_size}")
        self.hybrid = bool(case.cache_config["hybrid"])
        self.f2s = case.array("full_to_swa") if self.hybrid else None
        self.layers_spec = case.layers
        chunks = sorted({x["chunk"] for x in self.layers_spec if x["kind"] == "chunked"})
        for c in chunks:
            if c % self.page_size:
                raise UnsupportedCase(f"chunk {c} is not a multiple of the block size {self.page_size} "
                                      "(vLLM asserts attn_chunk_size % block_size == 0)")
        self._batch()
        self._groups()
        self._kv_caches()

    # -- the scheduled batch ---------------------------------------------------------------------
    def _batch(self):
        c, n = self.case, self.bs
        self.seq_lens = c.array("seq_lens")[:n].astype(np.int64)
        self.query_lens = c.array("extend_seq_lens")[:n].astype(np.int64)
        if self.mode == "decode":
            self.query_lens = np.ones(n, np.int64)
        self.rows = c.array("req_pool_indices")[:n].astype(np.int64)
        self.num_tokens = int(self.query_lens.sum())
        self.positions = c.array("positions")[: self.num_tokens].astype(np.int64)
        if self.mode == "target_verify":  # kvfuzz's seq_len is the verified prefix, vLLM's counts the new tokens
            computed = self.seq_lens
            self.seq_lens = computed + self.query_lens
            # vLLM's positions (its slot mapping's input): num_computed_tokens + arange(query_len)
            self.positions = np.concatenate([np.arange(p, s) for p, s in zip(computed, self.seq_lens)]).astype(np.int64)
        self.out_cache_loc = c.array("out_cache_loc")[: self.num_tokens].astype(np.int64)
        # the step's positions as vLLM computes them, then the padded tokens' (kvfuzz's)
        self.all_positions = np.concatenate([self.positions, c.array("positions")[self.num_tokens:]]).astype(np.int64)
        self.table_lens = self.seq_lens  # the tokens each row's block table covers
        self.held_lens = None  # drafting: the columns kvfuzz's cache holds per row (eagle_drafting.target_step)
        if self.mode in eagle_drafting.LOOP_STEPS:  # the target step the proposer drafts after (eagle_drafting.py)
            eagle_drafting.target_step(self)
        self.row_order = np.arange(n)  # vLLM's batch row i is kvfuzz's row row_order[i] (reorder())
        self.token_order = np.arange(self.num_tokens)  # and its token t kvfuzz's token token_order[t]

    def reorder(self, order):
        """vLLM's input batch in `order` (kvfuzz's rows, as the release's reorder_batch_to_split_decodes_
        and_prefills leaves them: MLA builders want decodes first); rows, tokens and block tables follow."""
        order = np.asarray(order, np.int64)
        starts = np.concatenate([[0], np.cumsum(self.query_lens)])
        tokens = np.concatenate([np.arange(starts[r], starts[r + 1]) for r in order] or [np.zeros(0, np.int64)])
        self.row_order, self.token_order = self.row_order[order], self.token_order[tokens]
        self.seq_lens, self.query_lens, self.rows = self.seq_lens[order], self.query_lens[order], self.rows[order]
        self.table_lens = self.table_lens[order]
        if self.held_lens is not None:
            self.held_lens = self.held_lens[order]
        self.positions, self.out_cache_loc = self.positions[tokens], self.out_cache_loc[tokens]
        self.all_positions[: self.num_tokens] = self.positions
        for g in self.groups:
            g.table_rows = [g.table_rows[int(r)] for r in order]

    def decodes_first(self):
        """The input batch as vLLM's runner reorders it for a builder that splits decodes from prefills
        (reorder_batch_threshold 1: FlashInfer): a stable partition, single-token rows first
        (reorder_batch_to_split_decodes_and_prefills; its finer regions, which tell chunked-prefill
        short extends and first chunks apart, need prompt lengths kvfuzz does not model). Call before
        buffers(). Returns (order, token_of): vLLM's row j is kvfuzz's batch row order[j], vLLM's
        token t kvfuzz's token token_of[t]."""
        self.reorder(np.argsort(self.query_lens > 1, kind="stable"))
        return self.row_order, self.token_order

    # -- KV-cache groups ---------------------------------------------------------------------------
    def _groups(self):
        """vLLM's own grouping (get_kv_cache_groups) of the layers' KV-cache specs, the hybrid manager on
        where kvfuzz's cache has an SWA pool and off (--disable-hybrid-kv-cache-manager: specs unified,
        one group) where it has not; each group's attention groups split by backend (chunked layers are
        ChunkedLocalAttention's)."""
        specs = {f"layers.{l}": self._layer_spec(x) for l, x in enumerate(self.layers_spec)}
        self.vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = not self.hybrid
        try:
            kv_groups = self.vl.kv_cache_groups(self.vllm_config, specs)
        except ValueError as e:  # the engine refuses the model at start-up, before any batch runs
            raise UnsupportedCase(f"vLLM {self.vl.version} groups no KV cache for these layers: {e}") from e
        self.kv_groups = kv_groups
        self.groups = []
        for kv_gid, kv_group in enumerate(kv_groups):
            layer_ids = [int(name.split(".")[1]) for name in kv_group.layer_names]
            pools = {self.layers_spec[l]["pool"] for l in layer_ids}
            if len(pools) != 1:
                raise UnsupportedCase(f"vLLM groups layers of both pools ({sorted(pools)}) into one KV-cache group")
            pool = pools.pop()
            # attention groups as initialize_attn_backend keys them: by backend and by the layer's
            # spec, which is the group's unless it holds one per layer (UniformTypeKVCacheSpecs)
            per_layer = getattr(kv_group.kv_cache_spec, "kv_cache_specs", None)
            by_backend = {}
            for l in layer_ids:
                x = self.layers_spec[l]
                spec = per_layer[f"layers.{l}"] if per_layer is not None else kv_group.kv_cache_spec
                by_backend.setdefault((x["chunk"] if x["kind"] == "chunked" else 0, spec), []).append(l)
            for (chunk, spec), ids in by_backend.items():
                g = Group(len(self.groups), "chunked" if chunk else "attention", chunk, pool, ids)
                g.kv_gid, g.spec, g.group_spec = kv_gid, spec, kv_group.kv_cache_spec
                g.table_rows = [self._blocks(pool, i) for i in range(self.bs)]
                self.groups.append(g)

    def group_backend(self, g):
        """The attention backend group g's layers run: the step's, or for a chunked group the
        ChunkedLocalAttention backend vLLM derives from it."""
        if g.kind == "chunked":
            return self.vl.chunked_local_backend(self.backend, g.chunk, self.page_size)
        return self.backend

    def _layer_spec(self, x):
        if hasattr(self.attn, "layer_spec"):
            return self.attn.layer_spec(self, x)
        it = self.vl.kv_cache_interface
        # an fp8 cache: the spec's dtype is the cache's bytes and (0.2x on) its kv_quant_mode FP8_PER_TENSOR,
        # as Attention.get_kv_cache_spec builds it (0.33.0 attention.py:623-681)
        kv_dtype = getattr(self.attn, "kv_cache_dtype", "auto")
        quant = {"kv_quant_mode": it.get_kv_quant_mode(kv_dtype)} if hasattr(it, "get_kv_quant_mode") else {}
        common = dict(block_size=self.block_size, num_kv_heads=self.model["kv_heads"], head_size=self.head_size,
                      head_size_v=self.head_size, dtype=getattr(self.attn, "cache_dtype", self.dtype), use_mla=False,
                      **quant)
        if x["kind"] == "sliding_window":
            return construct(it.SlidingWindowSpec, sliding_window=x["window"] + 1, **common)
        if x["kind"] == "chunked":
            return construct(it.ChunkedLocalAttentionSpec, attention_chunk_size=x["chunk"], **common)
        return construct(it.FullAttentionSpec, **common)

    def _blocks(self, pool, i):
        """Batch row i's block ids in `pool`: one per page of its seq_len (KVCacheManager's blocks)."""
        ps, row, n = self.page_size, int(self.rows[i]), int(self.table_lens[i])
        first = self.r2t[row, 0:n:ps].astype(np.int64)
        if self.held_lens is not None:  # pages past what kvfuzz holds (freed rejected drafts): the null block
            first = np.where(np.arange(0, n, ps) < self.held_lens[i], first, 0)
        if pool == "swa":
            first = self.f2s[first]
        return [int(s) // ps for s in first]

    def _kv_caches(self):
        """Per layer, a KV cache tensor of the backend's layout over its pool's blocks; which pool a
        kernel was handed is told by its storage (pool_of)."""
        self.kv_caches, self._pool_by_ptr = {}, {}
        info = self.case.info["pools"]
        for l, x in enumerate(self.layers_spec):
            slots = info["swa_slots"] if x["pool"] == "swa" else info["full_slots"]
            blocks = max(1, slots // self.page_size)
            shape = self.attn.kv_cache_shape(blocks, self.block_size, self.model["kv_heads"], self.head_size)
            t = torch.zeros(shape, dtype=getattr(self.attn, "cache_dtype", self.dtype), device=self.device)
            self.kv_caches[l] = t
            self._pool_by_ptr[t.untyped_storage().data_ptr()] = x["pool"]

    def pool_of(self, tensor):
        return self._pool_by_ptr.get(tensor.untyped_storage().data_ptr(), "unknown")

    def expected_slots(self, pool):
        """Where kvfuzz wrote the step's tokens in `pool` (what vLLM's slot mapping must say); -1 where
        kvfuzz's cache holds no slot for a token (a drafting step's rejected tokens past its layout)."""
        loc = self.out_cache_loc
        if pool == "swa":
            swa = np.where(loc >= 0, self.f2s[np.maximum(loc, 0)], -1)
            # a drafting step's target step ran earlier: a window kvfuzz evicted since holds none of it
            return np.where(swa == 0, -1, swa) if self.held_lens is not None else swa
        return loc

    def _config(self):
        """The VllmConfig fields the builders and impls read, as plain namespaces."""
        m = self.model
        ns = types.SimpleNamespace
        max_len = int(self.r2t.shape[1])
        model_config = ns(
            max_model_len=max_len, dtype=self.dtype, use_mla=False, rswa_window=None, is_mm_prefix_lm=False,
            get_num_attention_heads=lambda parallel=None: m["q_heads"],
            get_num_kv_heads=lambda parallel=None: m["kv_heads"], get_head_size=lambda: self.head_size,
            get_sliding_window=lambda: None, hf_config=ns(model_type="llama", architectures=["LlamaForCausalLM"]),
            hf_text_config=ns(attn_logit_softcapping=m["softcap"] or None, model_type="llama"),
            is_encoder_decoder=False, uses_mrope=False, is_hybrid=False, is_multimodal_model=False)
        graph_sizes = [self.padded_bs * self.uniform_query_len] if self.graph else []  # in tokens
        mode = self.vl.cudagraph_mode("FULL_AND_PIECEWISE" if self.graph else "NONE")
        compilation_config = ns(
            cudagraph_mode=mode, max_capture_size=max(graph_sizes or [0]) or None,
            max_cudagraph_capture_size=max(graph_sizes or [0]) or None, cudagraph_capture_sizes=graph_sizes,
            full_cuda_graph=self.graph, static_forward_context={},
            # CustomOp.__init__ asks which ops are on (0.15's MLA impl builds its fp8 decode-concat
            # op, unused with kv_cache_dtype auto): all, vLLM's default without Inductor
            custom_ops=["all"], enabled_custom_ops=collections.Counter(), disabled_custom_ops=collections.Counter())
        parallel_config = ns(decode_context_parallel_size=self.dcp_world, prefill_context_parallel_size=1,
                             dcp_kv_cache_interleave_size=self.dcp_interleave,
                             cp_kv_cache_interleave_size=self.dcp_interleave, tensor_parallel_size=self.dcp_world,
                             dcp_comm_backend="ag_rs",
                             pipeline_parallel_size=1, data_parallel_size=1)
        # max_num_seqs: at least the CUDA-graph batch (vLLM captures no decode graph above it)
        scheduler_config = ns(max_num_seqs=max(int(self.r2t.shape[0]), self.padded_bs), max_num_batched_tokens=max(8192, self.total_tokens),
                              max_model_len=max_len, chunked_prefill_enabled=True,
                              disable_hybrid_kv_cache_manager=not bool(self.case.cache_config["hybrid"]))
        layout = self.vl.kv_cache_layout(self.backend)
        cache_config = ns(cache_dtype=getattr(self.attn, "kv_cache_dtype", "auto"), block_size=self.block_size, kv_sharing_fast_prefill=False,
                          use_replayssm=False, enable_prefix_caching=False, num_gpu_blocks_override=None,
                          kv_cache_layout=layout.name if layout is not None else None,
                          get_resolved_kv_cache_layout=lambda: layout)
        attention_config = ns(flash_attn_version=vllm_release.FA_VERSION, flash_attn_max_num_splits_for_cuda_graph=32,
                              use_cudnn_prefill=False, disable_flashinfer_prefill=False,
                              use_prefill_decode_attention=False, hisparse_config=None,
                              # FlashInfer's native wrappers, not TRT-LLM's kernels (flashinfer_paged_csr.py)
                              use_trtllm_attention=False if self.vl.backend == "flashinfer" else None,
                              disable_flashinfer_q_quantization=False, use_non_causal=False)
        speculative_config = self._speculative_config()
        return ns(model_config=model_config, compilation_config=compilation_config, parallel_config=parallel_config,
                  scheduler_config=scheduler_config, cache_config=cache_config, attention_config=attention_config,
                  kernel_config=ns(enable_jit_warmup=False), speculative_config=speculative_config,
                  num_speculative_tokens=speculative_config.num_speculative_tokens if speculative_config else 0,
                  kv_transfer_config=None, lora_config=None, additional_config={}, use_v2_model_runner=False)

    def _speculative_config(self):
        """A verify step runs with EAGLE's k = D - 1 speculative tokens per request (a chain: no token tree);
        a drafting step with the proposer's (eagle_drafting.py)."""
        if self.mode in eagle_drafting.MODES:
            return eagle_drafting.speculative_config(self)
        if self.mode != "target_verify":
            return None
        return types.SimpleNamespace(num_speculative_tokens=self.draft_tokens - 1, method="eagle", parallel_drafting=False,
                                     speculative_token_tree=None, use_eagle=lambda: True, disable_padded_drafter_batch=False)

    # -- per-group common metadata -------------------------------------------------------------
    def buffers(self):
        """The runner's persistent input buffers (query_start_loc, seq_lens) and one BlockTable per
        group: a captured CUDA graph reads them by address, so capture and replay share them."""
        npad = self.padded_rows
        max_len = int(self.r2t.shape[1])
        self.qsl_buffer = torch.zeros(npad + 1, dtype=torch.int32, device=self.device)
        self.seq_lens_buffer = torch.zeros(npad, dtype=torch.int32, device=self.device)
        tables = {}  # one BlockTable per KV-cache group, shared by its attention groups
        for g in self.groups:
            if g.kv_gid in tables:
                g.block_table = tables[g.kv_gid]
                continue
            g.block_table = tables[g.kv_gid] = self.vl.block_table(
                block_size=self.block_size, max_num_reqs=max(npad, 1), max_num_blocks_per_req=-(-max_len // self.page_size),
                max_num_batched_tokens=max(self.total_tokens, 1), **self.interleave())

    def interleave(self):
        """The BlockTable's DCP interleave argument, under both of its names (vl.block_table keeps the one the
        release takes); none without DCP."""
        i = self.dcp_interleave
        return dict(cp_kv_cache_interleave_size=i, dcp_kv_cache_interleave_size=i) if self.dcp_world > 1 else {}

    def common_metadata(self, g, capture=False):
        """gpu_model_runner's CommonAttentionMetadata of group g over the persistent buffers: its
        BlockTable filled with the batch's rows, the slot mapping computed by it (checked against
        kvfuzz's writes), padded rows as _build_attention_metadata pads a CUDA-graph batch (null
        block, seq_len 0, no tokens). capture: the dummy batch a FULL graph is captured with
        (_dummy_run(uniform_decode=True): uniform_decode_query_len tokens and seq_len as many per row
        (1 for decode, 1 + k for verify), max_seq_len = max_model_len)."""
        if self.v2 is not None:
            return self.v2.common_metadata(g, capture)
        n = self.bs
        npad = self.padded_rows
        query_lens = np.full(npad, self.uniform_query_len, np.int64) if capture else self.query_lens
        rows = npad if capture else n
        qsl = np.zeros(npad + 1, np.int32)
        qsl[1:rows + 1] = np.cumsum(query_lens[:rows])
        qsl[rows + 1:] = qsl[rows]
        seq_lens = np.zeros(npad, np.int32)
        seq_lens[:rows] = self.uniform_query_len if capture else self.seq_lens
        self.qsl_buffer.copy_(torch.from_numpy(qsl))
        self.seq_lens_buffer.copy_(torch.from_numpy(seq_lens))
        table = g.block_table
        if not capture:
            for i, blocks in enumerate(g.table_rows):
                table.add_row(blocks, i)
        table.commit_block_table(npad)
        slots = torch.full((self.total_tokens,), -1, dtype=torch.int64)
        if not capture:
            positions = torch.from_numpy(self.positions)
            slot_mapping = self.vl.slot_mapping(table, n, torch.from_numpy(qsl), positions, self.query_lens)
            if self.dcp_world > 1:  # this rank's local slots, PAD_SLOT_ID for the other ranks' tokens (dcp.py checks)
                self.dcp_writes[g.gid] = slot_mapping[: self.num_tokens].numpy().copy()
            else:
                self._check_slots(g, slot_mapping[: self.num_tokens].numpy())
            slots[: self.num_tokens] = slot_mapping[: self.num_tokens]
        blocks = self.vl.device_block_table(table, npad)
        blocks[rows:npad].fill_(0)  # NULL_BLOCK_ID for padded rows
        qsl_t = torch.from_numpy(qsl)
        seq_lens_t = torch.from_numpy(seq_lens)
        computed = (seq_lens - np.diff(qsl)).astype(np.int32)
        max_len = int(self.r2t.shape[1])
        return construct(
            self.vl.CommonAttentionMetadata, query_start_loc=self.qsl_buffer, query_start_loc_cpu=qsl_t,
            seq_lens=self.seq_lens_buffer, seq_lens_cpu=seq_lens_t, seq_lens_cpu_upper_bound=seq_lens_t,
            num_computed_tokens_cpu=torch.from_numpy(computed), num_reqs=npad, num_actual_tokens=self.total_tokens,
            max_query_len=int(query_lens[:rows].max()) if rows else 0,
            max_seq_len=max_len if capture else (int(seq_lens.max()) if rows else 0),
            block_table_tensor=blocks, slot_mapping=slots.to(self.device), causal=True,
            positions=torch.from_numpy(self.all_positions),
            is_prefilling=torch.from_numpy((np.diff(qsl) > 1) & (self.mode != "target_verify")),
            dcp_local_seq_lens=self._dcp_local_seq_lens(seq_lens_t))

    def _dcp_local_seq_lens(self, seq_lens):
        """The runner's dcp_local_seq_lens under DCP: vLLM's own get_dcp_local_seq_lens of the rank
        (gpu_model_runner.py:2382-2392 in 0.33.0); None without DCP."""
        if self.dcp_world == 1 or not hasattr(self.vl.utils, "get_dcp_local_seq_lens"):
            return None
        from dcp import rank_of
        return self.vl.utils.get_dcp_local_seq_lens(seq_lens, self.dcp_world, rank_of(self.vl),
                                                     self.dcp_interleave).to(self.device)

    def _check_slots(self, g, got):
        if self.allocation is not None:  # vLLM's block ids, as kvfuzz's pages
            got = self.allocation.kvfuzz_slots(g, got)
        expected = self.expected_slots(g.pool)
        wrong = np.nonzero((got != expected) & (expected >= 0))[0]
        if wrong.size:
            t = int(wrong[0])
            raise RuntimeError(f"{g}: vLLM's slot mapping writes token {t} (position {int(self.positions[t])}) at slot "
                               f"{int(got[t])}, kvfuzz's cache holds it at {int(expected[t])}")
