"""sglang's real Triton attention kernels under kvfuzz: a token_csr executor on the GPU.

Feeds the token_csr metadata (backends/triton/triton_plan_io.cc) to decode_attention_fwd and
extend_attention_fwd of one sglang release, sglang's own files, loaded from .gpu/sglang/RELEASE
(ci/gpu.sh unpacks them there from the archive ci/gpu_wheels.py cuts out of the release's wheel):
  SGLANG_TRITON_RELEASE  the release (default 0.5.23; 0.5.10.post1 is the older one ci/gpu_wheels.py
                         fetches); SGLANG_SITE a folder holding `sglang/` instead (an unpacked wheel)
The layout is detected: 0.5.23 keeps the kernels in sglang/kernels/ops/attention/ (with score_mod.py
and sglang/srt/environ.py, also sglang's own), 0.5.10.post1 to 0.5.13 in
sglang/srt/layers/attention/triton_ops/ (with prefill_attention.py). The packages above them are
empty modules here (their __init__ imports the server) and sglang.srt.utils is a stub of the five
functions they use (CUDA only: the AMD paths are off). Each call is triton_backend.py's; keywords a
later release added are passed where the release's function takes them (inspect.signature), with
the value its backend passes:
  - plan["kernel"] == "decode": decode_attention_fwd(q[:rows], k_pool, v_pool, o, kv_indptr,
    kv_indices, attn_logits [rows, H, MAX_KV_SPLITS, Dv] fp32, attn_lse [rows, H, MAX_KV_SPLITS] fp32,
    num_kv_splits, MAX_KV_SPLITS = plan["max_kv_splits"], sm_scale, 1.0, 1.0, logit_cap=softcap,
    sinks=None, xai_temperature_len=-1; 0.5.12+: has_mla=False, use_pdl=(CUDA sm90+); 0.5.23:
    page_size=the case's page size) as forward_decode. 0.5.23's lean_* / uneven_batch (read on
    AMD only) and score_mod stay at their defaults.
    The kernel returns no final LSE: stage 2 merges the non-empty splits' attn_lse online; this
    adapter takes the log-sum-exp of the same splits (the kernel's own split arithmetic on
    kv_indptr / num_kv_splits; attn_lse starts at -inf so an unwritten split weighs nothing), as
    0.5.23's DCP decode does.
  - plan["kernel"] == "extend": extend_attention_fwd(q, k_new, v_new, o, k_pool, v_pool, qo_indptr,
    kv_indptr, kv_indices, custom_mask (bool, verify only), is_causal=True, mask_indptr,
    max_len_extend, 1.0, 1.0, sm_scale, logit_cap=softcap, sliding_window_size = the CSR's radius W
    (sliding_window layers; -1 otherwise), sinks=None, window_kv_offsets = the CSR's kv_offsets
    (sliding_window layers; None otherwise), xai_temperature_len=-1; 0.5.23: page_size, and
    extend_seq_lens_cpu = the rows' query counts) as forward_extend. Positions are never passed:
    the kernel has none.
    The call returns NO LSE (0.5.23's lse_extend serves only its DCP path); this adapter computes
    it in float64 torch from the same inputs with the kernel's own masking rules (prefix columns
    all visible, custom mask or causal on new tokens, window q_id = prefix_len + m <= k_id + W on
    column indices). So LSE findings in extend modes describe that re-derivation, out findings the
    kernel.
Precision: tile_keys 16, below the kernels' smallest BLOCK_N (32): a split's running max is updated
once per BLOCK_N keys (and the last, shorter block of a split is covered by the margin).
Head dims below 16 are zero-padded (tl.dot needs K, N >= 16), Q/K and V to one common width
max(16, head_dim, v_head_dim); zeros change neither q.k nor the kept V channels, sm_scale is passed
explicitly. Real dims (both >= 16) are passed unpadded. Not wired: fp32 (tl.dot would use TF32), fp8,
chunked layers (the extend kernel has no chunk mask; no production Triton path), MLA.
  - "none": nothing runs (out 0, LSE -inf).
With TRITON_INTERPRET=1 the kernels run in Triton's interpreter on the CPU (tensors on the host;
fuzz/tests/sglang_triton_cpu_test.sh), in fp16 and fp32 (its tl.dot is exact fp32 there, no TF32) but
not bf16: the interpreter's tl.dot multiplies bf16 bit patterns (triton#11584, unsupported upstream).

    PYTHONPATH=adapters kvfuzz check case.json \
        --adapter "python3 adapters/gpu/sglang_triton.py" --backend sglang_triton
"""
import functools
import importlib
import inspect
import math
import os
import re
import sys
import threading
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
SITE = os.environ.get("SGLANG_SITE") or os.path.join(HERE, "..", "..", ".gpu", "sglang",
                                                     os.environ.get("SGLANG_TRITON_RELEASE", "0.5.23"))

