# ---- target: sglang's own attention backend, its metadata code and its kernels
# (adapters/repro/sglang_metadata.py of kvfuzz) ----
# The release's TritonAttnBackend, FlashInferAttnBackend or FlashAttentionBackend (the finding's
# planner says which) is built on a stand-in model runner (the smallest runner, pools and
# ForwardBatch sglang's backends accept: fake_runner below; the release's own modules are imported
# with its server's heavy imports stubbed: stub_import, sglang_import), handed the batch below
# exactly as sglang's scheduler would (req_to_token, seq_lens, prefix and extend lengths, positions,
# out_cache_loc, the verify tree mask: BUNDLE["engine_request"]), initialises its metadata
# (eagerly, or by CUDA-graph capture then replay: sglang_release) and runs each layer's forward on
# values from the seed. Triton: its REAL decode / extend kernels; draft decode builds
# TritonMultiStepDraftBackend, its metadata for every step as the EAGLE worker does, and runs the
# case's step. FlashInfer: the installed FlashInfer package's REAL wrappers (a CUDA device needed),
# --deterministic serving as --enable-deterministic-inference does. FlashAttention (fa3): FA3's
# kernel library (sgl-kernel, 852 MB) is out of reach, so flash_attn_with_kvcache and merge_state_v2
# are replaced by fa3_standin below, plain torch computing what the kernel's documentation says it
# computes from the arguments sglang hands it (page_table, cache_seqlens, cu_seqlens_q,
# max_seqlen_q, causal, window_size, softcap): THE ONE PIECE NOT FROM UPSTREAM; sglang's metadata
# and forward code run unchanged. Each query against the float64 expectation from logical
# positions, with the probe of the keys it read. KVFUZZ_FA3=DIR (a CUDA device): FA3's REAL kernel
# instead, sgl-kernel 0.4.3's flash_attn_with_kvcache and get_scheduler_metadata from DIR/sgl_kernel/
# (kvfuzz's ci/gpu_fa3.py unpacks it there); merge_state_v2 stays the stand-in's.
# Needs the sglang release (--site DIR, an unpacked wheel, with its dependency msgspec importable),
# torch, triton, numpy, for FlashInfer flashinfer; nothing of kvfuzz (its few modules this needs are
# embedded below, copied verbatim by `kvfuzz repro` from their one source in kvfuzz's adapters/).
# Without a CUDA device Triton's kernels run in Triton's interpreter, in fp16.
#   python3 repro.py --site .sglang/0.5.23 [--fix N] [--deterministic]
# --fix N applies upstream fix N as the embedded fixes module re-expresses it.
import importlib
import importlib.abc
import importlib.machinery
import linecache

EMBEDDED = {}  # kvfuzz repro embeds: engine.release=engine/release.py engine.stub_import=engine/stub_import.py sglang_import=sglang/sglang_import.py fake_runner=sglang/fake_runner.py sglang_release=sglang/sglang_release.py fixes=sglang/fixes.py fa3_standin=repro/fa3_standin.py


class EmbeddedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the modules of EMBEDDED (and the packages their dotted names imply) to `import`."""

    def find_spec(self, name, path, target=None):
        if name in EMBEDDED or any(k.startswith(name + ".") for k in EMBEDDED):
            return importlib.machinery.ModuleSpec(name, self, is_package=name not in EMBEDDED)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__spec__.name
        if name not in EMBEDDED:
            module.__path__ = []
            return
        file = f"<kvfuzz repro: {name}>"  # its lines in tracebacks
        linecache.cache[file] = (len(EMBEDDED[name]), None, EMBEDDED[name].splitlines(True), file)
        module.__file__ = file
        exec(compile(EMBEDDED[name], file, "exec"), module.__dict__)


def engine_backend():
    """'triton', 'flashinfer' or 'fa': the backend of the finding's planner (sglang_<backend>_<release>)."""
    for backend in ("flashinfer", "fa"):
        if BUNDLE["planner"].startswith(f"sglang_{backend}_"):
            return backend
    return "triton"


