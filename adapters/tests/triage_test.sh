#!/usr/bin/env bash
# adapters/triage.py on fingerprints: known (exit 0), NEW and regression (exit 1), a finding it
# cannot read (exit 3), a malformed issues file (exit 2); the mislabels configuration-only
# matching made are NEW now; every entry of both lists keyed on a mechanism
# (known_issues_test.py). Usage: triage_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
SRC=$1 WORK=$2
TRIAGE="python3 $SRC/adapters/triage.py"
SGLANG="--issues $SRC/adapters/sglang/known_issues.json"
GPU="--issues $SRC/adapters/gpu/known_issues.json"
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# line FILE PROPERTY BACKEND MODE KIND WINDOW MECHANISM [CONTEXT-JSON]: one finding line of an index.
line() {
  python3 - "$@" <<'PY'
import json, re, sys
path, prop, backend, mode, kind, window, mechanism = sys.argv[1:8]
context = {"page_size": 1, "topk": 1, "hybrid": False, "graph": False, "deterministic": False,
           "pool_elements": 4096, "head_dim": 8, "v_head_dim": 8}
context.update(json.loads(sys.argv[8]) if len(sys.argv) > 8 else {})
planner, _, executor = backend.partition(":")
m = re.search(r"_(\d+)_(\d+)_(\d+)(_post\d+)?", planner)
release = ".".join(m.groups()[:3]) + (("." + m.group(4)[1:]) if m.group(4) else "") if m else ""
bare = re.sub(r"_\d+_\d+_\d+(_post\d+)?", "", planner) + (":" + executor if executor else "")
fp = {"property": prop, "backend": bare, "planner": re.sub(r"_\d+_\d+_\d+(_post\d+)?", "", planner),
      "executor": executor, "release": release, "mode": mode,
      "layer": None if kind == "-" else {"kind": kind, "window": int(window), "chunk": 8},
      "mechanism": mechanism, "variant": "", "context": context}
key = f"{prop}/{bare}/{mode}/{kind}: {mechanism}"
with open(path, "a") as f:
    f.write(json.dumps({"key": key, "fingerprint": fp, "count": 1, "replay": "kvfuzz ..."}) + "\n")
PY
}
run() {  # run NAME EXPECTED_RC ISSUES...: triage WORK/NAME.jsonl, output in WORK/NAME.out
  local name=$1 want=$2
  shift 2
  $TRIAGE "$WORK/$name.jsonl" "$@" >"$WORK/$name.out" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || fail "$name: exit $rc, expected $want ($(tail -1 "$WORK/$name.out"))"
}

# Known: #32087's mechanism on 0.5.23, where it is open.
line "$WORK/known.jsonl" cache-extent sglang_triton_0_5_23:triton decode sliding_window 4 missing-oldest
run known 0 $SGLANG
grep -q "^known *sglang#32087" "$WORK/known.out" || fail "the Triton decode window not triaged as sglang#32087"

# A regression: #24617's mechanism on 0.5.23, after its fix (0.5.12.post1).
line "$WORK/regression.jsonl" stride-divide sglang_fa_0_5_23:fa target_verify sliding_window 3 page_table:untranslated \
  '{"topk": 2, "hybrid": true}'
run regression 1 $SGLANG
grep -q "^regression *sglang#24617" "$WORK/regression.out" || fail "a fixed bug that came back is not a regression"

# The mislabels of configuration-only matching (issue 18), each NEW now:
#  a CUDA-graph verify custom_mask write past its capacity, full layers only (was the tree-draft window);
line "$WORK/mask.jsonl" in-bounds sglang_triton_0_5_23:triton target_verify - 0 custom_mask:write-above \
  '{"topk": 2, "graph": true}'
run mask 1 $SGLANG
#  a decode query missing its only key on a window-0 layer (was the window-0 convention, which reads extra keys);
line "$WORK/window0.jsonl" cache-extent triton:sglang_triton decode sliding_window 0 missing-all
run window0 1 $GPU --version sglang=0.5.23
#  a mistranslated SWA page id on 0.5.23 (was a chunked-layer bug fixed before 0.5.23);
line "$WORK/swa.jsonl" stride-divide sglang_fa_0_5_23:fa extend sliding_window 3 swa_page_table:wrong-slot '{"page_size": 4}'
run swa 1 $SGLANG
grep -q "^NEW" "$WORK/swa.out" || fail "a mistranslated SWA page id is not NEW"
#  a crash on 0.5.23 of another exception than the bugs fixed before it (was one of those).
line "$WORK/crash.jsonl" crash sglang_flashinfer_0_5_23:flashinfer_paged target_verify - 0 "KeyError: Q @ forward_extend"
run crash 1 $SGLANG
grep -q "^NEW" "$WORK/crash.out" || fail "a new crash on 0.5.23 is not NEW"

# FlashInfer's negative total mask length (segment_packbits refuses it in plan): known at page size > 1,
# where an empty row makes it; the same exception from another function, or at page size 1, is NEW.
negative="RuntimeError: Trying to create tensor with negative dimension N: [N] @ segment_packbits"
line "$WORK/negative.jsonl" crash flashinfer_paged:flashinfer_paged_csr mixed - 0 "$negative" '{"page_size": 3}'
run negative 0 $GPU
grep -q "^known *flashinfer-page-mask-indptr" "$WORK/negative.out" || fail "the negative mask total is not the page-mask bug"
line "$WORK/negative1.jsonl" crash flashinfer_paged:flashinfer_paged_csr mixed - 0 "$negative" '{"page_size": 1}'
run negative1 1 $GPU
line "$WORK/negative2.jsonl" crash flashinfer_paged:flashinfer_paged_csr mixed - 0 "${negative% @*} @ plan" '{"page_size": 3}'
run negative2 1 $GPU

