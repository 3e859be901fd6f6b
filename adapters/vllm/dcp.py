"""vLLM's decode-context parallelism (`vllm_planner.py --dcp R [--dcp-interleave I]`, FlashAttention).

With decode_context_parallel_size R a request's KV cache is sharded over R ranks (docs/vllm.md,
"Decode-context parallelism"): the scheduler's block covers block_size x R tokens, every rank
holds the tokens p with (p // I) % R == its rank in its own cache under the same block id, and
each layer's FlashAttentionImpl._forward_with_dcp runs the context attention over the rank's
local keys (not causal; seqused_k = the builder's dcp_context_kv_lens), merges the ranks'
partial outputs by their LSEs (cp_lse_ag_out_rs / dcp_a2a_lse_reduce), then attends the step's
new tokens (varlen K/V, causal) and merges the two (merge_attn_states).

Here kvfuzz's page is vLLM's scheduler block (page size = block_size x R, fake_runner.Setup(dcp=)),
and the step runs once per rank r with vLLM's DCP group stubbed as world size R, rank r
(parallel_state._DCP, which get_dcp_group and get_dcp_world_size_and_rank read): the release's
BlockTable and its slot-mapping kernel, the runner's dcp_local_seq_lens (get_dcp_local_seq_lens),
the FlashAttention builder and every layer's forward, kernels recorded (attention_run.py). The
rank's pool is what its slot mapping wrote: the kernel run over every position of every batch row
(the steps that wrote the context ran the same kernel on the same block table) gives, per local
slot, the kvfuzz slot of the token written there (the plan's rank_slots); the step's own mapping
must agree with it. The plan (FAMILIES.md, page_table with dcp_world): rank r's context call
reading its pool, then the new tokens' call; kvfuzz merges them by LSE and checks the ranks'
reads against the interleaved layout, extent and oracle.

Not modelled: FA2's split decode/prefill context path (FA3 is the version configured), CUDA graphs,
cascade attention, drafting, Model Runner V2, sliding-window and chunked layers, hybrid pools, MLA.

    meta, arrays = plan(vl, setup_for_rank)   # setup_for_rank(r) builds a fresh fake_runner.Setup
"""
import importlib
import inspect

import numpy as np
import torch

import vllm_page_table
from attention_run import record
from fake_runner import UnsupportedCase
from recorder import Recorder


def _parallel_state():
    return importlib.import_module("vllm.distributed.parallel_state")


def available(vl):
    """Whether this release's FlashAttention runs DCP: its metadata carries dcp_context_kv_lens
    (flash_attn.py, 0.15.0 on among the releases installed here; 0.10.2 and 0.11.0 have DCP in
    BlockTable only, for MLA)."""
    return "dcp_context_kv_lens" in getattr(vl.flash_attn.FlashAttentionMetadata, "__dataclass_fields__", {})


class _Group:
    """vLLM's DCP GroupCoordinator as the metadata path and the impl use it: its size and rank, and
    all_gather (the impl gathers the query heads of every rank; each rank's are this rank's here)."""

    def __init__(self, world, rank):
        self.world_size, self.rank_in_group = world, rank

    def all_gather(self, t, dim=-1):
        return torch.cat([t] * self.world_size, dim=dim)


def stub_group(world, rank):
    """vLLM's DCP group as world size `world`, rank `rank`."""
    _parallel_state()._DCP = _Group(world, rank)


def rank_of(vl):
    return _parallel_state()._DCP.rank_in_group


class _Workspace:
    """current_workspace_manager()'s get_simultaneous: fresh tensors of the specs asked for."""

    def get_simultaneous(self, *specs):
        return [torch.empty(shape, dtype=dtype) for shape, dtype in specs]


