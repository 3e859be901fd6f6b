"""Stand-ins for the FlashInfer wrappers vLLM's FlashInfer backend plans and runs: each records what
its plan() was given and what each run() reads.

vLLM's FlashInferMetadataBuilder.build plans a BatchDecodeWithPagedKVCacheWrapper (through its
fast_plan_decode, which calls plan() outside CUDA graphs) over the batch's leading decode rows and a
BatchPrefillWithPagedKVCacheWrapper over the rest; FlashInferImpl.forward runs them on
query[:num_decode_tokens] and query[num_decode_tokens:]. The stand-ins keep FlashInfer's own plan
state that vLLM's forward asserts on (_window_left, _logits_soft_cap, _sm_scale, _causal), copy the
host arrays plan() copies to the device (indptr, last_page_len) and keep the device kv_indices
buffer by reference, read at run() as FlashInfer's kernel reads it. Each run() is checked against
its plan (engine/paged_csr_plan.py check_run): window_left, logits_soft_cap, sm_scale and causal
against the layer's own (the impl's), head dim, head counts, q/kv dtypes and page size against the
tensors the run is handed; the seq_lens a plan() schedules against the lengths its CSR gives the
kernel. Each disagreement is a plan-run finding.

    rec = Recorder(setup); rec.install(vl.flashinfer)
    rec.layer, rec.impl, rec.query = 0, impl, q; impl.forward(layer, q, k, v, kv_cache, metadata, out)
    rec.calls[0]   # [{"role": "decode", "qo_indptr": ..., "kv_indptr": ..., ...}, ...]
"""
import torch

from engine import paged_csr_plan
from engine.plan_run import PlanRun
from engine.tensors import host
from fp8_quant import scaled_fp8_quant

# Arguments of plan() and run() that change which keys are read or how: accepted only at these values.
_PLAN_INERT = {"custom_mask": None, "packed_custom_mask": None, "pos_encoding_mode": "NONE", "block_tables": None,
               "q_len_per_req": 1, "head_dim_vo": None, "prefix_len_ptr": None, "token_pos_in_items_ptr": None,
               "max_item_len_ptr": None, "seq_lens_q": None}
_RUN_INERT = {"sinks": None, "kv_cache_sf": None, "lse": None, "return_lse": False}


def _only_inert(what, given, inert):
    for name, value in given.items():
        if name in inert and value is not None and value != inert[name]:
            raise NotImplementedError(f"{what}({name}={value!r}) is not modelled by kvfuzz")


