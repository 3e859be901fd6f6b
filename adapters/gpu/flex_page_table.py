"""PyTorch's paged flex attention under kvfuzz: a page_table executor on the GPU.

Each part of a layer's group (FAMILIES.md, page_table) is ONE compiled
torch.nn.attention.flex_attention call that reads the layer's physical K/V pool in place, the way
torch.nn.attention.experimental._paged_attention.PagedAttention runs paged flex attention:
  - K/V: the whole pool as one "batch", [1, Hkv, slots, D] (no gather, no copy per request);
  - Q: the layer's batch tokens, [1, Hq, tokens, D]; token t belongs to kernel row
    q_row[t] (from cu_seqlens_q; -1: no row in this part) at bottom-right position
    q_pos[t] = cache_seqlens[row] - q_len + i;
  - mask_mod = PagedAttention.get_mask_mod's physical -> logical translation, per row:
    logical page = physical_to_logical[row, slot // vps] (built from the row's page_table entries
    for its cache_seqlens keys), key = page * vps + slot % vps, kept iff the page is live,
    key < cache_seqlens[row], key <= q_pos when causal or windowed, key >= q_pos - window_left;
  - the BlockMask (128 x 128 tiles) is converted from the page table too: q tile x physical kv
    tile is visited iff some row of the q tile owns a page in that kv tile (PagedAttention's
    convert_logical_block_mask at tile granularity). Partly used tiles are loaded and masked.
PagedAttention itself is not instantiated: its convert_logical_block_mask requires the block
mask's KV block size == page_size (kvfuzz pages are 1..64 slots; flex tiles are >= 16 and 128 by
default) and it keeps one page table per batch row of a page-granular logical mask; the mask_mod
above is its get_mask_mod with kvfuzz's rows, seqlens and windows.
The mask consumes only page_table, cache_seqlens, cu_seqlens_q, causal and window_left.
Parts are merged by LSE (float64) in order. Precision: tile_keys 16, below flex's smallest KV block
(its kernels update the running max once per block of 64 or 128 keys). flex_attention(return_lse=True) returns the natural-log
LSE (torch/nn/attention/flex_attention.py: `return out, lse * math.log(2)` on the kernel's base-2
LSE), used as is. Softcap: score_mod softcap * tanh(score / softcap) after the scale (scale passed).
Padding for kernel reuse under torch.compile(dynamic=False): tokens and slots to powers of two
(>= 128), rows to a power of two (>= 8), head dims zero-padded to powers of two (>= 16; zeros change
neither q.k nor the kept V channels). Wired: all modes, fp32/fp16/bf16 (fp32 matmuls IEEE), any page
size, any head dim, MLA (one latent KV head, V = K's first v_head_dim values), GQA, softcap.
KVFLEX_EMULATE=1 runs the same metadata through a float64 numpy evaluation of the same mask (no
torch): a CPU check of this adapter's logic, not of flex.

    PYTHONPATH=adapters kvfuzz check case.json --adapter "python3 adapters/gpu/flex_page_table.py" \
        --backend flex_page_table
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import kvfuzz_adapter as kv  # noqa: E402
from numpy_attention import attend, merge  # noqa: E402
from page_table_parts import TILE, p2, part_metadata, run_layers, visible_np  # noqa: E402

EMULATE = os.environ.get("KVFLEX_EMULATE") == "1"
# KVFLEX_FORCE_FLEX=1: kernel_options FORCE_USE_FLEX_ATTENTION (never flex's split-KV decoding kernel)
KERNEL_OPTIONS = {"FORCE_USE_FLEX_ATTENTION": True} if os.environ.get("KVFLEX_FORCE_FLEX") == "1" else None

if not EMULATE:
    import torch
    import torch._dynamo
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    from cuda_arrays import DEV, dev, device_pool, fetch
    from cuda_arrays import TORCH_DTYPES as TORCH_DTYPE
    import device_outputs

    for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                  "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, _name):
            setattr(torch._dynamo.config, _name, 1024)
    _flex = torch.compile(flex_attention, dynamic=False)


def run_part_emulated(case, layer, m, window_left):
    q = case.q[layer]
    k_pool, v_pool = case.k_cache(layer), case.v_cache(layer)
    vis = visible_np(m, window_left, q.shape[0], k_pool.shape[0])
    return attend(q, k_pool, v_pool, vis, case.sm_scale, case.softcap)


def make_mask_mod(q_row, q_pos, k_len, p2l, vps, causal, window_left):
    def mask_mod(b, h, q_idx, kv_idx):
        r = q_row[q_idx]
        rr = torch.clamp(r, min=0)
        lp = p2l[rr, kv_idx // vps]
        lk = lp * vps + kv_idx % vps
        qp = q_pos[q_idx]
        ok = (r >= 0) & (lp >= 0) & (lk < k_len[rr])
        ok = ok & ((~causal) | (lk <= qp))
        ok = ok & ((window_left < 0) | (lk >= qp - window_left))
        return ok
    return mask_mod


def make_softcap(cap):
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod


def padded(x, rows, width):
    """[n, H, d] float32 numpy -> [1, H, rows, width] zero-padded (device, float32)."""
    t = torch.zeros((x.shape[1], rows, width), dtype=torch.float32, device=DEV)
    t[:, :x.shape[0], :x.shape[2]] = dev(x).transpose(0, 1)
    return t.unsqueeze(0)


def padded_pool(case, layer, which, rows, width):
    """Layer's K or V pool as padded() lays it out, [1, H, rows, width] float32, built on the device."""
    return device_pool(case, layer, which, torch.float32, width, rows).transpose(0, 1).unsqueeze(0)


