"""Drafting on layers of several KV-cache groups (sliding and full layers in their own groups, the
hybrid KV-cache manager on), as each release's V1 runner and proposer do it.

Where it sits: fake_runner.Setup (the KV-cache groups, each with its BlockTable) -> eagle_drafting.py
(the proposer's passes) -> **draft_groups.py** (which proposer drafts across the groups, and the
per-group block tables and slot mappings the runner hands it) -> recorder.py.

What vLLM does (docs/vllm.md "Drafting across KV-cache groups"; 0.33.0 lines, read):
- EagleProposer (EAGLE, EAGLE-3, and MTP in 0.1x) asserts that every drafting layer is in one group:
  `validate_same_kv_cache_group` (0.10.2 and 0.11.0 eagle.py:680 / :951, called by the runner after
  the KV caches are allocated, gpu_model_runner.py:3584 / :3993; from 0.2x llm_base_proposer.py:1689,
  called from its initialize_attn_backend, :1725). A gpt-oss target with an EAGLE-3 head passes it
  (the head's layer sits in one group); kvfuzz's case drafts on every one of its layers, so a case of
  several groups is, for EagleProposer, a draft model vLLM refuses at start-up.
- Two model-specific proposers drop the assertion. Step3p5MTPProposer (step3p5.py, from 0.23.0;
  `method == "mtp"` with a `step3p5_mtp` draft config: speculative.py:2108) drafts on layers of every
  group, each group's block table and slot mapping its own. Gemma4Proposer (gemma4.py, from 0.22.0;
  `method == "mtp"` with a `gemma4_mtp` draft config: speculative.py:2100-2106, picked before
  Step3p5MTPProposer, gpu_model_runner.py:641-644) swaps in each group's block table
  (build_per_group_and_layer_attn_metadata, gemma4.py:72-104) and hands every layer the drafter's own
  group's slots (llm_base_proposer.py:402-418); its layers share the target's KV
  (kv_sharing_target_layer_name, gemma4.py:356: Attention writes nothing, attention.py:549, :569) and
  its drafting loop keeps positions, seq_lens and metadata constant (constant_draft_positions,
  gemma4.py:49; llm_base_proposer.py:644-647, :699-715). Driven (--multi-group-drafter gemma4) on its
  first pass, draft_extend_v2, and on its drafting steps, which read the target's keys from the last
  verified position and write nothing: kvfuzz's draft_q_only (not draft_decode, draft u written and
  read at S + u: unsupported for it). The runner picks it by the draft config, so draft_q_only runs it
  on one KV-cache group too.
- The runner hands each group's block table and slot mapping of the target step
  (`set_per_group_attn_metadata`, gpu_model_runner.py:2513-2516; Gemma4Proposer only the tables,
  `set_per_group_block_table`, :2517-2520) and the drafter's own group's
  CommonAttentionMetadata (`spec_decode_common_attn_metadata`, :2497-2511); the proposer's loop
  advances the primary group's slots with the release's Triton kernel and every other group's with
  its own code (step3p5.py `_update_positions_dependent_metadata`), and builds each group's metadata
  from the primary's with that group's table and slots (`build_per_group_and_layer_attn_metadata`).

Re-expressed (a bug there is not found): the runner's loop over the groups (which group's metadata
the drafter gets, the per-group hand-off), the speculative config's method.

    cls = proposer_class(vl, eagle, setup)          # EagleProposer, or the release's multi-group one
    common = hand_groups(setup, proposer)           # the primary group's CommonAttentionMetadata
"""
import importlib
import importlib.util
import types

# the release's proposers that draft across KV-cache groups, by the planner's --multi-group-drafter:
# (module, class, method, the draft config's model_type that makes the runner pick it, its architecture:
# speculative.py:1049-1051, :2100-2114)
MULTI_GROUP = {"step3p5": ("vllm.v1.spec_decode.step3p5", "Step3p5MTPProposer", "mtp", "step3p5_mtp", "Step3p5MTP"),
               "gemma4": ("vllm.v1.spec_decode.gemma4", "Gemma4Proposer", "mtp", "gemma4_mtp", "Gemma4MTPModel")}
