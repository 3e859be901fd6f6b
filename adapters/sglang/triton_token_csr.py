"""sglang's TritonAttnBackend as a kvfuzz `token_csr` planner (FAMILIES.md).

The backend (or, for draft decode, TritonMultiStepDraftBackend and its backend for this step)
builds its metadata eagerly or by CUDA-graph capture then replay, and runs its own forward for
every layer; the decode_attention_fwd / extend_attention_fwd calls it makes (recorder.py) become
the plan: one CSR per distinct (indptr, indices, offsets, splits) a layer read, the kernel's
split counts and MAX_KV_SPLITS, and the positions the extend kernel derives (query m of a row at
window offset + prefix length + m; it never reads the batch's positions).
"""
import importlib

import numpy as np
import torch

from fake_runner import UnsupportedCase
from recorder import Recorder, int32


def build(sg, setup):
    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    rec = Recorder(setup)
    sms = int(setup.case.batch["device_sms"])
    if setup.mode == "draft_decode":
        if setup.draft_step >= setup.num_steps - 1:
            raise UnsupportedCase("the last draft step runs no attention backend (TritonMultiStepDraftBackend)")
        multi = tb.TritonMultiStepDraftBackend(setup.runner, setup.topk, setup.num_steps)
        backends = multi.attn_backends
        step = backends[setup.draft_step]
    else:
        multi = None
        step = tb.TritonAttnBackend(setup.runner)
        backends = [step]
    for b in backends:
        b.device_core_count = sms  # the case's SM count (0: static splits), not this machine's
        b.decode_attention_fwd = rec.decode_attention_fwd
        b.extend_attention_fwd = rec.extend_attention_fwd
        b.extend_attention_fwd_unified = rec.unexpected("extend_attention_fwd_unified")
    return multi, step, rec


def plan(sg, setup):
    windows = {x["window"] for x in setup.layers_spec if x["kind"] == "sliding_window"}
    if len(windows) > 1:
        raise UnsupportedCase("several window sizes (TritonAttnBackend keeps one window CSR)")
    if 0 in windows:
        raise UnsupportedCase("window radius 0: sglang's Triton backend takes sliding_window_size 0 as no window "
                              "(reference/CONVENTIONS.md)")
    multi, backend, rec = build(sg, setup)
    if multi is not None:
        sg.init_draft_metadata(multi, setup)
    else:
        sg.init_metadata(backend, setup)
    tokens = rec.run_layers(backend)
    return to_plan(setup, rec, tokens)


def _key(call, reader):
    parts = [call["pool"], call["window"], reader["kind"], reader["window"]]
    for name in ("kv_indptr", "kv_indices", "kv_offsets", "num_kv_splits"):
        t = call.get(name)
        parts.append(None if t is None else tuple(t.tolist()))
    return tuple(parts)


