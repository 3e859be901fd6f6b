"""A standalone reproducer written by `kvfuzz repro` (kvfuzz's docs/repro.md).

It needs numpy, torch and the package under test (see the part after the data), not kvfuzz.
The batch is data (BUNDLE below: each request's cached and new tokens with the slot and
position of each, each query's token, position and structural keys, the layers' windows or
chunks, the seed); the values come from numpy's generator on that seed. The expected output
is computed here in float64 from logical positions alone: a query at position P sees the keys
of its own request at positions max(0, P - W) .. P (sliding window of radius W), the keys of
its chunk (chunked attention) or every earlier key (full), spec-decode drafts only their tree
ancestors. A probe run (Q = K = 0, so every key the kernel reads weighs the same, and V one-hot
per slot) shows which keys each query did read.

Exit status: 1 the bug is there (a query reads other keys, its output is off, or the kernel
raises), 0 it is not, 2 it cannot run here (a package or device is missing), 3 this script
failed (a traceback outside the kernel call). The last line, `RESULT {json}`, says the same for
machines (kvfuzz's ci/gpu_pair_table.py): exit, device, queries, wrong, max_error, the worst
query's keys (should read / read), what raised or why it cannot run.
"""
# This first part is adapters/repro/common.py of kvfuzz: the data, the values, the expected
# output and the verdict. The part after it (the target's template) calls the kernel.
import argparse
import json
import os
import sys

import numpy as np

BUNDLE = json.loads(r'''{"backend":"sglang_flashinfer_0_5_23:flashinfer_paged","bs":2,"case":{"batch":{"device_sms":0,"draft_tokens":2,"entries":[{"parents":[-1,0],"request":0},{"parents":[-1,0],"request":1}],"graph_bs":0,"kv_splits":1,"mode":"target_verify","topk":1},"cache":{"full_pages":7,"max_context_len":4,"max_requests":2,"page_size":1,"sort_free":false,"swa_pages":0},"history":[{"op":"admit","request":0},{"len":2,"op":"extend","request":0},{"op":"admit","request":1},{"len":1,"op":"extend","request":1}],"model":{"head_dim":1,"kv_heads":1,"layers":[{"kind":"sliding_window","window":1}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"values":{"dtype":"fp32","fill":"signature","poison":true,"seed":4197553503723555697},"version":2},"dtype":"fp32","engine_request":{"arrays":{"custom_mask":{"data":[1,1,1,0,1,1,1,1,1,1,0,1,1,1],"shape":[14]},"extend_prefix_lens":{"data":[2,1],"shape":[2]},"extend_seq_lens":{"data":[2,2],"shape":[2]},"out_cache_loc":{"data":[4,5,6,7],"shape":[4]},"positions":{"data":[2,3,1,2],"shape":[4]},"req_pool_indices":{"data":[1,2],"shape":[2]},"req_to_token":{"data":[0,0,0,0,1,2,4,5,3,6,7,0],"shape":[3,4]},"seq_lens":{"data":[2,1],"shape":[2]}},"case":{"batch":{"bs":2,"captured":false,"device_sms":0,"draft_step":0,"draft_steps":0,"draft_tokens":2,"kv_splits":1,"mode":"target_verify","padded_bs":2,"seq_lens_sum":3,"topk":1},"cache":{"hybrid":false,"max_context_len":4,"max_requests":2,"page_size":1},"contract_version":1,"dtype":"fp32","model":{"head_dim":1,"kv_heads":1,"layers":[{"chunk":0,"kind":"sliding_window","pool":"full","window":1}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"num_tokens":4,"page_size":1,"pools":{"full_slots":8,"swa_slots":0}}},"executor":"flashinfer_paged","finding":{"case":"corpus/sglang/flashinfer_verify_swa_mask.json","replay":"kvfuzz check corpus/sglang/flashinfer_verify_swa_mask.json --backend sglang_flashinfer_0_5_23:flashinfer_paged"},"full_to_swa":[],"hybrid":false,"kvfuzz_repro":1,"mode":"target_verify","model":{"head_dim":1,"kv_heads":1,"layers":[{"chunk":0,"kind":"sliding_window","window":1}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"num_tokens":4,"out_cache_loc":[4,5,6,7],"page_size":1,"plan":null,"planner":"sglang_flashinfer_0_5_23","pool_slots":8,"positions":[2,3,1,2],"release":"0.5.23","rows":[{"columns":[[1,0,2],[4,2,2]],"prefix_len":2,"queries":[{"column":2,"own":[[2,3]],"position":2,"token":0},{"column":3,"own":[[2,4]],"position":3,"token":1}],"req_pool_index":1,"request":0},{"columns":[[3,0,1],[6,1,2]],"prefix_len":1,"queries":[{"column":1,"own":[[1,2]],"position":1,"token":2},{"column":2,"own":[[1,3]],"position":2,"token":3}],"req_pool_index":2,"request":1}],"seed":4197553503723555697,"swa_slots":0,"target":"sglang_metadata","topk":1}''')

