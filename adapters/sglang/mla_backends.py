"""sglang's MLA backends (FlashMLA, FlashInfer MLA, FA3 MLA) as kvfuzz `mla` planners (FAMILIES.md).

The release's backend builds its metadata (eager, or CUDA-graph capture then replay, as the runner
does: sglang_release.init_metadata) on a fake runner whose model is MLA (fake_runner.Setup(...,
mla=True): one latent head of 576 values), then runs its own forward for every layer with the
kernels recorded (mla_kernels.py). What the kernels read becomes one `mla` plan
(engine/mla_plan.py, shared with vLLM's MLA adapter):
  - decode, idle and target-verify batches: latent_decode, each kernel row's keys through a block
    table (FlashMLA: pages of 64, as handed; FlashInfer MLA: its token-granular kv_indices, page size 1;
    FA3 MLA: its page table at the cache's page size);
  - extend and mixed batches: prefill, each row's keys as pool slots (FlashInfer MLA's paged prefill
    over prefix + new tokens; its ragged prefill over the new tokens, batch token t being pool slot
    out_cache_loc[t]). FlashMLA runs extend through its FlashInfer MLA parent (flashmla_backend.py
    FlashMLABackend(FlashInferMLAAttnBackend)); FA3 MLA's absorbed extend (a row's keys through its
    page-table row).
An extend or mixed batch whose requests have no prefix at all runs DeepSeek's MHA path, not the
absorbed one (models/deepseek_common/attention_backend_handler.py:128-140: sum of prefix lengths 0):
FlashInfer MLA and FlashMLA plan their ragged wrapper for it (flashinfer_mla_backend.py:449-458); FA3's
MHA one-shot path (flash_attn_varlen_func) is not modelled, so FA3 MLA answers such batches unsupported.

    meta, arrays = plan(sg, setup)     # setup = fake_runner.Setup(sg, case, device, mla=True, ...)

A v2 draft extend (eager; every request padded to num_draft_tokens, as the v2 worker does) is the
prefill shape too: FlashMLA's fixed-q window reads its rows through the block table, FlashInfer MLA's
paged prefill its fast-plan host arrays.

Not driven: draft decode (the multi-step draft backends), draft extend under CUDA graphs; the MHA chunked-prefix path (disable_chunked_prefix_cache is
set); FP8 caches; decode context parallelism. TRT-LLM MLA and CuteDSL MLA need Blackwell (sglang
asserts it: arg_groups/overrides.py `_mla_kv_cache_dtype_checks`), so a Hopper user never runs them.
"""
import importlib
import inspect

import numpy as np
import torch

import fa_page_table
from engine import mla_plan
from fake_runner import MLA_DIMS, UnsupportedCase
from mla_kernels import MlaRecorder
from torch_on import TorchOn

# --backend name -> (module, class); FlashMLA only supports page size 64 (sglang forces it:
# arg_groups/overrides.py _mla_backend_page_constraints, 0.5.23:1148-1154)
BACKENDS = {"flashmla": ("flashmla_backend", "FlashMLABackend"),
            "flashinfer_mla": ("flashinfer_mla_backend", "FlashInferMLAAttnBackend"),
            "fa3_mla": ("flashattention_backend", "FlashAttentionBackend")}
PAGE_SIZES = {"flashmla": [64], "flashinfer_mla": [1, 2, 4, 8, 16, 32, 64, 128, 256],
              "fa3_mla": [1, 2, 4, 8, 16, 32, 64, 128, 256]}
MODES = ["decode", "idle", "extend", "mixed", "target_verify", "draft_extend_v2"]
PREFILL_MODES = ("extend", "mixed", "draft_extend_v2")  # the plan's prefill shape: each row's keys as slots


