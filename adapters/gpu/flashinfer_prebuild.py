"""FlashInfer's JIT kernels for flashinfer_paged_csr, built ahead of a campaign, several at once.

FlashInfer compiles each kernel variant at its first use (an nvcc build of tens of seconds: dtype,
head-dim width, sliding window, soft cap; decode and prefill modules apart), and a campaign of
flashinfer_paged_csr meets dozens of them: on a fresh H200 its 45 s campaigns were all first calls
(docs/gpu.md). This runs every variant the executor can meet, each through the executor's own calls
(flashinfer_kernels.decode, prefill_paged, prefill_ragged, merge_state) on a one-row batch, spread
over worker processes: each build happens once (FlashInfer's file lock), in FLASHINFER_WORKSPACE_BASE's
cache, where the campaign's servers then load it. The variants: the dtypes the executor declares
(flashinfer_choice.PAGED_CSR_DTYPES) x the widths it pads head dims to (64, 128, 256) x window or
not x soft cap or not; each with the CUDA-core decode (GQA group 1), the tensor-core decode (group 4),
the paged prefill (causal, and with a custom mask) and the ragged prefill, and a merge_state.

    PYTHONPATH=.gpu/site:adapters FLASHINFER_WORKSPACE_BASE=.gpu-cache \\
        python3 adapters/gpu/flashinfer_prebuild.py [--jobs N] [--dtypes bf16,fp16] [--widths 64,128]

Prints a line a variant as it ends (its seconds, or its error) and a total. Exit 1 when a variant
failed (the campaign would meet the same failure), 2 on a bad flag. KVFLASHINFER_EMULATE=1 runs the
same calls through flashinfer_emulated (no torch, no FlashInfer): a CPU check of this script's calls.
"""
import argparse
import itertools
import multiprocessing
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import flashinfer_choice  # noqa: E402
from flashinfer_paged_csr import WIDTHS, kernels  # noqa: E402  (FlashInfer's, or the emulation's)

WINDOW, SOFTCAP, PAGE_SIZE, KEYS = 4, 30.0, 4, 8


def variants(dtypes, widths):
    return list(itertools.product(dtypes, widths, (False, True), (False, True)))


def warm(variant):
    """Runs one variant's calls; (variant, seconds, error or None)."""
    dtype, w, windowed, capped = variant
    start = time.perf_counter()
    try:
        rng = np.random.default_rng(0)
        fp8 = dtype == "fp8_e4m3"
        scales = (None, 1.0, 1.0) if fp8 else (None, None, None)
        common = dict(sm_scale=w ** -0.5, logits_soft_cap=SOFTCAP if capped else 0.0,
                      window_left=WINDOW if windowed else -1, dtype=dtype)
        pages = KEYS // PAGE_SIZE
        kv_indptr = np.array([0, pages], np.int32)
        kv_indices = np.arange(pages, dtype=np.int32)
        last = np.array([PAGE_SIZE], np.int32)
        for group in (1, 4):  # the CUDA-core decode, and the tensor-core one (flashinfer_paged_csr: group >= 4)
            hkv, h = 1, group
            k = rng.standard_normal((pages, PAGE_SIZE, hkv, w)).astype(np.float32)
            v = rng.standard_normal((pages, PAGE_SIZE, hkv, w)).astype(np.float32)
            q = rng.standard_normal((1, h, w)).astype(np.float32)
            if not flashinfer_choice.refusal("decode", False, fp8, group >= 4):
                kernels.decode(q, k, v, kv_indptr, kv_indices, last, page_size=PAGE_SIZE, use_tensor_cores=group >= 4,
                               num_qo_heads=h, num_kv_heads=hkv, scales=scales, **common)
            qo_indptr = np.array([0, 2], np.int32)
            q2 = rng.standard_normal((2, h, w)).astype(np.float32)
            outs = []
            for mask in (None, np.ones(2 * KEYS, bool)):
                if flashinfer_choice.refusal("prefill", mask is not None, fp8, group >= 4):
                    continue
                outs.append(kernels.prefill_paged(q2, k, v, qo_indptr, kv_indptr, kv_indices, last,
                                                  page_size=PAGE_SIZE, causal=mask is None, custom_mask=mask,
                                                  num_qo_heads=h, num_kv_heads=hkv, scales=scales, **common))
            if not flashinfer_choice.refusal("ragged", False, fp8, group >= 4):
                k_new, v_new = (rng.standard_normal((2, hkv, w)).astype(np.float32) for _ in range(2))
                outs.append(kernels.prefill_ragged(q2, k_new, v_new, qo_indptr, np.array([0, 2], np.int32),
                                                   causal=True, custom_mask=None, num_qo_heads=h, num_kv_heads=hkv,
                                                   **common))
            if len(outs) >= 2:
                kernels.merge_state(*outs[0], *outs[1], dtype)
        fetch = getattr(kernels, "FETCH", None)
        if fetch is not None and outs:
            fetch(outs)  # waits for the device: a kernel that fails to launch fails here, not in the campaign
        return variant, time.perf_counter() - start, None
    except Exception as e:  # noqa: BLE001 (a variant FlashInfer cannot build is reported, the others go on)
        return variant, time.perf_counter() - start, f"{type(e).__name__}: {e}"


def listed(text, allowed, what, convert=str):
    values = [convert(x) for x in text.split(",") if x]
    bad = [x for x in values if x not in allowed]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"--{what}: {','.join(map(str, bad)) or 'none'} (allowed: "
                                         f"{','.join(map(str, allowed))})")
    return values


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: the cores)")
    p.add_argument("--dtypes", default=",".join(flashinfer_choice.PAGED_CSR_DTYPES))
    p.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    a = p.parse_args()
    try:
        dtypes = listed(a.dtypes, flashinfer_choice.PAGED_CSR_DTYPES, "dtypes")
        widths = listed(a.widths, WIDTHS, "widths", int)
    except (argparse.ArgumentTypeError, ValueError) as e:
        p.error(str(e))  # exit 2
    if a.jobs < 1:
        p.error("--jobs must be 1 or more")
    todo = variants(dtypes, widths)
    print(f"flashinfer_prebuild: {len(todo)} variants, backend {flashinfer_choice.BACKEND}, {a.jobs} processes",
          flush=True)
    start, failed = time.perf_counter(), 0
    context = multiprocessing.get_context("spawn")  # each worker its own CUDA context
    with context.Pool(min(a.jobs, len(todo))) as pool:
        for i, (variant, seconds, error) in enumerate(pool.imap_unordered(warm, todo), 1):
            dtype, w, windowed, capped = variant
            name = f"{dtype} width {w}{' window' if windowed else ''}{' softcap' if capped else ''}"
            print(f"[{i}/{len(todo)}] {name}: {seconds:.1f} s" + (f"  FAILED {error}" if error else ""), flush=True)
            failed += error is not None
    print(f"flashinfer_prebuild: {len(todo) - failed} of {len(todo)} variants in {time.perf_counter() - start:.1f} s",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