import kvfuzz_adapter as kv  # noqa: E402
import torch  # noqa: E402
from cuda_arrays import DEV, TORCH_DTYPES, dev, device_pool, fetch, lane  # noqa: E402
import triton_variants  # noqa: E402

# Where a release keeps decode_attention.py and extend_attention.py, newest layout first.
KERNEL_PACKAGES = ("sglang.kernels.ops.attention", "sglang.srt.layers.attention.triton_ops")


def _release(site):
    """The release unpacked at site, from its dist-info folder."""
    for name in os.listdir(site):
        m = re.fullmatch(r"sglang-(.+)\.dist-info", name)
        if m:
            return m.group(1)
    return os.path.basename(os.path.normpath(site))


def _load_kernels(site):
    """(decode module, extend module) of the release at site: sglang's own files, under empty parent
    packages and a stub of sglang.srt.utils."""
    package = next((p for p in KERNEL_PACKAGES
                    if os.path.isfile(os.path.join(site, *p.split("."), "decode_attention.py"))), None)
    if package is None:
        sys.exit(f"sglang_triton: no sglang Triton kernels under {site} (ci/gpu.sh unpacks them; "
                 f"SGLANG_TRITON_RELEASE / SGLANG_SITE pick another)")
    parts = package.split(".")
    for name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)} | {"sglang.srt"}:
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = [os.path.join(site, *name.split("."))]
    utils = types.ModuleType("sglang.srt.utils")
    utils.is_hip = lambda: False
    utils.is_cuda = lambda: DEV.type == "cuda"
    utils.is_gfx95_supported = utils.is_gfx1250_supported = lambda: False
    utils.get_device_core_count = \
        lambda device_id=0: torch.cuda.get_device_properties(device_id).multi_processor_count if utils.is_cuda() else 0
    sys.modules["sglang.srt.utils"] = utils
    return (importlib.import_module(f"{package}.decode_attention"),
            importlib.import_module(f"{package}.extend_attention"))


_decode, _extend = _load_kernels(SITE)
RELEASE = _release(SITE)
# 0.5.23's MHA decode kernel forms each q_i k_i in the cache dtype and sums in fp32 (tl.sum of q * k
# cast to fp32 after the product; adapters/gpu/sglang_triton_mha_products.py measured it on the H100),
# the grouped one uses tl.dot in fp32: declared. Older releases (triton_ops/) sum the products in the
# cache dtype as well, beyond what the declaration covers: left undeclared, so those show as findings.
QK_PRODUCTS = "cache_mha" if _decode.__name__.startswith("sglang.kernels.") else "fp32"
decode_attention_fwd, extend_attention_fwd = _decode.decode_attention_fwd, _extend.extend_attention_fwd
MIN_BLOCK_KV = _decode._MIN_BLOCK_KV
# triton_backend: use_pdl = is_arch_support_pdl() on CUDA (sm90 and up), else False.
USE_PDL = DEV.type == "cuda" and torch.cuda.get_device_capability()[0] >= 9
DTYPES = ["fp16", "fp32"] if DEV.type == "cpu" else ["bf16", "fp16"]  # the interpreter: see above


@functools.cache
def _parameters(fn):
    return inspect.signature(fn).parameters


def later(fn, **kwargs):
    """The keywords of kwargs that this release's fn takes (ones a later release added)."""
    params = _parameters(fn)
    return {k: v for k, v in kwargs.items() if k in params}


