"""vLLM v1's FlashInfer backend as a kvfuzz `paged_csr` planner (FAMILIES.md).

Per KV-cache group (fake_runner.py) the release's own FlashInferMetadataBuilder.build plans
FlashInfer's wrappers from the group's CommonAttentionMetadata, and every layer's
FlashInferImpl.forward runs them, recorded (flashinfer_recorder.py). The path modelled is
FlashInfer's native one on an sm90 device: BatchDecodeWithPagedKVCacheWrapper (tensor cores) for
the leading single-token rows, BatchPrefillWithPagedKVCacheWrapper (paged, causal, over the whole
seq_len: the step's K/V is in the cache before attention) for the rest, both at the block size.
vLLM would pick TRT-LLM's kernels (trtllm-gen prefill and decode: Blackwell only; XQA decode on
sm90 from about 0.2x where NVIDIA's cubin artifactory is reachable); the runner is configured as
`--attention-config.use_trtllm_attention=0` so the builder plans FlashInfer's own wrappers, whose
plan()/run() split is what kvfuzz checks. A CUDA-graph batch runs as the runner runs it
(flashinfer_graph.py): a uniform decode batch in a FULL graph (the decode wrapper's persistent
buffers, captured then refilled by the replay's plan), anything else eagerly with the padded
tokens; vLLM's padded rows read no key (the plan's empty_padded_rows, FAMILIES.md). Cascade
attention is not modelled. Chunked layers run the ChunkedLocalAttention builder vLLM derives from
FlashInfer's (virtual batches; no CUDA graph, so PIECEWISE) where every request's queries lie in one
chunk (one virtual batch per request, one kernel row per batch row as the family has).

The paged_csr family has one kernel row per batch row in every call, so the decode run (rows
[0, num_decodes)) and the prefill run (the rest) of a layer become one call: each row keeps the
pages, last-page length and queries its own wrapper read; a decode row is an extend of one token,
so the joined call is `full_extend` (`decode` in a decode batch). The family lays window rows
out from the page holding the first query's oldest visible key; vLLM hands FlashInfer every page
from position 0 and masks with window_left, so the head pages every query of the row has masked
out (under the plan's own window_left) are dropped after checking they lie in the layer's pool.

    meta, arrays = plan(vl, setup)
"""

import numpy as np
import torch

import flashinfer_graph
from engine import paged_csr_plan
from fake_runner import UnsupportedCase
from flashinfer_recorder import Recorder
from layer_inputs import forward_inputs, publish_layers


def plan(vl, setup):
    fi = vl.flashinfer
    rec = Recorder(setup)
    rec.install(fi)
    classes = {g.gid: _builder_cls(vl, setup, g) for g in setup.groups}
    impls = publish_layers(vl, setup, fi.FlashInferImpl, [fi, vl.utils])
    full = flashinfer_graph.full_graph(vl, setup, classes)
    order, token_of = setup.decodes_first()
    setup.padded_rows = setup.padded_bs if full else setup.bs
    setup.buffers()
    builders = {g.gid: _builder(vl, setup, classes[g.gid], g) for g in setup.groups}

    def run_layers(recorder, g, metadata):
        for l in g.layer_ids:
            recorder.layer, recorder.impl = l, impls[l]
            _forward(setup, recorder, impls[l], l, metadata)

    try:
        if full:
            flashinfer_graph.capture_and_replay(vl, setup, rec, builders, run_layers)
        else:  # eager (PIECEWISE under graphs: attention outside them, the padded tokens in no row)
            for g in setup.groups:
                rec.planning = g.layer_ids[0]
                run_layers(rec, g, builders[g.gid].build(common_prefix_len=0, common_attn_metadata=setup.common_metadata(g)))
    except ValueError as e:  # layers of one group with different windows: its first batch fails
        if "Window left is not the same" not in str(e):
            raise
        raise UnsupportedCase(f"vLLM {vl.version}'s FlashInfer builder refuses a group's layers: {e}") from e
    rec.agree.report(setup.case)
    token_of = np.concatenate([token_of, np.arange(setup.num_tokens, setup.total_tokens)])  # padded tokens stay
    calls = {l: [_joined(setup, l, c, order, token_of)] for l, c in rec.calls.items()}
    role = "decode" if setup.mode == "decode" else "full_extend"
    return paged_csr_plan.to_plan(setup.case.layers, calls, page_size=setup.page_size, role_of=lambda c: role)


