"""Runs sglang's Triton extend_attention_fwd alone, on random data, at one (Lq, Lv) head-dim pair.

A kvfuzz sglang_triton campaign on the H100 met an illegal memory access in extend_attention_fwd
(0.5.23) on a case with head_dim 32 and v_head_dim 16 (corpus/gpu/sglang_triton_extend_narrow_v.json);
the same case with v_head_dim 32 passes. This script takes kvfuzz's metadata out of the picture:
one request of T new tokens, no prefix, causal, GQA 2, the release's kernel and nothing else,
against a float64 reference. Run each pair in its own process (an illegal address poisons the
CUDA context); TRITON_INTERPRET=1 runs the kernel in Triton's interpreter on the CPU (fp16).
Measured (H100, Triton 3.6): 0.5.23 at 32 16 21 28 (window 28): 4 of 21 queries wrong, in bf16 and
fp16; 64 32 40 8: 24 of 40; right without a window and at 32/32, 64/64, 128/64, 128/128, 192/128
with one; 0.5.10.post1 faults at 32/16 and 64/32 without a window. The interpreter: right (known
issue triton-sm90-extend-narrow-v).

    SGLANG_TRITON_RELEASE=0.5.23 PYTHONPATH=adapters python3 adapters/gpu/sglang_triton_extend_dims.py 32 16
    # exit 0: the output matches a float64 reference; exit 1: it does not (or a CUDA error's traceback)
Options: LQ LV [TOKENS [WINDOW [PAGE_SIZE [DTYPE]]]] (defaults 21, -1 (none), 1, bf16).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_triton as st  # noqa: E402  (loads the release's kernels)
from cuda_arrays import DEV  # noqa: E402


def main(lq, lv, tokens=21, window=-1, page_size=1, dtype="bf16"):
    torch.manual_seed(0)
    dev, dt = DEV, {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    heads, kv_heads, slots = 8, 4, 64
    q = torch.randn(tokens, heads, lq, dtype=dt, device=dev)
    k = torch.randn(tokens, kv_heads, lq, dtype=dt, device=dev)
    v = torch.randn(tokens, kv_heads, lv, dtype=dt, device=dev)
    o = torch.zeros(tokens, heads, lv, dtype=dt, device=dev)
    k_buf = torch.randn(slots, kv_heads, lq, dtype=dt, device=dev)
    v_buf = torch.randn(slots, kv_heads, lv, dtype=dt, device=dev)
    qo_indptr = torch.tensor([0, tokens], dtype=torch.int32, device=dev)
    kv_indptr = torch.zeros(2, dtype=torch.int32, device=dev)
    kv_indices = torch.zeros(1, dtype=torch.int64, device=dev)
    st.extend_attention_fwd(q, k, v, o, k_buf, v_buf, qo_indptr, kv_indptr, kv_indices, None, True, None, tokens,
                            1.0, 1.0, 1.0, logit_cap=0.0, sliding_window_size=window, sinks=None,
                            window_kv_offsets=torch.zeros(1, dtype=torch.int32, device=dev) if window >= 0 else None,
                            xai_temperature_len=-1,
                            **st.later(st.extend_attention_fwd, page_size=page_size, extend_seq_lens_cpu=[tokens]))
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    # float64 reference: causal (and windowed) softmax over the new tokens, GQA heads sharing a KV head
    kk = k.double().repeat_interleave(heads // kv_heads, dim=1)
    vv = v.double().repeat_interleave(heads // kv_heads, dim=1)
    s = torch.einsum("mhd,nhd->hmn", q.double(), kk)
    m, n = torch.arange(tokens, device=dev)[:, None], torch.arange(tokens, device=dev)[None, :]
    visible = (n <= m) & ((m <= n + window) if window > 0 else True)
    ref = torch.einsum("hmn,nhd->mhd", torch.softmax(s.masked_fill(~visible, -float("inf")), dim=-1), vv)
    err = (o.double() - ref).abs().max().item()
    bad = int(((o.double() - ref).abs() > 0.05 + 0.02 * ref.abs()).any(-1).any(-1).nonzero().numel())
    print(f"Lq {lq} Lv {lv} tokens {tokens} window {window} page size {page_size} {dtype}: max error {err:.3g}, "
          f"{bad} of {tokens} queries off")
    return bad == 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    sys.exit(0 if main(*(int(a) for a in args[:5]), *args[5:6]) else 1)
