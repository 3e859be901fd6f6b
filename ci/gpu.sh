#!/usr/bin/env bash
# The GPU campaign, for owners of an NVIDIA GPU: installs the pinned sglang kernels into an isolated
# folder (.gpu/site, never committed), builds kvfuzz (with CUDA where nvcc is found), runs a campaign
# against each real executor in adapters/gpu/ and prints one table: backend, cases checked,
# unsupported, findings by property, cases/s, share of the time inside the executor.
#   KVFUZZ_GPU_SECONDS   campaign length per executor (default 300)
#   KVFUZZ_GPU_ADAPTERS  adapter files to run (default adapters/gpu/*.py); each must print its declaration
#   KVFUZZ_GPU_OUT       findings folder (default findings-gpu)
# Needs: python3 with torch and triton on a CUDA machine (the adapters import them), and network for
# pip the first time (later runs reuse .gpu/site). Exit 1 if any campaign had findings.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${KVFUZZ_GPU_SECONDS:-300}
out=${KVFUZZ_GPU_OUT:-findings-gpu}
site=.gpu/site
sglang_pin=sglang==0.5.10.post1  # the newest sglang PyPI serves here; its Triton kernels are pure Python

bash ci/setup.sh
if [ ! -f "$site/sglang/srt/layers/attention/triton_ops/decode_attention.py" ]; then
  mkdir -p .gpu/whl "$site"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d .gpu/whl "$sglang_pin"
  # Only the kernel files: sglang's package __init__ pulls in the whole server.
  python3 - "$site" .gpu/whl/sglang-*.whl <<'PY'
import sys, zipfile
site, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("sglang/srt/layers/attention/triton_ops/") and name.endswith(".py"):
            z.extract(name, site)
PY
fi
KVFUZZ_BUILD_TARGETS="kvfuzz kvfuzz-worker" bash ci/build.sh
export PYTHONPATH="$PWD/$site:$PWD/adapters" PYTHONUNBUFFERED=1
mkdir -p "$out"
rows=()
status=0
for adapter in ${KVFUZZ_GPU_ADAPTERS:-adapters/gpu/*.py}; do
  name=$(basename "$adapter" .py)
  log="$out/$name.log"
  echo "== $name: ${seconds} s campaign (log $log)"
  rc=0
  ./build/fuzz/kvfuzz run --seconds "$seconds" --profile tiny --profile small --jobs "$(nproc)" \
    --adapter "python3 $adapter" --backend "$name" --out "$out/$name" --max-saved 2 --shrink-seconds 30 \
    --adapter-timeout 600 >"$log" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || { echo "kvfuzz exited $rc on $name:"; tail -5 "$log"; status=1; continue; }
  [ "$rc" -eq 1 ] && status=1
  rows+=("$(python3 - "$log" "$(nproc)" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
jobs = int(sys.argv[2])
m = re.search(r"campaign: (\d+) cases in ([\d.]+) s \(([\d.]+) cases/s\)", text)
wall = float(m.group(2)) if m else 0.0
rate = m.group(3) if m else "?"
checked = unsupported = 0
for line in text.splitlines():
    f = line.split()
    if len(f) == 3 and ":" in f[0] and f[1].isdigit() and f[2].isdigit():
        checked, unsupported = checked + int(f[1]), unsupported + int(f[2])
found = {}
for prop, count in re.findall(r"^([\w-]+)/\S+\s+(\d+)\s+\d+\s", text, re.M):
    found[prop] = found.get(prop, 0) + int(count)
inside = re.search(r"([\d.]+) s inside the adapter's function", text)
share = f"{100 * float(inside.group(1)) / (wall * jobs):.0f}%" if inside and wall else "?"
findings = ", ".join(f"{p} {n}" for p, n in sorted(found.items())) or "none"
print(f"{checked}\t{unsupported}\t{findings}\t{rate}\t{share}")
PY
)")
  rows[-1]="$name	${rows[-1]}"
done
echo
printf '%-22s %9s %12s %9s %10s  %s\n' backend checked unsupported cases/s "in kernel" "findings by property"
for r in "${rows[@]}"; do
  IFS=$'\t' read -r name checked unsupported findings rate share <<<"$r"
  printf '%-22s %9s %12s %9s %10s  %s\n' "$name" "$checked" "$unsupported" "$rate" "$share" "$findings"
done
echo "(\"in kernel\": time inside the adapters' function over the campaign's wall time times its jobs)"
exit $status
