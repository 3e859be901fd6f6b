#!/usr/bin/env bash
# Gemma-4's drafting steps (draft_q_only: one query per request at the last verified position over the
# target's keys, writing nothing) driven through vLLM 0.33.0's own code: planted bugs in a copy of the
# release must be caught by corpus/vllm/gemma4_q_only.json, which is clean on the release itself (V1):
#  - v1-positions-advance: Gemma4Proposer without constant_draft_positions (gemma4.py:49): the V1 loop
#    advances positions and seq_lens like EAGLE's, caught by the adapter's position check;
#  - v2-positions-advance: Gemma4Speculator's advance_draft_positions True (gemma4/speculator.py:53):
#    V2's decode steps advance, caught the same way (--runner v2 --v2-speculator gemma4).
# ctest reports it skipped (never passed) where vLLM 0.33.0 or the torch venv are missing.
# Usage: vllm_gemma4_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"
CASE=corpus/vllm/gemma4_q_only.json
out=$("$K" check "$CASE" --backend "vllm_fa_${NEWEST//./_}:fa" \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site .vllm/$NEWEST --backend fa --multi-group-drafter gemma4" 2>&1)
grep -q "ok (every property)" <<<"$out" && echo "ok: $(basename "$CASE") is clean on $NEWEST (Gemma4Proposer)" ||
  { fail "$CASE on $NEWEST (Gemma4Proposer)"; echo "$out" | grep -v "^  " | tail -3; }
mutant v1-positions-advance v1/spec_decode/gemma4.py \
  '        self.constant_draft_positions = True' '        self.constant_draft_positions = False' \
  "$CASE" "vLLM's drafting step 1 runs positions" "--multi-group-drafter gemma4"
mutant v2-positions-advance v1/worker/gpu/spec_decode/gemma4/speculator.py \
  '        # No new KV slots are written, so positions and seq_lens stay fixed.
        return False' '        return True' \
  "$CASE" "vLLM's drafting step 1 runs positions" "--runner v2 --v2-speculator gemma4"
[ $failures = 0 ] && echo "vllm_gemma4_test: all passed" || { echo "vllm_gemma4_test: $failures failed"; exit 1; }
