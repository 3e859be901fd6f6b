"""Recorded FlashInfer wrapper calls as a kvfuzz `paged_csr` plan (FAMILIES.md), and what a
wrapper's plan() fixes against what its run is handed.

Shared by the engines whose FlashInfer backends plan wrappers (sglang's flashinfer_paged_csr.py:
begin_forward/forward at page size 1; vLLM's flashinfer_paged_csr.py: plan/run at the block
size): recorders keep one call per wrapper run with the arrays its plan() was given; layers that
made the same calls share a group; a group's calls are merged in order (FlashInfer's base-2
merge_state).

    fixed = planned(head_dim=128, page_size=16, window_left=-1, logits_soft_cap=None, causal=True,
                    q_data_type=torch.float16, kv_data_type=None)
    check_run(agree, fixed, {"window_left": 3, "head_dim": 128}, layer=0, where="decode run")
    meta, arrays = to_plan(case.layers, {0: [call]}, page_size=16)
"""
import numpy as np
import torch

from engine.descales import per_layer
from engine.tensors import int32


def dtype_of(d):
    """A FlashInfer plan dtype (a torch.dtype or its name) as a torch.dtype; None stays None."""
    return getattr(torch, d) if isinstance(d, str) else d


def planned(head_dim, page_size, window_left, logits_soft_cap, causal, q_data_type, kv_data_type, sm_scale=None):
    """What FlashInfer's plan() fixes: the kernel module it picks (head dim, dtypes, sliding window on
    or off, soft cap on or off) and the schedule (page size; causal: a causal plan schedules no key
    past a query tile's diagonal). sm_scale: None where the run step states it instead (sglang)."""
    q_dtype = dtype_of(q_data_type) or torch.float16  # FlashInfer's default
    fixed = {"head_dim": int(head_dim), "page_size": int(page_size), "window_left": int(window_left),
             "logits_soft_cap": float(logits_soft_cap or 0.0), "causal": bool(causal),
             "q_data_type": str(q_dtype), "kv_data_type": str(dtype_of(kv_data_type) or q_dtype)}
    if sm_scale is not None:
        fixed["sm_scale"] = float(sm_scale)
    return fixed


def seq_lens(indptr, last_page_len, page_size):
    """FlashInfer's get_seq_lens: (pages - 1) * page_size + last_page_len, 0 for a row without pages."""
    return torch.where(indptr[1:] > indptr[:-1], (indptr[1:] - indptr[:-1] - 1) * page_size + last_page_len, 0)


def check_graph_batch(wrapper, indices, last_page_len):
    """What FlashInfer's plan() and fast_decode_plan check on a CUDA-graph wrapper (0.7.2.post1
    decode.py:4956-4966): the batch is the one its persistent buffers fix, the indices fit its
    indices buffer. The wrapper keeps FlashInfer's attribute names (_fixed_batch_size, _paged_kv_*_buf)."""
    batch = int(last_page_len.shape[0])
    if batch != wrapper._fixed_batch_size:
        raise ValueError(f"The batch size should be fixed in cudagraph mode, the runtime batch size {batch} "
                         f"mismatches the batch size set during initialization {wrapper._fixed_batch_size}")
    if int(indices.shape[0]) > int(wrapper._paged_kv_indices_buf.shape[0]):
        raise ValueError("The size of indices should be less than or equal to the allocated buffer")


def fill_graph_buffers(wrapper, indptr, indices, last_page_len):
    """FlashInfer's plan() on a CUDA-graph wrapper: checked as above, the arrays copied into the
    persistent buffers the captured kernel reads."""
    check_graph_batch(wrapper, indices, last_page_len)
    wrapper._paged_kv_indptr_buf.copy_(indptr)
    wrapper._paged_kv_last_page_len_buf.copy_(last_page_len)
    wrapper._paged_kv_indices_buf[: int(indices.shape[0])].copy_(indices)


def check_run(agree, fixed, ran, layer, where):
    """Each argument of the run step (ran: {name: value}, the names of `planned`) against the plan's
    (engine/plan_run.py PlanRun `agree`). A causal run over a non-causal plan reads within what was
    scheduled, so only the reverse disagrees."""
    for name, value in ran.items():
        if name not in fixed:
            continue
        if name == "causal":
            if fixed["causal"] and not value:
                agree.check("causal", True, False, layer, where)
            continue
        if name in ("q_data_type", "kv_data_type"):
            value = str(value)
        elif name in ("logits_soft_cap", "sm_scale"):
            value = float(value or 0.0)
        agree.check(name, fixed[name], value, layer, where)


