#!/usr/bin/env bash
# vLLM's FlashInfer backend under CUDA graphs and with chunked layers (adapters/vllm/flashinfer_graph.py,
# flashinfer_paged_csr.py), beyond the seeds ci/vllm.sh checks on the newest release:
#  - the padded hybrid SWA decode graph (corpus/vllm/flashinfer_graph_decode_swa.json) clean on 0.11.0,
#    whose runner hands the builder the real rows and whose builder pads the decode CSR itself;
#  - chunked layers (ChunkedLocalAttention derived from FlashInfer's builder: virtual batches, no
#    CUDA graph, so the padded decode runs eagerly) clean on corpus/vllm/fa_local_graph_decode.json;
#  - mutants, each caught: vLLM's builder writing a replay's CSR into fresh buffers while the captured
#    wrapper keeps the old ones (planted in a copy of vLLM 0.33.0's flashinfer.py: plan-run:kv_indptr),
#    a runner that pads with the last request (a padded row given a real block: in-bounds), and
#    chunked layers built with plain FlashInfer's builder (no virtual batches: cache-extent).
# ctest reports it skipped (never passed) where the releases or .sglang/venv are missing. About
# 60 s on 2 idle cores (seven kvfuzz checks of about 8 s).
# Usage: vllm_flashinfer_graph_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"

# check CASE RELEASE PATTERN [ADAPTERS-DIR] [SITE] [PATTERN2]: the check's output must hold PATTERN (and PATTERN2)
check() {
  local case=$1 release=$2 pattern=$3 adapters=${4:-$SRC/adapters} site=${5:-$SRC/.vllm/$2} also=${6:-} out
  out=$("$K" check "$case" --backend "vllm_flashinfer_${release//./_}:flashinfer_paged" \
    --adapter "$PY $adapters/vllm/vllm_planner.py --site $site --backend flashinfer" 2>&1)
  if grep -q -- "$pattern" <<<"$out" && grep -q -- "$also" <<<"$out"; then return 0; fi
  echo "$out" | tail -4
  return 1
}
clean() { check "$1" "$2" "ok (every property)" && echo "ok: $(basename "$1") is clean on $2" || fail "$1 on $2 is not clean"; }
clean corpus/vllm/flashinfer_graph_decode_swa.json 0.11.0
clean corpus/vllm/fa_local_graph_decode.json $NEWEST

caught() {  # NAME CASE RELEASE PATTERN [ADAPTERS-DIR] [SITE]: a finding whose report holds PATTERN
  local name=$1 case=$2 release=$3 pattern=$4 adapters=${5:-$SRC/adapters} site=${6:-$SRC/.vllm/$3}
  check "$case" "$release" "$pattern" "$adapters" "$site" "finding(s)" && echo "ok: $name is caught by $(basename "$case")" ||
    fail "$name is not caught by $case"
}

# vLLM 0.33.0 with its builder writing each build's indptr into a fresh buffer: the captured decode
# wrapper keeps reading the capture's (a symlinked copy of the release, flashinfer.py replaced).
site=$WORK/site-$NEWEST
cp -rs "$(realpath "$SRC/.vllm/$NEWEST")" "$site"  # a linked release folder is copied as a tree of links, never as the link
fi_py=$site/vllm/v1/attention/backends/flashinfer.py
rm "$fi_py" && cp "$SRC/.vllm/$NEWEST/vllm/v1/attention/backends/flashinfer.py" "$fi_py"
replace "$fi_py" '        paged_kv_indptr = self.paged_kv_indptr.copy_to_gpu(num_reqs + 1)' \
  $'        self.paged_kv_indptr.gpu = self.paged_kv_indptr.gpu.clone()\n        paged_kv_indptr = self.paged_kv_indptr.copy_to_gpu(num_reqs + 1)' &&
  caught replay-into-fresh-buffers corpus/vllm/flashinfer_graph_decode_swa.json $NEWEST "plan-run:kv_indptr" \
    "$SRC/adapters" "$site"

# Mutants of the adapter, in a copy.
fresh() { rm -rf "$WORK/m" && mkdir -p "$WORK/m" && cp -r "$SRC/adapters" "$WORK/m/adapters" && ln -s "$SRC/.vllm" "$WORK/m/.vllm"; }
fresh
replace "$WORK/m/adapters/vllm/fake_runner.py" '        blocks[rows:npad].fill_(0)  # NULL_BLOCK_ID for padded rows' \
  '        blocks[rows:npad] = blocks[max(rows - 1, 0)]' &&
  replace "$WORK/m/adapters/vllm/fake_runner.py" \
    '        seq_lens[:rows] = self.uniform_query_len if capture else self.seq_lens' \
    $'        seq_lens[:rows] = self.uniform_query_len if capture else self.seq_lens\n        seq_lens[rows:] = seq_lens[max(rows - 1, 0)]' &&
  caught padded-row-real-block corpus/vllm/flashinfer_graph_decode_swa.json $NEWEST "a padded row reads" "$WORK/m/adapters"
fresh
replace "$WORK/m/adapters/vllm/flashinfer_paged_csr.py" '    if g.kind != "chunked":' '    if True:' &&
  caught chunked-without-virtual-batches corpus/vllm/fa_local_graph_decode.json $NEWEST ": cache-extent:" "$WORK/m/adapters"
[ $failures -eq 0 ] && echo "vllm flashinfer graph test: ok" || { echo "vllm flashinfer graph test: $failures failure(s)"; exit 1; }
