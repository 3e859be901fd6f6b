# ---- target: FlashInfer's masked paged prefill (adapters/repro/flashinfer_paged_mask.py of kvfuzz) ----
# BatchPrefillWithPagedKVCacheWrapper.plan(..., custom_mask=...) derives where each row's mask
# starts from the rows' lengths (flashinfer/prefill.py, _compute_page_mask_indptr). The batch's
# masked paged call(s), as the finding's planner built them (BUNDLE["plan"]: qo_indptr, kv_indptr,
# kv_indices, kv_last_page_len, page size, the flattened custom mask, row-major q_len x k_len per
# row, rows in order), are checked twice:
#  1. on any machine: FlashInfer's own _compute_page_mask_indptr on the call's indptrs against the
#     offsets the mask's layout needs (the running sum of q_len x k_len, k_len = 0 for a row of no
#     pages). Only the function's source is needed: without a CUDA build of FlashInfer it is read
#     from the installed package's prefill.py;
#  2. with a CUDA device: the wrapper's plan and run on values from the seed (backend fa2, as
#     sglang sets it), each query against the float64 expectation over the keys its row's pages
#     hold and its mask allows, and a probe of the keys it read.
#   python3 repro.py [--apply-fix]     # --apply-fix: the fix proposed upstream, kv_len =
#                                      # where(num_pages > 0, (num_pages - 1) * page_size + last, 0)
import ast
import importlib.util


def fixed_compute_page_mask_indptr(qo_indptr, paged_kv_indptr, paged_kv_last_page_len, page_size):
    """_compute_page_mask_indptr with rows of no pages taken as no keys (the proposed fix)."""
    import torch
    if len(qo_indptr) != len(paged_kv_indptr):
        raise ValueError("The length of qo_indptr and paged_kv_indptr should be the same.")
    num_pages = paged_kv_indptr[1:] - paged_kv_indptr[:-1]
    kv_len = torch.where(num_pages > 0, (num_pages - 1) * page_size + paged_kv_last_page_len,
                         torch.zeros_like(num_pages))
    mask_indptr = torch.empty_like(qo_indptr)
    mask_indptr[0] = 0
    mask_indptr[1:] = torch.cumsum((qo_indptr[1:] - qo_indptr[:-1]) * kv_len, 0)
    return mask_indptr


