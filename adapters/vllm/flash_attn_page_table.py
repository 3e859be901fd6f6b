"""vLLM v1's FlashAttention backend as a kvfuzz `page_table` planner (FAMILIES.md).

Per KV-cache group (fake_runner.py) the release's own FlashAttentionMetadataBuilder — or, for a
chunked group, the ChunkedLocalAttention builder vLLM derives from it, which splits requests into
virtual batches (make_local_attention_virtual_batches) — builds the metadata from the group's
CommonAttentionMetadata; every layer's FlashAttentionImpl.forward runs on it with the kernel
recorded (recorder.py). The recorded calls are the plan (engine/page_table_plan.py, shared with
sglang's FlashAttention adapter).

    meta, arrays = plan(vl, setup)
"""
import types

import torch

from engine import page_table_plan
from recorder import Recorder


def plan(vl, setup):
    fa = vl.flash_attn
    rec = Recorder(setup)
    rec.install(fa)
    config = setup.vllm_config
    impls = {l: _impl(vl, setup, l) for l in range(len(setup.layers_spec))}
    _publish(vl, config, impls)
    for g in setup.groups:
        backend = fa.FlashAttentionBackend
        if g.kind == "chunked":
            backend = vl.chunked_local_backend(backend, g.chunk, setup.page_size)
        names = [f"layers.{l}" for l in g.layer_ids]
        builder = backend.get_builder_cls()(g.spec, names, config, setup.device)
        common = setup.common_metadata(g)
        metadata = builder.build(common_prefix_len=0, common_attn_metadata=common)
        for l in g.layer_ids:
            rec.layer = l
            _forward(setup, impls[l], l, metadata)
    return page_table_plan.to_plan(setup.case, setup.mode, rec.calls, "vllm")


def _impl(vl, setup, l):
    m, x = setup.model, setup.layers_spec[l]
    window = x["window"] + 1 if x["kind"] == "sliding_window" else None
    return vl.flash_attn.FlashAttentionImpl(
        num_heads=m["q_heads"], head_size=setup.head_size, scale=m["sm_scale"], num_kv_heads=m["kv_heads"],
        alibi_slopes=None, sliding_window=window, kv_cache_dtype="auto", logits_soft_cap=m["softcap"] or None,
        attn_type=vl.AttentionType.DECODER)


def _publish(vl, config, impls):
    """What the builders look up beyond their arguments: the current VllmConfig and its attention
    layers (FA3's ahead-of-time scheduler reads every layer's window on the first build)."""
    fa = vl.flash_attn
    layers = {f"layers.{l}": types.SimpleNamespace(impl=impl) for l, impl in impls.items()}
    for impl in impls.values():
        if not hasattr(impl, "get_impl_variants"):
            impl.get_impl_variants = (lambda i: lambda: [i])(impl)
    fa.get_layers_from_vllm_config = lambda cfg, cls, names=None: layers
    fa.get_current_vllm_config_or_none = lambda: config
    if hasattr(fa, "get_current_vllm_config"):
        fa.get_current_vllm_config = lambda: config


def _forward(setup, impl, l, metadata):
    m, dt, dev = setup.model, setup.dtype, setup.device
    tokens = setup.total_tokens
    one = torch.ones(1, dtype=torch.float32, device=dev)
    layer = types.SimpleNamespace(_q_scale=one, _k_scale=one, _v_scale=one, _q_scale_float=1.0, _k_scale_float=1.0,
                                  _v_scale_float=1.0, layer_name=f"layers.{l}")
    h = setup.head_size
    q = torch.zeros(tokens, m["q_heads"], h, dtype=dt, device=dev)
    k = torch.zeros(tokens, m["kv_heads"], h, dtype=dt, device=dev)
    v = torch.zeros(tokens, m["kv_heads"], h, dtype=dt, device=dev)
    out = torch.zeros(tokens, m["q_heads"], h, dtype=dt, device=dev)
    impl.forward(layer, q, k, v, setup.kv_caches[l], metadata, out)
