"""Model Runner V2's CUDA graphs (vllm/v1/worker/gpu/cudagraph_utils.py): which mode a step runs in,
the dummy batch a FULL graph is captured with, and the replay's refill of the persistent buffers.

Where it sits: v2_runner.V2Inputs (the step's persistent buffers) -> **v2_graph.py** -> the
CommonAttentionMetadata attention_run.capture_and_replay hands the release's builders, as on the
V1 path (the plan-run property compares what the captured calls hold after the replay's build with
an eager run of the replay's metadata).

What runs unchanged (0.33.0 lines; 0.27.1 and 0.28.0 have the same calls):
- the mode (resolve_mode): V2's start-up resolution, init_attn_backend's weakest support, then
  `CompilationConfig.resolve_cudagraph_mode_and_sizes(..., use_v2_model_runner=True)` (config/compilation.py:1376).
- dispatch: `CudaGraphManager._init_candidates` (cudagraph_utils.py:256-394) over the capture sizes,
  then `dispatch` (:523-553) with the step's num_reqs, tokens, uniform token count and max query
  length, as model_runner.py:1832-1848 asks it (through dp_utils.dispatch_cg_and_sync_dp, one rank).
- capture: `prepare_inputs_to_capture` (cudagraph_utils.py:827-907): `InputBatch.make_dummy` over
  the runner's InputBuffers (input_batch.py:135-200: seq_len = query_len per row, padded seq_lens 0,
  query_start_loc padded with num_tokens), `BlockTables.get_dummy_block_tables` (the persistent
  tables, zeroed) and `get_dummy_slot_mappings` (PAD_SLOT_ID), then the release's
  `DefaultModelState.prepare_attn(..., CUDAGraphMode.NONE, for_capture=True)` (max_seq_len =
  max_model_len; each builder's build_for_cudagraph_capture).
- replay: `prepare_pos_seq_lens` and the block-table gather and slot mapping write the same
  InputBuffers and BlockTables in place; `prepare_attn(..., CUDAGraphMode.FULL)` builds with the
  padded sizes (desc.num_reqs rows, desc.num_tokens tokens).
Re-expressed (a bug there is not found): CudaGraphManager.__init__'s fields (its constructor asks the
pipeline-parallel group and the platform's graph pool), the query_start_loc the runner's
prepare_inputs writes (model_runner.py:1461-1484: cumsum, padded with num_tokens), whether a row
prefills (what the release's uniform-token-count rule asks from 0.28.0 on: kvfuzz has no prompt
lengths, so a row prefills where it has more than one token outside a verify step, or no cached
context; the rule itself is the release's), the capture's warm-up pass (V2 builds the capture
metadata twice, cudagraph_utils.py:464-482: warm-up, then the captured pass; the adapter builds it
once).

    v2_graph.resolve_mode(vl, setup)         # the engine's mode: "FULL_AND_PIECEWISE", "PIECEWISE", ...
    desc = v2_graph.dispatch(vl, setup)      # desc.cg_mode.name: "FULL", "PIECEWISE" or "NONE"
    v2_graph.capture_inputs(inputs, desc, [[keep] for keep in groups], kv_cache_config)  # each keeps its common
"""
import importlib
import inspect
import types

import numpy as np
import torch


