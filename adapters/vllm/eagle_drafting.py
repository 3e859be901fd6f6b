"""vLLM's EAGLE drafting on FlashAttention and Triton: the release's own proposer
(vllm/v1/spec_decode/eagle.py; from 0.2x llm_base_proposer.py) drafts after a target step, a
stand-in draft model's attention layers run the backend's impl forward through vLLM's forward
context, and the kernels are recorded (recorder.py) for the pass kvfuzz's case is.

Where it sits: fake_runner.py (the runner state; target_step() below: the target step the proposer
drafts after) -> **eagle_drafting.py** (the proposer's passes) -> recorder.py -> vllm_page_table.py.
Under Model Runner V2 (setup.v2) the same recorder, layers, draft model and pass checks serve V2's
own speculator instead of the V1 runner's proposer (v2_drafting.py).

kvfuzz's modes as vLLM runs them (docs/vllm.md "EAGLE drafting"):
- draft_decode, topk 1, step u over a verified prefix S: iteration u of the proposer's drafting
  loop (build_for_drafting(draft_index=u + 1)): one query per request at position S + u, seq_len
  S + u + 1, its K/V written at out_cache_loc[b][0][u]. vLLM advances positions and seq_lens, clamps
  positions at max_model_len and recomputes the slot mapping from the block table itself
  (0.1x inline; later eagle_step_update_slot_mapping_and_metadata, a Triton kernel); all of it runs
  unchanged. The proposer drafts num_speculative_tokens = steps + 1 tokens after the target step the
  case's history says the request last took (its last extend or decode; or its last verify: D
  tokens, of which the accept op's path kept `len(path)`), with vLLM's default padded drafter batch
  (prepare_inputs_padded over every verified token, the rejected ones as padding; 0.10, which has
  none, prepare_inputs over the accepted ones).
- draft_extend_v2 (seq_len counts the new tokens): the proposer's first pass
  (build_for_drafting(draft_index=0)) over a target step of the case's extend tokens.
- draft_q_only, step u (Gemma-4's drafter, draft_groups.py / v2_drafting.py): loop iteration u as for
  draft_decode, but at the last verified position S - 1 every step, seq_len S, no write (its layers
  share the target's KV): positions checked, no slot.

Re-expressed runner code (a bug there is not found): the target step's batch (target_step), the
runner's padded-batch inputs to the proposer (valid sampled counts as prepare_next_token_ids_padded
returns them for the history's acceptance; cu_num_draft_tokens; 0.10's prepare_inputs call), the
configuration the proposer's __init__ reads and its runner's attention groups (_proposer). Layers in
more than one KV-cache group draft with the release's multi-group proposer (draft_groups.py: 0.23.0
on; before, vLLM asserts all drafting layers share one). Unsupported: tree drafting (fake_runner.py),
in 0.1x more than one attention group (its proposer builds every draft layer's metadata with attn_groups[0][0]'s builder),
multi-token drafting where the proposer refuses the backend's metadata (0.10's Triton). kvfuzz's
drafting layout fits the context, so the clamp at max_model_len runs but is never exercised.

    rec = record(vl, setup, vl.flash_attn)       # the recorded pass's kernel calls, rec.calls[layer]
"""
import importlib
import sys
import types
from dataclasses import fields

import numpy as np
import torch

import draft_groups

MODES = ("draft_decode", "draft_extend_v2", "draft_q_only")
LOOP_STEPS = ("draft_decode", "draft_q_only")  # a step of the drafting loop (pass draft_step + 1)
HIDDEN = 8  # the stand-in draft model's hidden size (no value reaches a kernel the plan reads)


def speculative_config(setup):
    """EAGLE with a chain of num_speculative_tokens drafts: the drafting step's steps + 1 (the first
    pass drafts token 1, loop iteration u token u + 2), or 1 for draft_extend_v2 (its first pass only)."""
    k = setup.draft_steps + 1 if setup.mode in LOOP_STEPS else 1
    ns = types.SimpleNamespace
    draft_model = ns(get_hidden_size=lambda: HIDDEN, get_inputs_embeds_size=lambda: HIDDEN, uses_mrope=False, uses_xdrope_dim=0,
                     hf_config=ns(architectures=["LlamaForCausalLMEagle"]), mrope_num_dims=3)
    return ns(num_speculative_tokens=k, method="eagle", parallel_drafting=False, use_eagle=lambda: True,
              speculative_token_tree=str([(0,) * (i + 1) for i in range(k)]), disable_padded_drafter_batch=False,
              draft_model_config=draft_model, enforce_eager=True, use_local_argmax_reduction=False,
              use_heterogeneous_vocab=False, rejection_sample_method="standard", draft_sample_method="greedy")


