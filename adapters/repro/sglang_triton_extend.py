# ---- target: sglang's Triton extend kernel (adapters/repro/sglang_triton_extend.py of kvfuzz) ----
# Calls extend_attention_fwd of one sglang release the way TritonAttnBackend.forward_extend does:
# q, the step's new K/V (the pool rows at the new tokens' slots), the K/V pools, qo_indptr, the
# prefix CSR (kv_indptr, kv_indices: the cached tokens' slots), the tree-verify custom mask and
# mask_indptr, sliding_window_size = W and window_kv_offsets on sliding-window layers. The
# metadata below is what the finding's planner built (BUNDLE["plan"]); the kernel takes no positions.
# Only the kernel files of the release are loaded (sglang's package __init__ imports the server):
#   python3 repro.py --site DIR      # DIR holds sglang/ (an unpacked sglang wheel); default: the
#                                    # installed sglang, or $SGLANG_SITE
# Without a CUDA device the kernel runs in Triton's interpreter on the CPU (TRITON_INTERPRET=1), in
# fp16 where the case is bf16 (the interpreter's tl.dot has no bf16: triton#11584).
import importlib
import importlib.util
import inspect
import types

KERNEL_PACKAGES = ("sglang.kernels.ops.attention", "sglang.srt.layers.attention.triton_ops")


def sglang_site(arg):
    if arg or os.environ.get("SGLANG_SITE"):
        return arg or os.environ["SGLANG_SITE"]
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        cannot_run("no sglang: pass --site DIR (a folder holding an unpacked sglang wheel's sglang/)")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def load_extend(site, torch, cuda):
    """extend_attention_fwd of the release at site, under empty parent packages."""
    package = next((p for p in KERNEL_PACKAGES
                    if os.path.isfile(os.path.join(site, *p.split("."), "extend_attention.py"))), None)
    if package is None:
        cannot_run(f"no sglang Triton kernels under {site}")
    parts = package.split(".")
    for name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)} | {"sglang.srt"}:
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = [os.path.join(site, *name.split("."))]
    utils = types.ModuleType("sglang.srt.utils")  # the few helpers the kernel files import
    utils.is_hip = lambda: False
    utils.is_cuda = lambda: cuda
    utils.is_gfx95_supported = utils.is_gfx1250_supported = lambda: False
    utils.get_device_core_count = \
        lambda device_id=0: torch.cuda.get_device_properties(device_id).multi_processor_count if cuda else 0
    sys.modules["sglang.srt.utils"] = utils
    release = next((n[len("sglang-"):-len(".dist-info")] for n in os.listdir(site)
                    if n.startswith("sglang-") and n.endswith(".dist-info")), os.path.basename(site.rstrip("/")))
    return importlib.import_module(f"{package}.extend_attention").extend_attention_fwd, release


def main():
    ap = argparse.ArgumentParser(description="sglang Triton extend_attention_fwd reproducer")
    ap.add_argument("--site", default="", help="a folder holding sglang/ (an unpacked sglang wheel)")
    ap.add_argument("--dtype", default="", help="run in this dtype instead of the case's (fp16, bf16)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        cannot_run("no torch")
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
    except ImportError:
        cannot_run("no triton")
    extend_attention_fwd, release = load_extend(sglang_site(args.site), torch, cuda)
    STATS["release"] = release
    dev = torch.device("cuda" if cuda else "cpu")
    batch = Batch(BUNDLE)
    dtype = args.dtype or ("fp16" if batch.dtype == "bf16" and not cuda else batch.dtype)
    batch.dtype = dtype
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    meta, arrays = batch.plan["meta"], batch.plan["arrays"]
    if meta["kernel"] != "extend":
        cannot_run(f"the plan runs the {meta['kernel']} kernel; this template calls the extend kernel")
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
        kernel_call(extend_attention_fwd, qq, k_new, v_new, o, kk, vv, t(qo_indptr), t(arrays[pre + "kv_indptr"], torch.int32),
                             t(arrays[pre + "kv_indices"], torch.int64), mask, True, mask_indptr, max(q_lens),
                             1.0, 1.0, batch.sm_scale, logit_cap=float(batch.softcap), sliding_window_size=window,
                             sinks=None, window_kv_offsets=t(offsets, torch.int32) if window >= 0 else None,
                             xai_temperature_len=-1, **{n: x for n, x in later.items() if n in params})
        if cuda:
            kernel_call(torch.cuda.synchronize)
        return o.float().cpu().numpy()

    wrong, total = check(run, batch, qw, vw)
    return verdict(wrong, f"sglang {release} extend_attention_fwd: {wrong} of {total} queries wrong")

