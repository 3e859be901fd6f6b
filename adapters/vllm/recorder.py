"""Stand-ins for the kernels vLLM's FlashAttention and Triton backends launch: each records what it was handed.

FlashAttentionImpl.forward runs unchanged up to the kernel call (flash_attn_varlen_func, called
directly up to about 0.2x and through FA4DenseAttentionKernel's launcher later; both look the module
global up at call time), so what is recorded is exactly what production hands the kernel: the block
table as laid out, seqused_k, cu_seqlens_q, the window as the kernel counts it, the K/V view's page
size, which layer's cache. Cascade attention's two calls return outputs naming them, and its merge_attn_states checks it
merges the layer's last two, prefix first. FA3's ahead-of-time scheduler (get_scheduler_metadata) is recorded too:
its arguments are what the plan step fixed, and each kernel call handed that schedule is checked
against them (batch, max_seqlen_q/k, causal, window, page size, splits; engine/plan_run.py): the
schedule it returns holds its own index, so the call finds it through vLLM's persistent
CUDA-graph copy too. TritonAttentionImpl.forward's kernel entry, unified_attention (a module
global of triton_attn in every release), takes the same page-table arguments and is recorded as the
same call.

    rec = Recorder(setup); rec.install(vl.flash_attn)      # or vl.triton_attn
    impl.forward(layer, q, k, v, kv_cache, metadata, output)   # -> rec.calls[layer]
"""
import torch

from engine.plan_run import PlanRun
from engine.tensors import host, sinks as _sinks
from fp8_quant import scaled_fp8_quant

# Arguments of flash_attn_varlen_func that change which keys are read or how: recorded only at the
# values that keep the modelled behaviour.
# Attention sinks (s_aux; Triton's sinks) are recorded: the call's `sinks`, what its softmax took in.
_INERT = {"alibi_slopes": None, "mask_mod": None, "aux_tensors": None, "dynamic_causal": None,
          "q_v": None, "cu_seqlens_k": None, "rotary_cos": None}
# unified_attention's: ALiBi, multimodal prefix ranges, R-SWA, chunk lookback, quantized
# KV-cache modes (kv_quant_mode is compared by name: NONE). The tree bias (qq_bias) is recorded.
_TRITON_INERT = {"alibi_slopes": None, "mm_prefix_range": None,
                 "rswa_prefix_lens": None, "rswa_window": None, "k_scale_cache": None, "v_scale_cache": None,
                 "output_scale": None, "q_descale": None}


