"""Stand-ins for the attention kernels sglang's backends launch: each records what it was handed.

The backend's own forward code runs unchanged up to the kernel call, so what is recorded is
exactly what production hands the kernel: the page table or index arrays as laid out, the window
as the kernel counts it, the K/V view's page size, the causal flag, which pool's buffer. The
recorded calls become kvfuzz's plan of the backend's family, run by kvfuzz's checked executor.
"""
import torch

from engine.tensors import host, int32, sinks  # noqa: F401 (the translators import them from here)


# Arguments later releases added to the Triton kernels (0.5.23: page_size, MLA, lean attention, score_mod,
# skip_prefix / skip_extend, ...): recorded only at the values that keep the modelled behaviour.
# page_size (0.5.23): kv_indices stay token slots; the kernel addresses slot t as page t // ps, token
# t % ps, with page stride ps * slot stride: the same element of a [slots, heads, dim] pool, any ps.
_DEFAULTS = {"has_mla": False, "use_pdl": None, "page_size": None, "score_mod": None, "aux_tensors": None,
             "enable_lean": None, "lean_locks": None, "uneven_batch": None, "lean_Mp": None, "lean_Lp": None, "lean_Op": None, "lse_extend": None,
             "skip_prefix": False, "skip_extend": False, "extend_seq_lens_cpu": None, "identity_kv_indices": None}


def _only_defaults(kernel, newer):
    for name, value in newer.items():
        if name not in _DEFAULTS:
            raise NotImplementedError(f"{kernel}({name}=...) is not modelled by kvfuzz")
        if _DEFAULTS[name] is not None and value != _DEFAULTS[name]:
            raise NotImplementedError(f"{kernel}({name}={value!r}) is not modelled by kvfuzz")


