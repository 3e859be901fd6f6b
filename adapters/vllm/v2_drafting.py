"""EAGLE and MTP drafting under Model Runner V2 (vllm/v1/worker/gpu/spec_decode/): the release's own
speculator drafts after a target step whose inputs V2 prepared (v2_runner.V2Inputs), its draft
layers the stand-in model of eagle_drafting.py, the kernels recorded.

Where it sits: fake_runner.Setup + v2_runner.V2Inputs (the target step) -> eagle_drafting.record
(recorder, layers, draft model, the pass checks) -> **v2_drafting.py** (V2's speculator and what the
runner hands it) -> recorder.py.

What runs unchanged (0.33.0 lines, target_dependent_ar/speculator.py unless named; 0.27.1 and 0.28.0
have the same steps in autoregressive/speculator.py: docs/vllm.md "Drafting under Model Runner V2"):
- `init_speculator` (spec_decode/__init__.py:14-94) picks the class for the draft model SPECULATORS
  configures (--v2-speculator): EagleSpeculator for method "eagle", MTPSpeculator for method "mtp" with
  one next-n layer (the release's own SpeculativeConfig predicates decide; mtp/speculator.py: EAGLE's
  loop plus its hooks); its __init__ (DraftModelSpeculator's in speculator.py, then the class's),
  `set_attn` (speculator.py:287-310:
  init_attn_backend over the KV-cache groups: the draft layers' attention groups and the release's
  builders; whether every builder refreshes decode metadata in place, :312-327 and :82-87),
  `init_cudagraph_manager` (:89-107) in the engine's CUDA-graph mode and `capture` (:109-162), the
  graphs emulated (v2_draft_graph.py).
- `get_num_sampled_and_rejected` (input_batch.py:516-562, a Triton kernel): after the target step's
  rejection sampler, num_rejected = the row's logits less what it sampled (a verify row of D tokens
  whose accept kept a: D - a; any other row 1 - 1).
- `propose` (:165-371): `prepare_prefill_inputs` (Triton, :686-804: each row's last accepted token),
  the draft prefill over the target step's own attention metadata and slot mappings (pass 0,
  :277-294), `prepare_decode_inputs` (Triton, :808-887: position = the last accepted + 1, seq_len =
  target seq_len - rejected + 1), then the decode steps, pass u for u = 1 .. k - 1. Where every
  draft builder refreshes decode metadata in place (FlashAttention with one DCP rank,
  flash_attn.py:741 and :1035-1053; Triton without rswa, triton_attn.py:214; from 0.28.0)
  `_fused_multi_step_decode` (:544-595) builds the metadata once (`_build_attn_metadata`,
  speculator.py:329-406: the target step's gathered block tables, the draft's seq_lens buffer,
  max_seq_len min(max upper bound + k, max_model_len)) and `_generate_fused_drafts` (:597-632)
  recomputes each step's slot mapping in place (`compute_slot_mappings`, Triton) and calls the
  builders' `update_draft_decode_metadata`; else (0.27.1: always) `_multi_step_decode` (:492-542)
  rebuilds both each step. `update_draft_inputs` (Triton, :891-994) advances positions and seq_lens,
  clamped at max_model_len.
kvfuzz's draft_decode (draft_q_only under Gemma4Speculator) step u is V2's decode pass u + 1 (pass 0 is the
draft prefill), draft_extend_v2 the draft prefill.

Re-expressed (a bug there is not found): the target step's attention metadata and slot mappings by
layer (each group's builder over V2's CommonAttentionMetadata, as build_attn_metadata does), the
InputBatch fields propose reads, the valid sampled counts (the history's accept), prefill_len (kvfuzz
has no prompt lengths: no row is still chunk-prefilling), the configuration fields __init__ reads, the
target model class (get_model_cls: a Llama without get_mtp_target_hidden_states), one rank (the
pipeline-parallel group the graph managers ask), MTPSpeculator's share_mtp_topk_indices (False, as
load_draft_model leaves it for a draft without index_share_for_mtp_iteration).
Gemma4Speculator (--v2-speculator gemma4): advance_draft_positions False (gemma4/speculator.py:48-53), so
every decode pass is one query at the last verified position writing nothing, kvfuzz's draft_q_only
(docs/vllm.md "Gemma-4's drafting steps"); its load_draft_model (the KV sharing) is not run.
Not modelled: a FULL draft-prefill graph (unsupported: v2_draft_graph.py), the other speculators
(multi-module MTP, DFlash, n-gram, standalone draft models, ...), DP/PCP/DCP, multimodal
drafts, adaptive verification.

    Drafter(vl, setup, builders).propose(model, layer_names)   # builders {gid: builder}; model: _DraftModel
"""
import importlib
import importlib.util
import inspect
import types

