"""vLLM's own Triton attention kernel under kvfuzz: a page_table executor on the GPU.

Each kernel call of a page_table plan (FAMILIES.md; one part of a layer's group) is one call of the
release's `unified_attention` (vllm/v1/attention/ops/triton_unified_attention.py from 0.2x on,
vllm/attention/ops/triton_unified_attention.py before), vLLM's own file, loaded from the release's
Python source (VLLM_SITE, default .vllm/0.33.0: `ci/vllm.sh install` puts it there, ci/gpu_wheels.py
packs it for the GPU machine), with the arguments TritonAttentionImpl.forward passes:
  unified_attention(q, k_cache, v_cache, out, cu_seqlens_q, max_seqlen_q, seqused_k = cache_seqlens,
      max_seqlen_k, softmax_scale, causal, window_size = (window_left, 0) or (-1, -1),
      block_table = page_table, softcap, q_descale = None, k_descale, v_descale, kv_quant_mode)
with the cache viewed [blocks, view_page_size, kv_heads, head_dim] over the layer's pool, as vLLM's
Triton backend views its KV cache. k_descale/v_descale are the layer's `layer._k_scale` /
`_v_scale` expanded to (num_seqs, kv_heads) (triton_attn.py:666-679 in 0.33.0): the case's fp8
scales (case.k_scale / v_scale), 1 on an unscaled case; kv_quant_mode is FP8_PER_TENSOR on an fp8
cache, as the impl's get_kv_quant_mode("fp8") gives (kv_cache_interface.py:147-148; passed at
triton_attn.py:726), else NONE; releases whose kernel has no kv_quant_mode (0.11.0) dequantize
every fp8 tile by the scales. So `--backend vllm_triton_0_33_0:vllm_triton` (vllm_planner.py --backend triton)
runs vLLM's builder and vLLM's kernel end to end. The 2D kernel runs (no seq_threshold_3D: the
split-softmax 3D kernel needs the impl's scratch; which keys are read does not depend on it).
The kernel returns no LSE: this adapter computes it in float64 from the same metadata with the
page_table rules (page_table_parts.call_rows), on the device (device_lse.py), so LSE findings describe
that re-derivation and output findings the kernel; parts of a group (a cascade's prefix and
suffix) are merged by that LSE, on the device (device_outputs.merge, float64). The re-derivation's
rows come from the case's host arrays, so nothing waits for the kernel: the outputs stay on the device
until every value set of the request has run (kv.executor fetch: one copy and one wait a request).
Wired: fp16, bf16 (GPU), fp32 (interpreter: a GPU's tl.dot rounds it to TF32), fp8_e4m3 (an fp8 KV cache holding the stored values, read by the case's per-layer scales: supports
kv_scales; an fp16 query), GQA, softcap, attention sinks (a call's `sinks`, the kernel's sinks; the re-derived LSE takes them in too), windows, chunked layers' virtual batches, any mode the
plan states. Unsupported: MLA, a V head dim other than K's (the kernel's cache has one head
size), head dims below 32 (HEAD_DIMS), a view page size that is not a multiple of 16 (vLLM's Triton backend takes
MultipleOf(16) block sizes: a token-slot table of sglang's planner is not what vLLM runs).
With TRITON_INTERPRET=1 the kernel runs in Triton's interpreter on the CPU (fp16, fp32; not bf16:
triton#11584), as adapters/tests/vllm_triton_kernel_test.sh does in CI.

    TRITON_INTERPRET=1 kvfuzz check case.json --backend vllm_triton_0_33_0:vllm_triton \\
        --adapter ".sglang/venv/bin/python adapters/vllm/vllm_planner.py --site .vllm/0.33.0 --backend triton" \\
        --adapter ".sglang/venv/bin/python adapters/gpu/vllm_triton.py"
"""
import importlib
import inspect
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "vllm"))
# pydantic, where ci/vllm.sh installed it: 0.1x's vllm.attention package imports vLLM's configuration
sys.path.append(os.path.join(ROOT, ".vllm", "pyextra"))
SITE = os.environ.get("VLLM_SITE") or os.path.join(ROOT, ".vllm", "0.33.0")

