"""vLLM's MLA backends at a pinned release: what differs between releases, in one place.

    attn = MlaBackend(vl, "flashmla")          # or "flashattn_mla", "triton_mla"
    setup = Setup(vl, case, device, attn)      # fake_runner.py asks attn for block sizes, specs, shapes
    builder = attn.builder(group.spec, names, setup.vllm_config, device)
    attn.forward(impl, layer, q, kv_c_normed, k_pe, kv_cache, metadata, output)

Where it sits: mla_latent.py drives one case through these; mla_recorder.py stands in for the
kernels. The releases differ in where the common MLA code lives (0.1x:
vllm/v1/attention/backends/mla/common.py, MLACommonImpl.forward splits decode and prefill; 0.3x:
vllm/model_executor/layers/attention/mla_attention.py, MLAAttention.forward_impl splits them and
calls the impl's forward_mha / forward_mqa, and prefill runs through an MLAPrefillBackend object),
in FlashMLA's kernel module and support probe, and in the prefill FlashAttention call's home.

The layers run with DeepSeek-V3's MLA dimensions (kv_lora_rank 512, rope 64, nope 128, v 128: the
head size 576 every MLA backend checks) whatever the case's: no metadata builder reads them but
to size buffers; the executor attends with the case's own. Values are float32 so that the tags
mla_recorder.py puts in Q, K and the latent cache (token and slot indices) stay exact.
"""
import importlib
import types

import torch

from fake_runner import UnsupportedCase, construct
from fp8_quant import scaled_fp8_quant

DIMS = dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
HEAD_SIZE = DIMS["kv_lora_rank"] + DIMS["qk_rope_head_dim"]  # the latent cache's width: 576
BACKENDS = {"flashmla": "FlashMLABackend", "flashattn_mla": "FlashAttnMLABackend", "triton_mla": "TritonMLABackend"}
# Block sizes of releases whose backends do not state them (0.1x): FlashMLA's kernel pages are 64
# tokens (the CUDA platform forces block_size 64), FlashAttention's a multiple of 16.
# vLLM's --kv-cache-dtype values modelled, and the cache tensor's dtype (None: the model's)
CACHE_DTYPES = {"auto": None, "fp8": torch.uint8}
OLD_BLOCK_SIZES = {"flashmla": lambda ps: ps == 64, "flashattn_mla": lambda ps: ps % 16 == 0,
                   "triton_mla": lambda ps: ps > 0}


class TagProjection:
    """kv_b_proj as the impls call it (x -> (y, bias)): every output value of a token is its input's
    first value, so the tags of the latent survive the up-projection into K and V."""

    def __init__(self, num_heads):
        self.width = num_heads * (DIMS["qk_nope_head_dim"] + DIMS["v_head_dim"])
        self.weight = torch.zeros(1, dtype=torch.float32)
        self.params_dtype = torch.float32

    def __call__(self, x):
        return x[..., :1].expand(*x.shape[:-1], self.width).contiguous(), None


class _NoDevice:
    """torch for the modules that ask the CUDA device directly where there is none: 0.1x's MLA
    builder allocates pinned host memory unconditionally (torch.zeros(..., pin_memory=True)), left
    unpinned here; 0.1x's FlashMLA builder reads the SM count from the device properties: an H100's."""

    def __init__(self, real):
        self._real = real
        self.cuda = types.SimpleNamespace(**{k: getattr(real.cuda, k) for k in dir(real.cuda) if not k.startswith("_")})
        self.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(multi_processor_count=132)

    def __getattr__(self, name):
        value = getattr(self._real, name)
        if name in ("zeros", "empty", "tensor", "ones", "full", "arange"):
            def unpinned(*args, **kwargs):
                kwargs.pop("pin_memory", None)
                return value(*args, **kwargs)
            return unpinned
        return value


