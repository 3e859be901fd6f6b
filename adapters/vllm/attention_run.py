"""One vLLM step of one attention backend, its kernels recorded: the release's metadata builders
and every layer's forward, as gpu_model_runner runs them, eager or in a FULL CUDA graph.

Where it sits: fake_runner.py (the runner state) -> **attention_run.py** -> recorder.py (what each
kernel was handed) -> a family's conversion (flash_attn_page_table.py, triton_page_table.py).
Backend-agnostic: `module` is the backend's module (vllm.v1.attention.backends.flash_attn or
.triton_attn), whose kernels the recorder replaces; the builders and impls are its backend
class's (setup.backend); chunked groups run the ChunkedLocalAttention backend vLLM derives from it.
Where the batch's rows share prefix blocks and the backend runs cascade attention (FlashAttention's:
cascade.py), its builders get a common_prefix_len and each layer's two calls are merged; the
recorded calls say over which prefix (common_prefix_len).

    rec, full_graph = record(vl, setup, vl.flash_attn)
    rec.calls[0]       # layer 0's recorded kernel calls
"""
import torch

from cascade import cascade_prefix_len
from cudagraph_dispatch import runtime_mode
from fake_runner import UnsupportedCase
from layer_inputs import forward_inputs, publish_layers
from recorder import Recorder


def record(vl, setup, module, recorder=Recorder):
    """CUDA-graph batches as vLLM runs them: a FULL graph (capture with _dummy_run's batch, then the
    replay's metadata build over the same persistent buffers, the kernel reading what it was handed
    at capture) for a uniform decode batch (one token per request, or 1 + k in a verify step) where
    every builder supports one, else eager with padded tokens. Returns the recorder (its calls, plan-run disagreements reported on the case) and whether
    the batch ran in a FULL graph. recorder: the Recorder class (dcp.py's records DCP's kernels too)."""
    rec = recorder(setup)
    rec.install(module)
    config = setup.vllm_config
    impls = publish_layers(vl, setup, setup.backend.get_impl_cls(), [module, vl.utils])
    for impl in impls.values():
        _bind_kernel(impl, module)
    classes = {g.gid: setup.group_backend(g).get_builder_cls() for g in setup.groups}
    if setup.graph and setup.v2 is not None:  # Model Runner V2 resolves the mode its own way (v2_graph.py)
        setup.v2.resolve_mode()
    elif setup.graph:
        resolve_cudagraph_mode(vl, setup, classes)
    builders = {g.gid: classes[g.gid](g.spec, [f"layers.{l}" for l in g.layer_ids], config, setup.device)
                for g in setup.groups}
    prefix = {g.gid: cascade_prefix_len(module, setup, g, builders[g.gid], setup.cascade) for g in setup.groups}
    # the release's own dispatcher (cudagraph_dispatch.py): FULL for a uniform batch of a captured size,
    # a cascade step included where the release's runner does not tell it of the cascade (0.10, 0.11.0)
    full_graph = setup.graph and runtime_mode(vl, setup, any(prefix.values())) == "FULL"
    if any(prefix.values()) and setup.total_tokens != setup.num_tokens and not full_graph:
        raise UnsupportedCase("cascade attention in a padded CUDA-graph batch run eagerly: the adapter's "
                              "num_actual_tokens counts the padded tokens, vLLM's does not")
    setup.padded_rows = setup.padded_bs if full_graph else setup.bs
    setup.buffers()
    if full_graph:
        replays = capture_and_replay(setup, builders, rec, lambda g, metadata: _layers(setup, rec, impls, g, metadata),
                                     prefix)
        _replay_agreement(setup, rec, impls, replays, module, prefix)
    else:
        for g in setup.groups:
            metadata = builders[g.gid].build(common_prefix_len=prefix[g.gid], common_attn_metadata=setup.common_metadata(g))
            _layers(setup, rec, impls, g, metadata)
            _tag_cascade(rec, g, metadata)
    rec.agree.report(setup.case)
    return rec, full_graph


def capture_and_replay(setup, builders, rec, run, prefix=None):
    """A FULL graph's two metadata builds over the same persistent buffers: capture with the dummy
    batch (each group's layers run by run(g, metadata) while rec.capturing: calls keep the tensors
    they were handed), then the replay's build (with the runner's common_prefix_len per group,
    `prefix`, where the release dispatches a cascade step to a FULL graph; the graph still runs the
    captured calls); rec.replayed() reads what those tensors hold now, which is what the graph's
    kernels read. Returns the replay's metadata per group (gid).

        replays = capture_and_replay(setup, builders, rec, lambda g, md: run_layers(g, md))"""
    rec.capturing = True
    for g in setup.groups:
        builder = builders[g.gid]
        common = setup.common_metadata(g, capture=True)
        capture = getattr(builder, "build_for_cudagraph_capture", None)
        run(g, capture(common) if capture else builder.build(common_prefix_len=0, common_attn_metadata=common))
    replays = {g.gid: builders[g.gid].build(common_prefix_len=(prefix or {}).get(g.gid, 0),
                                            common_attn_metadata=setup.common_metadata(g))
               for g in setup.groups}
    rec.replayed()
    return replays


