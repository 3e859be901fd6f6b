"""FlashAttention 3's real kernel under kvfuzz: sgl-kernel's flash_attn_with_kvcache, a page_table executor.

Each kernel call of a page_table plan (FAMILIES.md; one part of a layer's group) is one call of
FA3's `flash_attn_with_kvcache` from sgl-kernel's library (KVFUZZ_FA3=DIR, DIR holding sgl_kernel/:
`python3 ci/gpu_fa3.py unpack --to DIR ...`, docs/gpu.md "Real FA3"), with the arguments sglang's
FlashAttentionBackend passes (flashattention_backend.py, 0.5.23: forward_extend :1789-1806 and the
cascade's expand call :1840-1863; forward_decode likewise) and nothing the plan does not hold:
  flash_attn_with_kvcache(q, k_cache, v_cache, page_table, cache_seqlens, cu_seqlens_q,
      cu_seqlens_k_new = cu_seqlens_k, max_seqlen_q, softmax_scale = sm_scale, causal,
      window_size = (window_left, 0) or (-1, -1), softcap, return_softmax_lse=True,
      num_splits = KVFUZZ_FA3_NUM_SPLITS (default 0: FA3's heuristic, what sglang passes unless
      deterministic), sinks = the call's sinks in bf16 (gpt-oss's s_aux: sglang keeps them in bf16
      for FA3, models/gpt_oss.py:428, and FA3 takes no other dtype; sinks not exact in bf16 are
      answered unsupported),
      q_descale / k_descale / v_descale = for an fp8 case (q, K and V in e4m3, the stored values) the
      call's descales as the plan records them (case.descales: float32 [rows, kv_heads], as vLLM's
      FlashAttention impl expands layer._q/_k/_v_scale, vllm/v1/attention/backends/flash_attn.py
      :1288-1296, 0.33.0; q none where none was recorded), else the layer's scales so expanded;
      none for a 16-bit case)
with the cache viewed [pages, view_page_size, kv_heads, head_dim] over the layer's pool (sglang's
expand call views it with pages of 1). The plan holds no scheduler_metadata (sglang's planner runs
without FA3's precompute, fa_page_table.py), so none is passed. A group's parts are merged as
sglang merges a cascade's, by sgl-kernel's merge_state_v2 on the parts' FA3 LSEs: its library is
not among the parts carried, so the model of it in adapters/repro/fa3_standin.py runs (fp32, the
result in V's dtype). The output and LSE are FA3's (the LSE transposed to [tokens, heads]); rows
of a page id outside the pool are run as they are: FA3 reads what lies there, memcheck sees it.

What FA3 takes (flash_api.cpp, as fa3_standin.refusal states it): fp16 / bf16, fp8 e4m3 (output
in bf16, :859; descales (batch, kv_heads), :1115-1144), head dims multiples of 8 (fp8: 16) up to 256, V as wide as K (or the
narrower combinations FA3 takes, run as FA3 runs them), GQA, any page size, softcap, windows,
sinks. Precision: P is rounded to the input dtype before P.V, the output written in it; the
running max updates once per tile of kBlockN keys, 64 to 176 for 16-bit sm90 tiles
(hopper/tile_size.h, fa3_standin._tile), declared as 32 since a window or the keys' end cuts a tile
short; split-KV partitions are whole tiles (split_keys 32 likewise).

Without a library at KVFUZZ_FA3 (unset, no sgl_kernel/flash_attn.py, not importable) or without a
CUDA device: exit 2 saying so.

    KVFUZZ_FA3=/tmp/sgl_fa3 kvfuzz run --backend fa:fa3_page_table --adapter "python3 adapters/gpu/fa3_page_table.py"
"""
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.append(os.path.join(HERE, "..", "repro"))  # fa3_standin (last: its folder holds generic names)

HEAD_DIMS = list(range(8, 257, 8))  # flash_api.cpp: multiples of 8, at most 256
NUM_SPLITS = int(os.environ.get("KVFUZZ_FA3_NUM_SPLITS", "0"))

import fa3_library  # noqa: E402  (no library: exit 2, said before torch loads)
import kvfuzz_adapter as kv  # noqa: E402
import torch  # noqa: E402
from cuda_arrays import DEV, TORCH_DTYPES, LayerTensors, dev, fetch  # noqa: E402
from device_outputs import outputs, padded_rows  # noqa: E402
from fa3_standin import merge_state_v2, refusal  # noqa: E402
from page_table_parts import part_of, run_layers  # noqa: E402

FLASH_ATTN_WITH_KVCACHE = fa3_library.load()


def descale_arguments(case, layer, part, rows):
    """q_descale / k_descale / v_descale of an fp8 case's call: float32 [rows, kv_heads] on the device,
    the plan's (case.descales) or else the layer's scales expanded, as vLLM hands them; {} for 16 bits."""
    if case.dtype != "fp8_e4m3":
        return {}
    d = case.descales(layer, part)
    if d is None:
        heads = case.model["kv_heads"]
        d = (None, np.full((rows, heads), case.k_scale(layer), np.float32),
             np.full((rows, heads), case.v_scale(layer), np.float32))
    return {f"{name}_descale": dev(a) for name, a in zip("qkv", d) if a is not None}