def target_step(setup):
    """The target step before a draft_decode step, per batch request from the case's history: the
    last op that grew it. An extend of n tokens (or a share of n, or a decode: n = 1) is a step of n
    tokens ending at S; a draft of D tokens whose accept kept `a` is a verify of D tokens from S - a
    (vLLM's k = D - 1 drafts; the tree's shape does not reach the drafter), a - 1 drafts accepted
    and a sampled token (valid count a), D - a rejected. Sets the runner's batch (query_lens,
    seq_lens, positions, the slots kvfuzz's cache holds for them: out_cache_loc) and setup.valid
    (valid sampled tokens per row, None where the row verified nothing), and setup.draft_slots
    (the drafting step's writes)."""
    c, n = setup.case, setup.bs
    S = c.array("seq_lens")[:n].astype(np.int64)  # the verified prefix
    ids = [int(x) for x in c.batch["request_ids"][:n]]
    last = _last_steps(c.info["history"], set(ids))
    steps = setup.draft_steps
    query, valid = np.zeros(n, np.int64), [None] * n
    for i, r in enumerate(ids):
        op = last.get(r)
        if op is None:
            raise _unsupported(f"request {r}: no step in the history grew it")
        if op[0] == "verify":
            D, a = op[1], op[2]
            query[i], valid[i] = D, a
        else:
            query[i] = op[1]
    start = S - np.array([v if v is not None else q for v, q in zip(valid, query)], np.int64)
    setup.query_lens, setup.seq_lens = query, start + query
    setup.positions = np.concatenate([np.arange(p, s) for p, s in zip(start, setup.seq_lens)]).astype(np.int64)
    setup.num_tokens = int(query.sum())
    setup.all_positions = setup.positions.copy()
    if setup.mode == "draft_q_only":  # every step one query at the last verified token, nothing written
        setup.draft_slots, setup.draft_positions, held = None, S - 1, S
    else:
        layout = c.array("out_cache_loc").astype(np.int64).reshape(-1, steps)  # [padded_bs * topk, steps]
        setup.draft_slots = layout[:n, setup.draft_step]
        setup.draft_positions = S + setup.draft_step
        held = S + steps
    r2t = setup.r2t
    if int(np.maximum(setup.seq_lens, held).max()) > r2t.shape[1]:
        raise _unsupported("the target step reaches past the case's max_context_len")
    # the target step's slots: its tokens' columns in kvfuzz's cache. A rejected token's column is one
    # the drafting layout allocated, or past it (columns S + steps on): kvfuzz's accept freed those
    # (its req_to_token there is stale, full_to_swa 0) while vLLM keeps the rejected tokens' blocks,
    # so they hold no slot of kvfuzz's (-1: not checked) and their pages are handed the null block
    # (held_lens; fake_runner._blocks): a read of them reads no key kvfuzz holds for the request.
    setup.held_lens = held  # draft_q_only: kvfuzz allocates nothing past the verified prefix
    setup.out_cache_loc = np.concatenate([np.where(np.arange(p, s) < h, r2t[int(row), p:s], -1) for row, p, s, h in
                                          zip(setup.rows, start, setup.seq_lens, setup.held_lens)]).astype(np.int64)
    setup.table_lens = np.maximum(setup.seq_lens, setup.held_lens)
    setup.valid = valid
    setup.token_order = np.arange(setup.num_tokens)


def _last_steps(history, wanted):
    """{request: ("tokens", n) | ("verify", D, a)}: the last op of each wanted request that grew it."""
    last, pending = {}, {}
    for op in history:
        r, kind = op.get("request"), op.get("op")
        if r not in wanted:
            continue
        if kind in ("extend", "share"):
            last[r] = ("tokens", int(op["len"]))
        elif kind == "decode":
            last[r] = ("tokens", 1)
        elif kind == "draft":
            pending[r] = len(op["parents"])
        elif kind == "accept":
            last[r] = ("verify", pending.pop(r), len(op["path"]))
        elif kind in ("admit", "free"):
            last.pop(r, None)
    return last


def _unsupported(message):
    from fake_runner import UnsupportedCase

    return UnsupportedCase(message)


