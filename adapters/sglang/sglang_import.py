"""Import sglang's real attention-backend modules from a pinned wheel without its serving stack.

kvfuzz runs sglang's metadata code unchanged. The backend modules import much of the server
(transformers, PIL, distributed, the kernel packages sgl_kernel and flashinfer); none of that is
called by the metadata builders. Every module under `sglang` loads from the wheel's own source;
every other package sglang imports, but for REAL (PyTorch, Triton, numpy and their own
dependencies) and the standard library, is replaced by a stub whose attributes are inert
stand-ins, whether or not the machine has it installed. Kernels the backends do launch are
replaced after import (recorder.py records each call), so a stub never decides a result.

    site = install_finder("/path/to/site")   # the folder holding the wheel's `sglang/`
    fa = importlib.import_module("sglang.srt.layers.attention.flashattention_backend")
"""
import importlib.abc
import importlib.machinery
import importlib.util
import re
import os
import sys
import types

# Kernel packages: stubbed even where installed, so that no real kernel runs unrecorded.
STUBBED = ("sgl_kernel", "flashinfer", "flash_attn", "vllm", "deep_gemm", "aiter", "sgl_kernel_npu")
# Real modules: what the metadata code computes with, and PyTorch's own dependencies.
REAL = ("torch", "triton", "numpy", "sglang", "msgspec", "packaging", "sympy", "mpmath", "filelock", "jinja2", "markupsafe",
        "networkx", "fsspec", "typing_extensions")
stubbed_names = []  # every module a stub stood in for, for the log


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        # Used as a decorator (@stub or @stub(...)): hand the decorated object back unchanged.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _StubMeta):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, item, value):
        pass

    def __contains__(cls, item):
        return False

    def __len__(cls):
        return 0

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


class _StubBase(metaclass=_StubMeta):
    def __init_subclass__(cls, **kwargs):
        pass

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _stub_class("result")()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __getitem__(self, item):
        return _stub_class("item")()

    def __setitem__(self, item, value):
        pass


def _stub_class(name):
    return _StubMeta(name.rsplit(".", 1)[-1], (_StubBase,), {"__module__": "kvfuzz_stub"})


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []  # a package, so that submodules import too
        self.__file__ = f"<kvfuzz stub {name}>"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


# Stubs that must return data rather than stand-ins (module-level code of sglang uses them).
SHIMS = {"dill": {"dumps": lambda obj, *a, **k: b"", "loads": lambda data, *a, **k: None}}


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        stubbed_names.append(spec.name)
        module = _StubModule(spec.name)
        for attr, value in SHIMS.get(spec.name, {}).items():
            setattr(module, attr, value)
        return module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, site):
        self.site = site

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if name == "sglang":
            # The package without its __init__: that imports the frontend language API and (0.5.11
            # on) patches transformers' classes; the metadata code needs neither.
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [os.path.join(self.site, "sglang")]
            return spec
        if top == "sglang":
            return importlib.machinery.PathFinder.find_spec(name, path or [self.site])
        if top in REAL or top in sys.stdlib_module_names:
            return None
        # Every other package sglang asks for is a stub, installed or not, so that a run does not
        # depend on what else the machine has (a GPU image's transformers, say).
        if top in STUBBED or self._asked_by_sglang():
            return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        return None

    def _asked_by_sglang(self):
        frame = sys._getframe(2)
        while frame is not None:
            file = frame.f_code.co_filename
            if not file.startswith("<frozen") and file != __file__:
                return file.startswith(self.site)
            frame = frame.f_back
        return False


def _skip_fake_kernels_of_stubbed_packages():
    """sglang registers fake (meta) kernels for ops of the kernel packages it imports, on CUDA
    machines (e.g. layers/moe/topk.py: register_fake("sgl_kernel::moe_fused_gate")); those ops do
    not exist when the package is a stub, so their registration is skipped."""
    import torch

    original = torch.library.register_fake
    if getattr(original, "kvfuzz_tolerant", False):
        return

    def register_fake(op, func=None, /, *args, **kwargs):
        if isinstance(op, str) and op.split("::")[0] in STUBBED:
            return func if func is not None else (lambda fn: fn)
        return original(op, func, *args, **kwargs)

    register_fake.kvfuzz_tolerant = True
    torch.library.register_fake = register_fake


def install_finder(site):
    """Put the wheel's folder first for `sglang`, stubs for what is missing. Returns `site`."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(site))
    # `regex` (0.5.23's parsers build patterns at import time) serves as the standard library's `re`.
    sys.modules.setdefault("regex", re)
    _skip_fake_kernels_of_stubbed_packages()
    return site
