"""The FlashInfer calls of flashinfer_paged_csr.py and flashinfer_mla.py: flashinfer-python's own
wrappers and merge_state.

numpy in, device tensors out (float32: bf16 / fp16 outputs convert exactly): out [n, H, Dv] and the
kernel's base-2 LSE [n, H]; nothing waits for the device, the executors' outputs stay there until
every value set of the request has run (FETCH: cuda_arrays.fetch, one copy and one wait). The
executors' array side (outputs, index, where, natural_lse, merge_natural) is here too, numpy's in
flashinfer_emulated.py. One wrapper object per kind, re-planned for every call, all over one
128 MiB float workspace as sglang shares one (flashinfer_backend.py global_workspace_buffer).
The ragged kind has two wrappers, for calls with and without a custom mask: FlashInfer 0.7.2.post1's
BatchPrefillWithRaggedKVCacheWrapper.plan keeps the previous plan's custom mask when planned
without one (prefill.py: the paged wrapper resets _custom_mask_buf to None, the ragged one does
not), so one shared wrapper runs a later causal call under a stale mask (flashinfer_stale_mask.py
shows it; KVFLASHINFER_SHARED_RAGGED=1 shares one wrapper, as sglang does, to reproduce it here).
Every wrapper is built with backend= flashinfer_choice.BACKEND (KVFLASHINFER_BACKEND: fa2, fa3 or
auto; MLA: KVFLASHINFER_MLA_BACKEND). An fp8_e4m3 case runs as vLLM's --kv-cache-dtype fp8 runs
FlashInfer: the paged cache in float8_e4m3fn (the stored values), the query and the output in bf16,
each paged run handed k_scale / v_scale (and q_scale where recorded) as Python floats
(vllm/v1/attention/backends/flashinfer.py:2444-2451, 2635-2644, 0.33.0), which FlashInfer folds
into sm_scale and multiplies the output by (prefill.py:4325-4326, 4625-4631; decode.py:2909-2910).
"""
import os

import numpy as np
import torch
from flashinfer import (BatchDecodeWithPagedKVCacheWrapper, BatchPrefillWithPagedKVCacheWrapper,
                        BatchPrefillWithRaggedKVCacheWrapper)
from flashinfer.cascade import merge_state as _merge_state
from flashinfer.mla import BatchMLAPagedAttentionWrapper, MLAPlanMetadata
from flashinfer.mla._batch_mla._backends._capabilities import _BackendPlanUnsupportedError

import device_outputs
import kvfuzz_adapter as kv
from cuda_arrays import DEV, TORCH_DTYPES, dev, device_pool, fetch
from flashinfer_choice import BACKEND, MLA_BACKEND
from numpy_attention import LOG2E

FETCH = fetch  # kv.executor's fetch: the outputs come off the device once a request
outputs = device_outputs.outputs  # the executors' (out, lse), zeros / -inf on the device

SHARED_RAGGED = os.environ.get("KVFLASHINFER_SHARED_RAGGED") == "1"
_workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=DEV)
_wrappers = {}


def _wrapper(kind, variant=False):
    """variant: use_tensor_cores for decode, masked for ragged."""
    key = (kind, variant and not (kind == "ragged" and SHARED_RAGGED))
    if key not in _wrappers:
        if kind == "decode":
            _wrappers[key] = BatchDecodeWithPagedKVCacheWrapper(_workspace, "NHD", use_tensor_cores=variant,
                                                                backend=BACKEND)
        elif kind == "mla":
            _wrappers[key] = BatchMLAPagedAttentionWrapper(_workspace, backend=MLA_BACKEND)
        elif kind == "paged":
            _wrappers[key] = BatchPrefillWithPagedKVCacheWrapper(_workspace, "NHD", backend=BACKEND)
        else:
            _wrappers[key] = BatchPrefillWithRaggedKVCacheWrapper(_workspace, "NHD", backend=BACKEND)
    return _wrappers[key]


def _dtypes(dtype):
    """(query / output dtype, cache dtype) of a case's dtype: fp8 caches under a bf16 query."""
    if dtype == "fp8_e4m3":
        return torch.bfloat16, torch.float8_e4m3fn
    return TORCH_DTYPES[dtype], TORCH_DTYPES[dtype]


def pages(case, layer, which, slots, page_size, width):
    """Layer's K or V pool as a paged cache on the device, [slots / page_size, page_size, Hkv, width]
    in the cache's dtype, what the cache stores (a sparse pool never exists dense on the host; an
    fp8 one is built in bf16, exact, then cast)."""
    q_dtype, kv_dtype = _dtypes(case.dtype)
    t = device_pool(case, layer, which, q_dtype, width, slots).to(kv_dtype)
    return t.view(-1, page_size, *t.shape[1:])


def _run(wrapper, *inputs, **scales):
    o, lse = wrapper.run(*inputs, return_lse=True, **{k: v for k, v in scales.items() if v is not None})
    return o.float(), lse.float()


