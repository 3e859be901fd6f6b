"""The two mechanisms of the fa:fa3_page_table campaigns, each alone: direct calls of FA3 against float64.

The campaign (docs/gpu.md "FA3's real kernel in a campaign") found two groups the stand-in
(adapters/repro/fa3_standin.py) does not show when the executor hands it the same arguments. This
runs sgl-kernel's real flash_attn_with_kvcache (KVFUZZ_FA3=DIR) on random data, no kvfuzz plan, and
prints one line per call with its max error against a float64 attention of the documented semantics:

  vdim   V of another width than Q/K (head_dim != v_head_dim, both <= 64: flash_api.cpp runs them
         on its <64, 64> instantiation, where paged_kv.h's PagedKVManager loads V with K's column
         predicate, tVpV = tKpK when kHeadDim == kHeadDimV): a paged call (pages of 16) for each
         (d, dv) pair, the error of V's first min(d, dv) channels and of the rest, and the same
         pair without pages (k_cache [batch, seqlen, heads, d], no page_table).
  sinks  attention sinks on rows with no keys (cache_seqlens 0), as a cascade's prefix call of a
         draft-decode row whose prefix is empty: per row the LSE FA3 returns against the sink (the
         softmax over the sink alone: output 0, LSE = sink) and the output; then the two-call cascade
         (sinks on the prefix call only, merged by merge_state_v2) against the sink folded once.

    KVFUZZ_FA3=/tmp/sgl_fa3 python3 adapters/gpu/fa3_mechanisms.py vdim
    KVFUZZ_FA3=/tmp/sgl_fa3 python3 adapters/gpu/fa3_mechanisms.py sinks

On the CPU through the stand-in (the shim of adapters/tests/fa3_page_table_test.sh, TRITON_INTERPRET=1)
every line is within the dtype's rounding: a dry run of this script. Exit 0 having printed the
figures, 2 on a bad argument or when FA3 cannot load.
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "repro"))
from fa3_standin import merge_state_v2  # noqa: E402

WHAT = sys.argv[1] if len(sys.argv) == 2 else ""
if WHAT not in ("vdim", "sinks"):
    print("usage: fa3_mechanisms.py vdim|sinks", file=sys.stderr)
    sys.exit(2)
sys.argv = sys.argv[:1]
import fa3_page_table  # noqa: E402  (loads FA3 from KVFUZZ_FA3, exit 2 without it)

FA3 = fa3_page_table.FLASH_ATTN_WITH_KVCACHE
DEV = fa3_page_table.DEV


def reference(q, k, v, scale, causal, sinks=None):
    """float64 attention of one row: q [sq, H, d], k [sk, Hk, d], v [sk, Hk, dv]; bottom-right causal;
    sinks [H] folded once. -> out [sq, H, dv], lse [sq, H]."""
    group = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(group, dim=1)
    v = v.double().repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    sq, sk = q.shape[0], k.shape[0]
    if causal:
        keep = torch.arange(sk, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None] + sk - sq
        s = s.masked_fill(~keep[None], -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(-1, sq, 1)], dim=-1)
        v = torch.cat([v, torch.zeros_like(v[:1])], dim=0)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.clamp_min(-1e30)[..., None]).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", p, v), lse.transpose(0, 1)


class Paged:
    """A paged cache of `lens` keys per row (pages of `page`, in shuffled order) and queries `qlens`."""

    def __init__(self, lens, qlens, hq, hk, d, dv, page, dtype):
        self.lens, self.qlens, self.page = lens, qlens, page
        n_pages = sum(-(-n // page) for n in lens) + 1
        self.k = torch.randn(n_pages, page, hk, d, device=DEV).to(dtype)
        self.v = torch.randn(n_pages, page, hk, dv, device=DEV).to(dtype)
        width = max(1, max(-(-n // page) for n in lens))
        self.table = torch.zeros(len(lens), width, dtype=torch.int32, device=DEV)
        perm, used = torch.randperm(n_pages - 1) + 1, 0
        for b, n in enumerate(lens):
            p = -(-n // page)
            self.table[b, :p] = perm[used:used + p].to(DEV, torch.int32)
            used += p
        self.cu = torch.tensor([0] + torch.tensor(qlens).cumsum(0).tolist(), dtype=torch.int32, device=DEV)
        self.q = torch.randn(int(self.cu[-1]), hq, d, device=DEV).to(dtype)
        self.scale = d ** -0.5

    def keys(self, b):
        n = self.lens[b]
        pages = self.table[b, :-(-n // self.page)].long()
        return (self.k[pages].reshape(-1, *self.k.shape[2:])[:n], self.v[pages].reshape(-1, *self.v.shape[2:])[:n])

    def rows(self, b):
        return slice(int(self.cu[b]), int(self.cu[b + 1]))

    def call(self, causal, sinks=None):
        return FA3(q=self.q, k_cache=self.k, v_cache=self.v, page_table=self.table,
                   cache_seqlens=torch.tensor(self.lens, dtype=torch.int32, device=DEV), cu_seqlens_q=self.cu,
                   max_seqlen_q=max(self.qlens), softmax_scale=self.scale, causal=causal, window_size=(-1, -1),
                   return_softmax_lse=True, sinks=sinks)[:2]


def vdim():
    for dtype in (torch.bfloat16, torch.float16):
        for d, dv in ((8, 32), (8, 16), (16, 32), (32, 64), (8, 8), (32, 32), (64, 64), (8, 128), (64, 256),
                      (128, 128)):
            torch.manual_seed(d * 1000 + dv)
            c = Paged([37, 20], [3, 1], 4, 2, d, dv, 16, dtype)
            out = c.call(causal=True)[0].double()
            ref = torch.cat([reference(c.q[c.rows(b)], *c.keys(b), c.scale, True)[0] for b in range(2)])
            w = min(d, dv)
            rest = (out[..., w:] - ref[..., w:]).abs().max().item() if dv > w else 0.0
            # without pages: the same keys contiguous per row ([batch, seqlen, Hk, dim]), seqlen padded
            sk = max(c.lens)
            kc = torch.zeros(2, sk, 2, d, device=DEV, dtype=dtype)
            vc = torch.zeros(2, sk, 2, dv, device=DEV, dtype=dtype)
            for b in range(2):
                k, v = c.keys(b)
                kc[b, :k.shape[0]], vc[b, :v.shape[0]] = k, v
            try:
                o2 = FA3(q=c.q, k_cache=kc, v_cache=vc, cache_seqlens=torch.tensor(c.lens, dtype=torch.int32, device=DEV),
                         cu_seqlens_q=c.cu, max_seqlen_q=3, softmax_scale=c.scale, causal=True,
                         return_softmax_lse=True)[0].double()
                flat = f"{(o2 - ref).abs().max().item():.3g}"
            except NotImplementedError as e:  # the stand-in models the paged path only
                flat = f"not run ({e})"
            print(f"vdim {str(dtype)[6:]} d {d:3d} dv {dv:3d}: paged (pages of 16) error channels <{w} "
                  f"{(out[..., :w] - ref[..., :w]).abs().max().item():.3g}, channels >={w} {rest:.3g} "
                  f"(max |out| there {out[..., w:].abs().max().item() if dv > w else 0.0:.3g}); "
                  f"not paged {flat}")


def sinks_empty():
    for dtype in (torch.bfloat16, torch.float16):
        for hq, hk, d in ((1, 1, 8), (16, 2, 64)):
            for qlen, causal in ((1, False), (2, False), (2, True), (3, True)):
                torch.manual_seed(hq * 100 + qlen)
                c = Paged([0, 5, 0], [qlen, qlen, 1], hq, hk, d, d, 2, dtype)
                sinks = (torch.arange(hq, device=DEV) * 0.375 - 2.25).to(torch.bfloat16)  # exact in bf16
                out, lse = c.call(causal, sinks)
                lse = lse.transpose(0, 1).double()
                parts = []
                for b in range(3):
                    ro, rl = reference(c.q[c.rows(b)], *c.keys(b), c.scale, causal, sinks)
                    err_o = (out[c.rows(b)].double() - ro).abs().max().item()
                    got = lse[c.rows(b)]
                    parts.append(f"row {b} ({c.lens[b]} keys, {c.qlens[b]} q): LSE error {(got - rl).abs().max().item():.3g}"
                                 f" (LSE {got[0, 0].item():.4g}, sink {sinks[0].item():.4g}), output error {err_o:.3g}")
                print(f"sinks {str(dtype)[6:]} heads {hq}/{hk} d {d} causal {causal}: " + "; ".join(parts))
    # The cascade of a draft-decode row whose prefix is empty (the campaign's case 35, fp16, 1 head,
    # d 8, pages of 2): prefix call (0 keys, 2 queries, not causal, sinks), expand call (each query
    # its own 2 keys, no sinks), merged; against float64 with the sink once.
    torch.manual_seed(35)
    for dtype in (torch.float16, torch.bfloat16):
        pre = Paged([0], [2], 1, 1, 8, 8, 2, dtype)
        exp = Paged([2, 2], [1, 1], 1, 1, 8, 8, 2, dtype)
        exp.q = pre.q.clone()
        sinks = torch.tensor([-2.25], device=DEV).to(torch.bfloat16)
        oa, la = pre.call(False, sinks)
        ob, lb = exp.call(False)
        om, lm = merge_state_v2(oa, la.transpose(0, 1).contiguous(), ob, lb.transpose(0, 1).contiguous())
        ro, rl = [torch.cat(t) for t in zip(*(reference(exp.q[exp.rows(b)], *exp.keys(b), exp.scale, False, sinks)
                                             for b in range(2)))]
        rl0 = torch.cat([reference(exp.q[exp.rows(b)], *exp.keys(b), exp.scale, False)[1] for b in range(2)])
        print(f"cascade {str(dtype)[6:]} (empty prefix with sinks, expand without): merged output error "
              f"{(om.double() - ro).abs().max().item():.3g}; merged LSE error {(lm.double() - rl).abs().max().item():.3g} "
              f"against the sink once, {(lm.double() - rl0).abs().max().item():.3g} against no sink; prefix call "
              f"LSE {la[0, 0].item():.4g} (sink {sinks[0].item():.4g})")


if __name__ == "__main__":
    vdim() if WHAT == "vdim" else sinks_empty()
    sys.exit(0)