class _Wrapper:
    role = ""
    rec = None  # the Recorder (install() makes a class per recorder: vLLM checks isinstance)

    def __init__(self, workspace_buffer=None, kv_layout="NHD", use_cuda_graph=False, paged_kv_indptr_buffer=None,
                 paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None, **unused):
        if use_cuda_graph and self.role != "decode":
            raise NotImplementedError(f"a CUDA-graph {type(self).__name__} is not modelled (vLLM graphs decode only)")
        self.kv_layout = kv_layout
        self.is_cuda_graph_enabled = bool(use_cuda_graph)
        self.planned, self.fixed = None, None
        # FlashInfer's persistent buffers (CUDA-graph wrappers: vLLM's, kept by reference; the kernel
        # reads them when the graph replays) and the batch size they fix
        self._paged_kv_indptr_buf, self._paged_kv_indices_buf = paged_kv_indptr_buffer, paged_kv_indices_buffer
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buffer
        self._fixed_batch_size = 0
        if use_cuda_graph:
            self._fixed_batch_size = int(paged_kv_last_page_len_buffer.shape[0])
            if int(paged_kv_indptr_buffer.shape[0]) != self._fixed_batch_size + 1:
                raise ValueError("The size of paged_kv_indptr_buffer should be batch_size + 1")
        # what vLLM 0.1x's fast_plan_decode hands FlashInfer's scheduler on a replay (schedule())
        self._float_workspace_buffer = self._int_workspace_buffer = self._pin_memory_int_workspace_buffer = None
        # the tensor-core decode's resolved kernel backend, which 0.15's fast_plan_decode asks to pass
        # fa2's 19 scheduler arguments ("exactly 19 arguments for tensor core version", 0.15.0
        # flashinfer.py:1674-1697); _Scheduler reads the first nine
        self._backend = "fa2"
        self._cached_module = _Scheduler(self)
        self.scheduled = None  # the kv lengths the last plan scheduled (host)
        # FlashInfer's plan state, as vLLM's forward reads it
        self._window_left, self._logits_soft_cap, self._sm_scale, self._causal = -1, 0.0, None, False

    def _plan(self, qo_indptr, kv_indptr, kv_indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
              causal, window_left, logits_soft_cap, sm_scale, q_data_type, kv_data_type, seq_lens=None):
        self.planned = {"qo_indptr": qo_indptr, "kv_indptr": host(kv_indptr, "kv_indptr").to(torch.int64),
                        "kv_last_page_len": host(last_page_len, "last_page_len").to(torch.int64),
                        "kv_indices": kv_indices, "page_size": int(page_size), "causal": bool(causal),
                        "window_left": int(window_left)}
        self.fixed = paged_csr_plan.planned(head_dim, page_size, window_left, logits_soft_cap, causal, q_data_type,
                                            kv_data_type, sm_scale=sm_scale)
        self.fixed.update(num_qo_heads=int(num_qo_heads), num_kv_heads=int(num_kv_heads))
        if self.is_cuda_graph_enabled:  # FlashInfer's plan() copies into the persistent buffers
            paged_csr_plan.fill_graph_buffers(self, kv_indptr, kv_indices, last_page_len)
        csr = _seq_lens(self.planned["kv_indptr"], self.planned["kv_last_page_len"], int(page_size))
        self.scheduled = csr
        if seq_lens is not None:  # what FlashInfer schedules (kv_lens) against what its CSR gives the kernel
            scheduled = host(seq_lens, "seq_lens").to(torch.int64)
            if not torch.equal(scheduled, csr):
                self.rec.agree.note("seq_lens", scheduled.tolist(), csr.tolist(), self.rec.planning,
                                    f"{type(self).__name__.strip('_')} plan: seq_lens against the CSR's lengths")
        self._window_left, self._logits_soft_cap = int(window_left), float(logits_soft_cap or 0.0)
        self._sm_scale, self._causal = sm_scale, bool(causal)

    def run(self, q, paged_kv_cache, *args, out=None, window_left=None, q_scale=None, k_scale=None, v_scale=None,
            **others):
        _only_inert(f"{type(self).__name__}.run", others, _RUN_INERT)
        if self.planned is None:
            raise RuntimeError(f"{type(self).__name__}.run before plan")
        rec, p = self.rec, self.planned
        k = paged_kv_cache[0] if isinstance(paged_kv_cache, (tuple, list)) else paged_kv_cache
        page_dim, head_dim_axis = (1, 2) if self.kv_layout == "NHD" else (2, 1)
        if k.dim() == 5:  # one tensor [pages, 2, ...]: K is index 0 of dimension 1
            k = k[:, 0]
        impl = rec.impl
        ran = {"window_left": impl.window_left if window_left is None else int(window_left),
               "logits_soft_cap": impl.logits_soft_cap, "sm_scale": impl.scale, "causal": True,
               "head_dim": int(q.shape[-1]), "num_qo_heads": int(q.shape[1]), "num_kv_heads": int(k.shape[head_dim_axis]),
               "q_data_type": q.dtype, "kv_data_type": k.dtype, "page_size": int(k.shape[page_dim])}
        paged_csr_plan.check_run(rec.agree, self.fixed, ran, rec.layer, f"{type(self).__name__.strip('_')} run")
        first_token = rec.token_of(q)
        call = {"role": self.role, "pool": rec.setup.pool_of(k), "page_size": p["page_size"], "causal": p["causal"],
                "window_left": p["window_left"], "qo_indptr": p["qo_indptr"] + first_token, "custom_mask": None}
        if self.is_cuda_graph_enabled:  # the kernel reads these buffers (these tensors) each time the graph replays
            call["graph"] = (self, self._paged_kv_indptr_buf, self._paged_kv_indices_buf, self._paged_kv_last_page_len_buf)
        else:
            call.update(kv_indptr=p["kv_indptr"], kv_indices=host(p["kv_indices"], "kv_indices").to(torch.int64),
                        kv_last_page_len=p["kv_last_page_len"])
        if k.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            # an fp8 cache: the scales the kernel takes, q_scale and k_scale into sm_scale, v_scale onto
            # the output (FlashInfer 0.7.2 prefill.py:4322-4326; None: 1)
            call["scales"] = (None if q_scale is None else _scalar(q_scale, "q_scale"),
                              1.0 if k_scale is None else _scalar(k_scale, "k_scale"),
                              1.0 if v_scale is None else _scalar(v_scale, "v_scale"))
        rec.calls.setdefault(rec.layer, []).append(call)
        return out if out is not None else torch.zeros_like(q)


