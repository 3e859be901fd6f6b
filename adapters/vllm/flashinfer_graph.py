"""vLLM's FlashInfer backend under CUDA graphs, as gpu_model_runner runs a padded batch: a FULL
graph's capture then replay for a uniform decode batch, eager attention (PIECEWISE) for the rest.

Where it sits: flashinfer_paged_csr.plan -> **flashinfer_graph.py** (the graph mode, capture,
replay, the replay's plan-run check) -> flashinfer_recorder.py (what each wrapper read).

- The mode: attention_run's resolve_cudagraph_mode over the FlashInfer builder's support
  (UNIFORM_SINGLE_TOKEN_DECODE in 0.1x; 0.3x's get_cudagraph_support) settles
  FULL_AND_PIECEWISE: the builder keeps one CUDA-graph decode wrapper per batch size
  (`_get_decode_wrapper(batch_size, use_cudagraph=True)`, over slices of its persistent
  paged_kv_indptr / paged_kv_indices / paged_kv_last_page_len buffers).
- Capture: _dummy_run's batch (padded_bs rows, one token and seq_len 1 each, max_seq_len =
  max_model_len); the first fast_plan_decode runs FlashInfer's plan(), which copies into the
  buffers, and every layer's forward runs the wrapper (recorded: the buffer tensors it was handed).
- Replay: the builder builds the step's metadata: it writes the step's CSR into the same
  persistent buffers and fast_plan_decode reschedules (0.1x: vLLM's own code copies indptr and
  last_page_len into the wrapper's buffers; 0.3x: FlashInfer's fast_decode_plan, no copy). The graph
  reruns no Python: the kernel reads the captured buffers, read here after the replay's build.
- Which batch the replay builds: a runner that pads it (num_reqs_padded, 0.27.1 and 0.33.0) hands
  the padded rows (seq_len 0, the null block: fake_runner.py); 0.10/0.11's runner hands the builder
  the real rows and the builder pads its decode CSR itself (pad_for_cudagraph; indptr held flat,
  last_page_len 1 on the padded rows).
- Plan-run: a builder with CUDA graphs off plans the replay's metadata eagerly; per layer its decode
  wrapper's CSR (kv_indptr, kv_indices, kv_last_page_len over its rows) must be what the captured
  buffers hold, and the captured batch the graph's size (batch_size); each disagreement is
  plan-run:ARGUMENT. The recorder also checks the replay's schedule against the buffers (seq_lens).

    full = full_graph(vl, setup, {g.gid: builder_cls})   # each group's builder class; before setup.buffers()
    capture_and_replay(vl, setup, rec, builders, run_layers)
"""
import dataclasses
import os

import torch

from attention_run import resolve_cudagraph_mode
from cudagraph_dispatch import runtime_mode
from flashinfer_recorder import Recorder


def full_graph(vl, setup, classes):
    """Whether the batch replays a FULL CUDA graph (a uniform decode batch under FULL_AND_PIECEWISE, which
    every group's builder class, {gid: class}, must support); sets the compilation config's mode as the
    runner settles it (the builders read it when made)."""
    if not setup.graph:
        return False
    resolve_cudagraph_mode(vl, setup, classes)
    # 0.1x's builder pads its graph batch itself: pad_for_cudagraph is the runner's capture size
    setup.vllm_config.pad_for_cudagraph = lambda n: setup.padded_bs if n <= setup.padded_bs else n
    # the release's dispatcher: FULL for a uniform decode batch (one token per request, whatever kvfuzz's mode)
    return runtime_mode(vl, setup, cascade=False) == "FULL"


