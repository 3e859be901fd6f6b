#!/usr/bin/env bash
# vLLM's Model Runner V2 (vllm_planner.py --runner, adapters/vllm/v2_runner.py) on the newest release:
#  - three seeds clean under V2: a hybrid SWA cache whose sliding blocks V2 nulls below the window
#    (fa_hybrid_swa_null_blocks.json), two sliding window sizes in two KV-cache groups
#    (v2_two_windows.json), a decode batch V2's CudaGraphManager runs in a FULL CUDA graph
#    (v2_graph_decode_swa.json: captured with the dummy batch, replayed: v2_graph.py);
#  - two drafting seeds of V2's speculator (v2_drafting.py), whose FULL draft-decode graph
#    (v2_draft_graph.py) hands its padded rows keys (kvfuzz-vllm-v2-draft-graph-padded-reads, a
#    convention) and shows nothing else: an EAGLE step across two KV-cache groups after a verify that
#    rejected tokens (v2_eagle_draft_decode_groups.json: the convention in its replay variant only,
#    the case itself runs eagerly), and 3 rows replayed in a graph captured for 4
#    (v2_draft_graph_padded.json: the convention in the case, which only a FULL replay shows);
#  - five mutants planted in one copy of the release: MTPSpeculator's hooks believing the draft shares
#    its top-k indices, caught under --runner v2 --v2-speculator mtp (v2_mtp_draft_decode.json: the
#    release's MTPSpeculator is what drafts); four caught under --runner auto, which is therefore V2
#    there (VllmConfig.use_v2_model_runner): V2's block-table gather masking one
#    sliding-window block into the window (the mixed seed), get_dummy_block_tables handing the
#    capture a copy of the persistent tables, which the replay's gather then never refreshes (the
#    graph seed: plan-run:page_table, the captured table against the replay's build), the
#    speculator's draft decode slot mapping one position late (V1's draft_decode_rejected.json, clean
#    under V2 too: the smaller drafting step), and V2's own CUDA-graph mode resolution ignoring the
#    chunked builder's NEVER in get_attn_cg_support (the local layers of fa_local_graph_decode.json
#    then replay a FULL graph, vllm#26034's shape);
#  - --runner v2 on a release without Model Runner V2 (0.11.0) is refused (exit 2).
# Not here, to keep the test short (docs/vllm.md runs them by hand): the eager verify seed
# (v2_verify_chain_swa.json), 0.27.1 and 0.28.0, and VLLM_USE_V2_MODEL_RUNNER=0 turning auto to V1.
# ctest reports it skipped (never passed) where the releases or .sglang/venv are missing.
# Usage: vllm_v2_runner_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"

check() {  # SITE RUNNER CASE... -> the check's output
  local site=$1 runner=$2
  shift 2
  "$K" check "$@" --backend "vllm_fa_${NEWEST//./_}:fa" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend fa --runner $runner" 2>&1
}

out=$(check ".vllm/$NEWEST" v2 corpus/vllm/fa_hybrid_swa_null_blocks.json corpus/vllm/v2_two_windows.json \
  corpus/vllm/v2_graph_decode_swa.json corpus/vllm/v2_eagle_draft_decode_groups.json corpus/vllm/v2_draft_graph_padded.json)
n=$(grep -c "ok (every property)" <<<"$out")
[ "$n" = 3 ] && echo "ok: the three V2 seeds without drafting are clean on $NEWEST under --runner v2" ||
  { fail "V2 seeds on $NEWEST: $n of 3 clean"; echo "$out" | grep -v "^ " | tail -6; }
# a drafting step's FULL draft-decode graph (v2_draft_graph.py) hands its padded rows keys
# (kvfuzz-vllm-v2-draft-graph-padded-reads, a convention): the EAGLE seed's replay variant pads its batch;
# the graph seed (3 rows replayed in a graph captured for 4, draft step 1) shows it in the case itself, which
# only a FULL replay does (the eager loop hands them none), and nothing else
PADDED="empty padded kernel row N reads N keys"
section() { awk -v f="== corpus/vllm/$1" '/^== /{on = ($0 == f)} on' <<<"$out"; }
eagle=$(section v2_eagle_draft_decode_groups.json | grep "fingerprint:")
graph=$(section v2_draft_graph_padded.json | grep "fingerprint:")
[ -n "$eagle" ] && ! grep -qv "replay variant: vllm.[a-z]*.N: $PADDED" <<<"$eagle" &&
  echo "ok: the EAGLE drafting seed shows only the padded rows' keys, in its replay variant" ||
  { fail "the EAGLE drafting seed: $eagle"; }