FIRST = {"step3p5": "0.23.0", "gemma4": "0.22.0"}  # the first release that ships it (read, docs/vllm.md)


def several(setup):
    """Whether the case's layers form more than one KV-cache group."""
    return len({g.kv_gid for g in setup.groups}) > 1


def proposer_class(vl, eagle, setup):
    """The proposer vLLM's runner builds for the case's draft layers: EagleProposer where they are in
    one KV-cache group; where they span several, the release's proposer that drafts across groups
    (setup.multi_group_drafter, configured as the runner picks it: its method and draft model type),
    else UnsupportedCase with vLLM's reason."""
    from fake_runner import UnsupportedCase

    which = getattr(setup, "multi_group_drafter", "step3p5")
    if setup.mode == "draft_q_only" and which != "gemma4":
        raise UnsupportedCase("draft_q_only is Gemma-4's drafting step (its layers share the target's KV): "
                              "--multi-group-drafter gemma4 runs the Gemma4Proposer that takes it")
    if not several(setup) and setup.mode != "draft_q_only":
        return eagle.EagleProposer
    module, name, method, model_type, arch = MULTI_GROUP[which]
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found and not several(setup):  # draft_q_only on one group
        raise UnsupportedCase(f"draft_q_only is Gemma-4's drafting step: vLLM {vl.version} has no {name} "
                              f"({FIRST[which]} on)")
    if not found:
        raise UnsupportedCase(f"the layers form several KV-cache groups: vLLM {vl.version}'s EagleProposer asserts that "
                              "all drafting layers belong to one (validate_same_kv_cache_group), and the release has no "
                              f"{name} ({FIRST[which]} on) to draft across them")
    if which == "gemma4" and setup.mode == "draft_decode":
        raise UnsupportedCase("Gemma4Proposer drafts every step from one constant position (constant_draft_positions, "
                              "gemma4.py:49): its step u reads the target's keys from the last verified position and its "
                              "layers write nothing (kv_sharing_target_layer_name), not kvfuzz's draft_decode (draft u "
                              "written and read at S + u) but draft_q_only; its first pass is draft_extend_v2")
    spec = setup.vllm_config.speculative_config
    spec.method = method
    spec.draft_model_config.hf_config = types.SimpleNamespace(model_type=model_type, architectures=[arch])
    return getattr(importlib.import_module(module), name)


def kv_cache_config(setup):
    """The KVCacheConfig's groups the proposer's initialize_attn_backend reads: vLLM's own
    (get_kv_cache_groups over the case's layers, fake_runner.Setup._groups)."""
    return types.SimpleNamespace(kv_cache_groups=setup.kv_groups)


def hand_groups(setup, proposer):
    """What _build_attention_metadata hands a multi-group proposer after the target step: per KV-cache
    group, in order, its CommonAttentionMetadata (the group's block table and slot mapping, the latter
    checked against kvfuzz's writes) to set_per_group_attn_metadata (Gemma4Proposer: the table to
    set_per_group_block_table); returns the drafter's own
    group's (kv_cache_gid), which goes on to prepare_inputs_padded and propose."""
    first = {}
    for g in setup.groups:
        first.setdefault(g.kv_gid, g)
    primary = None
    for kv_gid in sorted(first):
        cm = setup.common_metadata(first[kv_gid])
        if hasattr(proposer, "set_per_group_attn_metadata"):  # Step3p5MTPProposer: the table and the slots
            proposer.set_per_group_attn_metadata(kv_gid, cm.block_table_tensor, cm.slot_mapping)
        else:  # Gemma4Proposer: the table only (its layers write nothing)
            proposer.set_per_group_block_table(kv_gid, cm.block_table_tensor)
        if kv_gid == proposer.kv_cache_gid:
            primary = cm
    if primary is None:
        raise RuntimeError(f"the proposer drafts from KV-cache group {proposer.kv_cache_gid}, which the case has not")
    return primary
