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
from fake_runner import UnsupportedCase
from recorder import Recorder


def plan(vl, setup, graphs=False):
    """graphs: model CUDA-graph batches (FULL capture and replay, or eager with padded tokens). Off by
    default: vLLM pads a graph batch with empty kernel rows and leaves the padded tokens outside every
    row, and bounds max_seqlen_k by max_model_len at capture; kvfuzz's page_table check (backends/fa/
    fa_check.cc) expects sglang's padding (one query per padded row on the dummy page) and the exact
    max_seqlen_k, so it would report vLLM's convention as a finding."""
    if setup.graph and not graphs:
        raise UnsupportedCase("a CUDA-graph batch: vLLM's padding convention needs the page_table check extended "
                              "(--graphs models it)")
    fa = vl.flash_attn
    rec = Recorder(setup)
    rec.install(fa)
    config = setup.vllm_config
    impls = {l: _impl(vl, setup, l) for l in range(len(setup.layers_spec))}
    _publish(vl, config, impls)
    builders = {}
    for g in setup.groups:
        backend = fa.FlashAttentionBackend
        if g.kind == "chunked":
            backend = vl.chunked_local_backend(backend, g.chunk, setup.page_size)
        names = [f"layers.{l}" for l in g.layer_ids]
        builders[g.gid] = backend.get_builder_cls()(g.spec, names, config, setup.device)
    full_graph = setup.graph and _runs_full_graph(vl, setup, builders)
    setup.padded_rows = setup.padded_bs if full_graph else setup.bs
    setup.buffers()
    if full_graph:  # capture with the dummy batch, then the replay's metadata build over the same buffers
        rec.capturing = True
        for g in setup.groups:
            builder = builders[g.gid]
            common = setup.common_metadata(g, capture=True)
            capture = getattr(builder, "build_for_cudagraph_capture", None)
            metadata = capture(common) if capture else builder.build(common_prefix_len=0, common_attn_metadata=common)
            _layers(setup, rec, impls, g, metadata)
        for g in setup.groups:
            builders[g.gid].build(common_prefix_len=0, common_attn_metadata=setup.common_metadata(g))
        rec.replayed()
    else:
        for g in setup.groups:
            metadata = builders[g.gid].build(common_prefix_len=0, common_attn_metadata=setup.common_metadata(g))
            _layers(setup, rec, impls, g, metadata)
    return page_table_plan.to_plan(setup.case, setup.mode, rec.as_plan_calls(), "vllm")


def _runs_full_graph(vl, setup, builders):
    """Whether vLLM replays this batch as a FULL CUDA graph (FULL_AND_PIECEWISE, FlashAttention's
    default): only uniform single-token decode batches, and only where every group's builder
    supports it (_check_and_update_cudagraph_mode takes the least support of all builders; NEVER,
    as ChunkedLocalAttention answers, leaves attention outside the graphs: eager, padded tokens)."""
    if setup.mode != "decode":
        return False
    least = min(vl.cudagraph_support(type(b), setup.vllm_config, b.kv_cache_spec).value for b in builders.values())
    return least >= vl.AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE.value


def _layers(setup, rec, impls, g, metadata):
    for l in g.layer_ids:
        rec.layer = l
        _forward(setup, impls[l], l, metadata)


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
