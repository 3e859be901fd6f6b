"""sglang's FlashInferAttnBackend as a kvfuzz `paged_csr` planner (FAMILIES.md).

FlashInfer's wrapper classes are replaced, in the backend's module, by recording stand-ins: what
sglang hands `begin_forward` (indptr, indices, last-page lengths, page size, custom mask) is the
plan of that wrapper, and each `forward` / `forward_return_lse` the layer makes (causal flag) is
one call of the layer's group, merged in order (FlashInfer's base-2 merge_state). The call's window
is the one given at PLAN time: FlashInfer picks the kernel there (use_sliding_window =
window_left >= 0), and a window_left handed to forward() only replaces the value the plan/run
check compares (prefill.py forward: self._window_left = window_left) and the tile-start skip; the
per-key window mask stays compiled out (sglang PR 31501). So a paged prefill planned without a
window reads past it; kvfuzz reports every key of the row as read, where the kernel may skip
whole tiles before the window (the finding stands, its key set is an upper bound).
CUDA graphs (decode and idle batches): sglang creates CUDA-graph decode wrappers over slices of its
persistent kv_indptr / kv_indices / kv_last_page_len buffers, plans them once with begin_forward
(FlashInfer's plan(): copies into those buffers) and then swaps begin_forward for
partial(fast_decode_plan, wrapper) (0.5.10.post1 flashinfer_backend.py:594-597, 0.5.13:534-538,
0.5.23:842-846). A replay's updater writes the step's CSR into the same buffers in place
(call_begin_forward: kv_indptr[1:bs+1] = cumsum, kv_indices = wrapper._paged_kv_indices_buf;
0.5.23:1790-1806) and calls fast_decode_plan with global_override_indptr_cpu (the host cumsum of
seq_lens_cpu, 0.5.23:1823-1856), which copies nothing and schedules the batch from that host indptr.
The captured kernel reads the buffers its wrapper was made over: each decode call records them as
they stand after the replay (sglang_release.init_metadata runs capture, replay, then the layers), and
the replay's schedule against the lengths they give the kernel (plan-run:seq_lens). CUDA-graph
prefill wrappers (target-verify, draft-extend replays) and draft decode
(FlashInferMultiStepDraftBackend) are not driven.
"""
import importlib

import torch

from engine import paged_csr_plan
from engine.plan_run import PlanRun
from fake_runner import UnsupportedCase
from recorder import Recorder, host, recorded_plan
from torch_on import TorchOn


class _Wrapper:
    """FlashInfer's Batch*Wrapper, recording: begin_forward() sets the plan, forward*() records a call
    and checks it against the plan (_agree)."""

    def __init__(self, rec, *args, use_cuda_graph=False, paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None,
                 paged_kv_last_page_len_buffer=None, **kwargs):
        self.rec, self.plan, self.planned = rec, None, None
        self.is_cuda_graph_enabled = bool(use_cuda_graph)
        if use_cuda_graph and not isinstance(self, _Decode):
            raise NotImplementedError(f"a CUDA-graph {type(self).__name__} is not modelled")
        # FlashInfer's persistent buffers (CUDA-graph wrappers: sglang's slices, by reference) and the
        # batch size they fix; the kv lengths the last plan scheduled (host)
        self._paged_kv_indptr_buf, self._paged_kv_indices_buf = paged_kv_indptr_buffer, paged_kv_indices_buffer
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buffer
        self._fixed_batch_size = int(paged_kv_last_page_len_buffer.shape[0]) if use_cuda_graph else 0
        if use_cuda_graph and int(paged_kv_indptr_buffer.shape[0]) != self._fixed_batch_size + 1:
            raise ValueError("The size of paged_kv_indptr_buffer should be batch_size + 1")
        self.scheduled = None

    def _fix(self, head_dim, page_size, window_left, logits_soft_cap, causal, q_data_type, kv_data_type):
        self.planned = paged_csr_plan.planned(head_dim, page_size, window_left, logits_soft_cap, causal, q_data_type,
                                              kv_data_type)

    def _call(self, role, causal, window_left, logits_soft_cap, q, kv_buffer, k=None):
        if self.plan is None:
            raise RuntimeError(f"{type(self).__name__}.forward before begin_forward")
        pool = self.rec.setup.pool_of(kv_buffer[0]) if kv_buffer is not None else None
        self._agree(role, causal, window_left, logits_soft_cap, q, kv_buffer[0] if kv_buffer is not None else k)
        arrays = self._captured() if self.is_cuda_graph_enabled else {}
        self.rec._add(dict(self.plan, **arrays, role=role, causal=bool(causal),
                           window_left=self.plan["plan_window_left"], pool=pool))

    def _captured(self):
        """What the captured kernel reads when the graph replays: the persistent buffers over the
        wrapper's fixed batch, as the last plan left them; the schedule that plan made from host
        arrays must be the lengths they give the kernel (plan-run:seq_lens)."""
        n = self._fixed_batch_size
        indptr = host(self._paged_kv_indptr_buf[: n + 1], "kv_indptr").to(torch.int64)
        arrays = {"qo_indptr": torch.arange(n + 1, dtype=torch.int64), "kv_indptr": indptr,
                  "kv_indices": host(self._paged_kv_indices_buf[: max(0, int(indptr[-1]))], "kv_indices"),
                  "kv_last_page_len": host(self._paged_kv_last_page_len_buf[:n], "kv_last_page_len")}
        read = paged_csr_plan.seq_lens(indptr, arrays["kv_last_page_len"].to(torch.int64), self.plan["page_size"])
        if not torch.equal(self.scheduled, read):
            self.rec.agree.note("seq_lens", self.scheduled.tolist(), read.tolist(), self.rec.layer,
                                "CUDA-graph replay: fast_decode_plan's schedule against the captured buffers")
        return arrays

    def _agree(self, role, causal, window_left, logits_soft_cap, q, k):
        """The run's arguments against the plan's. forward() (FlashInfer's deprecated entry point) stores
        its window_left and logits_soft_cap over the planned ones, but the kernel stays the one plan()
        picked: a window or cap given only at forward() does not mask (sglang#31501, #33915). A causal
        run over a non-causal plan reads within what was scheduled, so only the reverse disagrees."""
        ran = {"window_left": int(window_left), "logits_soft_cap": logits_soft_cap, "head_dim": int(q.shape[-1]),
               "q_data_type": q.dtype, "kv_data_type": k.dtype, "causal": bool(causal)}
        if k.dim() == 4:  # a paged K view [pages, page_size, heads, dim]; 3-D views are pages of one token
            ran["page_size"] = int(k.shape[1])
        elif self.plan["page_size"] != 1 and not isinstance(self, _RaggedPrefill):
            ran["page_size"] = 1
        paged_csr_plan.check_run(self.rec.agree, self.planned, ran, self.rec.layer,
                                 f"{type(self).__name__.strip('_')} {role} forward")


