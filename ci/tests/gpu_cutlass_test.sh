#!/usr/bin/env bash
# ci/gpu_cutlass.py without the wheel or a GPU: FlashInfer's CUTLASS headers packed from a fabricated
# full wheel (only the two include folders FlashInfer's JIT adds), installed into a fabricated site
# to the same bytes, a second install keeps them; a missing or changed archive, an unreadable checksum
# file, a site without FlashInfer or of another release, a wheel without the headers: exit 2 naming what.
# Usage: gpu_cutlass_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
. "$SRC/ci/tests/expect_exit2.sh"
cutlass() { python3 "$SRC/ci/gpu_cutlass.py" "$@" >"$WORK/log" 2>&1; }
expect2() { expect_exit2 cutlass "$@"; }  # WHAT MESSAGE ARGS...: gpu_cutlass.py ARGS exits 2 naming MESSAGE
V=0.7.2.post1
# A full wheel: the headers FlashInfer's JIT includes, a CUTLASS folder it does not, and its Python.
python3 - "$WORK/flashinfer_python-$V-py3-none-any.whl" "$WORK/flashinfer_python-9.9-py3-none-any.whl" <<'PY'
import sys, zipfile
files = {"flashinfer/__init__.py": "", "flashinfer/data/cutlass/include/cute/tensor.hpp": "// cute\n" * 50,
         "flashinfer/data/cutlass/include/cutlass/cutlass.h": "// cutlass\n",
         "flashinfer/data/cutlass/tools/util/include/cutlass/util/packed_stride.hpp": "// util\n",
         "flashinfer/data/cutlass/examples/big.cu": "x" * 1000}
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
with zipfile.ZipFile(sys.argv[2], "w") as z:  # a slimmed wheel: no headers
    z.writestr("flashinfer/__init__.py", "")
PY
site() {  # DIR RELEASE: a site holding FlashInfer RELEASE
  mkdir -p "$1/flashinfer/data" "$1/flashinfer_python-$2.dist-info" && : >"$1/flashinfer/__init__.py"
}

# 1. Pack: the two include folders, nothing else; install, present, a second install keeps them.
cutlass pack "$WORK/flashinfer_python-$V-py3-none-any.whl" "$WORK/wheels" || fail "pack: $(cat "$WORK/log")"
[ -f "$WORK/wheels/flashinfer_cutlass-$V.tar.xz" ] && [ "$(grep -c ' file ' "$WORK/wheels/flashinfer_cutlass-$V.sha256")" = 3 ] ||
  fail "pack wrote no archive or not 3 headers: $(cat "$WORK/wheels/flashinfer_cutlass-$V.sha256" 2>&1)"
grep -q examples "$WORK/wheels/flashinfer_cutlass-$V.sha256" && fail "pack took cutlass/examples, outside the include folders"
site "$WORK/site" $V
python3 "$SRC/ci/gpu_cutlass.py" present "$WORK/site" && fail "present before the install"
cutlass install "$WORK/wheels" "$WORK/site" || fail "install: $(cat "$WORK/log")"
cmp -s "$WORK/site/flashinfer/data/cutlass/tools/util/include/cutlass/util/packed_stride.hpp" <(printf '// util\n') ||
  fail "the installed header differs from the wheel's"
python3 "$SRC/ci/gpu_cutlass.py" present "$WORK/site" || fail "present after the install exits $?"
cutlass install "$WORK/wheels" "$WORK/site" && grep -q "already holds" "$WORK/log" || fail "a second install: $(cat "$WORK/log")"

# 2. Refusals.
expect2 "a slimmed wheel" "holds no CUTLASS headers" pack "$WORK/flashinfer_python-9.9-py3-none-any.whl" "$WORK/x"
site "$WORK/other" 9.9
expect2 "a site of another release" "lacks flashinfer_cutlass-9.9" install "$WORK/wheels" "$WORK/other"
expect2 "a site without FlashInfer" "has no FlashInfer" install "$WORK/wheels" "$WORK/nosite"
cp -r "$WORK/wheels" "$WORK/changed"
printf 'x' | dd of="$WORK/changed/flashinfer_cutlass-$V.tar.xz" bs=1 seek=100 conv=notrunc 2>/dev/null
site "$WORK/site2" $V
expect2 "a changed archive" "sha256" install "$WORK/changed" "$WORK/site2"
[ -d "$WORK/site2/flashinfer/data/cutlass" ] && fail "a changed archive left headers in the site"
cp -r "$WORK/wheels" "$WORK/badsums" && echo "not a checksum" >>"$WORK/badsums/flashinfer_cutlass-$V.sha256"
expect2 "an unreadable checksum file" "not '<sha256>" install "$WORK/badsums" "$WORK/site2"
mkdir -p "$WORK/missing" && cp "$WORK/wheels/flashinfer_cutlass-$V.sha256" "$WORK/missing/"
expect2 "a missing archive" "lacks flashinfer_cutlass-$V.tar.xz" install "$WORK/missing" "$WORK/site2"
expect2 "a bad verb" "usage" unpack "$WORK/wheels"

[ "$failures" = 0 ] && echo "gpu_cutlass_test: ok" || echo "gpu_cutlass_test: $failures failure(s)"
exit $((failures > 0))
