#!/usr/bin/env bash
# vLLM's EAGLE drafting under kvfuzz (adapters/vllm/eagle_drafting.py): the release's proposer,
# planted bugs in a copy of its source must be caught by the drafting seeds (ci/vllm.sh seeds checks
# them clean on the newest release, ci/vllm.sh releases finds vllm#29845 in 0.11.0):
#  - slot-one-late: the drafting step's slot mapping one position late (0.33.0's
#    eagle_step_update_slot_mapping_and_metadata kernel), caught by the adapter's check of vLLM's
#    K/V writes against kvfuzz's (a crash finding naming the slot);
#  - seq-lens-not-advanced: the step leaves seq_lens where they were (cache-extent: the query's
#    own key missing);
#  - rejected-not-subtracted: vllm#29845 reverted (the padded drafter batch's seq_lens keep the
#    rejected tokens): metadata, in-bounds, oracle.
#  - group-table-not-swapped: a drafting step on sliding and full layers (draft_decode_groups_gpt_oss.json,
#    Step3p5MTPProposer) whose full layers get the sliding group's block table: in-bounds, oracle; the
#    same case unsupported on 0.11.0 with vLLM's reason (validate_same_kv_cache_group).
#  - gemma4-table-not-swapped: the same bug in Gemma4Proposer (--multi-group-drafter gemma4), caught on its
#    first pass by gemma4_draft_groups.json.
# (0.11.0's findings on the seed triage as vllm#29845: ci/vllm.sh known and releases, in vllm_seeds_test.)
# ctest reports it skipped (never passed) where vLLM 0.33.0/0.11.0 or the torch venv are missing.
#  - the target step's rejected tokens past the drafting layout (draft_decode_swa_rejected.json clean on
#    the newest release; draft_decode_reused_page.json on 0.11.0 triaged as vllm#29845 alone).
#  - a drafting step after a prefill with a chunked layer on 0.28.0 (v1_draft_after_prefill_0_28.json)
#    clean: on the CPU seq_lens.to("cpu") returned seq_lens itself, so the loop advanced it twice
#    (vllm_release.py _host_copy_of_seq_lens; its synchronous-scheduling counterpart, a vLLM bug, is
#    vllm-sync-draft-seq-lens-cpu: ci/vllm.sh known). One kvfuzz check, 8 s on the loaded machine.
# About 15 s on 2 idle cores (three kvfuzz checks; 45 to 80 s on the loaded shared machine) before the
# last two checks.
# Usage: vllm_draft_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0 0.28.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"
REJECTED=corpus/vllm/draft_decode_rejected.json

mutant slot-one-late v1/spec_decode/utils.py \
  '    slot_id = block_id * block_size + (clamped_position % block_size)' \
  '    slot_id = block_id * block_size + ((clamped_position + 1) % block_size)' \
  "$REJECTED" "vLLM's drafting step 1 writes"
mutant seq-lens-not-advanced v1/spec_decode/utils.py \
  '    new_seq_len = tl.where(exceeds_max, 1, seq_len + 1)' '    new_seq_len = tl.where(exceeds_max, 1, seq_len)' \
  "$REJECTED" ": cache-extent:"
mutant rejected-not-subtracted v1/spec_decode/llm_base_proposer.py \
  '            common_attn_metadata.seq_lens -= num_rejected_tokens_gpu' '            pass' \
  "$REJECTED" "(too large)"
# Drafting across KV-cache groups (draft_groups.py; draft_decode_groups_gpt_oss.json, clean in ci/vllm.sh
# seeds): Step3p5MTPProposer building every group's metadata with the drafter's own group's block table
# (the sliding group's, pages translated to the SWA pool and null where the window left) instead of the
# table the runner handed for the group: the full layers' reads are wrong (in-bounds, oracle).
mutant group-table-not-swapped v1/spec_decode/step3p5.py \
  '                cm.block_table_tensor = self._per_group_block_tables[gid][:num_reqs]' \
  '                cm.block_table_tensor = common_attn_metadata.block_table_tensor' \
  corpus/vllm/draft_decode_groups_gpt_oss.json "in-bounds: layer 1 (full)"