CANNOT_RUN = 2
SCRIPT_ERROR = 3


# What check() measured, for the RESULT line: queries checked and wrong, the largest error, the worst
# query (the wrong one with the largest error, else the largest error), the device it ran on; a
# template adds the release it ran (and fixes it applied).
STATS = {"device": "", "queries": 0, "wrong": 0, "max_error": 0.0, "worst": None}


def result_line(code, **extra):
    """Prints `RESULT {json}` (the last line of the run): the exit status and STATS. Usage:
    result_line(1, raised="IndexError: ...")"""
    def finite(x):
        return x if not isinstance(x, float) or np.isfinite(x) else str(x)
    worst = STATS["worst"] and {k: finite(v) for k, v in STATS["worst"].items()}
    torch = sys.modules.get("torch")
    device = STATS["device"] or (torch.cuda.get_device_name() if torch is not None and torch.cuda.is_available()
                                 else "CPU")
    print("RESULT " + json.dumps({**STATS, "exit": code, "device": device, "max_error": finite(STATS["max_error"]),
                                  "worst": worst, **extra}, sort_keys=True))


class KernelError(Exception):
    """The call under test raised (or faulted): the bug may be that."""


# A kernel that could not be built on this machine (a JIT compile missing its headers or
# compiler) says nothing about the bug: exit 2, never 1.
NOT_BUILT = ("Ninja build failed", "No such file or directory: 'nvcc'")


def kernel_call(fn, *args, **kwargs):
    """fn(*args, **kwargs) with any exception it raises turned into KernelError (or, when it is a
    failed build of the kernel, a 'cannot run here' exit)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        if any(s in str(e) for s in NOT_BUILT):
            cannot_run(f"the kernel could not be built here: {type(e).__name__}: {str(e)[:200]}")
        raise KernelError(f"{type(e).__name__}: {e}") from e


def run_main(main):
    """sys.exit(main()), with a KernelError exit 1 and any other exception exit 3."""
    import traceback
    try:
        code = main()
        extra = {}
    except KernelError as e:
        traceback.print_exc()
        print(f"BUG: the call under test raised {e}")
        code, extra = 1, {"raised": str(e)[:300]}
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print("error: the reproducer itself failed (exit 3)")
        code, extra = SCRIPT_ERROR, {"error": f"{type(e).__name__}: {e}"[:300]}
    result_line(code, **extra)
    sys.exit(code)


def cannot_run(why):
    print(f"cannot run here: {why}")
    result_line(CANNOT_RUN, cannot_run=why)
    sys.exit(CANNOT_RUN)


def rounded(x, dtype):
    """float32 values exactly representable in dtype (bf16: round to nearest even on the top 16 bits)."""
    x = np.asarray(x, np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        b = x.view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return b.astype(np.uint32).view(np.float32)
    return x


class Row:
    """One batch row: its request's columns (cached, then new) with their slot and position."""

    def __init__(self, r):
        self.request, self.prefix_len = r["request"], r["prefix_len"]
        self.req_pool_index = r["req_pool_index"]
        self.slots, self.positions = [], []
        for slot, pos, n in r["columns"]:
            self.slots += [slot + i if slot >= 0 else -1 for i in range(n)]
            self.positions += [pos + i for i in range(n)]
        self.queries = r["queries"]


