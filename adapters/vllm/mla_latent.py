"""vLLM v1's MLA backends (FlashMLA, FlashAttention MLA, Triton MLA) as a kvfuzz `mla` planner.

The release's own builder (MLACommonMetadataBuilder and the backend's subclass) builds the metadata
of the KV-cache group from CommonAttentionMetadata after the runner's reorder (decodes first,
reorder_batch_to_split_decodes_and_prefills with the builder's threshold); every layer's forward
runs (mla_backends.forward: the release's decode/prefill split) with the kernels recorded
(mla_recorder.py). Decode rows read the latent cache through the block table they were handed;
prefill rows read the new tokens' K and the context the gather copied out of the cache chunk by
chunk (tags tell which slots). The recorded reads become one mla plan (engine/mla_plan.py): a decode
or verify batch in the runner's order is the latent_decode shape, anything else the prefill shape
with each row's keys as slots, rows back in kvfuzz's order. CUDA-graph batches run as the runner
runs them (mla_graph.py: a FULL graph's capture and replay, or piecewise).

    meta, arrays = plan(vl, setup)      # setup = fake_runner.Setup(vl, case, device, MlaBackend(vl, "flashmla"))
"""
import types

import numpy as np
import torch

import mla_graph
from engine import mla_plan
from fake_runner import UnsupportedCase
from mla_backends import DIMS
from mla_recorder import MlaRecorder, tag_cache


def plan(vl, setup):
    attn = setup.attn
    if len(setup.groups) != 1:
        raise UnsupportedCase(f"{len(setup.groups)} KV-cache groups: an MLA model's layers form one")
    for x in setup.layers_spec:
        if x["kind"] != "full":
            raise UnsupportedCase(f"a {x['kind']} layer: vLLM's MLA impls take no window or chunk")
    m = setup.model
    if m["softcap"]:
        raise UnsupportedCase("a soft cap: vLLM's MLA impls take none")
    attn.check_cache_dtype()
    rec = attn.recorder = MlaRecorder(setup)
    g = setup.groups[0]
    full = mla_graph.full_graph(vl, setup, attn)  # the CUDA-graph mode first: the builder reads it
    builder = attn.builder(g.spec, [f"layers.{l}" for l in g.layer_ids], setup.vllm_config, setup.device)
    attn.reorder(setup, builder)
    mla_graph.check_builder(setup, builder, full)
    if setup.graph and not full and setup.padded_bs != setup.bs and setup.mode == "target_verify":
        raise UnsupportedCase("a padded verify batch run piecewise: the mla family's verify shape has no empty rows")
    setup.padded_rows = setup.padded_bs if full else setup.bs
    setup.buffers()
    impls = {l: attn.impl(setup) for l in g.layer_ids}
    q, kv_c, k_pe, caches = _tagged_inputs(setup, attn)

    def run(metadata):  # every layer's forward, its kernels recorded by attn.recorder
        for l in g.layer_ids:
            attn.recorder.layer = l
            layer = types.SimpleNamespace(_k_scale=torch.ones(1), _q_scale=torch.ones(1), _v_scale=torch.ones(1),
                                          _k_scale_float=1.0, _q_scale_float=1.0, layer_name=f"layers.{l}")
            out = torch.zeros(setup.total_tokens, m["q_heads"] * DIMS["v_head_dim"], dtype=attn.dtype)
            attn.forward(impls[l], layer, q.clone(), kv_c.clone(), k_pe.clone(), caches, metadata, out)

    if full:
        mla_graph.replay(setup, builder, rec, run)
    else:
        run(builder.build(common_prefix_len=0, common_attn_metadata=mla_graph.eager_common(setup, g)))
    rec.agree.report(setup.case)
    reads = {l: _reads(setup, rec, l) for l in g.layer_ids}
    first = reads[g.layer_ids[0]]
    for l, r in reads.items():
        if _canonical(r) != _canonical(first):
            raise RuntimeError(f"layer {l} reads other keys than layer {g.layer_ids[0]} of its KV-cache group")
    return _to_plan(setup, *first)


