"""FlashInfer's real wrappers under kvfuzz: a paged_csr executor on the GPU.

Runs each call of the paged_csr plan (backends/contract/FAMILIES.md; FlashInfer's wrapper calls as
sglang's FlashInferAttnBackend makes them) through flashinfer-python's own wrappers, on the kernel
backend KVFLASHINFER_BACKEND names (fa2 by default, as sglang sets its paged and decode wrappers,
flashinfer_backend.py:335-336; fa3: FlashInfer's sm90 kernels; auto: FlashInfer's pick;
flashinfer_choice.py, which also says what fa3 refuses: those calls are answered unsupported):
  - role "decode" / "draft": BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores when the GQA group
    is >= 4 (sglang's should_use_tensor_core for fp16/bf16 caches). The kernel reads ONE query per
    kernel row: q is [rows, H, D], row r's query the token at qo_indptr[r] (a padded row with no
    token gets a zero query, as a CUDA-graph batch hands the kernel padding); a row of more than
    one query token cannot be expressed and is reported as an error.
  - role "ragged": BatchPrefillWithRaggedKVCacheWrapper over this step's new K/V (k_new / v_new).
  - every other role: BatchPrefillWithPagedKVCacheWrapper.
  What each wrapper is handed is the plan's, unchanged: qo_indptr (prefill), kv_indptr, kv_indices,
  kv_last_page_len, the page size (the K/V pool viewed as [slots / ps, ps, Hkv, D]), causal,
  window_left and logits_soft_cap at plan time, the custom mask as laid out (flattened bool; FlashInfer
  derives its own mask offsets from qo/kv lengths, the plan's mask_indptr is NOT passed), sm_scale.
  A call of no rows (IDLE) launches nothing: the wrappers' plan fails on an empty batch.
  Each call returns FlashInfer's base-2 LSE; a group's calls are merged in order by
  flashinfer.cascade.merge_state (plan["merge"] == "flashinfer_base2", what sglang calls), or for
  "natural_exp" (sglang's Triton merge_state fallback, kvfuzz's fault mode) by numpy_attention's
  emulation of it (kernels.merge_natural: in torch on the device). Tokens no row of a call covers
  keep that call out of their merge. Outputs, merges and the token selection stay on the device until
  every value set of the request has run (kv.executor fetch: one copy and one wait a request).
Head dims: merge_state dispatches 64, 128, 256 and 512 only (cascade.cuh DISPATCH_HEAD_DIM), so Q/K
and V are zero-padded to one width W, the smallest of 64 / 128 / 256 that holds both head dims
(zeros change neither q.k, with sm_scale passed, nor the kept V channels); a real 64 or 128 passes
unpadded. Wired: all modes, full / sliding-window / chunked layers (chunks are in the plan's CSR),
hybrid SWA pools, CUDA-graph padding, bf16 and fp16 (each dtype is another set of JIT builds;
outputs come in the cache dtype), any page size, GQA, softcap, fp8 e4m3 caches with per-tensor scales
as vLLM runs them (flashinfer_kernels.py: the cache in e4m3, query and output in bf16). A paged or
decode row's run is handed the scales the plan's descales give that row (case.descales: FlashInfer
takes one float per run, so a call whose rows were handed different scales, vLLM's join of its decode
and prefill runs, is run once per distinct scale, each row's output taken from its own), else the
layer's scales (case.k_scale / v_scale); a ragged row reads the step's new K/V, unscaled. Not wired:
MLA (FlashInfer's MLA wrapper takes the mla family), fp32.
Precision (what the bound of properties/tolerance.h needs): the fa2 prefill kernels, which also run
the tensor-core decode, update a warp's running max once per 16 * NUM_MMA_KV keys and sum the rounded
P (row_sum "p"). The CUDA-core decode kernel (include/flashinfer/attention/decode.cuh,
BatchDecodeWithPagedKVCacheKernel, group sizes 1..3 here) keeps bdz states per (query, head) side by
side, each taking bdy * tile_size_per_bdx keys per update (bdy = group size; tile_size_per_bdx 4 at
group 1, else 1; bdz = max(128, bdx bdy) / (bdx bdy), bdx = head dim / 8), merged at the end
(sync_state): a weight's chain of rescales is at most ceil(n / (bdz bdy tile_size_per_bdx)) + bdz.
Split-KV (scheduler.cuh): both plans cut a request's keys into partitions of max(128 / page_size, 1)
pages or more, merged in sequence by bdy <= 16 threads, then across them (cascade.cuh, MergeStates*).
Declared: the smallest step over what this adapter runs, 3 keys (group 3 at width 256: bdz 1), so
tile_keys 3; partitions of at least 64 keys at any page size (65 at page size 65), so split_keys 64;
max_merges 34 = 16 (bdz) + 16 (bdy) + 1 (a partition straddling the visible keys) + 1 (the merge of
a group's ragged and prefix calls). Each answer then gives this case's own figures
(case.precision): the smallest step and partition of the calls it ran, 16 keys for a prefill or
tensor-core decode call, which makes the bound usable at 128k keys.
KVFLASHINFER_EMULATE=1 runs the same wrapper arguments through a float64 numpy model of the three
wrappers (flashinfer_emulated.py; no torch, no FlashInfer): a CPU check of this adapter, not of
FlashInfer.

    PYTHONPATH=.gpu/site:adapters kvfuzz check case.json \
        --adapter "python3 adapters/gpu/flashinfer_paged_csr.py" --backend flashinfer_paged_csr
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import kvfuzz_adapter as kv  # noqa: E402
from numpy_attention import padded, rows_of  # noqa: E402

EMULATE = os.environ.get("KVFLASHINFER_EMULATE") == "1"
WIDTHS = (64, 128, 256)
import flashinfer_choice  # noqa: E402  (a bad KVFLASHINFER_BACKEND: exit 2 before torch loads)
if EMULATE:
    import flashinfer_emulated as kernels  # noqa: E402
else:
    import flashinfer_kernels as kernels  # noqa: E402


def width(case):
    need = max(case.model["head_dim"], case.model["v_head_dim"])
    return next(w for w in WIDTHS if w >= need)


def decode_step(group, w):
    """Keys per running-max update of one of the bdz states of FlashInfer's CUDA-core decode kernel
    (decode.cuh, BatchDecodeWithPagedKVCacheDispatched, 2-byte K/V), times bdz: the keys one step
    of a weight's rescale chain covers."""
    bdx = w // max(8, w // 32)
    bdz = max(128, bdx * group) // (bdx * group)
    return bdz * group * (4 if group == 1 else 1)


