"""sglang's FlashAttentionBackend as a kvfuzz `page_table` planner (FAMILIES.md).

The backend builds its metadata (eager, or CUDA-graph capture then replay) and runs its own
forward for every layer; the flash_attn_with_kvcache calls it makes (recorder.py) become the
plan (engine/page_table_plan.py, shared with vLLM's FlashAttention adapter).
"""
from fake_runner import UnsupportedCase
from engine import page_table_plan
from recorder import Recorder, recorded_plan


def build(sg, setup, rec=None):
    """The backend with its kernels recorded by rec (default: a page_table Recorder; mla_backends.py
    hands an MLA one for FA3's absorbed MLA path)."""
    fa = sg.module("flashattention_backend")
    backend = fa.FlashAttentionBackend(setup.runner, speculative_step_id=setup.draft_step, topk=setup.spec_topk,
                                       speculative_num_steps=setup.num_steps)
    rec = rec or Recorder(setup)
    # The backend calls them as its attributes and (0.5.11 on, in some paths) as module globals.
    backend.flash_attn_with_kvcache = fa.flash_attn_with_kvcache = rec.flash_attn_with_kvcache
    backend.flash_attn_varlen_func = fa.flash_attn_varlen_func = rec.unexpected("flash_attn_varlen_func")
    fa.merge_state_v2 = rec.merge_state
    # 0.5.23: FA3's scheduler_metadata precompute (tile scheduling only, not which keys are read): off, as
    # production runs it where sgl_kernel has no get_scheduler_metadata (the per-layer metadata path).
    if hasattr(backend, "_get_scheduler_metadata"):
        backend._get_scheduler_metadata = None
    if hasattr(fa, "merge_state_v2_wrapper"):
        fa.merge_state_v2_wrapper = rec.merge_state
    return backend, rec


def plan(sg, setup):
    fa = sg.module("flashattention_backend")
    if setup.graph and setup.mode == "draft_decode" and \
            not hasattr(fa.FlashAttentionBackend, "init_forward_metadata_capture_cuda_graph"):
        # 0.5.13 on, the draft runner's out_graph hands each step's backend the batch's writes of
        # every step; how FlashAttentionMultiStepBackend slices them per step is not modelled here.
        raise UnsupportedCase("FA draft decode under a CUDA graph in 0.5.13 and later (per-step write slices)")
    return recorded_plan(sg, setup, build, to_plan)


def to_plan(setup, rec):
    return page_table_plan.to_plan(setup.case, setup.mode, rec.calls, "sglang")
