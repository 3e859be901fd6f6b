"""The FA3 stand-in (adapters/repro/fa3_standin.py), the one non-upstream piece of the FA
reproducers, against a float64 attention from logical positions: paged caches with shuffled pages,
GQA, varlen queries aligned bottom-right, causal, sliding windows, chunks, soft cap, LSE merges.
Each configuration also runs a wrong stand-in (its window or chunk one larger, or not causal),
which must fail: the check can fail.

    .sglang/venv/bin/python adapters/tests/fa3_standin_test.py     # about 2 s
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "repro"))
import fa3_standin  # noqa: E402


def paged(rng, lens, page, hk, d, dv):
    """Each request's keys at logical positions 0..len-1 in shuffled pages: (k_cache, v_cache,
    page_table, k_by_position, v_by_position)."""
    pages_of = [(n + page - 1) // page for n in lens]
    order = rng.permutation(sum(pages_of) + 1)  # one spare page nobody owns
    k_cache = torch.from_numpy(rng.standard_normal((len(order), page, hk, d)).astype(np.float32))
    v_cache = torch.from_numpy(rng.standard_normal((len(order), page, hk, dv)).astype(np.float32))
    table = torch.zeros(len(lens), max(pages_of), dtype=torch.int32)
    kpos, vpos, at = [], [], 0
    for b, n in enumerate(lens):
        ids = order[at:at + pages_of[b]]
        at += pages_of[b]
        table[b, :len(ids)] = torch.from_numpy(ids.astype(np.int32))
        kpos.append(np.stack([k_cache[ids[p // page], p % page].numpy() for p in range(n)]).astype(np.float64))
        vpos.append(np.stack([v_cache[ids[p // page], p % page].numpy() for p in range(n)]).astype(np.float64))
    return k_cache, v_cache, table, kpos, vpos


def oracle(q, kpos, vpos, cache_len, q_len, scale, kind, radius, softcap):
    """float64: query i of a row at position cache_len - q_len + i sees its keys at positions
    lo .. P (kind 'full': lo 0; 'window': P - radius; 'chunk': P // radius * radius)."""
    heads, group = q.shape[1], q.shape[1] // kpos.shape[1]
    out = np.zeros((q_len, heads, vpos.shape[-1]))
    for i in range(q_len):
        p = cache_len - q_len + i
        lo = {"full": 0, "window": max(0, p - radius), "chunk": p // max(radius, 1) * radius}[kind]
        for h in range(heads):
            s = kpos[lo:p + 1, h // group] @ q[i, h].astype(np.float64) * scale
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            w = np.exp(s - s.max())
            out[i, h] = w @ vpos[lo:p + 1, h // group] / w.sum()
    return out


def run(rng, kind, radius, softcap, page, shift=0):
    """The largest |stand-in - oracle| over a batch of three rows (shift: a wrong stand-in, its window
    or chunk one larger, or for full attention not causal)."""
    heads, hk, d, dv = 4, 2, 8, 6
    lens, q_lens = [9, 1, 14], [3, 1, 5]
    k_cache, v_cache, table, kpos, vpos = paged(rng, lens, page, hk, d, dv)
    q = rng.standard_normal((sum(q_lens), heads, d)).astype(np.float32)
    cu = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=torch.int32)
    window = (radius + shift, -1) if kind == "window" else (-1, -1)
    chunk = radius + shift if kind == "chunk" else None
    lens_t = torch.tensor(lens, dtype=torch.int32)
    out = fa3_standin.flash_attn_with_kvcache(torch.from_numpy(q), k_cache, v_cache, page_table=table,
                                             cache_seqlens=lens_t, cu_seqlens_q=cu, max_seqlen_q=max(q_lens),
                                             softmax_scale=0.3, causal=not (shift and kind == "full"), window_size=window,
                                             attention_chunk=chunk, softcap=softcap)
    err = 0.0
    for b in range(len(lens)):
        lo, hi = int(cu[b]), int(cu[b + 1])
        ref = oracle(q[lo:hi], kpos[b], vpos[b], lens[b], q_lens[b], 0.3, kind, radius, softcap)
        err = max(err, float(np.abs(out[lo:hi].double().numpy() - ref).max()))
    return err


def merge_error(rng):
    """merge_state_v2 of two calls over disjoint key ranges (the cascade) against one call over both."""
    k_cache, v_cache, table, _, _ = paged(rng, [12], 4, 1, 8, 8)
    q = torch.from_numpy(rng.standard_normal((2, 2, 8)).astype(np.float32))
    cu = torch.tensor([0, 2], dtype=torch.int32)
    call = lambda t, n, causal: fa3_standin.flash_attn_with_kvcache(  # noqa: E731
        q, k_cache, v_cache, page_table=t, cache_seqlens=torch.tensor([n], dtype=torch.int32), cu_seqlens_q=cu,
        max_seqlen_q=2, causal=causal, return_softmax_lse=True)
    whole, _ = call(table, 12, False)
    first, lse_a = call(table, 8, False)
    second, lse_b = call(table[:, 2:], 4, False)  # keys 8..11: the table from its third page
    merged, _ = fa3_standin.merge_state_v2(first, lse_a.T.contiguous(), second, lse_b.T.contiguous())
    return float((merged - whole).abs().max())


def main():
    failures = []
    rng = np.random.default_rng(7)
    configs = [("full", 0, 0.0, 1), ("full", 0, 0.0, 4), ("window", 3, 0.0, 2), ("window", 0, 0.0, 1),
               ("chunk", 4, 0.0, 4), ("chunk", 3, 0.0, 1), ("window", 5, 2.0, 2)]
    for kind, radius, softcap, page in configs:
        err = run(rng, kind, radius, softcap, page)
        wrong = run(rng, kind, radius, softcap, page, shift=1)
        name = f"{kind} {radius}, softcap {softcap}, page {page}"
        print(f"{name}: max error {err:.2e}; a stand-in off by one: {wrong:.2e}")
        if not err < 1e-4:
            failures.append(f"{name}: the stand-in is off by {err}")
        if not wrong > 1e-3:
            failures.append(f"{name}: a stand-in off by one passes ({wrong})")
    err = merge_error(rng)
    print(f"merge_state_v2 of a split cascade vs one call: {err:.2e}")
    if not err < 1e-5:
        failures.append(f"merge_state_v2 is off by {err}")
    # a page id past the cache faults, as the kernel would
    k_cache, v_cache, table, _, _ = paged(rng, [4], 2, 1, 8, 8)
    table[0, 1] = k_cache.shape[0]
    try:
        fa3_standin.flash_attn_with_kvcache(torch.zeros(1, 1, 8), k_cache, v_cache, page_table=table,
                                            cache_seqlens=torch.tensor([4]), cu_seqlens_q=torch.tensor([0, 1]),
                                            max_seqlen_q=1, causal=True)
        failures.append("a page past the cache was read without a fault")
    except IndexError:
        pass
    for f in failures:
        print("FAIL:", f)
    print("fa3 stand-in test:", "all passed" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