def paged_pool(case, layer, ps, w):
    """The layer's K and V pools as FlashInfer's NHD paged cache: [slots / ps, ps, Hkv, W] (slots
    padded to whole pages, columns to W), built where the kernels run (kernels.pages)."""
    n = case.num_slots(layer)
    return tuple(kernels.pages(case, layer, which, n + (-n % ps), ps, w) for which in ("k", "v"))


def row_scales(case, layer, part, n_rows):
    """Each kernel row's (q_scale, k_scale, v_scale) for FlashInfer's run(): the plan's descales of
    the call (one float per row: FlashInfer repeats it over the KV heads), else the layer's scales
    for an fp8 cache, else none."""
    d = case.descales(layer, part)
    if d is None:
        fp8 = case.dtype == "fp8_e4m3"
        return [(None, case.k_scale(layer), case.v_scale(layer)) if fp8 else (None, None, None)] * n_rows
    rows = []
    for r in range(n_rows):
        triple = []
        for name, a in zip(("q", "k", "v"), d):
            if a is not None and r >= len(a):
                raise ValueError(f"layer {layer} call {part}: {name} descales for {len(a)} rows, the call has {n_rows}")
            if a is not None and np.any(a[r] != a[r][0]):
                raise ValueError(f"layer {layer} call {part} row {r}: {name} descales differ over the KV heads; "
                                 "FlashInfer's run takes one scale")
            triple.append(None if a is None else float(a[r][0]))
        rows.append(tuple(triple))
    return rows


def by_scales(scales, run):
    """run(scales) once per distinct scale triple of the rows: {triple: its (out, lse)}."""
    return {triple: run(triple) for triple in dict.fromkeys(scales)}


def put(out, lse, at, o, s, rows):
    """out[at], lse[at] = o[rows], s[rows] (at, rows: numpy index arrays): one copy each on the device."""
    if len(at):
        at, rows = kernels.index(np.asarray(at, np.int64)), kernels.index(np.asarray(rows, np.int64))
        out[at], lse[at] = o[rows], s[rows]


