#!/usr/bin/env bash
# A C++ example executor (adapters/examples/cpp/) under kvfuzz-worker, through a real campaign:
# run by ctest (fuzz/tests/CMakeLists.txt), one test per expectation. The backend is the
# library's name: build/adapters/libcpp_page_table.so -> cpp_page_table.
#
#   cpp_adapter_test.sh KVFUZZ WORKER LIBRARY clean              # no findings, exit 0
#   cpp_adapter_test.sh KVFUZZ WORKER LIBRARY broken NAME PROP   # KVFUZZ_EXAMPLE_BREAK=NAME: exit 1, PROP found
#   cpp_adapter_test.sh KVFUZZ WORKER LIBRARY refused TEXT [NAME] # the adapter does not start: exit 2, TEXT said
set -uo pipefail
kvfuzz=$1 worker=$2 library=$3 expect=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
backend=$(basename "$library" .so)
backend=${backend#lib}

fail() {
  echo "FAIL: $*"
  echo "--- kvfuzz output:"
  cat "$out/log"
  exit 1
}

cases=60 timeout=20
campaign() {
  "$kvfuzz" run --seed 1 --cases $cases --profile tiny --profile small --jobs 1 --no-shrink --backend "$backend" \
    --adapter "$worker $library" --adapter-timeout $timeout --out "$out/findings" >"$out/log" 2>&1
}

case $expect in
  clean)
    campaign
    rc=$?
    [ $rc -eq 0 ] || fail "a clean campaign exited $rc, expected 0"
    grep -q "no findings" "$out/log" || fail "no 'no findings' line"
    # Some cases must run (fp8 caches, and MLA or non-MLA models, are unsupported, never passed).
    checked=$(awk -v b=":$backend" 'index($1, b) && substr($1, length($1) - length(b) + 1) == b {n += $2} END {print n + 0}' "$out/log")
    [ "${checked:-0}" -gt 0 ] || fail "the executor checked ${checked:-0} of $cases cases"
    ;;
  broken)
    name=$5 property=$6
    [ "$name" = hang ] && cases=3 timeout=1  # each case waits out the timeout
    KVFUZZ_EXAMPLE_BREAK=$name campaign
    rc=$?
    [ $rc -eq 1 ] || fail "broken variant $name exited $rc, expected 1 (findings)"
    grep -Eq "^$property/[^/ ]*$backend/" "$out/log" || fail "broken variant $name: no $property finding in the summary"
    ;;
  refused)
    text=$5
    KVFUZZ_EXAMPLE_BREAK=${6:-} campaign
    rc=$?
    [ $rc -eq 2 ] || fail "a bad library exited $rc, expected 2"
    grep -qF "$library" "$out/log" || fail "the message does not name the library $library"
    grep -qF "$text" "$out/log" || fail "the message does not say '$text'"
    ;;
  *)
    fail "unknown expectation '$expect'"
    ;;
esac
echo "ok: $expect ${5:-} ${6:-}"