# A metamorphic change names its parts with one prefix ('changed:out+lse'): the page-mask bug's
# replay finding at page size 2 is known (H100, 2026-11-26, it was NEW while triage split the name
# wrongly); the same change at page size 1, where the bug is not, is NEW.
line "$WORK/replay.jsonl" replay flashinfer_paged:flashinfer_paged_csr extend chunked 0 "changed:out+lse" '{"page_size": 2, "graph": true}'
sed -i 's/"variant": ""/"variant": "replay"/' "$WORK/replay.jsonl"
run replay 0 $GPU
line "$WORK/replay1.jsonl" replay flashinfer_paged:flashinfer_paged_csr extend chunked 0 "changed:out+lse" '{"page_size": 1, "graph": true}'
sed -i 's/"variant": ""/"variant": "replay"/' "$WORK/replay1.jsonl"
run replay1 1 $GPU

# vLLM: the AoT schedule's split count against the call's (vllm#25490) is known in 0.10.2; another
# plan-run argument on full layers is NEW. A sliding layer reading past its window with the hybrid
# manager off is #51756 (the group's window) in 0.27.1 and a regression in 0.28.0; with it on, NEW.
VLLM="--issues $SRC/adapters/vllm/known_issues.json"
line "$WORK/splits.jsonl" plan-run vllm_fa_0_10_2:fa extend full 0 "plan-run:num_splits" '{"graph": true}'
run splits 0 $VLLM
grep -q "^known *vllm#25490" "$WORK/splits.out" || fail "the AoT split count is not vllm#25490"
line "$WORK/table.jsonl" plan-run vllm_fa_0_10_2:fa extend full 0 "plan-run:page_table" '{"graph": true}'
run table 1 $VLLM
line "$WORK/group.jsonl" cache-extent vllm_fa_0_27_1:fa decode sliding_window 16 extra-before
run group 0 $VLLM --version vllm=0.27.1
line "$WORK/group28.jsonl" cache-extent vllm_fa_0_28_0:fa decode sliding_window 16 extra-before
run group28 1 $VLLM --version vllm=0.28.0
grep -q "^regression *vllm#51756" "$WORK/group28.out" || fail "#51756's sliding side in 0.28.0 is not a regression"
line "$WORK/grouph.jsonl" cache-extent vllm_fa_0_27_1:fa decode sliding_window 16 extra-before '{"hybrid": true}'
run grouph 1 $VLLM --version vllm=0.27.1
# The Triton backend reaches vllm#26034 too (local layers' FULL-graph replay in 0.10.2); the same on
# full layers is NEW, at 0.11.0 a regression; #51756 (FlashAttention's group window) stays FA-only.
line "$WORK/tlocal.jsonl" plan-run vllm_triton_0_10_2:fa decode chunked 0 "plan-run:cu_seqlens_q"
run tlocal 0 $VLLM
grep -q "^known *vllm#26034" "$WORK/tlocal.out" || fail "Triton's local-layer replay in 0.10.2 is not vllm#26034"
line "$WORK/tfull.jsonl" plan-run vllm_triton_0_10_2:fa decode full 0 "plan-run:cu_seqlens_q"
run tfull 1 $VLLM
line "$WORK/tlocal11.jsonl" plan-run vllm_triton_0_11_0:fa decode chunked 0 "plan-run:cu_seqlens_q"
run tlocal11 1 $VLLM
grep -q "^regression *vllm#26034" "$WORK/tlocal11.out" || fail "Triton's local-layer replay in 0.11.0 is not a regression"
line "$WORK/tgroup.jsonl" cache-extent vllm_triton_0_27_1:fa decode sliding_window 16 extra-before
run tgroup 1 $VLLM --version vllm=0.27.1
# This session's vLLM entries, each against a different bug in the same configuration:
# - vllm#26034's FlashInfer side (the chunked builder's seq_lens over-read, plan-run:kv_lens) is known on
#   chunked layers in 0.10.2; the same disagreement on a full layer is NEW.
line "$WORK/fikv.jsonl" plan-run vllm_flashinfer_0_10_2:flashinfer_paged decode chunked 0 "plan-run:kv_lens" '{"graph": true}'
run fikv 0 $VLLM
grep -q "^known *vllm#26034" "$WORK/fikv.out" || fail "FlashInfer's chunked kv_lens over-read in 0.10.2 is not vllm#26034"
line "$WORK/fikvfull.jsonl" plan-run vllm_flashinfer_0_10_2:flashinfer_paged decode full 0 "plan-run:kv_lens" '{"graph": true}'
run fikvfull 1 $VLLM
# - vllm-mla-fa3-num-splits: FlashAttention MLA's split count in 0.11.0 is known; FlashMLA's split count,
#   and FlashAttention MLA's schedule for other cache_seqlens, are NEW.
line "$WORK/mlasplit.jsonl" plan-run vllm_mla_flashattn_0_11_0:mla decode full 0 "plan-run:num_splits" '{"graph": true}'
run mlasplit 0 $VLLM
grep -q "^known *vllm-mla-fa3-num-splits" "$WORK/mlasplit.out" || fail "FlashAttention MLA's split count is not vllm-mla-fa3-num-splits"
line "$WORK/mlasplit2.jsonl" plan-run vllm_mla_flashmla_0_11_0:mla decode full 0 "plan-run:num_splits" '{"graph": true}'
run mlasplit2 1 $VLLM
line "$WORK/mlasched.jsonl" plan-run vllm_mla_flashattn_0_11_0:mla decode full 0 "plan-run:cache_seqlens" '{"graph": true}'
run mlasched 1 $VLLM
# - vllm#29845 (drafting after a rejection reads past the draft): known in a 0.11.0 draft decode; the same
#   read in a plain decode step, and a key missing from the draft's own context, are NEW; in 0.33.0 a regression.
line "$WORK/rej.jsonl" cache-extent vllm_fa_0_11_0:fa draft_decode full 0 extra-after
run rej 0 $VLLM --version vllm=0.11.0
grep -q "^known *vllm#29845" "$WORK/rej.out" || fail "a 0.11.0 draft reading past its position is not vllm#29845"
line "$WORK/rejdec.jsonl" cache-extent vllm_fa_0_11_0:fa decode full 0 extra-after
run rejdec 1 $VLLM --version vllm=0.11.0
line "$WORK/rejmiss.jsonl" cache-extent vllm_fa_0_11_0:fa draft_decode full 0 missing-oldest
run rejmiss 1 $VLLM --version vllm=0.11.0
line "$WORK/rej33.jsonl" cache-extent vllm_fa_0_33_0:fa draft_decode full 0 extra-after
run rej33 1 $VLLM --version vllm=0.33.0
grep -q "^regression *vllm#29845" "$WORK/rej33.out" || fail "vllm#29845's read in 0.33.0 is not a regression"
#   Its rejected drafts exist only after a verify (fingerprint context after_verify): a draft after a
#   prefill reading a key too many (what the adapter's own seq_lens aliasing showed on
#   v1_draft_after_prefill_0_28.json, 0.27.1/0.28.0, before vllm_release._host_copy_of_seq_lens) is NEW, not
#   vllm#29845 come back, nor known in 0.11.0; the same after a verify stays known. Its chunked reads, on an
#   eager step, are not vllm#26034 (a FULL graph's replay) either.
line "$WORK/rejv.jsonl" cache-extent vllm_fa_0_11_0:fa draft_decode full 0 extra-after '{"after_verify": true}'
run rejv 0 $VLLM
grep -q "^known *vllm#29845" "$WORK/rejv.out" || fail "a 0.11.0 draft after a verify reading past its position is not vllm#29845"
for r in 0_11_0 0_28_0; do
  line "$WORK/prefill$r.jsonl" metadata vllm_fa_$r:fa draft_decode full 0 \
    "full.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too large)" '{"after_verify": false}'
  line "$WORK/prefill$r.jsonl" in-bounds vllm_fa_$r:fa draft_decode sliding_window 0 unowned-slot '{"after_verify": false}'
  line "$WORK/prefill$r.jsonl" metadata vllm_fa_$r:fa draft_decode chunked 0 \
    "local.N.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too large)" '{"after_verify": false}'
  line "$WORK/prefill$r.jsonl" oracle vllm_fa_$r:fa draft_decode chunked 0 reads:unowned-slot '{"after_verify": false}'
  run prefill$r 1 $VLLM
  grep -q "vllm#29845" "$WORK/prefill$r.out" && fail "a $r draft after a prefill reading past its position is vllm#29845"
  grep -q "vllm#26034" "$WORK/prefill$r.out" && fail "an eager $r chunked read is vllm#26034 (a FULL graph's replay)"
  grep -q "^NEW" "$WORK/prefill$r.out" || fail "a $r draft after a prefill reading past its position is not NEW"
