"""Stand-ins for the kernels sglang's MLA backends launch: each records what its kernel reads.

Where it sits: mla_backends.py installs these in the backend modules; the layers' forward runs
unchanged up to the kernel call, and what is recorded becomes one `mla` plan there.

- FlashMLA (flashmla_backend.py): flash_mla_with_kvcache(q [rows, q_per_row, heads, d], k_cache
  paged_view(pool, 64), block_table, cache_seqlens, tile_scheduler_metadata, num_splits, causal):
  recorded as handed. get_mla_metadata's tile schedule is made from the seq_lens it is shown; the
  call that runs it must hand the same cache_seqlens (plan-run:cache_seqlens) and as many query
  tokens per KV head (plan-run:q_tokens). Which memory the block table and the schedule were handed in
  is kept (handed_storage): a CUDA graph replays the tensors its capture handed the kernel.
- FA3 MLA (flashattention_backend.py on an MLA model): flash_attn_with_kvcache with qv, the latent pool
  as paged views at the cache's page size: recorded as handed (page_table, cache_seqlens, cu_seqlens_q).
- FlashInfer MLA (flashinfer_mla_backend.py): BatchMLAPagedAttentionWrapper, as FlashInfer's
  flashinfer/mla.py has it (read at 00e3d683, plan() and run()): plan() copies qo_indptr /
  kv_indptr / kv_indices / kv_len_arr into the CUDA-graph buffers (else binds them) and hands the
  HOST arrays to its module's plan(), which makes the work schedule; run() hands the kernel only that
  schedule and the kv_indices buffer. So a call reads, for row i, queries qo_indptr[i] ..
  qo_indptr[i + 1] and keys k < kv_len_arr[i] at kv_indices[kv_indptr[i] + k] (page size of the
  plan, 1 in sglang), with the host arrays of the last module plan(): sglang's fast_mla_decode_plan
  and fast_mla_prefill_plan call that module plan() directly and run unchanged here.
  BatchPrefillWithRaggedKVCacheWrapper (extend without prefix: MHA over the step's new tokens):
  row i's keys are batch tokens kv_indptr[i] .. kv_indptr[i + 1], causal as planned.
"""
import torch

from engine.plan_run import PlanRun
from engine.tensors import host
from recorder import Recorder