import numpy as np
import torch

import v2_draft_graph
import v2_graph
import v2_runner


class _Speculator(types.SimpleNamespace):
    """A draft model as vLLM's speculative config describes it, and the class init_speculator builds."""


# --v2-speculator: the draft model, configured as vLLM configures it (config/speculative.py), and the
# class V2's init_speculator (spec_decode/__init__.py) picks for it. EAGLE: a Llama EAGLE head. MTP: a
# DeepSeek-V3-style MTP module (method "mtp", one next-n layer: use_multi_module_mtp() is false, so
# MTPSpeculator, the EAGLE loop of TargetDependentARSpeculator / AutoRegressiveSpeculator with its
# hooks; share_mtp_topk_indices stays False, as load_draft_model leaves it for a draft without
# index_share_for_mtp_iteration).
SPECULATORS = {
    "eagle": _Speculator(method="eagle", architecture="LlamaForCausalLMEagle", hf_config={}, cls="EagleSpeculator"),
    "mtp": _Speculator(method="mtp", architecture="DeepSeekMTPModel", cls="MTPSpeculator",
                       hf_config=dict(model_type="deepseek_mtp", num_nextn_predict_layers=1)),
    # Gemma-4's MTP assistant (method mtp, a gemma4_mtp draft config: use_gemma4_mtp(), 0.33.0
    # config/speculative.py:2100-2106; spec_decode/__init__.py:59-64): Gemma4Speculator, whose
    # advance_draft_positions is False (gemma4/speculator.py:49-53): every decode step one query at the
    # last verified position, its layers sharing the target's KV (load_draft_model's
    # _setup_gemma4_kv_sharing, :96-171; not run: the stand-in layers write nothing). kvfuzz's
    # draft_q_only; its draft prefill is draft_extend_v2.
    "gemma4": _Speculator(method="mtp", architecture="Gemma4MTPModel", cls="Gemma4Speculator",
                          hf_config=dict(model_type="gemma4_mtp")),
}
# the speculator that runs each drafting mode's steps: draft_q_only only Gemma-4's, draft_decode every other
Q_ONLY = {"gemma4"}