def record(vl, setup, module):
    """The proposer drafting after the target step; returns the recorder holding the calls of the pass
    kvfuzz's case is (draft_decode step u: loop iteration u; draft_extend_v2: the first pass), its
    slot mapping checked against kvfuzz's writes. module: the backend's module (vl.flash_attn,
    vl.triton_attn), whose kernels are recorded."""
    import attention_run
    from layer_inputs import publish_layers
    from recorder import Recorder

    eagle = _eagle_module(vl)
    rec = Recorder(setup)
    rec.install(module)
    impls = publish_layers(vl, setup, setup.backend.get_impl_cls(), [module, vl.utils])
    for impl in impls.values():
        attention_run._bind_kernel(impl, module)
    # the drafter's passes run attention eagerly over the real tokens (its PIECEWISE graphs pad the
    # model's tokens only): a CUDA-graph case's padded tokens lie in no kernel row
    setup.total_tokens = setup.num_tokens
    setup.buffers()
    target_pass = setup.draft_step + 1 if setup.mode in LOOP_STEPS else 0
    model = _DraftModel(setup, impls, rec, target_pass, importlib.import_module("vllm.forward_context"))
    if setup.v2 is not None:  # Model Runner V2's speculator (v2_drafting.py)
        import v2_drafting

        v2_drafting.Drafter(vl, setup, _builders(vl, setup)).propose(model, _layer_names(setup))
    else:
        _propose_v1(vl, eagle, setup, model)
    if model.seen is None:
        raise RuntimeError(f"the proposer ran {model.passes} passes; kvfuzz's step is pass {target_pass}")
    _check_pass(setup, model.seen)
    if setup.mode in LOOP_STEPS:  # the loop keeps max_seq_len as a bound (0.2x on: not lowered by rejection)
        for calls in rec.calls.values():
            for c in calls:
                c["max_seqlen_k_upper_bound"] = True
    rec.agree.report(setup.case)
    return rec


def _propose_v1(vl, eagle, setup, model):
    """The V1 runner's proposer (EagleProposer, or draft_groups.py's) drafting after the target step."""
    proposer_cls = draft_groups.proposer_class(vl, eagle, setup)  # several KV-cache groups: draft_groups.py
    if not draft_groups.several(setup):
        common = setup.common_metadata(setup.groups[0])  # the target step's, slots checked against kvfuzz's
    proposer = _proposer(vl, eagle, setup, model, proposer_cls)
    if draft_groups.several(setup):  # each group's table and slots, as the runner hands them
        common = draft_groups.hand_groups(setup, proposer)
    _host_seq_lens(setup, common)
    model.returns_tuple = proposer.model_returns_tuple() if hasattr(proposer, "model_returns_tuple") else True
    allowed = getattr(proposer, "allowed_attn_types", None)  # 0.10 on CUDA: FlashAttention and TreeAttention
    metadata_name = setup.backend.__name__.replace("Backend", "Metadata")
    if allowed and proposer.num_speculative_tokens > 1 and metadata_name not in {c.__name__ for c in allowed}:
        raise _unsupported(f"vLLM {vl.version} drafts more than one token only with "
                           f"{sorted(c.__name__ for c in allowed)} (EagleProposer asserts it)")
    inputs = _propose_inputs(eagle, proposer, setup, common)
    with torch.inference_mode():
        proposer.propose(**inputs)


def _host_seq_lens(setup, common):
    """The host seq_lens (_seq_lens_cpu) the runner hands the proposer, re-expressed from
    gpu_model_runner's _build_attention_metadata. 0.20.0 to 0.29.0 (read: 0.28.0:2432-2446 and 2500-2502,
    0.27.1:2366-2379 and 2434-2436, 0.22.0:2264-2284): `seq_lens_cpu = optimistic_seq_lens_cpu[:n];
    seq_lens_cpu_upper_bound = seq_lens_cpu`, then `seq_lens_cpu = None` under async spec decode. With
    async scheduling (vLLM's default with EAGLE) it is None (construct leaves it so) and the
    seq_lens_cpu property copies seq_lens on first use; without (--no-async-scheduling) it is the upper
    bound's tensor itself, which the drafting loop then advances twice a step
    (vllm-sync-draft-seq-lens-cpu, known_issues.json). 0.15.0 to 0.19.1 hand a host tensor of
    their own, not aliased (0.18.1:1965 the seq_lens buffer's host half; 0.19.1:2167-2183
    optimistic_seq_lens_cpu, None under async). Releases without the
    field (up to 0.14.x: a seq_lens_cpu field, filled; 0.30.0 on: none) are left as built."""
    names = {f.name for f in fields(common)}
    if getattr(setup, "async_scheduling", True) or "_seq_lens_cpu" not in names:
        return
    if "seq_lens_cpu_upper_bound" in names:  # 0.20.0 (read: 0.20.0:2159-2160, 2176) to 0.29.0
        common._seq_lens_cpu = common.seq_lens_cpu_upper_bound
    else:  # 0.15.0 to 0.19.1: a host tensor of the runner's own (0.18.1:1965, 0.19.1:2167)
        common._seq_lens_cpu = common.seq_lens.clone()