def decode(q, k_pages, v_pages, kv_indptr, kv_indices, last_page_len, *, page_size, use_tensor_cores,
           num_qo_heads, num_kv_heads, sm_scale, logits_soft_cap, window_left, dtype, scales=(None, None, None)):
    """scales: run()'s (q_scale, k_scale, v_scale), floats or None (not passed)."""
    qt, kt = _dtypes(dtype)
    w = _wrapper("decode", use_tensor_cores)
    w.plan(dev(kv_indptr), dev(kv_indices), dev(last_page_len), num_qo_heads, num_kv_heads, q.shape[-1],
           page_size, window_left=window_left, logits_soft_cap=logits_soft_cap, sm_scale=sm_scale,
           q_data_type=qt, kv_data_type=kt)
    return _run(w, dev(q, qt), (dev(k_pages, kt), dev(v_pages, kt)), **_scale_args(scales))


def _scale_args(scales):
    return dict(zip(("q_scale", "k_scale", "v_scale"), scales))


def prefill_paged(q, k_pages, v_pages, qo_indptr, kv_indptr, kv_indices, last_page_len, *, page_size, causal,
                  custom_mask, num_qo_heads, num_kv_heads, sm_scale, logits_soft_cap, window_left, dtype,
                  scales=(None, None, None)):
    dt, kt = _dtypes(dtype)
    w = _wrapper("paged")
    w.plan(dev(qo_indptr), dev(kv_indptr), dev(kv_indices), dev(last_page_len), num_qo_heads, num_kv_heads,
           q.shape[-1], page_size, head_dim_vo=v_pages.shape[-1],
           custom_mask=None if custom_mask is None else dev(custom_mask), causal=causal,
           window_left=window_left, logits_soft_cap=logits_soft_cap, sm_scale=sm_scale,
           q_data_type=dt, kv_data_type=kt)
    return _run(w, dev(q, dt), (dev(k_pages, kt), dev(v_pages, kt)), **_scale_args(scales))


def prefill_ragged(q, k, v, qo_indptr, kv_indptr, *, causal, custom_mask, num_qo_heads, num_kv_heads, sm_scale,
                   logits_soft_cap, window_left, dtype):
    dt = _dtypes(dtype)[0]  # the step's new K/V, in the query's dtype
    w = _wrapper("ragged", custom_mask is not None)
    w.plan(dev(qo_indptr), dev(kv_indptr), num_qo_heads, num_kv_heads, q.shape[-1], v.shape[-1],
           custom_mask=None if custom_mask is None else dev(custom_mask), causal=causal,
           window_left=window_left, logits_soft_cap=logits_soft_cap, sm_scale=sm_scale,
           q_data_type=dt, kv_data_type=dt)
    return _run(w, dev(q, dt), dev(k, dt), dev(v, dt))


def merge_state(out_a, lse_a, out_b, lse_b, dtype):
    """flashinfer.cascade.merge_state on two calls' outputs (in the kernel's dtype) and base-2 LSEs."""
    dt = _dtypes(dtype)[0]
    o, s = _merge_state(dev(out_a, dt), dev(lse_a), dev(out_b, dt), dev(lse_b))
    return o.float(), s.float()


def mla_plan(metadata, *, num_heads, head_dims, page_size, causal, sm_scale, dtype):
    """BatchMLAPagedAttentionWrapper.plan on MLAPlanMetadata(**metadata) (int32 host arrays by the
    field names: the dense or the CSR form), base-2 LSE; a plan FlashInfer refuses is unsupported."""
    dt = TORCH_DTYPES[dtype]
    w = _wrapper("mla")
    fields = {name: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32)) for name, a in metadata.items()}
    try:
        w.plan(metadata=MLAPlanMetadata(**fields), num_heads=num_heads, head_dim_ckv=head_dims[0],
               head_dim_kpe=head_dims[1], page_size=page_size, causal=causal, sm_scale=sm_scale, q_data_type=dt,
               kv_data_type=dt, lse_mode="base2")
    except _BackendPlanUnsupportedError as e:
        raise kv.Unsupported(f"FlashInfer's MLA plan ({MLA_BACKEND}) refuses it: {e}") from e
    return w


def mla_run(plan, q, kv_cache, *, dtype):
    """q [T, H, ckv + kpe], kv_cache [pages, page_size, ckv + kpe] (packed) -> out [T, H, ckv], base-2 lse."""
    dt = TORCH_DTYPES[dtype]
    o, lse = plan.run(query=dev(q, dt), kv_cache=dev(kv_cache, dt), return_lse=True)
    return o.float(), lse.float()


def full(shape, value):
    """A float32 tensor of `value` on the device (a call's out or lse before its rows are put in)."""
    return torch.full(shape, value, dtype=torch.float32, device=DEV)


def index(a):
    """A numpy index array (host metadata) for the device tensors, through pinned memory (no wait)."""
    return dev(a)


def where(mask, a, b):
    """numpy's where(mask, a, b) with a host bool mask [n] over the first dimension of a and b."""
    return torch.where(dev(mask).view((-1,) + (1,) * (a.dim() - 1)), a, b)


def natural_lse(base2):
    """A base-2 LSE in natural log, float32 as numpy divides it (true division, not by the reciprocal)."""
    return device_outputs.divided(base2, LOG2E)


def merge_natural(acc, part):
    """numpy_attention.merge_base2(acc, part, natural_exp=True) (sglang's Triton merge_state fallback:
    exp / log on base-2 values, kvfuzz's fault mode), on the device in the parts' dtype."""
    return device_outputs.merge(acc[0], acc[1], part[0], part[1])
