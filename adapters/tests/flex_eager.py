"""flex_page_table.py with flex_attention run eagerly: torch.compile on the CPU has no return_lse
(InductorError "torch.compile on CPU only supports inference and `return_lse` is not supported yet",
torch 2.11), so this is how the executor's device side (its tensors, merges, fetch) runs on the CPU;
flex's compiled kernels do not. A check by hand, not a ctest:

    TRITON_INTERPRET=1 kvfuzz run --cases 40 --seed 2 --profile tiny --profile small --backend flex_page_table \\
        --jobs 2 --no-shrink --out /tmp/flex-eager \\
        --adapter "TRITON_INTERPRET=1 .sglang/venv/bin/python adapters/tests/flex_eager.py"
"""
import os
import sys

ADAPTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [ADAPTERS, os.path.join(ADAPTERS, "examples"), os.path.join(ADAPTERS, "gpu")]
import flex_page_table  # noqa: E402
from torch.nn.attention.flex_attention import flex_attention  # noqa: E402

if __name__ == "__main__":
    flex_page_table._flex = flex_attention
    flex_page_table.kv.serve(flex_page_table.run)