done
# - vllm#26034's reads: a FULL-graph step, or the replay variant of an eager one (what the graph replays), known in 0.10.2.
line "$WORK/localg.jsonl" oracle vllm_fa_0_10_2:fa decode chunked 0 reads:unowned-slot '{"graph": true}'
line "$WORK/localv.jsonl" oracle vllm_fa_0_10_2:fa decode chunked 0 reads:unowned-slot
sed -i 's/"variant": ""/"variant": "replay"/' "$WORK/localv.jsonl"
for n in localg localv; do
  run $n 0 $VLLM
  grep -q "^known *vllm#26034" "$WORK/$n.out" || fail "$n: 0.10.2's chunked replay read is not vllm#26034"
done
# - vllm#32312 (max_seqlen_k not advanced while drafting): known in a 0.11.0 draft decode, NEW in a verify step.
MSK="vllm.full.N.max_seqlen_k is N, below its rows' N keys (declared an upper bound)"
line "$WORK/msk.jsonl" metadata vllm_fa_0_11_0:fa draft_decode full 0 "$MSK"
run msk 0 $VLLM --version vllm=0.11.0
grep -q "^known *vllm#32312" "$WORK/msk.out" || fail "the drafting loop's max_seqlen_k is not vllm#32312"
line "$WORK/mskv.jsonl" metadata vllm_fa_0_11_0:fa target_verify full 0 "$MSK"
run mskv 1 $VLLM --version vllm=0.11.0
# - vllm-sync-draft-seq-lens-cpu (the synchronous runner's host seq_lens advanced twice a drafting step): known
#   on a chunked layer in 0.28.0 where the planner ran with --no-async-scheduling (minimal_case.adapter_flags);
#   the same without the flag (the default, async scheduling, never reaches it), the same read on a full layer
#   (the device seq_lens: what the adapter's own aliasing on the CPU showed), and 0.30.0 are not it.
LOCAL="local.N.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too large)"
flagged() {  # flagged FILE FLAGS: the lines' replay ran the planner with FLAGS (an issue's minimal_case.adapter_flags)
  sed -i "s|\"kvfuzz ...\"|\"kvfuzz check c.json --backend b --adapter 'py vllm_planner.py --backend fa $2'\"|" "$1"
}
not_it() {  # not_it NAME ISSUE WHAT: WORK/NAME.jsonl has a NEW finding (exit 1) and nothing triaged as ISSUE
  run "$1" 1 $VLLM
  grep -q "$2" "$WORK/$1.out" && fail "$3 is $2"
}
line "$WORK/sync.jsonl" metadata vllm_fa_0_28_0:fa draft_decode chunked 0 "$LOCAL"
line "$WORK/sync.jsonl" in-bounds vllm_fa_0_28_0:fa draft_decode chunked 0 unowned-slot
flagged "$WORK/sync.jsonl" --no-async-scheduling
run sync 0 $VLLM
grep -q "^known *vllm-sync-draft-seq-lens-cpu" "$WORK/sync.out" || fail "the synchronous drafter's chunked read is not vllm-sync-draft-seq-lens-cpu"
line "$WORK/syncasync.jsonl" metadata vllm_fa_0_28_0:fa draft_decode chunked 0 "$LOCAL"
not_it syncasync vllm-sync-draft-seq-lens-cpu "a finding without --no-async-scheduling"
line "$WORK/syncfull.jsonl" metadata vllm_fa_0_28_0:fa draft_decode full 0 "full.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too large)"
line "$WORK/syncfull.jsonl" in-bounds vllm_fa_0_28_0:fa draft_decode full 0 unowned-slot
flagged "$WORK/syncfull.jsonl" --no-async-scheduling
not_it syncfull vllm-sync-draft-seq-lens-cpu "a full layer's read"
line "$WORK/sync30.jsonl" metadata vllm_fa_0_30_0:fa draft_decode chunked 0 "$LOCAL"
flagged "$WORK/sync30.jsonl" --no-async-scheduling
run sync30 1 $VLLM
# - kvfuzz-vllm-step3p5-draft-last-position (Step3p5MTPProposer's other groups leave the draft at
#   max_model_len - 1 unwritten): known for that crash in a 0.33.0 draft decode; a draft written at a wrong
#   slot (the same crash family, vllm_draft_test's slot-one-late mechanism), the same message outside
#   drafting, and the unwritten draft in 0.11.0 (before the entry's first release) are not it.
PAD="RuntimeError: layer N: vLLMQs draft (position N) unwritten (PADDING_SLOT_ID), kvfuzz's cache holds it at N @ _check_pass"
line "$WORK/pad.jsonl" crash vllm_fa_0_33_0:fa draft_decode - 0 "$PAD"
run pad 0 $VLLM
grep -q "^known *kvfuzz-vllm-step3p5-draft-last-position" "$WORK/pad.out" || fail "the unwritten last draft is not kvfuzz-vllm-step3p5-draft-last-position"
line "$WORK/padslot.jsonl" crash vllm_fa_0_33_0:fa draft_decode - 0 "RuntimeError: layer N: vLLMQs draft (position N) at slot N, kvfuzz's cache holds it at N @ _check_pass"
run padslot 1 $VLLM
grep -q "kvfuzz-vllm-step3p5-draft-last-position" "$WORK/padslot.out" && fail "a draft at a wrong slot is kvfuzz-vllm-step3p5-draft-last-position"
line "$WORK/padverify.jsonl" crash vllm_fa_0_33_0:fa target_verify - 0 "$PAD"
run padverify 1 $VLLM
line "$WORK/padold.jsonl" crash vllm_fa_0_11_0:fa draft_decode - 0 "$PAD"
run padold 1 $VLLM
# - kvfuzz-vllm-v2-chunked-draft-refresh (Model Runner V2's fused draft decode keeps the chunked-local builder's
#   first-step virtual batches): known on a chunked layer in 0.33.0 where the planner ran --runner v2
#   (minimal_case.adapter_flags); the same read without the flag (the V1 runner's EagleProposer rebuilds every
#   step), a full layer missing its newest keys, and 0.27.1 (before the fused path) are not it. (A draft
#   that crossed into the next chunk reads the old chunk's virtual batch: missing-all+extra-before.)
SHORT="local.N.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too small)"
line "$WORK/v2chunk.jsonl" metadata vllm_fa_0_33_0:fa draft_decode chunked 0 "$SHORT"
line "$WORK/v2chunk.jsonl" cache-extent vllm_triton_0_33_0:fa draft_decode chunked 0 missing-newest
line "$WORK/v2chunk.jsonl" oracle vllm_fa_0_33_0:fa draft_decode chunked 0 "reads:missing-all+extra-before"
flagged "$WORK/v2chunk.jsonl" "--runner v2"
run v2chunk 0 $VLLM
[ "$(grep -c "^known *kvfuzz-vllm-v2-chunked-draft-refresh" "$WORK/v2chunk.out")" = 3 ] ||
  fail "V2's stale chunked draft metadata is not kvfuzz-vllm-v2-chunked-draft-refresh"
