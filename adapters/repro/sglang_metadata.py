# ---- target: sglang's own attention backend, its metadata code and its real kernels
# (adapters/repro/sglang_metadata.py of kvfuzz) ----
# The release's TritonAttnBackend or FlashInferAttnBackend (the finding's planner says which) is
# built on a stand-in model runner (kvfuzz's adapters/sglang: fake_runner.py, the smallest runner,
# pools and ForwardBatch sglang's backends accept; the release's own modules are imported with its
# server's heavy imports stubbed), handed the batch below exactly as sglang's scheduler would
# (req_to_token, seq_lens, prefix and extend lengths, positions, out_cache_loc, the verify tree
# mask: BUNDLE["engine_request"]), initialises its metadata (eagerly, or by CUDA-graph capture then
# replay) and runs each layer's forward with its REAL kernels on values from the seed: the
# production pair. Triton: its decode / extend kernels; draft decode builds
# TritonMultiStepDraftBackend, its metadata for every step as the EAGLE worker does, and runs the
# case's step. FlashInfer: the installed FlashInfer package's wrappers (real, not stubbed; a CUDA
# device needed), --deterministic serving as --enable-deterministic-inference does. Each query
# against the float64 expectation from logical positions, with the probe of the keys it read.
# Needs the sglang release (--site DIR, an unpacked wheel), torch, triton, numpy, for FlashInfer
# flashinfer, and kvfuzz's adapters/sglang folder (--adapters DIR, default the checkout this file
# is in; its Python files only, no kvfuzz build). Without a CUDA device Triton's kernels run in
# Triton's interpreter, in fp16.
#   python3 repro.py --site .sglang/0.5.23 --adapters adapters/sglang [--fix N] [--deterministic]
# --fix N applies upstream fix N as kvfuzz's adapters/sglang/fixes.py re-expresses it.
import importlib


def engine_backend():
    """'triton' or 'flashinfer': the backend of the finding's planner (sglang_<backend>_<release>)."""
    return "flashinfer" if BUNDLE["planner"].startswith("sglang_flashinfer_") else "triton"


def real_flashinfer(folder):
    """adapters/sglang stubs FlashInfer (its planner records the calls); here sglang imports the real
    package, which must be installed (with a CUDA device: its wrappers compile their kernels)."""
    sys.path[:0] = [os.path.abspath(folder), os.path.join(os.path.abspath(folder), "..")]  # and its `engine`
    sglang_import = importlib.import_module("sglang_import")
    sglang_import.STUBBED = tuple(p for p in sglang_import.STUBBED if p != "flashinfer")
    sglang_import.REAL = sglang_import.REAL + ("flashinfer",)
    try:
        return importlib.import_module("flashinfer").__version__
    except Exception as e:  # noqa: BLE001 - any import failure: the package cannot run here
        cannot_run(f"FlashInfer does not import here ({type(e).__name__}: {e})")


def load_sglang(args, device):
    """kvfuzz's adapters/sglang with the release at --site: (its Sglang, fake_runner.Setup)."""
    # default: the kvfuzz checkout this script is committed in (corpus/sglang/repro/)
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "adapters", "sglang")
    folder = args.adapters or os.environ.get("KVFUZZ_SGLANG_ADAPTERS", "") or beside
    if not folder or not os.path.isfile(os.path.join(folder, "fake_runner.py")):
        cannot_run("pass --adapters DIR: kvfuzz's adapters/sglang folder (fake_runner.py, sglang_import.py)")
    if not os.path.isdir(os.path.join(args.site, "sglang")):
        cannot_run(f"--site {args.site}: no sglang/ folder there (an unpacked sglang wheel)")
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)  # quantization modules warn off CUDA at import
    sys.path.insert(0, os.path.abspath(folder))
    if engine_backend() == "flashinfer":
        STATS["flashinfer"] = real_flashinfer(folder)
    argv = sys.argv
    sys.argv = [argv[0], "--site", args.site, "--backend", engine_backend(), "--device", device]
    for n in args.fix:
        sys.argv += ["--fix", n]
    if args.deterministic:
        sys.argv += ["--deterministic"]
    try:
        planner = importlib.import_module("sglang_planner")  # parses the argv above, imports the release
    finally:
        sys.argv = argv
    return planner.SG, importlib.import_module("fake_runner")