def to_plan(setup, rec, tokens):
    case = setup.case
    calls = []
    for l in range(len(case.layers)):
        layer_calls = rec.calls.get(l, [])
        if len(layer_calls) > 1:
            raise NotImplementedError(f"layer {l}: {len(layer_calls)} kernel calls")
        calls.append(layer_calls[0] if layer_calls else None)
    kinds = {c["kernel"] for c in calls if c is not None}
    if len(kinds) > 1 or (kinds and any(c is None for c in calls)):
        raise RuntimeError(f"layers launched different kernels: {sorted(kinds)}")
    kernel = kinds.pop() if kinds else "none"
    arrays, csrs, layer_csr, index = {}, [], [], {}
    for l, (spec, call) in enumerate(zip(case.layers, calls)):
        if call is None:
            layer_csr.append(0)
            continue
        if call["pool"] != spec["pool"]:
            raise RuntimeError(f"layer {l} ({spec['pool']} pool) was handed the {call['pool']} pool's K/V buffer")
        key = _key(call, spec)
        if key not in index:
            index[key] = len(csrs)
            csrs.append((call, spec))
        layer_csr.append(index[key])
    # csrs[0] is the full CSR (FAMILIES.md): full-rule CSRs first.
    order = sorted(range(len(csrs)), key=lambda i: _rule(kernel, *csrs[i])[0] != "full")
    layer_csr = [order.index(i) if csrs else 0 for i in layer_csr]  # no CSR: IDLE without rows
    csrs = [csrs[i] for i in order]
    meta_csrs = []
    for i, (c, reader) in enumerate(csrs):
        kind, w = _rule(kernel, c, reader)
        meta_csrs.append({"kind": kind, "window_or_chunk": w, "pool": c["pool"]})
        rows = c["rows"]
        offsets = c["kv_offsets"] if c["kv_offsets"] is not None else torch.zeros(rows, dtype=torch.int64)
        splits = c.get("num_kv_splits")
        arrays[f"csrs.{i}.kv_indptr"] = int32(c["kv_indptr"], "kv_indptr")
        arrays[f"csrs.{i}.kv_indices"] = c["kv_indices"].numpy().astype(np.int64)
        arrays[f"csrs.{i}.kv_offsets"] = int32(offsets, "window_kv_offsets")
        arrays[f"csrs.{i}.num_kv_splits"] = int32(splits if splits is not None else torch.ones(rows, dtype=torch.int64),
                                                      "num_kv_splits")
    if not meta_csrs:  # nothing launched (IDLE without rows): an empty full CSR
        meta_csrs.append({"kind": "full", "window_or_chunk": 0, "pool": "full"})
        for name, dt in (("kv_indptr", np.int32), ("kv_indices", np.int64), ("kv_offsets", np.int32),
                         ("num_kv_splits", np.int32)):
            arrays[f"csrs.0.{name}"] = np.zeros(1 if name == "kv_indptr" else 0, dtype=dt)
    first = next((c for c in calls if c is not None), None)
    rows = first["rows"] if first else 0
    qpr = rows // setup.padded_bs if kernel == "decode" and setup.padded_bs else 1
    arrays["positions"] = _positions(kernel, csrs, tokens, setup.case.array("positions"), setup.bs)
    if kernel == "extend":
        arrays["qo_indptr"] = int32(first["qo_indptr"], "qo_indptr")
        mask = first["custom_mask"] if first["mask_indptr"] is not None else None
        arrays["mask_indptr"] = (first["mask_indptr"].numpy().astype(np.int64) if mask is not None
                                 else np.zeros(0, np.int64))
        arrays["custom_mask"] = mask.numpy().astype(np.uint8) if mask is not None else np.zeros(0, np.uint8)
    else:
        arrays["qo_indptr"] = np.zeros(0, np.int32)
        arrays["mask_indptr"] = np.zeros(0, np.int64)
        arrays["custom_mask"] = np.zeros(0, np.uint8)
    meta = {
        "mode": setup.mode, "kernel": kernel, "graph": setup.graph, "bs": setup.bs, "padded_bs": setup.padded_bs,
        "rows": rows, "queries_per_request": max(qpr, 1),
        "max_kv_splits": first["max_kv_splits"] if first and kernel == "decode" else 1,
        "use_custom_mask": bool(kernel == "extend" and first["mask_indptr"] is not None),
        "csrs": meta_csrs, "layer_csr": layer_csr,
    }
    return meta, arrays


def _rule(kernel, call, reader):
    """The rule that chose a CSR's keys: the decode kernel has no mask, so its CSR is the read set of
    the reading layer's rule; the extend kernel masks with the window it was handed."""
    if kernel == "decode":
        return ("sliding_window", reader["window"]) if reader["kind"] == "sliding_window" else ("full", 0)
    return ("sliding_window", call["window"]) if call["window"] >= 0 else ("full", 0)


def _positions(kernel, csrs, tokens, batch_positions, real_rows):
    """The extend kernel's q_id for each batch token: its row's window offset + prefix length + m."""
    if kernel != "extend":  # the decode kernel reads no positions: the batch's, for the record
        return batch_positions.astype(np.int32)
    seen = None
    for c, _ in csrs:
        qo, kv = c["qo_indptr"].numpy(), c["kv_indptr"].numpy()
        off = c["kv_offsets"].numpy() if c["kv_offsets"] is not None else np.zeros(len(qo) - 1, np.int64)
        here = np.zeros(tokens, dtype=np.int64)
        here[qo[real_rows]:] = batch_positions[qo[real_rows]:]  # padded rows: discarded outputs
        for r in range(min(real_rows, len(qo) - 1)):
            base = off[r] + (kv[r + 1] - kv[r])
            here[qo[r]:qo[r + 1]] = base + np.arange(qo[r + 1] - qo[r])
        if seen is not None and not np.array_equal(seen, here):
            raise NotImplementedError("the layers' CSRs imply different query positions (offset + prefix length)")
        seen = here
    return seen.astype(np.int32)

