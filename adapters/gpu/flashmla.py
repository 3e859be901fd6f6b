"""FlashMLA under kvfuzz: an mla executor on the GPU, the decode kernel of sglang's flashmla backend.

Runs the mla plan's latent decode path (backends/contract/FAMILIES.md) through sgl-kernel's FlashMLA
(sglang-kernel 0.4.3, the release sglang 0.5.13 pins, built for torch 2.11 + CUDA 13: its
flashmla_ops library and flash_mla.py, which ci/gpu_wheels.py takes from the wheel into
sgl_flashmla-0.4.3.zip; KVFUZZ_FLASHMLA_DIR names the unpacked folder). The calls are sglang's
(flashmla_backend.py, 0.5.13: init_forward_metadata and forward_decode / forward_extend for verify):

    tile_md, num_splits = get_mla_metadata(cache_seqlens, s_q * H, 1)
    out, lse = flash_mla_with_kvcache(q=q, k_cache=kv.view(-1, 64, 1, 576), block_table=table,
                                      cache_seqlens=cache_seqlens, head_dim_v=512,
                                      tile_scheduler_metadata=tile_md, num_splits=num_splits,
                                      softmax_scale=sm_scale, causal=True)

  - q is [rows, s_q, H, 576]: every row of the step has the same number of queries s_q (1 for
    decode and drafting, the draft count for a verify); a plan whose rows differ is unsupported.
    Row r's queries are tokens cu_seqlens_q[r] ..; table and cache_seqlens are the plan's step rows.
  - The page size is FlashMLA's fixed 64 (sglang's PAGE_SIZE): the declaration takes page size 64
    only. kv is the layer's pool in pages of 64, packed [ckv 512 | kpe 64] (mla_packed.py).
  - The mask is bottom-right causal (key k of query i when k <= kv_len - s_q + i); a verify tree
    mask must be that rule (topk 1), as sglang's flashmla backend verifies chains only.
  - The prefill path (extend, mixed, draft extend) is not FlashMLA's: sglang runs it on FlashInfer
    or FA (unsupported here; flashinfer_mla.py runs it).
The tile scheduler (get_mla_metadata) is FlashMLA's own planner, run on the plan's cache_seqlens as
sglang runs it; the plan's num_splits (kvfuzz's builtin planner's figure) is not FlashMLA's input.
Precision: P rounded to bf16 before P.V, KV tiles of 64 keys (the page block), split-KV partials
merged by LSE in the combine kernel (at most one per SM part); the LSE is natural log.
KVFUZZ_FLASHMLA_BROKEN=drop_last_key passes every row one key fewer than the plan gives: a planted
metadata bug, to show the checks find it through the real kernel (docs/gpu.md).

    PYTHONPATH=adapters KVFUZZ_FLASHMLA_DIR=.gpu/flashmla kvfuzz check case.json \
        --adapter "python3 adapters/gpu/flashmla.py" --backend flashmla
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.environ.get("KVFUZZ_FLASHMLA_DIR", os.path.join(HERE, "..", "..", ".gpu", "flashmla")))
import kvfuzz_adapter as kv  # noqa: E402
from cuda_arrays import dev, fetch  # noqa: E402  (the CPU under TRITON_INTERPRET=1: a stand-in's dry run)
from device_outputs import outputs  # noqa: E402
from mla_packed import CKV, check_dims, decode_rows, latent, paged  # noqa: E402

PAGE = 64  # FlashMLA's page block size (sglang flashmla_backend.py PAGE_SIZE)
DROP_LAST_KEY = os.environ.get("KVFUZZ_FLASHMLA_BROKEN") == "drop_last_key"


def load():
    """sgl_kernel.flash_mla from KVFUZZ_FLASHMLA_DIR, with torch; a clear error when it is missing."""
    import torch
    try:
        from sgl_kernel.flash_mla import flash_mla_with_kvcache, get_mla_metadata
    except ImportError as e:
        sys.exit(f"flashmla.py: sgl_kernel.flash_mla not found ({e}); unpack sgl_flashmla-0.4.3.zip "
                 "(python3 ci/gpu_wheels.py) and set KVFUZZ_FLASHMLA_DIR")
    return torch, flash_mla_with_kvcache, get_mla_metadata


torch, flash_mla_with_kvcache, get_mla_metadata = load()


def queries(case, layer, rows, s_q):
    """The layer's Q as FlashMLA takes it: [rows, s_q, H, 576] bf16 on the GPU."""
    q = latent(case.q[layer][:rows * s_q], case.model["v_head_dim"], rows * s_q)
    return dev(q, torch.bfloat16).view(rows, s_q, q.shape[1], q.shape[2])


