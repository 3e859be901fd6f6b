#!/usr/bin/env bash
# kvfuzz repro (fuzz/cli/cmd_repro.cc) without running a reproducer: the script carries the case's
# batch (rows, slots, positions, queries and the keys each should read), its planner's metadata, and
# imports kvfuzz's harness written beside it (which embeds the kvfuzz modules it needs verbatim); the
# script is at most 150 lines; --one-file writes both as one script; a saved finding's record
# gives the case and the backend; --report writes the draft of the known issue whose minimal case
# it is; bad input exits 2 with a message naming it. About 2 s.
# Usage: repro_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
bundle() {  # bundle SCRIPT PYTHON-EXPRESSION: the expression on the script's embedded data, printed
  python3 - "$1" "$2" <<'EOF'
import json, sys
s = open(sys.argv[1]).read()
start = s.index("BUNDLE = json.loads(r'''") + len("BUNDLE = json.loads(r'''")
b = json.loads(s[start:s.index("''')", start)])
print(eval(sys.argv[2], {"b": b}))
EOF
}
expect() {  # expect WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}

# 1. A case with --backend: FlashInfer's masked paged call with an empty row 0 (page size 2).
fi_case=$SRC/corpus/gpu/flashinfer_mask_indptr_empty_row.json
"$K" repro "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr -o "$WORK/fi.py" || fail "repro exited $?"
grep -q "^BUNDLE = None" "$WORK/fi.py" && fail "the data was not embedded"
fi_harness=$WORK/kvfuzz_repro_flashinfer_paged_mask.py
grep -q "^import kvfuzz_repro_flashinfer_paged_mask as kv" "$WORK/fi.py" || fail "the script does not import its harness"
grep -q "BatchPrefillWithPagedKVCacheWrapper" "$fi_harness" || fail "not the FlashInfer template in the harness"
grep -q "def check(run, batch" "$fi_harness" || fail "the common part is missing from the harness"
grep -q "def check(run, batch" "$WORK/fi.py" && fail "the harness is in the script"
# what each query should read, per layer (kvfuzz's visible set): request 1's query at 3 on window 2 sees columns 1..3
expect "visible" "$(bundle "$WORK/fi.py" '[q["visible"] for q in b["rows"][1]["queries"]]')" \
  "[[[[0, 2]], [[0, 2]]], [[[0, 3]], [[0, 3]]], [[[1, 4]], [[1, 4]]]]"
expect "target" "$(bundle "$WORK/fi.py" 'b["target"]')" flashinfer_paged_mask
expect "rows" "$(bundle "$WORK/fi.py" '[(r["request"], r["prefix_len"], [q["position"] for q in r["queries"]]) for r in b["rows"]]')" \
  "[(0, 0, [0]), (1, 1, [1, 2, 3])]"
expect "layers" "$(bundle "$WORK/fi.py" '[l["kind"] + str(l["window"]) for l in b["model"]["layers"]]')" \
  "['sliding_window2', 'sliding_window2']"
# request 1's 4 columns: its cached key and the 3 new ones, consecutive positions 0..3
expect "columns" "$(bundle "$WORK/fi.py" 'sum(n for _, _, n in b["rows"][1]["columns"]), b["rows"][1]["columns"][0][1]')" "(4, 0)"
# the masked paged call the planner made: row 0 has no pages, row 1 one page of one key
expect "masked call" "$(bundle "$WORK/fi.py" '[(c["role"], c["has_mask"], c["page_size"]) for c in b["plan"]["meta"]["groups"][0]["calls"] if c["has_mask"]]')" \
  "[('prefix', True, 2)]"
expect "page indptr" "$(bundle "$WORK/fi.py" '[b["plan"]["arrays"][k] for k in sorted(b["plan"]["arrays"]) if k.endswith("kv_indptr") and ".calls.1." in k][0]')" \
  "[0, 0, 1]"

# An sglang planner: the engine's own backend is the target; the script carries the planner request
"$K" repro "$SRC/corpus/sglang/triton_swa_decode_window.json" --backend sglang_triton_0_5_23:triton -o "$WORK/sg.py" ||
  fail "repro of an sglang pair exited $?"
expect "sglang target" "$(bundle "$WORK/sg.py" 'b["target"], b["release"], b["plan"]')" "('sglang_metadata', '0.5.23', None)"
expect "engine request" "$(bundle "$WORK/sg.py" 'sorted(b["engine_request"]["arrays"]), b["engine_request"]["arrays"]["seq_lens"]["data"], b["engine_request"]["case"]["batch"]["mode"]')" \
  "(['extend_prefix_lens', 'extend_seq_lens', 'full_to_swa', 'out_cache_loc', 'positions', 'req_pool_indices', 'req_to_token', 'seq_lens'], [5], 'decode')"
expect "no engine request for a kernel pair" "$(bundle "$WORK/fi.py" 'b["engine_request"]')" None
# the kvfuzz modules it imports, each embedded verbatim from its one source: no kvfuzz checkout needed
embedded() {  # embedded SCRIPT: NAME=PATH of each embedded module whose text is its file's, in order
  python3 - "$1" "$SRC/adapters" <<'EOF'
import re, sys
s = open(sys.argv[1]).read()
q3 = "'" * 3
for m in re.finditer(r"^# ---- adapters/(\S+) of kvfuzz, as module (\S+) ----\nEMBEDDED\[\"(\S+)\"\] = r" + q3 + r"\n", s, re.M):
    end = s.index("\n" + q3 + "\n", m.end()) + 1
    same = s[m.end():end] == open(f"{sys.argv[2]}/{m.group(1)}").read() and m.group(2) == m.group(3)
    print(f"{m.group(2)}={m.group(1)}" + ("" if same else " (differs)"), end=" ")
EOF
}
expect "embedded modules" "$(embedded "$WORK/kvfuzz_repro_sglang_metadata.py")" \
  "engine.release=engine/release.py engine.stub_import=engine/stub_import.py sglang_import=sglang/sglang_import.py fake_runner=sglang/fake_runner.py sglang_release=sglang/sglang_release.py fixes=sglang/fixes.py fa3_standin=repro/fa3_standin.py "
grep -q "kvfuzz repro embeds:" "$WORK/kvfuzz_repro_sglang_metadata.py" && fail "the EMBEDDED line was left unexpanded"
expect "nothing embedded in a kernel template" "$(embedded "$fi_harness")" ""
# the script a report links: the batch, the engine's calls, the comparison; at most 150 lines
grep -q "backend.forward, qt" "$WORK/sg.py" || fail "the engine's forward() call is not in the script"
for f in fi sg; do
  [ "$(wc -l <"$WORK/$f.py")" -le 150 ] || fail "$f.py is $(wc -l <"$WORK/$f.py") lines, more than 150"
done
# --one-file: one script, the harness first, no import of a harness module
"$K" repro "$SRC/corpus/sglang/triton_swa_decode_window.json" --backend sglang_triton_0_5_23:triton --one-file \
  -o "$WORK/one/sg.py" 2>/dev/null && fail "--one-file into a missing folder exited 0"
mkdir -p "$WORK/one"
"$K" repro "$SRC/corpus/sglang/triton_swa_decode_window.json" --backend sglang_triton_0_5_23:triton --one-file \
  -o "$WORK/one/sg.py" || fail "--one-file exited $?"
[ "$(ls "$WORK/one")" = sg.py ] || fail "--one-file wrote $(ls "$WORK/one")"
grep -q "^kv = sys.modules\[__name__\]" "$WORK/one/sg.py" && grep -q "def check(run, batch" "$WORK/one/sg.py" ||
  fail "--one-file is not the harness and the script in one"
expect "one file's bundle" "$(bundle "$WORK/one/sg.py" 'b["target"]')" sglang_metadata
# FlashAttention: the same template, FlashAttentionBackend with the FA3 stand-in
"$K" repro "$SRC/corpus/sglang/fa_mixed_local.json" --backend sglang_fa_0_5_23:fa -o "$WORK/fa.py" ||
  fail "repro of an FA pair exited $?"
expect "FA target" "$(bundle "$WORK/fa.py" 'b["target"], b["planner"]')" "('sglang_metadata', 'sglang_fa_0_5_23')"

# 2. A saved finding: the record names the case and the backend (quoted in its replay line).
cp "$SRC/corpus/gpu/sglang_triton_window0.json" "$WORK/oracle-triton-3-abc123.json"
cat >"$WORK/oracle-triton-3-abc123.finding.json" <<EOF
{"case": "/nowhere/oracle-triton-3-abc123.json", "replay": "kvfuzz check x.json --backend 'triton:sglang_triton' --adapter 'python3 a.py'",
 "fingerprints": [{"key": "oracle/triton:sglang_triton/extend/sliding_window: extra-before", "property": "oracle"}]}
EOF
"$K" repro "$WORK/oracle-triton-3-abc123.json" -o "$WORK/w0.py" || fail "repro of a saved finding exited $?"
expect "saved backend" "$(bundle "$WORK/w0.py" 'b["backend"], b["target"]')" "('triton:sglang_triton', 'sglang_triton_extend')"
expect "saved key" "$(bundle "$WORK/w0.py" 'b["finding"]["key"]')" "oracle/triton:sglang_triton/extend/sliding_window: extra-before"
expect "moved case" "$(bundle "$WORK/w0.py" 'b["finding"]["case"].endswith("/oracle-triton-3-abc123.json") and not b["finding"]["case"].startswith("/nowhere")')" True
"$K" repro "$WORK/oracle-triton-3-abc123.finding.json" -o "$WORK/w0b.py" || fail "repro of a .finding.json exited $?"
cmp -s "$WORK/w0.py" "$WORK/w0b.py" || fail "the case and its record give different scripts"

# 3. The report of the known issue whose minimal case it is.
"$K" repro "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr --report -o "$WORK/fi.md" || fail "--report exited $?"
grep -q "^# BatchPrefillWithPagedKVCacheWrapper with a custom mask" "$WORK/fi.md" || fail "the report's title is not the notes' title"
grep -q "^\*\*Affected\*\*: flashinfer 0.7.2.post1 up to the latest release checked" "$WORK/fi.md" || fail "no affected range"
grep -q "flashinfer_page_mask_indptr.py" "$WORK/fi.md" || fail "the report names no reproducer"
grep -q "^- request 1: 1 cached tokens, queries at positions 1 2 3" "$WORK/fi.md" || fail "the batch is not described"
grep -q "where(num_pages > 0" "$WORK/fi.md" || fail "no suggested fix"
printf 'line one\nBUG: it\nRESULT {"exit": 1}' >"$WORK/out.txt"
"$K" repro "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr --report --run-output "CPU run: exit 1=$WORK/out.txt" \
  >"$WORK/quoted.md" || fail "--report with --run-output exited $?"
grep -A4 "^CPU run: exit 1:" "$WORK/quoted.md" | grep -q "^BUG: it" || fail "--run-output is not quoted in the report"
grep -A5 "^CPU run: exit 1:" "$WORK/quoted.md" | grep -q "^RESULT" && fail "the RESULT line (for machines) is quoted"
grep -A5 "^CPU run: exit 1:" "$WORK/quoted.md" | sed -n 6p | grep -qx '```' || fail "the quote is not closed after the output"
# an issue without a bisect field: the releases kvfuzz ran, cut at its range
grep -q "of the releases checked (0.7.2.post1), affected: 0.7.2.post1\.$" "$WORK/fi.md" || fail "no affected releases"
# an sglang issue: the range its entry's bisect field holds, with the command
"$K" repro "$SRC/corpus/sglang/fa_mixed_local.json" --backend sglang_fa_0_5_23:fa --report -o "$WORK/fa.md" ||
  fail "--report of an sglang issue exited $?"
grep -q "0.5.10.post1 up to the latest release checked (no fix known); bisected over the releases on the package index: \`kvfuzz bisect --issue kvfuzz-fa-mixed-local: " \
  "$WORK/fa.md" || fail "the bisection is not quoted"
"$K" repro "$SRC/corpus/regressions/fa__fa_local_token_table.json" --backend sglang_fa_0_5_13:fa --report \
  --issue 'sglang#32902' -o "$WORK/f2.md" || fail "--report --issue exited $?"
grep -q "0.5.10.post1 up to before 0.5.20; bisected .*--issue sglang#32902: .* 0.5.20..0.5.23 without" "$WORK/f2.md" ||
  fail "a fixed issue's range is not cut at its fix"

# 4. Bad input: exit 2 and a message naming it.
bad() {  # bad PATTERN ARGS...
  local pattern=$1
  shift
  "$K" repro "$@" >"$WORK/bad.out" 2>&1
  local rc=$?
  [ $rc = 2 ] && grep -q "$pattern" "$WORK/bad.out" || { fail "repro $* exited $rc: $(cat "$WORK/bad.out")"; }
}
bad "no fingerprint record" "$fi_case"
bad "planner:executor pair" "$fi_case" --backend flashinfer_paged
bad "no reproducer template" "$fi_case" --backend fa:fa
bad "template .* is not written yet" "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr --templates "$WORK"
mkdir -p "$WORK/tpl/repro" && cp "$SRC/adapters/repro/common.py" "$SRC/adapters/repro/body.py" "$WORK/tpl/repro/"
printf 'EMBEDDED = {}  # kvfuzz repro embeds: gone=sglang/gone.py\nBUNDLE = None  # kvfuzz repro\n' >"$WORK/tpl/repro/sglang_metadata.py"
bad "embeds .*sglang/gone.py, which does not exist" "$SRC/corpus/sglang/fa_mixed_local.json" --backend sglang_fa_0_5_23:fa \
  --templates "$WORK/tpl/repro"
printf 'EMBEDDED = {}  # kvfuzz repro embeds: nameonly\n' >"$WORK/tpl/repro/sglang_metadata.py"
bad "is not NAME=PATH" "$SRC/corpus/sglang/fa_mixed_local.json" --backend sglang_fa_0_5_23:fa --templates "$WORK/tpl/repro"
bad "does not exist\|cannot open\|No such" "$WORK/none.json" --backend triton:sglang_triton
bad "no known issue has the minimal case" "$SRC/corpus/backends/gen-tiny-1.json" --backend triton:sglang_triton --report
bad "no known issue nope" "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr --report --issue nope
bad "expected LABEL=FILE" "$fi_case" --backend flashinfer_paged:flashinfer_paged_csr --report --run-output nolabel

[ $failures = 0 ] && echo "kvfuzz repro: ok"
exit $((failures > 0))
