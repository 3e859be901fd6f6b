"""Which of FlashInfer's kernel backends the FlashInfer executors ask for, and what the sm90 one refuses.

KVFLASHINFER_BACKEND=fa2|fa3|auto (default fa2) is the `backend=` of every wrapper
flashinfer_kernels.py builds: BatchDecodeWithPagedKVCacheWrapper, BatchPrefillWithPagedKVCacheWrapper,
BatchPrefillWithRaggedKVCacheWrapper and BatchMLAPagedAttentionWrapper (KVFLASHINFER_MLA_BACKEND, where
set, overrides it for MLA). What FlashInfer 0.7.2.post1 does with each (read in its source):
  - fa2: the Ampere-style kernels, every GPU; no CUTLASS headers needed.
  - fa3: the sm90 kernels (batch_prefill_sm90.cu, include/flashinfer/attention/hopper/), JIT-built
    against the CUTLASS headers (jit/env.py:402-405; ci/gpu_cutlass.py carries them). They refuse a
    custom mask at run time (prefill_sm90.cuh:531-533, 552-554, 573-575: cudaErrorNotSupported, raised
    by batch_prefill_sm90.cu:158 as a RuntimeError); head dims: Q/K = V in {64, 128, 256} (paged,
    :578-615; ragged also 192/128): the executor pads both to one of those widths; page sizes: any
    (a runtime page_size, :385); an fp8 KV cache only with an fp8 query (utils.py:492-497). The decode
    wrapper runs fa3 only with use_tensor_cores (its CUDA-core kernel takes no backend,
    decode.py:2436-2448), one query per row (q_len_per_req > 1 refused, :2392-2396).
  - auto: FlashInfer picks per plan: fa3 on sm90 with CUDA >= 12.3 (utils.py:663-665) unless a custom
    mask, an fp8 cache under a 16-bit query, or prefill head dims fa3 does not instantiate
    (utils.py:616-630, 486-507), else fa2. The decode wrapper's auto with tensor cores stays fa2 for
    16-bit caches (decode.py:2375-2391); MLA's auto prefers fa3 then fa2 on sm90
    (mla/_batch_mla/_auto_policy.py:105-107). sglang 0.5.23 asks auto for its ragged wrapper and fa2
    for the others on Hopper (flashinfer_backend.py:335-336, 501-525).
Precision: the executors declare fa2's figures for every backend. The sm90 kernels round P to the input
dtype as fa2 does and take 32 to 192 keys per running-max update (CTA_KV, prefill_sm90.cuh:507-524,
578-615), more than fa2's 16, so fa2's tile_keys stay a lower bound (read, not measured).
A refusal is answered unsupported (the case says nothing about the kernel), never run into; under fa3
the paged_csr executor declares no fp8 caches (PAGED_CSR_DTYPES).
"""
import os
import sys

BACKENDS = ("fa2", "fa3", "auto")


def _read(var, default):
    value = os.environ.get(var, default)
    if value not in BACKENDS:
        print(f"{os.path.basename(sys.argv[0])}: {var}={value!r}: expected one of {', '.join(BACKENDS)}",
              file=sys.stderr)
        sys.exit(2)
    return value


BACKEND = _read("KVFLASHINFER_BACKEND", "fa2")
MLA_BACKEND = _read("KVFLASHINFER_MLA_BACKEND", BACKEND)


# The cache dtypes the paged_csr executor declares: fa3 takes an fp8 cache only under an fp8 query,
# and the executor hands a bf16 one as vLLM does; its fp8 cases are not drawn (a few calls of them
# would run: CUDA-core decode, ragged; refusal() answers the rest).
PAGED_CSR_DTYPES = ["bf16", "fp16"] + ([] if BACKEND == "fa3" else ["fp8_e4m3"])


def refusal(role, has_mask, fp8, tensor_cores):
    """Why the backend's kernel refuses this call of a paged_csr plan (None: it runs it): role
    "decode" / "draft" runs the decode wrapper (on the sm90 kernels only with tensor cores), "ragged"
    the ragged one, any other the paged one."""
    if BACKEND != "fa3" or (role in ("decode", "draft") and not tensor_cores):
        return None  # fa2 runs everything wired; auto falls back to fa2 where fa3 would refuse
    if has_mask and role not in ("decode", "draft"):
        return "FlashInfer's sm90 (fa3) prefill kernels refuse a custom mask (prefill_sm90.cuh:531-575)"
    if fp8 and role != "ragged":  # ragged calls read the step's new K/V, in the query's dtype
        return "FlashInfer's fa3 kernels take an fp8 KV cache only with an fp8 query (utils.py:492-497)"
    return None