class Batch:
    def __init__(self, b):
        self.b = b
        m = b["model"]
        self.H, self.Hk, self.D, self.Dv = m["q_heads"], m["kv_heads"], m["head_dim"], m["v_head_dim"]
        self.sm_scale, self.softcap, self.layers = m["sm_scale"], m["softcap"], m["layers"]
        self.dtype, self.seed, self.page_size = b["dtype"], b["seed"], b["page_size"]
        self.T, self.slots = b["num_tokens"], b["pool_slots"]
        self.rows = [Row(r) for r in b["rows"]]
        self.plan = b.get("plan")
        self.owner = {}  # slot -> (request, position)
        for row in self.rows:
            for s, p in zip(row.slots, row.positions):
                if s >= 0:
                    self.owner[s] = (row.request, p)

    def queries(self):
        for row in self.rows:
            for q in row.queries:
                yield row, q

    def visible(self, layer, row, q):
        """Columns query q of row may read in layer, from logical positions (kvfuzz SEMANTICS.md §3)."""
        P = q["position"]
        kind = layer["kind"]
        lo = max(0, P - layer["window"]) if kind == "sliding_window" else \
            P // layer["chunk"] * layer["chunk"] if kind == "chunked" else 0
        cols = [c for c in range(row.prefix_len) if row.positions[c] >= lo]
        for b, e in q["own"]:
            cols += [c for c in range(b, e) if row.positions[c] >= lo]
        return cols

    def values(self, layer, q_width, v_width, rng):
        """Q [T, H, q_width], K pool [slots, Hk, q_width], V pool [slots, Hk, v_width] in the dtype:
        normal values in the real dims, zeros in the padding."""
        q = np.zeros((self.T, self.H, q_width), np.float32)
        k = np.zeros((self.slots, self.Hk, q_width), np.float32)
        v = np.zeros((self.slots, self.Hk, v_width), np.float32)
        q[..., :self.D] = rng.standard_normal((self.T, self.H, self.D))
        k[..., :self.D] = rng.standard_normal((self.slots, self.Hk, self.D))
        v[..., :self.Dv] = rng.standard_normal((self.slots, self.Hk, self.Dv))
        return rounded(q, self.dtype), rounded(k, self.dtype), rounded(v, self.dtype)

    def expected(self, q, k, v, token, slots):
        """float64 attention of token's query over the K/V at slots: [H, v_width] (zeros for no key)."""
        out = np.zeros((self.H, v.shape[-1]))
        if not slots:
            return out
        group = self.H // self.Hk
        for h in range(self.H):
            kk, vv = k[slots, h // group].astype(np.float64), v[slots, h // group].astype(np.float64)
            s = kk @ q[token, h].astype(np.float64) * self.sm_scale
            if self.softcap > 0:
                s = self.softcap * np.tanh(s / self.softcap)
            w = np.exp(s - s.max())
            out[h] = w @ vv / w.sum()
        return out

    def name(self, slot):
        if slot in self.owner:
            r, p = self.owner[slot]
            return f"r{r}:{p}"
        return f"slot{slot}"


def spans(positions):
    """[0, 1, 2, 5] -> '0..2 5'."""
    out, ps = [], sorted(positions)
    i = 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(f"{ps[i]}" if i == j else f"{ps[i]}..{ps[j]}")
        i = j + 1
    return " ".join(out) or "none"


def keys_text(batch, row, slots):
    """Positions of row's request, other requests' keys as rR:P, unowned slots as slotS."""
    own = [batch.owner[s][1] for s in slots if s in batch.owner and batch.owner[s][0] == row.request]
    other = [batch.name(s) for s in sorted(slots) if not (s in batch.owner and batch.owner[s][0] == row.request)]
    return spans(own) + ("" if not other else " + " + " ".join(other))


def probe(run, batch, layer_index, q_width, v_width):
    """The slots each token's head-0 query read: runs of Q = K = 0 and V one-hot per slot, v_width
    slots a run (a read key weighs 1 / keys read, an unread one 0)."""
    reads = [set() for _ in range(batch.T)]
    q = np.zeros((batch.T, batch.H, q_width), np.float32)
    k = np.zeros((batch.slots, batch.Hk, q_width), np.float32)
    for start in range(0, batch.slots, v_width):
        v = np.zeros((batch.slots, batch.Hk, v_width), np.float32)
        block = np.arange(start, min(batch.slots, start + v_width))
        v[block, :, block - start] = 1.0
        out = run(layer_index, q, k, v)
        for t in range(batch.T):
            hit = np.nonzero(np.nan_to_num(out[t, 0, :len(block)], nan=1.0) > 0.5 / batch.slots)[0]
            reads[t] |= {start + int(j) for j in hit}
    return reads


def note(layer, row, query, slots, read, err, bad, batch):
    """Adds one checked query to STATS (its keys: positions of its request, others as rR:P)."""
    STATS["queries"] += 1
    STATS["wrong"] += bool(bad)
    STATS["max_error"] = max(STATS["max_error"], err) if np.isfinite(err) else float("inf")
    worst = STATS["worst"]
    if worst is None or (bad, err) > (worst["wrong"], worst["error"]):
        STATS["worst"] = {"layer": layer, "request": row.request, "position": query["position"], "wrong": bool(bad),
                          "error": err, "visible": len(slots), "should_read": keys_text(batch, row, slots),
                          "keys_read": None if read is None else len(read),
                          "read": None if read is None else keys_text(batch, row, read)}


def check(run, batch, q_width, v_width, covered=None, layers=None, probe_reads=True):
    """Runs the kernel (run(layer, q, k_pool, v_pool) -> out [T, H, v_width]) on every layer asked,
    compares each query with the float64 expectation and, with probe_reads, its read keys with the
    visible ones. covered(layer, row, query, columns) narrows the visible columns to those the call
    covers (one call of several). Prints a line per query; returns the number of wrong queries."""
    wrong = total = 0
    for li in (range(len(batch.layers)) if layers is None else layers):
        layer = batch.layers[li]
        rng = np.random.default_rng([batch.seed, li])
        q, k, v = batch.values(layer, q_width, v_width, rng)
        out = run(li, q, k, v)
        reads = probe(run, batch, li, q_width, v_width) if probe_reads else None
        print(f"layer {li} ({layer['kind']}{', W = %d' % layer['window'] if layer['kind'] == 'sliding_window' else ''}"
              f"{', chunk %d' % layer['chunk'] if layer['kind'] == 'chunked' else ''}):")
        for row, qd in batch.queries():
            cols = batch.visible(layer, row, qd)
            if covered is not None:
                cols = covered(li, row, qd, cols)
            slots = [row.slots[c] for c in cols]
            t = qd["token"]
            total += 1
            ref = batch.expected(q, k, v, t, slots)
            got = out[t, :, :ref.shape[-1]].astype(np.float64)
            err = float(np.nanmax(np.abs(got - ref))) if np.isfinite(got).all() else float("inf")
            bad_values = not err <= 0.05 + 0.02 * float(np.abs(ref).max(initial=0))
            bad_reads = reads is not None and reads[t] != set(slots)
            note(li, row, qd, slots, reads[t] if reads is not None else None, err, bad_values or bad_reads, batch)
            line = (f"  request {row.request}, query at position {qd['position']} (token {t}): "
                    f"should read {keys_text(batch, row, slots)}")
            if reads is not None:
                line += f"; read {keys_text(batch, row, reads[t])}"
            line += f"; max |actual - expected| {err:.3g}"
            if bad_values or bad_reads:
                wrong += 1
                line += "   <-- WRONG"
            print(line)
            if bad_values:
                n = min(4, ref.shape[-1], batch.Dv)
                print(f"      head 0, first {n} output channels: expected {np.round(ref[0, :n], 4).tolist()}, "
                      f"actual {np.round(got[0, :n], 4).tolist()}")
    return wrong, total


def verdict(bad, summary):
    """The last line and the exit status: 1 when anything was wrong."""
    print(f"{'BUG' if bad else 'ok'}: {summary}")
    return 1 if bad else 0


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