def _canonical(reads):
    path, rows = reads
    if path == "latent_decode":
        return path, [(tuple(t), int(s)) for t, s in rows]
    return path, [tuple(np.asarray(k).tolist()) for k in rows]


def _tagged_inputs(setup, attn):
    """Q tagged with each token's index in vLLM's batch + 1; the new tokens' latent and rope parts and
    every cache row with their pool slot + 1 (mla_recorder.py reads the tags back)."""
    t, h, dt = setup.total_tokens, setup.model["q_heads"], attn.dtype
    qk = DIMS["qk_nope_head_dim"] + DIMS["qk_rope_head_dim"]
    token_tag = torch.arange(1, t + 1, dtype=dt)
    q = token_tag.view(t, 1, 1).expand(t, h, qk).contiguous()
    slots = np.zeros(t, np.int64)
    slots[: setup.num_tokens] = setup.out_cache_loc
    slot_tag = torch.from_numpy(slots + 1).to(dt)
    kv_c = slot_tag.view(t, 1).expand(t, DIMS["kv_lora_rank"]).contiguous()
    k_pe = slot_tag.view(t, 1, 1).expand(t, 1, DIMS["qk_rope_head_dim"]).contiguous()
    cache = setup.kv_caches[setup.groups[0].layer_ids[0]]
    blocks, ps = cache.shape[0], cache.shape[1]
    tag_cache(cache, torch.arange(1, blocks * ps + 1, dtype=torch.int64).view(blocks, ps))
    return q, kv_c, k_pe, cache


def _reads(setup, rec, layer):
    """(path, per-row reads) of one layer, rows in vLLM's order: for latent_decode [(table row, seq_len)],
    for prefill [slots]."""
    n = setup.bs
    q_lens = setup.query_lens
    decode_rows = _decode_rows(setup, rec.decode.get(layer, []))
    prefill_rows = _prefill_rows(setup, rec.prefill.get(layer, []))
    for r in range(n):
        if (r in decode_rows) == (r in prefill_rows):
            how = "both the decode and the prefill kernels" if r in decode_rows else "no kernel"
            raise RuntimeError(f"layer {layer}: batch row {int(setup.row_order[r])} ({int(q_lens[r])} queries, "
                               f"{int(setup.seq_lens[r])} keys) is read by {how}")
    for r in range(n, setup.padded_rows):  # a FULL graph's padded rows: the kernel was handed them too
        if r not in decode_rows:
            raise RuntimeError(f"layer {layer}: the decode kernel was not handed padded row {r} of {setup.padded_rows}")
    identity = np.array_equal(setup.row_order, np.arange(n))
    if setup.mode in ("decode", "target_verify") and not prefill_rows and identity:
        return "latent_decode", [decode_rows[r] for r in range(setup.padded_rows)]
    keys = []
    for r in range(n):
        if r in decode_rows:
            row, seq_len = decode_rows[r]
            keys.append(mla_plan.table_slots(row, seq_len, setup.page_size, f"layer {layer} decode row {r}"))
        else:
            keys.append(prefill_rows[r])
    return "prefill", keys


