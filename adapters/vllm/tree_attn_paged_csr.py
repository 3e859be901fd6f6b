"""vLLM v1's TreeAttention backend (TREE_ATTN: 0.10.x and 0.11.x; gone from the later releases
installed here) as a kvfuzz `paged_csr` planner (FAMILIES.md): spec-decode verify of a token tree.

vLLM verifies one static tree (speculative_config.speculative_token_tree: each node's path of child
ranks, depth by depth) for every request: the kvfuzz tree (the verify mask's ancestors, the same for
every request) is written in that form, the release's TreeAttentionMetadataBuilder builds its
tree_attn_bias from it (_prepare_tree_attn_bias) and each layer's TreeAttentionImpl.forward runs
with unified_attention recorded (attention_run.py, recorder.py). A call's kernel arguments become
one paged_csr call at the block size: the block table rows as kv_indices, seqused_k as the rows'
lengths, and the custom mask as the kernel lays it out: key k of a row with q_len queries over
k_len keys is read by query i when k <= k_len - q_len + i (causal) and, for a new-token key
(j = k - (k_len - q_len) within qq_bias's row pitch), qq_bias[i][j] is finite — from the recorded
bias, never from the tree. The page_table family carries no mask; paged_csr's verify calls do,
and its check compares a full layer's mask with kvfuzz's tree mask (flashinfer_check.cc): full
layers only (windows and chunks of a tree are not modelled), eager (no CUDA graphs: the builder
supports none).

    meta, arrays = plan(vl, setup)     # setup = Setup(vl, case, dev, vl.attention_backend("tree"))
"""
import numpy as np
import torch

from attention_run import record
from engine.tensors import int32
from fake_runner import UnsupportedCase


def plan(vl, setup):
    if setup.mode != "target_verify":
        raise UnsupportedCase(f"mode {setup.mode}: TREE_ATTN is modelled for spec-decode verify only")
    if any(x["kind"] != "full" for x in setup.layers_spec):
        raise UnsupportedCase("TREE_ATTN with sliding-window or chunked layers is not modelled (full layers only)")
    setup.vllm_config.speculative_config.speculative_token_tree = str(tree_choices(setup))
    rec, _ = record(vl, setup, vl.tree_attn)
    groups, group_of_layer, arrays = [], [], {}
    for l in range(len(setup.layers_spec)):
        calls = rec.calls.get(l, [])
        if len(calls) != 1:
            raise RuntimeError(f"layer {l}: {len(calls)} kernel calls for a verify batch of decode rows, not 1")
        c = calls[0]
        if c["pool"] != setup.layers_spec[l]["pool"]:
            raise RuntimeError(f"layer {l} was handed the {c['pool']} pool's K/V buffer")
        path = f"groups.{len(groups)}.calls.0"
        call, call_arrays = _paged_call(c, path)
        groups.append({"layer": {"kind": "full", "window": 0, "chunk": 0}, "calls": [call]})
        group_of_layer.append(len(groups) - 1)
        arrays.update(call_arrays)
    return {"page_size": setup.page_size, "merge": "flashinfer_base2", "groups": groups,
            "group_of_layer": group_of_layer}, arrays


def tree_choices(setup):
    """The batch's tree as vLLM's speculative_token_tree: node j's path of child ranks from the root,
    nodes 1.. in kvfuzz's order. Each node's ancestors are read off kvfuzz's verify mask (its draft
    columns); vLLM has one tree for all requests and lays it out depth by depth."""
    mask, d = setup.case.array("custom_mask").astype(bool), setup.draft_tokens
    offset, trees = 0, []
    for i in range(setup.bs):
        width = int(setup.seq_lens[i])  # vLLM's seq_len: the verified prefix + D
        rows = mask[offset: offset + d * width].reshape(d, width)[:, width - d:]
        offset += d * width
        trees.append(tuple(tuple(int(a) for a in np.nonzero(rows[j])[0] if a != j) for j in range(d)))
    if len(set(trees)) != 1:
        raise UnsupportedCase("requests verify different trees: vLLM verifies one static tree (speculative_token_tree)")
    ancestors = trees[0]
    parents = [max(a, key=lambda x: len(ancestors[x])) if a else -1 for a in ancestors]
    if parents[0] != -1 or any(p < 0 for p in parents[1:]):
        raise UnsupportedCase("a verify tree whose node 0 is not the only root")
    paths = [()]
    for j in range(1, d):
        rank = sum(1 for x in range(1, j) if parents[x] == parents[j])
        paths.append(paths[parents[j]] + (rank,))
    depths = [len(p) for p in paths[1:]]
    if depths != sorted(depths):
        raise UnsupportedCase("a verify tree not laid out depth by depth (vLLM's sorted_tree_choices)")
    return paths[1:]


def _paged_call(c, path):
    """One recorded unified_attention call as a paged_csr verify call with its mask."""
    table, seqlens, cu_q = c["page_table"], c["cache_seqlens"].to(torch.int64), c["cu_seqlens_q"].to(torch.int64)
    ps, rows = c["view_page_size"], int(seqlens.numel())
    pages = (seqlens + ps - 1) // ps
    kv_indices = torch.cat([table[r, : int(pages[r])] for r in range(rows)]) if rows else torch.zeros(0)
    last = torch.where(pages > 0, seqlens - (pages - 1) * ps, torch.ones_like(seqlens))
    bias, pitch = c["qq_bias"] if c["qq_bias"] is not None else (None, 0)
    masks, mask_lens = [], []
    for r in range(rows):
        q_len, k_len = int(cu_q[r + 1] - cu_q[r]), int(seqlens[r])
        context = k_len - q_len
        i = np.arange(q_len)[:, None]
        k = np.arange(k_len)[None, :]
        visible = k <= context + i
        if bias is not None:
            flat = bias.reshape(-1).numpy()
            j = k - context
            in_bias = (j >= 0) & (j < pitch)
            at = np.clip(i * pitch + np.where(in_bias, j, 0), 0, flat.size - 1)
            visible &= ~in_bias | np.isfinite(flat[at])
        masks.append(visible.reshape(-1))
        mask_lens.append(q_len * k_len)
    call = {"role": "verify", "page_size": ps, "rows": rows, "rows_per_batch_row": 1, "causal": c["causal"],
            "window_left": c["window_left"], "has_mask": True}
    arrays = {f"{path}.qo_indptr": int32(cu_q, "qo_indptr"),
              f"{path}.kv_indptr": int32(torch.nn.functional.pad(torch.cumsum(pages, 0), (1, 0)), "kv_indptr"),
              f"{path}.kv_indices": int32(kv_indices.to(torch.int64), "kv_indices"),
              f"{path}.kv_last_page_len": int32(last, "kv_last_page_len"),
              f"{path}.custom_mask": np.concatenate(masks).astype(np.uint8) if masks else np.zeros(0, np.uint8),
              f"{path}.mask_indptr": np.concatenate([[0], np.cumsum(mask_lens)]).astype(np.int32)}
    return call, arrays
