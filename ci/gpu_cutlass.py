"""FlashInfer's CUTLASS headers, which its sm90 kernels JIT-compile against, as one small
checksummed file beside the slim wheel (ci/gpu_wheels.py drops them from the wheel), and their
install into the site where FlashInfer looks for them.

    python3 ci/gpu_cutlass.py pack WHEEL FOLDER      # FOLDER/flashinfer_cutlass-VERSION.tar.xz + .sha256
    python3 ci/gpu_cutlass.py install FOLDER SITE    # SITE/flashinfer/data/cutlass/..., checked
    python3 ci/gpu_cutlass.py present SITE           # exit 0 where SITE's FlashInfer has them

What FlashInfer adds as include directories for every JIT build (flashinfer/jit/env.py:402-405,
CUTLASS_INCLUDE_DIRS, added by jit/cpp_ext.py:146): data/cutlass/include and
data/cutlass/tools/util/include. `pack` takes exactly those two folders from the full wheel
(flashinfer-python 0.7.2.post1: 1.0 MiB as a tar under xz -9e, of 29 MiB raw), sorted, mtime 0,
compressed with Python's lzma (no zstd needed on the GPU machine), and writes the sha256 of the
archive and of every file it holds. `install` checks the archive against its checksum file,
unpacks it beside the site's FlashInfer (SITE/flashinfer/data/cutlass/, by a temporary folder
renamed into place), and checks every file. Exit 2, naming what, when the wheel holds no CUTLASS
headers, the archive or its checksum file is missing or unreadable, a checksum does not match, the
site has no FlashInfer, or its FlashInfer is another release than the headers'.
"""
import hashlib
import io
import lzma
import pathlib
import re
import shutil
import sys
import tarfile
import zipfile

ROOTS = ("flashinfer/data/cutlass/include/", "flashinfer/data/cutlass/tools/util/include/")
PROBE = "flashinfer/data/cutlass/include/cute/tensor.hpp"  # what an sm90 kernel includes first


def fail(message):
    print(f"gpu_cutlass: {message}", file=sys.stderr)
    sys.exit(2)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def wheel_version(wheel):
    m = re.match(r"flashinfer_python-([^-]+)-", pathlib.Path(wheel).name)
    if not m:
        fail(f"{wheel}: not a flashinfer_python wheel name")
    return m.group(1)


def names(version):
    return f"flashinfer_cutlass-{version}.tar.xz", f"flashinfer_cutlass-{version}.sha256"


def pack(wheel, folder):
    version = wheel_version(wheel)
    archive, sums = names(version)
    files = {}
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name.startswith(ROOTS) and not name.endswith("/"):
                files[name[len("flashinfer/data/"):]] = z.read(name)
    if not files:
        fail(f"{wheel} holds no CUTLASS headers ({' or '.join(ROOTS)}): a slimmed wheel? pack from the full one")
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    packed = lzma.compress(plain.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / archive).write_bytes(packed)
    lines = [f"{sha256(packed)}  archive {archive}"] + [f"{sha256(d)}  file {n}" for n, d in files.items()]
    (folder / sums).write_text("\n".join(lines) + "\n")
    print(f"gpu_cutlass: {len(files)} CUTLASS headers of FlashInfer {version} in {folder / archive} "
          f"({len(packed) / 2**20:.2f} MiB, of {sum(map(len, files.values())) / 2**20:.1f} MiB)")


def read_sums(path):
    sums = {"archive": [], "file": []}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (archive|file) (\S+)", line)
        if not m:
            fail(f"{path}:{n}: not '<sha256>  archive|file NAME': {line!r}")
        sums[m.group(2)].append((m.group(3), m.group(1)))
    if len(sums["archive"]) != 1 or not sums["file"]:
        fail(f"{path}: needs one archive line and a file line per header")
    return sums


def site_version(site):
    init = site / "flashinfer" / "__init__.py"
    if not init.is_file():
        fail(f"{site} has no FlashInfer (flashinfer/__init__.py): install the wheels first")
    dist = sorted(site.glob("flashinfer_python-*.dist-info"))
    if not dist:
        fail(f"{site} has FlashInfer but no flashinfer_python-*.dist-info to tell its release")
    return dist[-1].name[len("flashinfer_python-"):-len(".dist-info")]


def files_match(root, sums):
    return all((root / name).is_file() and sha256((root / name).read_bytes()) == digest
               for name, digest in sums["file"])


def install(folder, site):
    folder, site = pathlib.Path(folder), pathlib.Path(site)
    version = site_version(site)
    archive, sums_name = names(version)
    if not (folder / sums_name).is_file() or not (folder / archive).is_file():
        fail(f"{folder} lacks {archive} or {sums_name} (python3 ci/gpu_wheels.py writes them beside the wheel)")
    sums = read_sums(folder / sums_name)
    data = (folder / archive).read_bytes()
    if sha256(data) != sums["archive"][0][1]:
        fail(f"{folder / archive}: sha256 {sha256(data)}, {sums_name} says {sums['archive'][0][1]}")
    data_dir = site / "flashinfer" / "data"
    if files_match(data_dir, sums):
        print(f"gpu_cutlass: {data_dir / 'cutlass'} already holds FlashInfer {version}'s CUTLASS headers, checked")
        return
    tmp = data_dir / "cutlass.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        plain = lzma.decompress(data)
    except lzma.LZMAError as e:
        fail(f"{folder / archive}: not an xz archive ({e})")
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        for member in tar.getmembers():
            if not member.name.startswith("cutlass/"):
                fail(f"{folder / archive}: {member.name} is outside cutlass/")
        tar.extractall(tmp, filter="data")
    if not files_match(tmp, sums):
        fail(f"the unpacked headers in {tmp} do not match {sums_name}")
    shutil.rmtree(data_dir / "cutlass", ignore_errors=True)
    (tmp / "cutlass").rename(data_dir / "cutlass")
    shutil.rmtree(tmp)
    print(f"gpu_cutlass: FlashInfer {version}'s CUTLASS headers ({len(sums['file'])} files) installed into "
          f"{data_dir / 'cutlass'}, every checksum matched")


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "pack":
        pack(args[1], args[2])
    elif len(args) == 3 and args[0] == "install":
        install(args[1], args[2])
    elif len(args) == 2 and args[0] == "present":
        sys.exit(0 if (pathlib.Path(args[1]) / PROBE).is_file() else 1)
    else:
        fail("usage: gpu_cutlass.py pack WHEEL FOLDER | install FOLDER SITE | present SITE")


if __name__ == "__main__":
    main()
