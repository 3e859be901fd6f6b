#!/usr/bin/env bash
# ci/gpu_fa3.py and ci/gpu_fa3_table.py without the wheel or a GPU: a fabricated library is packed in
# parts, the parts unpacked from two folders (as they travel in two GPU calls) to the same bytes, a
# second unpack keeps them; a missing part, a changed part, a missing or unreadable checksum file
# exit 2 naming what; fabricated stand-in / real FA3 runs become the table's rows (agree: exit 0; a
# different exit status or max error: exit 1; a missing folder: exit 2). SKIPPED without zstd.
# Usage: gpu_fa3_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
command -v zstd >/dev/null || { echo "SKIPPED: no zstd program here"; exit 0; }
. "$SRC/ci/tests/expect_exit2.sh"
fa3() { python3 "$SRC/ci/gpu_fa3.py" "$@" >"$WORK/log" 2>&1; }
expect2() { expect_exit2 fa3 "$@"; }  # WHAT MESSAGE ARGS...: gpu_fa3.py ARGS exits 2 naming MESSAGE

# 1. Pack (1.5 MiB of random bytes: two parts of 1 MiB), unpack from two folders
lib=$WORK/lib
mkdir -p "$lib/sgl_kernel"
head -c 1572864 /dev/urandom >"$lib/sgl_kernel/flash_ops.abi3.so"
echo "def flash_attn_with_kvcache(): pass" >"$lib/sgl_kernel/flash_attn.py"
fa3 pack --folder "$WORK/parts" --level 3 --part-mib 1 --from "$lib" || fail "pack exited $?: $(cat "$WORK/log")"
n=$(ls "$WORK/parts" | grep -c '\.tar\.zst\.[0-9][0-9]$')
[ "$n" = 2 ] || fail "pack wrote $n parts, expected 2"
mkdir -p "$WORK/call1" "$WORK/call2"
cp "$WORK/parts"/*.tar.zst.00 "$WORK/call1/" && cp "$WORK/parts"/*.tar.zst.01 "$WORK/parts"/*.sha256 "$WORK/call2/"
fa3 unpack --to "$WORK/fa3" "$WORK/call1" "$WORK/call2" || fail "unpack exited $?: $(cat "$WORK/log")"
cmp -s "$lib/sgl_kernel/flash_ops.abi3.so" "$WORK/fa3/sgl_kernel/flash_ops.abi3.so" || fail "the library differs after unpack"
cmp -s "$lib/sgl_kernel/flash_attn.py" "$WORK/fa3/sgl_kernel/flash_attn.py" || fail "flash_attn.py differs after unpack"
fa3 unpack --to "$WORK/fa3" "$WORK/call2" && grep -q "already holds" "$WORK/log" || fail "a checked DIR is not kept: $(cat "$WORK/log")"

# 2. Refusals: each exit 2, naming what is wrong
expect2 "a missing part" "part .*tar.zst.00 is in none of" unpack --to "$WORK/fa3b" "$WORK/call2"
cp "$WORK/call1"/*.00 "$WORK/bad.00" && printf 'X' | dd of="$WORK/bad.00" bs=1 seek=100 conv=notrunc 2>/dev/null
mkdir -p "$WORK/call1bad" && cp "$WORK/bad.00" "$WORK/call1bad/$(ls "$WORK/call1")"
expect2 "a changed part" "sha256 .* the checksum file says" unpack --to "$WORK/fa3b" "$WORK/call1bad" "$WORK/call2"
[ ! -e "$WORK/fa3b" ] || fail "a refused unpack left $WORK/fa3b"
expect2 "no checksum file" "sha256 is in none of" unpack --to "$WORK/fa3b" "$WORK/call1"
mkdir -p "$WORK/badsums" && cp "$WORK/call1"/*.00 "$WORK/call2"/*.01 "$WORK/badsums/"
sed 's/  part /  piece /' "$WORK/call2"/*.sha256 >"$WORK/badsums/$(ls "$WORK/call2" | grep sha256)"
expect2 "an unreadable checksum file" "not '<sha256>  part|whole|file NAME'" unpack --to "$WORK/fa3b" "$WORK/badsums"
expect2 "a missing --from" "not a folder" pack --folder "$WORK/p2" --from "$WORK/nothing"

# 3. The FA3 table from fabricated runs (ci/repro.sh run's FILE.N.out / .label)
run() {  # run DIR N EXIT MAX_ERROR
  mkdir -p "$1"
  echo "RESULT {\"exit\": $3, \"device\": \"NVIDIA H100\", \"release\": \"0.5.23\", \"fixes\": [], \"queries\": 4, \"wrong\": $(($3 == 1)), \"max_error\": $4, \"worst\": null}" >"$1/kvfuzz_fa_mixed_local.$2.out"
  echo "label: exit $3" >"$1/kvfuzz_fa_mixed_local.$2.label"
}
table() { python3 "$SRC/ci/gpu_fa3_table.py" "$@" >"$WORK/table" 2>&1; }
run "$WORK/t/fa" 1 1 0.9 && run "$WORK/t/fa" 2 0 0.004
run "$WORK/t/fa3" 1 1 0.9 && run "$WORK/t/fa3" 2 0 0.008
table "$WORK/t/fa" "$WORK/t/fa3" || fail "agreeing runs: exit $?: $(cat "$WORK/table")"
grep -q "| 1 | 0.9 | 1 | 0.9 | yes |" "$WORK/table" || fail "no agreeing row: $(cat "$WORK/table")"
run "$WORK/t/fa3" 2 0 0.5  # the same exit status, a max error 0.5 apart
table "$WORK/t/fa" "$WORK/t/fa3"
rc=$?
[ $rc = 1 ] && grep -q "| 0 | 0.004 | 0 | 0.5 | \*\*NO\*\* |" "$WORK/table" || fail "errors apart: exit $rc: $(cat "$WORK/table")"
run "$WORK/t/fa3" 2 1 0.004  # the same max error, another exit status
table "$WORK/t/fa" "$WORK/t/fa3"
rc=$?
[ $rc = 1 ] && grep -q "| 0 | 0.004 | 1 | 0.004 | \*\*NO\*\* |" "$WORK/table" || fail "exits apart: exit $rc: $(cat "$WORK/table")"
# The stand-in raised where FA3 gave wrong values, the same exit: shown as such, not a disagreement;
# the stand-in raising where FA3 is right (exit 0) is one.
echo 'RESULT {"exit": 1, "device": "NVIDIA H100", "release": "0.5.23", "fixes": [], "queries": 0, "raised": "IndexError: page 9", "max_error": null, "worst": null}' >"$WORK/t/fa/kvfuzz_fa_mixed_local.2.out"
echo "label: exit 1" >"$WORK/t/fa/kvfuzz_fa_mixed_local.2.label"
run "$WORK/t/fa3" 2 1 0.9
table "$WORK/t/fa" "$WORK/t/fa3" || fail "a raise beside wrong values, the same exit: exit $?: $(cat "$WORK/table")"
grep -q "| 1 raised IndexError |  | 1 | 0.9 | same exit; the stand-in raised |" "$WORK/table" || fail "no raised row: $(cat "$WORK/table")"
run "$WORK/t/fa3" 2 0 0.004
table "$WORK/t/fa" "$WORK/t/fa3"
[ $? = 1 ] && grep -q "| 1 raised IndexError |  | 0 | 0.004 | \*\*NO\*\* |" "$WORK/table" || fail "a false raise agrees: $(cat "$WORK/table")"
table "$WORK/t/fa" "$WORK/t/none"
[ $? = 2 ] || fail "a missing folder does not exit 2: $(cat "$WORK/table")"

[ $failures = 0 ] && echo "gpu_fa3_test: all passed" || { echo "gpu_fa3_test: $failures failed"; exit 1; }
