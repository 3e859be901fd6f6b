"""Attention arithmetic the numpy example executors share: one kernel row, and the LSE merge.

Plain float64 numpy, written from the semantics, not from kvfuzz's C++: a query reads the keys its
metadata names, masked by a boolean [q_len, k_len] matrix.
"""
import numpy as np


def attend(q, k, v, visible, sm_scale, softcap):
    """q [n_q, Hq, D], k [n_k, Hkv, D], v [n_k, Hkv, Dv], visible [n_q, n_k] ->
    out [n_q, Hq, Dv], natural-log lse [n_q, Hq]; a query that sees no key gets 0 and -inf."""
    n_q, hq, _ = q.shape
    n_k, hkv, dv = v.shape
    group = hq // hkv
    out = np.zeros((n_q, hq, dv))
    lse = np.full((n_q, hq), -np.inf)
    if n_q == 0 or n_k == 0:
        return out, lse
    kh = np.repeat(k.astype(np.float64), group, axis=1)  # [n_k, Hq, D]
    vh = np.repeat(v.astype(np.float64), group, axis=1)
    s = np.einsum("qhd,khd->hqk", q.astype(np.float64), kh) * sm_scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    mask = np.broadcast_to(visible[None, :, :], s.shape)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=2, keepdims=True)
    seen = np.isfinite(m)
    w = np.where(mask, np.exp(s - np.where(seen, m, 0.0)), 0.0)  # masked keys weigh exactly 0
    total = w.sum(axis=2, keepdims=True)
    o = np.einsum("hqk,khd->hqd", w, np.where(np.isfinite(vh), vh, 0.0) if not mask.all() else vh)
    # a used key that is not finite must still poison the result, as it would in a kernel
    bad = np.einsum("hqk,khd->hqd", w, np.where(np.isfinite(vh), 0.0, vh)) if not mask.all() else 0.0
    o = o + bad
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(seen, o / np.where(total > 0, total, 1.0), 0.0)
        l = np.where(seen[..., 0], m[..., 0] + np.log(np.where(total[..., 0] > 0, total[..., 0], 1.0)), -np.inf)
    return o.transpose(1, 0, 2), l.transpose(1, 0)


def merge(out_a, lse_a, out_b, lse_b):
    """merge_state: two partial results over disjoint keys, weights exp(lse_x - lse)."""
    lse = np.logaddexp(lse_a, lse_b)
    with np.errstate(invalid="ignore"):
        wa = np.where(np.isneginf(lse_a), 0.0, np.exp(lse_a - np.where(np.isfinite(lse), lse, 0.0)))
        wb = np.where(np.isneginf(lse_b), 0.0, np.exp(lse_b - np.where(np.isfinite(lse), lse, 0.0)))
    out = wa[..., None] * out_a + wb[..., None] * out_b
    return np.where(np.isneginf(lse)[..., None], 0.0, out), lse


def take(array, index):
    """array[index] along the first axis for an int or an integer array, as a checked buffer reads:
    an index outside [0, len) raises IndexError (numpy alone would wrap a negative one)."""
    index = np.asarray(index, dtype=np.int64)
    if index.size and (index.min() < 0 or index.max() >= len(array)):
        bad = index[(index < 0) | (index >= len(array))].ravel()[0]
        raise IndexError(f"index {int(bad)} outside an array of {len(array)} entries")
    return array[index]
