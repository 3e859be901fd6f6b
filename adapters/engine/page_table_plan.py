"""Recorded flash_attn_with_kvcache / flash_attn_varlen_func calls as a kvfuzz `page_table` plan (FAMILIES.md).

Shared by the engines whose FlashAttention backends hand the kernel a page table (sglang's
fa_page_table.py, vLLM's flash_attn_page_table.py): one part per call, a layer's calls merged by
LSE in order, the window as passed to the kernel, the K/V view's page size as the kernel's view
has it. Layers are grouped as the family groups them: full, sliding (one window per group) and
one local group per chunk size; layers of a group must have made the same calls.

    meta, arrays = to_plan(case, "decode", {0: [call], 1: [call]}, "vllm")
"""
import torch

from engine.descales import per_layer
from engine.tensors import int32


def _same(a, b):
    keys = ("pool", "view_page_size", "max_seqlen_q", "causal")  # the window is per layer (plan layers)
    if any(a[k] != b[k] for k in keys) or a.get("common_prefix_len", 0) != b.get("common_prefix_len", 0):
        return False
    if a.get("sinks") != b.get("sinks") or a.get("dcp") != b.get("dcp"):
        return False
    if (a.get("rank_slots") is None) != (b.get("rank_slots") is None) or (
            a.get("rank_slots") is not None and not torch.equal(a["rank_slots"], b["rank_slots"])):
        return False
    return all(torch.equal(a[k], b[k]) for k in ("page_table", "cache_seqlens", "cu_seqlens_q"))


def to_plan(case, mode, calls_by_layer, engine):
    """The page_table plan of recorded flash_attn calls: calls_by_layer {layer: [call]}, each call
    {pool, view_page_size, page_table, cache_seqlens, cu_seqlens_q, max_seqlen_q, causal, window_left,
    window_right} (torch tensors on the host), optionally max_seqlen_k (else the rows' maximum),
    vLLM's padding flags empty_padded_rows, max_seqlen_k_upper_bound, its cascade's
    common_prefix_len, the call's attention sinks (a list, one logit per q head: s_aux) and, under decode-context
    parallelism, its dcp (world, interleave) and rank_slots (the rank's pool) (FAMILIES.md); engine names
    the parts ("sglang", "vllm")."""
    layers, groups, routes = [], {"full": None, "sliding": None}, []
    local = {}
    for l, spec in enumerate(case.layers):
        calls = calls_by_layer.get(l, [])
        if not calls and mode != "idle":
            raise RuntimeError(f"layer {l}: the backend launched no attention kernel")
        windows = {c["window_left"] for c in calls}
        if len(windows) > 1:
            raise NotImplementedError(f"layer {l}: calls with different windows {sorted(windows)}")
        window = windows.pop() if windows else -1
        for c in calls:
            if c.get("qq_bias") is not None:
                raise NotImplementedError(f"layer {l}: a kernel call with a tree bias (qq_bias): no page_table field carries it")
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
            # max_seqlen_k as the kernel got it where the recorder kept it (vLLM's), else the rows' maximum
            max_k = c.get("max_seqlen_k", int(seqlens.max()) if rows else 0)
            parts.append({"name": f"{engine}.{name}.{j}", "rows": rows, "width": width,
                          "view_page_size": c["view_page_size"], "causal": c["causal"],
                          "max_seqlen_q": c["max_seqlen_q"], "max_seqlen_k": max_k,
                          "empty_padded_rows": bool(c.get("empty_padded_rows", False)),
                          "max_seqlen_k_upper_bound": bool(c.get("max_seqlen_k_upper_bound", False))})
            if c.get("sinks") is not None:  # the attention sinks the call's softmax took in (s_aux)
                parts[-1]["sinks"] = list(c["sinks"])
            for key, t in (("cu_seqlens_q", c["cu_seqlens_q"]), ("cu_seqlens_k", cu_k), ("cache_seqlens", seqlens),
                           ("page_table", table)):
                arrays[f"{path}.{key}"] = int32(t, f"{path}.{key}")
            if c.get("rank_slots") is not None:  # decode-context parallelism: the rank's pool (int64)
                arrays[f"{path}.rank_slots"] = c["rank_slots"].to(torch.int64).numpy()
        group = {"kind": kind, "chunk": chunk, "parts": parts}
        prefix = calls[0].get("common_prefix_len", 0) if calls else 0
        if prefix:  # vLLM's cascade attention (FAMILIES.md)
            group["common_prefix_len"] = prefix
        world, interleave = calls[0].get("dcp", (1, 1)) if calls else (1, 1)
        if world > 1:  # decode-context parallelism: the ranks' calls, then the new tokens' (FAMILIES.md)
            group["dcp_world"], group["dcp_interleave"] = world, interleave
        return group

    local_keys = sorted(local, key=lambda k: int(k.split(".")[1]))
    descales = per_layer(len(case.layers), calls_by_layer)
    meta = {
        "layers": layers,
        "full": group("full", "full", 0, groups["full"]),
        "has_sliding": groups["sliding"] is not None,
        "sliding": group("sliding", "sliding", 0, groups["sliding"]),
        "local": [group(f"local.{i}", "local", int(k.split(".")[1]), local[k]) for i, k in enumerate(local_keys)],
    }
    if descales is not None:
        meta["descales"] = descales
    return meta, arrays

