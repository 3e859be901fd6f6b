"""Which CUDA-graph runtime mode a step runs in: the release's own CudagraphDispatcher decides.

Where it sits: attention_run.record (the mode resolved from the builders' support, the cascade
decided) -> **runtime_mode** -> a FULL graph's capture and replay, or eager attention.

The runner (gpu_model_runner.py; re-expressed here: importing it needs the whole engine) makes one
CudagraphDispatcher (vllm/v1/cudagraph_dispatcher.py, the release's, run unchanged), initializes its
keys with the resolved mode and uniform_decode_query_len once the backends are up, and asks it for
each step with the batch's token count, whether the batch is a uniform decode (max_query_len ==
uniform_decode_query_len and every row that long) and, where the release's runner passes it,
whether the step runs cascade attention. That last argument is the release's own call, read from
each runner's call site:
  0.10.2, 0.11.0      dispatch(BatchDescriptor(num_input_tokens, uniform_decode)): no cascade
                      argument, so a cascade step of a captured size replays a FULL graph
  0.11.1, 0.12        dispatch(descriptor, use_cascade_attn=cascade_attn_prefix_lens is not None)
  0.13 to 0.21        dispatch(num_tokens, uniform_decode, has_lora, disable_full=use_cascade_attn or ...)
  0.22 on             dispatch(..., invalid_modes={FULL} if use_cascade_attn or ...)
  (0.33.0 removed cascade attention: the flag is always false there.)
The step's token count before 0.13 is the runner's padded num_input_tokens (pad_for_cudagraph up to
the largest capture size); from 0.13 the dispatcher pads itself.

    mode = runtime_mode(vl, setup, cascade=True)   # "FULL", "PIECEWISE" or "NONE"
"""
import importlib
import inspect
import sys
import types


def runtime_mode(vl, setup, cascade):
    """The runtime mode (its name) the release's dispatcher gives this step; NONE where the engine
    runs without CUDA graphs (setup.vllm_config's cudagraph_mode NONE)."""
    config = setup.vllm_config
    comp = config.compilation_config
    mode = comp.cudagraph_mode
    if mode.name == "NONE" or not comp.cudagraph_capture_sizes:
        return "NONE"
    if setup.v2 is not None:  # Model Runner V2: its CudaGraphManager dispatches (v2_graph.py)
        return setup.v2.runtime_mode()
    dispatcher = _dispatcher(vl, config)
    dispatcher.initialize_cudagraph_keys(mode, setup.uniform_query_len)
    tokens = int(setup.total_tokens)
    max_query = int(setup.query_lens.max()) if len(setup.query_lens) else 0
    uniform = max_query == setup.uniform_query_len and int(setup.num_tokens) == setup.bs * max_query
    params = inspect.signature(dispatcher.dispatch).parameters
    if "batch_descriptor" in params:  # 0.10, 0.11: the runner pads, then describes the batch
        descriptor = vl.forward_context.BatchDescriptor(num_tokens=_padded(comp, tokens), uniform_decode=uniform)
        extra = {"use_cascade_attn": cascade} if "use_cascade_attn" in params else {}
        got, _ = dispatcher.dispatch(descriptor, **extra)
    else:
        extra = {}
        if "disable_full" in params:
            extra["disable_full"] = cascade
        elif "invalid_modes" in params:
            extra["invalid_modes"] = {vl.cudagraph_mode("FULL")} if cascade else None
        got, _ = dispatcher.dispatch(num_tokens=tokens, uniform_decode=uniform, has_lora=False, **extra)
    return got.name


def _padded(comp, tokens):
    """The runner's num_input_tokens up to 0.12: the smallest capture size that holds the step's
    tokens (VllmConfig.pad_for_cudagraph), the tokens themselves past the largest."""
    sizes = sorted(comp.cudagraph_capture_sizes)
    return next((s for s in sizes if s >= tokens), tokens)


def _dispatcher(vl, config):
    """The release's CudagraphDispatcher over the adapter's configuration, with what it reads there:
    attention compiled piecewise (FlashAttention's default, VLLM_COMPILE with attention splitting
    the graph), no LoRA, no compile sizes. From 0.2x the module imports vllm.lora.utils for LoRA
    capture counts, whose package pulls in the MoE layers: a stand-in that refuses LoRA takes its
    place where the real one does not import."""
    comp = config.compilation_config
    compilation = importlib.import_module("vllm.config.compilation")
    levels = getattr(compilation, "CompilationLevel", None)  # up to 0.11.0; CompilationMode after
    modes = getattr(compilation, "CompilationMode", None)
    comp.level = levels.PIECEWISE if levels is not None else None
    comp.mode = modes.VLLM_COMPILE if modes is not None else None
    comp.is_attention_compiled_piecewise = comp.splitting_ops_contain_attention = lambda: True
    for name, value in dict(splitting_ops=[], compile_sizes=[], cudagraph_specialize_lora=False,
                            max_cudagraph_capture_size=max(comp.cudagraph_capture_sizes)).items():
        if getattr(comp, name, None) is None:
            setattr(comp, name, value)
    if not hasattr(config, "pad_for_cudagraph"):  # 0.13 to 0.21 ask the config
        config.pad_for_cudagraph = lambda n: _padded(comp, n)
    try:
        module = importlib.import_module("vllm.v1.cudagraph_dispatcher")
    except (ImportError, AssertionError):
        stand_in = types.ModuleType("vllm.lora.utils")

        def get_captured_lora_counts(*args, **kwargs):
            raise NotImplementedError("LoRA CUDA graphs are not modelled by kvfuzz")

        stand_in.get_captured_lora_counts = get_captured_lora_counts
        sys.modules["vllm.lora.utils"] = stand_in
        sys.modules.pop("vllm.v1.cudagraph_dispatcher", None)
        module = importlib.import_module("vllm.v1.cudagraph_dispatcher")
    return module.CudagraphDispatcher(config)
