"""Attention arithmetic the numpy example executors share: one kernel row, and the LSE merge; and
the host-side layout helpers of the GPU adapters (adapters/gpu/): checked reads, token ranges,
zero padding.

Plain float64 numpy, written from the semantics, not from kvfuzz's C++: a query reads the keys its
metadata names, masked by a boolean [q_len, k_len] matrix.
"""
import math

import numpy as np

LOG2E = 1.0 / math.log(2.0)


def outputs(case):
    """(out, lse) of case.output_shapes() as float32 arrays, 0 and -inf where nothing is written (on a
    GPU: adapters/gpu/device_outputs.py)."""
    out_shape, lse_shape = case.output_shapes()
    return np.zeros(out_shape, np.float32), np.full(lse_shape, -np.inf, np.float32)


def dequantize(stored, scale):
    """What a kernel reads from an fp8 cache with a per-tensor scale (case.k_scale / v_scale):
    stored * scale, in float32 (exact: the scales have at most 4 significand bits)."""
    return stored if scale == 1.0 else stored * np.float32(scale)


def attend(q, k, v, visible, sm_scale, softcap):
    """q [n_q, Hq, D], k [n_k, Hkv, D], v [n_k, Hkv, Dv], visible [n_q, n_k] ->
    out [n_q, Hq, Dv], natural-log lse [n_q, Hq]; a query that sees no key gets 0 and -inf."""
    n_q, hq, d = q.shape
    n_k, hkv, dv = v.shape
    group = hq // hkv
    out = np.zeros((n_q, hq, dv))
    lse = np.full((n_q, hq), -np.inf)
    if n_q == 0 or n_k == 0:
        return out, lse
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # non-finite keys are the caller's
        # One matrix product per KV head: its q heads h = kv_head * group + g stacked as rows (g, query).
        qg = q.astype(np.float64).reshape(n_q, hkv, group, d).transpose(1, 2, 0, 3).reshape(hkv, group * n_q, d)
        s = np.matmul(qg, k.astype(np.float64).transpose(1, 2, 0))  # [Hkv, group * n_q, n_k]
        s *= sm_scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        hidden = np.tile(~np.asarray(visible, dtype=bool), (group, 1))
        np.copyto(s, -np.inf, where=hidden[None])
        m = s.max(axis=2, keepdims=True)
        seen = np.isfinite(m)
        s -= np.where(seen, m, 0.0)
        w = np.exp(s, out=s)  # masked keys weigh exactly 0
        total = w.sum(axis=2, keepdims=True)
        vt = v.astype(np.float64).transpose(1, 0, 2)  # [Hkv, n_k, Dv]
        finite = np.isfinite(vt)
        if finite.all():
            o = np.matmul(w, vt)
        else:
            # a used key that is not finite must still poison the result, as it would in a kernel
            o = np.einsum("hqk,hkd->hqd", w, np.where(finite, vt, 0.0)) + np.einsum("hqk,hkd->hqd", w,
                                                                                      np.where(finite, 0.0, vt))
        o = np.where(seen, o / np.where(total > 0, total, 1.0), 0.0)
        l = np.where(seen[..., 0], m[..., 0] + np.log(np.where(total[..., 0] > 0, total[..., 0], 1.0)), -np.inf)
    out = o.reshape(hkv, group, n_q, dv).transpose(2, 0, 1, 3).reshape(n_q, hq, dv)
    lse = l.reshape(hkv, group, n_q).transpose(2, 0, 1).reshape(n_q, hq)
    return out, lse


def merge(out_a, lse_a, out_b, lse_b):
    """merge_state: two partial results over disjoint keys, weights exp(lse_x - lse)."""
    lse = np.logaddexp(lse_a, lse_b)
    with np.errstate(invalid="ignore"):
        wa = np.where(np.isneginf(lse_a), 0.0, np.exp(lse_a - np.where(np.isfinite(lse), lse, 0.0)))
        wb = np.where(np.isneginf(lse_b), 0.0, np.exp(lse_b - np.where(np.isfinite(lse), lse, 0.0)))
    out = wa[..., None] * out_a + wb[..., None] * out_b
    return np.where(np.isneginf(lse)[..., None], 0.0, out), lse


def fold_sinks(out, lse, sinks):
    """An attention sink per q head (sinks [Hq]) joins finished results out [n, Hq, Dv], lse [n, Hq]:
    a merge with the state (0, sink), e^sink in the denominator only. Once per query: folded into
    every part of a cascade it counts once per part."""
    sink = np.broadcast_to(np.asarray(sinks, dtype=np.float64), lse.shape)
    return merge(out, lse, np.zeros_like(out), sink)


def merge_base2(acc, part, natural_exp=False):
    """Merges FlashInfer-style partial results (out, base-2 lse) in call order: exp2/log2 on the
    base-2 values (cascade.cuh MergeState, a true merge), or with natural_exp exp/log on the same
    base-2 values (sglang's triton merge_state fallback: the fault kvfuzz reproduces)."""
    if acc is None:
        return part
    if natural_exp:
        return merge(acc[0], acc[1], part[0], part[1])
    out, lse = merge(acc[0], acc[1] / LOG2E, part[0], part[1] / LOG2E)
    return out, lse * LOG2E


def take(array, index):
    """array[index] along the first axis for an int or an integer array, as a checked buffer reads:
    an index outside [0, len) raises IndexError (numpy alone would wrap a negative one)."""
    index = np.asarray(index, dtype=np.int64)
    if index.size and (index.min() < 0 or index.max() >= len(array)):
        bad = index[(index < 0) | (index >= len(array))].ravel()[0]
        raise IndexError(f"index {int(bad)} outside an array of {len(array)} entries")
    return array[index]


def rows_of(qo_indptr, rows, n_tokens):
    """[(row, first token, q_len)] of a kernel call's rows; an indptr outside the batch raises."""
    out = []
    for r in range(rows):
        q0, q1 = int(qo_indptr[r]), int(qo_indptr[r + 1])
        if q1 < q0 or q0 < 0 or q1 > n_tokens:
            raise IndexError(f"row {r}: qo_indptr [{q0}, {q1}) is not a token range of the batch's {n_tokens}")
        out.append((r, q0, q1 - q0))
    return out


def padded(a, rows, w):
    """[n, H, d] -> [rows, H, w] float32, zero-padded (rows past n, columns to the width w)."""
    out = np.zeros((rows,) + a.shape[1:-1] + (w,), np.float32)
    out[:len(a), ..., :a.shape[-1]] = a
    return out