class Recorder:
    def __init__(self, setup):
        self.setup = setup
        self.layer = -1
        self.calls = {}   # layer -> [recorded kernel calls]
        self.merges = {}  # layer -> number of LSE merges

    def _add(self, call):
        self.calls.setdefault(self.layer, []).append(call)

    # FlashAttention 3 (sgl_kernel.flash_attn.flash_attn_with_kvcache): page_table path only.
    def flash_attn_with_kvcache(self, q, k_cache, v_cache, page_table=None, cache_seqlens=None, cu_seqlens_q=None,
                                cu_seqlens_k_new=None, max_seqlen_q=None, softmax_scale=None, causal=False,
                                window_size=(-1, -1), softcap=0.0, return_softmax_lse=False, **unused):
        for name in ("k", "v", "qv", "rotary_cos", "cache_batch_idx", "cache_leftpad"):
            if unused.get(name) is not None:
                raise NotImplementedError(f"flash_attn_with_kvcache({name}=...) is not modelled by kvfuzz")
        if unused.get("attention_chunk"):  # no release passes it; the fa-*-local fixes do (fixes.py)
            raise NotImplementedError("flash_attn_with_kvcache(attention_chunk=...) is not modelled by kvfuzz's "
                                      "page_table family (the reproducer's FA3 stand-in runs it)")
        self._add({
            "kernel": "flash_attn_with_kvcache",
            "pool": self.setup.pool_of(k_cache),
            "view_page_size": int(k_cache.shape[1]),
            "page_table": host(page_table, "page_table").to(torch.int64),
            "cache_seqlens": host(cache_seqlens, "cache_seqlens").to(torch.int64),
            "cu_seqlens_q": host(cu_seqlens_q, "cu_seqlens_q").to(torch.int64),
            "max_seqlen_q": int(max_seqlen_q),
            "causal": bool(causal),
            "window_left": int(window_size[0]),
            "window_right": int(window_size[1]),
            "sinks": sinks(unused.get("sinks")),  # what its softmax takes in (FA3's sinks), or None
        })
        tokens = q.shape[0]
        heads = q.shape[1]
        out = q.new_zeros(tokens, heads, v_cache.shape[-1])
        if return_softmax_lse:
            return out, torch.zeros(heads, tokens, dtype=torch.float32, device=q.device)
        return out

    # sglang's Triton kernels (triton_ops/decode_attention.py, extend_attention.py), with the
    # asserts the real entry points make.
    def decode_attention_fwd(self, q, k_buffer, v_buffer, o, kv_indptr, kv_indices, attn_logits, attn_lse,
                             num_kv_splits, max_kv_splits, sm_scale, k_scale=1.0, v_scale=1.0, logit_cap=0.0,
                             sinks=None, xai_temperature_len=-1, **newer):
        _only_defaults("decode_attention_fwd", newer)
        assert max_kv_splits == attn_logits.shape[2]
        assert q.shape[0] <= kv_indptr.shape[0] - 1
        assert q.shape[0] <= attn_logits.shape[0]
        self._add({
            "kernel": "decode", "pool": self.setup.pool_of(k_buffer), "rows": int(q.shape[0]),
            "kv_indptr": host(kv_indptr, "kv_indptr").to(torch.int64),
            "kv_indices": host(kv_indices, "kv_indices").to(torch.int64),
            "num_kv_splits": host(num_kv_splits, "num_kv_splits").to(torch.int64), "max_kv_splits": int(max_kv_splits),
            "window": -1, "kv_offsets": None,
        })

    def extend_attention_fwd(self, q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr,
                             kv_indices, custom_mask, is_causal, mask_indptr, max_len_extend, k_scale=1.0,
                             v_scale=1.0, sm_scale=None, logit_cap=0.0, skip_prefix_custom_mask=True,
                             sliding_window_size=-1, sinks=None, window_kv_offsets=None, xai_temperature_len=-1,
                             **newer):
        _only_defaults("extend_attention_fwd", newer)
        if not skip_prefix_custom_mask or not is_causal:
            raise NotImplementedError("extend_attention_fwd with a prefix custom mask or non-causal is not modelled")
        self._add({
            "kernel": "extend", "pool": self.setup.pool_of(k_buffer), "rows": int(qo_indptr.shape[0]) - 1,
            "qo_indptr": host(qo_indptr, "qo_indptr").to(torch.int64),
            "kv_indptr": host(kv_indptr, "kv_indptr").to(torch.int64),
            "kv_indices": host(kv_indices, "kv_indices").to(torch.int64),
            "custom_mask": None if custom_mask is None else host(custom_mask).to(torch.uint8),
            "mask_indptr": None if mask_indptr is None else host(mask_indptr).to(torch.int64),
            "max_len_extend": int(max_len_extend), "window": int(sliding_window_size),
            "kv_offsets": None if window_kv_offsets is None else host(window_kv_offsets).to(torch.int64),
        })

    def run_layers(self, backend):
        """Every layer's forward through the backend's own code, with inert Q/K/V (the recorders
        return zeros): each layer's kernel calls land in self.calls[layer]."""
        setup, m = self.setup, self.setup.case.model
        tokens = int(setup.fb.positions.shape[0])
        fb = setup.layer_batch()
        zeros = lambda *shape: torch.zeros(*shape, dtype=setup.dtype, device=setup.device)
        # gpt-oss's attention sinks, as its layers hand them to forward (an fp32 parameter per q head)
        extra = {} if m.get("sinks") is None else {
            "sinks": torch.tensor(m["sinks"], dtype=torch.float32, device=setup.device)}
        for layer in setup.layers:
            self.layer = layer.layer_id
            q = zeros(tokens, m["q_heads"] * m["head_dim"])
            k, v = zeros(tokens, m["kv_heads"], m["head_dim"]), zeros(tokens, m["kv_heads"], m["v_head_dim"])
            backend.forward(q, k, v, layer, fb, save_kv_cache=False, **extra)
        return tokens

    def merge_state(self, o_a, lse_a, o_b, lse_b, *unused):
        self.merges[self.layer] = self.merges.get(self.layer, 0) + 1
        return o_a, lse_a

    def unexpected(self, name):
        def fail(*args, **kwargs):
            raise NotImplementedError(f"{name} was called: this path is not modelled by kvfuzz")
        return fail


def recorded_plan(sg, setup, build, to_plan):
    """A backend built with recording kernels (build), its metadata initialized, every layer run:
    what the kernels were handed, as the family's plan (to_plan)."""
    backend, rec = build(sg, setup)
    sg.init_metadata(backend, setup)
    rec.run_layers(backend)
    return to_plan(setup, rec)
