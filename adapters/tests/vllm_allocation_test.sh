#!/usr/bin/env bash
# vLLM's own KVCacheManager allocating kvfuzz's request history (vllm_planner.py --allocator vllm,
# adapters/vllm/kv_cache_manager.py), on the newest release and 0.11.0:
#  - seeds clean (never unsupported): requests sharing prefix blocks through vLLM's prefix cache
#    (fa_cascade_shared_prefix.json), a hybrid SWA cache with null blocks and two full groups
#    (fa_hybrid_swa_null_blocks.json, FlashAttention and Triton), a verify step after draft/accept
#    ops (verify_chain_swa.json);
#  - a bug of 0.11.0's allocation found there and gone on the newest release
#    (alloc_swa_null_block_cached.json: the null block hashed into the prefix cache);
#  - two mutants of vLLM's allocation planted in a copy of the release, each caught: BlockPool.
#    get_new_blocks handing out a block already in use, and the sliding-window manager freeing one
#    block too early (inside the window);
#  - --allocator vllm with a backend whose plan is not a page table is refused (exit 2).
# About 70 s on 2 idle cores (fourteen `kvfuzz check` runs of about 5 s).
# ctest reports it skipped (never passed) where the releases or .sglang/venv are missing.
# Usage: vllm_allocation_test.sh SOURCE_DIR KVFUZZ_BIN WORK_DIR
NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
cd "$SRC"

check() {  # CASE RELEASE BACKEND SITE -> the check's output
  local case=$1 release=$2 backend=$3 site=$4 executor=fa
  "$K" check "$case" --backend "vllm_${backend}_${release//./_}:$executor" \
    --adapter "$SRC/.sglang/venv/bin/python $SRC/adapters/vllm/vllm_planner.py --site $site --backend $backend --allocator vllm" 2>&1
}

for r in $NEWEST 0.11.0; do
  for seed in fa_cascade_shared_prefix fa_hybrid_swa_null_blocks verify_chain_swa; do
    out=$(check "corpus/vllm/$seed.json" "$r" fa ".vllm/$r")
    grep -q "ok (every property)" <<<"$out" && echo "ok: $seed is clean on $r under vLLM's allocation" ||
      { fail "$seed on $r under --allocator vllm"; echo "$out" | tail -3; }
  done
done
out=$(check corpus/vllm/fa_hybrid_swa_null_blocks.json $NEWEST triton ".vllm/$NEWEST")
grep -q "ok (every property)" <<<"$out" && echo "ok: fa_hybrid_swa_null_blocks is clean on Triton $NEWEST" ||
  { fail "fa_hybrid_swa_null_blocks on Triton $NEWEST"; echo "$out" | tail -3; }

# A bug of vLLM's allocation up to 0.11.0, gone by 0.27.1: a sliding window passing full blocks
# that accepted drafts filled and nobody cached yet makes them null, and cache_full_blocks hashes the
# null block into the prefix cache (the second one asserts); later releases skip null blocks.
seed=corpus/vllm/alloc_swa_null_block_cached.json
out=$(check $seed 0.11.0 fa .vllm/0.11.0)
grep -q "AssertionError @ cache_full_blocks" <<<"$out" && echo "ok: $(basename $seed) is found on 0.11.0" ||
  { fail "$seed is not found on 0.11.0"; echo "$out" | tail -3; }
out=$(check $seed $NEWEST fa ".vllm/$NEWEST")
grep -q "ok (every property)" <<<"$out" && echo "ok: $(basename $seed) is clean on $NEWEST" ||
  { fail "$seed on $NEWEST"; echo "$out" | tail -3; }

# Mutants of vLLM's allocation, in a copy of the release: each must make its seed fail.
mutant() {  # NAME RELEASE FILE (under vllm/v1/core/) OLD NEW CASE
  local name=$1 release=$2 file=$3 old=$4 new=$5 case=$6
  rm -rf "$WORK/site" && mkdir -p "$WORK/site" && cp -r "$SRC/.vllm/$release/." "$WORK/site/"
  python3 - "$WORK/site/vllm/v1/core/$file" "$old" "$new" <<'PY' || { fail "$name: the mutation no longer applies"; return; }
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, f"{old!r} is not once in {path}"
open(path, "w").write(text.replace(old, new))
PY
  out=$(check "$case" "$release" fa "$WORK/site")
  if grep -q "finding(s)" <<<"$out"; then echo "ok: $name ($release) is caught by $(basename "$case")"
  else fail "$name ($release) is not caught by $case"; echo "$out" | tail -3; fi
}
# get_new_blocks hands out, as the last of a multi-block allocation, a block another request holds
# (reference counts kept consistent, so no assertion of vLLM's fires).
handout_old='    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:'
handout_new='    def get_new_blocks(self, num_blocks):
        ret = self._get_new_blocks(num_blocks)
        in_use = [b for b in self.blocks if b.ref_cnt > 0 and not b.is_null and all(b is not x for x in ret)]
        if in_use and len(ret) > 1:
            ret[-1].ref_cnt -= 1
            self.free_block_queue.append(ret[-1])
            in_use[0].ref_cnt += 1
            ret[-1] = in_use[0]
        return ret

    def _get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:'
for r in $NEWEST 0.11.0; do
  mutant block-in-use-handed-out "$r" block_pool.py "$handout_old" "$handout_new" corpus/vllm/fa_cascade_shared_prefix.json
done
# The sliding-window manager frees one block more than the window has left.
mutant swa-block-freed-early $NEWEST single_type_kv_cache_manager.py \
  '            num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens,' \
  '            num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens + self.block_size,' \
  corpus/vllm/fa_hybrid_swa_null_blocks.json
mutant swa-block-freed-early 0.11.0 single_type_kv_cache_manager.py \
  '        last_useful_token = num_computed_tokens - self.sliding_window + 1' \
  '        last_useful_token = num_computed_tokens - self.sliding_window + 1 + self.block_size' \
  corpus/vllm/fa_hybrid_swa_null_blocks.json

msg=$("$SRC/.sglang/venv/bin/python" adapters/vllm/vllm_planner.py --site ".vllm/$NEWEST" --backend flashinfer --allocator vllm 2>&1 </dev/null)
rc=$?
[ $rc = 2 ] && grep -q -- "--allocator vllm" <<<"$msg" && echo "ok: --allocator vllm with flashinfer refused (exit 2)" ||
  fail "--allocator vllm --backend flashinfer gave exit $rc: $msg"
[ $failures -eq 0 ] && echo "vllm allocation test: ok" || { echo "vllm allocation test: $failures failure(s)"; exit 1; }