def call_arguments(case, call, prefix, window_left, q, k_cache, v_cache, layer):
    """flash_attn_with_kvcache's arguments for one call of the plan, as sglang (and, on an fp8 cache,
    vLLM) passes them; None when the call has no query token."""
    rows, width = int(call["rows"]), int(call["width"])
    cu_q = case.array(prefix + "cu_seqlens_q")[: rows + 1].astype(np.int32)
    tokens = int(cu_q[rows]) if rows else 0
    if not tokens:
        return None
    if int(cu_q.min()) < 0 or tokens > q.shape[0]:  # FA3 would write its output rows outside the batch
        raise IndexError(f"{prefix}cu_seqlens_q reaches token {tokens}, the batch has {q.shape[0]}")
    table = case.array(prefix + "page_table")[: rows * width].reshape(rows, width)
    sinks = call.get("sinks") or None  # a plan without sinks may hold an empty list
    if sinks is not None:  # sgl-kernel 0.4.3's FA3 takes them in bf16 only (RuntimeError "sinks must have dtype
        # bfloat16", run on an H100); sglang keeps gpt-oss's sinks in bf16 for it (models/gpt_oss.py:428)
        sinks = torch.tensor(sinks, dtype=torch.float64)
        if not torch.equal(sinks.to(torch.bfloat16).double(), sinks):
            raise kv.Unsupported("attention sinks not exact in bf16: FA3 takes them in bf16 (as sglang keeps them)")
        sinks = dev(sinks.numpy(), torch.bfloat16)  # pinned staging: no wait for the device
    return dict(q=q[:tokens], k_cache=k_cache, v_cache=v_cache, page_table=dev(table.astype(np.int32)),
                cache_seqlens=dev(case.array(prefix + "cache_seqlens")[:rows].astype(np.int32)),
                cu_seqlens_q=dev(cu_q), cu_seqlens_k_new=dev(case.array(prefix + "cu_seqlens_k")[: rows + 1].astype(np.int32)),
                max_seqlen_q=int(call["max_seqlen_q"]), softmax_scale=float(case.sm_scale), causal=bool(call["causal"]),
                window_size=(int(window_left), 0) if window_left >= 0 else (-1, -1), softcap=float(case.softcap or 0.0),
                return_softmax_lse=True, num_splits=NUM_SPLITS,
                sinks=sinks, **descale_arguments(case, layer, part_of(prefix), rows))


def merge(out_a, lse_a, out_b, lse_b, dtype):
    """sglang's cascade merge, merge_state_v2 (the stand-in's model of sgl-kernel's), on the device."""
    return merge_state_v2(dev(out_a, dtype), dev(lse_a, torch.float32), dev(out_b, dtype), dev(lse_b, torch.float32))


@kv.executor(name="fa3_page_table", family="page_table",
             supports={"modes": "all", "layer_kinds": "all", "dtypes": ["fp16", "bf16", "fp8_e4m3"],
                       "page_sizes": "any", "head_dims": HEAD_DIMS, "mla": False, "non_mla": True, "hybrid_swa": True,
                       "cuda_graph": True, "softcap": True, "gqa": True, "sinks": True, "kv_scales": True},
             precision={"p_dtype": "cache", "out_dtype": "cache", "tile_keys": 32, "split_keys": 32}, fetch=fetch)
def run(case):
    """FA3's flash_attn_with_kvcache (sgl-kernel) over the paged pool, parts merged by merge_state_v2; the
    outputs stay on the device until every value set of the request has run (fetch)"""
    m = case.model
    dt = TORCH_DTYPES[case.dtype]
    refused = refusal(dt, m["head_dim"], m["v_head_dim"], m["q_heads"], m["kv_heads"])
    if refused:
        raise kv.Unsupported(f"FA3 refuses this model: {refused}")
    tensors = LayerTensors(case, dt, dt)
    out_dt = torch.bfloat16 if case.dtype == "fp8_e4m3" else dt  # FA3's output dtype (flash_api.cpp:859)

    def run_call(layer, call, prefix, window_left):
        q, k_cache, v_cache = tensors(layer, int(call["view_page_size"]))
        args = call_arguments(case, call, prefix, window_left, q, k_cache, v_cache, layer)
        if args is None:
            o = torch.zeros((0, q.shape[1], m["v_head_dim"]), dtype=out_dt, device=DEV)
            softmax_lse = torch.zeros((q.shape[1], 0), dtype=torch.float32, device=DEV)
        else:
            o, softmax_lse, *_ = FLASH_ATTN_WITH_KVCACHE(**args)
        # tokens past the call's rows: 0 / -inf, in what FA3 returns (its output dtype, a float32 LSE)
        return padded_rows(o, case.num_tokens, 0.0), padded_rows(softmax_lse.transpose(0, 1), case.num_tokens, -math.inf)

    return run_layers(case, run_call, lambda oa, la, ob, lb: merge(oa, la, ob, lb, out_dt), outputs)


if __name__ == "__main__":
    kv.serve(run)
