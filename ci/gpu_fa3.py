"""Packs sgl-kernel's FA3 library for the GPU machine, in parts, and unpacks it there, checksummed.

    python3 ci/gpu_fa3.py pack [--folder .gpu-fa3] [--level 15] [--part-mib 40] [--from DIR]
    python3 ci/gpu_fa3.py unpack --to DIR PARTS_FOLDER...

FA3's kernel, as sglang's FlashAttentionBackend calls it (sgl_kernel.flash_attn.flash_attn_with_kvcache),
lives in sgl_kernel/flash_ops.abi3.so of sglang-kernel 0.4.3 (built for torch 2.11 + CUDA 13, the GPU
machine's): 1,022 MiB, more than a GPU call carries (64 MiB). `pack` fetches the wheel (pip, to a
temporary folder), takes that library, flash_attn.py and debug_utils.py (what flash_attn.py imports)
and the wheel's METADATA and LICENSE, adds an empty sgl_kernel/__init__.py of ours (the wheel's loads
every other library sgl-kernel ships), tars them (sorted, mtime 0), compresses the tar with
`zstd -LEVEL --long=30` (a 1 GiB window: the library repeats itself at long distances; -15: about
58 MiB) and cuts it into parts of at most PART_MIB MiB: FOLDER/sgl_fa3-0.4.3.tar.zst.NN, and
FOLDER/sgl_fa3-0.4.3.sha256, the sha256 of each part, of the whole compressed tar and of each file it
holds. Each part travels in its own GPU call (docs/gpu.md, "Real FA3"). `--from DIR` packs the files
under DIR instead of the wheel's (ci/tests/gpu_fa3_test.sh).

`unpack` looks for each part named in the checksum file in the PARTS_FOLDERs (the first holding it;
the checksum file too), checks each part, joins them, checks the whole, decompresses it (`zstd` on the
PATH, else Python's `zstandard` module), checks every file and renames the result to DIR, which then
holds sgl_kernel/ (KVFUZZ_FA3=DIR: the FA reproducers call it, adapters/repro/sglang_metadata.py).
A DIR already there whose files match is kept (exit 0). Exit 2, naming what, when a part or the
checksum file is missing, a checksum does not match, no zstd decompressor is found, or pip fails.
"""
import argparse
import hashlib
import io
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

RELEASE = "0.4.3"
NAME = f"sgl_fa3-{RELEASE}"
FILES = ["sgl_kernel/flash_ops.abi3.so", "sgl_kernel/flash_attn.py", "sgl_kernel/debug_utils.py"]
INIT = b'"""sgl_kernel with FA3 only (kvfuzz ci/gpu_fa3.py): the wheel\'s __init__ loads every library."""\n'
WHEEL_TAGS = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
              "--platform", "manylinux_2_17_x86_64", "--platform", "any"]
WINDOW = "--long=30"  # pack and unpack must agree: zstd refuses a frame whose window passes its limit


def fail(message):
    print(f"gpu_fa3: {message}", file=sys.stderr)
    sys.exit(2)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def wheel_files():
    """{name in the tar: bytes}: FILES, the __init__ of ours, METADATA and LICENSE, from the wheel."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *WHEEL_TAGS,
               "-d", tmp, f"sglang-kernel=={RELEASE}"]
        if subprocess.call(cmd) != 0:
            fail(f"pip download failed: {' '.join(cmd)}")
        with zipfile.ZipFile(next(pathlib.Path(tmp).glob("sglang_kernel-*.whl"))) as src:
            info = f"sglang_kernel-{RELEASE}.dist-info/"
            names = FILES + [info + "METADATA"] + [n for n in src.namelist() if n.startswith(info + "licenses/")]
            files = {n: src.read(n) for n in names}
    files["sgl_kernel/__init__.py"] = INIT
    return files


def tar_bytes(files):
    """A tar of files, sorted, mtime 0, mode 0644: the same bytes for the same files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