def compare_replay(agree, captured, built, names):
    """Captured calls ({layer: [call]}, tensors as the replay left them) against an eager run's of the
    replay's metadata: every named index tensor must be equal (plan-run:<name>).

        compare_replay(rec.agree, rec.calls, eager.calls, ("page_table", "cache_seqlens"))"""
    where = "FULL CUDA graph replay: the captured buffer against the replay's build"
    for layer, calls in captured.items():
        for a, b in zip(calls, built.get(layer, [])):
            for name in names:
                if a[name].shape != b[name].shape or not torch.equal(a[name], b[name]):
                    agree.note(name, _brief(a[name]), _brief(b[name]), layer, where)


def _tag_cascade(rec, g, metadata):
    """A cascade's layers made two calls each, merged: the plan's group says over which prefix
    (FaGroup.common_prefix_len, FAMILIES.md)."""
    prefix = int(getattr(metadata, "common_prefix_len", 0) or 0) if getattr(metadata, "use_cascade", False) else 0
    for l in g.layer_ids:
        if prefix and rec.merges.get(l, 0) != 1:
            raise RuntimeError(f"layer {l}: a cascade step merged {rec.merges.get(l, 0)} times")
        for c in rec.calls.get(l, []):
            c["common_prefix_len"] = prefix


def _replay_agreement(setup, rec, impls, replays, module, prefix=None):
    """A FULL graph is the plan step, its replay the run step: the kernel reads the buffers it was
    handed at capture, so the replay's metadata build must leave in them what it built. Each layer's
    forward runs again, eagerly, on the replay's metadata (a second recorder sharing the schedules);
    every index tensor a captured call holds after the replay must equal the eager call's
    (plan-run:page_table, :cache_seqlens, :cu_seqlens_q; vllm#26034's local virtual batches).
    A cascade replay (prefix) has no eager twin of the graph's one call per layer (eagerly its
    metadata runs two calls, merged); what the graph reads is the plan, and the FA3 schedule its
    kernel was handed is checked against it (Recorder.replayed)."""
    if any((prefix or {}).values()):
        return
    eager = Recorder(setup)
    eager.schedules, eager.agree = rec.schedules, rec.agree
    eager.install(module)
    for g in setup.groups:
        _layers(setup, eager, impls, g, replays[g.gid])
    rec.install(module)
    compare_replay(rec.agree, rec.calls, eager.calls, ("page_table", "cache_seqlens", "cu_seqlens_q"))


def _brief(t):
    values = t.flatten().tolist()
    return f"{list(t.shape)} {values[:12]}{' ...' if len(values) > 12 else ''}"


def resolve_cudagraph_mode(vl, setup, classes):
    """The CUDA-graph mode vLLM settles on before it builds the builders (_check_and_update_cudagraph_mode):
    FULL_AND_PIECEWISE, the default, while every builder class supports some FULL graph;
    PIECEWISE (attention outside the graphs: eager, padded tokens) where one answers NEVER, as
    ChunkedLocalAttention's does, or, with spec decode (uniform_decode_query_len 1 + k > 1), where
    one supports less than UNIFORM_BATCH. FULL graphs then run uniform decode batches only.
    Returns whether FULL graphs stay on."""
    groups = {g.gid: g for g in setup.groups}
    least = min(vl.cudagraph_support(cls, setup.vllm_config, groups[gid].spec).value for gid, cls in classes.items())
    cg = vl.AttentionCGSupport
    full = least >= (cg.UNIFORM_BATCH if setup.uniform_query_len > 1 else cg.UNIFORM_SINGLE_TOKEN_DECODE).value
    setup.vllm_config.compilation_config.cudagraph_mode = vl.cudagraph_mode("FULL_AND_PIECEWISE" if full else "PIECEWISE")
    return full


def _layers(setup, rec, impls, g, metadata):
    for l in g.layer_ids:
        rec.layer = l
        _forward(setup, impls[l], l, metadata)


def _bind_kernel(impl, module):
    """0.10's Triton impl binds its kernel at construction: point it at the module's, recorded."""
    if "unified_attention" in vars(impl):
        impl.unified_attention = lambda *args, **kwargs: module.unified_attention(*args, **kwargs)


def _forward(setup, impl, l, metadata):
    layer, q, k, v, out = forward_inputs(setup, l)
    impl.forward(layer, q, k, v, setup.kv_caches[l], metadata, out)
