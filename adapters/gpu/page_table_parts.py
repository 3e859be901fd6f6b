"""A page_table plan's kernel calls, read as the kernel reads them (FAMILIES.md, page_table), for the
Python page_table executors (flex_page_table.py, vllm_triton.py).

    group, prefix = group_of(case, layer)          # the group layer l reads, and its array prefix
    m = part_metadata(case, group["parts"][0], prefix + "parts.0.", n_slots, case.num_tokens)
    visible = visible_np(m, window_left, n_tokens, n_slots)   # [tokens, slots] which keys each query reads

part_metadata consumes only page_table, cache_seqlens, cu_seqlens_q, causal and view_page_size; a
row whose queries or pages lie outside the batch or the pool raises IndexError (the executor's
crash finding, as a kernel's illegal address would be).
"""
import numpy as np

import numpy_attention

TILE = 128  # flex's default sparse block size (Q and KV): the granularity of part_metadata's tiles


def p2(n, least):
    n = max(int(n), least)
    return 1 << (n - 1).bit_length()


def group_of(case, layer):
    name = case.plan["layer_group"][layer]
    if name.startswith("local."):
        return case.plan["local"][int(name.split(".")[1])], name + "."
    return case.plan[name], name + "."


def part_metadata(case, call, prefix, n_slots, n_tokens):
    """Numpy metadata of one kernel call, from page_table, cache_seqlens and cu_seqlens_q only."""
    cu_q = case.array(prefix + "cu_seqlens_q")
    seqlens = case.array(prefix + "cache_seqlens")
    table = case.array(prefix + "page_table")
    rows, width, vps = int(call["rows"]), int(call["width"]), int(call["view_page_size"])
    t_pad, s_pad = p2(n_tokens, TILE), p2(n_slots, TILE)
    r_pad = p2(rows, 8)
    n_pages = s_pad // vps + 1
    q_row = np.full(t_pad, -1, np.int32)
    q_pos = np.zeros(t_pad, np.int32)
    k_len = np.zeros(r_pad, np.int32)
    p2l = np.full((r_pad, n_pages), -1, np.int32)
    tiles = np.zeros((t_pad // TILE, s_pad // TILE), bool)
    for b in range(rows):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        if q1 <= q0:
            continue
        if q0 < 0 or q1 > n_tokens:
            raise IndexError(f"row {b}: cu_seqlens_q [{q0}, {q1}) outside the batch's {n_tokens} tokens")
        kl = int(seqlens[b])
        k_len[b] = kl
        q_row[q0:q1] = b
        q_pos[q0:q1] = kl - (q1 - q0) + np.arange(q1 - q0)
        n_lp = -(-kl // vps) if kl > 0 else 0
        if n_lp == 0:
            continue
        if n_lp > width:
            raise IndexError(f"row {b}: cache_seqlens {kl} needs {n_lp} pages, the table is {width} wide")
        phys = table[b * width: b * width + n_lp].astype(np.int64)
        if phys.min() < 0 or (phys.max() + 1) * vps > n_slots:
            raise IndexError(f"row {b}: page id outside the pool ({phys.min()}..{phys.max()}, {n_slots} slots)")
        # A physical page listed twice in one row (CUDA-graph padded rows read dummy page 0 at every
        # key) cannot be expressed by physical_to_logical: as PagedAttention's assignment, the
        # last logical page wins and the row reads that page once.
        p2l[b, phys] = np.arange(n_lp, dtype=np.int32)
        kv_tiles = np.unique((phys[:, None] * vps + np.arange(vps)[None, :]).ravel() // TILE)
        kv_tiles = kv_tiles[kv_tiles < s_pad // TILE]
        tiles[np.ix_(np.arange(q0 // TILE, (q1 - 1) // TILE + 1), kv_tiles)] = True
    return dict(q_row=q_row, q_pos=q_pos, k_len=k_len, p2l=p2l, tiles=tiles, vps=vps, t_pad=t_pad,
                s_pad=s_pad, causal=bool(call["causal"]))


def visible_np(m, window_left, n_tokens, n_slots):
    """The mask_mod below, evaluated densely in numpy [tokens, slots] (emulation only)."""
    r = m["q_row"][:n_tokens][:, None]
    rr = np.maximum(r, 0)
    kv = np.arange(n_slots)[None, :]
    lp = m["p2l"][rr, kv // m["vps"]]
    lk = lp * m["vps"] + kv % m["vps"]
    qp = m["q_pos"][:n_tokens][:, None]
    ok = (r >= 0) & (lp >= 0) & (lk < m["k_len"][rr])
    if m["causal"] or window_left >= 0:
        ok &= lk <= qp
    if window_left >= 0:
        ok &= lk >= qp - window_left
    tile_ok = m["tiles"][np.arange(n_tokens)[:, None] // TILE, kv // TILE]
    return ok & tile_ok


def visible(keys, q_pos, causal, window_left):
    """[..., queries, keys] which keys (logical indices [..., keys]) each query (logical position
    [..., queries]) reads: the same rules as visible_np, bottom-right causal, keys >= q - window_left.
    numpy or torch arrays alike."""
    d = keys[..., None, :] - q_pos[..., :, None]  # each key's index minus the query's position
    ok = d == d
    if causal or window_left >= 0:
        ok = ok & (d <= 0)
    if window_left >= 0:
        ok = ok & (d >= -window_left)
    return ok


def call_rows(case, call, prefix, window_left, n_slots):
    """Each row of one kernel call with queries and keys, as the page_table rules read it: (q0, q1,
    slots [k_len] int64: the pool slot of each of the row's keys in order, q_pos [q1 - q0]: each
    query's logical position, bottom-right; visible(arange(k_len), q_pos, ...) says which keys it
    reads). A slot outside the pool's n_slots raises IndexError (as reading the pool there would)."""
    cu_q = case.array(prefix + "cu_seqlens_q")
    seqlens = case.array(prefix + "cache_seqlens")
    table = case.array(prefix + "page_table")
    rows, width, vps = int(call["rows"]), int(call["width"]), int(call["view_page_size"])
    for b in range(rows):
        q0, q1, kl = int(cu_q[b]), int(cu_q[b + 1]), int(seqlens[b])
        if q1 <= q0 or kl <= 0:
            continue
        keys = np.arange(kl)
        slots = table[b * width + keys // vps].astype(np.int64) * vps + keys % vps
        if slots.min() < 0 or slots.max() >= n_slots:
            raise IndexError(f"row {b}: a key at slot {int(slots.min())}..{int(slots.max())}, outside the pool's {n_slots}")
        yield q0, q1, slots, kl - (q1 - q0) + np.arange(q1 - q0)


def part_of(prefix):
    """The part index of a call's array prefix, "groups.G.parts.I." (run_layers') -> I."""
    return int(prefix.rstrip(".").rsplit(".", 1)[1])


def run_layers(case, run_call, merge, outputs=numpy_attention.outputs):
    """A page_table executor's outputs: for each layer, run_call(layer, call, prefix, window_left) ->
    (out [tokens, Hq, Dv], lse [tokens, Hq]) for each kernel call of the group the layer reads,
    merged by LSE in order (merge: numpy_attention.merge, or device_outputs.merge). Returns (out, lse)
    as outputs(case) gives them (float32 numpy, or device tensors: device_outputs.outputs); a layer
    with no call keeps 0 / -inf."""
    out, lse = outputs(case)
    for layer in range(len(case.layers)):
        group, prefix = group_of(case, layer)
        window_left = int(case.plan["window_left"][layer])
        merged = None
        for i, call in enumerate(group["parts"]):
            o, l = run_call(layer, call, f"{prefix}parts.{i}.", window_left)
            merged = (o, l) if merged is None else merge(merged[0], merged[1], o, l)
        if merged is not None:
            out[layer], lse[layer] = merged
    return out, lse