class EngineCase:
    """The planner request of BUNDLE["engine_request"], as fake_runner.Setup reads it, its head dims
    widened to `width` (tl.dot needs 16, FlashInfer's kernels 64; zeros change neither q.k nor the
    kept V channels)."""

    def __init__(self, request, width):
        self.info = json.loads(json.dumps(request["case"]))
        self.model = self.info["model"]
        if width:
            self.model["head_dim"] = self.model["v_head_dim"] = width
        self.layers, self.batch = self.model["layers"], self.info["batch"]
        self.page_size, self.num_tokens, self.dtype = self.info["page_size"], self.info["num_tokens"], self.info["dtype"]
        self._arrays = request["arrays"]

    def array(self, name):
        a = self._arrays[name]
        dtype = np.int64 if name in ("full_to_swa", "out_cache_loc") else np.uint8 if name == "custom_mask" else np.int32
        return np.asarray(a["data"], dtype).reshape(a["shape"])


def build_triton(sg, setup, case):
    """TritonAttnBackend with its metadata, or for draft decode the multi-step draft backend's step:
    (backend, name)."""
    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    if BUNDLE["mode"] == "draft_decode":  # the EAGLE worker's multi-step backend, every step's metadata at once
        if setup.draft_step >= setup.num_steps - 1:
            cannot_run("the last draft step runs no attention backend (TritonMultiStepDraftBackend)")
        multi = tb.TritonMultiStepDraftBackend(setup.runner, setup.topk, setup.num_steps)
        for b in multi.attn_backends:
            b.device_core_count = int(case.batch["device_sms"])
        kernel_call(importlib.import_module("triton_token_csr").init_draft, multi, setup)
        return multi.attn_backends[setup.draft_step], f"TritonMultiStepDraftBackend (draft step {setup.draft_step})"
    backend = tb.TritonAttnBackend(setup.runner)
    backend.device_core_count = int(case.batch["device_sms"])
    kernel_call(sg.init_metadata, backend, setup)
    return backend, "TritonAttnBackend"


def build_flashinfer(sg, setup, case):
    """FlashInferAttnBackend with its metadata, its wrappers FlashInfer's own: (backend, name)."""
    if BUNDLE["mode"] == "draft_decode":
        cannot_run("draft decode runs FlashInferMultiStepDraftBackend; this template builds FlashInferAttnBackend")
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    if not fi.BatchPrefillWithRaggedKVCacheWrapper.__module__.startswith("flashinfer"):
        cannot_run(f"sglang imported {fi.BatchPrefillWithRaggedKVCacheWrapper.__module__}'s wrappers, not FlashInfer's")
    backend = fi.FlashInferAttnBackend(setup.runner)
    name = f"FlashInferAttnBackend{' (deterministic)' if setup.deterministic else ''} with FlashInfer {STATS['flashinfer']}"
    # The ragged wrapper's "auto" picks FlashInfer's sm90 kernels on Hopper, whose JIT build needs the
    # CUTLASS headers a slimmed wheel leaves out: only then, the one kernel this machine can load.
    # The wrapper is planned and run by sglang's code exactly as before; only the kernel differs.
    if not flashinfer_builds_sm90(fi) and getattr(backend, "prefill_wrapper_ragged", None) is not None:
        ragged = fi.BatchPrefillWithRaggedKVCacheWrapper(backend.workspace_buffer, "NHD", backend="fa2")
        backend.prefill_wrapper_ragged = ragged  # forward's, and the prefill updater's copy that plans it
        if getattr(backend, "indices_updater_prefill", None) is not None:
            backend.indices_updater_prefill.prefill_wrapper_ragged = ragged
        name += " (ragged wrapper on fa2: this FlashInfer has no CUTLASS headers for its sm90 kernels)"
    kernel_call(sg.init_metadata, backend, setup)
    return backend, name


def flashinfer_builds_sm90(fi):
    """Whether FlashInfer's sm90 (Hopper) kernels can be built here: not a Hopper card (they are
    not picked), or the wheel carries CUTLASS's cute headers."""
    import torch
    if torch.cuda.get_device_capability() != (9, 0):
        return True
    flashinfer = importlib.import_module("flashinfer")
    return os.path.isfile(os.path.join(os.path.dirname(flashinfer.__file__), "data", "cutlass", "include", "cute",
                                       "tensor.hpp"))


def widths(batch):
    """(the width the model is widened to or 0, Q/K width, V width) the kernels run at, zero-padded:
    tl.dot needs 16; FlashInfer's kernels one width for both, 64, 128 or 256."""
    if engine_backend() == "flashinfer":
        w = next((w for w in (64, 128, 256) if w >= max(batch.D, batch.Dv)), max(batch.D, batch.Dv))
        return w, w, w
    if min(batch.D, batch.Dv) < 16:
        w = max(16, batch.D, batch.Dv)
        return w, w, w
    return 0, batch.D, batch.Dv