@kv.executor(name="flashmla", family="mla", batch=True,
             supports={"modes": ["idle", "decode", "target_verify", "draft_decode"], "layer_kinds": ["full"],
                       "dtypes": ["bf16"], "page_sizes": [PAGE], "head_dims": "any", "mla": True, "non_mla": False,
                       "hybrid_swa": False, "cuda_graph": True, "softcap": False, "gqa": True},
             precision={"p_dtype": "cache", "out_dtype": "bf16", "max_merges": 256, "tile_keys": PAGE}, fetch=fetch)
def run(case):
    """sgl-kernel's FlashMLA (flash_mla_with_kvcache, dense bf16 decode) on the mla plan; its outputs stay
    on the device until every value set of the request has run (fetch)"""
    check_dims(case)
    if case.plan["path"] != "latent_decode":
        raise kv.Unsupported(f"path {case.plan['path']}: FlashMLA runs the latent decode path only")
    if case.plan["page_size"] != PAGE:
        raise kv.Unsupported(f"page size {case.plan['page_size']}: FlashMLA's pages hold {PAGE} tokens")
    vd, heads = case.model["v_head_dim"], case.model["q_heads"]
    out, lse = outputs(case)
    cu_q, seq_lens, table = decode_rows(case)
    rows, q_lens = len(seq_lens), np.diff(cu_q)
    if rows == 0:  # an IDLE batch: sglang launches nothing
        return out, lse
    if (q_lens != q_lens[0]).any() or cu_q[0] != 0:
        raise kv.Unsupported(f"query counts {q_lens.tolist()}: FlashMLA takes one s_q for every row")
    s_q = int(q_lens[0])
    if DROP_LAST_KEY:
        seq_lens = np.maximum(seq_lens - 1, 0)
    # Once a request (the value sets share the metadata), as sglang's flashmla backend schedules once a
    # step; through cuda_arrays' pinned staging: a copy from pageable memory would wait for the device.
    def schedule():
        cache_seqlens = dev(seq_lens.astype(np.int32))
        return (cache_seqlens, dev(np.ascontiguousarray(table, np.int32))) + tuple(
            get_mla_metadata(cache_seqlens, s_q * heads, 1))
    cache_seqlens, block_table, tile_md, num_splits = case.once("flashmla_schedule", schedule)
    n = rows * s_q
    for layer in range(len(case.layers)):
        kv_pages = dev(paged(case.k_cache(layer), PAGE, vd), torch.bfloat16)
        o, s = flash_mla_with_kvcache(q=queries(case, layer, rows, s_q), k_cache=kv_pages.view(-1, PAGE, 1, kv_pages.shape[-1]),
                                      block_table=block_table, cache_seqlens=cache_seqlens, head_dim_v=CKV,
                                      tile_scheduler_metadata=tile_md, num_splits=num_splits,
                                      softmax_scale=float(case.sm_scale), causal=True)
        out[layer, :n] = o.reshape(n, heads, CKV)[:, :, :vd].float()
        lse[layer, :n] = s.transpose(1, 2).reshape(n, heads).float()
    return out, lse


if __name__ == "__main__":
    kv.serve(run)
