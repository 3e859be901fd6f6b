"""vLLM v1's Triton attention backend (TRITON_ATTN) as a kvfuzz `page_table` planner (FAMILIES.md).

Per KV-cache group (fake_runner.py) the release's own TritonAttentionMetadataBuilder — or, for a
chunked group, the ChunkedLocalAttention builder vLLM derives from it — builds the metadata from the
group's CommonAttentionMetadata; every layer's TritonAttentionImpl.forward runs on it with the
kernel entry unified_attention recorded (attention_run.py, recorder.py). unified_attention takes
what flash_attn_varlen_func takes (block_table, seqused_k, cu_seqlens_q, window, causal, softcap),
so the recorded calls are a page_table plan like FlashAttention's (vllm_page_table.py).

    meta, arrays = plan(vl, setup)     # setup = Setup(vl, case, dev, vl.triton_attn.TritonAttentionBackend)
"""
import eagle_drafting
import vllm_page_table
from attention_run import record


def plan(vl, setup):
    if setup.mode in eagle_drafting.MODES:  # EAGLE drafting: the proposer's pass (eagle_drafting.py)
        return vllm_page_table.to_plan(setup, eagle_drafting.record(vl, setup, vl.triton_attn), False)
    rec, full_graph = record(vl, setup, vl.triton_attn)
    return vllm_page_table.to_plan(setup, rec, full_graph)
