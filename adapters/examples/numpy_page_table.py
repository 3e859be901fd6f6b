"""A page_table executor written from scratch with numpy: the reference adapter to copy.

Reads FAMILIES.md's page_table metadata the way flash_attn_with_kvcache does: for each call of the
layer's group, row b's queries are batch tokens cu_seqlens_q[b] .. cu_seqlens_q[b+1], its keys
k < cache_seqlens[b] live at slot page_table[b][k // ps] * ps + k % ps, the right edge is the
bottom-right diagonal (causal or a window) and a window also drops keys below it - window_left;
the calls of a group are merged by LSE.

    kvfuzz check case.json --adapter "python3 adapters/examples/numpy_page_table.py"

KVFUZZ_EXAMPLE_BREAK=<name> turns it into one of the broken variants the tests must catch:
drop_last_key, next_page, lse_base2, freed_slot, segfault, hang, oob_write; hang_layers (a hang on
the cases of more than one layer only: one lane of a server hangs while the others answer,
adapter_lanes_test.sh); segfault_layers (a crash
on the cases of more than one layer only: which case crashed must be told apart from the cases
that shared its process, adapter_server_test.sh); segfault_keys (a crash when a row reads more
than 40 keys: some cases of a shape crash and others not, so a batch of both must be told apart);
gqa_mod (q head h reads kv head h % kv_heads, not
h // (q_heads / kv_heads)), no_scale (softmax of q.k without sm_scale), nan_out (every output NaN),
bf16_out (outputs cut to bf16 while fp32 is declared, on the case's own values only, so that the
probes still decode: a precision error, not a wrong scale); and masked_tail, which
is not a bug: it loads the unwritten tail of each row's last page and masks it (weight exactly 0),
as PyTorch's paged flex attention does, which kvfuzz reports as a note, not a finding; and
unsupported, which answers every case with more than one layer unsupported (kv.Unsupported); and
bad_precision, which answers a per-case precision kvfuzz must refuse (tile_keys 0); sink_every_part
(the model's attention sinks folded into every call of a layer, so a cascade's merge counts them
once per part, where the plan hands them to one call: its `sinks`); kv_scale_ignored and
kv_scale_twice (an fp8 cache's stored values read without the layer's k_scale / v_scale, or
multiplied by them twice).
KVFUZZ_EXAMPLE_DELAY and KVFUZZ_EXAMPLE_MODES: example_env.py. It declares "batch": true (cases of
one shape may come as one, on executor servers: docs/gpu.md "Batching") and lanes (a server may
answer several requests at once, each on its own thread: `--server-lanes`; it keeps no state shared
by requests).
"""
import ctypes
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_adapter as kv  # noqa: E402
from example_env import BREAK, cut_last_key, declared_modes, kernel_delay  # noqa: E402
from numpy_attention import attend, dequantize, fold_sinks, merge  # noqa: E402


def group_of(case, layer):
    name = case.plan["layer_group"][layer]
    if name.startswith("local."):
        return case.plan["local"][int(name.split(".")[1])], name + "."
    return case.plan[name], name + "."


def longest_row(case):
    """The most keys a kernel row of the case reads (its rows only: a buffer's tail is capacity)."""
    groups = [("full", case.plan["full"]), ("sliding", case.plan["sliding"])]
    groups += [(f"local.{i}", g) for i, g in enumerate(case.plan["local"])]
    return max([int(case.array(f"{name}.parts.{i}.cache_seqlens")[:call["rows"]].max(initial=0))
                for name, g in groups for i, call in enumerate(g["parts"]) if call["rows"] > 0], default=0)