def resolve_mode(vl, setup):
    """The CUDA-graph mode V2 settles on at start-up (initialize_kv_cache, 0.33.0 model_runner.py:756-765,
    0.28.0 :576-585, 0.27.1 :499-507): init_attn_backend over the case's KV-cache groups gives the
    weakest support of its attention groups (AttentionCGSupportInfo; the default model state adds
    none), then the release's CompilationConfig.resolve_cudagraph_mode_and_sizes with
    use_v2_model_runner=True, from vLLM's default FULL_AND_PIECEWISE under VLLM_COMPILE (attention
    splits the graph; the model compiled, so piecewise capture is available). Sets the config's mode
    and returns its name."""
    from v2_runner import _Unset, config_view, publish_backends

    attn_utils = importlib.import_module("vllm.v1.worker.gpu.attn_utils")
    compilation = importlib.import_module("vllm.config.compilation")
    config = setup.vllm_config
    comp = config.compilation_config
    publish_backends(setup, [f"layers.{l}" for l in range(len(setup.layers_spec))])
    kv_config = types.SimpleNamespace(kv_cache_groups=setup.kv_groups, kv_cache_tensors=[])
    support = attn_utils.init_attn_backend(kv_config, config_view(config), setup.device)[1]
    view = _Unset(cudagraph_mode=vl.cudagraph_mode("FULL_AND_PIECEWISE"), mode=compilation.CompilationMode.VLLM_COMPILE,
                  splitting_ops_contain_attention=lambda: True, use_inductor_graph_partition=False,
                  cudagraph_capture_sizes=list(comp.cudagraph_capture_sizes),
                  max_cudagraph_capture_size=max(comp.cudagraph_capture_sizes or [0]))
    fn = compilation.CompilationConfig.resolve_cudagraph_mode_and_sizes
    known = dict(min_cg_support=support.min_cg_support, min_cg_attn_backend=support.min_cg_attn_backend,
                 uniform_decode_query_len=setup.uniform_query_len, use_v2_model_runner=True, tensor_parallel_size=1,
                 kv_cache_config=None, max_num_reqs=config.scheduler_config.max_num_seqs, is_profiling=False,
                 piecewise_capture_available=True)
    mode = fn(view, **{k: v for k, v in known.items() if k in _params(fn)})
    comp.cudagraph_mode = mode
    return mode.name


def dispatch(vl, setup):
    """The BatchExecutionDescriptor V2's CudaGraphManager gives the step (its cg_mode's name is the
    mode), over the adapter's compilation config (capture sizes, resolved mode)."""
    cu = importlib.import_module("vllm.v1.worker.gpu.cudagraph_utils")
    config = setup.vllm_config
    comp = config.compilation_config
    manager = cu.CudaGraphManager.__new__(cu.CudaGraphManager)
    from v2_runner import _Unset

    spec = config.speculative_config  # dynamic speculative decoding: vLLM's default, off
    view = _Unset(**dict(vars(config), cache_config=_Unset(**vars(config.cache_config)), speculative_config=spec and
                         _Unset(**vars(spec), uses_dynamic_speculative_decoding=lambda: False)))
    fields = dict(vllm_config=view, device=setup.device, max_num_reqs=config.scheduler_config.max_num_seqs,
                  compilation_config=comp, cudagraph_mode=comp.cudagraph_mode,
                  decode_query_len=setup.uniform_query_len, varlen_decode=False, ubatch_runner=None,
                  lora_capture_cases=[0], graphs={}, _candidates={}, _capture_descs={}, _graphs_captured=False,
                  use_breakable_cg=False, dp_size=1, tp_size=1)
    for name, value in fields.items():
        try:
            setattr(manager, name, value)
        except AttributeError:  # 0.33: dp_size is a property over parallel_config
            pass
    manager._lora_dispatch_map, manager._max_lora_case = manager._build_lora_dispatch_map()
    if comp.max_cudagraph_capture_size is None:
        comp.max_cudagraph_capture_size = max(comp.cudagraph_capture_sizes or [0])
    if comp.cudagraph_mode.name != "NONE":
        manager._init_candidates()
    manager._graphs_captured = True  # capture_model() ran at start-up
    n, tokens = setup.bs, int(setup.num_tokens)
    max_query = int(setup.query_lens.max()) if n else 0
    uniform = _uniform_token_count(cu, n, tokens, max_query, any_prefill(setup)) if n else None
    kwargs = {"max_query_len": max_query} if "max_query_len" in _params(manager.dispatch) else {}
    return manager.dispatch(n, tokens, uniform, 0, **kwargs)


