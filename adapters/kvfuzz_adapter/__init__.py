"""kvfuzz adapters: put your attention planner or kernel under kvfuzz, in its own process.

An executor receives a family's metadata, Q and the K/V pools (the step's new K/V already
written) and returns the output and the natural-log LSE; a planner receives what a production
planner sees and returns a family's metadata. kvfuzz runs the adapter as a child process, sends it
many cases, and checks every answer against its exact oracle (backends/contract/PROTOCOL.md).

    import kvfuzz_adapter as kv

    @kv.executor(name="my_kernel", family="page_table", supports={"dtypes": ["bf16", "fp16"]})
    def run(case):
        ...                                   # case.q, case.k_cache(layer), case.array("full.parts.0.page_table")
        return out, lse                       # [layers, tokens, q_heads, v_head_dim], [layers, tokens, q_heads]

    if __name__ == "__main__":
        kv.serve(run)

    # kvfuzz check case.json --adapter "python3 my_kernel.py" --backend my_kernel
"""

from kvfuzz_adapter.case import Case, PlanCase
from kvfuzz_adapter.declare import Unsupported, executor, planner
from kvfuzz_adapter.serve import serve

__all__ = ["Case", "PlanCase", "Unsupported", "executor", "planner", "serve"]
CONTRACT_VERSION = 1
