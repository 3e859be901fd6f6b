"""kvfuzz_adapter.npy.load reads what np.load reads, byte for byte, and leaves to np.load (and its
messages) every file it does not read itself. Prints the time of each over one request's worth of
arrays (a figure, not an assertion)."""
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kvfuzz_adapter import npy  # noqa: E402


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main():
    rng = np.random.default_rng(7)
    arrays = {
        "f32": rng.standard_normal((3, 5, 2, 8)).astype(np.float32),
        "f16": rng.standard_normal((7, 4)).astype(np.float16),
        "f64": rng.standard_normal(11),
        "i32": rng.integers(-5, 99, 13, dtype=np.int32),
        "i64": rng.integers(0, 1 << 40, (2, 3), dtype=np.int64),
        "u8": rng.integers(0, 255, 17, dtype=np.uint8),
        "bool": rng.integers(0, 2, 9).astype(bool),
        "big_endian": np.arange(6, dtype=">i4"),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros(0, np.int32),
        "empty2": np.zeros((0, 4), np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((4, 3)).astype(np.float32)),
    }
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for name, a in arrays.items():
            path = f"{d}/{name}.npy"
            np.save(path, a)
            for attempt in range(2):  # the second read of a header comes from the cache
                got = npy.load(path)
                if not same(got, np.load(path)):
                    failures.append(f"{name} (read {attempt + 1}): {got!r} differs from np.load")
        # A file numpy refuses is refused with numpy's own error, not read as something else.
        np.save(f"{d}/short.npy", np.arange(100, dtype=np.int64))
        with open(f"{d}/short.npy", "rb") as f:
            whole = f.read()
        with open(f"{d}/short.npy", "wb") as f:
            f.write(whole[:-8])
        with open(f"{d}/junk.npy", "wb") as f:
            f.write(b"not an npy file at all")
        np.save(f"{d}/objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        for bad in ("short", "junk", "objects"):
            try:
                npy.load(f"{d}/{bad}.npy")
                failures.append(f"{bad}.npy was read; np.load refuses it")
            except ValueError:
                pass
        # The figure: the arrays of a request (a hundred small ones) read both ways.
        paths = []
        for i in range(100):
            paths.append(f"{d}/r{i}.npy")
            np.save(paths[-1], rng.standard_normal((16, 4, 64)).astype(np.float32) if i % 3 else np.arange(40, dtype=np.int32))
        times = {}
        for how, fn in (("np.load", lambda p: np.load(p, allow_pickle=False)), ("npy.load", npy.load)) * 3:
            start = time.perf_counter()
            for p in paths:
                fn(p)
            times[how] = min(times.get(how, 1e9), time.perf_counter() - start)
        print(f"100 arrays: np.load {times['np.load'] * 1e3:.2f} ms, npy.load {times['npy.load'] * 1e3:.2f} ms "
              f"({times['np.load'] / times['npy.load']:.2f}x)")
    for f in failures:
        print("FAIL:", f)
    print("npy_test:", "FAILED" if failures else "passed", f"({len(arrays)} arrays, 3 bad files)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