def flashinfer_mask_indptr():
    """FlashInfer's _compute_page_mask_indptr and where it came from: the imported package, or (a
    machine without FlashInfer's CUDA dependencies) the function's source in its prefill.py."""
    try:
        from flashinfer import prefill
        return prefill._compute_page_mask_indptr, "flashinfer.prefill, imported"
    except Exception as e:  # noqa: BLE001 (ImportError, or a missing CUDA library under it)
        reason = f"{type(e).__name__}: {e}"
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        cannot_run("no flashinfer package (pip install flashinfer-python, or put its files on PYTHONPATH)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "prefill.py")
    tree = ast.parse(open(path).read(), path)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_compute_page_mask_indptr"), None)
    if fn is None:
        cannot_run(f"{path} has no _compute_page_mask_indptr")
    import torch
    scope = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return scope["_compute_page_mask_indptr"], (f"flashinfer/prefill.py line {fn.lineno}, its source (import flashinfer "
                                                 f"failed here: {reason.split(':')[0]})")


def flashinfer_version():
    try:
        from importlib.metadata import version
        return version("flashinfer-python")
    except Exception:  # noqa: BLE001
        spec = importlib.util.find_spec("flashinfer")
        folder = os.path.dirname(list(spec.submodule_search_locations)[0]) if spec else ""
        names = [n for n in (os.listdir(folder) if folder else []) if n.startswith("flashinfer_python-")]
        return names[0][len("flashinfer_python-"):-len(".dist-info")] if names else "?"


def masked_calls(batch):
    """(layer, call, array prefix) of every masked paged prefill call, the first one per layer."""
    meta = batch.plan["meta"]
    out = []
    for li in range(len(batch.layers)):
        g = meta["group_of_layer"][li]
        for c, call in enumerate(meta["groups"][g]["calls"]):
            if call["has_mask"] and call["role"] not in ("ragged", "decode", "draft"):
                out.append((li, call, f"groups.{g}.calls.{c}."))
                break
    return out


def row_keys(arrays, pre, ps):
    """Per row of the call: its key slots ((pages - 1) * ps + last_page_len keys; none without pages)."""
    ip, idx, last = arrays[pre + "kv_indptr"], arrays[pre + "kv_indices"], arrays[pre + "kv_last_page_len"]
    out = []
    for r in range(len(ip) - 1):
        n = ip[r + 1] - ip[r]
        k_len = (n - 1) * ps + last[r] if n > 0 else 0
        out.append([idx[ip[r] + k // ps] * ps + k % ps for k in range(k_len)])
    return out


def check_offsets(batch, fn, torch):
    """FlashInfer's mask offsets of each masked call vs the ones its mask's layout needs; the
    number of calls whose rows start at another offset."""
    arrays, bad = batch.plan["arrays"], 0
    for li, call, pre in masked_calls(batch):
        qo = arrays[pre + "qo_indptr"][:call["rows"] + 1]
        kv = arrays[pre + "kv_indptr"][:call["rows"] + 1]
        last = arrays[pre + "kv_last_page_len"][:call["rows"]]
        keys = row_keys(arrays, pre, call["page_size"])
        need = np.concatenate([[0], np.cumsum([(qo[r + 1] - qo[r]) * len(keys[r]) for r in range(call["rows"])])])
        got = kernel_call(fn, torch.tensor(qo, dtype=torch.int32), torch.tensor(kv, dtype=torch.int32),
                 torch.tensor(last, dtype=torch.int32), call["page_size"]).tolist()
        print(f"layer {li}, masked paged call: page size {call['page_size']}, qo_indptr {list(qo)}, "
              f"kv_indptr {list(kv)}, kv_last_page_len {list(last)}")
        print(f"  keys per row {[len(k) for k in keys]}; mask offsets the layout needs {need.tolist()}; "
              f"the function's {got}{'' if got == need.tolist() else '   <-- WRONG'}")
        bad += got != need.tolist()
    return bad


def run_wrapper(batch, torch, fn_label):
    """Each masked call through BatchPrefillWithPagedKVCacheWrapper on the GPU: (wrong, checked) queries."""
    from flashinfer import BatchPrefillWithPagedKVCacheWrapper
    arrays, wrong, total = batch.plan["arrays"], 0, 0
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[batch.dtype]
    width = next(w for w in (64, 128, 256) if w >= max(batch.D, batch.Dv))  # FlashInfer's head dims
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    for li, call, pre in masked_calls(batch):
        ps, rows = call["page_size"], call["rows"]
        keys = row_keys(arrays, pre, ps)
        qo = arrays[pre + "qo_indptr"][:rows + 1]
        row_of = {t: r for r in range(rows) for t in range(qo[r], qo[r + 1])}

        def t(a, d=torch.int32):
            return torch.tensor(np.asarray(a), dtype=d, device="cuda")

        def run(layer, q, k, v, call=call, pre=pre, qo=qo):
            w = BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="fa2")
            n = batch.slots + (-batch.slots % call["page_size"])
            kp = torch.zeros((n,) + k.shape[1:], dtype=dt, device="cuda")
            vp = torch.zeros((n,) + v.shape[1:], dtype=dt, device="cuda")
            kp[:batch.slots], vp[:batch.slots] = t(k, dt), t(v, dt)
            kernel_call(w.plan, t(qo), t(arrays[pre + "kv_indptr"][:rows + 1]), t(arrays[pre + "kv_indices"]),
                   t(arrays[pre + "kv_last_page_len"][:rows]), batch.H, batch.Hk, width, call["page_size"],
                   head_dim_vo=width, custom_mask=t(arrays[pre + "custom_mask"], torch.bool),
                   causal=bool(call["causal"]), window_left=int(call["window_left"]),
                   logits_soft_cap=float(batch.softcap), sm_scale=float(batch.sm_scale), q_data_type=dt,
                   kv_data_type=dt)
            o = kernel_call(w.run, t(q, dt), (kp.view(-1, call["page_size"], *k.shape[1:]),
                                 vp.view(-1, call["page_size"], *v.shape[1:])))
            kernel_call(torch.cuda.synchronize)
            out = np.zeros((batch.T, batch.H, v.shape[-1]), np.float32)
            live = int(qo[-1])
            out[:live] = o[:live].float().cpu().numpy()
            return out

        def covered(layer, row, qd, cols, keys=keys, row_of=row_of):
            r = row_of.get(qd["token"])
            held = set(keys[r]) if r is not None else set()
            return [c for c in cols if row.slots[c] in held]

        print(f"layer {li}: BatchPrefillWithPagedKVCacheWrapper (fa2) on {torch.cuda.get_device_name()}, "
              f"mask offsets from {fn_label}; each query against the keys its row's pages hold and its window allows")
        w, n = check(run, batch, width, width, covered=covered, layers=[li])
        wrong, total = wrong + w, total + n
    return wrong, total


def main():
    ap = argparse.ArgumentParser(description="FlashInfer masked paged prefill reproducer")
    ap.add_argument("--apply-fix", action="store_true", help="patch in the proposed fix of _compute_page_mask_indptr")
    ap.add_argument("--cpu", action="store_true", help="only the mask offsets, even with a CUDA device")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        cannot_run("no torch")
    batch = Batch(BUNDLE)
    if not masked_calls(batch):
        cannot_run("the plan has no masked paged prefill call")
    fn, where = flashinfer_mask_indptr()
    label = f"FlashInfer {flashinfer_version()}'s _compute_page_mask_indptr"
    STATS.update(release=f"flashinfer {flashinfer_version()}", fixes=["proposed"] if args.apply_fix else [])
    if args.apply_fix:
        fn, where = fixed_compute_page_mask_indptr, "the proposed fix (this script)"
        label += " with the proposed fix"
        if "flashinfer.prefill" in sys.modules:
            sys.modules["flashinfer.prefill"]._compute_page_mask_indptr = fn
    print(f"{label}: {where}")
    bad = check_offsets(batch, fn, torch)
    if not torch.cuda.is_available() or args.cpu:
        print("(no CUDA device: the wrapper itself is not run)" if not args.cpu else "(--cpu: the wrapper is not run)")
        return verdict(bad, f"{label}: {bad} of {len(masked_calls(batch))} masked calls with wrong row offsets")
    wrong, total = run_wrapper(batch, torch, label)
    return verdict(bad + wrong, f"{label}: {bad} of {len(masked_calls(batch))} masked calls with wrong row "
                                f"offsets; on the GPU {wrong} of {total} queries wrong")

