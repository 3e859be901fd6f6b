"""flashinfer_paged_csr.py / flashinfer_mla.py with their device side on the CPU: flashinfer_kernels.py's
array side (outputs, full, index, where, natural_lse, merge_natural, FETCH: torch tensors, host ones
under TRITON_INTERPRET=1) around flashinfer_emulated.py's numpy model of the wrappers, whose results
come back as float32 tensors as the real wrappers' do. So the executors' token selection, merges and
LSE base change run in torch and their outputs leave through cuda_arrays.fetch, as on a GPU; FlashInfer
itself is not imported (flashinfer_kernels' `from flashinfer import ...` meets empty stand-ins).

    TRITON_INTERPRET=1 kvfuzz run --backend flashinfer:flashinfer_paged_csr \\
        --adapter "TRITON_INTERPRET=1 .sglang/venv/bin/python adapters/tests/flashinfer_device_glue.py \\
                   adapters/gpu/flashinfer_paged_csr.py"
"""
import os
import runpy
import sys
import types

ADAPTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ADAPTERS, os.path.join(ADAPTERS, "examples"), os.path.join(ADAPTERS, "gpu")]
os.environ.pop("KVFLASHINFER_EMULATE", None)  # the executor imports flashinfer_kernels (below)


def stand_in(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


class Unused:  # the wrappers flashinfer_kernels builds lazily, never here
    def __init__(self, *args, **kwargs):
        raise AssertionError("a FlashInfer wrapper was built: the glue runs flashinfer_emulated's model")


stand_in("flashinfer", BatchDecodeWithPagedKVCacheWrapper=Unused, BatchPrefillWithPagedKVCacheWrapper=Unused,
         BatchPrefillWithRaggedKVCacheWrapper=Unused)
stand_in("flashinfer.cascade", merge_state=Unused)
stand_in("flashinfer.mla", BatchMLAPagedAttentionWrapper=Unused, MLAPlanMetadata=Unused)
for name in ("flashinfer.mla._batch_mla", "flashinfer.mla._batch_mla._backends"):
    stand_in(name)
stand_in("flashinfer.mla._batch_mla._backends._capabilities", _BackendPlanUnsupportedError=RuntimeError)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import flashinfer_emulated as model  # noqa: E402
import flashinfer_kernels as device  # noqa: E402


def host(x):
    return x.numpy() if isinstance(x, torch.Tensor) else x


def as_run(fn):
    """fn of the numpy model, called as the real one is, its (out, lse) as float32 tensors."""
    def call(*args, **kwargs):
        return tuple(torch.from_numpy(np.asarray(t)).float() for t in fn(*map(host, args), **kwargs))
    return call


glue = types.ModuleType("flashinfer_kernels")
glue.pages, glue.mla_plan = model.pages, model.mla_plan
for name in ("decode", "prefill_paged", "prefill_ragged", "merge_state", "mla_run"):
    setattr(glue, name, as_run(getattr(model, name)))
for name in ("FETCH", "outputs", "full", "index", "where", "natural_lse", "merge_natural"):
    setattr(glue, name, getattr(device, name))
sys.modules["flashinfer_kernels"] = glue

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: flashinfer_device_glue.py EXECUTOR.py (flashinfer_paged_csr.py or flashinfer_mla.py)")
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