line "$WORK/v2chunkv1.jsonl" metadata vllm_fa_0_33_0:fa draft_decode chunked 0 "$SHORT"
not_it v2chunkv1 kvfuzz-vllm-v2-chunked-draft-refresh "a finding without --runner v2"
line "$WORK/v2chunkfull.jsonl" cache-extent vllm_fa_0_33_0:fa draft_decode full 0 missing-newest
flagged "$WORK/v2chunkfull.jsonl" "--runner v2"
not_it v2chunkfull kvfuzz-vllm-v2-chunked-draft-refresh "a full layer's missing keys"
line "$WORK/v2chunk27.jsonl" metadata vllm_fa_0_27_1:fa draft_decode chunked 0 "$SHORT"
flagged "$WORK/v2chunk27.jsonl" "--runner v2"
not_it v2chunk27 kvfuzz-vllm-v2-chunked-draft-refresh "0.27.1's read (no fused path)"

# - kvfuzz-vllm-v2-draft-graph-padded-reads (a convention: V2's FULL draft-decode graph advances the padded
#   rows' seq_lens; those rows have no query): known for a draft_decode's padded row, in the case and in its
#   replay variant, full and sliding, where the planner ran --runner v2; the same mechanism on a target
#   decode (V2's target graph zeroes its padded seq_lens: a mutant's shape there), without the flag, and
#   another draft_decode metadata mechanism (a real row's key count) are not it.
PADROW="vllm.full.N: empty padded kernel row N reads N keys"
line "$WORK/v2pad.jsonl" metadata vllm_fa_0_33_0:fa draft_decode full 0 "$PADROW"
line "$WORK/v2pad.jsonl" metadata vllm_triton_0_27_1:fa draft_decode sliding_window 16 \
  "replay variant: vllm.sliding.N: empty padded kernel row N reads N keys"
flagged "$WORK/v2pad.jsonl" "--runner v2"
run v2pad 0 $VLLM
[ "$(grep -c "^known *kvfuzz-vllm-v2-draft-graph-padded-reads" "$WORK/v2pad.out")" = 2 ] ||
  fail "the draft graph's padded rows are not kvfuzz-vllm-v2-draft-graph-padded-reads"
line "$WORK/v2paddecode.jsonl" metadata vllm_fa_0_33_0:fa decode full 0 "$PADROW"
flagged "$WORK/v2paddecode.jsonl" "--runner v2"
not_it v2paddecode kvfuzz-vllm-v2-draft-graph-padded-reads "a target decode's padded row reading keys"
line "$WORK/v2padv1.jsonl" metadata vllm_fa_0_33_0:fa draft_decode full 0 "$PADROW"
not_it v2padv1 kvfuzz-vllm-v2-draft-graph-padded-reads "a padded row read without --runner v2"
line "$WORK/v2padreal.jsonl" metadata vllm_fa_0_33_0:fa draft_decode full 0 \
  "vllm.full.N.cache_seqlens[N] (batch row N) is N, expected N (too large)"
