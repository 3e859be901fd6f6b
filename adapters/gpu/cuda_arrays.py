"""numpy arrays as CUDA tensors, for the GPU adapters."""
import numpy as np
import torch

DEV = torch.device("cuda")
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def dev(a, dtype=None, pad_to=None):
    """A numpy array as a CUDA tensor; index arrays of length 0 get one unused 0 (a real allocation);
    pad_to zero-pads the last dimension (zeros add nothing to q.k or to the kept V channels)."""
    a = np.ascontiguousarray(a)
    if a.size == 0 and a.ndim == 1:
        a = np.zeros(1, dtype=a.dtype)
    t = torch.from_numpy(a).to(DEV)
    if pad_to is not None and t.shape[-1] < pad_to:
        t = torch.nn.functional.pad(t, (0, pad_to - t.shape[-1]))
    return t if dtype is None else t.to(dtype).contiguous()


def host(t):
    """A CUDA tensor as float32 numpy (bf16 / fp16 values convert exactly)."""
    return t.float().cpu().numpy()
