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

BUNDLE = json.loads(r'''{"backend":"sglang_flashinfer_0_5_13:flashinfer_paged","bs":1,"case":{"batch":{"device_sms":0,"entries":[{"extend_len":2,"request":0}],"graph_bs":0,"kv_splits":1,"mode":"mixed"},"cache":{"full_pages":3,"max_context_len":3,"max_requests":1,"page_size":1,"sort_free":false,"swa_pages":3},"history":[{"op":"admit","request":0},{"len":1,"op":"extend","request":0}],"model":{"head_dim":1,"kv_heads":1,"layers":[{"kind":"full"},{"kind":"sliding_window","window":0}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"values":{"dtype":"fp32","fill":"signature","poison":true,"seed":13537559818992212592},"version":2},"dtype":"fp32","engine_request":{"arrays":{"extend_prefix_lens":{"data":[1],"shape":[1]},"extend_seq_lens":{"data":[2],"shape":[1]},"full_to_swa":{"data":[0,1,2,3,-1],"shape":[5]},"out_cache_loc":{"data":[2,3],"shape":[2]},"positions":{"data":[1,2],"shape":[2]},"req_pool_indices":{"data":[1],"shape":[1]},"req_to_token":{"data":[0,0,0,1,2,3],"shape":[2,3]},"seq_lens":{"data":[3],"shape":[1]}},"case":{"batch":{"bs":1,"captured":false,"device_sms":0,"draft_step":0,"draft_steps":0,"draft_tokens":0,"kv_splits":1,"mode":"mixed","padded_bs":1,"request_ids":[0],"seq_lens_sum":3,"topk":1},"cache":{"full_pages":3,"hybrid":true,"max_context_len":3,"max_requests":1,"page_size":1,"sort_free":false,"swa_pages":3},"contract_version":1,"dtype":"fp32","history":[{"op":"admit","request":0},{"len":1,"op":"extend","request":0}],"model":{"head_dim":1,"kv_heads":1,"layers":[{"chunk":0,"kind":"full","pool":"full","window":0},{"chunk":0,"kind":"sliding_window","pool":"swa","window":0}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"num_tokens":2,"page_size":1,"pools":{"full_slots":4,"swa_slots":4}}},"executor":"flashinfer_paged","finding":{"case":"corpus/sglang/flashinfer_swa_full_prefix.json","replay":"kvfuzz check corpus/sglang/flashinfer_swa_full_prefix.json --backend sglang_flashinfer_0_5_13:flashinfer_paged"},"full_to_swa":[0,1,2,3,-1],"hybrid":true,"kvfuzz_repro":1,"mode":"mixed","model":{"head_dim":1,"kv_heads":1,"layers":[{"chunk":0,"kind":"full","window":0},{"chunk":0,"kind":"sliding_window","window":0}],"mla":false,"q_heads":1,"sm_scale":0.125,"softcap":0.0,"v_head_dim":1},"num_tokens":2,"out_cache_loc":[2,3],"page_size":1,"plan":null,"planner":"sglang_flashinfer_0_5_13","pool_slots":4,"positions":[1,2],"release":"0.5.13","rows":[{"columns":[[1,0,3]],"prefix_len":1,"queries":[{"column":1,"own":[[1,2]],"position":1,"token":0},{"column":2,"own":[[1,3]],"position":2,"token":1}],"req_pool_index":1,"request":0}],"seed":13537559818992212592,"swa_slots":4,"target":"sglang_metadata","topk":1}''')

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
# positions, with the probe of the keys it read.
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

