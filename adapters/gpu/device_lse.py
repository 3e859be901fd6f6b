"""A page_table kernel call's natural-log LSE re-derived on the device, for an executor whose kernel
returns none (vllm_triton.py): each row's queries over the keys page_table_parts.call_rows lists,
with its visibility, in float64 as numpy_attention.attend computes the LSE (scores q.k * sm_scale,
softcap * tanh(s / softcap), masked, max-subtracted exp sums); rows batched, padded to the batch's
longest. Nothing waits for the device: the rows come from the case's host arrays.

    keys = LayerKeys(case)                                       # float32 Q and K pool per layer
    lse = call_lse(case, layer, call, prefix, window_left, keys)  # [num_tokens, q_heads] float64
"""
import math

import numpy as np
import torch

from cuda_arrays import DEV, dev, device_pool
from device_outputs import divided
from page_table_parts import call_rows, visible

LSE_CHUNK = 1 << 24  # float64 scores a batch of rows holds at once (128 MiB)


class LayerKeys:
    """One layer's queries and K pool on the device in float32 (the case's values; an fp8 pool its
    stored values), built once and kept while the calls stay on that layer: keys(layer) -> (q, k)."""

    def __init__(self, case):
        self.case, self.layer, self.tensors = case, None, None

    def __call__(self, layer):
        if self.layer != layer:
            self.layer = layer
            self.tensors = (dev(self.case.q[layer]), device_pool(self.case, layer, "k", torch.float32))
        return self.tensors


def call_lse(case, layer, call, prefix, window_left, keys):
    """[num_tokens, q_heads] float64 on the device: each row's LSE over its visible keys (an fp8 cache's
    stored values times the layer's k_scale, as the kernel reads them), -inf for tokens in no row and
    queries that see no key."""
    q, k = keys(layer)
    lse = torch.full((case.num_tokens, q.shape[1]), -math.inf, dtype=torch.float64, device=DEV)
    rule = (bool(call["causal"]), int(window_left))
    batch, longest, work = [], (0, 0), 0  # work: the batch's scores unpadded
    # rows by query and key count, so that a batch's padding stays small
    for row in sorted(call_rows(case, call, prefix, window_left, k.shape[0]), key=lambda r: (r[1] - r[0], len(r[2]))):
        m, n = max(longest[0], row[1] - row[0]), max(longest[1], len(row[2]))
        work += (row[1] - row[0]) * len(row[2])
        if batch and ((len(batch) + 1) * q.shape[1] * m * n > LSE_CHUNK or (len(batch) + 1) * m * n > 2 * work + 4096):
            _rows_lse(case, layer, q, k, batch, rule, lse)
            batch, m, n, work = [], row[1] - row[0], len(row[2]), (row[1] - row[0]) * len(row[2])
        batch, longest = batch + [row], (m, n)
    if batch:
        _rows_lse(case, layer, q, k, batch, rule, lse)
    return lse


def _rows_lse(case, layer, q, k, rows, rule, lse):
    """lse[tokens of rows] for a batch of call_rows' rows, padded to the longest query and key runs
    (padding: neither a query nor a key); rule: (causal, window_left) for page_table_parts.visible."""
    H, Hk, D = q.shape[1], k.shape[1], q.shape[2]
    M, N = max(q1 - q0 for q0, q1, _, _ in rows), max(len(slots) for _, _, slots, _ in rows)
    tokens = np.zeros((len(rows), M), np.int64)
    slots = np.zeros((len(rows), N), np.int64)
    q_pos = np.zeros((len(rows), M), np.int64)
    k_len = np.array([len(s) for _, _, s, _ in rows], np.int64)
    for i, (q0, q1, s, p) in enumerate(rows):
        tokens[i, :q1 - q0], slots[i, :len(s)], q_pos[i, :q1 - q0] = np.arange(q0, q1), s, p
    valid = np.arange(M)[None, :] < np.array([q1 - q0 for q0, q1, _, _ in rows])[:, None]  # [r, M]: a query
    key = torch.arange(N, device=DEV)
    seen_by = visible(key, dev(q_pos), *rule) & (key < dev(k_len)[:, None])[:, None, :]  # [r, M, N]
    # an fp8 cache's stored values times the layer's scale in float32, as the kernel reads them (1: unscaled)
    kk = (k[dev(slots)] * torch.full((), case.k_scale(layer), dtype=torch.float32, device=DEV)).double()
    qq = q[dev(tokens)].double().view(len(rows), M, Hk, H // Hk, D)
    s = torch.einsum("rmkgd,rnkd->rkgmn", qq, kk).reshape(len(rows), H, M, N) * case.sm_scale
    if case.softcap:
        s = case.softcap * torch.tanh(divided(s, case.softcap))
    s = s.masked_fill(~seen_by[:, None], -math.inf)
    m = s.amax(dim=3, keepdim=True)
    seen = torch.isfinite(m)
    total = torch.exp(s - torch.where(seen, m, 0.0)).sum(dim=3)
    part = torch.where(seen[..., 0], m[..., 0] + torch.log(torch.where(total > 0, total, 1.0)), -math.inf)
    lse[dev(tokens[valid])] = part.transpose(1, 2)[dev(valid)]