def _eagle_module(vl):
    """vllm.v1.spec_decode.eagle (and llm_base_proposer), its model-loading imports stubbed: the
    proposer's metadata code is what runs, the draft model is _DraftModel."""
    vl.stub_packages("vllm.model_executor.models", "vllm.model_executor.model_loader", "vllm.model_executor.layers.fused_moe",
                     "vllm.v1.sample", "vllm.distributed.eplb", "vllm.v1.worker.gpu_input_batch")
    eagle = importlib.import_module("vllm.v1.spec_decode.eagle")
    vl._no_pinned_memory()
    return eagle


class _DraftModel(torch.nn.Module):
    """The draft model: on the recorded pass every layer's impl forward runs on the metadata vLLM's
    forward context holds for it (what the proposer built); returns inert hidden states (EAGLE's pair)."""

    def __init__(self, setup, impls, rec, target_pass, forward_context):
        super().__init__()
        self.setup, self.impls, self.rec, self.fc = setup, impls, rec, forward_context
        self.target_pass, self.passes, self.seen = target_pass, 0, None
        self.returns_tuple = True  # EAGLE's pair; the proposer's model_returns_tuple() where it has one
        self.inert = False  # a CUDA graph's capture pass (v2_draft_graph.py): no pass counted, no kernel run

    def forward(self, input_ids=None, positions=None, hidden_states=None, inputs_embeds=None, **kwargs):
        n = int(positions.shape[-1])
        if not self.inert and self.passes == self.target_pass:
            ctx = self.fc.get_forward_context()
            self.seen = {"positions": positions.clone(), "slots": {}, "metadata": {}}
            for l in sorted(self.impls):
                name = f"layers.{l}"
                metadata = ctx.attn_metadata[name]
                slots = (getattr(ctx, "slot_mapping", None) or {}).get(name, getattr(metadata, "slot_mapping", None))
                self.seen["slots"][l] = slots.clone()
                self.seen["metadata"][l] = metadata
                self.rec.layer = l
                layer, q, k, v, out = _inputs(self.setup, l, n)
                self.impls[l].forward(layer, q, k, v, self.setup.kv_caches[l], metadata, out)
        self.passes += 0 if self.inert else 1
        h = torch.zeros(n, HIDDEN, dtype=self.setup.dtype, device=self.setup.device)
        return (h, h) if self.returns_tuple else h

    def compute_logits(self, hidden_states, *sampling_metadata, **kwargs):  # MTP: spec_step_idx
        return torch.zeros(int(hidden_states.shape[0]), 4, device=hidden_states.device)


def _inputs(setup, l, n):
    from layer_inputs import forward_inputs

    layer, q, k, v, out = forward_inputs(setup, l)
    if q.shape[0] < n:
        pad = lambda t: torch.cat([t, t.new_zeros((n - t.shape[0],) + tuple(t.shape[1:]))])
        q, k, v, out = pad(q), pad(k), pad(v), pad(out)
    return layer, q[:n], k[:n], v[:n], out[:n]