def real_flashinfer(sglang_import):
    """sglang_import stubs FlashInfer (kvfuzz's planner records the calls); here sglang imports the
    real package, which must be installed (with a CUDA device: its wrappers compile their kernels)."""
    sglang_import.STUBBED = tuple(p for p in sglang_import.STUBBED if p != "flashinfer")
    sglang_import.REAL = sglang_import.REAL + ("flashinfer",)
    try:
        flashinfer = importlib.import_module("flashinfer")
    except Exception as e:  # noqa: BLE001 - any import failure: the package cannot run here
        cannot_run(f"FlashInfer does not import here ({type(e).__name__}: {e})")
    count_fast_decode_plan(flashinfer)
    return flashinfer.__version__


def count_fast_decode_plan(flashinfer):
    """FlashInfer's own fast_decode_plan, counted (STATS["fast_decode_plan"]): sglang binds it to its
    CUDA-graph decode wrappers after capture and calls it at each replay (0.5.23 flashinfer_backend.py
    :81, :842-846, :1831-1856), so a graph decode that ran FlashInfer's replay path says so. Replaced
    before sglang imports it by name; the function itself runs unchanged."""
    real = getattr(flashinfer, "fast_decode_plan", None)
    if real is None:
        return
    STATS["fast_decode_plan"] = 0

    def fast_decode_plan(*args, **kwargs):
        STATS["fast_decode_plan"] += 1
        return real(*args, **kwargs)

    flashinfer.fast_decode_plan = fast_decode_plan
    if hasattr(flashinfer, "decode"):
        flashinfer.decode.fast_decode_plan = fast_decode_plan


class FA3:
    """The FA3 kernel the FA backend calls: fa3_standin (the default; plain torch, embedded), or with
    KVFUZZ_FA3=DIR on a CUDA device sgl-kernel's real library, DIR/sgl_kernel/ (flash_ops.abi3.so and
    its flash_attn.py, unpacked by kvfuzz's ci/gpu_fa3.py). merge_state_v2 (the cascade's merge, in
    sgl-kernel's other library) is the stand-in's in both."""
    flash_attn_with_kvcache = get_scheduler_metadata = None

    @classmethod
    def load(cls, device):
        """Loads the kernel; returns what it is (STATS["fa3"]). Exit 2 when KVFUZZ_FA3 cannot load."""
        standin = importlib.import_module("fa3_standin")
        cls.merge_state_v2, cls.refusal = standin.merge_state_v2, standin.refusal
        where = os.environ.get("KVFUZZ_FA3", "")
        if not where:
            cls.flash_attn_with_kvcache, cls.get_scheduler_metadata = (standin.flash_attn_with_kvcache,
                                                                       standin.get_scheduler_metadata)
            return "stand-in"
        if device != "cuda":
            cannot_run(f"KVFUZZ_FA3={where}: FA3's kernel needs a CUDA device")
        if not os.path.isfile(os.path.join(where, "sgl_kernel", "flash_attn.py")):
            cannot_run(f"KVFUZZ_FA3={where}: no sgl_kernel/flash_attn.py there (python3 ci/gpu_fa3.py unpack --to DIR)")
        sys.path.insert(0, os.path.abspath(where))
        try:
            fa3 = importlib.import_module("sgl_kernel.flash_attn")
        except Exception as e:  # noqa: BLE001 - any import failure: the library cannot run here
            cannot_run(f"KVFUZZ_FA3={where}: sgl_kernel.flash_attn does not import ({type(e).__name__}: {e})")
        finally:
            sys.path.remove(os.path.abspath(where))
        for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
            del sys.modules[name]  # sglang's own `import sgl_kernel` gets the stub; these functions keep theirs
        cls.flash_attn_with_kvcache, cls.get_scheduler_metadata = fa3.flash_attn_with_kvcache, fa3.get_scheduler_metadata
        meta = os.path.join(where, "sglang_kernel-0.4.3.dist-info", "METADATA")
        version = next((line.split()[1] for line in open(meta) if line.startswith("Version:")), "?") \
            if os.path.isfile(meta) else "?"
        return f"sgl-kernel {version}"


