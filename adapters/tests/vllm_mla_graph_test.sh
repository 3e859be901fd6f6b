#!/usr/bin/env bash
# vLLM's MLA backends under CUDA graphs and in spec-decode verify (adapters/vllm/mla_graph.py), with
# the releases ci/vllm.sh installed:
#  - the MLA graph and verify seeds clean where ci/vllm.sh seeds (the newest release) does not run
#    them: a FULL-graph decode with padded rows (corpus/vllm/mla_graph_decode.json, block size 64)
#    on 0.11.0's FlashMLA (its tile schedule copied into the builder's persistent buffers), on
#    0.33.0's Triton MLA (FULL graph) and 0.11.0's (piecewise: its builder supports none); the verify
#    chain under a FULL graph (corpus/vllm/mla_verify_chain.json) on 0.11.0's FlashAttention MLA;
#  - mutants of the adapter, in a copy, each caught: a replay whose FlashMLA kernel keeps capture's
#    tile schedule (plan-run:cache_seqlens, 0.11.0), padded rows handed a real block and a key
#    (metadata), verify rows whose kernel reads one key short (0.33.0's FlashMLA).
# About 60 s on 2 idle cores. ctest reports it skipped (never passed) where those releases or the
# .sglang/venv with torch are missing.
# Usage: vllm_mla_graph_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
ln -s "$SRC/.vllm" "$WORK/.vllm"  # the copy finds pydantic there
cd "$SRC"
GRAPH=corpus/vllm/mla_graph_decode.json VERIFY=corpus/vllm/mla_verify_chain.json

# check ADAPTERS CASE BACKEND RELEASE: kvfuzz's verdict lines
check() {
  "$K" check "$2" --backend "vllm_$3_${4//./_}:mla" \
    --adapter "$SRC/.sglang/venv/bin/python $1/vllm/vllm_planner.py --site $SRC/.vllm/$4 --backend $3" 2>&1
}
clean() {  # CASE BACKEND RELEASE
  out=$(check "$SRC/adapters" "$@")
  grep -q "ok (every property)" <<<"$out" && echo "ok: $(basename "$1") is clean on $2 $3" ||
    { fail "$1 on $2 $3 is not clean"; echo "$out" | tail -3; }
}
clean $GRAPH mla_flashmla 0.11.0
clean $GRAPH mla_triton 0.33.0
clean $GRAPH mla_triton 0.11.0
clean $VERIFY mla_flashattn 0.11.0

mutant() {  # NAME FILE OLD NEW CASE BACKEND RELEASE PATTERN
  local name=$1 file=$2 old=$3 new=$4 case=$5 backend=$6 release=$7 pattern=$8
  rm -rf "$WORK/m" && cp -r "$SRC/adapters" "$WORK/m"
  python3 - "$WORK/m/vllm/$file" "$old" "$new" <<'PY' || { fail "$name: the mutation no longer applies"; return; }
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, f"{old!r} is not in {path} once"
open(path, "w").write(text.replace(old, new))
PY
  out=$(check "$WORK/m" "$case" "$backend" "$release")
  # here-strings, not pipes: grep -q stops reading early, and under pipefail echo's SIGPIPE fails the test
  if grep -q "finding(s)" <<<"$out" && grep -q -- "$pattern" <<<"$out"; then echo "ok: $name is caught by $(basename "$case")"
  else fail "$name is not caught by $case on $backend $release"; echo "$out" | tail -3; fi
}
mutant replay-keeps-capture-schedule mla_recorder.py 'marker = torch.full((1, 8), len(self.mla_schedules),' \
  'marker = torch.full((1, 8), 1,' $GRAPH mla_flashmla 0.11.0 "plan-run:cache_seqlens"
mutant padded-row-real-block fake_runner.py '        blocks[rows:npad].fill_(0)' \
  '        blocks[rows:npad].fill_(1)
        self.seq_lens_buffer[rows:npad].fill_(1)' $GRAPH mla_flashmla 0.33.0 "metadata: cache_seqlens"
mutant verify-one-key-short mla_recorder.py \
  'self._decode(block_table, cache_seqlens, "flash_mla_with_kvcache",' \
  'self._decode(block_table, cache_seqlens - 1, "flash_mla_with_kvcache",' $VERIFY mla_flashmla 0.33.0 "cache_seqlens"
[ $failures -eq 0 ] && echo "vllm mla graph test: ok" || { echo "vllm mla graph test: $failures failure(s)"; exit 1; }