flagged "$WORK/v2padreal.jsonl" "--runner v2"
not_it v2padreal kvfuzz-vllm-v2-draft-graph-padded-reads "a real row's key count in a draft decode"

# - kvfuzz-vllm-dcp-fa2-unordered-context (FA2's split context path under DCP drops the context of rows after a
#   context-free prefill): known for the keys corpus/vllm/fa2_dcp_prefill_first.json gives on 0.33.0 under
#   --dcp 2 --fa-version 2, whose fingerprints say dcp 2, and for the batch-order variant's changed output. The
#   same keys without dcp in their context are any lost context on a full layer: not it, with the entry's
#   planner words (a fingerprint of a kvfuzz before the dcp context) or without them (a run without --dcp).
dcp_lines() {  # dcp_lines FILE [CONTEXT-JSON]: what fa2_dcp_prefill_first.json gives on 0.33.0 (kvfuzz fingerprint)
  local context=${2:-'{}'}
  line "$1" metadata vllm_fa_0_33_0:fa mixed full 0 "full.parts.N.cache_seqlens[N] (batch row N) is N, expected N (too small)" "$context"
  line "$1" cache-extent vllm_fa_0_33_0:fa mixed full 0 missing-oldest "$context"
  line "$1" oracle vllm_fa_0_33_0:fa mixed full 0 reads:missing-oldest "$context"
}
dcp_known() {  # dcp_known NAME PLANNER-WORDS KEYS WHAT: NAME.jsonl, under those words, is KEYS known keys of the entry
  flagged "$WORK/$1.jsonl" "$2"
  run "$1" 0 $VLLM
  [ "$(grep -c "^known *kvfuzz-vllm-dcp-fa2-unordered-context" "$WORK/$1.out")" = "$3" ] ||
    fail "$4 are not kvfuzz-vllm-dcp-fa2-unordered-context"
}
dcp_lines "$WORK/dcp.jsonl" '{"page_size": 32, "dcp": 2}'
line "$WORK/dcpv.jsonl" metamorphic vllm_fa_0_33_0:fa mixed full 0 changed:out '{"page_size": 32, "dcp": 2}'
sed -i 's/"variant": ""/"variant": "batch-order"/' "$WORK/dcpv.jsonl" && cat "$WORK/dcpv.jsonl" >>"$WORK/dcp.jsonl"
dcp_known dcp "--dcp 2 --fa-version 2" 4 "fa2_dcp_prefill_first.json's fingerprints under DCP"
dcp_lines "$WORK/dcpnone.jsonl" '{"page_size": 32}'
flagged "$WORK/dcpnone.jsonl" "--dcp 2 --fa-version 2"
not_it dcpnone kvfuzz-vllm-dcp-fa2-unordered-context "a lost context without dcp in its fingerprint"
dcp_lines "$WORK/dcpnoflag.jsonl" '{"page_size": 32}'
not_it dcpnoflag kvfuzz-vllm-dcp-fa2-unordered-context "a lost context of a run without --dcp"
# The entry matches on --fa-version 2 (match_flags), the ranks on the fingerprint's dcp: four ranks are
# it too; FlashAttention 3 under DCP (one context call over every row) is not.
dcp_lines "$WORK/dcp4.jsonl" '{"page_size": 32, "dcp": 4}'
dcp_known dcp4 "--dcp 4 --fa-version 2" 3 "the same fingerprints on four DCP ranks"
dcp_lines "$WORK/dcpfa3.jsonl" '{"page_size": 32, "dcp": 2}'
flagged "$WORK/dcpfa3.jsonl" "--dcp 2 --fa-version 3"
not_it dcpfa3 kvfuzz-vllm-dcp-fa2-unordered-context "a lost context under DCP with FlashAttention 3"

# - vllm#33638 (FlashMLA's fp8 schedule left out of the persistent buffers): the replayed fp8 kernel's schedule
#   for the capture's seq_lens is known in 0.15.0 where the planner ran with --kv-cache-dtype fp8; the same
#   mechanism on the bf16 path (no flag: FlashMLASchedMeta keeps its own buffers), another plan-run argument
#   under fp8, and 0.19.0 (the fix) are not it.
fp8_replay() {  # fp8_replay FILE [BACKEND]: the finding's replay with the planner's --kv-cache-dtype fp8
  sed -i "s|\"kvfuzz ...\"|\"kvfuzz check c.json --backend b --adapter 'py vllm_planner.py --backend ${2:-mla_flashmla} --kv-cache-dtype fp8'\"|" "$1"
}
line "$WORK/fp8sched.jsonl" plan-run vllm_mla_flashmla_0_15_0:mla decode full 0 "plan-run:cache_seqlens" '{"graph": true}'
fp8_replay "$WORK/fp8sched.jsonl"
run fp8sched 0 $VLLM
grep -q "^known *vllm#33638" "$WORK/fp8sched.out" || fail "FlashMLA's fp8 schedule replayed from the capture is not vllm#33638"
line "$WORK/fp8bf16.jsonl" plan-run vllm_mla_flashmla_0_15_0:mla decode full 0 "plan-run:cache_seqlens" '{"graph": true}'
run fp8bf16 1 $VLLM
grep -q "vllm#33638" "$WORK/fp8bf16.out" && fail "the bf16 path's schedule mismatch (no --kv-cache-dtype fp8) is vllm#33638"
line "$WORK/fp8table.jsonl" plan-run vllm_mla_flashmla_0_15_0:mla decode full 0 "plan-run:block_table" '{"graph": true}'
fp8_replay "$WORK/fp8table.jsonl"
run fp8table 1 $VLLM
grep -q "vllm#33638" "$WORK/fp8table.out" && fail "a replayed block table under fp8 is vllm#33638"
line "$WORK/fp8fixed.jsonl" plan-run vllm_mla_flashmla_0_19_0:mla decode full 0 "plan-run:cache_seqlens" '{"graph": true}'
fp8_replay "$WORK/fp8fixed.jsonl"
run fp8fixed 1 $VLLM
grep -q "^regression *vllm#33638" "$WORK/fp8fixed.out" || fail "FlashMLA's fp8 schedule replayed from the capture in 0.19.0 is not a regression"
# - kvfuzz-vllm-chunked-promote-kv-quant-mode (0.27.1's promoted chunked spec without kv_quant_mode: FlashInfer's
#   builder asserts at start-up): known for that crash on FlashInfer in 0.27.1 with --kv-cache-dtype fp8; the same
#   crash without the flag, another crash under fp8, the same crash on FlashAttention, and 0.28.0 (the fix) are not it.
PROMOTE="AssertionError @ __init__"
FI27=vllm_flashinfer_0_27_1:flashinfer_paged
line "$WORK/promote.jsonl" crash $FI27 mixed - 0 "$PROMOTE"
fp8_replay "$WORK/promote.jsonl" flashinfer
run promote 0 $VLLM
grep -q "^known *kvfuzz-vllm-chunked-promote-kv-quant-mode" "$WORK/promote.out" ||
  fail "FlashInfer's start-up assertion under fp8 on 0.27.1 is not kvfuzz-vllm-chunked-promote-kv-quant-mode"