# Lanes (a server answering several requests at once, kv.executor(lanes=lane)): each lane's thread
# runs on its own CUDA stream; the module keeps no state a request changes (_parameters caches
# signatures only). Triton's JIT is not known to be safe when threads compile at once (an open
# report of compiles failing from several threads: triton-lang/triton#5933), so the kernels are
# launched, and on a variant's first launch compiled, one lane at a time; launches are
# asynchronous: the kernels still run beside each other.
_LAUNCH = threading.Lock()

MIN_DOT_DIM = 16   # tl.dot needs every dimension >= 16: smaller head dims are zero-padded to 16
PAD = os.environ.get("SGLANG_TRITON_PAD", "shared")


def dims(case):
    """Widths Q/K and V are handed to the kernel at: real dims >= 16 unchanged; a dim below 16 pads
    both to one width (SGLANG_TRITON_PAD=separate pads each to max(16, dim) instead; V narrower than
    Q/K at such dims is a shape the sm90 build of the extend kernel gets wrong: known issue
    triton-sm90-extend-narrow-v)."""
    d, dv = case.model["head_dim"], case.model["v_head_dim"]
    if PAD == "separate":
        return max(MIN_DOT_DIM, d), max(MIN_DOT_DIM, dv)
    if min(d, dv) >= MIN_DOT_DIM:
        return d, dv
    w = max(MIN_DOT_DIM, d, dv)
    return w, w


def run_decode(case, csr, prefix, layer, dtype, out, lse):
    plan = case.plan
    rows = min(plan["rows"], case.num_tokens)
    max_splits = plan["max_kv_splits"]
    kv_indptr = case.array(prefix + "kv_indptr")
    num_kv_splits = case.array(prefix + "num_kv_splits")
    H, Dv = case.model["q_heads"], case.model["v_head_dim"]
    if rows == 0:
        return
    D, Dp = dims(case)
    q = dev(case.q[layer][:rows], dtype, D)
    k_buf, v_buf = device_pool(case, layer, "k", dtype, D), device_pool(case, layer, "v", dtype, Dp)
    o = torch.zeros((rows, H, Dp), dtype=dtype, device=DEV)
    attn_logits = torch.zeros((rows, H, max_splits, Dp), dtype=torch.float32, device=DEV)
    attn_lse = torch.full((rows, H, max_splits), -math.inf, dtype=torch.float32, device=DEV)
    kv_indptr_d, kv_indices_d, num_kv_splits_d = dev(kv_indptr), dev(case.array(prefix + "kv_indices")), dev(num_kv_splits)
    with _LAUNCH:
        decode_attention_fwd(q, k_buf, v_buf, o, kv_indptr_d, kv_indices_d,
                             attn_logits, attn_lse, num_kv_splits_d, max_splits,
                             case.sm_scale, 1.0, 1.0, logit_cap=float(case.softcap), sinks=None, xai_temperature_len=-1,
                             **later(decode_attention_fwd, has_mla=False, use_pdl=USE_PDL, page_size=case.page_size))
    # Stage 2's split arithmetic: which splits carry keys (they are the ones it merges).
    ip = kv_indptr.astype(np.int64)
    kv_len = ip[1:rows + 1] - ip[:rows]
    s = np.maximum(1, num_kv_splits[:rows].astype(np.int64))
    per = (kv_len + s - 1) // s
    per = (per + MIN_BLOCK_KV - 1) // MIN_BLOCK_KV * MIN_BLOCK_KV
    j = np.arange(max_splits)[None, :]
    used = np.minimum(per[:, None] * (j + 1), kv_len[:, None]) > per[:, None] * j
    lse_parts = attn_lse.double().masked_fill(~dev(used)[:, None, :], -math.inf)
    out[:rows] = o[..., :Dv].float()
    lse[:rows] = torch.logsumexp(lse_parts, dim=2).float()


LSE_CHUNK = 1 << 24  # float64 elements (scores and gathered keys) extend_lse holds at once: 128 MiB


