"""FlashInfer's MLA kernel under kvfuzz: an mla executor on the GPU.

Runs the mla plan (backends/contract/FAMILIES.md) through flashinfer-python 0.7.2.post1's
BatchMLAPagedAttentionWrapper, backend "fa2" (KVFLASHINFER_BACKEND or KVFLASHINFER_MLA_BACKEND=fa3 picks
the Hopper kernel, which sglang's flashinfer_mla backend gets on an H100 by asking for "auto"; its
CUTLASS headers travel beside the slim wheel, ci/gpu_cutlass.py; flashinfer_choice.py). One plan per value set, one run per layer, as sglang plans
once per batch:

    w = BatchMLAPagedAttentionWrapper(workspace, backend="fa2")        # 128 MiB, shared
    w.plan(metadata=M, num_heads=H, head_dim_ckv=512, head_dim_kpe=64, page_size=PS, causal=C,
           sm_scale=sm_scale, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, lse_mode="base2")
    out, lse = w.run(query=q, kv_cache=kv, return_lse=True)           # q [T, H, 576], kv [pages, PS, 576]

  - path "latent_decode": M = MLAPlanMetadata.dense(cum_seq_lens_q=cu_seqlens_q[:rows + 1],
    block_tables=the step's block_table rows 0 .. rows - 1 as [rows, width], seq_lens=the step's
    cache_seqlens[:rows]); FlashInfer derives its CSR from them (kv_indices: each row's first
    ceil(seq_len / PS) entries), PS is the plan's page size and kv the layer's pool in pages. C is
    True when a row has more than one query (verify; sglang plans its verify wrapper causal=True)
    and False otherwise (sglang's decode wrapper: one query per row sees every key either way).
    FlashInfer's causal rule is bottom-right, the family's (mla.cuh logits_mask_: key k of query i
    is masked when k + q_len > kv_len + i). The wrapper takes no custom mask, so a verify tree mask
    must be that rule (a chain: topk 1) or the case is unsupported; sglang's flashinfer_mla runs
    every verify causal ("TODO: Support topk > 1 with custom mask"). num_splits is FlashMLA's split
    count: FlashInfer's plan splits the keys itself (scheduler.cuh MLAPlan), so it is not passed;
    rows_per_request (drafting) needs nothing: every kernel row has its own table row.
  - path "prefill": the gather kernel's work is done here, linear entry e = pool slot
    kv_indices[e] (e < kv_indptr[rows]); then M = MLAPlanMetadata.csr(qo_indptr, linear_kv_indptr,
    linear_kv_indices, kv_lens), PS = block_size, C = True, kv the linear buffer in pages of PS.
Q and K are packed as FlashInfer's absorbed MLA lays them out, [ckv | kpe]: the first v_head_dim
values (V's, the latent) zero-padded to 512, the rest (rope) zero-padded to 64. 512 / 64 is
DeepSeek's shape and the one JIT build (fa2 takes multiples of 128 / 64); zeros change neither q.k
(sm_scale is passed) nor the kept V channels, out[..., :v_head_dim]. The LSE is base 2 (mla.cuh:
log2(d) + m), divided by log2(e) here. A batch of no rows launches nothing (FlashInfer's plan
refuses an empty batch); a case FlashInfer's plan refuses (_BackendPlanUnsupportedError: work-item
capacity, its causal tile bound at head counts that do not divide 64) is unsupported.
Precision (mla.cuh, fa2): P rounded to bf16 before P.V, the row sum by an MMA on that rounded P,
KV tiles of 64 keys on an H100 (16 at the smallest shared-memory configuration: tile_keys 16),
split-KV partials (at most about one per SM) merged once. Not wired: windows, chunks and hybrid
SWA pools (the kernel has no window), softcap, fp16 / fp8 (other JIT builds), head dims past 512 / 64.
KVFLASHINFER_EMULATE=1 runs the same plan and run arguments through a float64 numpy model of the
wrapper (flashinfer_emulated.py; no torch, no FlashInfer): a CPU check of this adapter, not of
FlashInfer.

    PYTHONPATH=.gpu/site:adapters kvfuzz check case.json \
        --adapter "python3 adapters/gpu/flashinfer_mla.py" --backend flashinfer_mla
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import flashinfer_choice  # noqa: E402,F401  (a bad KVFLASHINFER_BACKEND: exit 2)
import kvfuzz_adapter as kv  # noqa: E402
from mla_packed import CKV, KPE, check_dims, decode_rows, latent, layer_keys, paged  # noqa: E402
from numpy_attention import rows_of  # noqa: E402

if os.environ.get("KVFLASHINFER_EMULATE") == "1":
    import flashinfer_emulated as kernels  # noqa: E402
else:
    import flashinfer_kernels as kernels  # noqa: E402


def decode_call(case):
    """(plan metadata, qo_indptr, page size, causal) of the latent decode path."""
    cu_q, seq_lens, table = decode_rows(case)
    metadata = dict(cum_seq_lens_q=cu_q, block_tables=table, seq_lens=seq_lens)
    return metadata, cu_q, case.plan["page_size"], bool(len(seq_lens) and np.diff(cu_q).max() > 1)


def prefill_call(case):
    """(plan metadata, qo_indptr, page size, causal) of the prefill path: the layout descriptor."""
    qo_indptr = case.array("prefill.qo_indptr")
    metadata = dict(qo_indptr=qo_indptr, kv_indptr=case.array("prefill.linear_kv_indptr"),
                    kv_indices=case.array("prefill.linear_kv_indices"), kv_len_arr=case.array("prefill.kv_lens"))
    return metadata, qo_indptr, case.plan["prefill"]["block_size"], True


@kv.executor(name="flashinfer_mla", family="mla", batch=True,
             supports={"modes": "all", "layer_kinds": ["full"], "dtypes": ["bf16"], "page_sizes": "any",
                       "head_dims": "any", "mla": True, "non_mla": False, "hybrid_swa": False,
                       "cuda_graph": True, "softcap": False, "gqa": True},
             precision={"p_dtype": "cache", "out_dtype": "bf16", "max_merges": 256, "row_sum": "p",
                        "tile_keys": 16}, fetch=kernels.FETCH)
def run(case):
    """FlashInfer's BatchMLAPagedAttentionWrapper (absorbed MLA, backend fa2) on the mla plan; the outputs
    stay on the device until every value set of the request has run (fetch)"""
    check_dims(case)
    vd, T = case.model["v_head_dim"], case.num_tokens
    out, lse = kernels.outputs(case)
    metadata, qo_indptr, page_size, causal = (prefill_call if case.plan["path"] == "prefill" else decode_call)(case)
    covered = rows_of(qo_indptr, len(qo_indptr) - 1, T)
    if not covered:  # an IDLE batch: FlashInfer's plan refuses no rows, nothing is launched
        return out, lse
    # Planned once a request, as sglang plans once a step and runs every layer on it: the value sets
    # share the metadata. A plan copies its schedule to the device and waits for it (11 ms a plan on
    # an H200 shared by four servers: 18 s of a server's 44 s over 150 requests, before this).
    plan = case.once("mla_plan", lambda: kernels.mla_plan(
        metadata, num_heads=case.model["q_heads"], head_dims=(CKV, KPE), page_size=page_size, causal=causal,
        sm_scale=float(case.sm_scale), dtype=case.dtype))
    tokens = np.array([t + i for _, t, n in covered for i in range(n)], np.int64)  # the rows' tokens
    at = kernels.index(tokens)
    for layer in range(len(case.layers)):
        kv_cache = paged(layer_keys(case, layer), page_size, vd)
        o, s = kernels.mla_run(plan, latent(case.q[layer], vd, T), kv_cache, dtype=case.dtype)
        if len(tokens):
            out[layer, at], lse[layer, at] = o[at, :, :vd], kernels.natural_lse(s[at])
    return out, lse


if __name__ == "__main__":
    kv.serve(run)
