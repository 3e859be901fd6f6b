"""Downloads the GPU campaign's pinned Python packages into one folder (default .gpu/wheels).

    python3 ci/gpu_wheels.py [folder] [--python 3.12]

Wheels are for this interpreter, or with --python X.Y for CPython X.Y on x86-64 Linux (to carry
them to a machine without network). The folder then installs anywhere without network (ci/gpu.sh:
pip install --no-index). FlashInfer's wheel (62 MB, with the CUDA sources of every kernel it ships)
is rewritten to a copy holding all of its Python and only the sources of the kernels kvfuzz runs
(batch decode / prefill / MLA, single decode / prefill, POD, page, cascade, mask packing;
FlashInfer's own headers and its CCCL), 22 MB, so that the folder fits one copy to a GPU machine;
the kernels it compiles from them are unchanged. The CUTLASS headers its sm90 kernels (backend
"fa3", and "auto" on Hopper) include travel beside it, packed from the full wheel before it is
slimmed: flashinfer_cutlass-VERSION.tar.xz and .sha256, 1.0 MiB (ci/gpu_cutlass.py; ci/gpu.sh
installs them into .gpu/site). Of sglang only the Triton attention kernels run
(adapters/gpu/sglang_triton.py): each release in SGLANG_RELEASES is fetched to a temporary folder
(its own wheel, whatever Python that is for: the files are read as source) and the folder gets
sglang_kernels-RELEASE.zip, the kernel files and what they import from sglang, with the wheel's
METADATA and LICENSE: 94 KB for 0.5.23 (wheel 39 MB), 26 KB for 0.5.10.post1 (6 MB). sglang's own
TritonAttnBackend (the production-pair reproducers, build/repro/sglang/repro/) needs the release's Python
source: sglang_src-RELEASE.tgz for each of SGLANG_SRC_RELEASES (ci/gpu_sglang_src.py; about 22 MB in
all). FlashMLA (adapters/gpu/flashmla.py): sgl_flashmla-0.4.3.zip holds sgl-kernel's FlashMLA library
and its Python wrapper from sglang-kernel 0.4.3 (the release sglang 0.5.13 pins, built for torch
2.11 + CUDA 13; its wheel is 308 MB, fetched to a temporary folder), 3 MB. vLLM's Triton attention kernel
(adapters/gpu/vllm_triton.py): vllm_kernels-0.33.0.zip, the kernel and the files it imports, 2 MB. What a GPU call carries (.gpu, for the default folder) must stay under 60 MiB.
FA3's library (58 MiB packed) travels apart, in parts: ci/gpu_fa3.py. Exit 2 when
pip fails, a release keeps its kernels where no layout below has them, or .gpu passes 60 MiB.
"""
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

import gpu_cutlass
import gpu_sglang_src

PINS = ["flashinfer-python==0.7.2.post1", "apache-tvm-ffi==0.1.15.post2", "requests==2.34.2", "urllib3==2.8.0",
        "idna==3.20", "charset-normalizer==3.5.2", "certifi==2026.10.18", "nvidia-ml-py==13.615.71",
        "tqdm==4.70.1", "msgspec==0.22.0"]  # msgspec: sglang 0.5.23's own backend (ci/sglang.sh's pyextra)
PLATFORM = ["--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "any"]
SGLANG_RELEASES = ["0.5.23", "0.5.10.post1"]  # the first is sglang_triton.py's default
# The releases the production-pair reproducers run on the GPU (ci/gpu_repro.sh): the bugs' release and
# the release that fixed sglang#26651.
SGLANG_SRC_RELEASES = ["0.5.23", "0.5.10.post1", "0.5.12.post1", "0.5.13"]
SGLANG_WHEEL_TAGS = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                     "--platform", "manylinux_2_34_x86_64", "--platform", "any"]  # 0.5.23's, 0.5.10.post1's
# The files sglang_triton.py loads, per layout (newest first, as it looks for them): both kernels and
# what they import from sglang but sglang.srt.utils (stubbed there).
SGLANG_LAYOUTS = [["sglang/kernels/ops/attention/decode_attention.py", "sglang/kernels/ops/attention/extend_attention.py",
                   "sglang/kernels/ops/attention/score_mod.py", "sglang/srt/environ.py"],
                  ["sglang/srt/layers/attention/triton_ops/decode_attention.py",
                   "sglang/srt/layers/attention/triton_ops/extend_attention.py",
                   "sglang/srt/layers/attention/triton_ops/prefill_attention.py"]]