# Gemma4Proposer's first pass (--multi-group-drafter gemma4; gemma4_draft_groups.json, a draft_extend_v2 step on
# sliding and full layers, clean on 0.27.1, 0.28.0, 0.33.0): every group's metadata built with the drafter's own
# group's table (layer 0's, the sliding one) instead of the table the runner handed for the group (gemma4.py:95).
# One kvfuzz check: 4.8 s idle, 5.5 s at load 3 (2026-11-28).
mutant gemma4-table-not-swapped v1/spec_decode/gemma4.py \
  '                cm.block_table_tensor = self._per_group_block_tables[gid][:batch_size]' \
  '                cm.block_table_tensor = common_attn_metadata.block_table_tensor' \
  corpus/vllm/gemma4_draft_groups.json "in-bounds: layer 1 (full)" "--multi-group-drafter gemma4"
# where the release has no multi-group proposer (up to 0.22.1), vLLM's reason, unsupported
out=$("$K" check corpus/vllm/draft_decode_groups_gpt_oss.json --backend vllm_fa_0_11_0:fa \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site .vllm/0.11.0 --backend fa" 2>&1)
grep -q "^unsupported: .*validate_same_kv_cache_group" <<<"$out" &&
  echo "ok: draft_decode_groups_gpt_oss.json is unsupported on 0.11.0 (validate_same_kv_cache_group)" ||
  { fail "draft_decode_groups_gpt_oss.json on 0.11.0 is not answered with validate_same_kv_cache_group"; echo "$out" | tail -3; }

# The target step's rejected tokens past the drafting layout: kvfuzz's accept freed their columns,
# vLLM keeps their blocks. The adapter checks no slot of them and hands their pages the null block;
# before, a sliding pool (full_to_swa 0 there) made it crash @ _check_slots on every release, and a
# page kvfuzz had given another request showed vllm#29845's read as other-request (0.11.0).
out=$("$K" check corpus/vllm/draft_decode_swa_rejected.json --backend "vllm_fa_${NEWEST//./_}:fa" \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site .vllm/$NEWEST --backend fa" 2>&1)
grep -q "ok (every property)" <<<"$out" && echo "ok: draft_decode_swa_rejected.json is clean on $NEWEST" ||
  { fail "draft_decode_swa_rejected.json on $NEWEST"; echo "$out" | tail -3; }
"$K" fingerprint corpus/vllm/draft_decode_reused_page.json --backend vllm_fa_0_11_0:fa \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site .vllm/0.11.0 --backend fa" >"$WORK/reused.jsonl" 2>/dev/null
python3 adapters/triage.py "$WORK/reused.jsonl" --issues adapters/vllm/known_issues.json >"$WORK/reused.out" 2>&1 &&
  grep -q "^known *vllm#29845" "$WORK/reused.out" && echo "ok: draft_decode_reused_page.json on 0.11.0 triages as vllm#29845 only" ||
  { fail "draft_decode_reused_page.json on 0.11.0: $(grep -v '^known' "$WORK/reused.out" | head -3)"; }

out=$("$K" check corpus/vllm/v1_draft_after_prefill_0_28.json --backend vllm_fa_0_28_0:fa \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site .vllm/0.28.0 --backend fa" 2>&1)
grep -q "ok (every property)" <<<"$out" && echo "ok: v1_draft_after_prefill_0_28.json is clean on 0.28.0" ||
  { fail "v1_draft_after_prefill_0_28.json on 0.28.0 (async scheduling, vLLM's default)"; echo "$out" | grep -v "^  " | head -3; }

[ $failures = 0 ] && echo "vllm_draft_test: all passed" || { echo "vllm_draft_test: $failures failed"; exit 1; }
