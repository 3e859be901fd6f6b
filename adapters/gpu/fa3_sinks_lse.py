"""Does FA3's returned LSE include the attention sinks (s_aux)? One kernel alone against float64.

sglang's FlashAttentionBackend hands gpt-oss's sinks to both calls of a topk > 1 cascade
(flashattention_backend.py:1597-1598 puts them in kwargs, :1789-1806 and :1840-1863 pass kwargs to
the prefix and the expand call, :1864-1869 merges the two by their LSEs). Whether that counts the
sink twice depends on what FA3 returns as softmax_lse when handed sinks. This runs sgl-kernel's real
flash_attn_with_kvcache (KVFUZZ_FA3=DIR) on a paged bf16 cache (pages of 16, GQA 8/2, head dim 64,
3 rows of 1-5 queries, causal) without and with sinks, and prints, against float64:
  - the output with sinks (FA3 folds e^sink into the denominator);
  - the LSE with sinks against log(e^sink + sum e^s) (includes) and against the LSE without sinks
    (excludes);
  - the cascade as sglang runs it: the keys cut in two calls, both handed the sinks, merged by
    merge_state_v2 (fa3_standin's model of sgl-kernel's), against the exact answer with the sink once;
    and with the sinks on the first call only.
Sinks are passed as fp32 and as bf16 (gpt_oss.py:428: sglang's FA3 path keeps them in bf16; an H100
run of sgl-kernel 0.4.3 refused fp32: "sinks must have dtype bfloat16"); the cascade hands bf16.
Exit 0 having printed the figures; 2 when FA3 cannot load.

    KVFUZZ_FA3=/tmp/sgl_fa3 python3 adapters/gpu/fa3_sinks_lse.py
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "repro"))
from fa3_standin import merge_state_v2  # noqa: E402

sys.argv = sys.argv[:1]
import fa3_page_table  # noqa: E402  (loads FA3 from KVFUZZ_FA3, exit 2 without it)

FA3 = fa3_page_table.FLASH_ATTN_WITH_KVCACHE
DEV = fa3_page_table.DEV  # cuda (the CPU only for a dry run through a stand-in under TRITON_INTERPRET=1)
PAGE, HQ, HK, D = 16, 8, 2, 64


def reference(q, k, v, scale, sinks, lo, hi, q_pos):
    """float64 attention of queries at positions q_pos over keys [lo, hi) (causal), sinks once or None."""
    k = k.double().repeat_interleave(HQ // HK, dim=1)
    v = v.double().repeat_interleave(HQ // HK, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    j = torch.arange(k.shape[0], device=DEV)
    keep = (j[None, :] >= lo) & (j[None, :] < hi) & (j[None, :] <= q_pos[:, None])
    s = s.masked_fill(~keep[None], -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(-1, s.shape[1], 1)], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[:1])], dim=0)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.einsum("hqk,khd->qhd", p, v), lse.transpose(0, 1)


def main():
    torch.manual_seed(0)
    lens, qlens = [37, 70, 19], [3, 5, 1]
    n_pages = sum(-(-n // PAGE) for n in lens) + 1
    k_cache = torch.randn(n_pages, PAGE, HK, D, device=DEV).bfloat16()
    v_cache = torch.randn(n_pages, PAGE, HK, D, device=DEV).bfloat16()
    width = max(-(-n // PAGE) for n in lens)
    table = torch.zeros(len(lens), width, dtype=torch.int32, device=DEV)
    perm = torch.randperm(n_pages - 1) + 1
    used = 0
    for b, n in enumerate(lens):
        p = -(-n // PAGE)
        table[b, :p] = perm[used:used + p].to(DEV, torch.int32)
        used += p
    cu = torch.tensor([0] + list(torch.tensor(qlens).cumsum(0)), dtype=torch.int32, device=DEV)
    q = torch.randn(int(cu[-1]), HQ, D, device=DEV).bfloat16()
    scale = D ** -0.5
    sinks = torch.tensor([1.5, -0.75, 3.0, 0.0, -2.0, 2.25, 6.0, -6.0], device=DEV).bfloat16()  # exact in bf16

    def call(seqlens, first_key, sinks_t):
        """FA3, causal, over keys [first_key, first_key + seqlens[b]) of each row: the table cut (first_key % PAGE == 0)."""
        t = table[:, first_key // PAGE:].contiguous()
        return FA3(q=q, k_cache=k_cache, v_cache=v_cache, page_table=t,
                   cache_seqlens=torch.tensor(seqlens, dtype=torch.int32, device=DEV), cu_seqlens_q=cu,
                   max_seqlen_q=max(qlens), softmax_scale=scale, causal=True, window_size=(-1, -1),
                   return_softmax_lse=True, sinks=sinks_t)

    def rows(fn):
        """fn(b, keys [n, Hk, D] k, v, q_pos) per row -> concatenated over rows."""
        outs = []
        for b, n in enumerate(lens):
            pages = table[b, :-(-n // PAGE)].long()
            k = k_cache[pages].reshape(-1, HK, D)[:n]
            v = v_cache[pages].reshape(-1, HK, D)[:n]
            q_pos = torch.arange(n - qlens[b], n, device=DEV)
            outs.append(fn(b, k, v, q_pos))
        return [torch.cat([o[i] for o in outs]) for i in range(len(outs[0]))]

    o0, l0 = call(lens, 0, None)[:2]
    ref_o, ref_l = rows(lambda b, k, v, qp: reference(q[cu[b]:cu[b + 1]], k, v, scale, None, 0, k.shape[0], qp))
    print(f"no sinks: output max error {(o0.double() - ref_o).abs().max():.3g}, "
          f"LSE max error {(l0.transpose(0, 1).double() - ref_l).abs().max():.3g}")
    ref_so, ref_sl = rows(lambda b, k, v, qp: reference(q[cu[b]:cu[b + 1]], k, v, scale, sinks, 0, k.shape[0], qp))
    for name, st in (("fp32", sinks.float()), ("bf16", sinks)):
        try:
            o1, l1 = call(lens, 0, st)[:2]
        except Exception as e:  # noqa: BLE001 - FA3 refusing this dtype is the figure
            print(f"sinks {name}: FA3 raised {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        l1 = l1.transpose(0, 1).double()
        print(f"sinks {name}: output max error {(o1.double() - ref_so).abs().max():.3g} against the sink folded once; "
              f"LSE against log(e^sink + sum e^s) {(l1 - ref_sl).abs().max():.3g}, "
              f"against the LSE without sinks {(l1 - ref_l).abs().max():.3g}")
    # The cascade: part A (not causal, as sglang's prefix call) keys [0, cut), below every query; part B
    # (causal) the rest, through the table cut at page cut / PAGE.
    cut = PAGE
    first = [min(cut, n) for n in lens]
    rest = [n - f for n, f in zip(lens, first)]
    for label, sa, sb in (("no sinks", None, None), ("sinks on both calls (sglang 0.5.23's topk>1 cascade)", sinks, sinks),
                          ("sinks on the first call only", sinks, None)):
        try:
            oa, la = FA3(q=q, k_cache=k_cache, v_cache=v_cache, page_table=table,
                         cache_seqlens=torch.tensor(first, dtype=torch.int32, device=DEV), cu_seqlens_q=cu,
                         max_seqlen_q=max(qlens), softmax_scale=scale, causal=False, window_size=(-1, -1),
                         return_softmax_lse=True, sinks=sa)[:2]
            ob, lb = call(rest, cut, sb)[:2]
        except Exception as e:  # noqa: BLE001 - FA3 refusing is the figure
            print(f"cascade, {label}: FA3 raised {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        # part B is causal bottom-right over its own keys: the same positions as the whole row's
        om, _ = merge_state_v2(oa, la.transpose(0, 1).contiguous(), ob, lb.transpose(0, 1).contiguous())
        exact = ref_o if sa is None else ref_so
        print(f"cascade, {label}: merged output max error {(om.double() - exact).abs().max():.3g} "
              f"against the sink folded once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