def _proposer(vl, eagle, setup, model, cls):
    """The release's proposer `cls` (EagleProposer, or draft_groups.py's multi-group one; its own __init__,
    on the runner's namespace configuration with the fields it reads) over the runner's attention groups
    (0.1x reads runner.attn_groups) or its own (0.2x on: _attention_groups), the draft layers the case's."""
    config = setup.vllm_config
    ns = types.SimpleNamespace
    config.model_config.enforce_eager = True
    config.model_config.get_vocab_size = lambda: 4
    config.model_config.use_fp64_gumbel = False
    config.model_config.supports_multimodal_inputs = False
    config.model_config.get_hidden_size = lambda: HIDDEN
    config.model_config.uses_xdrope_dim = 0
    config.parallel_config.data_parallel_rank = 0
    config.parallel_config.use_sequence_parallel_moe = False
    config.parallel_config.is_moe_model = False
    config.compilation_config.fast_moe_cold_start = False
    config.compilation_config.is_attention_compiled_piecewise = lambda: True  # PIECEWISE graphs: eager attention
    config.compilation_config.level = 0  # 0.1x: not PIECEWISE, the drafter runs eagerly
    config.compilation_config.mode = 0
    config.pad_for_cudagraph = lambda n: n
    layer_names = _layer_names(setup)
    builders = _builders(vl, setup)
    attn_groups = [[ns(backend=g.backend_cls, layer_names=[f"layers.{l}" for l in g.layer_ids], metadata_builders=[builders[g.gid]],
                       get_metadata_builder=(lambda b: lambda *a: b)(builders[g.gid]), kv_cache_spec=g.spec,
                       metadata_builder=builders[g.gid])
                    for g in setup.groups]]
    runner = ns(attn_groups=attn_groups)
    proposer = cls(config, setup.device, runner)
    proposer.model = model
    if hasattr(proposer, "draft_attn_groups"):  # 0.2x on: the proposer's own attention groups
        _attention_groups(eagle, proposer, setup, layer_names)
    else:
        if len(setup.groups) != 1:
            raise _unsupported("the drafting layers form several attention groups: this release's proposer builds "
                               "every draft layer's metadata with attn_groups[0][0]'s builder")
        proposer.attn_layer_names = layer_names
    return proposer


def _layer_names(setup):
    return [f"layers.{l}" for l in range(len(setup.layers_spec))]


def _builders(vl, setup):
    """Each attention group's metadata builder ({gid: builder}), its backend class on the group
    (g.backend_cls: a chunked group's the ChunkedLocalAttention backend vLLM derives)."""
    builders = {}
    for g in setup.groups:
        g.backend_cls = setup.group_backend(g)
        builders[g.gid] = g.backend_cls.get_builder_cls()(g.spec, [f"layers.{l}" for l in g.layer_ids],
                                                          setup.vllm_config, setup.device)
    return builders


def _attention_groups(eagle, proposer, setup, layer_names):
    """0.2x on: the proposer's initialize_attn_backend forms its attention groups (by backend) and
    their builders from the KV-cache group of the draft layers."""
    ns = types.SimpleNamespace
    backend_of = {f"layers.{l}": g.backend_cls for g in setup.groups for l in g.layer_ids}
    layers = {name: ns(get_attn_backend=(lambda b: lambda: b)(backend_of[name])) for name in layer_names}
    for cls in type(proposer).__mro__:  # where initialize_attn_backend looks the layers up
        module = sys.modules[cls.__module__]
        if hasattr(module, "get_layers_from_vllm_config"):
            module.get_layers_from_vllm_config = lambda cfg, c, names=None: {
                k: v for k, v in layers.items() if names is None or k in names}
    # vLLM's is a set (llm_base_proposer.py:1337); the base class and Step3p5MTPProposer iterate it sorted,
    # Gemma4Proposer in set order (gemma4.py:261), so its drafter's group (:293) varies from process to
    # process with the string hash seed: here the names' order, layer 0's group first, in every process
    proposer._draft_attn_layer_names = dict.fromkeys(layer_names).keys()
    if draft_groups.several(setup):
        proposer.initialize_attn_backend(draft_groups.kv_cache_config(setup))
        return
    g = setup.groups[0]
    kv_config = ns(kv_cache_groups=[ns(layer_names=layer_names, kv_cache_spec=g.group_spec)])
    proposer.initialize_attn_backend(kv_config)


