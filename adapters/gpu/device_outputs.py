"""An executor's outputs kept on the device until every value set of the request has run: the GPU
executors declare kv.executor(..., fetch=cuda_arrays.fetch), fill these tensors layer by layer
without waiting for the device, and serve.py copies them all to the host at once (one wait a
request, not one a layer or a kernel call). Host tensors under TRITON_INTERPRET=1 (cuda_arrays.DEV).

    out, lse = outputs(case)                    # zeros / -inf, float32, case.output_shapes()
    out[layer, t:t + n] = o[t:t + n]            # the kernel's rows, converted on the device
    o = padded_rows(o, case.num_tokens, 0.0)     # a call's rows, then 0 for the tokens it has none for
    o, s = merge(o_a, s_a, o_b, s_b)            # numpy_attention.merge's formula, in torch
"""
import math

import torch

from cuda_arrays import DEV


def outputs(case):
    """(out, lse) of case.output_shapes() on the device, float32: 0 and -inf where nothing is written."""
    out_shape, lse_shape = case.output_shapes()
    return (torch.zeros(out_shape, dtype=torch.float32, device=DEV),
            torch.full(lse_shape, -math.inf, dtype=torch.float32, device=DEV))


def padded_rows(t, rows, fill):
    """t [n, ...] on the device as [rows, ...], rows n and on filled with `fill` (t's dtype)."""
    return torch.cat([t, t.new_full((rows - t.shape[0],) + tuple(t.shape[1:]), fill)])


def merge(out_a, lse_a, out_b, lse_b):
    """numpy_attention.merge on device tensors (merge_state: two partial results over disjoint keys,
    weights exp(lse_x - lse)), in the inputs' promoted dtype as numpy computes it (float64 parts: float64)."""
    lse = torch.logaddexp(lse_a, lse_b)
    at = torch.where(torch.isfinite(lse), lse, 0.0)
    wa = torch.where(torch.isneginf(lse_a), 0.0, torch.exp(lse_a - at))
    wb = torch.where(torch.isneginf(lse_b), 0.0, torch.exp(lse_b - at))
    out = wa[..., None] * out_a + wb[..., None] * out_b
    return torch.where(torch.isneginf(lse)[..., None], 0.0, out), lse


def divided(t, divisor):
    """t / divisor in t's dtype, a true division as numpy divides an array by a Python float (CUDA's
    division by a host scalar multiplies by its reciprocal, which can differ in the last bit); the
    divisor is filled on the device (torch.tensor(x, device=...) would copy it from pageable memory,
    waiting for the device)."""
    return t / torch.full((), divisor, dtype=t.dtype, device=t.device)