def load_sglang(args, device):
    """The release at --site, its modules imported (sglang_release.Sglang), --fix applied: (sg, fake_runner)."""
    if not os.path.isdir(os.path.join(args.site, "sglang")):
        cannot_run(f"--site {args.site!r}: no sglang/ folder there (pass an unpacked sglang wheel)")
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)  # quantization modules warn off CUDA at import
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton loads
    os.environ.setdefault("SGLANG_DISABLE_REQUEST_LOGGING", "1")
    sys.meta_path.insert(0, EmbeddedModules())
    if engine_backend() == "fa":  # before sglang_import stubs sgl_kernel: the real FA3 loads as itself
        STATS["fa3"] = FA3.load(device)
    sglang_import = importlib.import_module("sglang_import")
    if engine_backend() == "flashinfer":
        STATS["flashinfer"] = real_flashinfer(sglang_import)
    sg = importlib.import_module("sglang_release").Sglang(args.site)
    fixes = importlib.import_module("fixes")
    for n in args.fix:
        if n not in fixes.FIXES:
            cannot_run(f"--fix {n}: not a fix this script knows ({', '.join(sorted(fixes.FIXES))})")
        fixes.apply(sg, n)
    return sg, importlib.import_module("fake_runner")


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
        kernel_call(sg.init_draft_metadata, multi, setup)
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
    ragged = getattr(backend, "prefill_wrapper_ragged", None)
    if ragged is not None and getattr(ragged, "_requested_backend", None) == "auto":
        # "auto" resolves at each plan (FlashInfer 0.7.2.post1 prefill.py:5527-5536): the kernel it ran
        ran = getattr(ragged, "_backend", "auto")
        name += " (ragged wrapper: sglang asks auto, " + (f"FlashInfer resolved it to {ran})" if ran != "auto" else
                                                           "not planned in this step)")
    return backend, name


def build_fa(sg, setup, case):
    """FlashAttentionBackend with its metadata, FA3's kernel the one FA3 loaded (fa3_standin, or the
    real library with KVFUZZ_FA3), merge_state_v2 fa3_standin's: (backend, name). The draft step's
    backend is built as FlashAttentionMultiStepBackend builds each of its steps."""
    fa = importlib.import_module("sglang.srt.layers.attention.flashattention_backend")
    if setup.graph and BUNDLE["mode"] == "draft_decode" and \
            not hasattr(fa.FlashAttentionBackend, "init_forward_metadata_capture_cuda_graph"):
        cannot_run("FA draft decode under a CUDA graph in 0.5.13 and later (per-step write slices) is not modelled")
    refused = FA3.refusal(setup.dtype, setup.q_width, setup.v_width, case.model["q_heads"], case.model["kv_heads"])
    if refused:  # a case FA3 cannot run says nothing about sglang's metadata
        cannot_run(f"FA3 does not take this case ({refused}): FA3 runs bf16 / fp16 at its head dims")

    def unexpected(*args, **kwargs):
        raise NotImplementedError("flash_attn_varlen_func was called: the FA3 stand-in models the paged kernel only "
                                  "(and the real FA3 runs the same paths)")

    backend = fa.FlashAttentionBackend(setup.runner, speculative_step_id=setup.draft_step, topk=setup.spec_topk,
                                       speculative_num_steps=setup.num_steps)
    # The backend calls the kernel as its attribute and (0.5.11 on, in some paths) as a module global.
    backend.flash_attn_with_kvcache = fa.flash_attn_with_kvcache = FA3.flash_attn_with_kvcache
    backend.flash_attn_varlen_func = fa.flash_attn_varlen_func = unexpected
    fa.merge_state_v2 = FA3.merge_state_v2
    if hasattr(fa, "merge_state_v2_wrapper"):
        fa.merge_state_v2_wrapper = FA3.merge_state_v2
    # 0.5.23: FA3's scheduler_metadata precompute, as sgl_kernel's get_scheduler_metadata makes it (the
    # stand-in's schedule: FA3's size, the num_splits it was made for, checked at each call)
    if hasattr(backend, "_get_scheduler_metadata"):
        backend._get_scheduler_metadata = FA3.get_scheduler_metadata
    kernel_call(sg.init_metadata, backend, setup)
    step = f" (draft step {setup.draft_step})" if BUNDLE["mode"] == "draft_decode" else ""
    kernel = "the FA3 stand-in kernel (fa3_standin: not from upstream)" if STATS["fa3"] == "stand-in" else \
        f"FA3's real kernel ({STATS['fa3']}; merge_state_v2 the stand-in's)"
    return backend, f"FlashAttentionBackend{step} with {kernel}"


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


