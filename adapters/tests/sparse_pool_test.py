"""kvfuzz_adapter reads a pool sent dense and the same pool sent sparse to the same arrays.

Usage: python3 sparse_pool_test.py DENSE_DIR SPARSE_DIR — two executor request folders of one
case (backends/tests/contract_test.cc, Exchange.*, writes them). Exits 1 naming what differs.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kvfuzz_adapter.case import Case  # noqa: E402
from kvfuzz_adapter.guarded import Guarded  # noqa: E402


def open_case(folder):
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    guarded = Guarded()
    return Case(manifest, folder, "main", guarded, {}), guarded, manifest


def main(dense_dir, sparse_dir):
    dense, _, dense_manifest = open_case(dense_dir)
    sparse, guarded, sparse_manifest = open_case(sparse_dir)
    failures = []
    for layer in range(len(dense.layers)):
        name = f"k_cache.{layer}"
        if dense_manifest["sets"]["main"][name].get("sparse"):
            failures.append(f"{dense_dir}: {name} is sparse")
        if not sparse_manifest["sets"]["main"][name].get("sparse"):
            failures.append(f"{sparse_dir}: {name} is not sparse")
        for which in ("k", "v"):
            want = dense.k_cache(layer) if which == "k" else dense.v_cache(layer)
            got = sparse.k_cache(layer) if which == "k" else sparse.v_cache(layer)
            if got.shape != want.shape or got.dtype != np.float32 or not np.array_equal(got, want, equal_nan=True):
                failures.append(f"layer {layer} {which}: the materialized sparse pool differs from the dense one")
            n, fill, slots, rows = sparse.pool_parts(layer, which)
            if n != want.shape[0] or sparse.num_slots(layer) != n:
                failures.append(f"layer {layer} {which}: pool_parts says {n} slots, the pool has {want.shape[0]}")
            if np.any(np.diff(slots) <= 0):
                failures.append(f"layer {layer} {which}: slots are not ascending")
            unstored = np.setdiff1d(np.arange(n), slots)
            if not np.array_equal(want[slots], rows, equal_nan=True) or \
                    not np.array_equal(want[unstored], np.broadcast_to(fill, (unstored.size,) + fill.shape), equal_nan=True):
                failures.append(f"layer {layer} {which}: pool_parts do not make up the pool")
            pick = np.array([0, n - 1, int(slots[len(slots) // 2])], dtype=np.int64)
            if not np.array_equal(sparse.pool_rows(layer, which, pick), want[pick], equal_nan=True):
                failures.append(f"layer {layer} {which}: pool_rows differs from k_cache[slots]")
    if guarded.violations():
        failures.append(f"guard check without any write: {guarded.violations()}")
    # A write into a materialized pool is an input written.
    sparse.k_cache(0)[0, 0, 0] += 1.0
    if not any("k_cache.0" in v for v in guarded.violations()):
        failures.append("a write into the materialized k_cache.0 went unnoticed")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
