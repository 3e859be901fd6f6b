"""Recorded kernel arguments as the contract's arrays (recorders of every engine adapter use these).

    page_table = host(block_table, "block_table")          # a CPU copy, whatever device it was on
    call["sinks"] = sinks(s_aux, "s_aux")                  # [q_heads] floats, or None
    arrays["full.parts.0.page_table"] = int32(page_table, "page_table")
"""
import numpy as np


def int32(t, what):
    """A recorded index tensor as the contract's int32 array; a value outside int32 is an error."""
    a = t.reshape(-1).numpy().astype(np.int64)
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise OverflowError(f"{what} holds values outside int32")
    return a.astype(np.int32)


def host(t, name="tensor"):
    """A recorded tensor, on the host and contiguous (the kernels read by row stride = width)."""
    if t is None:
        raise TypeError(f"the backend handed the kernel {name}=None")
    return t.detach().to("cpu").contiguous().clone()


def sinks(t, name="sinks"):
    """The attention sinks a kernel call was handed (FlashAttention's s_aux, Triton's sinks) as the
    logits its softmax adds, a list of floats (one per q head), or None when it was handed none."""
    return None if t is None else [float(x) for x in host(t, name).float().flatten().tolist()]
