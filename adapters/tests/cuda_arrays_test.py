"""cuda_arrays' pinned staging ring (adapters/gpu/cuda_arrays.py _Staging), on the CPU: every array
comes out byte for byte with its dtype and shape, across many wraps of a small ring, and no part of
the ring is handed out twice between two device synchronizations (a copy still in flight would read
the second array's bytes). SKIPPED without torch.

    python3 adapters/tests/cuda_arrays_test.py
"""
import os
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("SKIPPED: no torch")
    sys.exit(0)

os.environ["TRITON_INTERPRET"] = "1"  # DEV is the host: the ring is tested without a GPU
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import cuda_arrays  # noqa: E402

staging = cuda_arrays._staging()  # this thread's ring
staging.on, staging.SIZE = True, 4096
staging.ring = torch.empty(staging.SIZE, dtype=torch.uint8)  # pinned memory needs a driver
live = []  # (start, end) of each part handed out since the last synchronization
syncs = 0


def synchronize():
    global syncs
    syncs += 1
    live.clear()


cuda_arrays._wait = synchronize  # the wait for this thread's stream
rng = np.random.default_rng(0)
dtypes = [np.int32, np.int64, np.float32, np.float16, np.float64, np.uint8, np.bool_]
for i in range(3000):
    dt = dtypes[i % len(dtypes)]
    shape = tuple(int(x) for x in rng.integers(1, 9, rng.integers(1, 4)))
    a = rng.random(shape) < 0.5 if dt is np.bool_ else (rng.random(shape) * 100).astype(dt)
    t = cuda_arrays.dev(a)
    if a.nbytes <= staging.SIZE // 4:  # larger ones are copied directly
        end = staging.used
        start = end - a.nbytes
        if any(s < end and start < e for s, e in live):
            sys.exit(f"FAIL: array {i} was staged over a part still in flight ({start}..{end})")
        live.append((start, end))
    if t.dtype != torch.from_numpy(a).dtype or tuple(t.shape) != a.shape or not np.array_equal(t.numpy(), a):
        sys.exit(f"FAIL: array {i} ({np.dtype(dt).name}, {shape}) did not come out as it went in")
    if i % 97 == 0:  # the adapters' sync() (on a GPU): the ring may start over
        synchronize()
        staging.synchronized()
if syncs < 100:
    sys.exit(f"FAIL: only {syncs} synchronizations: the ring never filled")
# Lanes: each thread stages through a ring of its own (a ring shared by two threads' streams would
# start over after one thread's wait while the other's copies are still in flight).
import threading  # noqa: E402
other = []
thread = threading.Thread(target=lambda: other.append(cuda_arrays._staging()))
thread.start()
thread.join()
if other[0] is staging or cuda_arrays._staging() is not staging:
    sys.exit("FAIL: two threads share one staging ring, or one thread got two")
print(f"cuda_arrays staging: 3000 arrays byte for byte, {syncs} synchronizations, no part reused in flight")