def run_call(case, call, prefix, layer, steps, part):
    """One wrapper call -> out [T, H, Dv], base-2 lse [T, H] (where the kernels run) and which tokens it
    covers [T] (numpy: host metadata); adds the call's (keys per rescale step, keys per split-KV
    partition) to `steps`."""
    T = case.num_tokens
    H, Hkv = case.model["q_heads"], case.model["kv_heads"]
    qo_indptr = case.array(prefix + "qo_indptr").astype(np.int32)
    kv_indptr = case.array(prefix + "kv_indptr").astype(np.int32)
    rows = rows_of(qo_indptr, call["rows"], T)
    if not rows:  # the wrappers reject a batch of no rows (an IDLE step): nothing is launched
        return kernels.full((T, H, width(case)), 0.0), kernels.full((T, H), -np.inf), np.zeros(T, bool)
    common = dict(num_qo_heads=H, num_kv_heads=Hkv, sm_scale=float(case.sm_scale),
                  logits_soft_cap=float(case.softcap), window_left=int(call["window_left"]), dtype=case.dtype)
    w = width(case)
    ps = call["page_size"]
    tensor_cores = H // Hkv >= 4
    refused = flashinfer_choice.refusal(call["role"], bool(call["has_mask"]), case.dtype == "fp8_e4m3",
                                        tensor_cores)
    if refused:
        raise kv.Unsupported(refused)
    steps.add((decode_step(H // Hkv, w) if call["role"] in ("decode", "draft") and not tensor_cores else 16,
               128 if call["role"] == "ragged" else max(128 // ps, 1) * ps))  # ragged: page size 1
    q = padded(case.q[layer], T, w)
    covered = np.zeros(T, bool)
    out, lse = kernels.full((T, H, w), 0.0), kernels.full((T, H), -np.inf)
    if call["role"] in ("decode", "draft"):
        if any(n > 1 for _, _, n in rows):
            r = next(r for r, _, n in rows if n > 1)
            raise ValueError(f"{call['role']} call row {r} has {rows[r][2]} query tokens: "
                             "BatchDecodeWithPagedKVCacheWrapper reads one query per row")
        q_rows = np.zeros((len(rows),) + q.shape[1:], np.float32)
        live = [(r, t) for r, t, n in rows if n == 1]
        for r, t in live:
            q_rows[r] = q[t]
        k_pages, v_pages = paged_pool(case, layer, call["page_size"], w)
        scales = row_scales(case, layer, part, len(rows))
        runs = by_scales(scales, lambda triple: kernels.decode(
            q_rows, k_pages, v_pages, kv_indptr, case.array(prefix + "kv_indices"),
            case.array(prefix + "kv_last_page_len"), page_size=call["page_size"], use_tensor_cores=tensor_cores,
            scales=triple, **common))
        for triple, (o, s) in runs.items():
            mine = [(r, t) for r, t in live if scales[r] == triple]
            put(out, lse, [t for _, t in mine], o, s, [r for r, _ in mine])
            covered[[t for _, t in mine]] = True
        return out, lse, covered
    mask = case.array(prefix + "custom_mask").astype(bool) if call["has_mask"] else None
    if call["role"] == "ragged":
        k_new, v_new = padded(case.k_new[layer], T, w), padded(case.v_new[layer], T, w)
        scales = [None] * len(rows)
        runs = {None: kernels.prefill_ragged(q, k_new, v_new, qo_indptr, kv_indptr,
                                             causal=bool(call["causal"]), custom_mask=mask, **common)}
    else:
        k_pages, v_pages = paged_pool(case, layer, call["page_size"], w)
        scales = row_scales(case, layer, part, len(rows))
        runs = by_scales(scales, lambda triple: kernels.prefill_paged(
            q, k_pages, v_pages, qo_indptr, kv_indptr, case.array(prefix + "kv_indices"),
            case.array(prefix + "kv_last_page_len"), page_size=call["page_size"], causal=bool(call["causal"]),
            custom_mask=mask, scales=triple, **common))
    for triple, (o, s) in runs.items():
        tokens = [t + i for r, t, n in rows if scales[r] == triple for i in range(n)]
        put(out, lse, tokens, o, s, tokens)
        covered[tokens] = True
    return out, lse, covered


def merge_layer(parts, natural_exp, dtype):
    """A group's calls merged in order; a token enters a merge only from the calls that cover it."""
    out, lse, covered = parts[0]
    for o, s, c in parts[1:]:
        if natural_exp:
            m_out, m_lse = kernels.merge_natural((out, lse), (o, s))
        else:
            m_out, m_lse = kernels.merge_state(out, lse, o, s, dtype)
        both = covered & c
        only_b = c & ~covered
        out = kernels.where(both, m_out, kernels.where(only_b, o, out))
        lse = kernels.where(both, m_lse, kernels.where(only_b, s, lse))
        covered = covered | c
    return out, lse


@kv.executor(name="flashinfer_paged_csr", family="paged_csr",
             supports={"modes": "all", "layer_kinds": "all", "dtypes": flashinfer_choice.PAGED_CSR_DTYPES,
                       "page_sizes": "any", "head_dims": "any", "mla": False, "non_mla": True, "hybrid_swa": True,
                       "cuda_graph": True, "softcap": True, "gqa": True, "kv_scales": True},
             precision={"p_dtype": "cache", "out_dtype": "cache", "max_merges": 34, "row_sum": "p",
                        "tile_keys": 3, "split_keys": 64}, fetch=kernels.FETCH)
def run(case):
    """FlashInfer's BatchDecode / BatchPrefill (paged, ragged) wrappers and merge_state, backend KVFLASHINFER_BACKEND;
    the outputs stay on the device until every value set of the request has run (fetch)"""
    if max(case.model["head_dim"], case.model["v_head_dim"]) > WIDTHS[-1]:
        raise kv.Unsupported(f"head dims above {WIDTHS[-1]}")
    out, lse = kernels.outputs(case)
    natural_exp = case.plan["merge"] == "natural_exp"
    steps = set()
    for layer in range(len(case.layers)):
        g = case.plan["group_of_layer"][layer]
        calls = case.plan["groups"][g]["calls"]
        parts = [run_call(case, call, f"groups.{g}.calls.{c}.", layer, steps, c) for c, call in enumerate(calls)]
        if parts:
            o, s = merge_layer(parts, natural_exp, case.dtype)
            out[layer], lse[layer] = o[..., :case.model["v_head_dim"]], kernels.natural_lse(s)
    if steps:
        case.precision(tile_keys=min(t for t, _ in steps), split_keys=min(k for _, k in steps))
    return out, lse


if __name__ == "__main__":
    kv.serve(run)