def run_call(case, call, prefix, layer, window_left, out, lse):
    cu_q = case.array(prefix + "cu_seqlens_q")
    seqlens = case.array(prefix + "cache_seqlens")
    table = case.array(prefix + "page_table")
    width, ps = call["width"], call["view_page_size"]
    q_all = case.q[layer]
    for b in range(call["rows"]):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        k_len = int(seqlens[b])
        if q1 <= q0:
            continue
        k_len = cut_last_key(k_len)
        keys = np.arange(k_len)
        pages = table[b * width + keys // ps].astype(np.int64)
        if BREAK == "next_page" and k_len > 0:
            last = (k_len - 1) // ps
            pages = np.where(keys // ps == last, pages + 1, pages)
        slots = pages * ps + keys % ps
        if prefix + "rank_slots" in case.manifest["arrays"]:  # decode-context parallelism: the rank's own pool
            rank_pool = case.array(prefix + "rank_slots")  # local slot -> the layer pool's slot (FAMILIES.md)
            if slots.size and (slots.min() < 0 or slots.max() >= rank_pool.size or (rank_pool[slots] < 0).any()):
                raise IndexError(f"{prefix}rank_slots: a key reads a local slot outside the rank's pool or never written")
            slots = rank_pool[slots].astype(np.int64)
        if BREAK == "freed_slot" and k_len > 0:
            slots[0] = case.num_slots(layer) - 1  # the pool's last slot: past every allocation
        q_len = q1 - q0
        last_key = k_len - q_len + np.arange(q_len)[:, None]
        visible = np.ones((q_len, k_len), dtype=bool)
        if BREAK == "masked_tail" and k_len % ps:
            # Not a bug: load the whole last page, as a paged kernel may, and mask its tail.
            tail = np.arange(k_len, k_len + ps - k_len % ps)
            slots = np.concatenate([slots, pages[-1] * ps + tail % ps])
            keys = np.concatenate([keys, tail])
            visible = np.concatenate([visible, np.zeros((q_len, tail.size), dtype=bool)], axis=1)
        if call["causal"] or window_left >= 0:
            visible &= keys[None, :] <= last_key
        if window_left >= 0:
            visible &= keys[None, :] >= last_key - window_left
        # Rows by slot (case.pool_rows): the pools of `long` cases come sparse and are not materialized.
        # An fp8 cache's stored values times the layer's scales, as the kernel dequantizes its tiles;
        # the planted bugs ignore them or apply them twice.
        k_scale, v_scale = {"kv_scale_ignored": (1.0, 1.0),
                            "kv_scale_twice": (case.k_scale(layer) ** 2, case.v_scale(layer) ** 2)}.get(
            BREAK, (case.k_scale(layer), case.v_scale(layer)))
        k = dequantize(case.pool_rows(layer, "k", slots), k_scale)
        v = dequantize(case.pool_rows(layer, "v", slots), v_scale)
        if BREAK == "gqa_mod":  # every q head its own copy of kv head h % kv_heads
            heads = np.arange(q_all.shape[1]) % k.shape[1]
            k, v = k[:, heads], v[:, heads]
        scale = 1.0 if BREAK == "no_scale" else case.sm_scale
        o, l = attend(q_all[q0:q1], k, v, visible, scale, case.softcap)
        # the call's s_aux (the plan's sinks), folded in by this kernel call alone; the planted bug
        # folds the model's into every call, so a cascade's merge counts them once per part
        sinks = case.sinks if BREAK == "sink_every_part" else call.get("sinks")
        if sinks:
            o, l = fold_sinks(o, l, sinks)
        out[q0:q1], lse[q0:q1] = o, l


@kv.executor(name="numpy_page_table", family="page_table", batch=True,
             supports={"modes": declared_modes(), "dtypes": ["fp32", "fp16", "bf16", "fp8_e4m3"], "page_sizes": "any",
                       "mla": True, "non_mla": True, "sinks": True, "kv_scales": True},
             precision={"p_dtype": "fp32", "out_dtype": "fp32"}, lanes=True)
def run(case):
    """numpy page_table executor (flash_attn_with_kvcache semantics)"""
    if BREAK == "segfault" or (BREAK == "segfault_layers" and len(case.layers) > 1) or (
            BREAK == "segfault_keys" and longest_row(case) > 40):
        ctypes.string_at(0)
    if BREAK == "hang" or (BREAK == "hang_layers" and len(case.layers) > 1):
        time.sleep(3600)
    kernel_delay(case)
    if BREAK == "unsupported" and len(case.layers) > 1:
        raise kv.Unsupported("more than one layer")
    if BREAK == "bad_precision":
        case.precision(tile_keys=0)
    out_shape, lse_shape = case.output_shapes()
    out = np.zeros(out_shape)
    lse = np.full(lse_shape, -np.inf)
    for layer in range(len(case.layers)):
        group, prefix = group_of(case, layer)
        window_left = case.plan["window_left"][layer]
        merged = None
        for i, call in enumerate(group["parts"]):
            o = np.zeros(out_shape[1:])
            l = np.full(lse_shape[1:], -np.inf)
            run_call(case, call, f"{prefix}parts.{i}.", layer, window_left, o, l)
            merged = (o, l) if merged is None else merge(merged[0], merged[1], o, l)
        if merged is not None:
            out[layer], lse[layer] = merged
    if BREAK == "lse_base2":
        lse = lse / math.log(2.0)
    if BREAK == "nan_out":
        out[:] = np.nan
    if BREAK == "bf16_out" and case.value_set == "main":  # truncate each float32 to bf16's 8 significand bits
        out = (out.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    if BREAK == "oob_write":
        q = case.q
        ctypes.memset(q.ctypes.data + q.nbytes, 0, 64)  # 64 bytes past the end of an input
    return out.astype(np.float32), lse.astype(np.float32)


if __name__ == "__main__":
    kv.serve(run)
