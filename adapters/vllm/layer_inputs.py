"""The attention layers of a kvfuzz case as vLLM builds them: each layer's impl (the backend's
AttentionImpl with the layer's window, soft cap and scale), published where the metadata builders
look layers up, and the inputs of its forward (inert Q/K/V: the recorders keep what the kernels are
handed, kvfuzz's executor attends with the case's own values).

Shared by the backends' planners (flash_attn_page_table.py, flashinfer_paged_csr.py):

    impls = publish_layers(vl, setup, vl.flash_attn.FlashAttentionImpl, [vl.flash_attn])
    layer, q, k, v, out = forward_inputs(setup, 0)
    impl.forward(layer, q, k, v, setup.kv_caches[0], metadata, out)
"""
import inspect
import types

import torch

from fake_runner import UnsupportedCase


def make_impl(vl, setup, l, impl_cls):
    """Layer l's impl: kvfuzz's sliding-window radius W is vLLM's sliding_window W + 1; the model's
    attention sinks (gpt-oss: one learned logit per q head) as the parameter the impl is built with,
    in fp32 (UnsupportedCase where the release's impl takes none)."""
    m, x = setup.model, setup.layers_spec[l]
    window = x["window"] + 1 if x["kind"] == "sliding_window" else None
    extra = {}
    if m.get("sinks") is not None:
        if "sinks" not in inspect.signature(impl_cls.__init__).parameters:
            raise UnsupportedCase(f"attention sinks: vLLM {vl.version}'s {impl_cls.__name__} takes none")
        extra["sinks"] = torch.tensor(m["sinks"], dtype=torch.float32, device=setup.device)
    return impl_cls(
        num_heads=m["q_heads"], head_size=setup.head_size, scale=m["sm_scale"], num_kv_heads=m["kv_heads"],
        alibi_slopes=None, sliding_window=window, kv_cache_dtype=getattr(setup.attn, "kv_cache_dtype", "auto"),
        logits_soft_cap=m["softcap"] or None,
        attn_type=vl.AttentionType.DECODER, **extra)


def publish_layers(vl, setup, impl_cls, modules):
    """Every layer's impl ({layer: impl}), published as the builders look them up in `modules` (the
    backend's module, vLLM's attention utils): get_layers_from_vllm_config (FA3's scheduler reads
    every layer's window, FlashInfer's get_per_layer_parameters its group's window, soft cap and
    scale) and the current VllmConfig."""
    config = setup.vllm_config
    impls = {l: make_impl(vl, setup, l, impl_cls) for l in range(len(setup.layers_spec))}
    layers = {f"layers.{l}": types.SimpleNamespace(impl=impl, num_heads=impl.num_heads) for l, impl in impls.items()}
    for impl in impls.values():
        if not hasattr(impl, "get_impl_variants"):
            impl.get_impl_variants = (lambda i: lambda: [i])(impl)
    for module in modules:
        if hasattr(module, "get_layers_from_vllm_config"):
            module.get_layers_from_vllm_config = lambda cfg, cls, names=None: {
                k: v for k, v in layers.items() if names is None or k in names}
        for name in ("get_current_vllm_config_or_none", "get_current_vllm_config"):
            if hasattr(module, name):
                setattr(module, name, lambda: config)
    return impls


def forward_inputs(setup, l):
    """(layer, query, key, value, output) of layer l's forward over the step's tokens (padded ones included).
    The layer's fp8 scales as vLLM holds them: 0-d float32 tensors (set_default_quant_scales, 0.33.0
    attention.py:136-138) holding the checkpoint's k_scale / v_scale (quantization/kv_cache.py:154-157),
    kvfuzz's case.layers[l]["k_scale"] / ["v_scale"] (1 where absent); the query's 1 (a checkpoint with
    q_scale 1: kvfuzz's queries are not rescaled)."""
    m, dt, dev, h = setup.model, setup.dtype, setup.device, setup.head_size
    tokens = setup.total_tokens
    x = setup.layers_spec[l]
    k_scale, v_scale = float(x.get("k_scale", 1.0)), float(x.get("v_scale", 1.0))
    layer = types.SimpleNamespace(
        _q_scale=torch.tensor(1.0, dtype=torch.float32, device=dev),
        _k_scale=torch.tensor(k_scale, dtype=torch.float32, device=dev),
        _v_scale=torch.tensor(v_scale, dtype=torch.float32, device=dev), _q_scale_float=1.0,
        _k_scale_float=k_scale, _v_scale_float=v_scale, _o_scale_float=None, layer_name=f"layers.{l}")
    q = torch.zeros(tokens, m["q_heads"], h, dtype=dt, device=dev)
    k = torch.zeros(tokens, m["kv_heads"], h, dtype=dt, device=dev)
    v = torch.zeros(tokens, m["kv_heads"], h, dtype=dt, device=dev)
    out = torch.zeros(tokens, m["q_heads"], h, dtype=dt, device=dev)
    return layer, q, k, v, out