def _propose_inputs(eagle, proposer, setup, common):
    """What gpu_model_runner.propose_draft_token_ids hands the proposer after the target step
    (re-expressed): with drafts in the target step, the padded drafter batch's prepare_inputs_padded
    (the release's) over SpecDecodeMetadata's cu_num_draft_tokens and the valid sampled counts; in
    0.10, which has no padded batch, prepare_inputs over the rejected counts."""
    n, dev = setup.bs, setup.device
    tokens = setup.num_tokens
    positions = torch.from_numpy(setup.positions).to(dev)
    valid = getattr(setup, "valid", None) or [None] * n
    token_indices, rejected = None, None
    if any(v is not None for v in valid) and not hasattr(proposer, "prepare_inputs_padded"):
        # 0.10: the runner's only path, prepare_inputs (the accepted tokens, seq_lens less the rejected)
        rejected_cpu = torch.tensor([int(q) - v if v is not None else 0 for q, v in zip(setup.query_lens, valid)],
                                    dtype=torch.int32)
        common, kept = proposer.prepare_inputs(common, rejected_cpu)
        positions, tokens = positions[kept], int(kept.shape[0])
    elif any(v is not None for v in valid):
        drafts = np.array([int(q) - 1 if v is not None else 0 for q, v in zip(setup.query_lens, valid)], np.int32)
        counts = torch.tensor([v if v is not None else 1 for v in valid], dtype=torch.int32, device=dev)
        spec = types.SimpleNamespace(cu_num_draft_tokens=torch.from_numpy(np.cumsum(drafts).astype(np.int32)).to(dev),
                                     num_draft_tokens=drafts.tolist())
        out = proposer.prepare_inputs_padded(common, spec, counts)
        if _names_rejected(proposer):  # later: (metadata, token_indices_to_sample, num_rejected_tokens)
            common, token_indices, rejected = out
        elif len(out) == 2:  # 0.12, 0.13: (metadata, token_indices_to_sample)
            common, token_indices = out
        else:  # 0.11: (metadata, token_indices, token_indices_to_sample)
            common, _, token_indices = out
    args = dict(target_token_ids=torch.zeros(tokens, dtype=torch.int32, device=dev), target_positions=positions,
                target_hidden_states=torch.zeros(tokens, HIDDEN, dtype=setup.dtype, device=dev),
                next_token_ids=torch.zeros(n, dtype=torch.int32, device=dev), common_attn_metadata=common,
                sampling_metadata=types.SimpleNamespace(all_greedy=True, all_random=False, temperature=None))
    import inspect

    params = inspect.signature(proposer.propose).parameters
    if "token_indices_to_sample" in params:
        args["token_indices_to_sample"] = token_indices
    elif "last_token_indices" in params:
        args["last_token_indices"] = token_indices
    if "num_rejected_tokens_gpu" in params:
        args["num_rejected_tokens_gpu"] = rejected
    if "num_speculative_tokens" in params:
        args["num_speculative_tokens"] = proposer.num_speculative_tokens
    return args


def _names_rejected(proposer):
    """Whether propose takes the rejected counts (0.2x on) or not (0.1x)."""
    import inspect

    return "num_rejected_tokens_gpu" in inspect.signature(proposer.propose).parameters


def _check_pass(setup, seen):
    """The recorded pass's positions and K/V writes against kvfuzz's: draft_decode step u writes
    out_cache_loc[b][0][u] at position S + u (draft_extend_v2: the case's own, checked with the
    target step's metadata)."""
    if setup.mode not in LOOP_STEPS:
        return
    n = setup.bs
    got_pos = seen["positions"][:n].cpu().numpy().astype(np.int64)
    if not np.array_equal(got_pos, setup.draft_positions):
        raise RuntimeError(f"vLLM's drafting step {setup.draft_step} runs positions {got_pos.tolist()}, "
                           f"kvfuzz's step is at {setup.draft_positions.tolist()}")
    if setup.mode == "draft_q_only":  # Gemma-4's layers share the target's KV: Attention writes nothing
        return
    for l, slots in seen["slots"].items():
        pool = setup.layers_spec[l]["pool"]
        want = setup.f2s[setup.draft_slots] if pool == "swa" else setup.draft_slots
        got = slots[:n].cpu().numpy().astype(np.int64)
        if not np.array_equal(got, want):
            b = int(np.nonzero(got != want)[0][0])
            if got[b] < 0:  # PADDING_SLOT_ID: vLLM writes no K/V for the token (what it does past max_model_len)
                raise RuntimeError(f"layer {l}: vLLM's drafting step {setup.draft_step} leaves request row {b}'s draft "
                                   f"(position {int(setup.draft_positions[b])}) unwritten (PADDING_SLOT_ID), "
                                   f"kvfuzz's cache holds it at {int(want[b])}")
            raise RuntimeError(f"layer {l}: vLLM's drafting step {setup.draft_step} writes request row {b}'s draft "
                               f"(position {int(setup.draft_positions[b])}) at slot {int(got[b])}, kvfuzz's cache "
                               f"holds it at {int(want[b])}")