line "$WORK/promoteauto.jsonl" crash $FI27 mixed - 0 "$PROMOTE"
run promoteauto 1 $VLLM
grep -q "kvfuzz-vllm-chunked-promote-kv-quant-mode" "$WORK/promoteauto.out" && fail "the assertion without --kv-cache-dtype fp8 is kvfuzz-vllm-chunked-promote-kv-quant-mode"
line "$WORK/promoteother.jsonl" crash $FI27 mixed - 0 "ValueError @ build"
fp8_replay "$WORK/promoteother.jsonl" flashinfer
run promoteother 1 $VLLM
grep -q "kvfuzz-vllm-chunked-promote-kv-quant-mode" "$WORK/promoteother.out" && fail "another crash under fp8 is kvfuzz-vllm-chunked-promote-kv-quant-mode"
line "$WORK/promotefa.jsonl" crash vllm_fa_0_27_1:fa mixed - 0 "$PROMOTE"
fp8_replay "$WORK/promotefa.jsonl" fa
run promotefa 1 $VLLM
grep -q "kvfuzz-vllm-chunked-promote-kv-quant-mode" "$WORK/promotefa.out" && fail "the assertion on FlashAttention is kvfuzz-vllm-chunked-promote-kv-quant-mode"
line "$WORK/promotefixed.jsonl" crash vllm_flashinfer_0_28_0:flashinfer_paged mixed - 0 "$PROMOTE"
fp8_replay "$WORK/promotefixed.jsonl" flashinfer
run promotefixed 1 $VLLM
grep -q "^regression *kvfuzz-vllm-chunked-promote-kv-quant-mode" "$WORK/promotefixed.out" ||
  fail "the assertion under fp8 on 0.28.0 is not a regression of kvfuzz-vllm-chunked-promote-kv-quant-mode"
# FlashInfer campaigns within each planner's declaration (2026-11-26). sglang#39287's FlashInfer half in 0.5.23:
# its full-prefix tree mask read at the trimmed width (extra-after) and, in a hybrid pool, its column-0 gather
# reading evicted keys (unowned-slot) are known; a key read twice, an unowned slot outside a hybrid pool, or
# a slot past the pool at the same place are NEW.
FIV=sglang_flashinfer_0_5_23:flashinfer_paged
line "$WORK/vmask.jsonl" cache-extent $FIV target_verify sliding_window 1 extra-after
run vmask 0 $SGLANG
grep -q "^known *sglang#39287-flashinfer" "$WORK/vmask.out" || fail "the verify mask layout is not sglang#39287-flashinfer"
line "$WORK/evicted.jsonl" in-bounds $FIV target_verify sliding_window 0 unowned-slot '{"hybrid": true}'
run evicted 0 $SGLANG
line "$WORK/vmask2.jsonl" cache-extent $FIV target_verify sliding_window 1 read-twice
run vmask2 1 $SGLANG
line "$WORK/evicted2.jsonl" in-bounds $FIV target_verify sliding_window 0 unowned-slot
run evicted2 1 $SGLANG
line "$WORK/evicted3.jsonl" in-bounds $FIV target_verify sliding_window 0 outside-pool '{"hybrid": true}'
run evicted3 1 $SGLANG
# The full-attention wrapper of a model with sliding layers planned over seq_lens in a ragged extend (0.5.10.post1
# to 0.5.20): known where the model has sliding layers; NEW in a model without them (update_single_wrapper, another
# function), in deterministic (paged-only) prefill, for a read before the prefix, and in a fingerprint that does not
# say (an older kvfuzz); a regression in 0.5.23.
FI13=sglang_flashinfer_0_5_13:flashinfer_paged
line "$WORK/full.jsonl" cache-extent $FI13 mixed full 0 extra-after+read-twice '{"hybrid": true, "sliding_layers": true}'
run full 0 $SGLANG
grep -q "^known *kvfuzz-flashinfer-swa-full-prefix" "$WORK/full.out" || fail "the full wrapper over seq_lens is not kvfuzz-flashinfer-swa-full-prefix"
line "$WORK/full_meta.jsonl" metadata $FI13 extend - 0 "groups.N.calls.N.kv_indptr[N] - [N] is N, expected N (too large)" '{"sliding_layers": true}'
run full_meta 0 $SGLANG
line "$WORK/full2.jsonl" cache-extent $FI13 mixed full 0 extra-after+read-twice '{"sliding_layers": false}'
run full2 1 $SGLANG
line "$WORK/full3.jsonl" cache-extent $FI13 mixed full 0 extra-after+read-twice '{"sliding_layers": true, "deterministic": true}'
run full3 1 $SGLANG
line "$WORK/full4.jsonl" cache-extent $FI13 extend full 0 extra-before '{"sliding_layers": true}'
run full4 1 $SGLANG
line "$WORK/full5.jsonl" cache-extent $FI13 extend full 0 read-twice
run full5 1 $SGLANG
line "$WORK/full23.jsonl" cache-extent $FIV extend full 0 read-twice '{"sliding_layers": true}'
run full23 1 $SGLANG
grep -q "^regression *kvfuzz-flashinfer-swa-full-prefix" "$WORK/full23.out" || fail "the full wrapper over seq_lens in 0.5.23 is not a regression"
# #31501 on a deterministic DRAFT_EXTEND_V2 (0.5.10.post1 to 0.5.13 plan it as a plain paged-only extend): known;
# in 0.5.23 a regression; the plan-run of another argument, NEW.
FID=sglang_flashinfer_0_5_10_post1_det:flashinfer_paged
line "$WORK/dev2.jsonl" plan-run $FID draft_extend_v2 sliding_window 0 plan-run:window_left '{"deterministic": true}'
run dev2 0 $SGLANG
grep -q "^known *sglang#31501" "$WORK/dev2.out" || fail "the deterministic draft extend window is not sglang#31501"
line "$WORK/dev2b.jsonl" plan-run $FID draft_extend_v2 sliding_window 0 plan-run:causal '{"deterministic": true}'
run dev2b 1 $SGLANG
line "$WORK/dev23.jsonl" plan-run sglang_flashinfer_0_5_23_det:flashinfer_paged draft_extend_v2 sliding_window 0 plan-run:window_left \
  '{"deterministic": true}'