def _scalar(s, name):
    """A run() scale: a float, or a one-value tensor (FlashInfer takes both)."""
    if isinstance(s, torch.Tensor):
        if s.numel() != 1:
            raise NotImplementedError(f"run({name}=) of {s.numel()} values: only a per-tensor scale is modelled")
        return float(host(s, name).flatten()[0])
    return float(s)


class _Decode(_Wrapper):
    role = "decode"

    # BatchDecodeWithPagedKVCacheWrapper.plan's positional order in the FlashInfer each release pins:
    # vLLM 0.11's fast_plan_decode passes the first 17 of it, 0.13 to 0.14 all 21 (block_tables and
    # seq_lens None; the split size and switch only size the splits); from 0.15 FlashInfer's order
    # has o_data_type after kv_data_type (22); later releases pass keywords.
    ORDER = ("indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads", "head_dim", "page_size",
             "pos_encoding_mode", "window_left", "logits_soft_cap", "q_data_type", "kv_data_type", "data_type",
             "sm_scale", "rope_scale", "rope_theta", "non_blocking", "block_tables", "seq_lens", "fixed_split_size",
             "disable_split_kv")
    ORDER_O_DTYPE = ORDER[:12] + ("o_data_type",) + ORDER[12:]

    def plan(self, *args, **kwargs):
        order = self.ORDER_O_DTYPE if len(args) > len(self.ORDER) else self.ORDER
        if len(args) > len(order):
            raise TypeError(f"BatchDecodeWithPagedKVCacheWrapper.plan: {len(args)} positional arguments, "
                            f"FlashInfer's take at most {len(order)}")
        a = dict(pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
                 kv_data_type=None, data_type=None, sm_scale=None, block_tables=None, seq_lens=None)
        a.update(zip(order, args))
        a.update(kwargs)
        known = set(self.ORDER_O_DTYPE) - {"pos_encoding_mode", "block_tables"}
        _only_inert("BatchDecodeWithPagedKVCacheWrapper.plan", {k: v for k, v in a.items() if k not in known},
                    _PLAN_INERT)
        rows = int(a["indptr"].shape[0]) - 1
        self._plan(torch.arange(rows + 1, dtype=torch.int64), a["indptr"], a["indices"], a["last_page_len"],
                   a["num_qo_heads"], a["num_kv_heads"], a["head_dim"], a["page_size"], False, a["window_left"],
                   a["logits_soft_cap"], a["sm_scale"], a["q_data_type"] or a["data_type"],
                   a["kv_data_type"] or a["data_type"], a["seq_lens"])


