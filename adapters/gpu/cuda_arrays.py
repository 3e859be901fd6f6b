"""numpy arrays as CUDA tensors, for the GPU adapters (host tensors under TRITON_INTERPRET=1, where
Triton's interpreter runs the kernels on the CPU).

Lanes (a server answering several requests at once, one thread each: kv.executor(lanes=lane)):
each thread stages through its own pinned ring, and sync() and fetch() wait for the thread's
current stream only, which lane() makes a stream of the thread's own, so one lane's waits do not
wait for the others' kernels."""
import contextlib
import os
import threading

import numpy as np
import torch

DEV = torch.device("cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn}


class _Staging:
    """Pinned host memory that numpy arrays pass through on their way to the GPU. A copy from
    pageable memory blocks the host until every kernel queued before it has run (on a GPU shared by
    several servers, their time slices too), and a request makes dozens; a copy from pinned memory
    is queued like a kernel. The ring starts over only after the thread's stream is synchronized
    (sync(), fetch()), when every copy out of it has finished: one ring per thread (_staging()), its
    copies queued on that thread's current stream. KVFUZZ_GPU_STAGING=0 copies from pageable memory."""
    SIZE = 64 << 20

    def __init__(self):
        self.on = DEV.type == "cuda" and os.environ.get("KVFUZZ_GPU_STAGING", "1") != "0"
        self.ring, self.used = None, 0

    def to_device(self, a):
        if not self.on or a.nbytes > self.SIZE // 4:
            return torch.from_numpy(a).to(DEV)
        if self.ring is None:
            self.ring = torch.empty(self.SIZE, dtype=torch.uint8, pin_memory=True)
        start = -(-self.used // 256) * 256
        if start + a.nbytes > self.SIZE:  # full: wait for the copies out of it, then start over
            _wait()
            start = 0
        self.used = start + a.nbytes
        part = self.ring[start:self.used]
        part.numpy()[:] = a.reshape(-1).view(np.uint8)
        return part.view(torch.from_numpy(a[:0]).dtype).view(a.shape).to(DEV, non_blocking=True)

    def synchronized(self):
        self.used = 0


_THREAD = threading.local()


def _staging():
    """The calling thread's staging ring."""
    if not hasattr(_THREAD, "staging"):
        _THREAD.staging = _Staging()
    return _THREAD.staging


def _wait():
    """Waits for the calling thread's current stream (a lane's own stream: lane())."""
    torch.cuda.current_stream().synchronize()


@contextlib.contextmanager
def lane():
    """A lane's thread, for its life: a CUDA stream of its own made current (torch's current stream is
    per thread), so its kernels and copies run beside the other lanes' (kv.executor(lanes=lane))."""
    if DEV.type != "cuda":
        yield
        return
    with torch.cuda.stream(torch.cuda.Stream()):
        yield


def dev(a, dtype=None, pad_to=None):
    """A numpy array as a CUDA tensor (a CUDA tensor as it is); index arrays of length 0 get one
    unused 0 (a real allocation); pad_to zero-pads the last dimension (zeros add nothing to q.k or
    to the kept V channels)."""
    if isinstance(a, torch.Tensor):
        return a if dtype is None else a.to(dtype).contiguous()
    a = np.ascontiguousarray(a)
    if a.size == 0 and a.ndim == 1:
        a = np.zeros(1, dtype=a.dtype)
    t = _staging().to_device(a)
    if pad_to is not None and t.shape[-1] < pad_to:
        t = torch.nn.functional.pad(t, (0, pad_to - t.shape[-1]))
    return t if dtype is None else t.to(dtype).contiguous()


def device_pool(case, layer, which, dtype, width=0, slots_to=0):
    """Layer's K ("k") or V ("v") pool on the device, [max(slots, slots_to), kv_heads, max(dim, width)]
    (extra slots and columns zero), built from Case.pool_parts: a sparse pool (the `long` profile's,
    over 2^31 elements) never exists dense on the host."""
    n, fill, slots, rows = case.pool_parts(layer, which)
    d = fill.shape[-1]
    t = torch.zeros((max(n, slots_to), fill.shape[0], max(d, width)), dtype=dtype, device=DEV)
    if len(slots) == n:  # every slot stored (a dense pool): slots are 0 .. n-1 in order
        t[:n, :, :d] = dev(rows, dtype)
        return t
    t[:n, :, :d] = dev(fill, dtype)
    if len(slots):
        t[dev(slots), :, :d] = dev(rows, dtype)
    return t


def paged_cache(case, layer, which, dtype, vps):
    """The layer's K ("k") or V ("v") pool viewed as a paged kernel's cache, [pages, vps, kv_heads, dim]
    (vps: the call's view page size; the pool's slots rounded up to whole pages, the rest zero)."""
    n = case.num_slots(layer)
    pool = device_pool(case, layer, which, dtype, slots_to=-(-n // vps) * vps)
    return pool.view(-1, vps, pool.shape[1], pool.shape[2])


class LayerTensors:
    """One layer's query and its K/V caches per view page size on the device, built once and kept
    while the plan's calls stay on that layer: tensors(layer, vps) -> (q, k_cache, v_cache)."""

    def __init__(self, case, q_dtype, cache_dtype):
        self.case, self.q_dtype, self.cache_dtype = case, q_dtype, cache_dtype
        self.layer, self.q, self.caches = None, None, {}

    def __call__(self, layer, vps):
        if self.layer != layer:
            self.layer, self.q, self.caches = layer, dev(self.case.q[layer], self.q_dtype), {}
        if vps not in self.caches:
            self.caches[vps] = tuple(paged_cache(self.case, layer, which, self.cache_dtype, vps) for which in "kv")
        return (self.q,) + self.caches[vps]


def sync():
    """Waits for the kernels of the thread's current stream (nothing to wait for on the host)."""
    if DEV.type == "cuda":
        _wait()
        _staging().synchronized()


def fetch(results):
    """Each (out, lse) of a request's value sets, CUDA tensors, as float32 numpy: one copy to the host
    and one wait for them all (kvfuzz_adapter.executor's `fetch`): .cpu() waits for the thread's
    current stream (a lane's own), as a copy to pageable memory does. Each wait costs a server the
    other processes' time slices on a shared GPU, not only its own kernels."""
    tensors = [t.float().reshape(-1) for pair in results for t in pair]
    flat = torch.cat(tensors).cpu().numpy() if tensors else np.zeros(0, np.float32)
    _staging().synchronized()
    arrays, at = [], 0
    for pair in results:
        arrays.append([])
        for t in pair:
            arrays[-1].append(flat[at:at + t.numel()].reshape(tuple(t.shape)))
            at += t.numel()
    return arrays


def host(t):
    """A CUDA tensor as float32 numpy (bf16 / fp16 values convert exactly)."""
    return t.float().cpu().numpy()