def capture_and_replay(vl, setup, rec, builders, run_layers):
    """run_layers(recorder, group, metadata) runs the group's layers' forward. After it the decode
    calls in rec read the captured buffers as the replay left them; plan-run disagreements are in
    rec.agree."""
    for g in setup.groups:
        builder = builders[g.gid]
        rec.planning = g.layer_ids[0]
        run_layers(rec, g, builder.build_for_cudagraph_capture(setup.common_metadata(g, capture=True)))
    replay = {g.gid: _replay_metadata(vl, setup, setup.common_metadata(g)) for g in setup.groups}
    for g in setup.groups:
        rec.planning = g.layer_ids[0]
        builders[g.gid].build(common_prefix_len=0, common_attn_metadata=replay[g.gid])
    rec.planning = -1
    rec.replayed()
    _eager_agreement(vl, setup, rec, builders, replay, run_layers)


def _replay_metadata(vl, setup, common):
    """The CommonAttentionMetadata the runner hands the builder at replay: padded where the runner pads
    requests (num_reqs_padded: 0.27.1, 0.33.0), else 0.10/0.11's real rows and tokens."""
    if _runner_pads_requests(vl):
        return common
    n, t = setup.bs, setup.num_tokens
    fields = {f.name for f in dataclasses.fields(common)}
    cut = dict(num_reqs=n, num_actual_tokens=t, query_start_loc=common.query_start_loc[: n + 1],
               query_start_loc_cpu=common.query_start_loc_cpu[: n + 1], seq_lens=common.seq_lens[:n],
               seq_lens_cpu=common.seq_lens_cpu[:n], num_computed_tokens_cpu=common.num_computed_tokens_cpu[:n],
               block_table_tensor=common.block_table_tensor[:n], slot_mapping=common.slot_mapping[:t])
    return dataclasses.replace(common, **{k: v for k, v in cut.items() if k in fields})


def _runner_pads_requests(vl):
    """Whether the release's runner pads a CUDA-graph batch's requests (num_reqs_padded: 0.27.1 and 0.33.0 here, not 0.10/0.11)."""
    path = os.path.join(vl.site, "vllm", "v1", "worker", "gpu_model_runner.py")
    with open(path) as f:
        return "num_reqs_padded" in f.read()


def _eager_agreement(vl, setup, rec, builders, replay, run_layers):
    """What an eager plan of the replay's metadata hands the decode kernel against what the captured
    wrapper reads (module doc)."""
    eager = Recorder(setup)
    eager.agree = rec.agree
    eager.install(vl.flashinfer)
    for g in setup.groups:
        b = builders[g.gid]
        builder = type(b)(b.kv_cache_spec, b.layer_names, setup.vllm_config, setup.device)
        builder.enable_cuda_graph = False
        eager.planning = g.layer_ids[0]
        run_layers(eager, g, builder.build(common_prefix_len=0, common_attn_metadata=replay[g.gid]))
    rec.install(vl.flashinfer)
    where = "FULL CUDA graph replay: the captured decode buffers against an eager plan of the replay's batch"
    graph_rows = setup.padded_bs
    for layer, calls in rec.calls.items():
        built = [c for c in eager.calls.get(layer, []) if c["role"] == "decode"]
        for captured, plan in zip([c for c in calls if c["role"] == "decode"], built):
            rows, eager_rows = int(captured["kv_last_page_len"].numel()), int(plan["kv_last_page_len"].numel())
            rec.agree.check("batch_size", graph_rows, rows, layer, where + " (the graph's batch)")
            if eager_rows > rows:
                rec.agree.check("batch_size", eager_rows, rows, layer, where)
                continue
            pages = int(plan["kv_indptr"][-1])
            for name, a, b in (("kv_indptr", captured["kv_indptr"][: eager_rows + 1], plan["kv_indptr"]),
                               ("kv_last_page_len", captured["kv_last_page_len"][:eager_rows], plan["kv_last_page_len"]),
                               ("kv_indices", captured["kv_indices"][:pages], plan["kv_indices"][:pages])):
                if a.shape != b.shape or not torch.equal(a, b):
                    rec.agree.note(name, _brief(b), _brief(a), layer, where)


def _brief(t):
    values = t.flatten().tolist()
    return f"{list(t.shape)} {values[:12]}{' ...' if len(values) > 12 else ''}"