[ "$(grep -c "draft_decode/full: vllm.full.N: $PADDED" <<<"$graph")" = 2 ] && ! grep -qv "$PADDED" <<<"$graph" &&
  grep -q "vllm.full.0: empty padded kernel row 3 reads 1 keys" <<<"$out" &&
  echo "ok: V2's FULL draft-decode graph is replayed for 3 rows of 4 (its padded row carries 1 key at draft step 1)" ||
  { fail "the draft graph seed: $graph"; }

mkdir -p "$WORK/site" && cp -r "$SRC/.vllm/$NEWEST/." "$WORK/site/"
replace "$WORK/site/vllm/v1/worker/gpu/block_table.py" 'tl.maximum(first_pos - reach, 0) // block_size' \
  'tl.maximum(first_pos - reach + block_size, 0) // block_size' || exit 1
replace "$WORK/site/vllm/v1/worker/gpu/block_table.py" \
  'return tuple(block_table[:num_reqs] for block_table in self.input_block_tables)' \
  'return tuple(block_table[:num_reqs].clone() for block_table in self.input_block_tables)' || exit 1
# V2's speculator: the draft decode steps' slot mapping (recomputed in place each step,
# _generate_fused_drafts) one position late
replace "$WORK/site/vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py" \
  "$(printf '                    query_start_loc,\n                    positions,\n                    num_tokens_padded,')" \
  "$(printf '                    query_start_loc,\n                    positions + 1,\n                    num_tokens_padded,')" || exit 1
# V2's own CUDA-graph mode resolution: get_attn_cg_support ignoring a builder's weaker support, so the
# ChunkedLocalAttention builder's NEVER no longer turns FULL_AND_PIECEWISE to PIECEWISE
replace "$WORK/site/vllm/v1/worker/gpu/attn_utils.py" 'if cg_support.value < min_cg_support.value:' \
  'if cg_support.value < min_cg_support.value and False:' || exit 1
# MTPSpeculator (--v2-speculator mtp) believing the draft shares its top-k indices (index_share_for_mtp_iteration):
# its own hooks then reach for the draft's inner model (model.model.set_skip_topk), which only they call
replace "$WORK/site/vllm/v1/worker/gpu/spec_decode/mtp/speculator.py" 'share_mtp_topk_indices: bool = False' \
  'share_mtp_topk_indices: bool = True' || exit 1
mtp=$("$K" check corpus/vllm/v2_mtp_draft_decode.json --backend "vllm_fa_${NEWEST//./_}:fa" \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $WORK/site --backend fa --runner v2 --v2-speculator mtp" 2>&1)
grep -q "crash/vllm_fa:fa/draft_decode/-: AttributeError" <<<"$mtp" && grep -q "mtp/speculator.py.*in on_prefill_begin" <<<"$mtp" &&
  echo "ok: --v2-speculator mtp drives the release's MTPSpeculator (its hooks' mutant is caught)" ||
  { fail "MTPSpeculator's hook mutant is not caught under --v2-speculator mtp"; echo "$mtp" | grep -v "^ " | tail -4; }
out=$(check "$WORK/site" auto corpus/vllm/fa_hybrid_swa_null_blocks.json corpus/vllm/v2_graph_decode_swa.json \
  corpus/vllm/draft_decode_rejected.json corpus/vllm/fa_local_graph_decode.json)
caught() {  # caught FINGERPRINT WHAT: the mutants' run shows FINGERPRINT, the mutant WHAT is caught
  grep -q -- "$1" <<<"$out" && echo "ok: $2 is caught under --runner auto (V2 on $NEWEST)" ||
    { fail "$2 is not caught under --runner auto"; echo "$out" | tail -3; }
}
caught "in-bounds/vllm_fa:fa/mixed/sliding_window" "V2's gather nulling a block inside the window"
caught "plan-run/vllm_fa:fa/decode/full: plan-run:page_table" \
  "a FULL graph captured on a copy of V2's block tables (capture against replay)"
caught "crash/vllm_fa:fa/draft_decode/-: RuntimeError: layer N: vLLMQs draft (position N) at slot N" \
  "V2's speculator writing each draft one slot late"
caught "plan-run/vllm_fa:fa/decode/chunked: plan-run:cu_seqlens_q" \
  "V2's mode resolution ignoring the chunked builder's NEVER (local layers replay a FULL graph)"
err=$("$PY" adapters/vllm/vllm_planner.py --site .vllm/0.11.0 --backend fa --runner v2 </dev/null 2>&1)
status=$?
[ $status = 2 ] && grep -q "has no Model Runner V2" <<<"$err" && echo "ok: --runner v2 on 0.11.0 exits 2: $err" ||
  fail "--runner v2 on 0.11.0: exit $status: $err"
exit $((failures > 0))
