"""vLLM v1's FlashAttention backend as a kvfuzz `page_table` planner (FAMILIES.md).

Per KV-cache group (fake_runner.py) the release's own FlashAttentionMetadataBuilder — or, for a
chunked group, the ChunkedLocalAttention builder vLLM derives from it, which splits requests into
virtual batches (make_local_attention_virtual_batches) — builds the metadata from the group's
CommonAttentionMetadata; every layer's FlashAttentionImpl.forward runs on it with the kernel
recorded (recorder.py). The recorded calls are the plan (engine/page_table_plan.py, shared with
sglang's FlashAttention adapter).

    meta, arrays = plan(vl, setup)
"""

import torch

from engine import page_table_plan
from layer_inputs import forward_inputs, publish_layers
from recorder import Recorder


def plan(vl, setup):
    """CUDA-graph batches as vLLM runs them: a FULL graph (capture with _dummy_run's batch, then the
    replay's metadata build over the same persistent buffers, the kernel reading what it was handed
    at capture) for a uniform decode batch where every builder supports one, else eager with padded
    tokens. vLLM pads with empty kernel rows, leaves the padded tokens outside every row and, in a
    FULL graph, hands the kernel capture's max_seqlen_k (max_model_len): the plan says so
    (empty_padded_rows, max_seqlen_k_upper_bound; FAMILIES.md) and kvfuzz's check accepts exactly that."""
    fa = vl.flash_attn
    rec = Recorder(setup)
    rec.install(fa)
    config = setup.vllm_config
    impls = publish_layers(vl, setup, fa.FlashAttentionImpl, [fa])
    classes = {}
    for g in setup.groups:
        backend = fa.FlashAttentionBackend
        if g.kind == "chunked":
            backend = vl.chunked_local_backend(backend, g.chunk, setup.page_size)
        classes[g.gid] = backend.get_builder_cls()
    full_graphs = setup.graph and _resolve_cudagraph_mode(vl, setup, classes)
    builders = {g.gid: classes[g.gid](g.spec, [f"layers.{l}" for l in g.layer_ids], config, setup.device)
                for g in setup.groups}
    full_graph = full_graphs and setup.mode == "decode"
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
        replays = {g.gid: builders[g.gid].build(common_prefix_len=0, common_attn_metadata=setup.common_metadata(g))
                   for g in setup.groups}
        rec.replayed()
        _replay_agreement(setup, rec, impls, replays, fa)
    else:
        for g in setup.groups:
            metadata = builders[g.gid].build(common_prefix_len=0, common_attn_metadata=setup.common_metadata(g))
            _layers(setup, rec, impls, g, metadata)
    rec.agree.report(setup.case)
    calls = rec.as_plan_calls()
    if setup.graph:  # vLLM's padding: empty padded rows, padded tokens in no row; capture's max_seqlen_k
        for layer_calls in calls.values():
            for c in layer_calls:
                c["empty_padded_rows"] = True
                c["max_seqlen_k_upper_bound"] = full_graph
    return page_table_plan.to_plan(setup.case, setup.mode, calls, "vllm")


def _replay_agreement(setup, rec, impls, replays, fa):
    """A FULL graph is the plan step, its replay the run step: the kernel reads the buffers it was
    handed at capture, so the replay's metadata build must leave in them what it built. Each layer's
    forward runs again, eagerly, on the replay's metadata (a second recorder sharing the schedules);
    every index tensor a captured call holds after the replay must equal the eager call's
    (plan-run:page_table, :cache_seqlens, :cu_seqlens_q; vllm#26034's local virtual batches)."""
    eager = Recorder(setup)
    eager.schedules, eager.agree = rec.schedules, rec.agree
    eager.install(fa)
    for g in setup.groups:
        _layers(setup, eager, impls, g, replays[g.gid])
    rec.install(fa)
    where = "FULL CUDA graph replay: the captured buffer against the replay's build"
    for layer, calls in rec.calls.items():
        for captured, built in zip(calls, eager.calls.get(layer, [])):
            for name in ("page_table", "cache_seqlens", "cu_seqlens_q"):
                a, b = captured[name], built[name]
                if a.shape != b.shape or not torch.equal(a, b):
                    rec.agree.note(name, _brief(a), _brief(b), layer, where)


def _brief(t):
    values = t.flatten().tolist()
    return f"{list(t.shape)} {values[:12]}{' ...' if len(values) > 12 else ''}"


def _resolve_cudagraph_mode(vl, setup, classes):
    """The CUDA-graph mode vLLM settles on before it builds the builders (_check_and_update_cudagraph_mode):
    FULL_AND_PIECEWISE, FlashAttention's default, while every builder class supports some FULL graph;
    PIECEWISE (attention outside the graphs: eager, padded tokens) where one answers NEVER, as
    ChunkedLocalAttention's does. FULL graphs then run uniform single-token decode batches only.
    Returns whether FULL graphs stay on."""
    groups = {g.gid: g for g in setup.groups}
    least = min(vl.cudagraph_support(cls, setup.vllm_config, groups[gid].spec).value for gid, cls in classes.items())
    full = least >= vl.AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE.value
    setup.vllm_config.compilation_config.cudagraph_mode = vl.cudagraph_mode("FULL_AND_PIECEWISE" if full else "PIECEWISE")
    return full


def _layers(setup, rec, impls, g, metadata):
    for l in g.layer_ids:
        rec.layer = l
        _forward(setup, impls[l], l, metadata)


def _forward(setup, impl, l, metadata):
    layer, q, k, v, out = forward_inputs(setup, l)
    impl.forward(layer, q, k, v, setup.kv_caches[l], metadata, out)