run dev23 1 $SGLANG
grep -q "^regression *sglang#31501" "$WORK/dev23.out" || fail "the deterministic draft extend window in 0.5.23 is not a regression"


# The FA draft cascade's keys before the window, read on a separate SWA pool after they were evicted
# (freed SWA slots): kvfuzz-fa-draft-swa-cascade; the same foreign read with one pool (nothing is
# evicted, so the cascade cannot reach a freed slot), at topk 1 (no cascade), or of another request's slot
# (evicted keys map to the dummy page; the expand call's untranslated table reads others' slots): NEW.
CASCADE_FP='{"topk": 2, "hybrid": true, "sliding_layers": true}'
line "$WORK/casc.jsonl" in-bounds sglang_fa_0_5_23:fa draft_decode sliding_window 2 unowned-slot "$CASCADE_FP"
line "$WORK/casc.jsonl" oracle sglang_fa_0_5_23:fa draft_decode sliding_window 2 reads:unowned-slot+missing-interior "$CASCADE_FP"
run casc 0 $SGLANG
grep -q "^known *kvfuzz-fa-draft-swa-cascade" "$WORK/casc.out" || fail "the cascade's evicted keys are not kvfuzz-fa-draft-swa-cascade"
line "$WORK/casc1.jsonl" in-bounds sglang_fa_0_5_23:fa draft_decode sliding_window 2 unowned-slot '{"topk": 2, "sliding_layers": true}'
run casc1 1 $SGLANG
line "$WORK/casc2.jsonl" in-bounds sglang_fa_0_5_23:fa draft_decode sliding_window 2 unowned-slot '{"hybrid": true, "sliding_layers": true}'
run casc2 1 $SGLANG
line "$WORK/casc3.jsonl" in-bounds sglang_fa_0_5_23:fa draft_decode sliding_window 2 other-request "$CASCADE_FP"
run casc3 1 $SGLANG
# The topk > 1 cascade handing the sinks to both merged calls (the lines `kvfuzz fingerprint` gives
# corpus/sglang/fa_verify_sinks_twice.json on 0.5.23): kvfuzz-fa-sinks-twice. Another mechanism at the same
# configuration (the layer running another number of calls), the same lines on a model without sinks,
# and the verify's sliding layers (which run no cascade in target verify) are NEW.
SINKS_MSG="layer N: attention sinks on N of its N merged calls, expected N (the merge counts the sink N times)"
SINKS_FP='{"topk": 2, "sinks": true, "head_dim": 64, "v_head_dim": 64}'
line "$WORK/sinks.jsonl" metadata sglang_fa_0_5_23:fa target_verify full 0 "$SINKS_MSG" "$SINKS_FP"
line "$WORK/sinks.jsonl" oracle sglang_fa_0_5_23:fa target_verify full 0 values:gross "$SINKS_FP"
line "$WORK/sinks.jsonl" oracle sglang_fa_0_5_10_post1:fa draft_decode full 0 values:gross "$SINKS_FP"
run sinks 0 $SGLANG
[ "$(grep -c "^known *kvfuzz-fa-sinks-twice " "$WORK/sinks.out")" -eq 3 ] || fail "the sinks on both cascade calls are not kvfuzz-fa-sinks-twice"
line "$WORK/sinks_other.jsonl" metadata sglang_fa_0_5_23:fa target_verify full 0 "layer N runs N calls, expected N" "$SINKS_FP"
run sinks_other 1 $SGLANG
line "$WORK/sinks_none.jsonl" oracle sglang_fa_0_5_23:fa target_verify full 0 values:gross '{"topk": 2}'
run sinks_none 1 $SGLANG
line "$WORK/sinks_swa.jsonl" oracle sglang_fa_0_5_23:fa target_verify sliding_window 3 values:gross "$SINKS_FP"
run sinks_swa 1 $SGLANG
# hang and contract never match, whatever else they share with an issue.
line "$WORK/hang.jsonl" hang sglang_triton_0_5_23:triton decode sliding_window 4 missing-oldest
run hang 1 $SGLANG

# A campaign folder: a saved case without its fingerprint record cannot be read (exit 3), nor a malformed index line.
mkdir -p "$WORK/folder"
line "$WORK/folder/index.jsonl" cache-extent sglang_triton_0_5_23:triton decode sliding_window 4 missing-oldest
$TRIAGE "$WORK/folder" $SGLANG >"$WORK/folder.out" 2>&1 || fail "a readable folder: exit $?"
[ -f "$WORK/folder/triage.json" ] || fail "no triage.json written"
echo '{"version": 2}' >"$WORK/folder/oracle-x-1-abcdef.json"
$TRIAGE "$WORK/folder" $SGLANG >"$WORK/norecord.out" 2>&1
[ $? -eq 3 ] || fail "a saved case without its .finding.json: not exit 3"
rm "$WORK/folder/oracle-x-1-abcdef.json"
echo '{"key": ' >>"$WORK/folder/index.jsonl"
$TRIAGE "$WORK/folder" $SGLANG >"$WORK/badline.out" 2>&1
[ $? -eq 3 ] || fail "a malformed index line: not exit 3"