def extend_lse(case, q, k_buf, v_buf, k_ext, qo_indptr, kv_indptr, kv_indices, mask, mask_indptr,
               window, window_offsets):
    """[num_tokens, H] natural LSE of extend_attention_fwd's softmax, by the kernel's masking rules:
    rows in chunks (padded to the chunk's longest row), a few tensor operations per chunk, so a
    batch of many cases costs about what one case does."""
    H, Hk = q.shape[1], k_buf.shape[1]
    lse = torch.full((q.shape[0], H), -math.inf, dtype=torch.float64, device=DEV)
    qo, ip = qo_indptr.astype(np.int64), kv_indptr.astype(np.int64)
    q_len = qo[1:] - qo[:-1]
    p_len = np.maximum(ip[1:len(q_len) + 1] - ip[:len(q_len)], 0)
    chunk, M, N = [], 0, 0  # rows of the chunk, its longest query run and key run
    for i in np.flatnonzero(q_len > 0):
        m, n = max(M, q_len[i]), max(N, p_len[i] + q_len[i])
        if chunk and (len(chunk) + 1) * n * (H * m + Hk * q.shape[2]) > LSE_CHUNK:  # scores + keys
            extend_lse_rows(case, np.array(chunk), q, k_buf, k_ext, qo, ip, q_len, p_len, kv_indices, mask,
                            mask_indptr, window, window_offsets, lse)
            chunk, m, n = [], q_len[i], p_len[i] + q_len[i]
        chunk, M, N = chunk + [i], m, n
    if chunk:
        extend_lse_rows(case, np.array(chunk), q, k_buf, k_ext, qo, ip, q_len, p_len, kv_indices, mask,
                        mask_indptr, window, window_offsets, lse)
    return lse


