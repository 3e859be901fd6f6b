"""sglang's FlashAttentionBackend as a kvfuzz `page_table` planner (FAMILIES.md).

The backend builds its metadata (eager, or CUDA-graph capture then replay) and runs its own
forward for every layer; the flash_attn_with_kvcache calls it makes (recorder.py) become the
plan: one part per call, the layer's calls merged by LSE in order, the window as passed to the
kernel, the K/V view's page size as the kernel's view has it.
"""
import torch

from fake_runner import UnsupportedCase
from recorder import Recorder, int32, recorded_plan


def build(sg, setup):
    fa = sg.module("flashattention_backend")
    backend = fa.FlashAttentionBackend(setup.runner, speculative_step_id=setup.draft_step, topk=setup.spec_topk,
                                       speculative_num_steps=setup.num_steps)
    rec = Recorder(setup)
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


def _same(a, b):
    keys = ("pool", "view_page_size", "max_seqlen_q", "causal")  # the window is per layer (plan layers)
    if any(a[k] != b[k] for k in keys):
        return False
    return all(torch.equal(a[k], b[k]) for k in ("page_table", "cache_seqlens", "cu_seqlens_q"))


def to_plan(setup, rec):
    case = setup.case
    layers, groups, routes = [], {"full": None, "sliding": None}, []
    local = {}
    for l, spec in enumerate(case.layers):
        calls = rec.calls.get(l, [])
        if not calls and setup.mode != "idle":
            raise RuntimeError(f"layer {l}: the backend launched no attention kernel")
        windows = {c["window_left"] for c in calls}
        if len(windows) > 1:
            raise NotImplementedError(f"layer {l}: calls with different windows {sorted(windows)}")
        window = windows.pop() if windows else -1
        for c in calls:
            if c["pool"] != spec["pool"]:
                raise RuntimeError(f"layer {l} ({spec['pool']} pool) was handed the {c['pool']} pool's K/V buffer")
            if c["window_right"] not in (0, -1):
                raise NotImplementedError(f"layer {l}: window_size right {c['window_right']}")
        if spec["kind"] == "chunked":
            key, kind = f"local.{spec['chunk']}", {"kind": "chunked", "window": 0, "chunk": spec["chunk"]}
        elif window >= 0:
            key, kind = "sliding", {"kind": "sliding_window", "window": window, "chunk": 0}
        else:
            key, kind = "full", {"kind": "full", "window": 0, "chunk": 0}
        target = local if key.startswith("local.") else groups
        if target.get(key) is None:
            target[key] = calls
        elif len(target[key]) != len(calls) or not all(_same(a, b) for a, b in zip(target[key], calls)):
            raise NotImplementedError(f"layer {l}: its calls differ from the other layers of group {key}")
        layers.append(kind)
        routes.append(key)
    arrays = {}

    def group(name, kind, chunk, calls):
        parts = []
        for j, c in enumerate(calls or []):
            path = f"{name}.parts.{j}"
            rows = int(c["cache_seqlens"].numel())
            table = c["page_table"]
            width = int(table.shape[1]) if table.dim() == 2 else int(table.numel())
            seqlens = c["cache_seqlens"]
            # flash_attn_with_kvcache reads cu_seqlens_k_new only with new K/V (never passed here):
            # the plan carries the prefix sums of cache_seqlens.
            cu_k = torch.nn.functional.pad(torch.cumsum(seqlens, 0), (1, 0))
            parts.append({"name": f"sglang.{name}.{j}", "rows": rows, "width": width,
                          "view_page_size": c["view_page_size"], "causal": c["causal"],
                          "max_seqlen_q": c["max_seqlen_q"], "max_seqlen_k": int(seqlens.max()) if rows else 0})
            for key, t in (("cu_seqlens_q", c["cu_seqlens_q"]), ("cu_seqlens_k", cu_k), ("cache_seqlens", seqlens),
                           ("page_table", table)):
                arrays[f"{path}.{key}"] = int32(t, f"{path}.{key}")
        return {"kind": kind, "chunk": chunk, "parts": parts}

    local_keys = sorted(local, key=lambda k: int(k.split(".")[1]))
    meta = {
        "layers": layers,
        "full": group("full", "full", 0, groups["full"]),
        "has_sliding": groups["sliding"] is not None,
        "sliding": group("sliding", "sliding", 0, groups["sliding"]),
        "local": [group(f"local.{i}", "local", int(k.split(".")[1]), local[k]) for i, k in enumerate(local_keys)],
    }
    return meta, arrays

