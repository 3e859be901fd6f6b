"""Measures the precision of sglang's Triton decode kernel on MHA layers (one query head per KV head).

kvfuzz's sglang_triton campaigns report oracle findings on MHA decode whose LSE is off by a few
1e-3 (beyond the bound for fp32 logits). decode_attention.py's MHA kernel (_fwd_kernel_stage1,
used when kv_group_num == 1) computes a logit as tl.sum((q[None, :] * k).to(tl.float32), 1): each
product q_i * k_i is formed in the cache dtype (bf16: 8 significant bits) before the fp32 sum;
the grouped kernel (GQA) uses tl.dot with fp32 accumulation. This script runs the release's
decode_attention_fwd on random bf16 data (one split) for an MHA and a GQA layout and compares
the kernel's LSE with two float64 references: exact products, and products rounded to bf16.

    SGLANG_TRITON_RELEASE=0.5.23 PYTHONPATH=adapters python3 adapters/gpu/sglang_triton_mha_products.py
    # exit 1: the MHA kernel matches the bf16-product reference, not the exact one (reproduced)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_triton as st  # noqa: E402  (loads the release's kernels)


def lse_ref(q, k, scale, rounded):
    prod = q[:, :, None, :].float() * k.transpose(0, 1)[None, :, :, :].float()  # [1, H, keys, d]
    if rounded:
        prod = prod.to(torch.bfloat16)
    logits = prod.double().sum(-1) * scale
    return torch.logsumexp(logits, dim=-1)[0]


def run(q_heads, kv_heads, keys=256, d=64, seed=0):
    torch.manual_seed(seed)
    dev = "cuda"
    q = torch.randn(1, q_heads, d, dtype=torch.bfloat16, device=dev)
    k = torch.randn(keys, kv_heads, d, dtype=torch.bfloat16, device=dev)
    v = torch.randn(keys, kv_heads, d, dtype=torch.bfloat16, device=dev)
    o = torch.empty(1, q_heads, d, dtype=torch.bfloat16, device=dev)
    indptr = torch.tensor([0, keys], dtype=torch.int32, device=dev)
    indices = torch.arange(keys, dtype=torch.int64, device=dev)
    logits = torch.empty(1, q_heads, 1, d, dtype=torch.float32, device=dev)
    lse = torch.full((1, q_heads, 1), float("-inf"), dtype=torch.float32, device=dev)
    splits = torch.ones(1, dtype=torch.int32, device=dev)
    scale = d ** -0.5
    st.decode_attention_fwd(q, k, v, o, indptr, indices, logits, lse, splits, 1, scale, 1.0, 1.0, logit_cap=0.0,
                            sinks=None, xai_temperature_len=-1,
                            **st.later(st.decode_attention_fwd, has_mla=False, use_pdl=st.USE_PDL, page_size=1))
    torch.cuda.synchronize()
    kernel = lse[0, :, 0].double()
    group = q_heads // kv_heads
    kk = k.repeat_interleave(group, dim=1)
    exact = (kernel - lse_ref(q, kk, scale, False)).abs().max().item()
    rounded = (kernel - lse_ref(q, kk, scale, True)).abs().max().item()
    print(f"{q_heads} q heads / {kv_heads} kv heads, {keys} keys, d {d}: max |LSE - exact products| {exact:.3g}, "
          f"max |LSE - bf16 products| {rounded:.3g}")
    return exact, rounded


def main():
    print(f"sglang {st.RELEASE} decode_attention_fwd")
    mha_exact, mha_rounded = run(8, 8)
    gqa_exact, gqa_rounded = run(8, 2)
    if mha_rounded < mha_exact / 10 and gqa_exact < mha_exact / 10:
        print("REPRODUCED: the MHA kernel's logits are sums of bf16-rounded products; the GQA kernel's are exact")
        return 1
    print("not reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