class MlaRecorder(Recorder):
    """Recorder (recorder.py: layer, calls, the PlanRun check) with MLA's kernels."""

    def __init__(self, setup):
        super().__init__(setup)
        self.agree = PlanRun()
        self.schedules = []  # FlashMLA: [{seq_lens, q_tokens}] made by get_mla_metadata
        self.handed_storage = []  # FlashMLA: [(layer, argument, storage pointer)] of each call

    # -- FlashMLA --------------------------------------------------------------------------------------
    def get_mla_metadata(self, cache_seqlens, num_q_tokens_per_head_k, num_heads_k, *unused, **more):
        """The tile schedule: what it returns holds its index (1-based), which the kernel call looks up
        (sglang copies it into the CUDA-graph buffer at replay)."""
        self.schedules.append({"seq_lens": host(cache_seqlens, "cache_seqlens").to(torch.int64),
                               "q_tokens": int(num_q_tokens_per_head_k)})
        index = len(self.schedules)
        return (torch.full((1, 8), index, dtype=torch.int32, device=cache_seqlens.device),
                torch.full((int(cache_seqlens.shape[0]) + 1,), index, dtype=torch.int32, device=cache_seqlens.device))

    def flash_mla_with_kvcache(self, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata=None,
                               num_splits=None, softmax_scale=None, causal=False, **others):
        for name in ("descale_q", "descale_k", "indices"):
            if others.get(name) is not None:
                raise NotImplementedError(f"flash_mla_with_kvcache({name}=...) is not modelled by kvfuzz")
        rows, q_per_row, heads = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
        if not causal and q_per_row > 1:
            raise NotImplementedError("flash_mla_with_kvcache(causal=False) over several queries is not modelled")
        seq_lens = host(cache_seqlens, "cache_seqlens").to(torch.int64)
        table = host(block_table, "block_table").to(torch.int64)
        if table.shape[0] < rows or seq_lens.shape[0] < rows:
            raise RuntimeError(f"flash_mla_with_kvcache: {rows} query rows, a block table of {table.shape[0]} rows "
                               f"and {seq_lens.shape[0]} cache_seqlens")
        self._check_schedule(tile_scheduler_metadata, seq_lens, q_per_row * heads)
        for name, t in (("block_table", block_table), ("tile_scheduler_metadata", tile_scheduler_metadata)):
            self.handed_storage.append((self.layer, name, t.untyped_storage().data_ptr()))
        self._add({"kernel": "flash_mla", "page_size": int(k_cache.shape[1]), "q_lens": [q_per_row] * rows,
                   "block_table": table[:rows], "seq_lens": seq_lens[:rows]})
        return (torch.zeros(rows, q_per_row, heads, head_dim_v, dtype=q.dtype, device=q.device),
                torch.zeros(rows, heads, q_per_row, dtype=torch.float32, device=q.device))

    def _check_schedule(self, marker, seq_lens, q_tokens):
        where = "flash_mla_with_kvcache against get_mla_metadata's schedule"
        index = int(host(marker, "tile_scheduler_metadata").reshape(-1)[0]) - 1 if marker is not None else -1
        if not 0 <= index < len(self.schedules):
            self.agree.note("tile_scheduler_metadata", "a schedule of this step", "none of them", self.layer, where)
            return
        s = self.schedules[index]
        if not torch.equal(s["seq_lens"], seq_lens):
            self.agree.note("cache_seqlens", s["seq_lens"].tolist(), seq_lens.tolist(), self.layer, where)
        self.agree.check("q_tokens", s["q_tokens"], q_tokens, self.layer, where)

    # -- FA3 MLA (flashattention_backend.py with an MLA model: the absorbed path) -----------------------
    def flash_attn_with_kvcache(self, q, k_cache, v_cache, page_table=None, cache_seqlens=None, cu_seqlens_q=None,
                                cu_seqlens_k_new=None, max_seqlen_q=None, softmax_scale=None, causal=False,
                                window_size=(-1, -1), softcap=0.0, return_softmax_lse=False, qv=None, **unused):
        """FA3 over the latent pool: q the rope part, qv the latent part, k_cache / v_cache paged views of
        the pool's rope and latent columns; row b's queries cu_seqlens_q[b] .. [b + 1], its keys
        k < cache_seqlens[b] through page_table row b, bottom-right causal."""
        if qv is None:
            raise NotImplementedError("flash_attn_with_kvcache without qv on an MLA model is not modelled")
        for name in ("k", "v", "rotary_cos", "cache_batch_idx", "cache_leftpad", "k_descale", "v_descale"):
            if unused.get(name) is not None:
                raise NotImplementedError(f"flash_attn_with_kvcache({name}=...) is not modelled by kvfuzz")
        if int(window_size[0]) >= 0 or softcap:
            raise NotImplementedError("a window or soft cap on FA3's MLA path is not modelled")
        cu = host(cu_seqlens_q, "cu_seqlens_q").to(torch.int64)
        rows = int(cu.shape[0]) - 1
        q_lens = (cu[1:] - cu[:-1]).tolist()
        if not causal and max(q_lens, default=0) > 1:
            raise NotImplementedError("flash_attn_with_kvcache(causal=False) over several queries is not modelled")
        self._add({"kernel": "fa_mla", "page_size": int(k_cache.shape[1]), "q_lens": q_lens,
                   "block_table": host(page_table, "page_table").to(torch.int64)[:rows],
                   "seq_lens": host(cache_seqlens, "cache_seqlens").to(torch.int64)[:rows]})
        out = q.new_zeros(q.shape[0], q.shape[1], v_cache.shape[-1])
        if return_softmax_lse:
            return out, torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
        return out

    # -- FlashInfer MLA --------------------------------------------------------------------------------
    def paged_wrapper(self, *args, **kwargs):
        return _MlaPaged(self, *args, **kwargs)

    def ragged_wrapper(self, *args, **kwargs):
        return _Ragged(self, *args, **kwargs)


