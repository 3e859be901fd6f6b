"""vllm_triton.py with vLLM's kernel launch replaced by a probe: each launch's Triton specialization
key, as Triton 3.6's JIT computes it (triton/runtime/jit.py create_function_from_signature: a
constexpr's value; an int's class, 1 / divisible by 16 / other; a pointer's dtype and 16-byte
alignment), one JSON line per launch in $PROBE_OUT; the kernel does not run (outputs stay zero, so
the campaign's findings mean nothing). Distinct lines are the variants a GPU would compile; which
arguments differ between them shows what makes new variants, on the CPU (triton_variants.py logs
the variants a GPU builds). A tool by hand, not a ctest:

    TRITON_INTERPRET=1 kvfuzz run --cases 40 --seed 1 --profile small --profile medium --backend vllm_triton \\
        --jobs 2 --no-shrink --out /tmp/variants \\
        --adapter "PROBE_OUT=/tmp/variants.jsonl TRITON_INTERPRET=1 .sglang/venv/bin/python adapters/tests/vllm_triton_variants.py"
    python3 -c 'import json, sys; keys = {l for l in open(sys.argv[1])}; print(len(keys), "variants")' /tmp/variants.jsonl
"""
import inspect
import json
import os
import sys

ADAPTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ADAPTERS, os.path.join(ADAPTERS, "examples"), os.path.join(ADAPTERS, "gpu")]
import vllm_triton  # noqa: E402
from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import BaseBackend  # noqa: E402


class Probe:
    """kernel_unified_attention[grid](**arguments): the arguments' specialization, appended to $PROBE_OUT."""

    def __init__(self, jit):
        self.params = inspect.signature(jit.fn).parameters

    def __getitem__(self, grid):
        def launch(**arguments):
            key = {}
            for name, p in self.params.items():
                if name in arguments:
                    value = arguments[name]
                    key[name] = repr(value) if "constexpr" in str(p.annotation) else \
                        repr(native_specialize_impl(BaseBackend, value, False, True, True))
            with open(os.environ["PROBE_OUT"], "a") as f:
                f.write(json.dumps(key, sort_keys=True) + "\n")
        return launch


if __name__ == "__main__":
    module = vllm_triton.KERNEL_MODULE
    module.kernel_unified_attention = Probe(module.kernel_unified_attention)
    vllm_triton.kv.serve(vllm_triton.run)
