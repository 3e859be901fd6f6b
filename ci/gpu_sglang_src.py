"""Packs an sglang release's Python source for the GPU machine (ci/gpu_wheels.py calls it).

    python3 ci/gpu_sglang_src.py [--folder .gpu/wheels] [--installed .sglang] RELEASE...

The production-pair reproducers (generated into build/repro/sglang/repro/, adapters/repro/sglang_metadata.py)
import sglang's own TritonAttnBackend, and with it most of sglang.srt, from an unpacked release
(--site DIR). The release unpacked is 131 MB (0.5.23) and a GPU call carries 64 MiB, so this writes
FOLDER/sglang_src-RELEASE.tgz: every .py file of the package but the diffusion server
(sglang/multimodal_gen/) and the tests (sglang/test/, */tests/), and the wheel's dist-info but its
RECORD (sglang's version is read from METADATA), and the JIT kernels' C++ sources (their loader
checks at import that the folders are there): 10 MB for 0.5.23, 3 to 5 MB for the older releases.
No other non-Python file is read by these imports (traced with an audit hook on the CPU; the
reproducers then exit on the archive's source as on the whole release). The source is .sglang/RELEASE (ci/sglang.sh installs it) where that is here, else the
release's wheel fetched with pip. The archive is byte-for-byte the same for the same source
(sorted, mtime 0). ci/gpu_repro.sh unpacks it to .gpu/sglang_src/RELEASE.

Fails (exit 2) when the release has no sglang/ source, pip fails, or what a GPU call carries (.gpu
for FOLDER .gpu/wheels, else FOLDER) passes LIMIT_MIB.
"""
import gzip
import io
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile

LIMIT_MIB = 60  # a GPU call carries 64 MiB: the working tree (about 4 MB) and .gpu
SKIPPED = ("sglang/multimodal_gen/", "sglang/test/")
# The JIT kernels' C++ sources: whole, as the JIT loader checks at import that they are there
# (sglang/kernels/jit/utils/compile/paths.py in 0.5.23, sglang/jit_kernel/utils.py before).
JIT_SOURCES = ("sglang/kernels/jit/include/", "sglang/kernels/jit/csrc/", "sglang/jit_kernel/include/",
               "sglang/jit_kernel/csrc/")
WHEEL_TAGS = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
              "--platform", "manylinux_2_34_x86_64", "--platform", "any"]  # as ci/gpu_wheels.py fetches sglang


def kept(name):
    """Whether a path of the release (relative to its site) goes into the archive."""
    if ".dist-info/" in name:
        return not name.endswith("/RECORD")
    if name.startswith(JIT_SOURCES):
        return True
    return (name.startswith("sglang/") and name.endswith(".py") and not name.startswith(SKIPPED)
            and "/tests/" not in name)


def files_from_site(site):
    """{name: bytes} of the kept files of an unpacked release."""
    root = pathlib.Path(site)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and kept(str(p.relative_to(root)))}


def files_from_wheel(release):
    """{name: bytes} of the kept files of the release's wheel, fetched with pip to a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *WHEEL_TAGS,
               "-d", tmp, f"sglang=={release}"]
        if subprocess.call(cmd) != 0:
            print(f"gpu_sglang_src: pip download failed: {' '.join(cmd)}", file=sys.stderr)
            sys.exit(2)
        with zipfile.ZipFile(next(pathlib.Path(tmp).glob("sglang-*.whl"))) as z:
            return {n: z.read(n) for n in z.namelist() if kept(n) and not n.endswith("/")}


def pack(files, archive):
    """Writes files ({name: bytes}) to archive as a reproducible .tgz."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    with open(archive, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
        gz.write(raw.getvalue())


def folder_mib(folder):
    return sum(p.stat().st_size for p in pathlib.Path(folder).rglob("*") if p.is_file()) / 2**20


def sglang_src(release, folder, installed=".sglang"):
    """folder/sglang_src-RELEASE.tgz (kept if there); returns its path."""
    archive = pathlib.Path(folder) / f"sglang_src-{release}.tgz"
    if not archive.exists():
        site = pathlib.Path(installed) / release
        files = files_from_site(site) if (site / "sglang" / "__init__.py").is_file() else files_from_wheel(release)
        if not any(n.startswith("sglang/") for n in files):
            print(f"gpu_sglang_src: sglang {release}: no sglang/*.py source found", file=sys.stderr)
            sys.exit(2)
        pack(files, archive)
    print(f"gpu_sglang_src: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    return archive


def check_limit(folder):
    """Exit 2 when the carried folder passes LIMIT_MIB: .gpu for .gpu/wheels, else the folder itself."""
    folder = pathlib.Path(folder).resolve()
    carried = folder.parent if (folder.name, folder.parent.name) == ("wheels", ".gpu") else folder
    total = folder_mib(carried)
    if total > LIMIT_MIB:
        print(f"gpu_sglang_src: {carried} holds {total:.1f} MiB, more than the {LIMIT_MIB} MiB a GPU call can carry "
              f"beside the working tree: drop a release (ci/gpu_wheels.py SGLANG_SRC_RELEASES) or remove unpacked "
              f"folders from it", file=sys.stderr)
        sys.exit(2)
    print(f"gpu_sglang_src: {carried} holds {total:.1f} MiB (limit {LIMIT_MIB})")


def option(args, flag, default):
    """The value of `flag VALUE` in args (removed from them), else default."""
    if flag not in args:
        return default
    at = args.index(flag)
    if at + 1 >= len(args):
        print(f"gpu_sglang_src: {flag} needs a folder", file=sys.stderr)
        sys.exit(2)
    value = args[at + 1]
    del args[at:at + 2]
    return value


def main():
    args = sys.argv[1:]
    folder = option(args, "--folder", ".gpu/wheels")
    installed = option(args, "--installed", ".sglang")
    if not args or any(a.startswith("-") for a in args):
        print("usage: python3 ci/gpu_sglang_src.py [--folder .gpu/wheels] [--installed .sglang] RELEASE...",
              file=sys.stderr)
        sys.exit(2)
    pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
    for release in args:
        sglang_src(release, folder, installed)
    check_limit(folder)


if __name__ == "__main__":
    main()
