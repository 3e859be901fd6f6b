#!/bin/bash
# One device session: build kvfuzz, import sglang's Triton kernels, check a few cases, run a campaign.
# Usage (repository root, on the GPU machine): OUT=/some/dir bash adapters/gpu/device_run.sh [campaign seconds]
set -o pipefail
SECS=${1:-120}; SAVED=${2:-2}; SHRINK=${3:-20}; CASES=${CASES:-adapters/gpu/cases/*.json}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.gpu/site:$PWD/adapters
AD="python3 adapters/gpu/sglang_triton.py"
K=/tmp/b/fuzz/kvfuzz
{
  date -u; nvidia-smi -L
  python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
  if [ ! -x $K ]; then
    mkdir -p /tmp/deps; for f in .gpu/debs/*.deb; do dpkg -x $f /tmp/deps; done
    t0=$(date +%s)
    cmake -S . -B /tmp/b -G Ninja -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DKVFUZZ_TESTS=OFF -DKVFUZZ_NATIVE=OFF > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
    ninja -C /tmp/b kvfuzz > $OUT/ninja.log 2>&1 || { tail -40 $OUT/ninja.log; exit 1; }
    echo "build: $(( $(date +%s) - t0 )) s"
  fi
  (cd adapters/gpu && python3 -c "import sglang_triton as s; print('imported', s.decode_attention_fwd.__module__, s.extend_attention_fwd.__module__)") || exit 1
  for c in $CASES; do
    echo "== check $c"; t0=$SECONDS
    timeout 200 $K check $c --adapter "$AD" --backend sglang_triton 2>&1 | tail -25
    echo "   ($((SECONDS - t0)) s)"
  done
  echo "== campaign ${SECS}s"
  rm -rf /tmp/findings; timeout $((SECS + 420)) $K run --seconds $SECS --profile tiny --profile small --jobs 8 --adapter "$AD" --backend sglang_triton \
      --out /tmp/findings --shrink-seconds $SHRINK --max-saved $SAVED 2>&1 | tail -60
  echo "campaign rc=$?"; date -u
  for f in /tmp/findings/*.min.txt; do echo "#### $f"; head -c 2500 $f; echo; done
  tar czf $OUT/findings.tgz -C /tmp findings
} 2>&1 | tee $OUT/log