class Drafter:
    """V2's speculator for the case, its attention set up over the runner's block tables."""

    def __init__(self, vl, setup, builders):
        self.vl, self.setup, self.builders = vl, setup, builders
        if importlib.util.find_spec("vllm.v1.worker.gpu.spec_decode.speculator") is None:
            from fake_runner import UnsupportedCase

            raise UnsupportedCase(f"drafting under vLLM {vl.version}'s Model Runner V2: its EagleSpeculator "
                                  "(vllm/v1/worker/gpu/spec_decode/eagle.py, one metadata build for every draft step) "
                                  "is not modelled; the adapter drives spec_decode/speculator.py's (0.27.1 on)")
        spec_decode = importlib.import_module("vllm.v1.worker.gpu.spec_decode")
        which = getattr(setup, "v2_speculator", "eagle")
        if setup.mode == "draft_q_only" and which not in Q_ONLY:
            from fake_runner import UnsupportedCase

            raise UnsupportedCase("draft_q_only is Gemma-4's drafting step (its layers share the target's KV): "
                                  "--v2-speculator gemma4 runs the Gemma4Speculator that takes it")
        if setup.mode == "draft_decode" and which in Q_ONLY:
            from fake_runner import UnsupportedCase

            raise UnsupportedCase("Gemma4Speculator keeps every decode step at the last verified position "
                                  "(advance_draft_positions False) and writes nothing: draft_q_only, not draft_decode")
        config = _view(setup.vllm_config, which)
        init = spec_decode.init_speculator
        args = dict(vllm_config=config, device=setup.device, req_states=None)
        self.speculator = init(**{k: v for k, v in args.items() if k in inspect.signature(init).parameters})
        picked, expected = type(self.speculator).__name__, SPECULATORS[which].cls
        if picked != expected:  # the release's init_speculator, not the adapter, picks the class
            raise RuntimeError(f"vLLM {vl.version}'s init_speculator picked {picked} for --v2-speculator {which}; "
                               f"vLLM configured for it picks {expected}")

    def propose(self, model, layer_names):
        import draft_groups

        s, v2, sp = self.setup, self.setup.v2, self.speculator
        sp.model = model
        sp.draft_attn_layer_names = set(layer_names)
        v2_runner.publish_backends(s, layer_names)
        # no KV-cache tensor packs blocks outermost: the kernel block size is the groups' common one
        kv_config = types.SimpleNamespace(**vars(draft_groups.kv_cache_config(s)), kv_cache_tensors=[])
        v2.persistent()  # start-up: the runner's persistent buffers, before the graphs are captured over them
        sp.set_attn(v2.model_state, kv_config, v2.tables, v2.buffers, [[]])
        for groups in sp.attn_groups:
            for group in groups:
                if getattr(group, "kernel_block_size", None) not in (None, s.page_size):
                    raise RuntimeError(f"V2's draft attention group {group.layer_names} splits block size "
                                       f"{s.page_size} into kernel blocks of {group.kernel_block_size}; "
                                       "the target step's do not")
        # one rank: the pipeline-parallel group the graph managers ask is the whole world
        cu = importlib.import_module("vllm.v1.worker.gpu.cudagraph_utils")
        cu.get_pp_group = lambda: types.SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1)
        self.graphs = v2_draft_graph.DraftGraphs(self.vl, s, sp, model)
        self.graphs.capture()
        target = self._target_metadata(layer_names)  # the target step: V2's inputs, each group's builder
        batch = self._input_batch()
        num_sampled, num_rejected = self._verdict(batch)
        args = dict(input_batch=batch, attn_metadata=target["metadata"], slot_mappings=target["slots"],
                    last_hidden_states=torch.zeros(s.num_tokens, sp.hidden_size, dtype=s.dtype, device=s.device),
                    aux_hidden_states=None, num_sampled=num_sampled, num_rejected=num_rejected,
                    last_sampled=torch.zeros(sp.max_num_reqs, dtype=torch.int64, device=s.device),
                    next_prefill_tokens=torch.zeros(sp.max_num_reqs, dtype=torch.int32, device=s.device),
                    temperature=torch.zeros(sp.max_num_reqs, dtype=torch.float32, device=s.device),
                    seeds=torch.zeros(sp.max_num_reqs, dtype=torch.int64, device=s.device),
                    num_speculative_tokens=sp.num_speculative_steps)
        params = inspect.signature(sp.propose).parameters
        sp.propose(**{k: v for k, v in args.items() if k in params})

    def _target_metadata(self, layer_names):
        """The target step's attention metadata by layer (each attention group's builder over the
        CommonAttentionMetadata V2 prepared: its slot mapping checked against kvfuzz's writes) and its
        slot mappings by layer, as execute_model hands propose."""
        s = self.setup
        metadata, slots = {}, {}
        for g in s.groups:
            common = s.common_metadata(g)
            built = self.builders[g.gid].build(common_prefix_len=0, common_attn_metadata=common)
            for l in g.layer_ids:
                metadata[f"layers.{l}"] = built
                slots[f"layers.{l}"] = common.slot_mapping
        return {"metadata": metadata, "slots": slots}

    def _input_batch(self):
        """The InputBatch fields propose reads, from the target step V2 prepared (its buffers)."""
        s, v2 = self.setup, self.setup.v2
        n, dev = s.bs, s.device
        b = v2.buffers
        qsl = b.query_start_loc[: n + 1]
        upper = torch.from_numpy(s.seq_lens.astype(np.int32))
        prefill = v2_graph.any_prefill(s)
        return types.SimpleNamespace(
            num_reqs=n, num_tokens=s.num_tokens, num_tokens_after_padding=s.num_tokens,
            num_scheduled_tokens=s.query_lens.astype(np.int32), seq_lens_cpu_upper_bound=upper,
            idx_mapping=torch.from_numpy(s.rows.astype(np.int32)).to(dev),
            input_ids=torch.zeros(max(s.num_tokens, 1), dtype=torch.int32, device=dev),
            positions=b.positions[: s.num_tokens], query_start_loc=qsl, seq_lens=b.seq_lens[:n],
            decode_graph_eligible=not prefill, has_prefill=prefill, has_structured_output_reqs=False)

    def _verdict(self, batch):
        """num_sampled and num_rejected as V2's get_num_sampled_and_rejected leaves them after the
        target step's sampling: a verify row (setup.valid) sampled its valid count of its D logits,
        any other row one of one."""
        s = self.setup
        ib = importlib.import_module("vllm.v1.worker.gpu.input_batch")
        valid = getattr(s, "valid", None) or [None] * s.bs
        logits = np.array([int(q) if v is not None else 1 for q, v in zip(s.query_lens, valid)], np.int32)
        cu = np.zeros(s.bs + 1, np.int32)
        np.cumsum(logits, out=cu[1:])
        sampled = torch.tensor([v if v is not None else 1 for v in valid], dtype=torch.int32, device=s.device)
        prefill_len = torch.zeros(self.speculator.max_num_reqs, dtype=torch.int32, device=s.device)
        return ib.get_num_sampled_and_rejected(sampled, batch.seq_lens, torch.from_numpy(cu).to(s.device),
                                               batch.idx_mapping, prefill_len)


