"""KVFUZZ_TRITON_VARIANTS=DIR: every Triton kernel variant this process builds or loads (a miss of
Triton's in-memory cache: a compile, or a load from its disk cache), one line each in
DIR/variants-PID.txt: seconds since the process started and Triton's own description of the
variant (the kernel, each argument's specialization: a constexpr's value, a pointer's alignment,
an integer's divisibility by 16 or value 1; then its options). Comparing a kernel's lines shows which arguments make new
variants. A tool for an adapter's author (docs/gpu.md "What limits a GPU now"), off by default."""
import os
import time

_START = time.monotonic()


def log_from_environment():
    folder = os.environ.get("KVFUZZ_TRITON_VARIANTS")
    if not folder:
        return
    from triton import knobs
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"variants-{os.getpid()}.txt")

    def hook(*, key, fn, **_):
        # key[0]: each argument's (type, specialization); Triton's own `repr` pairs the names with
        # the options string instead (triton/runtime/jit.py _call_hook, 3.6.0).
        args = ", ".join(f"{p.name}={spec}" for p, spec in zip(fn.jit_function.params, key[0]))
        with open(path, "a") as f:
            f.write(f"{time.monotonic() - _START:.2f} {fn.name}({args}) {key[1]}\n")
        return None  # build it as usual

    knobs.runtime.jit_cache_hook = hook