KEPT_SOURCES = re.compile(r"flashinfer/data/csrc/(batch_decode|batch_prefill|batch_mla|single_|pod|batch_pod|page"
                          r"|cascade|flashinfer_cascade|flashinfer_page|quantization|flashinfer_quantization|tvm_ffi_utils|[^/]*\.(h|cuh)$)[^/]*$")


def kept(name):
    if name.startswith("flashinfer/data/csrc/"):
        return bool(KEPT_SOURCES.match(name))
    if name.startswith("flashinfer/data/cutlass/"):
        return False  # headers of the sm90 / sm100 kernels (the fa2 kernels include none): gpu_cutlass.py
    if name.startswith("flashinfer/data/") or ".dist-info/" in name:
        return True
    return name.endswith((".py", ".pyi", ".jinja", ".json", ".typed"))


def slim(wheel):
    tmp = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in src.infolist():
            if kept(info.filename):
                out.writestr(info, src.read(info), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    tmp.replace(wheel)


def flashinfer_parts(wheel, folder):
    """FlashInfer's CUTLASS headers packed beside its wheel (gpu_cutlass.py; from the full wheel fetched
    again where the folder holds a slimmed one), then the wheel slimmed."""
    with zipfile.ZipFile(wheel) as z:
        full = any(n.startswith("flashinfer/data/cutlass/") for n in z.namelist())
    version = gpu_cutlass.wheel_version(wheel)
    if not (folder / gpu_cutlass.names(version)[1]).exists():
        if full:
            gpu_cutlass.pack(wheel, folder)
        else:  # slimmed before the headers travelled beside it
            with tempfile.TemporaryDirectory() as tmp:
                pip_download(["-d", tmp, f"flashinfer-python=={version}"])
                gpu_cutlass.pack(next(pathlib.Path(tmp).glob("flashinfer_python-*.whl")), folder)
    if full:
        slim(wheel)


def pip_download(args):
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *args]
    if subprocess.call(cmd) != 0:
        print(f"gpu_wheels: pip download failed: {' '.join(cmd)}", file=sys.stderr)
        sys.exit(2)


def sglang_kernels(release, folder):
    """folder/sglang_kernels-RELEASE.zip from the release's wheel, fetched to a temporary folder."""
    archive = folder / f"sglang_kernels-{release}.zip"
    if archive.exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        pip_download([*SGLANG_WHEEL_TAGS, "-d", tmp, f"sglang=={release}"])
        with zipfile.ZipFile(next(pathlib.Path(tmp).glob("sglang-*.whl"))) as src:
            names = set(src.namelist())
            files = next((layout for layout in SGLANG_LAYOUTS if names.issuperset(layout)), None)
            if files is None:
                print(f"gpu_wheels: sglang {release} has its Triton kernels in no known layout", file=sys.stderr)
                sys.exit(2)
            info = f"sglang-{release}.dist-info/"
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
                for name in files + [info + "METADATA", info + "licenses/LICENSE"]:
                    out.writestr(src.getinfo(name), src.read(name), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)


FLASHMLA_RELEASE = "0.4.3"
FLASHMLA_FILES = ["sgl_kernel/flash_mla.py", "sgl_kernel/flashmla_ops.abi3.so"]


