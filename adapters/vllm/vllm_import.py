"""Import vLLM's real attention-metadata modules from a pinned release without its serving stack
(engine/stub_import.py does the work; this file says which packages vLLM keeps real).

    install_finder(".vllm/0.33.0")    # the folder holding the wheel's `vllm/`
    fa = importlib.import_module("vllm.v1.attention.backends.flash_attn")

The wheel's compiled extensions (vllm._C, ...) and its FlashAttention build (vllm.vllm_flash_attn)
are stubs; the kernels the backends launch are replaced by recorders after import (recorder.py).
"""
from engine import stub_import

# Kernel packages, vLLM's own kernel subpackages and its API server (vllm.entrypoints: the request
# protocol some core modules import for types): stubbed even where installed.
# vllm.compilation.passes: torch.compile's fusion passes, whose import reads compiled ops this host
# lacks (torch.ops._C.rotary_embedding); V2's gemma4/speculator.py imports vllm.compilation.backends
# (for set_model_tag, used by load_draft_model, which the adapter does not run), which imports them.
STUBBED = ("flashinfer", "flash_attn", "vllm.vllm_flash_attn", "vllm._custom_ops", "vllm._C", "vllm.entrypoints", "sgl_kernel",
           "vllm.compilation.passes",
           "deep_gemm", "aiter", "flashmla", "triton_kernels")
# Real modules: what the metadata code computes with, and PyTorch's own dependencies.
# pydantic: vLLM's configuration classes are pydantic dataclasses (real, from .vllm/pyextra, which
# ci/vllm.sh installs).
REAL = ("torch", "triton", "numpy", "packaging", "sympy", "mpmath", "filelock", "jinja2", "markupsafe", "networkx",
        "fsspec", "typing_extensions", "pydantic", "pydantic_core", "annotated_types", "typing_inspection")


def install_finder(site):
    """Put the wheel's folder first for `vllm`, stubs for what is missing. Returns `site`."""
    stub_import.install_finder(site, "vllm", REAL, STUBBED)
    _package_attributes(site)
    return site


def _package_attributes(site):
    """What vllm/__init__.py (not run: it imports the engine) exports that modules import from the
    package: the backward-compatibility markers of vllm/_bc_linter.py (0.10 on, where it exists)."""
    import importlib
    import os

    if os.path.exists(os.path.join(site, "vllm", "_bc_linter.py")):
        package, linter = importlib.import_module("vllm"), importlib.import_module("vllm._bc_linter")
        for name in ("bc_linter_include", "bc_linter_skip"):
            setattr(package, name, getattr(linter, name))