def run_part_flex(case, layer, m, window_left):
    dt = TORCH_DTYPE[case.dtype]
    q = case.q[layer]
    n_tokens = q.shape[0]
    d_pad = p2(max(q.shape[2], case.model["head_dim"]), 16)
    dv_pad = p2(case.model["v_head_dim"], 16)
    qt = padded(q, m["t_pad"], d_pad).to(dt)
    kt = padded_pool(case, layer, "k", m["s_pad"], d_pad).to(dt)
    vt = padded_pool(case, layer, "v", m["s_pad"], dv_pad).to(dt)
    # host arrays through cuda_arrays' pinned staging, scalars filled on the device: a copy from
    # pageable memory (torch.from_numpy(a).to(DEV), torch.tensor(x, device=DEV)) waits for the device
    tiles = dev(m["tiles"])
    num = tiles.sum(-1).to(torch.int32)
    idx = torch.argsort(tiles.to(torch.int32), dim=-1, descending=True, stable=True).to(torch.int32)
    mask_mod = make_mask_mod(dev(m["q_row"]), dev(m["q_pos"]), dev(m["k_len"]), dev(m["p2l"]), m["vps"],
                             torch.full((), m["causal"] or window_left >= 0, dtype=torch.bool, device=DEV),
                             torch.full((), int(window_left), dtype=torch.int32, device=DEV))
    bm = BlockMask.from_kv_blocks(num[None, None], idx[None, None], BLOCK_SIZE=(TILE, TILE),
                                  mask_mod=mask_mod, seq_lengths=(m["t_pad"], m["s_pad"]))
    score_mod = None
    if case.softcap:
        score_mod = make_softcap(torch.full((), float(case.softcap), dtype=torch.float32, device=DEV))
    out, lse = _flex(qt, kt, vt, score_mod=score_mod, block_mask=bm, scale=float(case.sm_scale),
                     enable_gqa=qt.shape[1] != kt.shape[1], return_lse=True, kernel_options=KERNEL_OPTIONS)
    # float64, as the parts are merged (device_outputs.merge computes in its inputs' dtype)
    return out[0, :, :n_tokens, :case.model["v_head_dim"]].transpose(0, 1).double(), lse[0, :, :n_tokens].transpose(0, 1).double()


@kv.executor(name="flex_page_table", family="page_table",
             supports={"modes": "all", "layer_kinds": "all", "dtypes": ["fp32", "fp16", "bf16"],
                       "page_sizes": "any", "head_dims": "any", "mla": True, "non_mla": True,
                       "hybrid_swa": True, "cuda_graph": True, "softcap": True, "gqa": True},
             precision={"p_dtype": "cache", "out_dtype": "bf16", "tile_keys": 16}, fetch=None if EMULATE else fetch)
def run(case):
    """PyTorch flex_attention over the paged pool (PagedAttention's physical->logical mask_mod); the
    outputs stay on the device until every value set of the request has run (fetch)"""
    def run_call(layer, call, prefix, window_left):
        m = part_metadata(case, call, prefix, case.num_slots(layer), case.num_tokens)
        return (run_part_emulated if EMULATE else run_part_flex)(case, layer, m, window_left)

    if EMULATE:
        return run_layers(case, run_call, merge)
    return run_layers(case, run_call, device_outputs.merge, device_outputs.outputs)


if __name__ == "__main__":
    kv.serve(run)