def _view(config, which):
    """The VllmConfig the speculator is built with: the runner's namespaces, a field they do not hold
    reading None (v2_runner.config_view: watermarks, ubatching, adaptive verification, ... off); the
    speculative config as vLLM fills it for the draft model of `which` (SPECULATORS: its method, the
    draft's architecture and model type), with the release's own SpeculativeConfig predicates bound to it
    (use_eagle, use_gemma4_mtp, use_multi_module_mtp, ...: what init_speculator asks); the fields
    DraftModelSpeculator's __init__ reads; the target model class _target_feeds_hc_residual asks
    about (a Llama: no get_mtp_target_hidden_states)."""
    from eagle_drafting import HIDDEN

    view = v2_runner.config_view(config)
    drafter = SPECULATORS[which]
    spec_cls = importlib.import_module("vllm.config.speculative").SpeculativeConfig
    predicates = {n: f for n, f in vars(spec_cls).items()
                  if inspect.isfunction(f) and n.startswith(("use_", "uses_", "is_", "needs_"))}
    fields = {k: v for k, v in vars(view.speculative_config).items() if k not in predicates}  # the release's, not ours
    spec = type("SpeculativeConfigView", (v2_runner._Unset,), predicates)(**fields)
    spec.method = drafter.method
    hf_config = types.SimpleNamespace(architectures=[drafter.architecture], **drafter.hf_config)
    spec.draft_model_config = v2_runner._Unset(**dict(vars(spec.draft_model_config), hf_config=hf_config),
                                               get_vocab_size=lambda: 4, architectures=[drafter.architecture])
    view.speculative_config = spec
    m = view.model_config
    m.get_vocab_size, m.get_hidden_size, m.head_dtype = (lambda: 4), (lambda: HIDDEN), torch.float32
    view.parallel_config.data_parallel_size = 1
    view.parallel_config.data_parallel_rank = 0
    mod = importlib.import_module("vllm.v1.worker.gpu.spec_decode.speculator")
    if hasattr(mod, "_target_feeds_hc_residual"):
        mod._target_feeds_hc_residual = lambda vllm_config: False
    return view