EMBEDDED = {}  # kvfuzz's own modules this script imports, each verbatim from the file named
# ---- adapters/engine/release.py of kvfuzz, as module engine.release ----
EMBEDDED["engine.release"] = r'''
"""Which release of an engine an installed site holds (from the wheel's .dist-info folder).

    release_of(".vllm/0.33.0", "vllm")   # "0.33.0"
"""
import os


def release_of(site, package):
    for entry in os.listdir(site):
        if entry.startswith(f"{package}-") and entry.endswith(".dist-info"):
            return entry[len(package) + 1:-len(".dist-info")]
    return "unknown"
'''
# ---- adapters/engine/stub_import.py of kvfuzz, as module engine.stub_import ----
EMBEDDED["engine.stub_import"] = r'''
"""Import an engine's real modules from a pinned release's source without its serving stack.

kvfuzz runs an engine's metadata code unchanged. Its modules import much of the server
(transformers, distributed, kernel packages); none of that is called by the metadata builders.
Every module of the engine's package loads from the release's own source; every other package it
imports, but for `real` (PyTorch, Triton, numpy, their dependencies) and the standard library, is
replaced by a stub whose attributes are inert stand-ins, whether or not the machine has it
installed. Kernels the backends do launch are replaced after import by recorders, so a stub
never decides a result. adapters/sglang/sglang_import.py and adapters/vllm/vllm_import.py say
which packages each engine keeps real.

    install_finder("/path/to/site", "vllm", real=("torch", "numpy"), stubbed=("flashinfer",))
    fa = importlib.import_module("vllm.v1.attention.backends.flash_attn")
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import types

_IMPORTLIB = os.path.dirname(importlib.__file__)
stubbed_names = []  # every module a stub stood in for, for the log


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        # Used as a decorator (@stub or @stub(...)): hand the decorated object back unchanged.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _StubMeta):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, item, value):
        pass

    def __contains__(cls, item):
        return False

    def __len__(cls):
        return 0

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


class _StubBase(metaclass=_StubMeta):
    def __init_subclass__(cls, **kwargs):
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        """A stub used as a field type of a real pydantic model (vLLM's configuration) accepts anything."""
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _stub_class("result")()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __getitem__(self, item):
        return _stub_class("item")()

    def __setitem__(self, item, value):
        pass


def _stub_class(name):
    return _StubMeta(name.rsplit(".", 1)[-1], (_StubBase,), {"__module__": "kvfuzz_stub"})


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []  # a package, so that submodules import too
        self.__file__ = f"<kvfuzz stub {name}>"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def __init__(self, shims):
        self.shims = shims

    def create_module(self, spec):
        stubbed_names.append(spec.name)
        module = _StubModule(spec.name)
        for attr, value in self.shims.get(spec.name, {}).items():
            setattr(module, attr, value)
        return module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, site, package, real, stubbed, shims):
        self.site, self.package, self.real, self.stubbed, self.shims = site, package, real, stubbed, shims

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if name == self.package:
            # The package without its __init__: that imports the engine's front end; the metadata
            # code needs none of it.
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [os.path.join(self.site, self.package)]
            return spec
        stubbed = any(name == s or name.startswith(s + ".") for s in self.stubbed)
        if top == self.package and not stubbed:
            spec = importlib.machinery.PathFinder.find_spec(name, path or [self.site])
            if spec is None and name.rsplit(".", 1)[-1].startswith("_C"):
                stubbed = True  # a compiled extension of the wheel (vllm._C): only its Python source is installed
            else:
                return spec
        if not stubbed and (top in self.real or top in sys.stdlib_module_names):
            return None
        # Every other package the engine asks for is a stub, installed or not, so that a run does
        # not depend on what else the machine has (a GPU image's transformers, say).
        if stubbed or self._asked_by_engine():
            return importlib.machinery.ModuleSpec(name, _StubLoader(self.shims), is_package=True)
        return None

    def _asked_by_engine(self):
        frame = sys._getframe(2)
        while frame is not None:
            file = frame.f_code.co_filename
            # importlib.import_module's own frame (vLLM's LazyLoader imports through it) is skipped too
            if not file.startswith("<frozen") and file != __file__ and not file.startswith(_IMPORTLIB):
                return file.startswith(self.site)
            frame = frame.f_back
        return False


def _skip_fake_kernels_of_stubbed_packages(stubbed):
    """Engines register fake (meta) kernels for ops of the kernel packages they import, on CUDA
    machines (sglang's layers/moe/topk.py: register_fake("sgl_kernel::moe_fused_gate")); those ops
    do not exist when the package is a stub, so their registration is skipped."""
    import torch

    original = torch.library.register_fake
    if getattr(original, "kvfuzz_tolerant", False):
        return

    def register_fake(op, func=None, /, *args, **kwargs):
        if isinstance(op, str) and op.split("::")[0] in stubbed:
            return func if func is not None else (lambda fn: fn)
        return original(op, func, *args, **kwargs)

    register_fake.kvfuzz_tolerant = True
    torch.library.register_fake = register_fake


def _stub_versions(site, package):
    """importlib.metadata.version(name) for a package that is a stub here answers the lowest version
    the release requires of it (its .dist-info METADATA), as module-level version checks ask."""
    import glob
    import importlib.metadata as metadata

    if getattr(metadata.version, "kvfuzz_stubbed", False):
        return
    floors = {}
    for path in glob.glob(os.path.join(site, f"{package}-*.dist-info", "METADATA")):
        for line in open(path, encoding="utf-8"):
            m = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)[^;]*?>=\s*([0-9][0-9.]*)", line)
            if m:
                floors.setdefault(m.group(1).lower().replace("_", "-"), m.group(2))
    original = metadata.version

    def version(name):
        try:
            return original(name)
        except metadata.PackageNotFoundError:
            return floors.get(name.lower().replace("_", "-"), "0.0.0")

    version.kvfuzz_stubbed = True
    metadata.version = version


def install_finder(site, package, real, stubbed=(), shims=None):
    """Put the release's folder first for `package`, stubs for what is missing. Returns `site`.
    real: top-level packages imported for real (besides the standard library); stubbed: packages
    (or the engine's own subpackages, "vllm.vllm_flash_attn") stubbed even where installed (kernel packages: no real kernel may run unrecorded); shims:
    {module: {attr: value}} for stubs that must return data (module-level code uses them)."""
    if site not in sys.path:
        sys.path.append(site)  # the release's .dist-info: importlib.metadata.version(package) answers
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(site, package, tuple(real) + (package,), tuple(stubbed), shims or {}))
    # `regex` (parsers that build patterns at import time) serves as the standard library's `re`.
    sys.modules.setdefault("regex", re)
    _skip_fake_kernels_of_stubbed_packages(tuple(stubbed))
    _stub_versions(site, package)
    return site
'''
# ---- adapters/sglang/sglang_import.py of kvfuzz, as module sglang_import ----
EMBEDDED["sglang_import"] = r'''
"""Import sglang's real attention-backend modules from a pinned wheel without its serving stack
(engine/stub_import.py does the work; this file says which packages sglang keeps real).

    site = install_finder("/path/to/site")   # the folder holding the wheel's `sglang/`
    fa = importlib.import_module("sglang.srt.layers.attention.flashattention_backend")
"""
from engine import stub_import

# Kernel packages: stubbed even where installed, so that no real kernel runs unrecorded.
STUBBED = ("sgl_kernel", "flashinfer", "flash_attn", "vllm", "deep_gemm", "aiter", "sgl_kernel_npu")
# Real modules: what the metadata code computes with, and PyTorch's own dependencies.
REAL = ("torch", "triton", "numpy", "msgspec", "packaging", "sympy", "mpmath", "filelock", "jinja2", "markupsafe",
        "networkx", "fsspec", "typing_extensions")
# Stubs that must return data rather than stand-ins (module-level code of sglang uses them).
SHIMS = {"dill": {"dumps": lambda obj, *a, **k: b"", "loads": lambda data, *a, **k: None}}


def install_finder(site):
    """Put the wheel's folder first for `sglang`, stubs for what is missing. Returns `site`."""
    return stub_import.install_finder(site, "sglang", REAL, STUBBED, SHIMS)
'''
# ---- adapters/sglang/fake_runner.py of kvfuzz, as module fake_runner ----
EMBEDDED["fake_runner"] = r'''
"""The smallest model runner, KV pools and ForwardBatch that sglang's attention backends accept.

Built from one kvfuzz planner request (adapters/kvfuzz_adapter/case.py PlanCase): kvfuzz's own
req_to_token and full_to_swa tensors, its forward batch in sglang's conventions (kvfuzz's: a
DRAFT_EXTEND_V2 batch's seq_lens include the step's tokens, as eagle_info_v2's
prepare_for_extend_to_fill_draft_kvcache bumps them, extend_prefix_lens the old lengths), and a
model whose layers are kvfuzz's: sliding-window layers carry `sliding_window_size` = the radius W
(FlashAttention's window_size[0]; sglang's models already subtract 1 from the config's window),
chunked layers `use_irope` with the model's `attention_chunk_size`.

The hybrid-SWA pool is sglang's real SWAKVPool class (its layer routing and
translate_loc_from_full_to_swa run unchanged) over small stand-in buffers.
"""
import dataclasses
import importlib
import types

import numpy as np
import torch

# kvfuzz mode -> (sglang ForwardMode name, speculative role)
MODES = {
    "idle": ("IDLE", None),
    "decode": ("DECODE", None),
    "extend": ("EXTEND", None),
    "mixed": ("MIXED", None),
    "target_verify": ("TARGET_VERIFY", "verify"),
    "draft_extend_v2": ("DRAFT_EXTEND_V2", "draft_extend"),
    "draft_decode": ("DECODE", "draft"),
}


class UnsupportedCase(Exception):
    """The case needs something this sglang release or adapter does not model (not a finding)."""


class _Buffers:
    """One pool's per-layer K/V buffers: [slots, kv_heads, head_dim], tagged with the pool's name."""

    def __init__(self, name, slots, layers, kv_heads, head_dim, v_head_dim, dtype, device):
        self.name = name
        self.k = [torch.zeros(slots, kv_heads, head_dim, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(slots, kv_heads, v_head_dim, dtype=dtype, device=device) for _ in range(layers)]

    def get_kv_buffer(self, layer_id):
        return self.k[layer_id], self.v[layer_id]

    def get_kv_cache_quant_method(self):  # 0.5.23: what KVCache.__init__ sets for an unquantized pool
        return self.quant_method

    def get_key_buffer(self, layer_id):
        return self.k[layer_id]

    def get_value_buffer(self, layer_id):
        return self.v[layer_id]


class Setup:
    """Everything one request builds: model runner, layers, forward batch, pools."""

    def __init__(self, sg, case, device, spec_topk=None, deterministic=False, attention_backend="fa3"):
        self.sg, self.case, self.device = sg, case, device
        self.attention_backend = attention_backend
        self.deterministic = deterministic
        info, batch = case.info, case.batch
        self.mode = batch["mode"]
        if self.mode not in MODES:
            raise UnsupportedCase(f"mode {self.mode}")
        self.bs, self.padded_bs = batch["bs"], batch["padded_bs"]
        self.graph = bool(batch["captured"])
        if self.graph and self.mode in ("extend", "mixed"):
            raise UnsupportedCase("sglang replays CUDA graphs for decode, idle and speculative batches, not extend/mixed")
        self.page_size = case.page_size
        self.topk = batch["topk"]
        self.draft_tokens = batch["draft_tokens"]
        self.draft_steps, self.draft_step = batch["draft_steps"], batch["draft_step"]
        m = case.model
        if m["mla"]:
            raise UnsupportedCase("MLA models")
        self.layers_spec = case.layers
        self.dtype = torch.bfloat16
        self._build_pools(info, m)
        self._build_runner(m)
        self._build_layers(m)
        self._build_batch()

    # -- pools -------------------------------------------------------------------------------
    def _build_pools(self, info, m):
        sg, dev = self.sg, self.device
        r2t = self.case.array("req_to_token")
        self.req_to_token = torch.from_numpy(np.ascontiguousarray(r2t)).to(dev)
        self.req_to_token_pool = types.SimpleNamespace(req_to_token=self.req_to_token, size=r2t.shape[0])
        if self.graph and self.padded_bs > r2t.shape[0]:  # cuda_graph_runner.get_batch_sizes_to_capture
            raise UnsupportedCase(f"no CUDA graph is captured for batch size {self.padded_bs} > "
                                  f"req_to_token_pool.size {r2t.shape[0]}")
        full_ids = [l for l, x in enumerate(self.layers_spec) if x["pool"] == "full"]
        swa_ids = [l for l, x in enumerate(self.layers_spec) if x["pool"] == "swa"]
        pools = info["pools"]
        mk = lambda name, slots, n: _Buffers(name, slots, n, m["kv_heads"], m["head_dim"], m["v_head_dim"],
                                             self.dtype, dev)
        self.full = mk("full", pools["full_slots"], len(full_ids))
        self.full.quant_method = quant = sg.unquantized_kv_cache_method()
        self.hybrid = bool(info["cache"]["hybrid"])
        if not self.hybrid:
            self.swa = None
            pool = types.SimpleNamespace(get_kv_buffer=lambda l: self.full.get_kv_buffer(l),
                                         get_kv_cache_quant_method=lambda: quant,
                                         get_key_buffer=lambda l: self.full.get_key_buffer(l),
                                         get_value_buffer=lambda l: self.full.get_value_buffer(l), start_layer=0,
                                         layer_num=len(self.layers_spec))
        else:
            self.swa = mk("swa", pools["swa_slots"], len(swa_ids))
            self.swa.quant_method = quant
            pool = object.__new__(sg.SWAKVPool)  # the real class: its routing and translation run
            pool.full_kv_pool, pool.swa_kv_pool = self.full, self.swa
            pool.swa_layer_nums, pool.full_layer_nums = len(swa_ids), len(full_ids)
            pool.layers_mapping = {g: (i, False) for i, g in enumerate(full_ids)}
            pool.layers_mapping.update({g: (i, True) for i, g in enumerate(swa_ids)})
            pool.page_size, pool.device, pool.dtype = self.page_size, dev, self.dtype
            # what __init__ sets besides the sub-pools (0.5.12 on read layer_transfer_counter per layer)
            pool.layer_num, pool.start_layer = len(self.layers_spec), 0
            pool.size, pool.size_swa = pools["full_slots"], pools["swa_slots"]
            pool.head_num, pool.head_dim = m["kv_heads"], m["head_dim"]
            pool.layer_transfer_counter, pool.swa_loc = None, None
            f2s = self.case.array("full_to_swa")
            pool.full_to_swa_index_mapping = torch.from_numpy(np.ascontiguousarray(f2s)).to(dev)
        self.token_to_kv_pool = pool
        # The allocator: Triton's window CSRs translate through it (hasattr check in triton_backend.py).
        if self.hybrid:
            allocator = object.__new__(sg.SWATokenToKVPoolAllocator)
            allocator._kvcache, allocator.page_size = pool, self.page_size
        else:
            allocator = types.SimpleNamespace(page_size=self.page_size, get_kvcache=lambda: pool)
        self.token_to_kv_pool_allocator = allocator

    def pool_of(self, tensor):
        """'full' or 'swa': which pool a K buffer handed to a kernel belongs to."""
        ptr = tensor.untyped_storage().data_ptr()
        for buffers in (self.full, self.swa):
            if buffers is not None and any(k.untyped_storage().data_ptr() == ptr for k in buffers.k):
                return buffers.name
        return "unknown"

    # -- model runner --------------------------------------------------------------------------
    def _build_runner(self, m):
        sg = self.sg
        windows = [x["window"] for x in self.layers_spec if x["kind"] == "sliding_window"]
        chunks = sorted({x["chunk"] for x in self.layers_spec if x["kind"] == "chunked"})
        if len(chunks) > 1:
            raise UnsupportedCase("several chunk sizes (sglang has one attention_chunk_size)")
        spec = MODES[self.mode][1]
        if spec is None and self.mode != "idle":
            spec_topk, num_steps, draft_tokens = 0, 0, 0
        else:
            spec_topk = self.topk
            num_steps = self.draft_steps or 1
            if self.mode == "draft_extend_v2":  # the v2 worker extends num_steps + 1 tokens per request
                lens = self.case.array("extend_seq_lens")[: self.bs]
                num_steps = max(1, int(lens.max()) - 1) if len(lens) else 1
                if self.graph and (len(set(lens.tolist())) > 1 or int(lens.max()) < 2):
                    raise UnsupportedCase("a v2 draft-extend CUDA graph runs num_steps + 1 (>= 2) tokens for every "
                                          "request")
            draft_tokens = self.draft_tokens or 1
            if self.mode == "draft_extend_v2":  # the v2 worker extends num_draft_tokens per request
                draft_tokens = num_steps + 1
        self.spec_topk, self.num_steps, self.spec_draft_tokens = spec_topk, num_steps, draft_tokens
        server_args = sg.server_args(dict(
            kv_cache_dtype="auto", speculative_eagle_topk=spec_topk or None,
            speculative_num_draft_tokens=draft_tokens, speculative_num_steps=num_steps,
            enable_deterministic_inference=self.deterministic, disable_cuda_graph=not self.graph,
            attention_backend=self.attention_backend, enable_dp_attention=False, dp_size=1,
            speculative_algorithm="EAGLE" if spec else None, page_size=self.page_size,
            disable_chunked_prefix_cache=True, triton_attention_num_kv_splits=self.case.batch["kv_splits"],
            triton_attention_split_tile_size=None, chunked_prefill_size=8192, multi_item_scoring_delimiter=None,
            disable_piecewise_cuda_graph=True, dllm_algorithm=None, is_embedding=False, disable_radix_cache=False))
        model_config = types.SimpleNamespace(
            is_encoder_decoder=False, context_len=self.req_to_token.shape[1],
            attention_arch=sg.AttentionArch.MHA, is_local_attention_model=bool(chunks),
            num_attention_heads=m["q_heads"], get_num_kv_heads=lambda tp, dcp_size=1: m["kv_heads"],
            head_dim=m["head_dim"], v_head_dim=m["v_head_dim"], swa_v_head_dim=m["v_head_dim"],
            get_max_num_attention_heads=lambda: m["q_heads"], is_hybrid_swa=self.hybrid, is_multimodal=False,
            linear_attn_registry_result=None,
            hf_text_config=types.SimpleNamespace(num_attention_heads=m["q_heads"],
                                                 attn_logit_softcapping=m["softcap"] or None))
        model_config.hf_config = types.SimpleNamespace(architectures=["LlamaForCausalLM"],
                                                       get_text_config=lambda: model_config.hf_text_config)
        self.runner = types.SimpleNamespace(
            model_config=model_config, device=self.device, server_args=server_args,
            # model_runner.py: the SWA window, else (Llama 4) the attention chunk size
            sliding_window_size=max(windows) if windows else (chunks[0] if chunks else None),
            attention_chunk_size=chunks[0] if chunks else None,
            req_to_token_pool=self.req_to_token_pool, token_to_kv_pool=self.token_to_kv_pool,
            token_to_kv_pool_allocator=self.token_to_kv_pool_allocator, gpu_id=0, hybrid_gdn_config=None,
            kimi_linear_config=None, linear_attn_model_spec=None, kv_cache_dtype_str="auto",
            kv_cache_dtype=self.dtype, page_size=self.page_size, attn_cp_size=1, dtype=self.dtype,
            is_hybrid_swa=self.hybrid, tp_size=1, num_effective_layers=len(self.layers_spec),
            model_is_mrope=False, is_draft_worker=spec == "draft",
            max_num_reqs=self.req_to_token.shape[0])
        if sg.runtime is not None:
            self._runner_0_5_23(spec)

    def _runner_0_5_23(self, spec):
        """What 0.5.23's ModelRunner carries besides: its speculative algorithm and resolved backend
        names (from the published configuration, as ModelRunner.__init__ / initialize take them), the
        logits rows per decode slot, and the KVIndexTranslator it builds over its pools
        (init_kv_index_translator; a plain pool or SWAKVPool takes the non-translating path)."""
        sg, runner = self.sg, self.runner
        runner.spec_algorithm = sg.SpeculativeAlgorithm.from_string(sg.runtime.get_spec().speculative_algorithm)
        runner.draft_attention_backend = None
        runner.prefill_attention_backend_str, runner.decode_attention_backend_str = sg.runtime.attention_backends()
        resolve = importlib.import_module("sglang.srt.speculative.spec_utils").resolve_num_tokens_per_req

        def decode_num_tokens_per_req(*, num_draft_tokens=None):  # ModelRunner's, without DSpark and dLLM
            if not runner.spec_algorithm.is_speculative():
                return 1
            return resolve(phase="target_verify", spec_algorithm=runner.spec_algorithm,
                           is_draft_worker=runner.is_draft_worker, num_draft_tokens=num_draft_tokens)

        runner.decode_num_tokens_per_req = decode_num_tokens_per_req
        runner.kv_index_translator = sg.KVIndexTranslator(
            req_to_token=self.req_to_token, token_to_kv_pool_allocator=self.token_to_kv_pool_allocator,
            token_to_kv_pool=self.token_to_kv_pool, page_size=self.page_size, device=self.device,
            is_draft_worker=runner.is_draft_worker)

    # -- layers ----------------------------------------------------------------------------------
    def _build_layers(self, m):
        sg = self.sg
        self.layers = []
        for l, x in enumerate(self.layers_spec):
            self.layers.append(types.SimpleNamespace(
                layer_id=l, sliding_window_size=x["window"] if x["kind"] == "sliding_window" else -1,
                use_irope=x["kind"] == "chunked", tp_q_head_num=m["q_heads"], tp_k_head_num=m["kv_heads"],
                tp_v_head_num=m["kv_heads"], head_dim=m["head_dim"], qk_head_dim=m["head_dim"],
                v_head_dim=m["v_head_dim"], scaling=m["sm_scale"], logit_cap=m["softcap"],
                is_cross_attention=False, attn_type=sg.AttentionType.DECODER, k_scale=None, v_scale=None,
                k_scale_float=None, v_scale_float=None, logit_capping_method="tanh", xai_temperature_len=-1))

    # -- forward batch ---------------------------------------------------------------------------
    def _build_batch(self):
        sg, dev, c = self.sg, self.device, self.case
        n = self.padded_bs
        i32 = lambda name: torch.from_numpy(np.ascontiguousarray(c.array(name)[:n]).astype(np.int64)).to(dev)
        seq_lens = i32("seq_lens")
        prefix = i32("extend_prefix_lens")
        extend = i32("extend_seq_lens")
        self.seq_lens = seq_lens
        self.req_pool_indices = i32("req_pool_indices")
        self.out_cache_loc = torch.from_numpy(c.array("out_cache_loc").astype(np.int64)).to(dev)
        positions = torch.from_numpy(c.array("positions").astype(np.int64)).to(dev)
        mode_name, spec = MODES[self.mode]
        self.forward_mode = getattr(sg.ForwardMode, mode_name)
        self.spec_info = None
        if spec == "verify":  # sglang's own EagleVerifyInput: FlashInfer plans through its generate_attn_arg_prefill
            mask = torch.from_numpy(c.array("custom_mask").astype(bool)).to(dev)
            known = dict(draft_token=torch.zeros(positions.shape[0], dtype=torch.int64, device=dev),
                         custom_mask=mask, positions=positions, spec_steps=self.num_steps, topk=self.topk,
                         draft_token_num=self.draft_tokens, seq_lens_sum=int(seq_lens.sum()),
                         seq_lens_cpu=seq_lens.cpu())
            # Fields the metadata code does not read (the retrieve_* trees, spelled retrive_ before
            # 0.5.11; capture_hidden_mode; 0.5.23's draft_probs) are None.
            verify = sg.eagle_verify_input()
            self.spec_info = verify(**{f.name: known.get(f.name) for f in dataclasses.fields(verify)
                                       if f.init and (f.name in known or f.default is dataclasses.MISSING)})
        elif spec is not None:
            # EagleDraftInput of the v2 worker: the draft-extend lengths per request (CUDA-graph replay reads them)
            self.spec_info = types.SimpleNamespace(topk=self.topk, positions=positions, num_tokens_per_batch=1,
                                                   is_draft_input=lambda: True, is_verify_input=lambda: False,
                                                   accept_length=extend, accept_length_cpu=extend.tolist(),
                                                   extend_seq_lens_tensor=extend.to(torch.int32),
                                                   extend_seq_lens_cpu=extend.tolist(),
                                                   # 0.5.23: the multi-step draft backend's window rail
                                                   window_kv_indptr=None, window_kv_indices=None)
        self.fb = types.SimpleNamespace(
            forward_mode=self.forward_mode, batch_size=n, seq_lens=seq_lens, seq_lens_cpu=seq_lens.cpu(),
            seq_lens_sum=int(seq_lens.sum()), req_pool_indices=self.req_pool_indices,
            req_to_token_pool=self.req_to_token_pool, token_to_kv_pool=self.token_to_kv_pool,
            token_to_kv_pool_allocator=self.token_to_kv_pool_allocator, gpu_id=0, hybrid_gdn_config=None,
            kimi_linear_config=None,
            out_cache_loc=self.out_cache_loc, positions=positions, spec_info=self.spec_info,
            extend_prefix_lens=prefix, extend_prefix_lens_cpu=prefix.tolist(), extend_seq_lens=extend,
            extend_seq_lens_cpu=extend.tolist(), extend_num_tokens=int(extend.sum()), encoder_lens=None,
            encoder_out_cache_loc=None, attn_cp_metadata=None, attn_attend_prefix_cache=None,
            mha_return_lse=False, mha_one_shot=False, num_token_non_padded=None,
            extend_start_loc=torch.nn.functional.pad(torch.cumsum(extend, 0), (1, 0))[:-1],
            spec_algorithm=None, global_num_tokens_gpu=None, can_run_dp_cuda_graph=False,
            token_num_per_seq=None)
        # The release's ForwardBatch fields not set above keep the class's defaults (each release adds some).
        for f in dataclasses.fields(sg.ForwardBatch):
            if not hasattr(self.fb, f.name) and f.default is not dataclasses.MISSING:
                setattr(self.fb, f.name, f.default)
        if sg.runtime is not None:
            self.fb.can_run_decode_cuda_graph = self.graph
            self.fb.spec_algorithm = self.runner.spec_algorithm  # 0.5.23's backends ask it (is_uno, ...)
            # ForwardBatch.init_new: the batch's KVLocPlan, bound with its write ids
            self.runner.kv_index_translator.bind_own_plan(self.fb)

    def layer_batch(self):
        """The batch the layers' forward sees: in a replayed CUDA graph, the kernels captured run, and
        an IDLE batch replays the graph captured for DECODE (cuda_graph_runner.py)."""
        if not (self.graph and self.mode == "idle"):
            return self.fb
        fb = types.SimpleNamespace(**vars(self.fb))
        fb.forward_mode = self.sg.ForwardMode.DECODE
        return fb
'''
# ---- adapters/sglang/sglang_release.py of kvfuzz, as module sglang_release ----
EMBEDDED["sglang_release"] = r'''
"""A pinned sglang release's modules that kvfuzz calls, and its metadata entry points across releases.

Where it sits: the sglang adapter's planners (sglang_planner.py) and the standalone reproducers
`kvfuzz repro` writes (adapters/repro/sglang_metadata.py embeds this file) build a release's backend
on fake_runner.Setup and initialise its metadata here: eagerly, or by CUDA-graph capture then replay,
as each release's runner does.

    sg = Sglang(".sglang/0.5.23")                # the release's own modules, heavy imports stubbed
    backend = importlib.import_module("sglang.srt.layers.attention.triton_backend").TritonAttnBackend(runner)
    sg.init_metadata(backend, setup)             # setup: fake_runner.Setup(sg, case, device)
"""
import dataclasses
import importlib
import inspect
import os
import types

import sglang_import
from engine.release import release_of


class Sglang:
    """The release's modules kvfuzz calls, and the metadata entry points across releases."""

    def __init__(self, site):
        sglang_import.install_finder(os.path.abspath(site))
        self.version = release_of(site, "sglang")
        fb = importlib.import_module("sglang.srt.model_executor.forward_batch_info")
        self.ForwardMode, self.ForwardBatch = fb.ForwardMode, fb.ForwardBatch
        swa = importlib.import_module("sglang.srt.mem_cache.swa_memory_pool")
        self.SWAKVPool = swa.SWAKVPool
        if not hasattr(swa, "SWATokenToKVPoolAllocator"):  # 0.5.13 on: mem_cache/allocator/swa.py
            swa = importlib.import_module("sglang.srt.mem_cache.allocator.swa")
        self.SWATokenToKVPoolAllocator = swa.SWATokenToKVPoolAllocator
        self.AttentionArch = importlib.import_module("sglang.srt.configs.model_config").AttentionArch
        self.AttentionType = importlib.import_module("sglang.srt.layers.radix_attention").AttentionType
        server_args = importlib.import_module("sglang.srt.server_args")
        self._server_args = server_args
        # 0.5.23 on: the backends read the server's configuration through sglang.srt.runtime_context,
        # published from a real ServerArgs (publish); before, from server_args' module global.
        self.runtime = None
        if os.path.exists(os.path.join(site, "sglang", "srt", "runtime_context.py")):
            self.runtime = importlib.import_module("sglang.srt.runtime_context")
            self._namespace = importlib.import_module("sglang.srt.arg_groups.arg_utils").namespace_of(
                server_args.ServerArgs)
            translator = importlib.import_module("sglang.srt.mem_cache.kv_index_translator")
            self.KVIndexTranslator = translator.KVIndexTranslator
            self.SpeculativeAlgorithm = importlib.import_module("sglang.srt.speculative.spec_info").SpeculativeAlgorithm
        else:
            # One process, tensor-parallel size 1: the attention TP group the backends ask for.
            parallel = importlib.import_module("sglang.srt.distributed.parallel_state")
            parallel._ATTN_TP = types.SimpleNamespace(world_size=1, rank_in_group=0, rank=0)

    def unquantized_kv_cache_method(self):
        """The quant method an unquantized KV pool carries (0.5.23 on; FlashInfer asks it how to read K/V)."""
        if self.runtime is None:
            return None
        return importlib.import_module(
            "sglang.srt.layers.quantization.fp4_kv_cache_quant_method").UnquantizedKVCacheMethod()

    def server_args(self, fields):
        """The server's arguments for one case. 0.5.23 on: a real ServerArgs of the fields the release
        declares, published as the scheduler process publishes it (rank 0 of one, GPU 0); before: the
        namespace the backends read through server_args.get_global_server_args()."""
        if self.runtime is None:  # the dataclass's defaults (its __post_init__ probes the machine), then ours
            defaults = {}
            for f in dataclasses.fields(self._server_args.ServerArgs):
                if f.default is not dataclasses.MISSING:
                    defaults[f.name] = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    defaults[f.name] = f.default_factory()
            return types.SimpleNamespace(**{**defaults, **fields})
        known = {k: v for k, v in fields.items() if k in self._namespace}
        args = self._server_args.ServerArgs(model_path="dummy", **known)
        self.runtime.publish(args, role="scheduler", ranks=self.runtime.SpawnRanks(world_rank=0, gpu_id=0))
        return args

    def module(self, name):
        return importlib.import_module(f"sglang.srt.layers.attention.{name}")

    def eagle_verify_input(self):
        """sglang's EagleVerifyInput, imported at the first verify case: its module pulls in much of
        the server (MoE, batch overlap); if that fails here, verify cases are unsupported, not findings."""
        try:
            return importlib.import_module("sglang.srt.speculative.eagle_info").EagleVerifyInput
        except Exception as e:  # noqa: BLE001 - any import-time failure of the server's modules
            raise UnsupportedCase(f"sglang.srt.speculative.eagle_info does not import here: {e}") from e

    def init_metadata(self, backend, setup):
        """Eager metadata, or a CUDA graph captured at padded_bs and replayed with this batch."""
        if self.runtime is None:
            self._server_args._global_server_args = setup.runner.server_args
        if not setup.graph:
            # model_runner.forward_idle: an IDLE batch of no rows keeps the old metadata
            if setup.fb.batch_size > 0 or setup.mode != "idle":
                backend.init_forward_metadata(setup.fb)
            return
        import torch

        fb, n = setup.fb, setup.padded_bs
        tokens = int(fb.positions.shape[0])
        # cuda_graph_runner: an IDLE batch replays the graph captured for DECODE
        capture_mode = self.ForwardMode.DECODE if fb.forward_mode.is_idle() else fb.forward_mode
        backend.init_cuda_graph_state(n, tokens)
        fill = backend.get_cuda_graph_seq_len_fill_value()
        # The runner's static buffers: captured with fill values, refilled in place for the replay.
        seq_lens = torch.full_like(fb.seq_lens, fill)
        rows = torch.zeros_like(fb.req_pool_indices)
        if hasattr(backend, "init_forward_metadata_capture_cuda_graph"):  # up to 0.5.12
            backend.init_forward_metadata_capture_cuda_graph(n, tokens, rows, seq_lens, None, capture_mode,
                                                             fb.spec_info)
            replay = backend.init_forward_metadata_replay_cuda_graph
            extra = {"out_cache_loc": fb.out_cache_loc} if "out_cache_loc" in inspect.signature(replay).parameters else {}
            replay(n, fb.req_pool_indices, fb.seq_lens, fb.seq_lens_sum, None, fb.forward_mode, fb.spec_info,
                   seq_lens_cpu=fb.seq_lens_cpu, **extra)
            return
        # 0.5.13 on (cuda_graph_runner.capture_one_batch_size / replay_prepare): out_graph(in_capture=True)
        # and in_graph at capture; out_graph on the replay view, then the graph replays the in-graph
        # part over the same static buffers, here by running it again on the capture batch.
        capture = types.SimpleNamespace(**vars(fb))
        capture.forward_mode, capture.req_pool_indices, capture.seq_lens = capture_mode, rows, seq_lens
        capture.seq_lens_cpu, capture.seq_lens_sum = seq_lens.cpu(), None
        backend.init_forward_metadata_out_graph(capture, in_capture=True)
        backend.init_forward_metadata_in_graph(capture)
        rows.copy_(fb.req_pool_indices)
        seq_lens.copy_(fb.seq_lens)
        view = types.SimpleNamespace(  # cuda_graph_runner.build_replay_fb_view
            batch_size=n, forward_mode=capture_mode, actual_forward_mode=fb.forward_mode,
            input_ids=torch.zeros(tokens, dtype=torch.int64, device=fb.seq_lens.device), req_pool_indices=rows,
            seq_lens=seq_lens, seq_lens_sum=fb.seq_lens_sum, seq_lens_cpu=fb.seq_lens_cpu, encoder_lens=None,
            out_cache_loc=fb.out_cache_loc, spec_info=fb.spec_info)
        if self.runtime is not None:  # 0.5.23's view adds the padded positions and the batch's KVLocPlan
            view.positions, view.num_padding = fb.positions, n - setup.bs
            for name in ("out_cache_loc_virtual", "kv_loc_plan", "kv_loc_cols", "max_seq_len_host",
                         "max_seq_len_override", "lora_ids", "can_run_decode_cuda_graph"):
                setattr(view, name, getattr(fb, name))
            view.origin_out_cache_loc = view.out_cache_loc_dsv4 = view.mamba_track_indices = None
        backend.init_forward_metadata_out_graph(view)
        backend.init_forward_metadata_in_graph(capture)

    def init_draft_metadata(self, multi, setup):
        """TritonMultiStepDraftBackend's metadata for every draft step at once, as the EAGLE worker builds it."""
        # The EAGLE worker builds every step's metadata once, before step 0, when the batch's positions
        # are the drafts' first positions (seq_len, per branch); generate_draft_decode_kv_indices sums them.
        fb = types.SimpleNamespace(**vars(setup.fb))
        fb.positions = fb.seq_lens.repeat_interleave(setup.topk)
        if not setup.graph:
            multi.init_forward_metadata(fb)
            return
        n = setup.padded_bs
        multi.init_cuda_graph_state(n, n * setup.topk)
        if hasattr(multi, "init_forward_metadata_capture_cuda_graph"):  # up to 0.5.12
            multi.init_forward_metadata_capture_cuda_graph(fb)
            multi.init_forward_metadata_replay_cuda_graph(fb, n)
            return
        # 0.5.13 on (eagle_draft_cuda_graph_runner): out_graph(in_capture=True) and in_graph at capture; at
        # replay out_graph on the batch with its padding, then the graph replays the in-graph part.
        multi.init_forward_metadata_out_graph(fb, in_capture=True)
        multi.init_forward_metadata_in_graph(fb)
        multi.init_forward_metadata_out_graph(types.SimpleNamespace(**vars(fb), num_padding=n - setup.bs))
        multi.init_forward_metadata_in_graph(fb)
'''
# ---- adapters/sglang/fixes.py of kvfuzz, as module fixes ----
EMBEDDED["fixes"] = r'''
"""Upstream fixes, re-expressed here, applied on top of a pinned release (--fix N).

kvfuzz finds a bug in the release that shipped it; applying the upstream fix must make the finding
go away, while every other case stays clean (one entry, 26512, is an upstream change that was
reverted: kvfuzz finds the bug it introduces). Each fix below is written from the pull request's
description (cited), as the smallest change to the release's own functions (one, fa-extend-local,
is the fix kvfuzz proposes in a report draft, with no upstream PR yet); where a later release
with the fix is installable, run that release instead.
"""
import contextlib
import functools
import importlib
import inspect


def _fa():
    import importlib

    return importlib.import_module("sglang.srt.layers.attention.flashattention_backend")


def fix_24617(sg):
    """sglang #24617: FA3 target verify with topk > 1 on sliding-window layers of a hybrid-SWA pool
    builds swa_spec_metadata.page_table from full-pool slots; the fix translates both source
    tables with translate_loc_from_full_to_swa before prepare_swa_spec_page_table_triton."""
    fa = _fa()
    original = fa.FlashAttentionBackend._init_sliding_window_attn_spec_metadata
    prepare = fa.prepare_swa_spec_page_table_triton

    @functools.wraps(original)
    def patched(self, metadata, metadata_expand, metadata_swa=None):
        if not self.use_sliding_window_kv_pool:
            return original(self, metadata, metadata_expand, metadata_swa)
        pool = self.token_to_kv_pool

        def translated(dst, a, b, *rest):
            return prepare(dst, pool.translate_loc_from_full_to_swa(a), pool.translate_loc_from_full_to_swa(b), *rest)

        with _swapped(fa, "prepare_swa_spec_page_table_triton", translated):
            return original(self, metadata, metadata_expand, metadata_swa)

    fa.FlashAttentionBackend._init_sliding_window_attn_spec_metadata = patched


def fix_26512(sg):
    """sglang #26512, reverted by #26628: it took DRAFT_EXTEND_V2's forward_batch.seq_lens for the
    cache length before the step's tokens and added the extend lengths to FA's cache_seqlens, eagerly
    and in CUDA-graph replay. The v2 worker's seq_lens already include them
    (eagle_info_v2.prepare_for_extend_to_fill_draft_kvcache), so the change reads past the cache:
    kvfuzz finds it with the change applied (ci/sglang.sh seeds, change=26512) and not without."""
    fa = _fa()
    original = fa.FlashAttentionBackend.init_forward_metadata
    replay = fa.FlashAttentionBackend.init_forward_metadata_replay_cuda_graph

    @functools.wraps(replay)
    def patched_replay(self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info,
                       seq_lens_cpu, **kwargs):
        if forward_mode.is_draft_extend_v2():
            extend = spec_info.extend_seq_lens_tensor.to(seq_lens.dtype)
            seq_lens = seq_lens + extend
            seq_lens_cpu = seq_lens_cpu + extend.cpu().to(seq_lens_cpu.dtype)
            seq_lens_sum = int(seq_lens_cpu.sum())
        return replay(self, bs, req_pool_indices, seq_lens, seq_lens_sum, encoder_lens, forward_mode, spec_info,
                      seq_lens_cpu, **kwargs)

    fa.FlashAttentionBackend.init_forward_metadata_replay_cuda_graph = patched_replay

    @functools.wraps(original)
    def patched(self, forward_batch):
        if not forward_batch.forward_mode.is_draft_extend_v2():
            return original(self, forward_batch)
        import torch

        seq_lens, seq_lens_cpu = forward_batch.seq_lens, forward_batch.seq_lens_cpu
        try:
            forward_batch.seq_lens = seq_lens + forward_batch.extend_seq_lens
            forward_batch.seq_lens_cpu = seq_lens_cpu + torch.tensor(forward_batch.extend_seq_lens_cpu)
            return original(self, forward_batch)
        finally:
            forward_batch.seq_lens, forward_batch.seq_lens_cpu = seq_lens, seq_lens_cpu

    fa.FlashAttentionBackend.init_forward_metadata = patched


def fix_32902(sg):
    """sglang #32902: eager local-attention metadata hands make_local_attention_virtual_batches
    the token-granular page table; the fix strides and divides it to page ids first (page_size > 1)."""
    fa = _fa()
    original = fa.FlashAttentionBackend._maybe_init_local_attn_metadata
    make = fa.make_local_attention_virtual_batches

    @functools.wraps(original)
    def patched(self, forward_batch, metadata, device):
        if self.page_size == 1:
            return original(self, forward_batch, metadata, device)

        def paged(chunk, cu_q, seq_lens, table, page_size):
            return make(chunk, cu_q, seq_lens, table[:, ::page_size] // page_size, page_size)

        with _swapped(fa, "make_local_attention_virtual_batches", paged):
            return original(self, forward_batch, metadata, device)

    fa.FlashAttentionBackend._maybe_init_local_attn_metadata = patched


def fix_32087(sg):
    """sglang PR 32087 (open): the Triton decode window CSR keeps min(seq_len, W) keys, but the
    decode query (position seq_len - 1) sees W + 1; the decode paths (eager and CUDA-graph replay)
    must take min(seq_len, W + 1). Extend and verify prefixes need W, as they have."""
    import importlib

    tb = importlib.import_module("sglang.srt.layers.attention.triton_backend")
    cls = tb.TritonAttnBackend

    def widened(name):
        original = getattr(tb, name)
        at = list(inspect.signature(original).parameters).index("sliding_window_size")

        def call(*args, **kwargs):
            args = list(args)
            args[at] += 1
            return original(*args, **kwargs)

        return call

    def decode_only(method, mode_of):
        @functools.wraps(method)
        def patched(self, *args, **kwargs):
            if not mode_of(args, kwargs).is_decode_or_idle():
                return method(self, *args, **kwargs)
            with _swapped(tb, "update_sliding_window_buffer", widened("update_sliding_window_buffer")), \
                    _swapped(tb, "update_sliding_window_buffer_cuda_graph",
                             widened("update_sliding_window_buffer_cuda_graph")):
                return method(self, *args, **kwargs)

        return patched

    cls.init_forward_metadata = decode_only(cls.init_forward_metadata, lambda a, k: a[0].forward_mode)
    cls.init_forward_metadata_replay_cuda_graph = decode_only(
        cls.init_forward_metadata_replay_cuda_graph, lambda a, k: k.get("forward_mode", a[5] if len(a) > 5 else None))


def fix_31501(sg):
    """sglang #31501: the sliding-window paged prefill wrapper is planned without window_left, so
    FlashInfer compiles its per-key window mask out and a window_left given at forward() only moves
    the tile start (paged-only prefill: --enable-deterministic-inference, SGLANG_FLASHINFER_USE_PAGED,
    piecewise CUDA graphs, multimodal models). The fix passes window_left at plan time for the window
    wrapper in a normal extend (not in speculative verify, which keeps its tree mask)."""
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    updater = fi.FlashInferIndicesUpdaterPrefill
    original = updater.update_sliding_window

    @functools.wraps(original)
    def patched(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens, prefill_wrappers,
                use_ragged, encoder_lens, spec_info, *args, **kwargs):
        window = prefill_wrappers[0]
        if spec_info is not None or use_ragged:
            return original(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens,
                            prefill_wrappers, use_ragged, encoder_lens, spec_info, *args, **kwargs)
        plan = window.begin_forward
        window.begin_forward = functools.partial(plan, window_left=self.sliding_window_size)
        try:
            return original(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens,
                            prefill_wrappers, use_ragged, encoder_lens, spec_info, *args, **kwargs)
        finally:
            window.begin_forward = plan

    updater.update_sliding_window = patched


def fix_fa_extend_local(sg):
    """kvfuzz's proposed fix for kvfuzz-fa-mixed-local and kvfuzz-fa-draft-extend-local (no upstream
    PR; adapters/repro/reports.json): FA3's eager init_forward_metadata builds the local-attention
    metadata of the extend branch only when forward_mode == EXTEND; the fix builds it for every mode
    of that branch (MIXED, DRAFT_EXTEND, DRAFT_EXTEND_V2), as
    is_extend_or_draft_extend_or_mixed(include_draft_extend_v2=True) would test it. Re-expressed as:
    after the release's own init_forward_metadata, the same _maybe_init_local_attn_metadata call on
    the metadata it built, for those modes."""
    fa = _fa()
    cls = fa.FlashAttentionBackend
    original = cls.init_forward_metadata
    takes_batch = "forwardbatch" in inspect.signature(cls._maybe_init_local_attn_metadata).parameters  # up to 0.5.13

    @functools.wraps(original)
    def patched(self, forward_batch):
        result = original(self, forward_batch)
        mode = forward_batch.forward_mode
        if mode.name in ("MIXED", "DRAFT_EXTEND", "DRAFT_EXTEND_V2"):
            args = (forward_batch,) if takes_batch else ()
            self._maybe_init_local_attn_metadata(*args, self.forward_metadata, forward_batch.seq_lens.device)
        return result

    cls.init_forward_metadata = patched


def fix_39287(sg):
    """sglang PR 39287 (open), FlashInfer half, for 0.5.23: EAGLE target verify on a sliding-window
    layer trims the prefix to the window (update_sliding_window: paged_kernel_lens = min(seq_lens, W),
    kv_start_idx = seq_lens - W), but EagleVerifyInput.generate_attn_arg_prefill is not handed
    kv_start_idx (call_begin_forward passes it for DFLASH only), so it gathers from column 0, and it
    returns the custom mask laid out for the full prefix (seq_len + D columns a row) while FlashInfer
    reads it with the trimmed width. The fix, as the PR describes it: gather from kv_start_idx and
    compact each request's mask to the kept columns, masking every key (prefix or draft ancestor)
    before each draft's own window (a draft sits at seq_len + depth, the depth read off the tree mask)."""
    fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    eagle = importlib.import_module("sglang.srt.speculative.eagle_info")
    import torch

    updater = fi.FlashInferIndicesUpdaterPrefill
    begin = updater.call_begin_forward
    generate = eagle.EagleVerifyInput.generate_attn_arg_prefill

    @functools.wraps(begin)
    def patched_begin(self, wrapper_ragged, wrapper_paged, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum,
                      seq_lens, prefix_lens, kv_start_idx, *args, **kwargs):
        spec = args[3] if len(args) > 3 else kwargs.get("spec_info")
        window = getattr(self, "sliding_window_size", None)
        if isinstance(spec, eagle.EagleVerifyInput) and kv_start_idx is not None and window is not None:
            is_window_wrapper = wrapper_paged is self.attn_backend.prefill_wrappers_verify[0]
            spec._kvfuzz_trim = (kv_start_idx, seq_lens, window if is_window_wrapper else None)
        try:
            return begin(self, wrapper_ragged, wrapper_paged, req_pool_indices, paged_kernel_lens,
                         paged_kernel_lens_sum, seq_lens, prefix_lens, kv_start_idx, *args, **kwargs)
        finally:
            if isinstance(spec, eagle.EagleVerifyInput):
                spec._kvfuzz_trim = None

    @functools.wraps(generate)
    def patched_generate(self, *, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, translator, plan,
                         kind=eagle.IdSpaceKind.FULL):
        trim = getattr(self, "_kvfuzz_trim", None)
        if trim is None:
            return generate(self, req_pool_indices=req_pool_indices, paged_kernel_lens=paged_kernel_lens,
                            paged_kernel_lens_sum=paged_kernel_lens_sum, translator=translator, plan=plan, kind=kind)
        start, seq_lens, window = trim
        d = self.draft_token_num
        bs = req_pool_indices.numel()
        device = req_pool_indices.device
        qo_indptr = torch.arange(0, (1 + bs) * d, step=d, dtype=torch.int32, device=device)
        lens = paged_kernel_lens + d
        indptr = torch.zeros((bs + 1,), dtype=torch.int32, device=device)
        indptr[1:] = torch.cumsum(lens, dim=0)
        kv_indices = torch.empty(paged_kernel_lens_sum + d * bs, dtype=torch.int32, device=device)
        translator.pack_read_stream(plan, req_pool_indices=req_pool_indices, seq_lens=lens, indptr=indptr,
                                    out=kv_indices, kv_start_idx=start, kind=kind)
        full, rows, at = self.custom_mask, [], 0
        for i in range(bs):
            seq, s0 = int(seq_lens[i]), int(start[i])
            block = full[at:at + d * (seq + d)].view(d, seq + d)
            at += d * (seq + d)
            kept = block[:, s0:].clone()
            if window is not None:  # key positions: the kept prefix, then each draft at seq + depth
                depth = block[:, seq:].sum(dim=1) - 1
                keys = torch.cat([torch.arange(s0, seq, device=device), seq + depth])
                kept &= keys[None, :] >= (seq + depth - window)[:, None]
            rows.append(kept.reshape(-1))
        return kv_indices, indptr, qo_indptr, torch.cat(rows)

    updater.call_begin_forward = patched_begin
    eagle.EagleVerifyInput.generate_attn_arg_prefill = patched_generate


@contextlib.contextmanager
def _swapped(module, name, value):
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


FIXES = {"24617": fix_24617, "26512": fix_26512, "31501": fix_31501, "32087": fix_32087, "32902": fix_32902,
         "39287": fix_39287, "fa-extend-local": fix_fa_extend_local}


def apply(sg, number):
    FIXES[number](sg)
'''
# ---- adapters/repro/fa3_standin.py of kvfuzz, as module fa3_standin ----
EMBEDDED["fa3_standin"] = r'''
"""A stand-in for FlashAttention 3's paged-KV kernel and sgl-kernel's merge_state_v2, in plain torch.

Where it sits: the one piece of an FA reproducer (adapters/repro/sglang_metadata.py, backend fa)
that is not from upstream. sglang's FlashAttentionBackend runs unchanged, metadata and forward;
only the kernel it calls, sgl-kernel's flash_attn_with_kvcache (an 852 MB library), is replaced by
this function, which computes what the kernel's documentation (the docstring of
flash_attn_with_kvcache in sgl_kernel/flash_attn.py and in sglang's own
kernels/ops/attention/flash_attention.py) says it computes from the arguments it is handed, and
nothing else: no knowledge of requests, positions or the right answer. adapters/tests/
fa3_standin_test.py checks it against a float64 attention from logical positions.

    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, page_table=pt, cache_seqlens=lens,
                                       cu_seqlens_q=cu, max_seqlen_q=m, causal=True,
                                       window_size=(w, -1), return_softmax_lse=True)

The semantics, per batch entry b (seqlen_q = cu_seqlens_q[b+1] - cu_seqlens_q[b], seqlen_k =
cache_seqlens[b]): key j (0 <= j < seqlen_k) is k_cache[page_table[b, j // page], j % page]; query
i attends key j when, with d = i + seqlen_k - seqlen_q (the bottom-right alignment),
  causal:                j <= d
  window_size (l, r):    d - l <= j (l >= 0) and j <= d + r (r >= 0)
  attention_chunk c > 0: j >= d // c * c
GQA: query head h reads KV head h // (heads / kv_heads). Scores are q.k * softmax_scale, soft-capped
as softcap * tanh(s / softcap) when softcap > 0. A query with no key gets 0 (lse -inf). Queries past
max_seqlen_q in their entry are not computed by the kernel (its grid covers max_seqlen_q rows): NaN
here. softmax_lse is [heads, total_q] (varlen) or [batch, heads, seqlen_q], natural log. A page id
outside k_cache raises IndexError, as the kernel would fault. Arguments that change the math and
that sglang does not pass on these paths (new K/V, rotary, descales, sinks, score/mask mods,
leftpad, batch index) raise NotImplementedError rather than being ignored.
"""
import math

import torch

# Arguments accepted at their default only (any other value would change the math modelled here).
_ONLY_DEFAULT = ("k", "v", "qv", "rotary_cos", "rotary_sin", "cache_batch_idx", "cache_leftpad", "rotary_seqlens",
                 "q_descale", "k_descale", "v_descale", "sinks", "score_mod", "aux_tensors", "mask_mod", "sfq", "sfk",
                 "sfv", "rel_bias", "rel_bias_prep_cache")
# Arguments that only tune the schedule (which keys are read does not depend on them).
_SCHEDULE = ("cu_seqlens_k_new", "rotary_interleaved", "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin",
             "ver", "only_qv", "max_seqlen_k")


def _entry(q, k_cache, v_cache, table, seqlen_k, scale, causal, window, chunk, softcap):
    """One batch entry: q [seqlen_q, H, D] -> (out [seqlen_q, H, Dv] float32, lse [H, seqlen_q])."""
    sq, heads = q.shape[0], q.shape[1]
    page = k_cache.shape[1]
    j = torch.arange(seqlen_k, device=q.device)
    pages = table[j // page].long() if seqlen_k else j
    if seqlen_k and (pages.min() < 0 or pages.max() >= k_cache.shape[0]):
        raise IndexError(f"page_table holds page {int(pages.max() if pages.max() >= k_cache.shape[0] else pages.min())}"
                         f" outside k_cache's {k_cache.shape[0]} pages")
    k = k_cache[pages, j % page].float()  # [seqlen_k, Hk, D]
    v = v_cache[pages, j % page].float()
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [seqlen_k, H, *]
    s = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    d = torch.arange(sq, device=q.device)[:, None] + seqlen_k - sq  # [seqlen_q, 1]
    keep = torch.ones(sq, seqlen_k, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j[None, :] <= d
    if window[0] >= 0:
        keep &= j[None, :] >= d - window[0]
    if window[1] >= 0:
        keep &= j[None, :] <= d + window[1]
    if chunk:
        keep &= j[None, :] >= torch.div(d, chunk, rounding_mode="floor") * chunk
    s = s.masked_fill(~keep[None], -math.inf)
    lse = torch.logsumexp(s, dim=-1)  # [H, seqlen_q]; -inf for a query with no key
    p = torch.where(keep[None], torch.exp(s - lse.clamp_min(-1e30)[..., None]), torch.zeros_like(s))
    return torch.einsum("hqk,khd->qhd", p, v), lse


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, page_table=None, cu_seqlens_q=None,
                            max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            attention_chunk=None, softcap=0.0, return_softmax_lse=False, out=None, **other):
    """FA3's flash_attn_with_kvcache over a paged cache, computed as documented (module docstring)."""
    for name, value in other.items():
        if name in _ONLY_DEFAULT and value is not None:
            raise NotImplementedError(f"the FA3 stand-in does not model flash_attn_with_kvcache({name}=...)")
        if name not in _ONLY_DEFAULT and name not in _SCHEDULE:
            raise NotImplementedError(f"the FA3 stand-in does not know flash_attn_with_kvcache's argument {name}")
    if page_table is None or cache_seqlens is None:
        raise NotImplementedError("the FA3 stand-in models the paged path (page_table, cache_seqlens) only")
    varlen = cu_seqlens_q is not None
    qs = q if varlen else q.reshape(-1, *q.shape[2:])
    heads, dv = q.shape[-2], v_cache.shape[-1]
    batch = page_table.shape[0]
    cu = cu_seqlens_q.long().cpu() if varlen else torch.arange(batch + 1) * q.shape[1]
    lens = cache_seqlens.long().cpu() if torch.is_tensor(cache_seqlens) else torch.full((batch,), int(cache_seqlens))
    limit = int(max_seqlen_q) if varlen and max_seqlen_q is not None else int((cu[1:] - cu[:-1]).max(initial=0))
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    result = torch.full((qs.shape[0], heads, dv), math.nan, dtype=torch.float32, device=q.device)
    lse = torch.full((heads, qs.shape[0]), math.nan, dtype=torch.float32, device=q.device)
    for b in range(batch):
        lo, hi = int(cu[b]), int(cu[b + 1])
        if hi == lo:
            continue
        o, l_ = _entry(qs[lo:hi], k_cache, v_cache, page_table[b], int(lens[b]), scale, causal,
                       (int(window_size[0]), int(window_size[1])), int(attention_chunk or 0), float(softcap or 0.0))
        n = min(hi - lo, limit)  # rows past max_seqlen_q: not computed
        result[lo:lo + n], lse[:, lo:lo + n] = o[:n], l_[:, :n]
    result = result.to(q.dtype)
    if not varlen:
        result = result.reshape(*q.shape[:2], heads, dv)
        lse = lse.reshape(heads, batch, -1).permute(1, 0, 2)
    if out is not None:
        out.copy_(result.view(out.shape))
        result = out
    return (result, lse) if return_softmax_lse else result


def merge_state_v2(v_a, s_a, v_b, s_b, v_merged=None, s_merged=None):
    """sgl-kernel's merge_state_v2: two partial attentions over disjoint keys merged by their LSEs
    (v [tokens, heads, D], s [tokens, heads], natural log); a side with lse -inf weighs nothing."""
    m = torch.maximum(s_a, s_b)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    wa, wb = torch.exp(s_a - m), torch.exp(s_b - m)
    total = wa + wb
    v = (v_a.float() * wa[..., None] + v_b.float() * wb[..., None]) / total.clamp_min(1e-30)[..., None]
    s = m + torch.log(total)
    v = v.to(v_a.dtype)
    if v_merged is not None:
        v_merged.copy_(v)
        v = v_merged
    if s_merged is not None:
        s_merged.copy_(s)
        s = s_merged
    return v, s
'''


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
        return importlib.import_module("flashinfer").__version__
    except Exception as e:  # noqa: BLE001 - any import failure: the package cannot run here
        cannot_run(f"FlashInfer does not import here ({type(e).__name__}: {e})")


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
    return backend, name