def _decode_rows(setup, calls):
    """Decode kernel rows per vLLM batch row: {row: (block-table row, keys of its last query)}. A
    request's queries are one row (FlashMLA, FlashAttention MLA: bottom-right causal) or one row each
    (Triton MLA), whose key counts must then step by one to the last."""
    rows = {}
    n = len(setup.query_lens)
    for c in calls:
        if c["kernel"] == "decode_attention_fwd":  # one query per kernel row: a request's rows are consecutive
            # a FULL graph's padded rows follow the batch's, uniform_query_len kernel rows each
            q_lens = np.concatenate([setup.query_lens, np.full(setup.padded_rows - n, setup.uniform_query_len)])
            starts = np.concatenate([[0], np.cumsum(q_lens)])
            kernel_rows = c["rows"]
            r = 0
            while r < len(q_lens) and starts[r + 1] <= kernel_rows:
                ql = int(q_lens[r])
                ks = c["seq_lens"][starts[r]:starts[r + 1]].tolist()
                last = ks[-1]
                if r < n and ks != list(range(last - ql + 1, last + 1)):
                    raise RuntimeError(f"{c['kernel']}: the {ql} query rows of batch row {r} read {ks} keys "
                                       f"(a causal row reads one key more than the one before)")
                rows[r] = (c["block_table"][starts[r + 1] - 1].tolist(), last)
                r += 1
            if starts[r] != kernel_rows:
                raise RuntimeError(f"{c['kernel']}: {kernel_rows} kernel rows end inside batch row {r}")
        else:
            for r in range(c["rows"]):
                if r >= n:  # a padded row: its keys and table row as handed (the plan says them)
                    rows[r] = (c["block_table"][r].tolist(), int(c["seq_lens"][r]))
                    continue
                if int(setup.query_lens[r]) != c["q_lens"][r]:
                    raise RuntimeError(f"{c['kernel']}: row {r} holds {c['q_lens'][r]} queries; the batch row "
                                       f"has {int(setup.query_lens[r])}")
                rows[r] = (c["block_table"][r].tolist(), int(c["seq_lens"][r]))
    return rows


def _prefill_rows(setup, calls):
    """{vLLM batch row: slots}: per row, its context chunks' keys (causal=False calls, in call order)
    then its new tokens' (the causal call); every call row holds all of its request's queries."""
    starts = np.concatenate([[0], np.cumsum(setup.query_lens)])
    row_of_token = np.repeat(np.arange(len(setup.query_lens)), setup.query_lens)
    context, new = {}, {}
    for c in calls:
        if not torch.equal(c["k_tags"], c["v_tags"]):
            raise RuntimeError("a prefill call's K and V rows come from different tokens")
        cq, ck = c["cu_seqlens_q"], c["cu_seqlens_k"]
        for j in range(len(cq) - 1):
            qt = c["q_tags"][cq[j]:cq[j + 1]].numpy()
            if qt.size == 0:
                continue
            r = int(row_of_token[qt[0]])
            if not np.array_equal(qt, np.arange(starts[r], starts[r + 1])):
                raise RuntimeError(f"a prefill call's row {j} holds queries {qt.tolist()}, not batch row {r}'s")
            keys = c["k_tags"][ck[j]:ck[j + 1]].numpy()
            target = new if c["causal"] else context
            if c["causal"] and r in new:
                raise RuntimeError(f"batch row {r}'s new tokens are attended twice")
            target.setdefault(r, []).append(keys)
    rows = {}
    for r in set(context) | set(new):
        if r not in new:
            raise RuntimeError(f"batch row {r} reads its context but not its new tokens")
        rows[r] = np.concatenate(context.get(r, []) + new[r])
    return rows


def _to_plan(setup, path, reads):
    case, back = setup.case, np.argsort(setup.row_order)  # kvfuzz row i is vLLM row back[i]
    padded = setup.padded_bs - setup.bs if setup.graph else 0  # vLLM's padded rows read nothing
    if path == "latent_decode":
        reads = reads + [([], 0)] * padded if len(reads) == setup.bs else reads  # piecewise: rows of no tokens
        width = max(len(t) for t, _ in reads) if reads else 0
        table = np.zeros((len(reads), width), np.int64)
        for i, (t, _) in enumerate(reads):
            table[i, : len(t)] = t
        q_lens = [setup.uniform_query_len] * setup.bs + [0] * (len(reads) - setup.bs)
        return mla_plan.latent_decode(case, table, [s for _, s in reads], q_lens=q_lens, empty_padded_rows=padded > 0)
    return mla_plan.prefill(case, [reads[int(back[i])] for i in range(len(reads))], padded_rows=padded)