class DcpRecorder(Recorder):
    """The recorder with _forward_with_dcp's other kernels: the ranks' LSE combine (recorded: it must
    take the layer's context call) and the new tokens' varlen call (K/V the step's tokens, cu_seqlens_k
    = cu_seqlens_q), recorded as a call over those tokens' slots in the layer's pool (token-granular:
    the K/V vLLM hands it are the values kvfuzz's cache holds there)."""

    def __init__(self, setup):
        super().__init__(setup)
        self.combines = {}  # layer -> the context calls its LSE combine took

    def install(self, module):
        super().install(module)
        for name in ("cp_lse_ag_out_rs", "dcp_a2a_lse_reduce"):
            if hasattr(module, name):
                setattr(module, name, self.dcp_combine)
        if hasattr(module, "current_workspace_manager"):
            module.current_workspace_manager = _Workspace
        split = getattr(module, "run_split_fa2_dcp_context_attention", None)
        if split is not None:  # the release's own function, under this recorder's stand-in
            module.run_split_fa2_dcp_context_attention = self._split_context(getattr(split, "original", split))

    def _split_context(self, split):
        """FA2's split context path (cp_utils.run_split_fa2_dcp_context_attention, 0.27 on) run as the
        release wrote it, its kernel calls recorded with the batch rows they cover (their block_table
        and seqused_k are views of the whole batch's): one context call of the rank, a row no call
        covers reading no key (its output 0 and LSE -inf, as the split path leaves them)."""
        names = list(inspect.signature(split).parameters)

        def run(*args, **kwargs):
            bound = dict(zip(names, args), **kwargs)
            table, lens, cu = bound["block_table"], bound["dcp_context_kv_lens"], bound["cu_seqlens_q"]
            covered = []

            def kernel(q, out=None, cu_seqlens_q=None, seqused_k=None, block_table=None, max_seqlen_q=None,
                       max_seqlen_k=None, causal=False, window_size=None, **others):
                row = (block_table.data_ptr() - table.data_ptr()) // (table.stride(0) * table.element_size())
                if seqused_k.data_ptr() != lens.data_ptr() + row * lens.element_size():
                    raise NotImplementedError("an FA2 split context call whose seqused_k and block_table rows differ")
                covered.append((int(row), seqused_k.clone(), cu_seqlens_q.clone(), bool(causal), window_size,
                                int(max_seqlen_k)))
                return out, torch.zeros(int(q.shape[1]), int(q.shape[0]))

            split(*((kernel,) + tuple(bound[n] for n in names[1:])))
            rows = int(cu.shape[0]) - 1
            seqused = torch.zeros(rows, dtype=lens.dtype)
            for row, used, sub_cu, causal, window, _ in covered:
                m = int(used.numel())
                if not torch.equal(sub_cu.cpu(), (cu[row:row + m + 1] - cu[row]).cpu()) or causal:
                    raise NotImplementedError(f"an FA2 split context call over rows {row}..{row + m}: its queries are "
                                              "not those rows' (or it is causal)")
                seqused[row:row + m] = used.cpu()
            window = covered[0][4] if covered else bound["sliding_window_size"]
            return super(DcpRecorder, self).flash_attn_varlen_func(
                q=bound["query_across_dcp"], k=bound["key_cache"], v=bound["value_cache"],
                max_seqlen_q=bound["max_seqlen_q"], cu_seqlens_q=cu, max_seqlen_k=bound["max_dcp_context_kv_len"],
                seqused_k=seqused, softmax_scale=bound["softmax_scale"], causal=False, window_size=window,
                block_table=table, softcap=bound["softcap"], out=bound["dcp_context_out"], return_softmax_lse=True,
                num_splits=bound["max_num_splits"], fa_version=bound["fa_version"])

        run.original = split
        return run

    def flash_attn_varlen_func(self, *args, **kwargs):
        if kwargs.get("block_table") is None and kwargs.get("cu_seqlens_k") is not None:
            return self._step_tokens(**kwargs)
        return super().flash_attn_varlen_func(*args, **kwargs)

    def _step_tokens(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                     window_size=None, return_softmax_lse=False, **others):
        s = self.setup
        if not torch.equal(cu_seqlens_k.cpu(), cu_seqlens_q.cpu()) or int(max_seqlen_k) != int(max_seqlen_q):
            raise NotImplementedError("a varlen call whose keys are not its own query tokens is not modelled")
        if int(k.shape[0]) < s.num_tokens:
            raise RuntimeError(f"layer {self.layer}: the new tokens' call got {int(k.shape[0])} keys for {s.num_tokens} tokens")
        qsl = cu_seqlens_q.cpu().to(torch.int64)
        lens = (qsl[1:] - qsl[:-1]).numpy()
        slots = s.expected_slots(s.layers_spec[self.layer]["pool"])
        width = max(1, int(lens.max()) if lens.size else 1)
        table = np.zeros((lens.size, width), np.int64)
        for b, (a, n) in enumerate(zip(qsl[:-1].tolist(), lens.tolist())):
            table[b, :n] = slots[a:a + n]
        window = list(window_size) if window_size is not None else [-1, -1]
        self.calls.setdefault(self.layer, []).append({
            "kernel": "flash_attn_varlen_func", "pool": s.layers_spec[self.layer]["pool"], "view_page_size": 1,
            "page_table": torch.from_numpy(table).to(torch.int32), "cache_seqlens": torch.from_numpy(lens).to(torch.int32),
            "cu_seqlens_q": qsl.to(torch.int32), "max_seqlen_q": int(max_seqlen_q), "max_seqlen_k": int(max_seqlen_k),
            "causal": bool(causal), "window_left": int(window[0]), "window_right": int(window[1]), "step_tokens": True})
        index = len(self.calls[self.layer]) - 1
        result = torch.full((int(q.shape[0]), 1), float(index))
        return (result, result.clone()) if return_softmax_lse else result

    def dcp_combine(self, out, lse, group, return_lse=False, **kwargs):
        """The ranks' partial outputs merged by their LSEs (all-gather + reduce-scatter, or all-to-all):
        kvfuzz's merge of the ranks' parts. It must take this layer's context call."""
        took = int(out.flatten()[0]) if out.numel() else -1
        self.combines.setdefault(self.layer, []).append(took)
        return (out, lse) if return_lse else out


