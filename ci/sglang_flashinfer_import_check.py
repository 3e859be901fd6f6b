"""Import check of a FlashInfer production-pair reproducer where no CUDA device is (this machine).

    PYTHONPATH=SITE python3 ci/sglang_flashinfer_import_check.py REPRO.py --site DIR [--fix N]...

REPRO.py is one of the generated sglang/repro/*flashinfer*.py (`bash ci/repro.sh generate`: a
sglang_flashinfer_* finding's script, its harness kvfuzz_repro_sglang_metadata.py beside it); SITE holds FlashInfer and its Python dependencies (ci/gpu.sh's
.gpu/site on a GPU machine; here e.g. flashinfer_python and apache_tvm_ffi for this Python
installed with pip --target). The reproducer loads the release at --site as it does on the GPU
(FlashInfer real, every other kernel package stubbed), with torch told a CUDA device is there
(sglang imports FlashInfer's wrappers only where is_cuda()); the check is that the release's
flashinfer_backend then holds FlashInfer's own wrapper classes. Nothing runs: the kernels need
the GPU (ci/gpu_repro.sh). Exit 0 checked, 1 a wrapper is not FlashInfer's, 2 bad arguments or
FlashInfer does not import, 3 the release failed to load.
"""
import argparse
import importlib
import runpy
import sys

WRAPPERS = ("BatchPrefillWithRaggedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
            "BatchDecodeWithPagedKVCacheWrapper")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repro")
    ap.add_argument("--site", required=True)
    ap.add_argument("--fix", action="append", default=[])
    args = ap.parse_args()
    body = runpy.run_path(args.repro, run_name="import_check")  # defines, runs nothing
    script = vars(body["kv"]) if "kv" in body else body  # the harness it imports (or one file)
    if "real_flashinfer" not in script or "BUNDLE" not in body:
        print(f"{args.repro} is not a reproducer of sglang_metadata.py", file=sys.stderr)
        sys.exit(2)
    import torch

    torch.cuda.is_available = lambda: True  # what sglang's is_cuda() asks, and nothing is launched
    torch.version.cuda = torch.version.cuda or "13.0"
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    torch.cuda.get_device_name = lambda *a, **k: "none (import check)"
    script["BUNDLE"] = body["BUNDLE"]  # what the script hands its harness before it runs
    load = argparse.Namespace(site=args.site, fix=args.fix, deterministic=False)
    try:
        sg, _ = script["load_sglang"](load, "cpu")  # exits 2 when FlashInfer does not import
        fi = importlib.import_module("sglang.srt.layers.attention.flashinfer_backend")
    except Exception as e:  # noqa: BLE001 - the release failing to load is the answer
        print(f"sglang at {args.site} does not load: {type(e).__name__}: {e}")
        sys.exit(3)
    bad = 0
    for name in WRAPPERS:
        module = getattr(getattr(fi, name, None), "__module__", "missing")
        ok = module.startswith("flashinfer.")
        bad += not ok
        print(f"{name}: {module}{'' if ok else '   <-- not FlashInfer'}")
    print(f"{'ok' if not bad else 'FAIL'}: sglang {sg.version}'s FlashInferAttnBackend with FlashInfer "
          f"{script['STATS'].get('flashinfer')}{''.join(' + fix ' + n for n in args.fix)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
