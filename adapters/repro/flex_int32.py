# ---- target: PyTorch flex attention over a large paged K/V pool (adapters/repro/flex_int32.py of kvfuzz) ----
# One compiled torch.nn.attention.flex_attention call over the whole pool, [1, Hkv, slots, D], read
# in place the way paged flex attention reads it (torch's experimental PagedAttention): the
# batch's tokens are the queries, [1, Hq, tokens, D], and a mask_mod keeps key slot s for query t
# iff s holds a token of t's request at a position t may see (from the data below: the slot's
# request and position). The BlockMask is built from the same mask_mod. Where the pool passes 2^31
# K/V elements, the generated kernel's int32 offsets (vllm-project/vllm#50427,
# pytorch/pytorch#190857) read the wrong keys or fault. Only the rows' slots hold values (normal
# from the seed), the rest zeros: the pool itself can be tens of GB. Needs a CUDA device; no
# probe runs (the pool has millions of slots): each query's output against the float64 expectation.
#   python3 repro.py


def main():
    argparse.ArgumentParser(description="flex attention over a large paged pool").parse_args()
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        cannot_run("no torch with flex attention")
    if not torch.cuda.is_available():
        cannot_run("flex attention's compiled kernel needs a CUDA device")
    batch = Batch(BUNDLE)
    dev = "cuda"
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[batch.dtype]
    width = 16
    while width < max(batch.D, batch.Dv):
        width *= 2
    slots_pad = -(-batch.slots // 128) * 128
    tokens_pad = max(128, -(-batch.T // 128) * 128)
    print(f"torch {torch.__version__} flex_attention on {torch.cuda.get_device_name()}: K/V pools [{slots_pad}, "
          f"{batch.Hk}, {width}] {batch.dtype} seen as [1, {batch.Hk}, {slots_pad}, {width}], "
          f"{batch.Hk * slots_pad * width:,} elements each "
          f"({'past' if batch.Hk * slots_pad * width > 2 ** 31 else 'below'} 2^31)")
    # which slot holds which request's key at which position; the query tokens' request and position
    slot_req = torch.full((slots_pad,), -1, dtype=torch.int32)
    slot_pos = torch.zeros(slots_pad, dtype=torch.int32)
    q_req = torch.full((tokens_pad,), -2, dtype=torch.int32)
    q_pos = torch.zeros(tokens_pad, dtype=torch.int32)
    for row in batch.rows:
        s = torch.tensor(row.slots, dtype=torch.int64)
        slot_req[s] = row.request
        slot_pos[s] = torch.tensor(row.positions, dtype=torch.int32)
        for qd in row.queries:
            q_req[qd["token"]], q_pos[qd["token"]] = row.request, qd["position"]
    slot_req, slot_pos, q_req, q_pos = (x.to(dev) for x in (slot_req, slot_pos, q_req, q_pos))

    def values(li):
        """Q [T, H, width], and K/V on the device with the rows' slots from the seed (host copies of those rows)."""
        rng = np.random.default_rng([batch.seed, li])
        live = np.array(sorted(batch.owner), np.int64)
        q = np.zeros((batch.T, batch.H, width), np.float32)
        q[..., :batch.D] = rng.standard_normal((batch.T, batch.H, batch.D))
        rows_k = np.zeros((len(live), batch.Hk, width), np.float32)
        rows_v = np.zeros((len(live), batch.Hk, width), np.float32)
        rows_k[..., :batch.D] = rng.standard_normal((len(live), batch.Hk, batch.D))
        rows_v[..., :batch.Dv] = rng.standard_normal((len(live), batch.Hk, batch.Dv))
        return rounded(q, batch.dtype), live, rounded(rows_k, batch.dtype), rounded(rows_v, batch.dtype)

    wrong = total = 0
    for li, layer in enumerate(batch.layers):
        kind, wl = layer["kind"], layer["window"] if layer["kind"] == "sliding_window" else -1
        chunk = layer["chunk"] if kind == "chunked" else 0

        def mask_mod(b, h, qi, ki):
            keep = (slot_req[ki] == q_req[qi]) & (slot_pos[ki] <= q_pos[qi])
            if wl >= 0:
                keep = keep & (slot_pos[ki] >= q_pos[qi] - wl)
            if chunk:
                keep = keep & (slot_pos[ki] // chunk == q_pos[qi] // chunk)
            return keep

        def score_mod(score, b, h, qi, ki):
            return batch.softcap * torch.tanh(score / batch.softcap)

        q, live, rows_k, rows_v = values(li)
        # The pool as engines keep it, [slots, kv heads, width], handed to flex as the [1, kv heads,
        # slots, width] view of it (no copy): one slot's K is kv heads x width elements past the last.
        pool_k = torch.zeros((slots_pad, batch.Hk, width), dtype=tdt, device=dev)
        pool_v = torch.zeros_like(pool_k)
        idx = torch.tensor(live, device=dev)
        pool_k[idx] = torch.tensor(rows_k, device=dev, dtype=tdt)
        pool_v[idx] = torch.tensor(rows_v, device=dev, dtype=tdt)
        k, v = pool_k.transpose(0, 1).unsqueeze(0), pool_v.transpose(0, 1).unsqueeze(0)
        qq = torch.zeros((1, batch.H, tokens_pad, width), dtype=tdt, device=dev)
        qq[0, :, :batch.T] = torch.tensor(q, device=dev, dtype=tdt).transpose(0, 1)
        bm = kernel_call(create_block_mask, mask_mod, 1, None, tokens_pad, slots_pad, device=dev)
        out = kernel_call(torch.compile(flex_attention), qq, k, v, block_mask=bm, scale=batch.sm_scale,
                          score_mod=score_mod if batch.softcap > 0 else None, enable_gqa=batch.H != batch.Hk)
        kernel_call(torch.cuda.synchronize)
        got = out[0, :, :batch.T].transpose(0, 1).float().cpu().numpy()
        del k, v, pool_k, pool_v, out
        torch.cuda.empty_cache()
        print(f"layer {li} ({kind}{', W = %d' % wl if wl >= 0 else ''}):")
        pos_of = {s: i for i, s in enumerate(live)}
        for row, qd in batch.queries():
            slots = [row.slots[c] for c in batch.visible(li, row, qd)]
            t = qd["token"]
            # the expectation over the visible keys' rows (host copies; the pool is only on the device)
            sel = np.array([pos_of[s] for s in slots], np.int64)
            ref = batch.expected(q, rows_k[sel], rows_v[sel], t, list(range(len(sel))))
            err = float(np.nanmax(np.abs(got[t].astype(np.float64) - ref))) if np.isfinite(got[t]).all() else float("inf")
            bad = not err <= 0.05 + 0.02 * float(np.abs(ref).max(initial=0))
            total += 1
            wrong += bad
            print(f"  request {row.request}, query at position {qd['position']} (token {t}): should read "
                  f"{keys_text(batch, row, slots)} (slots {min(slots, default=0)}..{max(slots, default=0)}); max |actual - expected| "
                  f"{err:.3g}{'   <-- WRONG' if bad else ''}")
    return verdict(wrong, f"flex_attention over {slots_pad:,} slots: {wrong} of {total} queries wrong")

