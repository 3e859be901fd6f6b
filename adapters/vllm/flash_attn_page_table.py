"""vLLM v1's FlashAttention backend as a kvfuzz `page_table` planner (FAMILIES.md).

Per KV-cache group (fake_runner.py) the release's own FlashAttentionMetadataBuilder — or, for a
chunked group, the ChunkedLocalAttention builder vLLM derives from it, which splits requests into
virtual batches (make_local_attention_virtual_batches) — builds the metadata from the group's
CommonAttentionMetadata; every layer's FlashAttentionImpl.forward runs on it with
flash_attn_varlen_func recorded (attention_run.py, recorder.py). The recorded calls are the plan
(vllm_page_table.py, shared with the Triton backend's). Where the batch's rows share prefix blocks,
the runner's cascade decision (cascade.py) hands the builder a common_prefix_len and the layers run
cascade attention: two calls merged, a group of the plan with common_prefix_len.

    meta, arrays = plan(vl, setup)
"""
import eagle_drafting
import vllm_page_table
from attention_run import record


def plan(vl, setup):
    if setup.mode in eagle_drafting.MODES:  # EAGLE drafting: the proposer's pass (eagle_drafting.py)
        return vllm_page_table.to_plan(setup, eagle_drafting.record(vl, setup, vl.flash_attn), False)
    rec, full_graph = record(vl, setup, vl.flash_attn)
    return vllm_page_table.to_plan(setup, rec, full_graph)