def build_fa(sg, setup, case):
    """FlashAttentionBackend with its metadata, FA3's kernel and merge replaced by fa3_standin (FA3's
    library is out of reach): (backend, name). The draft step's backend is built as
    FlashAttentionMultiStepBackend builds each of its steps."""
    fa = importlib.import_module("sglang.srt.layers.attention.flashattention_backend")
    if setup.graph and BUNDLE["mode"] == "draft_decode" and \
            not hasattr(fa.FlashAttentionBackend, "init_forward_metadata_capture_cuda_graph"):
        cannot_run("FA draft decode under a CUDA graph in 0.5.13 and later (per-step write slices) is not modelled")
    standin = importlib.import_module("fa3_standin")

    def unexpected(*args, **kwargs):
        raise NotImplementedError("flash_attn_varlen_func was called: the FA3 stand-in models the paged kernel only")

    backend = fa.FlashAttentionBackend(setup.runner, speculative_step_id=setup.draft_step, topk=setup.spec_topk,
                                       speculative_num_steps=setup.num_steps)
    # The backend calls the kernel as its attribute and (0.5.11 on, in some paths) as a module global.
    backend.flash_attn_with_kvcache = fa.flash_attn_with_kvcache = standin.flash_attn_with_kvcache
    backend.flash_attn_varlen_func = fa.flash_attn_varlen_func = unexpected
    fa.merge_state_v2 = standin.merge_state_v2
    if hasattr(fa, "merge_state_v2_wrapper"):
        fa.merge_state_v2_wrapper = standin.merge_state_v2
    # 0.5.23: FA3's scheduler_metadata precompute (tile scheduling only, not which keys are read):
    # off, as production runs it where sgl_kernel has no get_scheduler_metadata.
    if hasattr(backend, "_get_scheduler_metadata"):
        backend._get_scheduler_metadata = None
    kernel_call(sg.init_metadata, backend, setup)
    step = f" (draft step {setup.draft_step})" if BUNDLE["mode"] == "draft_decode" else ""
    return backend, f"FlashAttentionBackend{step} with the FA3 stand-in kernel (fa3_standin: not from upstream)"


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
    ap.add_argument("--fix", action="append", default=[], help="apply upstream fix N (the embedded fixes module)")
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
    setup = fake_runner.Setup(sg, case, dev, deterministic=args.deterministic,
                              attention_backend={"fa": "fa3"}.get(engine_backend(), engine_backend()))
    # Triton's interpreter runs fp16 (bf16 on a GPU); the FA stand-in computes in float32 from any dtype
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    dtype = dtypes.get(batch.dtype, torch.float16) if engine_backend() == "fa" else \
        torch.bfloat16 if cuda and batch.dtype == "bf16" else torch.float16
    batch.dtype = {v: k for k, v in dtypes.items()}[dtype]
    for pool in (setup.full, setup.swa):  # the stand-in pools in the dtype the kernels run in
        if pool is not None:
            pool.k, pool.v = [x.to(dtype) for x in pool.k], [x.to(dtype) for x in pool.v]
    setup.dtype = setup.runner.dtype = setup.runner.kv_cache_dtype = dtype
    build = {"flashinfer": build_flashinfer, "fa": build_fa}.get(engine_backend(), build_triton)
    backend, name = build(sg, setup, case)
    fb = setup.layer_batch()
    loc = torch.from_numpy(np.asarray(BUNDLE["out_cache_loc"], np.int64)).to(dev)
    f2s = np.asarray(BUNDLE["full_to_swa"][:batch.slots], np.int64)
    full_ids = [i for i, x in enumerate(case.layers) if x["pool"] == "full"]
    swa_ids = [i for i, x in enumerate(case.layers) if x["pool"] == "swa"]
    fixes = "".join(f" with fix {n}" for n in args.fix)
    STATS.update(release=sg.version, fixes=args.fix)
    where = torch.cuda.get_device_name() if cuda else "the CPU" + ("" if engine_backend() == "fa" else " (Triton interpreter)")
    print(f"sglang {sg.version}{fixes} {name} (its metadata code{'' if engine_backend() == 'fa' else ' and kernels'}) on "
          f"{where}, {batch.dtype}, mode "
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
