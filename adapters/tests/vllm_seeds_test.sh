#!/usr/bin/env bash
# vLLM's real metadata builders under kvfuzz (adapters/vllm/), with the releases ci/vllm.sh installed:
#  - the seed cases on the newest release (ci/vllm.sh seeds): each clean or found as its table says,
#    and each seed fails a broken adapter (a mutation of the adapter: no SWA translation of the
#    sliding-window block tables; chunked layers built with the plain FlashAttention builder), and
#    the plan-run property catches a replay that builds into fresh buffers (the capture keeps its
#    own) and an FA3 schedule made for another batch; a Triton recorder that reads the KV-cache
#    view's page size off the wrong dimension is caught on the verify seed; TreeAttention's verify
#    tree (0.11.0, the last release with TREE_ATTN) is clean, and a plan that drops the kernel's
#    tree bias from the mask is caught; FlashInfer's seeds (decode and mixed batches, a sliding
#    layer in the SWA pool) catch a window one key short and a decode plan made for another head
#    dim (plan-run:head_dim);
#    an MLA context gather one position late is caught (the three MLA seeds and this mutant add
#    about 30 s on 2 cores);
#  - requests sharing prefix blocks (corpus/vllm/fa_cascade_shared_prefix.json): clean on the newest
#    release and, as vLLM's cascade attention, on 0.11.0; two cascade mutants caught;
#  - attention sinks (gpt-oss): a seed on FlashAttention and Triton, which catches impls built without
#    them; FlashAttention's cascade drops them on 0.11.0 (a known issue) and keeps them on 0.28.0;
#  - fp8 KV caches (--kv-cache-dtype fp8): FlashMLA's fp8 FULL-graph seed clean on the newest release
#    (seeds) and found as vllm#33638 on 0.15.0 (known): two adapter runs, 6 s each at load 2 on the
#    2 shared cores (2026-11-28); its schedule checks on hand-made calls: vllm_mla_fp8_test;
#    FlashAttention's fp8 seed with per-layer scales (fa_fp8_scales.json: the descales each call is
#    handed, through the plan into the fa executor) clean on the newest release, one adapter run of
#    5 s at load 2 to 4 (its planted swap: vllm_fa_fp8_test);
#  - each known bug found in the release that shipped it and gone in the one that fixed it
#    (ci/vllm.sh releases), and its minimal case triaged by fingerprint as its known issue (known).
# ctest reports it skipped (never passed) where those releases are not installed under .vllm/ or
# there is no .sglang/venv with torch; ci/test.sh installs both (ci/sglang.sh, ci/vllm.sh) first.
# Usage: vllm_seeds_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.10.2 0.11.0 0.15.0 0.27.1 0.28.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"

cd "$SRC"
KVFUZZ=$K bash ci/vllm.sh seeds || fail "ci/vllm.sh seeds"
KVFUZZ=$K bash ci/vllm.sh releases || fail "ci/vllm.sh releases"
KVFUZZ=$K bash ci/vllm.sh known || fail "ci/vllm.sh known"

# Mutants of the adapter, in a copy: each must make its seed fail.
cp -r "$SRC/adapters" "$WORK/adapters" && ln -s "$SRC/.vllm" "$WORK/.vllm"
mutant() {  # NAME FILE PYTHON-REPLACEMENT(old\nnew) CASE [PATTERN the output must hold] [BACKEND, default fa] [RELEASE] [PLANNER-FLAGS]
  local name=$1 file=$2 old=$3 new=$4 case=$5 pattern=${6:-finding(s)} backend=${7:-fa} release=${8:-$NEWEST} flags=${9:-}
  local executor=fa
  case $backend in tree|flashinfer) executor=flashinfer_paged ;; mla_*) executor=mla ;; esac
  rm -rf "$WORK/m" && cp -r "$WORK/adapters" "$WORK/m" && ln -sfn "$SRC/.vllm" "$WORK/.vllm"
  replace "$WORK/m/vllm/$file" "$old" "$new" || return
  out=$("$K" check "$case" --backend "vllm_${backend}_${release//./_}:$executor" \
    --adapter "$SRC/.sglang/venv/bin/python $WORK/m/vllm/vllm_planner.py --site $SRC/.vllm/$release --backend $backend $flags" 2>&1)
  if grep -q "finding(s)" <<<"$out" && grep -q "$pattern" <<<"$out"; then echo "ok: $name is caught by $(basename "$case")"
  else fail "$name is not caught by $case"; echo "$out" | tail -3; fi
}
mutant no-swa-translation fake_runner.py $'        if pool == "swa":\n            first = self.f2s[first]\n' "" \
  corpus/vllm/fa_hybrid_swa_null_blocks.json
mutant no-virtual-batches fake_runner.py '        if g.kind == "chunked":' '        if False:' \
  corpus/vllm/fa_local_mixed.json
mutant window-on-every-layer layer_inputs.py \
  '    window = x["window"] + 1 if x["kind"] == "sliding_window" else None' \
  '    window = max([y["window"] + 1 for y in setup.layers_spec if y["kind"] == "sliding_window"] or [0]) or None' \
  corpus/vllm/fa_group_window_full_layer.json
mutant replay-into-fresh-buffers fake_runner.py '        self.qsl_buffer.copy_(torch.from_numpy(qsl))' \
  '        self.qsl_buffer = torch.from_numpy(qsl).clone()' corpus/vllm/fa_full_graph_decode.json "plan-run:cu_seqlens_q"
