"""Import sglang's real attention-backend modules from a pinned wheel without its serving stack
(engine/stub_import.py does the work; this file says which packages sglang keeps real).

    site = install_finder("/path/to/site")   # the folder holding the wheel's `sglang/`
    fa = importlib.import_module("sglang.srt.layers.attention.flashattention_backend")
"""
import torch

from engine import stub_import

# Kernel packages: stubbed even where installed, so that no real kernel runs unrecorded.
STUBBED = ("sgl_kernel", "flashinfer", "flash_attn", "vllm", "deep_gemm", "aiter", "sgl_kernel_npu")
# Real modules: what the metadata code computes with, and PyTorch's own dependencies.
REAL = ("torch", "triton", "numpy", "msgspec", "packaging", "sympy", "mpmath", "filelock", "jinja2", "markupsafe",
        "networkx", "fsspec", "typing_extensions")
# Stubs that must return data rather than stand-ins (module-level code of sglang uses them).
# nixl_ep's index dtype: 0.5.19 to 0.5.22's moe/token_dispatcher/nixl.py asserts it is a torch.dtype at import
# (int64, what it takes where nixl_ep is not installed); EAGLE's utilities import that module.
SHIMS = {"dill": {"dumps": lambda obj, *a, **k: b"", "loads": lambda data, *a, **k: None},
         "nixl_ep": {"topk_idx_t": torch.int64}}


def install_finder(site):
    """Put the wheel's folder first for `sglang`, stubs for what is missing. Returns `site`."""
    return stub_import.install_finder(site, "sglang", REAL, STUBBED, SHIMS)
