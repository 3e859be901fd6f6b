"""The smallest model runner, KV pools and ForwardBatch that sglang's attention backends accept.

Built from one kvfuzz planner request (adapters/kvfuzz_adapter/case.py PlanCase): kvfuzz's own
req_to_token and full_to_swa tensors, its forward batch in sglang's conventions (kvfuzz's: a
DRAFT_EXTEND_V2 batch's seq_lens include the step's tokens, as eagle_info_v2's
prepare_for_extend_to_fill_draft_kvcache bumps them, extend_prefix_lens the old lengths), and a
model whose layers are kvfuzz's: sliding-window layers carry `sliding_window_size` = the radius W
(FlashAttention's window_size[0]; sglang's models already subtract 1 from the config's window),
chunked layers `use_irope` with the model's `attention_chunk_size`.

The hybrid-SWA pool is sglang's real SWAKVPool class (its layer routing and
translate_loc_from_full_to_swa run unchanged) over small stand-in buffers.

An MLA backend (Setup(..., mla=True)) runs kvfuzz's MLA models with DeepSeek-V3's MLA dimensions
(MLA_DIMS: the latent pool's one head of kv_lora_rank + rope = 576 values, the head dims every sglang
MLA backend views its cache with) whatever the case's: the metadata code reads them only to size and
view buffers; kvfuzz's executor attends with the case's own dims.
"""
import dataclasses
import importlib
import inspect
import types

import numpy as np
import torch

# kvfuzz mode -> (sglang ForwardMode name, speculative role)
MODES = {
    "idle": ("IDLE", None),
    "decode": ("DECODE", None),
    "extend": ("EXTEND", None),
    "mixed": ("MIXED", None),
    "target_verify": ("TARGET_VERIFY", "verify"),
    "draft_extend_v2": ("DRAFT_EXTEND_V2", "draft_extend"),
    "draft_decode": ("DECODE", "draft"),
}


