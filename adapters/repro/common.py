"""kvfuzz's harness of a standalone reproducer written by `kvfuzz repro` (kvfuzz's docs/repro.md):
the reproducer (the script beside this module) holds the batch and the calls; this module, written
with it, the rest. It needs numpy, torch and the package under test (see the part after this one),
not kvfuzz.
The batch is data (the reproducer's BUNDLE: each request's cached and new tokens with the slot and
position of each, each query's token, position, structural keys and the keys it should read in each
layer, the layers' windows or chunks, the seed); the values come from numpy's generator on that
seed. The expected output is computed here in float64 over the keys each query should read, which
kvfuzz derived from logical positions alone: a query at position P sees the keys of its own request
at positions max(0, P - W) .. P (sliding window of radius W), the keys of its chunk (chunked
attention) or every earlier key (full), spec-decode drafts only their tree ancestors. A probe run
(Q = K = 0, so every key the kernel reads weighs the same, and V one-hot per slot) shows which keys
each query did read.

Exit status: 1 the bug is there (a query reads other keys, its output is off, or the kernel
raises), 0 it is not, 2 it cannot run here (a package or device is missing), 3 this script
failed (a traceback outside the kernel call). The last line, `RESULT {json}`, says the same for
machines (kvfuzz's ci/gpu_pair_table.py): exit, device, queries, wrong, max_error, the worst
query's keys (should read / read), what raised or why it cannot run.
"""
# This first part is adapters/repro/common.py of kvfuzz: the values, the expected output and the
# verdict. The part after it (the target's template) calls the kernel.
import argparse
import json
import os
import sys

import numpy as np

BUNDLE = None  # kvfuzz repro

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

    def visible(self, layer_index, row, q):
        """Columns query q of row may read in layer layer_index: kvfuzz's own visible set, written by
        `kvfuzz repro` into each query ("visible": per layer, column ranges; SEMANTICS.md §3, from
        logical positions alone)."""
        return [c for b, e in q["visible"][layer_index] for c in range(b, e)]

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
            cols = batch.visible(li, row, qd)
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
