"""Reproduces what kvfuzz's long profile found in PyTorch's flex attention: a forward pass whose K/V
tensor holds more than 2^31 elements reads the wrong keys or faults (illegal memory access).

The long profile's pools put a request's pages past element offset 2^31; flex_page_table crashed on
both long cases it ran on the H100 (torch 2.11). This script isolates it from kvfuzz: one query
that may see only the LAST key of K/V [1, 1, n, 64] (a block mask of that one block and a mask_mod),
so the right output is that key's V row. Each size runs in its own process (a fault poisons the
CUDA context). Known upstream: pytorch/pytorch#190857 (backward, K/V address past INT32_MAX) and
vllm-project/vllm#50427 (paged K/V offsets overflow int32 in the forward).

    python3 adapters/gpu/flex_int32_offsets.py     # exit 1: reproduced (the large size is wrong or faults)
"""
import subprocess
import sys

import torch

D = 64


def one(n):
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    dev = "cuda"
    torch.manual_seed(0)
    k = torch.zeros(1, 1, n, D, dtype=torch.bfloat16, device=dev)
    v = torch.zeros_like(k)
    k[0, 0, -1] = torch.randn(D, device=dev)
    v[0, 0, -1] = torch.randn(D, device=dev)
    q = torch.randn(1, 1, 128, D, dtype=torch.bfloat16, device=dev)
    last = n - 1
    block = 128
    # kv_indices [B, H, q blocks, kv blocks]: its width is the number of KV blocks; the first entry is
    # the one block this query row reads (num = 1)
    num = torch.ones(1, 1, 1, dtype=torch.int32, device=dev)
    idx = torch.zeros(1, 1, 1, (n + block - 1) // block, dtype=torch.int32, device=dev)
    idx[0, 0, 0, 0] = last // block
    bm = BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=(block, block), mask_mod=lambda b, h, qi, ki: ki == last,
                                  seq_lengths=(128, n))
    out = torch.compile(flex_attention)(q, k, v, block_mask=bm)
    torch.cuda.synchronize()
    err = (out[0, 0, 0].float() - v[0, 0, -1].float()).abs().max().item()
    print(f"n={n} ({n * D} elements per K/V, last key at element {last * D}): max |out - V[last]| = {err:.4g}")
    return 0 if err < 1e-2 else 1


def main():
    if len(sys.argv) == 2:
        return one(int(sys.argv[1]))
    small = (1 << 31) // D - 4096            # last key below element 2^31
    large = (1 << 31) // D + 4096            # last key past it
    rcs = [subprocess.run([sys.executable, __file__, str(n)]).returncode for n in (small, large)]
    if rcs[0] != 0:
        print(f"inconclusive: the small size failed too (exit {rcs[0]})")
        return 2
    if rcs[1] != 0:
        print(f"REPRODUCED: below 2^31 elements the right key is read; past it, exit {rcs[1]} (wrong key or fault)")
        return 1
    print("not reproduced: both sizes read the right key")
    return 0


if __name__ == "__main__":
    sys.exit(main())