# DeepSeek-V3's MLA dimensions (config.json: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
MLA_DIMS = dict(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
MLA_HEAD = MLA_DIMS["kv_lora_rank"] + MLA_DIMS["qk_rope_head_dim"]  # the latent pool's width: 576


class _Batch(types.SimpleNamespace):
    """The ForwardBatch's fields, referable weakly as the dataclass is (0.5.19's KVIndexTranslator
    memoizes its index table by a weak reference to the batch)."""


class UnsupportedCase(Exception):
    """The case needs something this sglang release or adapter does not model (not a finding)."""


class _Buffers:
    """One pool's per-layer K/V buffers: [slots, kv_heads, head_dim], tagged with the pool's name."""

    def __init__(self, name, slots, layers, kv_heads, head_dim, v_head_dim, dtype, device):
        self.name = name
        self.k = [torch.zeros(slots, kv_heads, head_dim, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(slots, kv_heads, v_head_dim, dtype=dtype, device=device) for _ in range(layers)]

    def get_kv_buffer(self, layer_id):
        return self.k[layer_id], self.v[layer_id]

    def get_kv_cache_quant_method(self):  # 0.5.23: what KVCache.__init__ sets for an unquantized pool
        return self.quant_method

    def get_key_buffer(self, layer_id):
        return self.k[layer_id]

    def get_value_buffer(self, layer_id):
        return self.v[layer_id]


class Setup:
    """Everything one request builds: model runner, layers, forward batch, pools."""

    def __init__(self, sg, case, device, spec_topk=None, deterministic=False, attention_backend="fa3", mla=False):
        self.sg, self.case, self.device = sg, case, device
        self.mla = mla
        self.attention_backend = attention_backend
        self.deterministic = deterministic
        info, batch = case.info, case.batch
        self.mode = batch["mode"]
        if self.mode not in MODES:
            raise UnsupportedCase(f"mode {self.mode}")
        self.bs, self.padded_bs = batch["bs"], batch["padded_bs"]
        self.graph = bool(batch["captured"])
        if self.graph and self.mode in ("extend", "mixed"):
            raise UnsupportedCase("sglang replays CUDA graphs for decode, idle and speculative batches, not extend/mixed")
        self.page_size = case.page_size
        self.topk = batch["topk"]
        self.draft_tokens = batch["draft_tokens"]
        self.draft_steps, self.draft_step = batch["draft_steps"], batch["draft_step"]
        m = case.model
        if m["mla"] != mla:
            raise UnsupportedCase("MLA models" if m["mla"] else "non-MLA models on an MLA backend")
        if mla and info["cache"]["hybrid"]:
            raise UnsupportedCase("a hybrid SWA pool under an MLA backend (swa_mla_fallback is not modelled)")
        self.layers_spec = case.layers
        self.dtype = torch.bfloat16
        self._build_pools(info, m)
        self._build_runner(m)
        self._build_layers(m)
        self._build_batch()

    # -- pools -------------------------------------------------------------------------------
    def _build_pools(self, info, m):
        sg, dev = self.sg, self.device
        r2t = self.case.array("req_to_token")
        self.req_to_token = torch.from_numpy(np.ascontiguousarray(r2t)).to(dev)
        self.req_to_token_pool = types.SimpleNamespace(req_to_token=self.req_to_token, size=r2t.shape[0])
        if self.graph and self.padded_bs > r2t.shape[0]:  # cuda_graph_runner.get_batch_sizes_to_capture
            raise UnsupportedCase(f"no CUDA graph is captured for batch size {self.padded_bs} > "
                                  f"req_to_token_pool.size {r2t.shape[0]}")
        full_ids = [l for l, x in enumerate(self.layers_spec) if x["pool"] == "full"]
        swa_ids = [l for l, x in enumerate(self.layers_spec) if x["pool"] == "swa"]
        pools = info["pools"]
        # an MLA pool holds the latent only: one head of MLA_HEAD values, no V
        heads, dims = (1, (MLA_HEAD, 0)) if self.mla else (m["kv_heads"], (m["head_dim"], m["v_head_dim"]))
        mk = lambda name, slots, n: _Buffers(name, slots, n, heads, *dims, self.dtype, dev)
        self.full = mk("full", pools["full_slots"], len(full_ids))
        self.full.quant_method = quant = sg.unquantized_kv_cache_method()
        self.hybrid = bool(info["cache"]["hybrid"])
        if not self.hybrid:
            self.swa = None
            pool = types.SimpleNamespace(get_kv_buffer=lambda l: self.full.get_kv_buffer(l),
                                         get_kv_cache_quant_method=lambda: quant,
                                         get_key_buffer=lambda l: self.full.get_key_buffer(l),
                                         get_value_buffer=lambda l: self.full.get_value_buffer(l), start_layer=0,
                                         layer_num=len(self.layers_spec))
        else:
            self.swa = mk("swa", pools["swa_slots"], len(swa_ids))
            self.swa.quant_method = quant
            pool = object.__new__(sg.SWAKVPool)  # the real class: its routing and translation run
            pool.full_kv_pool, pool.swa_kv_pool = self.full, self.swa
            pool.swa_layer_nums, pool.full_layer_nums = len(swa_ids), len(full_ids)
            pool.layers_mapping = {g: (i, False) for i, g in enumerate(full_ids)}
            pool.layers_mapping.update({g: (i, True) for i, g in enumerate(swa_ids)})
            pool.page_size, pool.device, pool.dtype = self.page_size, dev, self.dtype
            # what __init__ sets besides the sub-pools (0.5.12 on read layer_transfer_counter per layer)
            pool.layer_num, pool.start_layer = len(self.layers_spec), 0
            pool.size, pool.size_swa = pools["full_slots"], pools["swa_slots"]
            pool.head_num, pool.head_dim = m["kv_heads"], m["head_dim"]
            pool.layer_transfer_counter, pool.swa_loc = None, None
            f2s = self.case.array("full_to_swa")
            pool.full_to_swa_index_mapping = torch.from_numpy(np.ascontiguousarray(f2s)).to(dev)
        self.token_to_kv_pool = pool
        # The allocator: Triton's window CSRs translate through it (hasattr check in triton_backend.py).
        if self.hybrid:
            allocator = object.__new__(sg.SWATokenToKVPoolAllocator)
            allocator._kvcache, allocator.page_size = pool, self.page_size
        else:
            allocator = types.SimpleNamespace(page_size=self.page_size, get_kvcache=lambda: pool)
        self.token_to_kv_pool_allocator = allocator

    def pool_of(self, tensor):
        """'full' or 'swa': which pool a K buffer handed to a kernel belongs to."""
        ptr = tensor.untyped_storage().data_ptr()
        for buffers in (self.full, self.swa):
            if buffers is not None and any(k.untyped_storage().data_ptr() == ptr for k in buffers.k):
                return buffers.name
        return "unknown"

    # -- model runner --------------------------------------------------------------------------
    def _build_runner(self, m):
        sg = self.sg
        windows = [x["window"] for x in self.layers_spec if x["kind"] == "sliding_window"]
        chunks = sorted({x["chunk"] for x in self.layers_spec if x["kind"] == "chunked"})
        if len(chunks) > 1:
            raise UnsupportedCase("several chunk sizes (sglang has one attention_chunk_size)")
        spec = MODES[self.mode][1]
        if spec is None and self.mode != "idle":
            spec_topk, num_steps, draft_tokens = 0, 0, 0
        else:
            spec_topk = self.topk
            num_steps = self.draft_steps or 1
            if self.mode == "draft_extend_v2":  # the v2 worker extends num_steps + 1 tokens per request
                lens = self.case.array("extend_seq_lens")[: self.bs]
                num_steps = max(1, int(lens.max()) - 1) if len(lens) else 1
                if self.graph and (len(set(lens.tolist())) > 1 or int(lens.max()) < 2):
                    raise UnsupportedCase("a v2 draft-extend CUDA graph runs num_steps + 1 (>= 2) tokens for every "
                                          "request")
            draft_tokens = self.draft_tokens or 1
            if self.mode == "draft_extend_v2":  # the v2 worker extends num_draft_tokens per request
                draft_tokens = num_steps + 1
        self.spec_topk, self.num_steps, self.spec_draft_tokens = spec_topk, num_steps, draft_tokens
        server_args = sg.server_args(dict(
            kv_cache_dtype="auto", speculative_eagle_topk=spec_topk or None,
            speculative_num_draft_tokens=draft_tokens, speculative_num_steps=num_steps,
            enable_deterministic_inference=self.deterministic, disable_cuda_graph=not self.graph,
            attention_backend=self.attention_backend, enable_dp_attention=False, dp_size=1,
            speculative_algorithm="EAGLE" if spec else None, page_size=self.page_size,
            disable_chunked_prefix_cache=True, triton_attention_num_kv_splits=self.case.batch["kv_splits"],
            triton_attention_split_tile_size=None, chunked_prefill_size=8192, multi_item_scoring_delimiter=None,
            disable_piecewise_cuda_graph=True, dllm_algorithm=None, is_embedding=False, disable_radix_cache=False))
        model_config = types.SimpleNamespace(
            is_encoder_decoder=False, context_len=self.req_to_token.shape[1],
            attention_arch=sg.AttentionArch.MHA, is_local_attention_model=bool(chunks),
            num_attention_heads=m["q_heads"], get_num_kv_heads=lambda tp, dcp_size=1: m["kv_heads"],
            head_dim=m["head_dim"], v_head_dim=m["v_head_dim"], swa_v_head_dim=m["v_head_dim"],
            get_max_num_attention_heads=lambda: m["q_heads"], is_hybrid_swa=self.hybrid, is_multimodal=False,
            linear_attn_registry_result=None,
            hf_text_config=types.SimpleNamespace(num_attention_heads=m["q_heads"],
                                                 attn_logit_softcapping=m["softcap"] or None))
        if self.mla:  # model_config.py: DeepSeek's MLA fields; scaling is the MLA layer's softmax scale
            model_config.attention_arch = sg.AttentionArch.MLA
            model_config.scaling = m["sm_scale"]
            vars(model_config).update(MLA_DIMS)
        model_config.hf_config = types.SimpleNamespace(architectures=["LlamaForCausalLM"],
                                                       get_text_config=lambda: model_config.hf_text_config)
        self.runner = types.SimpleNamespace(
            model_config=model_config, device=self.device, server_args=server_args,
            # model_runner.py: the SWA window, else (Llama 4) the attention chunk size
            sliding_window_size=max(windows) if windows else (chunks[0] if chunks else None),
            attention_chunk_size=chunks[0] if chunks else None,
            req_to_token_pool=self.req_to_token_pool, token_to_kv_pool=self.token_to_kv_pool,
            token_to_kv_pool_allocator=self.token_to_kv_pool_allocator, gpu_id=0, hybrid_gdn_config=None,
            kimi_linear_config=None, linear_attn_model_spec=None, kv_cache_dtype_str="auto",
            kv_cache_dtype=self.dtype, page_size=self.page_size, attn_cp_size=1, dtype=self.dtype,
            is_hybrid_swa=self.hybrid, tp_size=1, num_effective_layers=len(self.layers_spec),
            model_is_mrope=False, is_draft_worker=spec == "draft",
            max_num_reqs=self.req_to_token.shape[0], ps=sg.parallel_state, use_mla_backend=self.mla)
        if sg.runtime is not None:
            self._runner_0_5_23(spec)

    def _runner_0_5_23(self, spec):
        """What 0.5.23's ModelRunner carries besides: its speculative algorithm and resolved backend
        names (from the published configuration, as ModelRunner.__init__ / initialize take them), the
        logits rows per decode slot, and the KVIndexTranslator it builds over its pools
        (init_kv_index_translator; a plain pool or SWAKVPool takes the non-translating path)."""
        sg, runner = self.sg, self.runner
        runner.spec_algorithm = sg.SpeculativeAlgorithm.from_string(sg.runtime.get_spec().speculative_algorithm)
        runner.draft_attention_backend = None
        # the published pair (0.5.19 on: runtime_context.attention_backends); 0.5.17 and 0.5.18 have no
        # accessor (the runner resolves it, model_runner.py:897-898): the one backend this case runs
        resolved = getattr(sg.runtime, "attention_backends", lambda: (self.attention_backend,) * 2)
        runner.prefill_attention_backend_str, runner.decode_attention_backend_str = resolved()
        resolve = importlib.import_module("sglang.srt.speculative.spec_utils").resolve_num_tokens_per_req

        def decode_num_tokens_per_req(*, num_draft_tokens=None):  # ModelRunner's, without DSpark and dLLM
            if not runner.spec_algorithm.is_speculative():
                return 1
            return resolve(phase="target_verify", spec_algorithm=runner.spec_algorithm,
                           is_draft_worker=runner.is_draft_worker, num_draft_tokens=num_draft_tokens)

        runner.decode_num_tokens_per_req = decode_num_tokens_per_req
        if sg.KVIndexTranslator is None:  # before 0.5.19
            return
        draft = ({"is_draft_worker": runner.is_draft_worker}  # 0.5.22 on
                 if "is_draft_worker" in inspect.signature(sg.KVIndexTranslator.__init__).parameters else {})
        runner.kv_index_translator = sg.KVIndexTranslator(
            req_to_token=self.req_to_token, token_to_kv_pool_allocator=self.token_to_kv_pool_allocator,
            token_to_kv_pool=self.token_to_kv_pool, page_size=self.page_size, device=self.device, **draft)

    # -- layers ----------------------------------------------------------------------------------
    def _build_layers(self, m):
        sg = self.sg
        self.layers = []
        for l, x in enumerate(self.layers_spec):
            # an MLA model's absorbed layer (DeepSeek's attn_mqa): one latent head, V its first kv_lora_rank
            kv_heads, head_dim, v_head_dim = ((1, MLA_HEAD, MLA_DIMS["kv_lora_rank"]) if self.mla
                                              else (m["kv_heads"], m["head_dim"], m["v_head_dim"]))
            self.layers.append(types.SimpleNamespace(
                layer_id=l, sliding_window_size=x["window"] if x["kind"] == "sliding_window" else -1,
                use_irope=x["kind"] == "chunked", tp_q_head_num=m["q_heads"], tp_k_head_num=kv_heads,
                tp_v_head_num=kv_heads, head_dim=head_dim, qk_head_dim=head_dim,
                v_head_dim=v_head_dim, scaling=m["sm_scale"], logit_cap=m["softcap"],
                is_cross_attention=False, attn_type=sg.AttentionType.DECODER, k_scale=None, v_scale=None,
                k_scale_float=None, v_scale_float=None, logit_capping_method="tanh", xai_temperature_len=-1))

    # -- forward batch ---------------------------------------------------------------------------
    def _build_batch(self):
        sg, dev, c = self.sg, self.device, self.case
        n = self.padded_bs
        i32 = lambda name: torch.from_numpy(np.ascontiguousarray(c.array(name)[:n]).astype(np.int64)).to(dev)
        seq_lens = i32("seq_lens")
        prefix = i32("extend_prefix_lens")
        extend = i32("extend_seq_lens")
        self.seq_lens = seq_lens
        self.req_pool_indices = i32("req_pool_indices")
        self.out_cache_loc = torch.from_numpy(c.array("out_cache_loc").astype(np.int64)).to(dev)
        positions = torch.from_numpy(c.array("positions").astype(np.int64)).to(dev)
        mode_name, spec = MODES[self.mode]
        self.forward_mode = getattr(sg.ForwardMode, mode_name)
        self.spec_info = None
        if spec == "verify":  # sglang's own EagleVerifyInput: FlashInfer plans through its generate_attn_arg_prefill
            mask = torch.from_numpy(c.array("custom_mask").astype(bool)).to(dev)
            known = dict(draft_token=torch.zeros(positions.shape[0], dtype=torch.int64, device=dev),
                         custom_mask=mask, positions=positions, spec_steps=self.num_steps, topk=self.topk,
                         draft_token_num=self.draft_tokens, seq_lens_sum=int(seq_lens.sum()),
                         seq_lens_cpu=seq_lens.cpu())
            # Fields the metadata code does not read (the retrieve_* trees, spelled retrive_ before
            # 0.5.11; capture_hidden_mode; 0.5.23's draft_probs) are None.
            verify = sg.eagle_verify_input()
            self.spec_info = verify(**{f.name: known.get(f.name) for f in dataclasses.fields(verify)
                                       if f.init and (f.name in known or f.default is dataclasses.MISSING)})
        elif spec is not None:
            # EagleDraftInput of the v2 worker: the draft-extend lengths per request (CUDA-graph replay reads them).
            # num_tokens_per_req (0.5.23): a draft decode's topk (eagle_worker_common.py:350), a draft extend's
            # num_draft_tokens (EagleDraftExtendInput, eagle_worker_v2.py:1156, and its graph capture's,
            # eagle_draft_extend_cuda_graph_runner.py:421); FA's capture binds by it (flashattention_backend.py:2906)
            width = self.spec_draft_tokens if self.mode == "draft_extend_v2" else self.topk
            self.spec_info = types.SimpleNamespace(topk=self.topk, positions=positions, num_tokens_per_batch=1,
                                                   num_tokens_per_req=width,
                                                   is_draft_input=lambda: True, is_verify_input=lambda: False,
                                                   accept_length=extend, accept_length_cpu=extend.tolist(),
                                                   extend_seq_lens_tensor=extend.to(torch.int32),
                                                   extend_seq_lens_cpu=extend.tolist(),
                                                   # 0.5.23: the multi-step draft backend's window rail
                                                   window_kv_indptr=None, window_kv_indices=None)
        self.fb = _Batch(
            forward_mode=self.forward_mode, batch_size=n, seq_lens=seq_lens, seq_lens_cpu=seq_lens.cpu(),
            seq_lens_sum=int(seq_lens.sum()), req_pool_indices=self.req_pool_indices,
            req_to_token_pool=self.req_to_token_pool, token_to_kv_pool=self.token_to_kv_pool,
            token_to_kv_pool_allocator=self.token_to_kv_pool_allocator, gpu_id=0, hybrid_gdn_config=None,
            kimi_linear_config=None,
            out_cache_loc=self.out_cache_loc, positions=positions, spec_info=self.spec_info,
            extend_prefix_lens=prefix, extend_prefix_lens_cpu=prefix.tolist(), extend_seq_lens=extend,
            extend_seq_lens_cpu=extend.tolist(), extend_num_tokens=int(extend.sum()), encoder_lens=None,
            encoder_out_cache_loc=None, attn_cp_metadata=None, attn_attend_prefix_cache=None,
            mha_return_lse=False, mha_one_shot=False, num_token_non_padded=None,
            extend_start_loc=torch.nn.functional.pad(torch.cumsum(extend, 0), (1, 0))[:-1],
            spec_algorithm=None, global_num_tokens_gpu=None, can_run_dp_cuda_graph=False,
            token_num_per_seq=None)
        # The release's ForwardBatch fields not set above keep the class's defaults (each release adds some).
        for f in dataclasses.fields(sg.ForwardBatch):
            if not hasattr(self.fb, f.name) and f.default is not dataclasses.MISSING:
                setattr(self.fb, f.name, f.default)
        if sg.runtime is not None:
            self.fb.can_run_decode_cuda_graph = self.graph
            self.fb.spec_algorithm = self.runner.spec_algorithm  # 0.5.23's backends ask it (is_uno, ...)
            # ForwardBatch.init_new: the batch's KVLocPlan, bound with its write ids (0.5.22 on)
            if hasattr(getattr(self.runner, "kv_index_translator", None), "bind_own_plan"):
                self.runner.kv_index_translator.bind_own_plan(self.fb)

    def layer_batch(self):
        """The batch the layers' forward sees: in a replayed CUDA graph, the kernels captured run, and
        an IDLE batch replays the graph captured for DECODE (cuda_graph_runner.py)."""
        if not (self.graph and self.mode == "idle"):
            return self.fb
        fb = types.SimpleNamespace(**vars(self.fb))
        fb.forward_mode = self.sg.ForwardMode.DECODE
        return fb
