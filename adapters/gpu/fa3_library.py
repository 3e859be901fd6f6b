"""sgl-kernel's FA3 library for the executors that call it (fa3_page_table.py, fa3_mla.py).

KVFUZZ_FA3=DIR names the folder holding sgl_kernel/ (`python3 ci/gpu_fa3.py unpack --to DIR ...`,
docs/gpu.md "Real FA3"). Importing this module checks the folder before torch loads; load() imports
sgl_kernel.flash_attn from it. Without a library (KVFUZZ_FA3 unset, no sgl_kernel/flash_attn.py, not
importable) or without a CUDA device: exit 2, the calling executor's name and what is missing said.

    import fa3_library
    flash_attn_with_kvcache = fa3_library.load()
"""
import importlib
import os
import sys

WHERE = os.environ.get("KVFUZZ_FA3", "")


def cannot_run(message):
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(2)


if not WHERE:
    cannot_run("KVFUZZ_FA3 is not set: it names the folder holding sgl-kernel's sgl_kernel/ "
               "(python3 ci/gpu_fa3.py unpack --to DIR ...)")
if not os.path.isfile(os.path.join(WHERE, "sgl_kernel", "flash_attn.py")):
    cannot_run(f"KVFUZZ_FA3={WHERE}: no sgl_kernel/flash_attn.py there (python3 ci/gpu_fa3.py unpack --to DIR ...)")


def load():
    """sgl_kernel.flash_attn.flash_attn_with_kvcache from KVFUZZ_FA3 (exit 2 without a CUDA device or
    when it does not import)."""
    import torch
    from cuda_arrays import DEV
    if DEV.type == "cuda" and not torch.cuda.is_available():
        cannot_run(f"KVFUZZ_FA3={WHERE}: FA3's kernel needs a CUDA device, torch sees none")
    sys.path.insert(0, os.path.abspath(WHERE))
    try:
        return importlib.import_module("sgl_kernel.flash_attn").flash_attn_with_kvcache
    except Exception as e:  # noqa: BLE001 - any import failure: the library cannot run here
        cannot_run(f"KVFUZZ_FA3={WHERE}: sgl_kernel.flash_attn does not import ({type(e).__name__}: {e})")