# A malformed issues file: bad input (exit 2), naming what is wrong.
echo '{"issues": [{"id": "x", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "p", "first": "1"}, "match": {"property": "hang", "mechanisms": ["a"]}}]}' >"$WORK/hang_issue.json"
$TRIAGE "$WORK/known.jsonl" --issues "$WORK/hang_issue.json" >"$WORK/bad.out" 2>&1
[ $? -eq 2 ] || fail "an issue matching hang: not exit 2"
grep -q "never match a known issue" "$WORK/bad.out" || fail "the bad issue is not named"
echo '{"issues": [{"id": "x", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "p", "first": "1"}, "minimal_case": {"case": "c.json", "backend": "fa", "release": "1", "adapter_flags": "--allocator vllm"}, "match": {"property": "crash", "mechanisms": ["a"]}}]}' >"$WORK/flags_issue.json"
$TRIAGE "$WORK/known.jsonl" --issues "$WORK/flags_issue.json" >"$WORK/bad_flags.out" 2>&1
[ $? -eq 2 ] || fail "minimal_case.adapter_flags as a string: not exit 2"
grep -q "adapter_flags must be a non-empty list" "$WORK/bad_flags.out" || fail "the bad adapter_flags is not named"

# Every entry of both lists: its own mechanism known, another at the same configuration NEW,
# its fixed release a regression. And that check can fail: an entry keyed on configuration alone.
python3 "$SRC/adapters/tests/known_issues_test.py" "$SRC/adapters/sglang/known_issues.json" \
  "$SRC/adapters/gpu/known_issues.json" "$SRC/adapters/vllm/known_issues.json" >"$WORK/entries.out" 2>&1 || fail "known_issues_test: $(tail -3 "$WORK/entries.out")"
echo '{"issues": [{"id": "config-only", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "sglang", "first": "0.5.10.post1", "fixed": null}, "match": {"property": "oracle", "backend": "sglang_fa", "mechanism_contains": [""]}}]}' >"$WORK/config_only.json"
python3 "$SRC/adapters/tests/known_issues_test.py" "$WORK/config_only.json" >"$WORK/config_only.out" 2>&1 &&
  fail "an entry that matches every mechanism passed known_issues_test"

# A known issue can name root-cause groups (the index lines' "group", properties/root_cause.h): a
# finding in that group is known whatever its key; one in another group, with the same key, is NEW.
line "$WORK/grouped.jsonl" oracle fa extend chunked 0 reads:unowned-slot
python3 - "$WORK/grouped.jsonl" <<'PY'
import json, sys
e = json.loads(open(sys.argv[1]).read())
lines = [dict(e, group="fa: table: local_block_table", case_index=1), dict(e, group="fa: table: swa_page_table", case_index=2)]
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
open(sys.argv[1] + ".one", "w").write(json.dumps(lines[0]) + "\n")
PY
echo '{"issues": [{"id": "by-group", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "kvfuzz", "first": "0"}, "groups": ["fa: table: local_block_table"]}]}' >"$WORK/group_issue.json"
$TRIAGE "$WORK/grouped.jsonl.one" --issues "$WORK/group_issue.json" --version kvfuzz=1 >"$WORK/group_known.out" 2>&1 ||
  fail "a finding in a known issue's group: exit $? ($(tail -2 "$WORK/group_known.out" | head -1))"
grep -q "^known *by-group " "$WORK/group_known.out" || fail "a finding in a known issue's group not triaged as it"
$TRIAGE "$WORK/grouped.jsonl" --issues "$WORK/group_issue.json" --version kvfuzz=1 --json-out "$WORK/grouped.json" \
  >"$WORK/group_new.out" 2>&1 && fail "the same key in another root-cause group triaged known"
grep -q "^group NEW: fa: table: swa_page_table" "$WORK/group_new.out" || fail "the other group is not NEW"
grep -q "2 root-cause group(s): 1 known, 1 NEW" "$WORK/group_new.out" || fail "root-cause groups not counted"
echo '{"issues": [{"id": "x", "title": "t", "verdict": "v", "kind": "upstream-bug", "affected": {"package": "p", "first": "1"}}]}' >"$WORK/no_match.json"
$TRIAGE "$WORK/known.jsonl" --issues "$WORK/no_match.json" >"$WORK/no_match.out" 2>&1
[ $? -eq 2 ] || fail "an issue with neither match nor groups: not exit 2"

# The GPU entries' minimal cases, fingerprinted on an H100 (corpus/gpu/fingerprints.jsonl, recorded by
# kvfuzz fingerprint through each executor, 2026-11-26; the FA3 lines from the 2026-11-28 campaign's
# shrunk findings, context.sinks added from their cases): every line known, every entry seen.
$TRIAGE "$SRC/corpus/gpu/fingerprints.jsonl" $GPU --version sglang=0.5.23 --version flashinfer=0.7.2.post1 \
  --version torch=2.11.0 --version triton=3.6.0 --version sgl-kernel=0.4.3 --json-out "$WORK/gpu_corpus.json" >"$WORK/gpu_corpus.out" 2>&1 ||
  fail "the recorded GPU corpus fingerprints: exit $? ($(tail -1 "$WORK/gpu_corpus.out"))"
for id in $(python3 -c 'import json, sys; print(" ".join(i["id"] for i in json.load(open(sys.argv[1]))["issues"]))' \
              "$SRC/adapters/gpu/known_issues.json"); do
  grep -q "^known *$id " "$WORK/gpu_corpus.out" || fail "GPU issue $id: its minimal case's recorded fingerprints are not triaged as it"
done

[ $failures -eq 0 ] && echo "triage test: all passed" || { tail -n 5 "$WORK"/*.out; exit 1; }