class _Scheduler:
    """FlashInfer's compiled decode module as vLLM 0.1x's fast_plan_decode calls it on a CUDA-graph
    replay: plan(float_ws, int_ws, pinned_ws, qo_indptr, indptr, kv_lens, batch, batch, qo_heads,
    kv_heads, page_size, cuda_graph, head_dim, head_dim, causal, ...) schedules the batch from host
    arrays; the wrapper keeps the kv lengths scheduled (checked against the buffers at replay)."""

    def __init__(self, wrapper):
        self.wrapper = wrapper

    def plan(self, float_ws, int_ws, pinned_ws, qo_indptr, indptr, kv_lens, total_rows, batch, *rest):
        batch = int(batch)
        if batch != int(indptr.shape[0]) - 1:
            raise ValueError(f"FlashInfer decode plan: batch {batch} for an indptr of {int(indptr.shape[0])} entries")
        lens = host(kv_lens, "kv_lens").to(torch.int64)
        if kv_lens.numel() < batch:  # the scheduler reads `batch` lengths from the pointer: past the view,
            stored = kv_lens.untyped_storage().nbytes() // kv_lens.element_size() - kv_lens.storage_offset()
            if stored >= batch:  # into the runner's buffer (0.1x: its seq_lens, zero-filled past the batch)
                lens = host(kv_lens.as_strided((batch,), (1,)), "kv_lens").to(torch.int64)
            else:  # past the host buffer itself: what it reads there is not known (zeros assumed)
                self.wrapper.rec.agree.note("kv_lens", f"{batch} kv lengths read", f"a {stored}-entry host buffer",
                                            self.wrapper.rec.planning, "FlashInfer's decode scheduler (fast_plan_decode on a CUDA-graph replay)")
                lens = torch.cat([lens, torch.zeros(batch - lens.numel(), dtype=torch.int64)])
        self.wrapper.scheduled = lens[:batch]
        return ()


def _fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                      pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type=None,
                      kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
                      non_blocking=True, fixed_split_size=None, disable_split_kv=False, global_override_indptr_cpu=None,
                      **others):
    """flashinfer.decode.fast_decode_plan (0.27.1 and 0.33.0: vLLM's fast_plan_decode calls it on a CUDA-graph
    replay): no copy into the persistent buffers (vLLM wrote them), the batch size checked against the
    wrapper's fixed one, the schedule made from the host indptr and last_page_len."""
    _only_inert("fast_decode_plan", dict(others, pos_encoding_mode=pos_encoding_mode), _PLAN_INERT)
    if self.is_cuda_graph_enabled:
        paged_csr_plan.check_graph_batch(self, indices, last_page_len)
    else:
        self._paged_kv_indptr_buf, self._paged_kv_indices_buf, self._paged_kv_last_page_len_buf = (
            indptr, indices, last_page_len)
    indptr_host = host(indptr, "indptr").to(torch.int64)
    self.scheduled = _seq_lens(indptr_host, host(last_page_len, "last_page_len").to(torch.int64), int(page_size))
    self._window_left, self._logits_soft_cap = int(window_left), float(logits_soft_cap or 0.0)
    self._sm_scale = sm_scale


class _PagedPrefill(_Wrapper):
    role = "prefill"

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             seq_lens=None, **others):
        """FlashInfer's BatchPrefillWithPagedKVCacheWrapper.plan (vLLM 0.11 passes the first eight
        positionally, later releases all by keyword)."""
        _only_inert("BatchPrefillWithPagedKVCacheWrapper.plan",
                    dict(others, custom_mask=custom_mask, packed_custom_mask=packed_custom_mask,
                         pos_encoding_mode=pos_encoding_mode, head_dim_vo=head_dim_vo if head_dim_vo != head_dim_qk else None),
                    _PLAN_INERT)
        self._plan(host(qo_indptr, "qo_indptr").to(torch.int64), paged_kv_indptr, paged_kv_indices,
                   paged_kv_last_page_len, num_qo_heads, num_kv_heads, head_dim_qk, page_size, causal, window_left,
                   logits_soft_cap, sm_scale, q_data_type, kv_data_type, seq_lens)