import kvfuzz_adapter as kv  # noqa: E402
import torch  # noqa: E402
from cuda_arrays import DEV, TORCH_DTYPES, LayerTensors, dev, fetch  # noqa: E402
from device_lse import LayerKeys, call_lse  # noqa: E402
from device_outputs import merge, outputs, padded_rows  # noqa: E402
from page_table_parts import part_metadata, run_layers  # noqa: E402
import triton_variants  # noqa: E402

# vLLM's Triton backend takes head sizes from 32 on (TritonAttentionBackend.supports_head_size, 0.33.0);
# below 16 the kernel's tl.dot does not compile on a GPU (K >= 16)
HEAD_DIMS = [32, 48, 64, 80, 96, 112, 128, 160, 192, 256]
# fp32 only in the interpreter (exact there): on a GPU the kernel's tl.dot rounds fp32 inputs to TF32,
# which kvfuzz's precision model does not state (two oracle values:marginal findings on an H100, ours)
DTYPES = ["fp16", "bf16", "fp8_e4m3"] + (["fp32"] if DEV.type == "cpu" else [])
KERNEL_MODULES = ("vllm.v1.attention.ops.triton_unified_attention", "vllm.attention.ops.triton_unified_attention")


def load_kernel(site):  # -> (version, unified_attention, its module)
    """The release's unified_attention and what it imports (vllm.envs, vllm.logger, vllm.platforms,
    vllm.triton_utils, the attention ops: about 30 files), through vllm_import's stubs, on
    vllm_release's sm90 CUDA platform (the kernel asks it only for Blackwell tunings)."""
    if not os.path.isdir(os.path.join(site, "vllm")):
        print(f"vllm_triton.py: VLLM_SITE {site}: no vllm/ folder there (bash ci/vllm.sh install)", file=sys.stderr)
        sys.exit(2)
    import vllm_import
    from engine.release import release_of
    from vllm_release import install_platform, triton_interpreter

    vllm_import.install_finder(site)
    triton_interpreter()
    install_platform()
    version = release_of(site, "vllm")
    for name in KERNEL_MODULES:
        try:
            module = importlib.import_module(name)
            return version, module.unified_attention, module
        except ModuleNotFoundError as e:
            if not name.startswith(e.name or "?"):  # the kernel file is there, one of its imports is not
                raise
    print(f"vllm_triton.py: vLLM {version} has none of {KERNEL_MODULES}", file=sys.stderr)
    sys.exit(2)


VERSION, UNIFIED_ATTENTION, KERNEL_MODULE = load_kernel(os.path.abspath(SITE))


def quant_mode(case):
    """The kv_quant_mode argument TritonAttentionImpl.forward passes (its get_kv_quant_mode: fp8 caches
    FP8_PER_TENSOR, else NONE), where the release's kernel takes one (0.33.0; 0.11.0's has none)."""
    modes = getattr(KERNEL_MODULE, "KVQuantMode", None)
    if modes is None or "kv_quant_mode" not in inspect.signature(UNIFIED_ATTENTION).parameters:
        return {}
    return {"kv_quant_mode": modes.FP8_PER_TENSOR if case.dtype == "fp8_e4m3" else modes.NONE}


