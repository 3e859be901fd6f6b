# ---- target: sglang's TritonAttnBackend, its own metadata code and its real kernels
# (adapters/repro/sglang_triton_metadata.py of kvfuzz) ----
# The release's TritonAttnBackend is built on a stand-in model runner (kvfuzz's adapters/sglang:
# fake_runner.py, the smallest runner, pools and ForwardBatch sglang's backends accept; the
# release's own modules are imported with its server's heavy imports stubbed), handed the batch
# below exactly as sglang's scheduler would (req_to_token, seq_lens, prefix and extend lengths,
# positions, out_cache_loc, the verify tree mask: BUNDLE["engine_request"]), initialises its
# metadata (eagerly, or by CUDA-graph capture then replay) and runs each layer's forward with its
# REAL decode / extend kernels on values from the seed: the production pair. Draft decode builds
# TritonMultiStepDraftBackend instead, its metadata for every step as the EAGLE worker does, and
# runs the case's step's backend. Each query against the float64 expectation from logical
# positions, with the probe of the keys it read.
# Needs the sglang release (--site DIR, an unpacked wheel), torch, triton, numpy and kvfuzz's
# adapters/sglang folder (--adapters DIR, default the checkout this file is in; its Python files
# only, no kvfuzz build). Without a CUDA
# device the kernels run in Triton's interpreter, in fp16.
#   python3 repro.py --site .sglang/0.5.23 --adapters adapters/sglang [--fix N]
# --fix N applies upstream fix N as kvfuzz's adapters/sglang/fixes.py re-expresses it.
import importlib


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
    argv = sys.argv
    sys.argv = [argv[0], "--site", args.site, "--backend", "triton", "--device", device]
    for n in args.fix:
        sys.argv += ["--fix", n]
    try:
        planner = importlib.import_module("sglang_planner")  # parses the argv above, imports the release
    finally:
        sys.argv = argv
    return planner.SG, importlib.import_module("fake_runner")


class EngineCase:
    """The planner request of BUNDLE["engine_request"], as fake_runner.Setup reads it, its head dims
    widened to `width` (tl.dot needs 16; zeros change neither q.k nor the kept V channels)."""

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


def main():
    ap = argparse.ArgumentParser(description="sglang TritonAttnBackend with its own kernels")
    ap.add_argument("--site", default=os.environ.get("SGLANG_SITE", ""), help="an unpacked sglang wheel's folder")
    ap.add_argument("--adapters", default="", help="kvfuzz's adapters/sglang folder")
    ap.add_argument("--fix", action="append", default=[], help="apply upstream fix N (adapters/sglang/fixes.py)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        cannot_run("no torch")
    cuda = torch.cuda.is_available()
    sg, fake_runner = load_sglang(args, "cuda" if cuda else "cpu")
    batch = Batch(BUNDLE)
    width = max(16, batch.D, batch.Dv) if min(batch.D, batch.Dv) < 16 else 0
    qw, vw = (width, width) if width else (batch.D, batch.Dv)
    case = EngineCase(BUNDLE["engine_request"], width)
    dev = torch.device("cuda" if cuda else "cpu")
    setup = fake_runner.Setup(sg, case, dev, attention_backend="triton")
    dtype = torch.bfloat16 if cuda and batch.dtype == "bf16" else torch.float16
    batch.dtype = "bf16" if dtype == torch.bfloat16 else "fp16"
    for pool in (setup.full, setup.swa):  # the stand-in pools in the dtype the kernels run in
        if pool is not None:
            pool.k, pool.v = [x.to(dtype) for x in pool.k], [x.to(dtype) for x in pool.v]
    setup.dtype = setup.runner.dtype = setup.runner.kv_cache_dtype = dtype
    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    if BUNDLE["mode"] == "draft_decode":  # the EAGLE worker's multi-step backend, every step's metadata at once
        if setup.draft_step >= setup.num_steps - 1:
            cannot_run("the last draft step runs no attention backend (TritonMultiStepDraftBackend)")
        multi = tb.TritonMultiStepDraftBackend(setup.runner, setup.topk, setup.num_steps)
        for b in multi.attn_backends:
            b.device_core_count = int(case.batch["device_sms"])
        kernel_call(importlib.import_module("triton_token_csr").init_draft, multi, setup)
        backend = multi.attn_backends[setup.draft_step]
        name = f"TritonMultiStepDraftBackend (draft step {setup.draft_step})"
    else:
        name = "TritonAttnBackend"
        backend = tb.TritonAttnBackend(setup.runner)
        backend.device_core_count = int(case.batch["device_sms"])
        kernel_call(sg.init_metadata, backend, setup)
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
