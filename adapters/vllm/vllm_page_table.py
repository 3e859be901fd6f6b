"""Recorded page-table kernel calls of one vLLM step (FlashAttention's flash_attn_varlen_func,
Triton's unified_attention: recorder.py) as a kvfuzz `page_table` plan (FAMILIES.md), through the
conversion shared with sglang (engine/page_table_plan.py), with vLLM's CUDA-graph padding stated.

    rec, full_graph = attention_run.record(vl, setup, vl.flash_attn)
    meta, arrays = to_plan(setup, rec, full_graph)
"""
from engine import page_table_plan


def to_plan(setup, rec, full_graph):
    """vLLM pads a CUDA-graph batch with empty kernel rows, leaves the padded tokens outside every row
    and, in a FULL graph, hands the kernel capture's max_seqlen_k (max_model_len): the plan says so
    (empty_padded_rows, max_seqlen_k_upper_bound; FAMILIES.md) and kvfuzz's check accepts exactly that."""
    calls = rec.as_plan_calls()
    if setup.allocation is not None:  # vLLM's KVCacheManager allocated: its block ids as kvfuzz's pages
        setup.allocation.to_kvfuzz_pages(calls)
    elif setup.v2 is not None:  # Model Runner V2 nulls blocks below each window size's reach (v2_runner.py)
        setup.v2.to_kvfuzz_pages(calls)
    if setup.graph:
        for layer_calls in calls.values():
            for c in layer_calls:
                c["empty_padded_rows"] = True
                c["max_seqlen_k_upper_bound"] = full_graph or c.get("max_seqlen_k_upper_bound", False)
    return page_table_plan.to_plan(setup.case, setup.mode, calls, "vllm")