def build(sg, setup, which):
    if setup.mode not in MODES:
        raise UnsupportedCase(f"{setup.mode} batches on sglang's MLA backends are not modelled")
    if setup.mode == "draft_extend_v2":
        lens = setup.case.array("extend_seq_lens")[: setup.bs]
        if setup.graph:
            raise UnsupportedCase("a v2 draft extend under a CUDA graph on an MLA backend is not modelled")
        # the v2 worker pads every request to num_draft_tokens = num_steps + 1 >= 2 (eagle_worker_v2.py:1156),
        # the tokens per request FlashInfer MLA's fast plan and FlashMLA's window assume
        if set(lens.tolist()) - {setup.spec_draft_tokens}:
            raise UnsupportedCase("a v2 draft extend not of num_draft_tokens (>= 2) tokens per request")
    if setup.topk > 1:  # FlashMLA's and FlashInfer MLA's draft backends raise for it (flashmla_backend.py:608-611,
        # flashinfer_mla_backend.py:1196-1198, 0.5.23); FA3's MLA cascade for it is not modelled
        raise UnsupportedCase("EAGLE topk > 1 on an MLA backend")
    rec = MlaRecorder(setup)
    if which == "fa3_mla":
        if setup.mode in ("extend", "mixed") and not setup.case.array("extend_prefix_lens")[: setup.bs].any():
            raise UnsupportedCase("an extend without prefix runs DeepSeek's MHA one-shot path (flash_attn_varlen_func)")
        return fa_page_table.build(sg, setup, rec)
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_mla_backend")
    fi.BatchMLAPagedAttentionWrapper = rec.paged_wrapper
    fi.BatchPrefillWithRaggedKVCacheWrapper = rec.ragged_wrapper
    modules = [fi]
    if which == "flashmla":
        fm = importlib.import_module("sglang.srt.layers.attention.flashmla_backend")
        if setup.mode == "draft_extend_v2" and "is_draft_extend_v2" not in inspect.getsource(fm.FlashMLABackend):
            # up to 0.5.14 at least: speculative/draft_utils.py warns "flashmla prefill backend is not yet
            # supported for draft extend" and makes none
            raise UnsupportedCase(f"FlashMLA of sglang {sg.version} has no draft extend")
        fm.flash_mla_with_kvcache, fm.get_mla_metadata = rec.flash_mla_with_kvcache, rec.get_mla_metadata
        modules.append(fm)
    if str(setup.device) == "cpu":
        for module in modules:
            module.torch = TorchOn(setup.device, sms=setup.case.batch["device_sms"])
    module, cls = BACKENDS[which]
    sg.publish_server_args(setup)
    return getattr(sg.module(module), cls)(setup.runner), rec


def plan(sg, setup, which):
    backend, rec = build(sg, setup, which)
    sg.init_metadata(backend, setup)
    _run_layers(setup, backend, rec)
    if setup.graph and which == "flashmla":
        _check_captured(backend, rec)
    return to_plan(setup, rec)


def _check_captured(backend, rec):
    """A replayed graph's kernel reads the tensors its capture handed it: FlashMLA's block table and
    tile schedule must be views of the static buffers init_cuda_graph_state made, which the replay
    refills (0.5.23 flashmla_backend.py:415-429; 0.5.10.post1 :337-343), not tensors of the replay."""
    static = {"block_table": backend.cuda_graph_kv_indices, "tile_scheduler_metadata": backend.cuda_graph_mla_metadata}
    for layer, name, pointer in rec.handed_storage:
        buffer = "the static buffer init_cuda_graph_state made"
        rec.agree.check(name, buffer, buffer if pointer == static[name].untyped_storage().data_ptr() else "another tensor",
                        layer, "CUDA-graph replay: the memory the captured kernel reads")


def _run_layers(setup, backend, rec):
    """Every layer's forward through the backend's own code with inert Q (the kernels are recorded):
    the absorbed path (q of 576 per head, no new K/V) or, where the backend planned its ragged MHA
    prefill, DeepSeek's MHA layer (q/k of nope + rope, v of v_head_dim, as many K/V heads as Q)."""
    fb = setup.layer_batch()
    tokens = int(setup.fb.positions.shape[0])
    ragged = bool(getattr(backend.forward_metadata, "use_ragged", False))
    zeros = lambda *shape: torch.zeros(*shape, dtype=setup.dtype, device=setup.device)
    for layer in setup.layers:
        rec.layer = layer.layer_id
        heads = layer.tp_q_head_num
        if ragged:
            qk, v_dim = MLA_DIMS["qk_nope_head_dim"] + MLA_DIMS["qk_rope_head_dim"], MLA_DIMS["v_head_dim"]
            mha = type(layer)(**dict(vars(layer), tp_k_head_num=heads, tp_v_head_num=heads, head_dim=qk,
                                     qk_head_dim=qk, v_head_dim=v_dim))
            backend.forward(zeros(tokens, heads * qk), zeros(tokens, heads, qk), zeros(tokens, heads, v_dim), mha, fb,
                            save_kv_cache=False)
        else:
            backend.forward(zeros(tokens, heads * layer.head_dim), None, None, layer, fb, save_kv_cache=False)