mutant schedule-for-another-batch recorder.py '"batch_size": int(batch_size),' '"batch_size": int(batch_size) + 1,' \
  corpus/vllm/fa_local_mixed.json "plan-run:batch_size"
mutant triton-page-size-off-kv-heads recorder.py '"view_page_size": int(k.shape[1]),' '"view_page_size": int(k.shape[2]),' \
  corpus/vllm/verify_chain_swa.json ": metadata:" triton
# A flag the backend has no use for is refused (exit 2, naming it), never silently ignored.
for flags in "--backend triton --cascade always" "--backend fa --mla-workspace floor" "--backend triton --kv-cache-dtype fp8"; do
  # shellcheck disable=SC2086  # the flags are words
  msg=$("$SRC/.sglang/venv/bin/python" adapters/vllm/vllm_planner.py --site "$SRC/.vllm/$NEWEST" $flags 2>&1 </dev/null)
  rc=$?
  [ $rc = 2 ] && grep -q -- "${flags##* --}" <<<"$msg" && echo "ok: '$flags' refused (exit 2)" ||
    fail "'$flags' gave exit $rc: $msg"
done
tree_out=$("$K" check corpus/vllm/tree_verify.json --backend vllm_tree_0_11_0:flashinfer_paged \
  --adapter "$SRC/.sglang/venv/bin/python adapters/vllm/vllm_planner.py --site $SRC/.vllm/0.11.0 --backend tree" 2>&1)
grep -q "^vllm_tree_0_11_0:flashinfer_paged: ok" <<<"$tree_out" && echo "ok: tree_verify is clean on TreeAttention 0.11.0" ||
  { fail "tree_verify on TreeAttention 0.11.0 is not clean"; echo "$tree_out" | tail -3; }
mutant tree-bias-dropped tree_attn_paged_csr.py '            visible &= ~in_bias | np.isfinite(flat[at])' '            pass' \
  corpus/vllm/tree_verify.json "the tree mask says" tree 0.11.0
mutant flashinfer-window-short layer_inputs.py \
  '    window = x["window"] + 1 if x["kind"] == "sliding_window" else None' \
  '    window = x["window"] if x["kind"] == "sliding_window" else None' corpus/vllm/flashinfer_decode_swa.json "cache-extent" \
  flashinfer
mutant flashinfer-plan-for-another-head-dim flashinfer_recorder.py \
  'a["num_kv_heads"], a["head_dim"], a["page_size"], False,' 'a["num_kv_heads"], a["head_dim"] * 2, a["page_size"], False,' \
  corpus/vllm/flashinfer_mixed_swa.json "plan-run:head_dim" flashinfer
# MLA: a context gather that reads each request's context one position late must be caught on the
# mixed batch's context rows.
mutant gather-one-late mla_recorder.py ' + rows - cu[seqs]' ' + rows + 1 - cu[seqs]' \
  corpus/vllm/mla_mixed_context.json stride-divide mla_triton
# Shared prefix blocks (share ops): clean on the newest release (no cascade attention there) and on
# 0.11.0 running vLLM's cascade_attention over them (--cascade always); a cascade one block past what
# every row shares, and a cascade plan that does not say its prefix, must be caught.
seed=corpus/vllm/fa_cascade_shared_prefix.json
for r in $NEWEST 0.11.0; do
  out=$("$K" check $seed --backend "vllm_fa_${r//./_}:fa" \
    --adapter "$SRC/.sglang/venv/bin/python adapters/vllm/vllm_planner.py --site .vllm/$r --backend fa --cascade always" 2>&1)
  if grep -q "ok (every property)" <<<"$out"; then echo "ok: $(basename $seed) is clean on $r"; else fail "$seed on $r"; echo "$out" | tail -3; fi
done
mutant cascade-one-block-too-many cascade.py \
  '    prefix = common_prefix_blocks(g.table_rows) * block_size' \
  '    prefix = (common_prefix_blocks(g.table_rows) + 1) * block_size' $seed "stride-divide" fa 0.11.0 "--cascade always"
mutant cascade-prefix-unsaid attention_run.py \
  '            c["common_prefix_len"] = prefix' '            c["common_prefix_len"] = 0' $seed "metadata" fa 0.11.0 "--cascade always"
# Attention sinks (gpt-oss): the impls are built with the case's sinks and every merged group must
# carry them on one call (the seeds above, clean on FlashAttention and Triton, hold that); an
# adapter that builds the impls without them is caught. FlashAttention's cascade seed is found on
# 0.11.0 (ci/vllm.sh known: kvfuzz-vllm-cascade-sinks) and clean on 0.28.0, whose prefix call
# carries the sinks (about 15 s on 2 cores).
mutant sinks-not-built layer_inputs.py \
  '        extra["sinks"] = torch.tensor(m["sinks"], dtype=torch.float32, device=setup.device)' '        pass' \
  corpus/vllm/gpt_oss_sinks_graph_decode.json "attention sinks on 0 of its 1 merged calls"
seed=corpus/vllm/fa_sinks_cascade_heuristic.json
out=$("$K" check $seed --backend vllm_fa_0_28_0:fa \
  --adapter "$SRC/.sglang/venv/bin/python adapters/vllm/vllm_planner.py --site .vllm/0.28.0 --backend fa" 2>&1)
if grep -q "ok (every property)" <<<"$out"; then echo "ok: $(basename $seed) is clean on 0.28.0"
else fail "$seed on 0.28.0"; echo "$out" | tail -3; fi
[ $failures -eq 0 ] && echo "vllm seeds test: ok" || { echo "vllm seeds test: $failures failure(s)"; exit 1; }