class MlaBackend:
    mla = True
    dtype = torch.float32

    def __init__(self, vl, which, workspace="release", kv_cache_dtype="auto"):
        """kv_cache_dtype: the latent cache's ("auto": the model's dtype; "fp8": e4m3 bytes, vLLM's
        --kv-cache-dtype fp8, which FlashMLA decodes with flash_mla_with_kvcache_fp8 from 0.15 on).
        workspace: the context gather's workspace, in tokens: "release" (the release's own size,
        determine_chunked_prefill_workspace_size: at least 8 x max_model_len, so a kvfuzz case gathers
        its context in one chunk) or "floor" (max_num_seqs x block_size, the floor 0.1x enforces and
        what the 64 Ki cap comes to at max_num_seqs 1024 and block size 64: contexts span chunks)."""
        if workspace not in ("release", "floor"):
            raise ValueError(f"workspace {workspace}: release or floor")
        self.workspace = workspace
        if which not in BACKENDS:
            raise ValueError(f"MLA backend {which}: one of {sorted(BACKENDS)}")
        if kv_cache_dtype not in CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype {kv_cache_dtype}: one of {sorted(CACHE_DTYPES)}")
        self.kv_cache_dtype = kv_cache_dtype
        # the cache tensor's dtype: vLLM allocates an fp8 cache as bytes (the impls view it as fp8)
        self.cache_dtype = CACHE_DTYPES[kv_cache_dtype] or self.dtype
        self.vl, self.which = vl, which
        self.common = vl._first("vllm.model_executor.layers.attention.mla_attention",
                                "vllm.v1.attention.backends.mla.common", attr="MLACommonMetadataBuilder")
        self.module = importlib.import_module(f"vllm.v1.attention.backends.mla.{which}")
        self.backend = getattr(self.module, BACKENDS[which])
        self.name = self.backend.get_name()
        self.utils = vl.utils
        self.recorder = None  # mla_recorder.MlaRecorder of the case being planned
        self._supported()
        self._one_rank()
        self._install()

    # -- what fake_runner.Setup asks ---------------------------------------------------------------
    def head_size(self, head_dim):
        return HEAD_SIZE

    def supports_block_size(self, ps):
        """The kernel's block size must be the cache's (vLLM's hybrid kernel blocks are not modelled)."""
        sizes = getattr(self.backend, "get_supported_kernel_block_sizes", None)
        if sizes is None:  # 0.1x: the backend's rule, within the block sizes CacheConfig takes
            import typing

            allowed = typing.get_args(getattr(importlib.import_module("vllm.config.cache"), "BlockSize", None))
            return OLD_BLOCK_SIZES[self.which](ps) and (not allowed or ps in allowed)
        for s in sizes():
            base = getattr(s, "base", None)
            if (base is not None and ps % base == 0) or (base is None and ps == int(s)):
                return True
        return False

    def check_cache_dtype(self):
        """UnsupportedCase where the release's backend does not take the cache dtype (its
        supported_kv_cache_dtypes, which vLLM's backend selection checks)."""
        taken = getattr(self.backend, "supported_kv_cache_dtypes", None)
        if self.kv_cache_dtype != "auto" and (taken is None or self.kv_cache_dtype not in taken):
            raise UnsupportedCase(f"vLLM {self.vl.version}'s {self.name} backend does not list {self.kv_cache_dtype} "
                                  f"in its supported_kv_cache_dtypes ({taken}: 0.10.2's and 0.11.0's list none, and "
                                  "their FlashMLA impl hands its kernel no descales)")

    def kv_cache_shape(self, num_blocks, block_size, num_kv_heads, head_size):
        return (num_blocks, block_size, HEAD_SIZE)

    def layer_spec(self, setup, x):
        it = self.vl.kv_cache_interface
        cls = getattr(it, "MLAAttentionSpec", it.FullAttentionSpec)
        return construct(cls, block_size=setup.page_size, num_kv_heads=1, head_size=HEAD_SIZE, dtype=self.cache_dtype,
                         use_mla=True, cache_dtype_str=self.kv_cache_dtype)

    def configure(self, config, setup):
        """The model an MLA model's config says: DeepSeek-V3's dims, one latent KV head, and per layer
        what the 0.3x builders read from the attention layer (its dims and prefill backend)."""
        m, ns = config.model_config, types.SimpleNamespace
        m.use_mla = True
        m.get_head_size = lambda: HEAD_SIZE
        m.get_num_kv_heads = lambda parallel=None: 1
        m.hf_text_config = ns(model_type="deepseek_v3", attn_logit_softcapping=None, **DIMS)
        m.hf_config = ns(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], **DIMS)
        a = config.attention_config  # MLA's switches, at their defaults (no quantized prefill, FA prefill)
        for name, value in dict(use_prefill_query_quantization=False, disable_flashinfer_prefill=True,
                                use_cudnn_prefill=False, use_trtllm_ragged_deepseek_prefill=False,
                                trtllm_ragged_backend=None, mla_prefill_backend=None).items():
            setattr(a, name, value)
        context = config.compilation_config.static_forward_context
        for l in range(len(setup.case.layers)):
            context[f"layers.{l}"] = ns(prefill_backend=self._prefill_backend(setup, config), **DIMS)

    # -- builders, impls, forward --------------------------------------------------------------------
    def builder(self, spec, layer_names, config, device):
        builder = self.backend.get_builder_cls()(spec, layer_names, config, device)
        if self.workspace == "floor":
            builder.chunked_prefill_workspace_size = config.scheduler_config.max_num_seqs * spec.block_size
        return builder

    def impl(self, setup):
        """The backend's impl of one layer, with the weights its decode path multiplies by (zeros)."""
        m, h = setup.model, setup.model["q_heads"]
        args = dict(num_heads=h, head_size=HEAD_SIZE, scale=m["sm_scale"], num_kv_heads=1, alibi_slopes=None,
                    sliding_window=None, kv_cache_dtype=self.kv_cache_dtype, logits_soft_cap=None,
                    attn_type=self.vl.AttentionType.DECODER, kv_sharing_target_layer_name=None,
                    qk_head_dim=DIMS["qk_nope_head_dim"] + DIMS["qk_rope_head_dim"], kv_b_proj=TagProjection(h),
                    **DIMS)
        impl = self.backend.get_impl_cls()(**args)
        impl.W_UK_T = torch.zeros(h, DIMS["qk_nope_head_dim"], DIMS["kv_lora_rank"], dtype=self.dtype)
        impl.W_UV = torch.zeros(h, DIMS["kv_lora_rank"], DIMS["v_head_dim"], dtype=self.dtype)
        impl.dcp_world_size = 1
        return impl

    def forward(self, impl, layer, q, kv_c_normed, k_pe, kv_cache, metadata, output):
        """One layer's attention as the release runs it. 0.1x: MLACommonImpl.forward. 0.3x:
        MLAAttention.forward_impl's split: the first num_decode_tokens tokens run forward_mqa (the
        latent query: W_UK_T applied to q_nope, then q_pe), the rest forward_mha."""
        if not hasattr(impl, "forward_mha"):
            impl.forward(layer, q, kv_c_normed, k_pe, kv_cache, metadata, output)
            return
        n = metadata.num_actual_tokens
        d = metadata.num_decode_tokens
        if n > d:
            impl.forward_mha(q[d:n], kv_c_normed[d:n], k_pe[d:n], kv_cache, metadata, layer._k_scale,
                             output=output[d:n])
        if d > 0:
            q_nope, q_pe = q[:d].split([DIMS["qk_nope_head_dim"], DIMS["qk_rope_head_dim"]], dim=-1)
            ql_nope = torch.bmm(q_nope.transpose(0, 1), impl.W_UK_T).transpose(0, 1)
            impl.forward_mqa((ql_nope, q_pe), kv_cache, metadata, layer)

    def reorder(self, setup, builder):
        """The input batch as the runner reorders it for this builder (decodes first, by the
        builder's reorder_batch_threshold): the release's reorder_batch_to_split_decodes_and_prefills
        on a batch that records its swaps. A decode or verify batch's rows have finished their
        prompts; an extend batch's rows are still prefilling."""
        import numpy as np

        n = setup.bs
        order = list(range(n))
        computed = (setup.seq_lens - setup.query_lens).astype(np.int64)
        prompt = computed + (setup.query_lens if setup.mode not in ("decode", "target_verify") else 0)
        batch = types.SimpleNamespace(req_ids=[str(i) for i in range(n)], num_computed_tokens_cpu=computed,
                                      num_prompt_tokens=prompt)

        def swap(a, b):
            order[a], order[b] = order[b], order[a]
            batch.req_ids[a], batch.req_ids[b] = batch.req_ids[b], batch.req_ids[a]
            computed[[a, b]], prompt[[a, b]] = computed[[b, a]], prompt[[b, a]]

        batch.swap_states = swap
        scheduled = types.SimpleNamespace(num_scheduled_tokens={str(i): int(q) for i, q in enumerate(setup.query_lens)})
        threshold = getattr(builder, "reorder_batch_threshold", None) or 1
        self.utils.reorder_batch_to_split_decodes_and_prefills(batch, scheduled, decode_threshold=threshold)
        setup.reorder(order)

    # -- release differences ----------------------------------------------------------------------
    def _supported(self):
        """The kernels' own support probes answer yes (the kernels are recorded, never run)."""
        for name in ("is_flashmla_supported", "is_flashmla_dense_supported"):
            if hasattr(self.module, name):
                setattr(self.module, name, lambda *a, **k: (True, None))
        if hasattr(self.module, "CudaPlatform"):  # 0.10's FlashMLA asks the class, not current_platform
            self.module.CudaPlatform = type(importlib.import_module("vllm.platforms")._current_platform)
        if hasattr(self.module, "num_compute_units"):  # FlashMLA's schedule buffer: an H100's SMs
            self.module.num_compute_units = lambda *a, **k: 132
        if hasattr(self.module, "flash_attn_supports_mla"):
            self.module.flash_attn_supports_mla = lambda: True

    def _one_rank(self):
        """One rank: decode context parallelism's group, which 0.1x asks for, is a group of one."""
        group = types.SimpleNamespace(world_size=1, rank_in_group=0)
        for module in (self.common, self.module):
            if hasattr(module, "get_dcp_group"):
                module.get_dcp_group = lambda: group
        if not torch.cuda.is_available():
            self.common.torch = self.module.torch = _NoDevice(torch)

    def _prefill_module(self):
        """Where the prefill FlashAttention call lives: 0.3x's MLA prefill backend module, else common."""
        try:
            return importlib.import_module("vllm.v1.attention.backends.mla.prefill.flash_attn")
        except ModuleNotFoundError:
            return self.common

    def _prefill_backend(self, setup, config):
        """0.3x's FlashAttention MLA prefill backend (the layer's prefill_backend); None before."""
        cls = getattr(self._prefill_module(), "FlashAttnPrefillBackend", None)
        if cls is None:
            return None
        return cls(num_heads=setup.model["q_heads"], scale=setup.model["sm_scale"], kv_lora_rank=DIMS["kv_lora_rank"],
                   qk_nope_head_dim=DIMS["qk_nope_head_dim"], qk_rope_head_dim=DIMS["qk_rope_head_dim"],
                   v_head_dim=DIMS["v_head_dim"], vllm_config=config)

    def _install(self):
        """Every kernel the backends launch, routed to the case's recorder (looked up at call time)."""
        rec = lambda name: lambda *a, **k: getattr(self.recorder, name)(*a, **k)  # noqa: E731
        kernels = {"flash_mla_with_kvcache": "flash_mla", "get_mla_metadata": "mla_schedule",
                   "flash_mla_with_kvcache_fp8": "flash_mla_fp8", "get_mla_metadata_dense_fp8": "mla_schedule_fp8",
                   "decode_attention_fwd": "triton_decode", "flash_attn_varlen_func": "fa_decode",
                   "get_scheduler_metadata": "get_scheduler_metadata"}
        for name, method in kernels.items():
            if hasattr(self.module, name):
                setattr(self.module, name, rec(method))
        self._prefill_module().flash_attn_varlen_func = rec("fa_prefill")
        ops = self.common.ops
        ops.gather_and_maybe_dequant_cache = rec("gather")
        ops.scaled_fp8_quant = scaled_fp8_quant  # the fp8 decode path's query (a stub module: one object)
        ops.concat_and_cache_mla = lambda *a, **k: None  # the cache write: kvfuzz writes K itself
        self.common.merge_attn_states = lambda *a, **k: None  # values are not computed here