class Recorder:
    def __init__(self, setup):
        self.setup = setup
        self.layer, self.impl, self.query = -1, None, None  # the layer whose forward runs, and its query
        # the first layer of the group whose builder plans now (-1: none): a plan-step disagreement is
        # that layer's, so its fingerprint names the layer kind (set by the callers of build())
        self.planning = -1
        self.calls = {}  # layer -> [recorded wrapper runs]
        self.agree = PlanRun()
        self.quantized = {}  # an fp8 query's storage -> the batch token of its first row (quantize())

    def token_of(self, q):
        """The batch token of q's first row: run() is handed a slice of the layer's query, or of an fp8
        copy of one (quantize())."""
        quantized = self.quantized.get(q.untyped_storage().data_ptr())
        if quantized is not None:
            return quantized + q.storage_offset() // q.stride(0)
        base = self.query
        if q.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
            raise RuntimeError("a FlashInfer wrapper ran on a query that is not a view of the layer's")
        return (q.storage_offset() - base.storage_offset()) // base.stride(0)

    def quantize(self, input, scale=None, **kwargs):
        """custom_ops.scaled_fp8_quant as FlashInferImpl.maybe_quant_query calls it on a slice of the
        layer's query (0.33.0 flashinfer.py:2165-2183): fp8_quant's stand-in, its result remembered
        as that slice's rows."""
        first = self.token_of(input)
        out, s = scaled_fp8_quant(input, scale, **kwargs)
        self.quantized[out.untyped_storage().data_ptr()] = first
        return out, s

    def replayed(self):
        """The CUDA graph replays: each captured call reads, now (after the replay's plan), the buffers
        its wrapper held at capture, over the wrapper's fixed batch; the replay's schedule (the kv
        lengths its plan was shown) must be what those buffers give the kernel (plan-run:seq_lens)."""
        for layer, calls in self.calls.items():
            for c in calls:
                if "graph" not in c:
                    continue
                w, indptr, indices, last = c.pop("graph")
                n = w._fixed_batch_size
                c["kv_indptr"] = host(indptr[: n + 1], "kv_indptr").to(torch.int64)
                c["kv_indices"] = host(indices[: max(0, int(c["kv_indptr"][-1]))], "kv_indices").to(torch.int64)
                c["kv_last_page_len"] = host(last[:n], "kv_last_page_len").to(torch.int64)
                read = _seq_lens(c["kv_indptr"], c["kv_last_page_len"], c["page_size"])
                if w.scheduled is not None and not torch.equal(w.scheduled, read):
                    self.agree.note("seq_lens", w.scheduled.tolist(), read.tolist(), layer,
                                    "CUDA-graph replay: the replay's decode schedule against the captured buffers")

    def install(self, fi):
        """Replace what the module `fi` (vllm.v1.attention.backends.flashinfer) launches."""
        fi.BatchDecodeWithPagedKVCacheWrapper = type("_Decode", (_Decode,), {"rec": self})
        fi.BatchPrefillWithPagedKVCacheWrapper = type("_PagedPrefill", (_PagedPrefill,), {"rec": self})
        for name in ("BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper",
                     "BatchAttentionWithAttentionSinkWrapper", "trtllm_batch_decode_with_kv_cache",
                     "trtllm_batch_context_with_kv_cache", "merge_attn_states"):
            if hasattr(fi, name):  # classes stay classes: vLLM's forward asks isinstance of them
                setattr(fi, name, type(name, (_Unexpected,), {}) if "Wrapper" in name else _unexpected(name))
        if hasattr(fi, "get_seq_lens"):
            fi.get_seq_lens = _seq_lens
        if hasattr(fi, "fast_decode_plan"):  # FlashInfer's, which vLLM's fast_plan_decode calls on a replay
            fi.fast_decode_plan = _fast_decode_plan
        if hasattr(fi, "_get_multi_ctas_kv_counter_buffer"):  # a buffer of TRT-LLM's kernels only (0.3x)
            fi._get_multi_ctas_kv_counter_buffer = lambda *a, **k: None
        _no_cache_write()
        if hasattr(fi, "custom_ops"):  # an fp8 query (maybe_quant_query) is quantized by vLLM's op
            fi.custom_ops.scaled_fp8_quant = self.quantize


_seq_lens = paged_csr_plan.seq_lens  # FlashInfer's get_seq_lens


class _Unexpected:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: this FlashInfer path is not modelled by kvfuzz")


def _unexpected(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"{name} was called: this FlashInfer path is not modelled by kvfuzz")
    return fail


def _no_cache_write():
    """torch.ops._C_cache_ops.reshape_and_cache_flash (vLLM's compiled cache write, which the wheel's
    Python source lacks) as a no-op: kvfuzz writes the step's K/V itself."""
    if hasattr(torch.ops._C_cache_ops, "reshape_and_cache_flash"):
        return
    global _LIBRARY
    _LIBRARY = torch.library.Library("_C_cache_ops", "DEF")
    _LIBRARY.define("reshape_and_cache_flash(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
                    "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()")
    _LIBRARY.impl("reshape_and_cache_flash", lambda *args: None, "CompositeExplicitAutograd")


_LIBRARY = None
