"""A page_table planner written with numpy: the external-planner example.

Builds what sglang's FlashAttentionBackend builds for DECODE and EXTEND on full and sliding-window
layers that share the full pool: one causal call per forward, page_table = req_to_token strided
then divided (PT[b][p] = req_to_token[row_b][p * ps] // ps), cache_seqlens = seq_lens,
cu_seqlens_q from the extend lengths. kvfuzz runs its checked executor on the result, so every
property applies to this planner's metadata.

    kvfuzz check case.json --adapter "python3 adapters/examples/numpy_page_table_planner.py"

KVFUZZ_EXAMPLE_BREAK=token_table hands the token-granular table instead (sglang #23757);
KVFUZZ_EXAMPLE_BREAK=plan_run reports each sliding-window layer as planned without its window and
run with it (a planted plan-run disagreement: sglang #31501's shape; the plan itself stays right);
KVFUZZ_EXAMPLE_BREAK=bad_plan_run reports a malformed disagreement (a contract finding);
KVFUZZ_EXAMPLE_PLANNER_NAME renames it (a test stands it in for an engine's planner).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kvfuzz_adapter as kv  # noqa: E402

BREAK = os.environ.get("KVFUZZ_EXAMPLE_BREAK", "")


def empty_group(kind):
    return {"kind": kind, "chunk": 0, "parts": []}


@kv.planner(name=os.environ.get("KVFUZZ_EXAMPLE_PLANNER_NAME", "numpy_pt_planner"), family="page_table",
            supports={"modes": ["decode", "extend"], "layer_kinds": ["full", "sliding_window"], "hybrid_swa": False,
                      "cuda_graph": False})
def plan(case):
    """numpy page_table planner (decode and extend, eager)"""
    ps = case.page_size
    bs = case.batch["bs"]
    r2t = case.array("req_to_token")
    rows = case.array("req_pool_indices")[:bs]
    seq_lens = case.array("seq_lens")[:bs].astype(np.int64)
    q_lens = case.array("extend_seq_lens")[:bs].astype(np.int64)
    max_k = int(seq_lens.max()) if bs else 0
    width = max(1, -(-max_k // ps))
    columns = np.arange(width) * ps
    table = r2t[rows][:, np.minimum(columns, r2t.shape[1] - 1)]
    if BREAK != "token_table":
        table = table // ps
    else:
        table = r2t[rows][:, :width]
    call = {"name": case.batch["mode"], "rows": bs, "width": width, "view_page_size": ps, "causal": True,
            "max_seqlen_q": int(q_lens.max()) if bs else 0, "max_seqlen_k": max_k}
    arrays = {
        "full.parts.0.cu_seqlens_q": np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32),
        "full.parts.0.cu_seqlens_k": np.concatenate([[0], np.cumsum(seq_lens)]).astype(np.int32),
        "full.parts.0.cache_seqlens": seq_lens.astype(np.int32),
        "full.parts.0.page_table": table.astype(np.int32).reshape(-1),
    }
    layers = [{"kind": l["kind"], "window": l["window"], "chunk": l["chunk"]} for l in case.layers]
    for l, layer in enumerate(layers):
        if BREAK == "plan_run" and layer["kind"] == "sliding_window":
            case.disagree("window_left", -1, layer["window"], layer=l, where="numpy planner's forward")
    if BREAK == "bad_plan_run":
        case.plan_run.append({"argument": "", "message": "no argument named"})
    meta = {"layers": layers, "full": {"kind": "full", "chunk": 0, "parts": [call]}, "has_sliding": False,
            "sliding": empty_group("sliding"), "local": []}
    return meta, arrays


if __name__ == "__main__":
    kv.serve(plan)
