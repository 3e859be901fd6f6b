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

BUNDLE = json.loads(r'''{"backend":"flashinfer_paged:flashinfer_paged_csr","bs":2,"case":{"batch":{"device_sms":0,"entries":[{"extend_len":1,"request":0},{"extend_len":3,"request":1}],"graph_bs":0,"kv_splits":1,"mode":"extend"},"cache":{"full_pages":3,"max_context_len":4,"max_requests":4,"page_size":2,"sort_free":false,"swa_pages":0},"history":[{"op":"admit","request":0},{"op":"admit","request":1},{"len":1,"op":"extend","request":1}],"model":{"head_dim":1,"kv_heads":2,"layers":[{"kind":"sliding_window","window":2},{"kind":"sliding_window","window":2}],"mla":false,"q_heads":4,"sm_scale":0.125,"softcap":30.0,"v_head_dim":1},"values":{"dtype":"bf16","fill":"signature","poison":true,"seed":11887489247174541438},"version":2},"dtype":"bf16","engine_request":null,"executor":"flashinfer_paged_csr","finding":{"case":"corpus/gpu/flashinfer_mask_indptr_empty_row.json","replay":"kvfuzz check corpus/gpu/flashinfer_mask_indptr_empty_row.json --backend flashinfer_paged:flashinfer_paged_csr"},"full_to_swa":[],"hybrid":false,"kvfuzz_repro":1,"mode":"extend","model":{"head_dim":1,"kv_heads":2,"layers":[{"chunk":0,"kind":"sliding_window","window":2},{"chunk":0,"kind":"sliding_window","window":2}],"mla":false,"q_heads":4,"sm_scale":0.125,"softcap":30.0,"v_head_dim":1},"num_tokens":4,"out_cache_loc":[4,3,6,7],"page_size":2,"plan":{"arrays":{"groups.0.calls.0.custom_mask":[],"groups.0.calls.0.kv_indices":[],"groups.0.calls.0.kv_indptr":[0,1,4],"groups.0.calls.0.kv_last_page_len":[],"groups.0.calls.0.mask_indptr":[],"groups.0.calls.0.qo_indptr":[0,1,4],"groups.0.calls.1.custom_mask":[1,1,0],"groups.0.calls.1.kv_indices":[1],"groups.0.calls.1.kv_indptr":[0,0,1],"groups.0.calls.1.kv_last_page_len":[1,1],"groups.0.calls.1.mask_indptr":[0,0,3],"groups.0.calls.1.qo_indptr":[0,1,4]},"family":"paged_csr","meta":{"group_of_layer":[0,0],"groups":[{"calls":[{"causal":true,"empty_padded_rows":false,"has_mask":false,"page_size":2,"role":"ragged","rows":2,"rows_per_batch_row":1,"window_left":2},{"causal":false,"empty_padded_rows":false,"has_mask":true,"page_size":2,"role":"prefix","rows":2,"rows_per_batch_row":1,"window_left":-1}],"layer":{"chunk":0,"kind":"sliding_window","window":2}}],"merge":"flashinfer_base2","page_size":2}},"planner":"flashinfer_paged","pool_slots":8,"positions":[0,1,2,3],"release":"","rows":[{"columns":[[4,0,1]],"prefix_len":0,"queries":[{"column":0,"own":[[0,1]],"position":0,"token":0}],"req_pool_index":1,"request":0},{"columns":[[2,0,2],[6,2,2]],"prefix_len":1,"queries":[{"column":1,"own":[[1,2]],"position":1,"token":1},{"column":2,"own":[[1,3]],"position":2,"token":2},{"column":3,"own":[[1,4]],"position":3,"token":3}],"req_pool_index":2,"request":1}],"seed":11887489247174541438,"swa_slots":0,"target":"flashinfer_paged_mask","topk":1}''')

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


if __name__ == "__main__":
    run_main(main)