def _signature(call):
    parts = [call["role"], call["causal"], call["window_left"], call["page_size"], call["pool"]]
    for name in ("qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len", "custom_mask"):
        t = call.get(name)
        parts.append(None if t is None else tuple(t.tolist()))
    return tuple(parts)


def to_plan(layers, calls_by_layer, page_size=1, role_of=None):
    """The paged_csr plan of recorded wrapper calls: layers (the case's layer specs), calls_by_layer
    {layer: [call]}, each call {role, causal, window_left, page_size, pool, qo_indptr, kv_indptr,
    kv_indices, kv_last_page_len, custom_mask (or None), optionally empty_padded_rows (vLLM's
    padding: padded rows read no page) and descales (an fp8 cache's, engine/descales.py)} with host
    tensors; page_size: the plan's
    kernel page size; role_of(call): the role the plan states (default call["role"])."""
    groups, group_of_layer, index, arrays = [], [], {}, {}
    for l, spec in enumerate(layers):
        calls = calls_by_layer.get(l, [])
        for c in calls:
            if c["pool"] is not None and c["pool"] != spec["pool"]:
                raise RuntimeError(f"layer {l} ({spec['pool']} pool) was handed the {c['pool']} pool's K/V buffer")
        layer = {"kind": spec["kind"], "window": spec["window"], "chunk": spec["chunk"]}
        key = (tuple(sorted(layer.items())), tuple(_signature(c) for c in calls))
        if key not in index:
            index[key] = len(groups)
            groups.append((layer, calls))
        group_of_layer.append(index[key])
    meta_groups = []
    for g, (layer, calls) in enumerate(groups):
        meta_calls = []
        for j, c in enumerate(calls):
            path = f"groups.{g}.calls.{j}"
            has_mask = c["custom_mask"] is not None
            meta_calls.append({"role": role_of(c) if role_of else c["role"], "page_size": c["page_size"],
                               "rows": int(c["qo_indptr"].numel()) - 1, "rows_per_batch_row": 1, "causal": c["causal"],
                               "window_left": c["window_left"], "has_mask": has_mask})
            if c.get("empty_padded_rows"):  # vLLM's CUDA-graph padding (FAMILIES.md); absent: sglang's dummy page
                meta_calls[-1]["empty_padded_rows"] = True
            arrays[f"{path}.qo_indptr"] = int32(c["qo_indptr"], "qo_indptr")
            arrays[f"{path}.kv_indptr"] = int32(c["kv_indptr"], "kv_indptr")
            arrays[f"{path}.kv_indices"] = int32(c["kv_indices"], "kv_indices")
            arrays[f"{path}.kv_last_page_len"] = int32(c["kv_last_page_len"], "kv_last_page_len")
            arrays[f"{path}.custom_mask"] = (c["custom_mask"].numpy().astype(np.uint8) if has_mask
                                             else np.zeros(0, np.uint8))
            arrays[f"{path}.mask_indptr"] = _mask_indptr(c) if has_mask else np.zeros(0, np.int32)
        meta_groups.append({"layer": layer, "calls": meta_calls})
    meta = {"page_size": page_size, "merge": "flashinfer_base2", "groups": meta_groups,
            "group_of_layer": group_of_layer}
    descales = per_layer(len(layers), calls_by_layer)
    if descales is not None:  # an fp8 cache's scales, per layer (engine/descales.py)
        meta["descales"] = descales
    return meta, arrays


def _mask_indptr(call):
    """FlashInfer's own mask offsets: row r's q_len x k_len block, rows concatenated (its plan())."""
    qo, kv = call["qo_indptr"].numpy(), call["kv_indptr"].numpy()
    last, ps = call["kv_last_page_len"].numpy(), call["page_size"]
    lens = [(qo[r + 1] - qo[r]) * ((kv[r + 1] - kv[r] - 1) * ps + last[r] if kv[r + 1] > kv[r] else 0)
            for r in range(len(qo) - 1)]
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