def folder_files(root):
    """{name relative to root: bytes} of every file under root."""
    if not root.is_dir():
        fail(f"--from {root}: not a folder")
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def pack(folder, level, part_mib, source):
    if not shutil.which("zstd"):
        fail("pack needs the zstd program (apt-get install zstd)")
    files = folder_files(source) if source else wheel_files()
    with tempfile.TemporaryDirectory() as tmp:
        plain = pathlib.Path(tmp) / f"{NAME}.tar"
        plain.write_bytes(tar_bytes(files))
        if subprocess.call(["zstd", "-q", "-f", f"-{level}", WINDOW, "-T0", str(plain), "-o", f"{plain}.zst"]) != 0:
            fail(f"zstd -{level} {WINDOW} failed")
        packed = pathlib.Path(f"{plain}.zst").read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{NAME}.tar.zst.*"):
        old.unlink()
    step = part_mib << 20
    parts = [packed[i:i + step] for i in range(0, len(packed), step)]
    lines = []
    for i, part in enumerate(parts):
        (folder / f"{NAME}.tar.zst.{i:02d}").write_bytes(part)
        lines.append(f"{sha256(part)}  part {NAME}.tar.zst.{i:02d}")
    lines.append(f"{sha256(packed)}  whole {NAME}.tar.zst")
    lines += [f"{sha256(data)}  file {name}" for name, data in sorted(files.items())]
    (folder / f"{NAME}.sha256").write_text("\n".join(lines) + "\n")
    raw = sum(len(d) for d in files.values())
    print(f"gpu_fa3: {raw / 2**20:.0f} MiB of {source or f'sgl-kernel {RELEASE} FA3'} -> {len(packed) / 2**20:.1f} MiB "
          f"(zstd -{level} {WINDOW}) in {len(parts)} parts of at most {part_mib} MiB in {folder}")


def read_sums(path):
    """{kind: [(name, sha256)]} of a checksum file; exit 2 on a line it cannot read."""
    sums = {"part": [], "whole": [], "file": []}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split()
        if len(fields) != 3 or fields[1] not in sums or len(fields[0]) != 64:
            fail(f"{path}:{n}: not '<sha256>  part|whole|file NAME': {line!r}")
        sums[fields[1]].append((fields[2], fields[0]))
    if not sums["part"] or len(sums["whole"]) != 1 or not sums["file"]:
        fail(f"{path}: needs part, whole and file lines")
    return sums


def find(name, folders):
    return next((f / name for f in folders if (f / name).is_file()), None)


def decompress(data):
    if shutil.which("zstd"):
        run = subprocess.run(["zstd", "-q", "-d", WINDOW, "-c"], input=data, capture_output=True)
        if run.returncode != 0:
            fail(f"zstd -d {WINDOW} failed: {run.stderr.decode(errors='replace').strip()}")
        return run.stdout
    try:
        import zstandard
    except ImportError:
        fail("no zstd here: neither the zstd program nor Python's zstandard module (carry its wheel)")
    reader = zstandard.ZstdDecompressor(max_window_size=2**30).stream_reader(io.BytesIO(data))
    return reader.read()


def files_match(root, sums):
    return all((root / name).is_file() and sha256((root / name).read_bytes()) == digest
               for name, digest in sums["file"])


def unpack(to, folders):
    sums_path = find(f"{NAME}.sha256", folders)
    if sums_path is None:
        fail(f"{NAME}.sha256 is in none of {', '.join(map(str, folders))}")
    sums = read_sums(sums_path)
    if to.is_dir() and files_match(to, sums):
        print(f"gpu_fa3: {to} already holds sgl-kernel {RELEASE}'s FA3, checked")
        return
    packed = bytearray()
    for name, digest in sums["part"]:
        path = find(name, folders)
        if path is None:
            fail(f"part {name} is in none of {', '.join(map(str, folders))}")
        data = path.read_bytes()
        if sha256(data) != digest:
            fail(f"part {path}: sha256 {sha256(data)}, the checksum file says {digest}")
        packed += data
    if sha256(packed) != sums["whole"][0][1]:
        fail(f"the joined parts' sha256 {sha256(packed)} is not the checksum file's {sums['whole'][0][1]}")
    tmp = to.with_name(to.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(decompress(bytes(packed)))) as tar:
        tar.extractall(tmp, filter="data")
    if not files_match(tmp, sums):
        fail(f"the unpacked files in {tmp} do not match {sums_path}")
    shutil.rmtree(to, ignore_errors=True)
    tmp.rename(to)
    print(f"gpu_fa3: sgl-kernel {RELEASE}'s FA3 unpacked into {to} ({len(sums['part'])} parts, every checksum matched)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("pack", help="fetch the wheel, compress FA3, write the parts and their checksums")
    p.add_argument("--folder", default=".gpu-fa3")
    p.add_argument("--level", type=int, default=15, choices=range(1, 20), metavar="1..19")
    p.add_argument("--part-mib", type=int, default=40)
    p.add_argument("--from", dest="source", help="pack the files under this folder, not the wheel's")
    u = sub.add_parser("unpack", help="check, join and decompress the parts into --to")
    u.add_argument("--to", required=True)
    u.add_argument("folders", nargs="+", help="folders holding the parts and the checksum file")
    args = ap.parse_args()
    if args.verb == "pack":
        if args.part_mib < 1:
            fail("--part-mib must be at least 1")
        pack(pathlib.Path(args.folder), args.level, args.part_mib, args.source and pathlib.Path(args.source))
    else:
        unpack(pathlib.Path(args.to), [pathlib.Path(f) for f in args.folders])


if __name__ == "__main__":
    main()