def arguments():
    """The reproducer's command line: --site DIR, --fix N (repeatable), --deterministic."""
    ap = argparse.ArgumentParser(description="sglang's own attention backend with its real kernels")
    ap.add_argument("--site", default=os.environ.get("SGLANG_SITE", ""), help="an unpacked sglang wheel's folder")
    ap.add_argument("--fix", action="append", default=[], help="apply upstream fix N (the embedded fixes module)")
    ap.add_argument("--deterministic", action="store_true", default=BUNDLE["planner"].endswith("_det"),
                    help="serve as --enable-deterministic-inference does (default: as the finding's planner did)")
    return ap.parse_args()


def engine_setup(args):
    """The release at --site imported (its fixes applied) and kvfuzz's stand-in model runner, pools and
    ForwardBatch for BUNDLE's batch, in the dtype the kernels run in: (sg, setup, batch). setup also
    carries the device, the dtype, the widths Q/K and V run at and the case as the runner reads it."""
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
    setup = fake_runner.Setup(sg, case, dev, deterministic=args.deterministic,
                              attention_backend={"fa": "fa3"}.get(engine_backend(), engine_backend()))
    # Triton's interpreter runs fp16 (bf16 on a GPU); the FA stand-in the case's dtype (FA3's: bf16, fp16)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    dtype = dtypes.get(batch.dtype, torch.float16) if engine_backend() == "fa" else \
        torch.bfloat16 if cuda and batch.dtype == "bf16" else torch.float16
    batch.dtype = {v: k for k, v in dtypes.items()}[dtype]
    for pool in (setup.full, setup.swa):  # the stand-in pools in the dtype the kernels run in
        if pool is not None:
            pool.k, pool.v = [x.to(dtype) for x in pool.k], [x.to(dtype) for x in pool.v]
    setup.dtype = setup.runner.dtype = setup.runner.kv_cache_dtype = dtype
    setup.device, setup.case, setup.q_width, setup.v_width, setup.cuda = dev, case, qw, vw, cuda
    STATS.update(release=sg.version, fixes=args.fix)
    return sg, setup, batch


def build_backend(sg, setup):
    """The release's own backend class for the finding's planner, its metadata initialised for the
    batch (eagerly, or CUDA-graph capture then replay): (backend, its name)."""
    build = {"flashinfer": build_flashinfer, "fa": build_fa}.get(engine_backend(), build_triton)
    return build(sg, setup, setup.case)


def banner(sg, args, name, setup, batch):
    """The run's first line: release, fixes, backend, device, dtype, mode."""
    import torch
    where = torch.cuda.get_device_name() if setup.cuda else \
        "the CPU" + ("" if engine_backend() == "fa" else " (Triton interpreter)")
    return (f"sglang {sg.version}{''.join(f' with fix {n}' for n in args.fix)} {name} (its metadata code"
            f"{'' if engine_backend() == 'fa' else ' and kernels'}) on {where}, {batch.dtype}, mode "
            f"{BUNDLE['mode']}{', CUDA graph' if setup.graph else ''}")


def fill_pools(setup, li, k, v):
    """Layer li's K/V pool (full, or SWA: slot full_to_swa[s] holds what full slot s holds) set to the
    pools k, v [slots, Hk, width] (numpy); returns them as tensors (kt, vt) indexed by full slot."""
    import torch
    dev, dtype = setup.device, setup.dtype
    kt, vt = torch.from_numpy(k).to(dev, dtype), torch.from_numpy(v).to(dev, dtype)
    layers = setup.case.layers
    if layers[li]["pool"] == "swa":
        f2s = torch.from_numpy(np.asarray(BUNDLE["full_to_swa"][:k.shape[0]], np.int64)).to(dev)
        live = torch.nonzero(f2s > 0).flatten()
        i = [j for j, x in enumerate(layers) if x["pool"] == "swa"].index(li)
        setup.swa.k[i].zero_(), setup.swa.v[i].zero_()
        setup.swa.k[i][f2s[live]], setup.swa.v[i][f2s[live]] = kt[live], vt[live]
    else:
        i = [j for j, x in enumerate(layers) if x["pool"] == "full"].index(li) if setup.swa is not None else li
        setup.full.k[i].copy_(kt)
        setup.full.v[i].copy_(vt)
    return kt, vt
