"""FA3's MLA path under kvfuzz: sgl-kernel's flash_attn_with_kvcache with qv, an mla executor.

sglang's FlashAttentionBackend on an MLA model (use_mla: DeepSeek's absorbed attention, sglang's default
MLA backend on Hopper) calls FA3 over the latent pool's paged views (0.5.23 flashattention_backend.py:
forward_decode :2348-2381, forward_extend :1943-1959 and :2010-2027):

    kv = pool [slots, 1, 576]; k_rope = kv[..., 512:], c_kv = kv[..., :512]
    o = flash_attn_with_kvcache(q=q_rope [T, H, 64], k_cache=paged_view(k_rope, ps), v_cache=paged_view(c_kv, ps),
                                qv=q_nope [T, H, 512], page_table, cache_seqlens, cu_seqlens_q, max_seqlen_q,
                                softmax_scale=sm_scale, causal=True, softcap=0, num_splits)

FA3 scores q.k + qv.v (V is the latent) and takes qv for head dims <= 64 with V >= 256 on Hopper only
(flash_api.cpp:1028-1041, 0251105a). Q and the pool are packed as the other MLA executors pack them
(mla_packed.py: the latent zero-padded to 512, the rope part to 64; zeros change neither q.k nor the kept
V channels), then split as sglang splits them. The plan's paths:
  - latent_decode (decode, idle, verify, draft): page_table = the step's block table rows at the plan's
    page size, cache_seqlens, cu_seqlens_q as the plan holds them; a verify's tree mask must be the
    bottom-right causal chain (topk 1: sglang's FA3 MLA path runs no cascade here, mla_backends.py);
  - prefill (an extend or mixed batch with a prefix, a draft extend): sglang hands FA3 the rows' page-table
    rows over the pool; the plan holds each row's keys as pool slots (the gather) and the layout descriptor,
    so FA3 reads the gathered linear buffer through the descriptor's blocks (linear_kv_indices at
    prefill.block_size), cache_seqlens = kv_lens, cu_seqlens_q = qo_indptr: the same keys in the same order.
cu_seqlens_k_new (sglang passes cu_seqlens_k) is not passed: FA3 reads it only with new K/V (k=, v=),
which this path has none of. num_splits: KVFUZZ_FA3_NUM_SPLITS (default 0, FA3's heuristic, sglang's
unless deterministic). Output [T, H, 512] (the first v_head_dim kept) and the LSE [H, T] transposed.
Precision: P rounded to the cache dtype before P.V, tiles of 64 keys (hopper/tile_size.h: d 64, dv 512),
declared 32 as fa3_page_table.py declares them; split-KV partitions whole tiles.

KVFUZZ_FA3=DIR as for fa3_page_table.py (fa3_library.py: exit 2 without a library or a CUDA device). On
the CPU (TRITON_INTERPRET=1, DIR holding the stand-in adapters/repro/fa3_standin.py under its name):
ci/gpu_mla_pairs.sh --dry-run.

    KVFUZZ_FA3=/tmp/sgl_fa3 kvfuzz run --backend mla:fa3_mla --adapter "python3 adapters/gpu/fa3_mla.py"
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

NUM_SPLITS = int(os.environ.get("KVFUZZ_FA3_NUM_SPLITS", "0"))

import fa3_library  # noqa: E402  (no library: exit 2, said before torch loads)
import kvfuzz_adapter as kv  # noqa: E402
import torch  # noqa: E402
from cuda_arrays import TORCH_DTYPES, dev, fetch  # noqa: E402
from device_outputs import outputs  # noqa: E402
from mla_packed import CKV, check_dims, decode_rows, latent, layer_keys, paged  # noqa: E402
from numpy_attention import rows_of, take  # noqa: E402

FLASH_ATTN_WITH_KVCACHE = fa3_library.load()


def decode_call(case):
    """(cu_seqlens_q, cache_seqlens, page_table, page size) of the latent decode path."""
    cu_q, seq_lens, table = decode_rows(case)
    return cu_q, seq_lens, table, case.plan["page_size"]


def prefill_call(case):
    """(cu_seqlens_q, cache_seqlens, page_table, page size) of the prefill path: the layout descriptor's
    blocks over the gathered linear buffer, one table row per kernel row."""
    qo_indptr, kv_lens = case.array("prefill.qo_indptr"), case.array("prefill.kv_lens")
    indptr, indices = case.array("prefill.linear_kv_indptr"), case.array("prefill.linear_kv_indices")
    rows = len(kv_lens)
    starts = [int(take(indptr, r)) for r in range(rows + 1)]
    width = max([b - a for a, b in zip(starts, starts[1:])] + [1])
    table = np.zeros((rows, width), np.int64)
    for r in range(rows):
        table[r, :starts[r + 1] - starts[r]] = take(indices, np.arange(starts[r], starts[r + 1]))
    return qo_indptr[:rows + 1], kv_lens[:rows], table, case.plan["prefill"]["block_size"]


@kv.executor(name="fa3_mla", family="mla",
             supports={"modes": "all", "layer_kinds": ["full"], "dtypes": ["fp16", "bf16"], "page_sizes": "any",
                       "head_dims": "any", "mla": True, "non_mla": False, "hybrid_swa": False,
                       "cuda_graph": True, "softcap": False, "gqa": True},
             precision={"p_dtype": "cache", "out_dtype": "cache", "tile_keys": 32, "split_keys": 32}, fetch=fetch)
def run(case):
    """FA3's flash_attn_with_kvcache(qv=...) (sgl-kernel) over the latent pool, as sglang's FA backend calls it;
    its outputs stay on the device until every value set of the request has run (fetch)"""
    check_dims(case)
    vd, T, dt = case.model["v_head_dim"], case.num_tokens, TORCH_DTYPES[case.dtype]
    out, lse = outputs(case)
    cu_q, seq_lens, table, page_size = (prefill_call if case.plan["path"] == "prefill" else decode_call)(case)
    covered = rows_of(cu_q, len(seq_lens), T)
    if not sum(n for _, _, n in covered):  # an IDLE batch: nothing is launched
        return out, lse
    args = dict(page_table=dev(np.ascontiguousarray(table, np.int32)), cache_seqlens=dev(seq_lens.astype(np.int32)),
                cu_seqlens_q=dev(np.asarray(cu_q, np.int32)), max_seqlen_q=max(n for _, _, n in covered),
                softmax_scale=float(case.sm_scale), causal=True, softcap=0.0, return_softmax_lse=True,
                num_splits=NUM_SPLITS)
    tokens = int(cu_q[len(seq_lens)])
    for layer in range(len(case.layers)):
        q = dev(latent(case.q[layer][:tokens], vd, tokens), dt)  # [tokens, H, 576]: [q_nope | q_rope]
        kv_pages = dev(paged(layer_keys(case, layer), page_size, vd), dt)  # [pages, ps, 576]
        kv_pages = kv_pages.view(kv_pages.shape[0], page_size, 1, kv_pages.shape[-1])
        o, s, *_ = FLASH_ATTN_WITH_KVCACHE(q=q[..., CKV:], k_cache=kv_pages[..., CKV:], v_cache=kv_pages[..., :CKV],
                                           qv=q[..., :CKV], **args)
        s = s.transpose(0, 1)
        for _, t, n in covered:
            out[layer, t:t + n], lse[layer, t:t + n] = o[t:t + n, :, :vd], s[t:t + n]
    return out, lse


if __name__ == "__main__":
    kv.serve(run)
