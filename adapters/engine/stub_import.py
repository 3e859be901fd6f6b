"""Import an engine's real modules from a pinned release's source without its serving stack.

kvfuzz runs an engine's metadata code unchanged. Its modules import much of the server
(transformers, distributed, kernel packages); none of that is called by the metadata builders.
Every module of the engine's package loads from the release's own source; every other package it
imports, but for `real` (PyTorch, Triton, numpy, their dependencies) and the standard library, is
replaced by a stub whose attributes are inert stand-ins, whether or not the machine has it
installed. Kernels the backends do launch are replaced after import by recorders, so a stub
never decides a result. adapters/sglang/sglang_import.py and adapters/vllm/vllm_import.py say
which packages each engine keeps real.

    install_finder("/path/to/site", "vllm", real=("torch", "numpy"), stubbed=("flashinfer",))
    fa = importlib.import_module("vllm.v1.attention.backends.flash_attn")
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import types

_IMPORTLIB = os.path.dirname(importlib.__file__)
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

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        """A stub used as a field type of a real pydantic model (vLLM's configuration) accepts anything."""
        from pydantic_core import core_schema

        return core_schema.any_schema()

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


class _StubLoader(importlib.abc.Loader):
    def __init__(self, shims):
        self.shims = shims

    def create_module(self, spec):
        stubbed_names.append(spec.name)
        module = _StubModule(spec.name)
        for attr, value in self.shims.get(spec.name, {}).items():
            setattr(module, attr, value)
        return module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, site, package, real, stubbed, shims):
        self.site, self.package, self.real, self.stubbed, self.shims = site, package, real, stubbed, shims

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if name == self.package:
            # The package without its __init__: that imports the engine's front end; the metadata
            # code needs none of it.
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [os.path.join(self.site, self.package)]
            return spec
        stubbed = any(name == s or name.startswith(s + ".") for s in self.stubbed)
        if top == self.package and not stubbed:
            spec = importlib.machinery.PathFinder.find_spec(name, path or [self.site])
            if spec is None and name.rsplit(".", 1)[-1].startswith("_C"):
                stubbed = True  # a compiled extension of the wheel (vllm._C): only its Python source is installed
            else:
                return spec
        if not stubbed and (top in self.real or top in sys.stdlib_module_names):
            return None
        # Every other package the engine asks for is a stub, installed or not, so that a run does
        # not depend on what else the machine has (a GPU image's transformers, say).
        if stubbed or self._asked_by_engine():
            return importlib.machinery.ModuleSpec(name, _StubLoader(self.shims), is_package=True)
        return None

    def _asked_by_engine(self):
        frame = sys._getframe(2)
        while frame is not None:
            file = frame.f_code.co_filename
            # importlib.import_module's own frame (vLLM's LazyLoader imports through it) is skipped too
            if not file.startswith("<frozen") and file != __file__ and not file.startswith(_IMPORTLIB):
                return file.startswith(self.site)
            frame = frame.f_back
        return False


def _skip_fake_kernels_of_stubbed_packages(stubbed):
    """Engines register fake (meta) kernels for ops of the kernel packages they import, on CUDA
    machines (sglang's layers/moe/topk.py: register_fake("sgl_kernel::moe_fused_gate")); those ops
    do not exist when the package is a stub, so their registration is skipped."""
    import torch

    original = torch.library.register_fake
    if getattr(original, "kvfuzz_tolerant", False):
        return

    def register_fake(op, func=None, /, *args, **kwargs):
        if isinstance(op, str) and op.split("::")[0] in stubbed:
            return func if func is not None else (lambda fn: fn)
        return original(op, func, *args, **kwargs)

    register_fake.kvfuzz_tolerant = True
    torch.library.register_fake = register_fake


def _stub_versions(site, package):
    """importlib.metadata.version(name) for a package that is a stub here answers the lowest version
    the release requires of it (its .dist-info METADATA), as module-level version checks ask."""
    import glob
    import importlib.metadata as metadata

    if getattr(metadata.version, "kvfuzz_stubbed", False):
        return
    floors = {}
    for path in glob.glob(os.path.join(site, f"{package}-*.dist-info", "METADATA")):
        for line in open(path, encoding="utf-8"):
            m = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)[^;]*?>=\s*([0-9][0-9.]*)", line)
            if m:
                floors.setdefault(m.group(1).lower().replace("_", "-"), m.group(2))
    original = metadata.version

    def version(name):
        try:
            return original(name)
        except metadata.PackageNotFoundError:
            return floors.get(name.lower().replace("_", "-"), "0.0.0")

    version.kvfuzz_stubbed = True
    metadata.version = version


def install_finder(site, package, real, stubbed=(), shims=None):
    """Put the release's folder first for `package`, stubs for what is missing. Returns `site`.
    real: top-level packages imported for real (besides the standard library); stubbed: packages
    (or the engine's own subpackages, "vllm.vllm_flash_attn") stubbed even where installed (kernel packages: no real kernel may run unrecorded); shims:
    {module: {attr: value}} for stubs that must return data (module-level code uses them)."""
    if site not in sys.path:
        sys.path.append(site)  # the release's .dist-info: importlib.metadata.version(package) answers
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(site, package, tuple(real) + (package,), tuple(stubbed), shims or {}))
    # `regex` (parsers that build patterns at import time) serves as the standard library's `re`.
    sys.modules.setdefault("regex", re)
    _skip_fake_kernels_of_stubbed_packages(tuple(stubbed))
    _stub_versions(site, package)
    return site