def _rank_slots(vl, setup, g):
    """Rank-local slot -> kvfuzz slot, as this rank's slot-mapping kernel writes every position
    [0, seq_len) of every batch row (-1: never written), over the rank's pool of blocks x block_size."""
    n = setup.bs
    lens = np.asarray(setup.seq_lens[:n], np.int64)
    positions = np.concatenate([np.arange(x) for x in lens]).astype(np.int64) if n else np.zeros(0, np.int64)
    qsl = np.zeros(n + 1, np.int32)
    qsl[1:] = np.cumsum(lens)
    max_len = int(setup.r2t.shape[1])
    table = vl.block_table(block_size=setup.block_size, max_num_reqs=max(n, 1),
                           max_num_blocks_per_req=-(-max_len // setup.page_size),
                           max_num_batched_tokens=max(int(lens.sum()), 1), **setup.interleave())
    for i, blocks in enumerate(g.table_rows):
        table.add_row(blocks, i)
    table.commit_block_table(n)
    local = vl.slot_mapping(table, n, torch.from_numpy(qsl), torch.from_numpy(positions), lens)[: positions.size]
    local = local.numpy()
    rows = np.repeat(setup.rows[:n], lens)
    kvfuzz = setup.r2t[rows, positions].astype(np.int64)
    pool = setup.case.info["pools"]["full_slots"] // setup.page_size * setup.block_size
    out = np.full(max(pool, 1), -1, np.int64)
    for t in np.nonzero(local >= 0)[0]:
        if local[t] >= out.size:
            raise RuntimeError(f"{g}: rank {rank_of(vl)}'s slot mapping writes position {int(positions[t])} of batch row "
                               f"{int(np.searchsorted(qsl, t, 'right') - 1)} at local slot {int(local[t])}, outside its "
                               f"pool of {out.size} slots")
        out[local[t]] = kvfuzz[t]
    # the step's own mapping (the runner's) against the history's: the same kernel on the same table
    step = setup.dcp_writes.get(g.gid)
    if step is not None:
        starts = qsl[:-1] + (lens - setup.query_lens[:n])
        want = np.concatenate([local[a:a + q] for a, q in zip(starts, setup.query_lens[:n])]) if n else local[:0]
        if not np.array_equal(step, want):
            t = int(np.nonzero(step != want)[0][0])
            raise RuntimeError(f"{g}: rank {rank_of(vl)}'s step slot mapping puts token {t} at {int(step[t])}, the "
                               f"same kernel over the whole context at {int(want[t])}")
    return torch.from_numpy(out)


def refuse(setup):
    """What this model of DCP does not cover, as UnsupportedCase."""
    if setup.graph:
        raise UnsupportedCase("DCP under CUDA graphs is not modelled (dcp.py: eager steps only)")
    if any(x["kind"] == "sliding_window" for x in setup.layers_spec):
        raise UnsupportedCase("DCP with sliding-window layers: vLLM refuses it (SlidingWindowManager asserts "
                              "dcp_world_size == 1, 'DCP not support sliding window attn now': "
                              "single_type_kv_cache_manager.py:984 in 0.33.0)")
    if setup.hybrid or any(x["kind"] != "full" for x in setup.layers_spec):
        raise UnsupportedCase("DCP on chunked layers or a hybrid pool is not modelled (dcp.py: full layers only)")
    if setup.mode not in ("decode", "extend", "mixed", "target_verify"):
        raise UnsupportedCase(f"DCP in a {setup.mode} step is not modelled (dcp.py: no drafting)")
    impl = setup.backend.get_impl_cls()
    if setup.mode == "target_verify" and setup.dcp_interleave > 1 and not getattr(
            impl, "supports_mtp_with_cp_non_trivial_interleave_size", False):
        raise UnsupportedCase(f"spec-decode verify under DCP with interleave {setup.dcp_interleave}: vLLM refuses it for "
                              f"{impl.__name__} (check_attention_cp_compatibility: supports_mtp_with_cp_non_trivial_"
                              "interleave_size is False; cp_utils.py:45-49 in 0.33.0)")


def plan(vl, make_setup, world, interleave):
    """The page_table plan of one step under DCP: make_setup() builds a fresh fake_runner.Setup with
    the rank's DCP group stubbed (stub_group before it)."""
    per_rank = []
    try:
        for r in range(world):
            stub_group(world, r)
            setup = make_setup()
            refuse(setup)
            setup.cascade = "never"
            rec, _ = record(vl, setup, vl.flash_attn, recorder=DcpRecorder)
            slots = {g.gid: _rank_slots(vl, setup, g) for g in setup.groups}
            per_rank.append((setup, rec, slots))
    finally:
        _parallel_state()._DCP = None
    setup0, rec0, _ = per_rank[0]
    calls = {}
    for l in range(len(setup0.layers_spec)):
        gid = next(g.gid for g in setup0.groups if l in g.layer_ids)
        made = [rec.calls.get(l, []) for _, rec, _ in per_rank]
        if any(len(m) != len(made[0]) for m in made) or len(made[0]) not in (1, 2):
            raise RuntimeError(f"layer {l}: the ranks made {[len(m) for m in made]} kernel calls under DCP, "
                               "expected the context call and the new tokens' call each (or the latter alone)")
        step = made[0][-1]
        if not all(m[-1].get("step_tokens") for m in made):
            raise RuntimeError(f"layer {l}: a rank's last call under DCP is not the new tokens' varlen call")
        if any(not torch.equal(m[-1]["cu_seqlens_q"], step["cu_seqlens_q"]) or m[-1]["causal"] != step["causal"]
               for m in made):
            raise RuntimeError(f"layer {l}: the ranks' new-token calls differ (each rank attends all the step's tokens)")
        layer_calls = []
        if len(made[0]) == 2:
            for r, (_, rec, slots) in enumerate(per_rank):
                if rec.combines.get(l) != [0] or rec.merges.get(l, 0) != 1:
                    raise RuntimeError(f"layer {l}, rank {r}: the context call merged across ranks "
                                       f"{rec.combines.get(l)} and with the new tokens {rec.merges.get(l, 0)} times")
                # max_dcp_context_kv_len bounds the ranks' context from max_seq_len, the query included:
                # ceil(max_seq_len / (R x I)) x I (flash_attn.py:918-928 in 0.33.0), an upper bound
                layer_calls.append(dict(made[r][0], rank_slots=slots[gid], dcp=(world, interleave),
                                        max_seqlen_k_upper_bound=True))
        layer_calls.append(dict(step, dcp=(world, interleave)))
        calls[l] = layer_calls
    rec0.calls = calls
    return vllm_page_table.to_plan(setup0, rec0, False)
