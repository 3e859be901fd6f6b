"""One MLA step as vLLM's runner runs it under CUDA graphs: a FULL graph for a uniform decode batch
(one query per request, or 1 + k in a verify step) where the MLA builder supports one, else
piecewise (attention eager, the padded tokens outside every row).

Where it sits: mla_latent.py (one case) -> **mla_graph.py** -> attention_run.py's capture and
replay (the dummy batch's build, then the replay's over the same persistent buffers) ->
mla_recorder.py (the captured calls read as the graph replays them). The captured calls are then
checked against an eager run of the replay's metadata (plan-run:block_table, :seq_lens, :q_lens),
and FlashMLA's tile schedule against the seq_lens the replayed kernel reads (plan-run:cache_seqlens:
0.1x makes the schedule at metadata build and copies it into the builder's persistent
cg_buf_tile_scheduler_metadata / cg_buf_num_splits; 0.2x on, the kernel's first call makes it, in
the graph).

    full = full_graph(vl, setup, attn)            # before the builder is made (it reads the mode)
    replay(setup, builder, rec, run)              # run(metadata) runs every layer's forward
"""
import traceback

from attention_run import capture_and_replay, compare_replay, resolve_cudagraph_mode
from cudagraph_dispatch import runtime_mode
from fake_runner import UnsupportedCase
from mla_recorder import MlaRecorder


def full_graph(vl, setup, attn):
    """Whether the step replays a FULL graph: vLLM's CUDA-graph mode (FULL_AND_PIECEWISE while the
    builder supports a FULL graph of the batch's uniform query length) and a uniform decode batch.

        full = full_graph(vl, setup, setup.attn)      # sets compilation_config.cudagraph_mode"""
    if not setup.graph:
        return False
    g = setup.groups[0]
    resolve_cudagraph_mode(vl, setup, {g.gid: attn.backend.get_builder_cls()})
    return runtime_mode(vl, setup, cascade=False) == "FULL"  # the release's dispatcher (no MLA cascade)


def check_builder(setup, builder, full):
    """Refuse what the family's shapes cannot say: verify rows the builder sends down its prefill path
    (reorder_batch_threshold below the query length: the mla prefill shape carries no verify step),
    and Triton MLA's verify under a FULL graph (in-graph tensors the recorder cannot read at replay).

        check_builder(setup, builder, full)           # after attn.reorder, before setup.buffers()"""
    threshold = getattr(builder, "reorder_batch_threshold", None) or 1
    if setup.mode == "target_verify" and threshold < setup.uniform_query_len:
        raise UnsupportedCase(f"{setup.attn.name}'s builder decodes up to {threshold} queries per request "
                              f"(reorder_batch_threshold): verify rows of {setup.uniform_query_len} run its prefill path, "
                              "which the mla family's prefill shape does not carry for a verify step")
    if full and setup.mode == "target_verify" and setup.attn.which == "triton_mla":
        raise UnsupportedCase("Triton MLA verify under a FULL graph: forward_mqa computes each query row's block "
                              "table and key count in the graph from seq_lens (not modelled)")


def eager_common(setup, g):
    """The CommonAttentionMetadata of an eager or piecewise step: vLLM's runner pads attention only in
    a FULL graph, so num_actual_tokens counts the scheduled tokens, not the padded ones.

        metadata = builder.build(common_prefix_len=0, common_attn_metadata=eager_common(setup, g))"""
    common = setup.common_metadata(g)
    common.num_actual_tokens = setup.num_tokens
    return common


def replay(setup, builder, rec, run):
    """Capture with _dummy_run's batch, build the replay's metadata over the same buffers, read the
    captured calls as replayed; then run the layers eagerly on the replay's metadata (a second
    recorder sharing the schedules) and check every captured decode call against its eager twin.

        replay(setup, builder, rec, run)              # disagreements in rec.agree"""
    g = setup.groups[0]
    try:
        replays = capture_and_replay(setup, {g.gid: builder}, rec, lambda _, metadata: run(metadata))
    except AssertionError as e:  # build_for_cudagraph_capture's own asserts: vLLM refuses the graph
        if traceback.extract_tb(e.__traceback__)[-1].name != "build_for_cudagraph_capture":
            raise  # an assert elsewhere (a forward's, a builder's) is vLLM failing this batch, not refusing it
        raise UnsupportedCase(f"vLLM's {setup.attn.name} builder refuses to capture this batch: {e}") from e
    attn = setup.attn
    eager = MlaRecorder(setup)
    eager.schedules, eager.mla_schedules, eager.agree = rec.schedules, rec.mla_schedules, rec.agree
    attn.recorder = eager
    run(replays[g.gid])
    attn.recorder = rec
    compare_replay(rec.agree, rec.decode, eager.decode, ("block_table", "seq_lens"))
    where = "FULL CUDA graph replay: the captured call against the replay's build"
    for layer, calls in rec.decode.items():
        for a, b in zip(calls, eager.decode.get(layer, [])):
            rec.agree.check("q_lens", a["q_lens"], b["q_lens"], layer, where)
