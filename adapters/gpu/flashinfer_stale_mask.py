"""Reproduces a FlashInfer 0.7.2.post1 wrapper bug kvfuzz found: a BatchPrefillWithRaggedKVCacheWrapper
planned with a custom mask and then re-planned WITHOUT one (causal) still runs the old mask.

prefill.py, BatchPrefillWithRaggedKVCacheWrapper.plan (not CUDA-graph mode) sets _custom_mask_buf
only when a mask is given and never clears it; run() then picks MaskMode.CUSTOM because
_custom_mask_buf is not None. The paged wrapper's plan resets it to None. Found by kvfuzz's
flashinfer_paged_csr campaign (a masked ragged call of a chunked layer, then a causal one).

    PYTHONPATH=.gpu/site python3 adapters/gpu/flashinfer_stale_mask.py   # exit 1: reproduced
"""
import sys

import torch
from flashinfer import BatchPrefillWithRaggedKVCacheWrapper


def causal_run(wrapper, q, k, v, indptr):
    wrapper.plan(indptr, indptr, 1, 1, 64, 64, causal=True, q_data_type=torch.bfloat16)
    return wrapper.run(q, k, v)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    q, k, v = (torch.randn(2, 1, 64, dtype=torch.bfloat16, device=dev) for _ in range(3))
    indptr = torch.tensor([0, 2], dtype=torch.int32, device=dev)
    fresh = causal_run(BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 27, dtype=torch.uint8, device=dev), "NHD",
                                                            backend="fa2"), q, k, v, indptr)
    reused = BatchPrefillWithRaggedKVCacheWrapper(torch.empty(1 << 27, dtype=torch.uint8, device=dev), "NHD",
                                                  backend="fa2")
    only_key_0 = torch.tensor([True, False, True, False], device=dev)  # both queries see key 0 only
    reused.plan(indptr, indptr, 1, 1, 64, 64, custom_mask=only_key_0, q_data_type=torch.bfloat16)
    reused.run(q, k, v)
    stale = causal_run(reused, q, k, v, indptr)
    diff = (stale.float() - fresh.float()).abs().max().item()
    print(f"causal run on a wrapper planned with a mask before: max |difference| from a fresh wrapper {diff:.4g}")
    if diff > 0:
        print("REPRODUCED: the re-planned causal call ran under the previous plan's custom mask")
        return 1
    print("not reproduced: the wrapper dropped the old mask")
    return 0


if __name__ == "__main__":
    sys.exit(main())