def extend_lse_rows(case, rows, q, k_buf, k_ext, qo, ip, q_len, p_len, kv_indices, mask, mask_indptr,
                    window, window_offsets, lse):
    """extend_lse over some rows: column c of row i is its prefix key c (c < p_len, the pool slot
    kv_indices[kv_indptr[i] + c]) or its new token c - p_len; query m its token qo_indptr[i] + m."""
    H, Hk, D = q.shape[1], k_buf.shape[1], q.shape[2]
    ql, pl, q0 = q_len[rows][:, None, None], p_len[rows][:, None, None], qo[rows][:, None, None]
    M, N = int(ql.max()), int((pl + ql).max())
    m, c = np.arange(M)[None, :, None], np.arange(N)[None, None, :]
    n = c - pl                                                                 # new-token column
    pre, new = c < pl, (n >= 0) & (n < ql)
    slot = kv_indices[np.clip(ip[rows][:, None, None] + c, 0, max(len(kv_indices) - 1, 0))][:, 0] \
        if len(kv_indices) else np.zeros((len(rows), N), np.int64)
    keys = torch.where(dev(pre[:, 0])[..., None, None], k_buf[dev(slot.astype(np.int64))],
                       k_ext[dev(np.clip(q0 + n, 0, len(k_ext) - 1)[:, 0])]).double()   # [r, N, Hk, D]
    tokens = np.clip(q0 + m, 0, len(q) - 1)[:, :, 0]                           # [r, M]
    qq = q[dev(tokens)].double().view(len(rows), M, Hk, H // Hk, D)
    s = torch.einsum("rmkgd,rnkd->rkgmn", qq, keys).reshape(len(rows), H, M, N) * case.sm_scale
    cap = float(case.softcap)
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    if mask is not None:
        off = window_offsets[rows].astype(np.int64)[:, None, None] if window > 0 else 0
        at = mask_indptr[rows].astype(np.int64)[:, None, None] + m * (pl + ql + off) + off + pl + n
        new_vis = new & (m < ql) & (mask[np.where(new & (m < ql), at, 0)] != 0)
    else:
        new_vis = new & (n <= m)
    pre_vis = pre
    if window > 0:
        pre_vis = pre & ((pl + m) <= c + window)
        new_vis = new_vis & (m <= n + window)
    vis = dev((pre_vis | new_vis) & (m < ql))                                  # [r, M, N]
    part = torch.logsumexp(s.masked_fill(~vis[:, None], -math.inf), dim=3).transpose(1, 2)  # [r, M, H]
    valid = (m < ql)[:, :, 0]
    # The valid rows by integer index from the host's mask: a boolean mask on the device would wait for
    # it (the result's length), once a layer, and with other servers on the GPU for their time too.
    lse[dev(tokens[valid])] = part.reshape(-1, H)[dev(np.flatnonzero(valid.reshape(-1)))]


def run_extend(case, csr, prefix, layer, dtype, out, lse):
    plan = case.plan
    qo_indptr = case.array("qo_indptr")
    kv_indptr = case.array(prefix + "kv_indptr")
    kv_indices = case.array(prefix + "kv_indices")
    kv_offsets = case.array(prefix + "kv_offsets") if prefix + "kv_offsets" in case.manifest["arrays"] \
        else np.zeros(len(qo_indptr), dtype=np.int32)  # a recorded plan (adapters/sglang/) may have none
    q_lens = qo_indptr[1:].astype(np.int64) - qo_indptr[:-1].astype(np.int64)
    max_len = int(q_lens.max()) if len(q_lens) else 0
    if max_len <= 0:
        return
    H, Dv = case.model["q_heads"], case.model["v_head_dim"]
    window = int(csr["window_or_chunk"]) if csr["kind"] == "sliding_window" else -1
    D, Dp = dims(case)
    q = dev(case.q[layer], dtype, D)
    k_ext, v_ext = dev(case.k_new[layer], dtype, D), dev(case.v_new[layer], dtype, Dp)
    k_buf, v_buf = device_pool(case, layer, "k", dtype, D), device_pool(case, layer, "v", dtype, Dp)
    mask = mask_np = mask_indptr_np = mask_indptr = None
    if plan["use_custom_mask"]:
        mask_np = case.array("custom_mask")
        mask = dev(mask_np).to(torch.bool)
        mask_indptr_np = case.array("mask_indptr")
        mask_indptr = dev(mask_indptr_np)
    o = torch.zeros((q.shape[0], H, Dp), dtype=dtype, device=DEV)
    qo_indptr_d, kv_indptr_d, kv_indices_d = dev(qo_indptr), dev(kv_indptr), dev(kv_indices)
    kv_offsets_d = dev(kv_offsets) if window >= 0 else None
    with _LAUNCH:
        extend_attention_fwd(q, k_ext, v_ext, o, k_buf, v_buf, qo_indptr_d, kv_indptr_d, kv_indices_d,
                             mask, True, mask_indptr, max_len, 1.0, 1.0, case.sm_scale, logit_cap=float(case.softcap),
                             sliding_window_size=window, sinks=None, window_kv_offsets=kv_offsets_d,
                             xai_temperature_len=-1,
                             **later(extend_attention_fwd, page_size=case.page_size,
                                     extend_seq_lens_cpu=q_lens.tolist()))
    out[:] = o[..., :Dv].float()
    lse[:] = extend_lse(case, q, k_buf, v_buf, k_ext, qo_indptr, kv_indptr, kv_indices, mask_np,
                        mask_indptr_np, window, kv_offsets).float()


@kv.executor(name="sglang_triton", family="token_csr", batch=True,
             description=f"sglang {RELEASE} Triton decode_attention_fwd / extend_attention_fwd on {DEV.type} "
                         "(extend LSE re-derived)",
             supports={"modes": "all", "layer_kinds": ["full", "sliding_window"], "dtypes": DTYPES,
                       "page_sizes": "any", "head_dims": "any", "mla": False, "non_mla": True,
                       "hybrid_swa": True, "cuda_graph": True, "softcap": True, "gqa": True},
             precision={"p_dtype": "cache", "out_dtype": "bf16", "max_merges": 64, "tile_keys": 16,
                        "qk_products": QK_PRODUCTS}, fetch=fetch, lanes=lane)
def run(case):
    """One case: each layer through the kernel the plan names, with that layer's CSR; its outputs stay
    on the device until every value set of the request has run (fetch)."""
    out_shape, lse_shape = case.output_shapes()
    out = torch.zeros(out_shape, dtype=torch.float32, device=DEV)
    lse = torch.full(lse_shape, -math.inf, dtype=torch.float32, device=DEV)
    kernel = {"decode": run_decode, "extend": run_extend}.get(case.plan["kernel"])
    if kernel is None:
        return out, lse
    dtype = TORCH_DTYPES[case.dtype]
    for layer in range(len(case.layers)):
        c = case.plan["layer_csr"][layer]
        kernel(case, case.plan["csrs"][c], f"csrs.{c}.", layer, dtype, out[layer], lse[layer])
    return out, lse


if __name__ == "__main__":
    triton_variants.log_from_environment()
    kv.serve(run)