def run_call(case, layer, call, prefix, window_left, caches, q, keys):
    """One kernel call: the kernel's output rows, the re-derived LSE (device tensors, float64; the LSE's
    rows come from the case's host arrays, so nothing waits for the kernel); tokens in no row stay 0 / -inf."""
    n_tokens, n_slots = case.num_tokens, case.num_slots(layer)
    part_metadata(case, call, prefix, n_slots, n_tokens)  # checks the rows' tokens and pages (IndexError)
    vps, rows, width = int(call["view_page_size"]), int(call["rows"]), int(call["width"])
    cu_q = case.array(prefix + "cu_seqlens_q")[: rows + 1].astype(np.int32)
    tokens = int(cu_q[rows]) if rows else 0
    out = torch.zeros((max(tokens, 1), q.shape[1], q.shape[2]), dtype=q.dtype, device=DEV)
    # the call's attention sinks (the plan's; TritonAttentionImpl hands the kernel its fp32 parameter)
    sinks = {"sinks": dev(np.asarray(call["sinks"], dtype=np.float32))} if call.get("sinks") else {}
    if tokens:
        table = case.array(prefix + "page_table")[: rows * width].reshape(rows, width)
        # layer._k_scale / _v_scale (fp32 scalars) expanded to (num_seqs, kv_heads), as forward() does
        descale = (rows, caches[0].shape[2])  # the cache is [blocks, view_page_size, kv_heads, head_dim]
        # (filled on the device: torch.tensor(x, device=...) copies from pageable memory, a wait)
        k_descale = torch.full((), case.k_scale(layer), dtype=torch.float32, device=DEV).expand(descale)
        v_descale = torch.full((), case.v_scale(layer), dtype=torch.float32, device=DEV).expand(descale)
        UNIFIED_ATTENTION(
            q=q[:tokens], k=caches[0], v=caches[1], out=out[:tokens], cu_seqlens_q=dev(cu_q),
            max_seqlen_q=int(call["max_seqlen_q"]), seqused_k=dev(case.array(prefix + "cache_seqlens")[:rows].astype(np.int32)),
            max_seqlen_k=int(call["max_seqlen_k"]), softmax_scale=float(case.sm_scale), causal=bool(call["causal"]),
            window_size=(window_left, 0) if window_left >= 0 else (-1, -1), block_table=dev(table.astype(np.int32)),
            softcap=float(case.softcap or 0.0), q_descale=None, k_descale=k_descale, v_descale=v_descale, **sinks,
            **quant_mode(case))
    lse = call_lse(case, layer, call, prefix, window_left, keys)
    if sinks:  # the sink joins the re-derived LSE of the call's tokens as it joins the kernel's softmax
        lse[:tokens] = torch.logaddexp(lse[:tokens], dev(np.asarray(call["sinks"], dtype=np.float64)))
    return padded_rows(out[:tokens].double(), n_tokens, 0.0), lse  # float64 parts: merged in float64


@kv.executor(name="vllm_triton", family="page_table", batch=True,
             supports={"modes": "all", "layer_kinds": "all", "dtypes": DTYPES,
                       "page_sizes": [16, 32, 64, 128, 256], "head_dims": HEAD_DIMS, "mla": False, "non_mla": True,
                       "hybrid_swa": True, "cuda_graph": True, "softcap": True, "gqa": True, "sinks": True,
                       "kv_scales": True},
             precision={"p_dtype": "cache", "out_dtype": "cache", "tile_keys": 16}, fetch=fetch)
def run(case):
    """vLLM's unified_attention Triton kernel over the paged pool; the outputs stay on the device until
    every value set of the request has run (fetch)"""
    if case.model["v_head_dim"] != case.model["head_dim"]:
        raise kv.Unsupported("a V head dim other than K's: vLLM's Triton KV cache has one head size")
    if case.dtype == "bf16" and DEV.type == "cpu":
        raise kv.Unsupported("bf16 in Triton's interpreter (its tl.dot multiplies bf16 bit patterns: triton#11584)")
    # an fp8 KV cache is read as vLLM reads one: fp8 blocks of the stored values, dequantized by the
    # layer's scales into the query's fp16 (what stored * scale is exact in)
    dt = torch.float16 if case.dtype == "fp8_e4m3" else TORCH_DTYPES[case.dtype]
    cache_dt = torch.float8_e4m3fn if case.dtype == "fp8_e4m3" else dt
    tensors = LayerTensors(case, dt, cache_dt)  # the layer's query and its caches per view page size
    keys = LayerKeys(case)  # the layer's query and K pool in float32, for the LSE

    def run_layer_call(layer, call, prefix, window_left):
        vps = int(call["view_page_size"])
        if vps % 16:
            raise kv.Unsupported(f"view page size {vps}: vLLM's Triton backend takes block sizes that are multiples of 16")
        q, k_cache, v_cache = tensors(layer, vps)
        return run_call(case, layer, call, prefix, window_left, (k_cache, v_cache), q, keys)

    return run_layers(case, run_layer_call, merge, outputs)


if __name__ == "__main__":
    triton_variants.log_from_environment()
    kv.serve(run)