def to_plan(setup, rec):
    """One plan for all layers: each layer's one kernel call must read what the first layer's does."""
    rec.agree.report(setup.case)
    if not any(rec.calls.values()) and setup.mode == "idle":  # an eager IDLE batch of no rows runs no kernel
        return mla_plan.latent_decode(setup.case, np.zeros((0, 1), np.int64), np.zeros(0, np.int64))
    plans = []
    for layer in setup.layers:
        calls = rec.calls.get(layer.layer_id, [])
        if len(calls) != 1:
            raise NotImplementedError(f"layer {layer.layer_id} made {len(calls)} kernel calls: one is modelled")
        plans.append(_call_plan(setup, calls[0]))
    for layer, (_, arrays) in zip(setup.layers, plans):
        first = plans[0][1]
        if any(not np.array_equal(arrays[k], first[k]) for k in first):
            raise RuntimeError(f"layer {layer.layer_id} reads other keys than layer 0: sglang's MLA layers share "
                               "one KV pool and one metadata")
    return plans[0]


def _call_plan(setup, call):
    case = setup.case
    if call["kernel"] in ("fa_mla", "flash_mla") and setup.mode in PREFILL_MODES:
        table, seq_lens, ps = call["block_table"].numpy(), call["seq_lens"].numpy(), call["page_size"]
        meta, arrays = mla_plan.prefill(case, [mla_plan.table_slots(table[i], seq_lens[i], ps, f"row {i}")
                                               for i in range(len(seq_lens))], q_lens=call["q_lens"])
        return meta, arrays
    if call["kernel"] in ("flash_mla", "fa_mla"):
        meta, arrays = mla_plan.latent_decode(case, call["block_table"].numpy(), call["seq_lens"].numpy(),
                                              q_lens=call["q_lens"])
        meta["page_size"] = call["page_size"]  # the block table's pages: paged_view(pool, 64)
        return meta, arrays
    qo = call["qo_indptr"].numpy()
    q_lens = qo[1:] - qo[:-1]
    if call["kernel"] == "ragged":  # K is the step's new tokens in batch order: token t is at out_cache_loc[t]
        new = case.array("out_cache_loc").astype(np.int64)[: call["tokens"]]
        kv = call["kv_indptr"].numpy()
        if kv[-1] > new.size:
            raise RuntimeError(f"ragged prefill: kv_indptr reaches token {int(kv[-1])} of {new.size} new tokens")
        return mla_plan.prefill(case, [new[kv[i]:kv[i + 1]] for i in range(len(kv) - 1)], q_lens=q_lens)
    if call["page_size"] != 1:
        raise NotImplementedError(f"BatchMLAPagedAttentionWrapper at page size {call['page_size']}")
    if not call["causal"] and q_lens.max(initial=0) > 1:
        raise NotImplementedError("a non-causal MLA paged call over several queries per row is not modelled")
    kv, kv_len, indices = call["kv_indptr"].numpy(), call["kv_len"].numpy(), call["kv_indices"].numpy()
    rows = len(q_lens)
    if len(kv) < rows + 1 or len(kv_len) < rows:
        raise RuntimeError(f"BatchMLAPagedAttentionWrapper: {rows} rows, kv_indptr of {len(kv)}, kv_len of {len(kv_len)}")
    slots = []
    for i in range(rows):
        end = int(kv[i]) + int(kv_len[i])
        if end > indices.size or kv_len[i] < 0:
            raise RuntimeError(f"BatchMLAPagedAttentionWrapper row {i} reads kv_indices[{int(kv[i])}:{end}] of "
                               f"{indices.size}")
        slots.append(indices[int(kv[i]):end])
    if setup.mode in PREFILL_MODES:
        return mla_plan.prefill(case, slots, q_lens=q_lens)
    width = max([len(s) for s in slots] + [1])
    table = np.zeros((rows, width), np.int64)
    for i, s in enumerate(slots):
        table[i, : len(s)] = s
    meta, arrays = mla_plan.latent_decode(case, table, kv_len[:rows], q_lens=q_lens)
    meta["page_size"] = 1
    return meta, arrays
