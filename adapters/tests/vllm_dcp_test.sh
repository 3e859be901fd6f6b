#!/usr/bin/env bash
# vLLM's decode-context parallelism (vllm_planner.py --dcp R, adapters/vllm/dcp.py) on the newest
# release: a mutant of vLLM's slot-mapping kernel (block_table.py) planted in a copy of the release,
# each rank storing the other rank's tokens (is_local against the mirrored rank), must be caught by
# fa_dcp_mixed.json: a rank's keys resolve to another rank's tokens (stride-divide through its
# rank_slots) and the merged output is wrong (oracle). The seed itself is clean in `ci/vllm.sh seeds`
# (vllm_seeds_test); kvfuzz's own DCP model is checked by backends_fa_test (FaDcp.*).
# About 8 s on 2 cores at load 3, 25 s at load 6.5 (one `kvfuzz check`); ctest reports it skipped (never passed) where the
# release or .sglang/venv is missing.
# Usage: vllm_dcp_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"

site=$WORK/site
mkdir -p "$site" && cp -rs "$SRC/.vllm/$NEWEST/." "$site/"
file=$site/vllm/v1/worker/block_table.py
cp --remove-destination "$(readlink -f "$file")" "$file"
replace "$file" ') % TOTAL_CP_WORLD_SIZE == TOTAL_CP_RANK' \
  ') % TOTAL_CP_WORLD_SIZE == TOTAL_CP_WORLD_SIZE - 1 - TOTAL_CP_RANK' || exit 1
out=$("$K" check corpus/vllm/fa_dcp_mixed.json --backend "vllm_fa_${NEWEST//./_}:fa" \
  --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend fa --dcp 2" 2>&1)
if grep -q "stride-divide: .*rank_slots" <<<"$out" && grep -q "oracle" <<<"$out"; then
  echo "ok: the rank-swapping slot-mapping mutant ($NEWEST) is caught by fa_dcp_mixed.json"
else
  fail "the rank-swapping slot-mapping mutant ($NEWEST) is not caught"; echo "$out" | tail -5
fi
[ $failures -eq 0 ] && echo "vllm dcp test: ok" || { echo "vllm dcp test: $failures failure(s)"; exit 1; }