def main():
    ap = argparse.ArgumentParser(description="sglang's own attention backend with its real kernels")
    ap.add_argument("--site", default=os.environ.get("SGLANG_SITE", ""), help="an unpacked sglang wheel's folder")
    ap.add_argument("--adapters", default="", help="kvfuzz's adapters/sglang folder")
    ap.add_argument("--fix", action="append", default=[], help="apply upstream fix N (adapters/sglang/fixes.py)")
    ap.add_argument("--deterministic", action="store_true", default=BUNDLE["planner"].endswith("_det"),
                    help="serve as --enable-deterministic-inference does (default: as the finding's planner did)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        cannot_run("no torch")
    cuda = torch.cuda.is_available()
    if engine_backend() == "flashinfer" and not cuda:
        cannot_run("FlashInfer's wrappers need a CUDA device")
    sg, fake_runner = load_sglang(args, "cuda" if cuda else "cpu")
    batch = Batch(BUNDLE)
    width, qw, vw = widths(batch)
    case = EngineCase(BUNDLE["engine_request"], width)
    dev = torch.device("cuda" if cuda else "cpu")
    setup = fake_runner.Setup(sg, case, dev, deterministic=args.deterministic, attention_backend=engine_backend())
    dtype = torch.bfloat16 if cuda and batch.dtype == "bf16" else torch.float16
    batch.dtype = "bf16" if dtype == torch.bfloat16 else "fp16"
    for pool in (setup.full, setup.swa):  # the stand-in pools in the dtype the kernels run in
        if pool is not None:
            pool.k, pool.v = [x.to(dtype) for x in pool.k], [x.to(dtype) for x in pool.v]
    setup.dtype = setup.runner.dtype = setup.runner.kv_cache_dtype = dtype
    build = build_flashinfer if engine_backend() == "flashinfer" else build_triton
    backend, name = build(sg, setup, case)
    fb = setup.layer_batch()
    loc = torch.from_numpy(np.asarray(BUNDLE["out_cache_loc"], np.int64)).to(dev)
    f2s = np.asarray(BUNDLE["full_to_swa"][:batch.slots], np.int64)
    full_ids = [i for i, x in enumerate(case.layers) if x["pool"] == "full"]
    swa_ids = [i for i, x in enumerate(case.layers) if x["pool"] == "swa"]
    fixes = "".join(f" with fix {n}" for n in args.fix)
    STATS.update(release=sg.version, fixes=args.fix)
    print(f"sglang {sg.version}{fixes} {name} (its metadata code and kernels) on "
          f"{torch.cuda.get_device_name() if cuda else 'the CPU (Triton interpreter)'}, {batch.dtype}, mode "
          f"{BUNDLE['mode']}{', CUDA graph' if setup.graph else ''}")

    def run(li, q, k, v):
        kt, vt = torch.from_numpy(k).to(dev, dtype), torch.from_numpy(v).to(dev, dtype)
        if case.layers[li]["pool"] == "swa":  # swa slot full_to_swa[s] holds what full slot s holds
            live = torch.from_numpy(np.nonzero(f2s > 0)[0]).to(dev)
            i = swa_ids.index(li)
            setup.swa.k[i].zero_(), setup.swa.v[i].zero_()
            setup.swa.k[i][torch.from_numpy(f2s).to(dev)[live]] = kt[live]
            setup.swa.v[i][torch.from_numpy(f2s).to(dev)[live]] = vt[live]
        else:
            i = full_ids.index(li) if setup.swa is not None else li
            setup.full.k[i].copy_(kt)
            setup.full.v[i].copy_(vt)
        qt = torch.from_numpy(q).to(dev, dtype).reshape(batch.T, batch.H * qw)
        o = kernel_call(backend.forward, qt, kt[loc], vt[loc], setup.layers[li], fb, save_kv_cache=False)
        if cuda:
            kernel_call(torch.cuda.synchronize)
        return o.float().reshape(batch.T, batch.H, vw).cpu().numpy()

    wrong, total = check(run, batch, qw, vw)
    return verdict(wrong, f"sglang {sg.version}{fixes} {name}: {wrong} of {total} queries wrong")


if __name__ == "__main__":
    run_main(main)