def any_prefill(setup):
    """Whether a row of the step prefills (0.33.0 decode_graph_eligible, model_runner.py:1355-1367: a
    one-token step over cached context counts as a decode; 0.28.0 has_prefill). kvfuzz has no prompt
    lengths, so a row prefills where it has more than one token outside a verify (the step's, or a
    drafting step's target step's rows that verified: setup.valid; is_prefilling, v2_runner.py) or
    no context yet."""
    computed = setup.seq_lens - setup.query_lens
    verify = np.array([v is not None for v in getattr(setup, "valid", None) or [None] * setup.bs], bool)
    return bool((((setup.query_lens > 1) & (setup.mode != "target_verify") & ~verify) | (computed == 0)).any())


def _uniform_token_count(cu, n, tokens, max_query, prefilling):
    """The release's own rule: 0.27.1 every row of one length (cudagraph_utils.get_uniform_token_count);
    0.28.0 and no prefill (worker/utils.py get_uniform_decode_token_count(..., has_prefill)); 0.33.0
    and decode_graph_eligible (the same function, its fourth argument)."""
    utils = importlib.import_module("vllm.v1.worker.utils")
    fn = getattr(utils, "get_uniform_decode_token_count", None)
    if fn is None:
        return cu.get_uniform_token_count(n, tokens, max_query)
    params = _params(fn)
    if "has_prefill" in params:
        return fn(n, tokens, max_query, has_prefill=prefilling)
    return fn(n, tokens, max_query, not prefilling)


def _params(fn):
    return inspect.signature(fn).parameters


def model_state(inputs):
    """The runner's model state where the metadata path needs it: the release's
    DefaultModelState.prepare_attn, bound to the fields it reads (max_model_len; no multimodal inputs)."""
    from v2_runner import _Unset

    default = importlib.import_module("vllm.v1.worker.gpu.model_states.default").DefaultModelState
    view = _Unset(max_model_len=int(inputs.setup.r2t.shape[1]), supports_mm_inputs=False, encoder_cache=None)
    view.prepare_attn = types.MethodType(default.prepare_attn, view)
    return view


def capture_inputs(inputs, desc, attn_groups, kv_cache_config):
    """V2's prepare_inputs_to_capture for desc over inputs' persistent buffers and block tables: the
    dummy batch, the zeroed tables, PAD slots, each group's capture metadata (handed to attn_groups)."""
    cu = importlib.import_module("vllm.v1.worker.gpu.cudagraph_utils")
    params = _params(cu.prepare_inputs_to_capture)
    known = dict(num_reqs=desc.num_reqs, num_tokens=desc.num_tokens, model_state=inputs.model_state,
                 input_buffers=inputs.buffers, block_tables=inputs.tables, attn_groups=attn_groups,
                 kv_cache_config=kv_cache_config, full_cudagraph=True,
                 max_query_len=getattr(desc, "max_query_len", None) or desc.uniform_token_count)
    cu.prepare_inputs_to_capture(**{k: v for k, v in known.items() if k in params})


def replay_batch(inputs, desc, idx_mapping, qsl_np, block_tables, slot_mappings, upper, is_prefilling):
    """The InputBatch fields prepare_attn reads for a FULL replay of desc (model_runner.py:1540-1590):
    padded request and token counts, the persistent query_start_loc and seq_lens."""
    from v2_runner import _Unset

    s, b = inputs.setup, inputs.buffers
    npad = desc.num_reqs
    return _Unset(num_reqs=s.bs, num_reqs_after_padding=npad, num_tokens=s.num_tokens,
                  num_tokens_after_padding=desc.num_tokens, query_start_loc=b.query_start_loc[: npad + 1],
                  query_start_loc_np=qsl_np[: npad + 1], num_scheduled_tokens=s.query_lens.astype(np.int32),
                  seq_lens=b.seq_lens[:npad], seq_lens_cpu_upper_bound=upper, positions=b.positions[: desc.num_tokens],
                  is_prefilling_np=is_prefilling, idx_mapping=idx_mapping, idx_mapping_np=s.rows.astype(np.int64),
                  block_tables=block_tables, slot_mappings=slot_mappings)


def padded_upper_bound(upper, npad):
    """seq_lens_cpu_upper_bound over the padded rows (padded entries 0, model_runner.py:1535-1542)."""
    out = torch.zeros(npad, dtype=torch.int32)
    out[: len(upper)] = upper
    return out