class Recorder:
    def __init__(self, setup):
        self.setup = setup
        self.layer = -1
        # A captured CUDA graph replays its kernels with the tensors they were handed at capture,
        # read when the graph replays: while capturing, calls keep those tensors (not copies) and
        # replayed() copies what they hold after the replay's metadata build.
        self.capturing = False
        # a captured graph re-run as its replay (v2_draft_graph.py): calls read their tensors now, and a
        # FA3 call is judged against its schedule as a replay is (_check_replayed_schedule)
        self.replaying = False
        self.calls = {}     # layer -> [recorded flash_attn_varlen_func calls]
        self.schedules = []  # recorded get_scheduler_metadata calls, in order
        self.merges = {}     # layer -> merge_attn_states calls (cascade attention)
        self.writes = {}     # layer -> (k_scale, v_scale) its forward's cache write quantized with (fp8)
        self.agree = PlanRun()  # the plan steps' arguments against the run steps'

    def install(self, module):
        """Replace the kernels the backend module calls (vllm.v1.attention.backends.flash_attn or
        .triton_attn): the attention kernel recorded, the cache write a no-op (kvfuzz writes K/V itself)."""
        kernels = {"flash_attn_varlen_func": self.flash_attn_varlen_func,
                   "get_scheduler_metadata": self.get_scheduler_metadata,
                   "unified_attention": self.unified_attention,
                   "reshape_and_cache_flash": self.reshape_and_cache_flash,
                   "triton_reshape_and_cache_flash": lambda *args, **kwargs: None,
                   "merge_attn_states": self.merge_attn_states,
                   "chunked_prefill_paged_decode": self.unexpected("chunked_prefill_paged_decode (Triton's prefill-decode split)")}
        # FlashAttention's are looked up at call time, where the release imported them or not; 0.10's
        # Triton impl calls the module's unified_attention (attention_run.py binds it so)
        always = {"flash_attn": ("flash_attn_varlen_func", "get_scheduler_metadata", "reshape_and_cache_flash"),
                  "triton_attn": ("unified_attention",)}.get(module.__name__.rsplit(".", 1)[-1], ())
        for name, kernel in kernels.items():
            if hasattr(module, name) or name in always:
                setattr(module, name, kernel)
        if hasattr(module, "ops"):  # 0.10's FlashAttention impl quantizes an fp8 cache's query itself
            module.ops.scaled_fp8_quant = scaled_fp8_quant

    def flash_attn_varlen_func(self, q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, seqused_k=None,
                               softmax_scale=None, causal=False, window_size=None, block_table=None, softcap=0.0,
                               out=None, scheduler_metadata=None, num_splits=0, fa_version=None,
                               return_softmax_lse=False, **others):
        for name, inert in _INERT.items():
            if others.get(name) is not inert and name in others:
                raise NotImplementedError(f"flash_attn_varlen_func({name}=...) is not modelled by kvfuzz")
        if block_table is None or seqused_k is None:
            raise NotImplementedError("flash_attn_varlen_func without a block table (varlen K/V) is not modelled")
        window = list(window_size) if window_size is not None else [-1, -1]
        sinks = _sinks(others.get("s_aux"), "s_aux")
        descales = self._descales(k, cu_seqlens_q, others)
        if descales is not None and self.layer in self.writes:  # what the write stored by, against what is read by
            for i, name in enumerate(("k_descale", "v_descale")):
                self.agree.check(name, self.writes[self.layer][i], float(descales[name].flatten()[0]), self.layer,
                                 "the layer's cache write (reshape_and_cache_flash's scale) against the kernel's read")
        if scheduler_metadata is not None and not self.capturing and not self.replaying:
            self._check_schedule(scheduler_metadata, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal, window,
                                 int(k.shape[1]), int(num_splits or 0))
        self._record("flash_attn_varlen_func", k, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k,
                     causal, window, sinks=sinks, num_splits=int(num_splits or 0), scheduled=scheduler_metadata is not None,
                     **({"schedule": scheduler_metadata} if self.capturing and scheduler_metadata is not None else {}),
                     **({"descales": descales} if descales is not None else {}))
        if scheduler_metadata is not None and self.replaying:
            self._check_replayed_schedule(self.layer, self.calls[self.layer][-1], scheduler_metadata)
        if not return_softmax_lse:
            return out
        # cascade_attention's two calls: an output and its LSE, each naming the call it came from
        # (merge_attn_states checks what it merges)
        index = len(self.calls[self.layer]) - 1
        result = torch.full((int(q.shape[0]), 1), float(index), device=q.device)
        return result, result.clone()

    def reshape_and_cache_flash(self, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                                v_scale, *args, **kwargs):
        """The cache write a release's forward makes itself (up to 0.1x; later the runner's
        do_kv_cache_update): kvfuzz writes the values, so nothing is written; on an fp8 cache the
        scales it quantizes by, e4m3(x / k_scale), are kept for the layer's kernel calls to read by."""
        if str(kv_cache_dtype).startswith("fp8"):
            self.writes[self.layer] = (float(host(k_scale, "k_scale").flatten()[0]),
                                       float(host(v_scale, "v_scale").flatten()[0]))

    def _descales(self, k, cu_seqlens_q, others):
        """An fp8 cache's q/k/v_descale as the kernel consumes them: float32 [batch, kv_heads]
        (vllm_flash_attn/cute/interface.py:920-928 checks that shape; FA3's C++ API the same), kept
        as handed (a CUDA graph's replay reads them then). A descale left out is read as 1 (FlashAttention
        scales by nothing it was not handed). None where the cache is not fp8: the kernel then takes
        no descale (FA4 drops them, interface.py:439-442)."""
        if k.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
            return None
        rows, heads = int(cu_seqlens_q.shape[0]) - 1, int(k.shape[-2])
        got = {}
        for name in ("q_descale", "k_descale", "v_descale"):
            t = others.get(name)
            if t is None:
                got[name] = None if name == "q_descale" else torch.ones(rows, heads)
                continue
            if tuple(t.shape) != (rows, heads) or t.dtype != torch.float32:
                raise RuntimeError(f"layer {self.layer}: flash_attn_varlen_func({name}=) of shape {tuple(t.shape)} "
                                   f"{t.dtype}; the kernel takes float32 [{rows}, {heads}] (batch, kv heads)")
            got[name] = t if self.capturing else host(t, name).clone()
        return got

    def _record(self, kernel, k, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal, window,
                **extra):
        """One page-table kernel call of this layer; k is the key cache viewed [blocks, block_size, ...]."""
        keep = (lambda t, name: t) if self.capturing else host
        self.calls.setdefault(self.layer, []).append({
            "kernel": kernel,
            "pool": self.setup.pool_of(k),
            "view_page_size": int(k.shape[1]),
            "page_table": keep(block_table, "block_table"),
            "cache_seqlens": keep(seqused_k, "seqused_k"),
            "cu_seqlens_q": keep(cu_seqlens_q, "cu_seqlens_q"),
            "max_seqlen_q": int(max_seqlen_q),
            "max_seqlen_k": int(max_seqlen_k),
            "causal": bool(causal),
            "window_left": int(window[0]),
            "window_right": int(window[1]),
            **extra,
        })

    def merge_attn_states(self, output, prefix_output, prefix_lse, suffix_output, suffix_lse, *args, **kwargs):
        """cascade_attention's merge: the layer's calls must be merged in order, the prefix's first
        (engine/page_table_plan.py merges a layer's parts by LSE in call order); a merge of anything
        else is not modelled."""
        calls = self.calls.get(self.layer, [])
        got = [int(t.flatten()[0]) if t.numel() else -1 for t in (prefix_output, prefix_lse, suffix_output, suffix_lse)]
        if len(calls) < 2 or got != [len(calls) - 2] * 2 + [len(calls) - 1] * 2:
            raise NotImplementedError(f"merge_attn_states of {got}: only a cascade's last two calls, prefix first, are modelled")
        self.merges.setdefault(self.layer, 0)
        self.merges[self.layer] += 1

    def unified_attention(self, q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k, softmax_scale,
                          causal, window_size, block_table, softcap, q_descale=None, k_descale=None, v_descale=None,
                          chunk_lookback=-1, kv_quant_mode=None, qq_bias=None, **others):
        """Triton's kernel entry (vllm/v1/attention/ops/triton_unified_attention.py): k is the key cache
        viewed [blocks, block_size, kv_heads, head_size]; causal a bool or (0.3x) a per-request tensor;
        qq_bias TreeAttention's [tree_len, tree_len] additive bias over each row's new tokens (kept with
        its row pitch, which the kernel also takes as the row length)."""
        for name, inert in _TRITON_INERT.items():
            if others.get(name, inert) is not inert:
                raise NotImplementedError(f"unified_attention({name}=...) is not modelled by kvfuzz")
        if int(chunk_lookback) != -1:
            raise NotImplementedError(f"unified_attention(chunk_lookback={chunk_lookback}) is not modelled by kvfuzz")
        if kv_quant_mode is not None and getattr(kv_quant_mode, "name", "NONE") != "NONE":
            raise NotImplementedError(f"unified_attention(kv_quant_mode={kv_quant_mode}) is not modelled by kvfuzz")
        if isinstance(causal, torch.Tensor):
            flags = host(causal, "causal")
            if not bool(flags.all()):
                raise NotImplementedError("unified_attention with non-causal requests is not modelled by kvfuzz")
            causal = True
        self._scalars("unified_attention", softmax_scale, softcap)
        window = list(window_size) if window_size is not None else [-1, -1]
        self._record("unified_attention", k, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal,
                     window, sinks=_sinks(others.get("sinks"), "sinks"), qq_bias=None if qq_bias is None else (host(qq_bias, "qq_bias").float(), int(qq_bias.stride(0))))
        return out

    def _scalars(self, kernel, softmax_scale, softcap):
        """The softmax scale and softcap the kernel was handed against the model's: a layer handed
        another is a mistake of the impl's construction or of the backend (the plan carries the model's)."""
        m = self.setup.model
        if abs(float(softmax_scale) - float(m["sm_scale"])) > 1e-6 * abs(float(m["sm_scale"])):
            raise RuntimeError(f"layer {self.layer}: {kernel} softmax_scale {softmax_scale}, the model's is {m['sm_scale']}")
        if float(softcap or 0) != float(m["softcap"] or 0):
            raise RuntimeError(f"layer {self.layer}: {kernel} softcap {softcap}, the model's is {m['softcap']}")

    def replayed(self):
        """The calls as the graph replays them: the captured tensors' contents now. A captured FA3
        call reads the schedule the replay's build left in vLLM's persistent scheduler_metadata
        buffer: it must be the schedule of what the call reads (plan-run:scheduled_seqlens, the
        key counts it was made for against the seqused_k the kernel reads, over the batch's rows; :causal)."""
        for layer, calls in self.calls.items():
            for c in calls:
                for name in ("page_table", "cache_seqlens", "cu_seqlens_q"):
                    c[name] = host(c[name], name)
                for name, t in c.get("descales", {}).items():
                    c["descales"][name] = None if t is None else host(t, name).clone()
                schedule = c.pop("schedule", None)
                if schedule is not None:
                    self._check_replayed_schedule(layer, c, schedule)

    def _check_replayed_schedule(self, layer, call, buffer):
        index = int(host(buffer, "scheduler_metadata")[0]) - 1
        where = "FULL CUDA graph replay: the captured kernel against the schedule the replay's build left"
        if not 0 <= index < len(self.schedules):
            self.agree.note("scheduler_metadata", "a schedule of this step", "none of them", layer, where)
            return
        # the batch's own rows: padded rows read no key, whatever the schedule says of them (0.1x's
        # builders schedule the real rows only; the adapter builds the padded batch, docs/vllm.md)
        s, rows = self.schedules[index], self.setup.bs
        self.agree.check("causal", s["causal"], call["causal"], layer, where)
        self.agree.check("scheduled_seqlens", s["cache_seqlens"][:rows], call["cache_seqlens"][:rows].tolist(), layer,
                         where)

    def as_plan_calls(self):
        """The calls with their index tensors as int64 (engine/page_table_plan.py)."""
        for calls in self.calls.values():
            for c in calls:
                for name in ("page_table", "cache_seqlens", "cu_seqlens_q"):
                    c[name] = c[name].to(torch.int64)
        return self.calls

    def get_scheduler_metadata(self, batch_size, max_seqlen_q, max_seqlen_k, cache_seqlens, cu_seqlens_q=None,
                               page_size=None, causal=False, window_size=(-1, -1), num_splits=0, **others):
        self.schedules.append({"batch_size": int(batch_size), "max_seqlen_q": int(max_seqlen_q),
                               "max_seqlen_k": int(max_seqlen_k), "page_size": None if page_size is None else int(page_size),
                               "causal": bool(causal),
                               "window": tuple(int(w) for w in window_size) if window_size is not None else (-1, -1),
                               "num_splits": int(num_splits or 0),
                               "cache_seqlens": host(cache_seqlens, "cache_seqlens").tolist()})
        # Its contents only schedule tiles (not modelled): here they hold the schedule's index (1-based),
        # which the kernel call looks up. Its length is FA3's build's (batch + 1 in the builds of 0.1x,
        # 1 + round_up(batch, 4) * 4 later): the shortest, which every release's persistent
        # CUDA-graph buffer holds.
        return torch.full((batch_size + 1,), len(self.schedules), dtype=torch.int32, device=cache_seqlens.device)

    def _check_schedule(self, scheduler_metadata, cu_seqlens_q, max_seqlen_q, max_seqlen_k, causal, window,
                        page_size, num_splits):
        """The kernel call against the FA3 schedule it was handed (get_scheduler_metadata's arguments)."""
        index = int(host(scheduler_metadata, "scheduler_metadata")[0]) - 1
        if not 0 <= index < len(self.schedules):
            self.agree.note("scheduler_metadata", "a schedule of this step", "none of them", self.layer,
                            "flash_attn_varlen_func")
            return
        s, where, layer = self.schedules[index], f"flash_attn_varlen_func against FA3 schedule {index}", self.layer
        self.agree.check("batch_size", s["batch_size"], int(cu_seqlens_q.shape[0]) - 1, layer, where)
        self.agree.check("max_seqlen_q", s["max_seqlen_q"], int(max_seqlen_q), layer, where)
        self.agree.check("max_seqlen_k", s["max_seqlen_k"], int(max_seqlen_k), layer, where)
        self.agree.check("causal", s["causal"], bool(causal), layer, where)
        self.agree.check("window_size", list(s["window"]), window, layer, where)
        self.agree.check("page_size", s["page_size"], page_size, layer, where)
        self.agree.check("num_splits", s["num_splits"], num_splits, layer, where)

    def unexpected(self, name):
        def fail(*args, **kwargs):
            raise NotImplementedError(f"{name} was called: this path is not modelled by kvfuzz")
        return fail