class _Decode(_Wrapper):
    def begin_forward(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                      pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
                      kv_data_type=None, data_type=None, **unused):
        rows = int(indptr.shape[0]) - 1
        self.plan = {"qo_indptr": torch.arange(rows + 1, dtype=torch.int64), "kv_indptr": host(indptr, "indptr"),
                     "kv_indices": host(indices, "indices"), "kv_last_page_len": host(last_page_len),
                     "page_size": int(page_size), "plan_window_left": int(window_left), "custom_mask": None}
        self._fix(head_dim, page_size, window_left, logits_soft_cap, False, q_data_type, kv_data_type or data_type)
        self.scheduled = paged_csr_plan.seq_lens(self.plan["kv_indptr"].to(torch.int64),
                                                 self.plan["kv_last_page_len"].to(torch.int64), int(page_size))
        if self.is_cuda_graph_enabled:  # FlashInfer's plan() copies (a no-op: sglang hands the buffers)
            paged_csr_plan.fill_graph_buffers(self, indptr, indices, last_page_len)

    def forward(self, q, kv_buffer, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, sm_scale=None,
                **unused):
        self._call("decode", True, window_left, logits_soft_cap, q, kv_buffer)
        return q.new_zeros(q.shape)


def fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                     pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type=None,
                     kv_data_type=None, data_type=None, global_override_indptr_cpu=None, **unused):
    """flashinfer.fast_decode_plan, which sglang binds to its CUDA-graph decode wrappers after their
    first plan: on a CUDA-graph wrapper it checks the batch against the fixed one and copies nothing
    (sglang wrote the buffers); the schedule comes from the host indptr (global_override_indptr_cpu,
    else indptr.cpu()) and, at page size 1, last-page lengths of 1 (FlashInfer 0.7.2.post1
    decode.py:4956-5012, read). The kernel module stays the one the capture's plan picked: this
    plan's arguments are checked against it."""
    if self.is_cuda_graph_enabled:
        paged_csr_plan.check_graph_batch(self, indices, last_page_len)
    else:  # never so in sglang (its wrappers made without use_cuda_graph keep plan())
        raise NotImplementedError("fast_decode_plan on a wrapper without CUDA graphs is not modelled")
    indptr_host = host(global_override_indptr_cpu if global_override_indptr_cpu is not None else indptr, "indptr")
    last = torch.ones(int(last_page_len.shape[0]), dtype=torch.int64) if int(page_size) == 1 else host(last_page_len)
    self.scheduled = paged_csr_plan.seq_lens(indptr_host.to(torch.int64), last.to(torch.int64), int(page_size))
    again = paged_csr_plan.planned(head_dim, page_size, window_left, logits_soft_cap, False,
                                   q_data_type or data_type or "float16", kv_data_type or data_type)
    paged_csr_plan.check_run(self.rec.agree, self.planned, again, self.rec.layer,
                             "fast_decode_plan against the captured plan")


