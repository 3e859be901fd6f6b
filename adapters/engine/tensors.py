"""Recorded kernel arguments as the contract's arrays (recorders of every engine adapter use these).

    page_table = host(block_table, "block_table")          # a CPU copy, whatever device it was on
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