class _Module:
    """The wrapper's compiled module: plan() keeps the host arrays the schedule is made from."""

    def __init__(self, wrapper):
        self.wrapper = wrapper

    def plan(self, float_ws, int_ws, pinned_ws, qo_indptr, kv_indptr, kv_len_arr, num_heads, head_dim_o, causal,
             *more):
        self.wrapper.schedule = {"qo_indptr": host(qo_indptr, "qo_indptr").to(torch.int64),
                                 "kv_indptr": host(kv_indptr, "kv_indptr").to(torch.int64),
                                 "kv_len": host(kv_len_arr, "kv_len_arr").to(torch.int64), "causal": bool(causal)}


class _MlaPaged:
    """flashinfer.mla.BatchMLAPagedAttentionWrapper: plan() as FlashInfer's, run() recorded."""

    def __init__(self, rec, float_workspace_buffer, use_cuda_graph=False, qo_indptr=None, kv_indptr=None,
                 kv_indices=None, kv_len_arr=None, backend="auto"):
        self.rec, self.schedule = rec, None
        self._float_workspace_buffer = float_workspace_buffer
        self._int_workspace_buffer = self._pin_memory_int_workspace_buffer = None
        self._use_cuda_graph = bool(use_cuda_graph)
        self._qo_indptr_buf, self._kv_indptr_buf, self._kv_indices_buf = qo_indptr, kv_indptr, kv_indices
        self._kv_len_arr_buf = kv_len_arr
        self._cached_module = _Module(self)
        self._causal, self._page_size = False, 1

    def plan(self, qo_indptr, kv_indptr, kv_indices, kv_len_arr, num_heads, head_dim_ckv, head_dim_kpe, page_size,
             causal, sm_scale, q_data_type, kv_data_type, use_profiler=False):
        if self._use_cuda_graph:
            self._qo_indptr_buf.copy_(qo_indptr)
            self._kv_indptr_buf.copy_(kv_indptr)
            self._kv_indices_buf[: len(kv_indices)].copy_(kv_indices)
            self._kv_len_arr_buf.copy_(kv_len_arr)
        else:
            self._qo_indptr_buf, self._kv_indptr_buf, self._kv_indices_buf = qo_indptr, kv_indptr, kv_indices
            self._kv_len_arr_buf = kv_len_arr
        self._causal, self._page_size, self._sm_scale = causal, page_size, sm_scale
        self._cached_module.plan(None, None, None, qo_indptr, kv_indptr, kv_len_arr, num_heads, head_dim_ckv, causal)

    def run(self, q_nope, q_pe, ckv_cache, kpe_cache, out=None, lse=None, return_lse=False, **unused):
        if self.schedule is None:
            raise RuntimeError("BatchMLAPagedAttentionWrapper.run before plan")
        s = self.schedule
        self.rec._add({"kernel": "flashinfer_mla", "page_size": int(self._page_size), "causal": bool(self._causal),
                       "qo_indptr": s["qo_indptr"], "kv_indptr": s["kv_indptr"], "kv_len": s["kv_len"],
                       "kv_indices": host(self._kv_indices_buf, "kv_indices").to(torch.int64)})
        out = torch.zeros_like(q_nope) if out is None else out
        return (out, torch.zeros(q_nope.shape[:2], dtype=torch.float32, device=q_nope.device)) if return_lse else out


class _Ragged:
    """flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper over the step's new tokens."""

    def __init__(self, rec, *args, **kwargs):
        self.rec, self.planned = rec, None

    def begin_forward(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None,
                      causal=False, **unused):
        self.planned = {"qo_indptr": host(qo_indptr, "qo_indptr").to(torch.int64),
                        "kv_indptr": host(kv_indptr, "kv_indptr").to(torch.int64), "causal": bool(causal)}

    plan = begin_forward

    def forward(self, q, k, v, causal=True, **unused):
        if self.planned is None:
            raise RuntimeError("BatchPrefillWithRaggedKVCacheWrapper.forward before begin_forward")
        self.rec.agree.check("causal", self.planned["causal"], bool(causal), self.rec.layer, "ragged prefill forward")
        self.rec._add(dict(self.planned, kernel="ragged", tokens=int(k.shape[0])))
        return q.new_zeros(q.shape[0], q.shape[1], v.shape[-1])

    def forward_return_lse(self, q, k, v, causal=True, **unused):
        return self.forward(q, k, v, causal), torch.zeros(q.shape[0], q.shape[1], dtype=torch.float32)