def _builder_cls(vl, setup, g):
    """The group's builder class: FlashInfer's, or for chunked layers the ChunkedLocalAttention
    builder vLLM derives from it (virtual batches, no CUDA graph). paged_csr has one kernel row per
    batch row, so a request whose queries cross a chunk boundary (two virtual batches) is unsupported."""
    backend = vl.flashinfer.FlashInferBackend
    if g.kind != "chunked":
        return backend.get_builder_cls()
    start = setup.seq_lens - setup.query_lens
    crossing = [int(i) for i in np.nonzero(start // g.chunk != (setup.seq_lens - 1) // g.chunk)[0]]
    if crossing:
        raise UnsupportedCase(f"batch row {int(setup.row_order[crossing[0]])}'s queries cross a {g.chunk}-token chunk "
                              "boundary: vLLM's virtual batches give it two kernel rows, the paged_csr plan has one")
    return vl.chunked_local_backend(backend, g.chunk, setup.page_size).get_builder_cls()


def _builder(vl, setup, builder_cls, g):
    """The group's builder, made at engine start-up: what it refuses, vLLM refuses to serve."""
    try:
        return builder_cls(g.spec, [f"layers.{l}" for l in g.layer_ids], setup.vllm_config, setup.device)
    except (NotImplementedError, ValueError) as e:  # 0.2x on sm90: no sliding-window layers
        raise UnsupportedCase(f"vLLM {vl.version}'s FlashInfer builder refuses {g} at start-up: {e}") from e


def _joined(setup, l, runs, order, token_of):
    """One call of a layer's runs (decode rows, then prefill rows, in vLLM's batch order): per row its
    own wrapper's pages, last-page length and queries, listed in kvfuzz's batch order (vLLM's row j is
    kvfuzz's row order[j], its token t kvfuzz's token_of[t]); padded rows (a FULL graph's, or, eager,
    rows of no query and no key) after the batch's, as kvfuzz pads."""
    runs = sorted(runs, key=lambda c: int(c["qo_indptr"][0]))  # forward runs the prefill wrapper first
    first = runs[0]
    for c in runs[1:]:
        for name in ("pool", "page_size", "window_left"):  # causal: a decode row's one query sees every key
            if c[name] != first[name]:
                raise NotImplementedError(f"layer {l}: the decode and prefill wrappers differ in {name}")
    ps, window, pool_pages = first["page_size"], first["window_left"], _pool_pages(setup, l)
    rows = []  # in vLLM's order: (first kvfuzz token, tokens, pages, last_page_len)
    for c in runs:
        for r in range(int(c["kv_indptr"].numel()) - 1):
            q0, q1 = int(c["qo_indptr"][r]), int(c["qo_indptr"][r + 1])
            tokens = token_of[q0:q1]
            if len(tokens) and not (tokens == tokens[0] + torch.arange(len(tokens)).numpy()).all():
                raise NotImplementedError(f"layer {l}: row {r}'s queries (tokens {q0}..{q1}) span requests")
            pages = c["kv_indices"][int(c["kv_indptr"][r]):int(c["kv_indptr"][r + 1])]
            k_len = (len(pages) - 1) * ps + int(c["kv_last_page_len"][r]) if len(pages) else 0
            drop = max(0, (k_len - (q1 - q0) - window) // ps) if window >= 0 and len(pages) else 0
            drop = min(drop, len(pages) - 1) if len(pages) else 0
            outside = [int(p) for p in pages[:drop] if not 0 <= int(p) < pool_pages]
            if outside:
                raise IndexError(f"layer {l}: masked head page {outside[0]} of row {r} lies outside the "
                                 f"{setup.layers_spec[l]['pool']} pool's {pool_pages} pages")
            rows.append((int(tokens[0]) if len(tokens) else -1, len(tokens), pages[drop:], int(c["kv_last_page_len"][r]),
                         c.get("scales")))
    if len(rows) not in (len(order), setup.padded_bs):
        raise NotImplementedError(f"layer {l}: the wrappers ran {len(rows)} rows for a batch of {len(order)} "
                                  f"padded to {setup.padded_bs}")
    rows += [(-1, 0, torch.zeros(0, dtype=torch.int64), 0, first.get("scales"))] * (setup.padded_bs - len(rows))
    in_batch = list(rows)
    for j, i in enumerate(order):
        in_batch[int(i)] = rows[j]
    qo, kv_indptr = [0], [0]
    for i, (start, n, pages, _, _) in enumerate(in_batch):
        if n and start != qo[-1]:
            raise NotImplementedError(f"layer {l}: batch row {i}'s queries start at token {start}, not {qo[-1]}")
        qo.append(qo[-1] + n)
        kv_indptr.append(kv_indptr[-1] + len(pages))
    joined = {"role": first["role"], "pool": first["pool"], "page_size": ps, "causal": True, "window_left": window,
            "empty_padded_rows": setup.padded_bs > setup.bs,
            "qo_indptr": torch.tensor(qo, dtype=torch.int64), "kv_indptr": torch.tensor(kv_indptr, dtype=torch.int64),
            "kv_indices": torch.cat([x[2] for x in in_batch]) if in_batch else torch.zeros(0, dtype=torch.int64),
            "kv_last_page_len": torch.tensor([x[3] for x in in_batch], dtype=torch.int64), "custom_mask": None}
    if first.get("scales") is not None:  # an fp8 cache: each row's run's scales over the KV heads (engine/descales.py)
        heads = int(setup.model["kv_heads"])
        joined["descales"] = {f"{name}_descale": None if any(x[4][i] is None for x in in_batch) else
                              torch.tensor([[x[4][i]] * heads for x in in_batch], dtype=torch.float32)
                              for i, name in enumerate(("q", "k", "v"))}
    return joined


def _pool_pages(setup, l):
    info = setup.case.info["pools"]
    slots = info["swa_slots"] if setup.layers_spec[l]["pool"] == "swa" else info["full_slots"]
    return max(1, slots // setup.page_size)


def _forward(setup, rec, impl, l, metadata):
    layer, q, k, v, out = forward_inputs(setup, l)
    rec.query = q
    impl.forward(layer, q, k, v, setup.kv_caches[l], metadata, out)
