#!/usr/bin/env bash
# ci/gpu_sglang_src.py and ci/gpu_pair_table.py without sglang or a GPU: a fake release is packed
# (its .py files and dist-info but the tests, the diffusion server and RECORD; the JIT kernels' C++
# sources whole; the same bytes twice; a .gpu folder past 60 MiB exits 2), and fabricated reproducer
# runs become the table's rows (the known issue by the case and the release, the error, the worst
# query's keys; a run without a RESULT line keeps its exit status; an empty folder exits 2). About 1 s.
# Usage: gpu_pair_table_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. Packing a release's source
rel=$WORK/installed/9.9.9
for f in sglang/__init__.py sglang/srt/layers/a.py sglang/test/t.py sglang/multimodal_gen/m.py sglang/srt/x/tests/u.py \
  sglang/kernels/jit/include/k.cuh sglang/srt/data.json sglang-9.9.9.dist-info/METADATA sglang-9.9.9.dist-info/RECORD; do
  mkdir -p "$(dirname "$rel/$f")" && echo "# $f" >"$rel/$f"
done
pack() { python3 "$SRC/ci/gpu_sglang_src.py" --folder "$WORK/.gpu/wheels" --installed "$WORK/installed" 9.9.9; }
pack >"$WORK/pack.txt" 2>&1 || fail "packing exited $?: $(cat "$WORK/pack.txt")"
archive=$WORK/.gpu/wheels/sglang_src-9.9.9.tgz
got=$(tar -tzf "$archive" 2>/dev/null | tr '\n' ' ')
want="sglang-9.9.9.dist-info/METADATA sglang/__init__.py sglang/kernels/jit/include/k.cuh sglang/srt/layers/a.py "
[ "$got" = "$want" ] || fail "archive holds '$got', expected '$want'"
sum1=$(md5sum <"$archive") && rm "$archive" && pack >/dev/null 2>&1
[ "$sum1" = "$(md5sum <"$archive")" ] || fail "the archive is not the same bytes twice"
grep -q "holds .* MiB (limit 60)" "$WORK/pack.txt" || fail "no size line: $(cat "$WORK/pack.txt")"
truncate -s 61M "$WORK/.gpu/big"
pack >"$WORK/big.txt" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "more than the 60 MiB" "$WORK/big.txt" || fail ".gpu past 60 MiB: exit $rc, $(cat "$WORK/big.txt")"
rm "$WORK/.gpu/big"

# 2. The table from fabricated runs (ci/repro.sh run's FILE.N.out / .label of reproducer FILE.py)
out=$WORK/out/pair
mkdir -p "$out"
run() {  # run FILE N LABEL RESULT-JSON-or-empty
  { echo "some output"; [ -z "$4" ] || echo "RESULT $4"; } >"$out/$1.$2.out"
  echo "$3" >"$out/$1.$2.label"
}
# each run's reproducer beside its outputs, as ci/repro.sh's run folder holds it: its BUNDLE names the case
script() {  # script FILE CASE
  printf '%s\n' "BUNDLE = json.loads(r'''{\"finding\": {\"case\": \"$2\"}}''')" >"$out/$1.py"
}
script kvfuzz_triton_draft_swa corpus/sglang/triton_draft_swa.json
script sglang_32087_triton_decode_window corpus/sglang/triton_swa_decode_window.json
script kvfuzz_triton_no_local corpus/sglang/triton_no_local.json
worst='{"layer": 0, "request": 1, "position": 1, "wrong": true, "error": 1.1, "visible": 2, "should_read": "0..1", "keys_read": 1, "read": "1"}'
run kvfuzz_triton_draft_swa 1 "sglang 0.5.23, GPU: exit 1" \
  "{\"exit\": 1, \"device\": \"NVIDIA H100 80GB HBM3\", \"queries\": 1, \"wrong\": 1, \"max_error\": 1.1036, \"release\": \"0.5.23\", \"fixes\": [], \"worst\": $worst}"
run kvfuzz_triton_draft_swa 2 "sglang 0.5.13, GPU: exit 1" \
  '{"exit": 1, "device": "NVIDIA H100 80GB HBM3", "queries": 0, "wrong": 0, "max_error": 0.0, "release": "0.5.13", "fixes": [], "worst": null, "raised": "ValueError: kv_indices is None"}'
run sglang_32087_triton_decode_window 3 "sglang 0.5.10.post1 with fix 32087: exit 0" \
  '{"exit": 0, "device": "CPU", "queries": 1, "wrong": 0, "max_error": "inf", "release": "0.5.10.post1", "fixes": ["32087"], "worst": null}'
run kvfuzz_triton_no_local 4 "sglang 0.5.23, TritonAttnBackend: exit 3" ""
python3 "$SRC/ci/gpu_pair_table.py" "$WORK/out" -o "$WORK/table.md" >"$WORK/table.txt" 2>&1 || fail "table exited $?"
cmp -s "$WORK/table.md" "$WORK/table.txt" || fail "-o does not write what is printed"
row() { grep -F "$1" "$WORK/table.txt" | grep -F "$2" | head -1; }
expect_row() {  # expect_row FILE RELEASE CELLS...: the row's cells after the reproducer's
  local r want
  r=$(row "$1" "| $2")
  want="| $(printf '%s | ' "${@:3}")" want=${want% }
  [[ "$r" == *"$want"* ]] || fail "row of $1 on $2: '$r' lacks '$want'"
}
expect_row kvfuzz_triton_draft_swa.py 0.5.23 "0.5.23" "NVIDIA H100 80GB HBM3" "1 WRONG (bug there)" "1.1" "1 of 1" \
  "request 1 at 1 (layer 0): read 1 (1 keys), visible 0..1 (2)"
[[ "$(row kvfuzz_triton_draft_swa.py '| 0.5.23')" == *"| kvfuzz-triton-draft-swa-short |"* ]] ||
  fail "0.5.23's run of triton_draft_swa.json is not kvfuzz-triton-draft-swa-short: $(row kvfuzz_triton_draft_swa.py '| 0.5.23')"
[[ "$(row kvfuzz_triton_draft_swa.py '| 0.5.13')" == *"| kvfuzz-triton-draft-swa |"*"1 WRONG (bug there): raised ValueError"* ]] ||
  fail "0.5.13's run: $(row kvfuzz_triton_draft_swa.py '| 0.5.13')"
expect_row sglang_32087 "0.5.10.post1 + fix 32087" "CPU" "0 right" "inf" "0 of 1"
[[ "$(row sglang_32087 '| 0.5.10')" == *"| sglang#32087 |"* ]] || fail "the 32087 run's issue: $(row sglang_32087 '| 0.5.10')"
[[ "$(row kvfuzz_triton_no_local '| kvfuzz-triton-no-local')" == *"| 0.5.23 |  | 3 reproducer failed |"* ]] ||
  fail "a run without RESULT: $(row kvfuzz_triton_no_local '|')"
[ "$(grep -c '^| `' "$WORK/table.txt")" = 4 ] || fail "not 4 rows: $(cat "$WORK/table.txt")"
mkdir -p "$WORK/empty"
python3 "$SRC/ci/gpu_pair_table.py" "$WORK/empty" >/dev/null 2>&1
[ $? = 2 ] || fail "an empty folder does not exit 2"
python3 "$SRC/ci/gpu_pair_table.py" "$WORK/nowhere" >/dev/null 2>&1
[ $? = 2 ] || fail "a missing folder does not exit 2"

[ $failures = 0 ] && echo "gpu_pair_table_test: ok"
exit $((failures > 0))