def sgl_flashmla(folder):
    """folder/sgl_flashmla-RELEASE.zip: FlashMLA's library and wrapper under an empty sgl_kernel
    package (the wheel's __init__ loads every other library sgl-kernel ships)."""
    archive = folder / f"sgl_flashmla-{FLASHMLA_RELEASE}.zip"
    if archive.exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        pip_download(["--python-version", "3.12", *PLATFORM, "--platform", "manylinux2014_x86_64", "-d", tmp,
                      f"sglang-kernel=={FLASHMLA_RELEASE}"])
        with zipfile.ZipFile(next(pathlib.Path(tmp).glob("sglang_kernel-*.whl"))) as src:
            info = f"sglang_kernel-{FLASHMLA_RELEASE}.dist-info/"
            licenses = [n for n in src.namelist() if n.startswith(info) and "LICENSE" in n]
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
                out.writestr("sgl_kernel/__init__.py", "")
                for name in FLASHMLA_FILES + [info + "METADATA"] + licenses:
                    out.writestr(src.getinfo(name), src.read(name), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)


VLLM_RELEASE = "0.33.0"
# What vLLM's Triton attention kernel imports (adapters/gpu/vllm_triton.py; other vllm modules are
# stubs there): its ops folder, the platform, logging, envs and utils, the backends registry.
VLLM_KERNEL_FILES = re.compile(r"vllm/(__init__|envs|logger)\.py|vllm/(logging_utils|platforms|plugins|third_party|"
                               r"triton_utils|utils|v1/attention/ops)/.*\.py|vllm/v1/(__init__|kv_cache_interface|"
                               r"kv_cache_layout|kv_cache_spec_registry)\.py|vllm/v1/attention/(__init__|backends/"
                               r"__init__|backends/registry)\.py|vllm-[^/]*\.dist-info/(METADATA|licenses/.*)")


def vllm_kernels(folder):
    """folder/vllm_kernels-RELEASE.zip: vLLM's Triton attention kernel and what it imports, from the
    release's wheel (ci/vllm.sh's copy in .vllm/wheels, else fetched to a temporary folder; 340 MB), 2 MB."""
    archive = folder / f"vllm_kernels-{VLLM_RELEASE}.zip"
    if archive.exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        wheel = next(pathlib.Path(".vllm/wheels").glob(f"vllm-{VLLM_RELEASE}-*.whl"), None)
        if wheel is None:
            pip_download(["--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "-d", tmp, f"vllm=={VLLM_RELEASE}"])
            wheel = next(pathlib.Path(tmp).glob("vllm-*.whl"))
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
            for info in src.infolist():
                if VLLM_KERNEL_FILES.fullmatch(info.filename):
                    out.writestr(info, src.read(info), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)


def main():
    args = sys.argv[1:]
    target = []
    if "--python" in args:
        at = args.index("--python")
        if at + 1 >= len(args) or not re.fullmatch(r"3\.\d+", args[at + 1]):
            print("gpu_wheels: --python needs a version like 3.12", file=sys.stderr)
            sys.exit(2)
        target = ["--python-version", args[at + 1], *PLATFORM]
        del args[at:at + 2]
    folder = pathlib.Path(args[0] if args else ".gpu/wheels")
    folder.mkdir(parents=True, exist_ok=True)
    pip_download([*target, "-d", str(folder), *PINS])
    for release in SGLANG_RELEASES:
        sglang_kernels(release, folder)
    for wheel in folder.glob("flashinfer_python-*.whl"):
        flashinfer_parts(wheel, folder)
    for release in SGLANG_SRC_RELEASES:
        gpu_sglang_src.sglang_src(release, folder)
    sgl_flashmla(folder)
    vllm_kernels(folder)
    total = sum(p.stat().st_size for p in [*folder.glob("*.whl"), *folder.glob("sglang_*"), *folder.glob("vllm_*")])
    print(f"gpu_wheels: {len(PINS)} packages, sglang's kernels of {', '.join(SGLANG_RELEASES)} and the source of "
          f"{', '.join(SGLANG_SRC_RELEASES)} in {folder} ({total / 2**20:.1f} MiB)")
    gpu_sglang_src.check_limit(folder)


if __name__ == "__main__":
    main()