class _PagedPrefill(_Wrapper):
    def begin_forward(self, qo_indptr, kv_indptr, kv_indices, last_page_len, num_qo_heads, num_kv_heads, head_dim,
                      page_size, custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
                      use_fp16_qk_reduction=False, window_left=-1, logits_soft_cap=None, q_data_type="float16",
                      kv_data_type=None, **unused):
        self.plan = {"qo_indptr": host(qo_indptr, "qo_indptr"), "kv_indptr": host(kv_indptr, "kv_indptr"),
                     "kv_indices": host(kv_indices, "kv_indices"), "kv_last_page_len": host(last_page_len),
                     "page_size": int(page_size), "plan_window_left": int(window_left),
                     "custom_mask": None if custom_mask is None else host(custom_mask).to(torch.uint8)}
        self._fix(head_dim, page_size, window_left, logits_soft_cap, causal, q_data_type, kv_data_type)

    def forward(self, q, kv_buffer, causal=True, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, k_scale=None,
                v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, **unused):
        self._call("full_extend" if causal else "prefix", causal, window_left, logits_soft_cap, q, kv_buffer)
        return q.new_zeros(q.shape)

    def forward_return_lse(self, q, kv_buffer, causal=True, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                           k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, **unused):
        self._call("full_extend" if causal else "prefix", causal, window_left, logits_soft_cap, q, kv_buffer)
        return q.new_zeros(q.shape), torch.zeros(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)


class _RaggedPrefill(_Wrapper):
    def begin_forward(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, custom_mask=None,
                      packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                      window_left=-1, logits_soft_cap=None, q_data_type="float16", kv_data_type=None, **unused):
        self.plan = {"qo_indptr": host(qo_indptr, "qo_indptr"), "kv_indptr": host(kv_indptr, "kv_indptr"),
                     "kv_indices": torch.zeros(0, dtype=torch.int64), "kv_last_page_len": torch.zeros(0),
                     "page_size": 1, "plan_window_left": int(window_left), "custom_mask": None}
        self._fix(head_dim, 1, window_left, logits_soft_cap, causal, q_data_type, kv_data_type)

    def forward(self, q, k, v, causal=True, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, window_left=-1,
                logits_soft_cap=None, sm_scale=None, **unused):
        self._call("ragged", causal, window_left, logits_soft_cap, q, None, k)
        return q.new_zeros(q.shape)

    def forward_return_lse(self, q, k, v, causal=True, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                           window_left=-1, logits_soft_cap=None, sm_scale=None, **unused):
        self._call("ragged", causal, window_left, logits_soft_cap, q, None, k)
        return q.new_zeros(q.shape), torch.zeros(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)


def build(sg, setup):
    if setup.mode == "draft_decode":
        raise UnsupportedCase("draft decode through FlashInferMultiStepDraftBackend is not modelled")
    if setup.graph and setup.mode not in ("decode", "idle"):
        raise UnsupportedCase("FlashInfer CUDA-graph prefill wrappers (target-verify / draft-extend replays) "
                              "are not modelled")
    m = setup.case.model
    if m["head_dim"] != m["v_head_dim"]:
        raise UnsupportedCase("head_dim != v_head_dim: sglang's FlashInfer MHA path views V with head_dim")
    windows = {x["window"] for x in setup.layers_spec if x["kind"] == "sliding_window"}
    if len(windows) > 1:
        raise UnsupportedCase("several window sizes (FlashInferAttnBackend keeps one window wrapper)")
    if any(x["kind"] == "chunked" for x in setup.layers_spec):
        raise UnsupportedCase("chunked layers: server_args refuses FlashInfer for Llama 4")
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    rec = Recorder(setup)
    rec.agree = PlanRun()
    fi.BatchDecodeWithPagedKVCacheWrapper = lambda *a, **k: _Decode(rec, *a, **k)
    fi.BatchPrefillWithPagedKVCacheWrapper = lambda *a, **k: _PagedPrefill(rec, *a, **k)
    fi.BatchPrefillWithRaggedKVCacheWrapper = lambda *a, **k: _RaggedPrefill(rec, *a, **k)
    fi.merge_state = rec.merge_state
    fi._safe_merge_state = rec.merge_state  # 0.5.23: merge_state or Triton's, by head count (CUDA imports only)
    fi.fast_decode_plan = fast_decode_plan  # bound to the CUDA-graph decode wrappers after capture
    if str(setup.device) == "cpu":
        fi.torch = TorchOn(setup.device)
    backend = fi.FlashInferAttnBackend(setup.runner)
    return backend, rec


def plan(sg, setup):
    return recorded_plan(sg, setup, build, to_plan)


def to_plan(setup, rec):
    rec.agree.report(setup.case)

    def role(c):  # a masked call is the verify tree's, but for 0.5.23's window mask over a ragged
        # extend's paged prefix part (_build_swa_prefix_custom_mask): that stays a prefix call
        return "verify" if c["custom_mask"] is not None and setup.mode == "target_verify" else c["role"]

    return paged_csr_plan.to_plan(setup.case.layers, rec.calls, page_size=1, role_of=role)
