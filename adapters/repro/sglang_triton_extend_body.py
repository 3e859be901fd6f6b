"""A reproducer of a kvfuzz finding in sglang's Triton extend kernel, written by `kvfuzz repro`.

The release's own extend_attention_fwd (sglang's srt/layers/attention/triton_ops/extend_attention.py,
its kernel file only, from --site) is called below as TritonAttnBackend.forward_extend calls it, with
the metadata kvfuzz's planner built for the batch (BUNDLE["plan"]: each layer's CSR, window and
window_kv_offsets, the tree mask; one field a line). Each query is compared with a float64 attention
over the keys it should read (its "visible": per layer, column ranges of its row, whose slots and
positions are the row's "columns" runs [first slot, first position, count]); a probe (Q = K = 0, V
one-hot per slot) shows the keys it did read.

    python3 THIS.py --site DIR [--dtype fp16|bf16]     # DIR: an unpacked sglang wheel

Needs torch, numpy, triton and kvfuzz_repro_sglang_triton_extend.py beside this file (kvfuzz's
harness, written with it: the values, the expectation, the probe, the kernel's loader); not kvfuzz.
Without a CUDA device the kernel runs in Triton's interpreter (fp16 for a bf16 case). Exit 1: a
query read other keys than it should or its output is off (or the call raised); 0: none; 2: it
cannot run here; 3: the script failed. Last line: RESULT {json}.
"""
import argparse
import inspect
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_repro_harness as kv  # kvfuzz repro: harness

BUNDLE = None  # kvfuzz repro


def main():
    ap = argparse.ArgumentParser(description="sglang Triton extend_attention_fwd reproducer")
    ap.add_argument("--site", default="", help="a folder holding sglang/ (an unpacked sglang wheel)")
    ap.add_argument("--dtype", default="", help="run in this dtype instead of the case's (fp16, bf16)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        kv.cannot_run("no torch")
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
    except ImportError:
        kv.cannot_run("no triton")
    extend_attention_fwd, release = kv.load_extend(kv.sglang_site(args.site), torch, cuda)
    kv.STATS["release"] = release
    dev = torch.device("cuda" if cuda else "cpu")
    batch = kv.Batch(BUNDLE)
    dtype = args.dtype or ("fp16" if batch.dtype == "bf16" and not cuda else batch.dtype)
    batch.dtype = dtype
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    meta, arrays = batch.plan["meta"], batch.plan["arrays"]
    if meta["kernel"] != "extend":
        kv.cannot_run(f"the plan runs the {meta['kernel']} kernel; this template calls the extend kernel")
    # tl.dot needs dims >= 16: below that Q/K and V are zero-padded to one width (zeros change
    # neither q.k, with sm_scale passed, nor the kept V channels); real dims are passed as they are.
    if min(batch.D, batch.Dv) >= 16:
        qw, vw = batch.D, batch.Dv
    else:
        qw = vw = max(16, batch.D, batch.Dv)

    def t(a, dt=None):
        return torch.tensor(np.asarray(a), device=dev, dtype=dt)

    loc = np.asarray(BUNDLE["out_cache_loc"], np.int64)
    qo_indptr = np.asarray(arrays["qo_indptr"], np.int32)
    q_lens = (qo_indptr[1:] - qo_indptr[:-1]).tolist()
    mask = t(arrays["custom_mask"], torch.bool) if meta["use_custom_mask"] else None
    mask_indptr = t(arrays["mask_indptr"], torch.int64) if meta["use_custom_mask"] else None
    print(f"sglang {release} extend_attention_fwd on {'CUDA (' + torch.cuda.get_device_name() + ')' if cuda else 'the CPU (Triton interpreter)'}, "
          f"{dtype}, Q/K width {qw}, V width {vw}, page size {batch.page_size}")

    f2s = np.asarray(BUNDLE["full_to_swa"][:batch.slots], np.int64)

    def pools(csr, k, v):
        """The pool the layer's CSR indexes: the full pool, or a hybrid model's SWA pool, whose slot
        full_to_swa[s] holds what full slot s holds (sglang's SWAKVPool)."""
        if csr["pool"] != "swa":
            return k, v
        live = np.nonzero(f2s > 0)[0]
        ks = np.zeros((BUNDLE["swa_slots"],) + k.shape[1:], np.float32)
        vs = np.zeros((BUNDLE["swa_slots"],) + v.shape[1:], np.float32)
        ks[f2s[live]], vs[f2s[live]] = k[live], v[live]
        return ks, vs

    def run(li, q, k, v):
        c = meta["layer_csr"][li]
        csr, pre = meta["csrs"][c], f"csrs.{c}."
        window = int(csr["window_or_chunk"]) if csr["kind"] == "sliding_window" else -1
        offsets = arrays.get(pre + "kv_offsets") or [0] * len(qo_indptr)
        kp, vp = pools(csr, k, v)
        qq, kk, vv = t(q, tdt), t(kp, tdt), t(vp, tdt)
        k_new, v_new = t(k[loc], tdt), t(v[loc], tdt)  # the step's K/V, as written to the pool
        o = torch.zeros((batch.T, batch.H, vw), dtype=tdt, device=dev)
        later = dict(page_size=batch.page_size, extend_seq_lens_cpu=q_lens)  # keywords 0.5.23 added
        params = inspect.signature(extend_attention_fwd).parameters
        kv.kernel_call(extend_attention_fwd, qq, k_new, v_new, o, kk, vv, t(qo_indptr), t(arrays[pre + "kv_indptr"], torch.int32),
                             t(arrays[pre + "kv_indices"], torch.int64), mask, True, mask_indptr, max(q_lens),
                             1.0, 1.0, batch.sm_scale, logit_cap=float(batch.softcap), sliding_window_size=window,
                             sinks=None, window_kv_offsets=t(offsets, torch.int32) if window >= 0 else None,
                             xai_temperature_len=-1, **{n: x for n, x in later.items() if n in params})
        if cuda:
            kv.kernel_call(torch.cuda.synchronize)
        return o.float().cpu().numpy()

    wrong, total = kv.check(run, batch, qw, vw)
    return kv.verdict(wrong, f"sglang {release} extend_attention_fwd: {wrong} of {total} queries wrong")


if __name__ == "__main__":
    kv.BUNDLE = BUNDLE
    kv.run_main(main)
