# The start every vLLM test script shares, sourced with its arguments and the releases it needs:
#   NEEDS="0.33.0 0.11.0" source "$(dirname "$0")/vllm_test_env.sh" "$@"
# sets SRC K WORK (SOURCE_DIR KVFUZZ_BIN WORK_DIR), PY (.sglang/venv's Python) and NEWEST; prints
# "SKIPPED: ..." and exits 0 (ctest: skipped, never passed) where a needed release is not under
# .vllm/ (ci/vllm.sh install) or the venv has no torch and triton (ci/sglang.sh); empties WORK;
# fail MESSAGE prints it and counts it in $failures; replace FILE OLD NEW plants a mutation (the exact
# text OLD must be in FILE, else a failure and status 1); mutant (below) checks a planted bug is caught.
set -uo pipefail
SRC=$1 K=$2 WORK=$3
NEWEST=0.33.0
PY=$SRC/.sglang/venv/bin/python
for r in $NEEDS; do
  [ -d "$SRC/.vllm/$r/vllm" ] || { echo "SKIPPED: vLLM $r is not installed (bash ci/vllm.sh install installs it)"; exit 0; }
done
"$PY" -c 'import torch, triton' 2>/dev/null ||
  { echo "SKIPPED: no .sglang/venv with torch and triton (bash ci/sglang.sh seeds makes it)"; exit 0; }
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
replace() {
  python3 - "$@" <<'PY' || { fail "the mutation no longer applies to $1"; return 1; }
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert old in text, f"{old!r} not in {path}"
open(path, "w").write(text.replace(old, new))
PY
}

# mutant NAME FILE OLD NEW CASE PATTERN [PLANNER_ARGS]: FILE (under the release's vllm/) edited in a copy of the
# release (a tree of links, the one file copied; the release folder resolved first, so a linked .vllm/R is
# never itself copied as a link and edited through); the case must then fail with PATTERN in the output.
mutant() {
  local name=$1 file=$2 old=$3 new=$4 case=$5 pattern=$6 extra=${7:-} site=$WORK/site-$1
  cp -rs "$(realpath "$SRC/.vllm/$NEWEST")" "$site" && rm "$site/vllm/$file" && cp "$SRC/.vllm/$NEWEST/vllm/$file" "$site/vllm/$file"
  replace "$site/vllm/$file" "$old" "$new" || return
  out=$("$K" check "$case" --backend "vllm_fa_${NEWEST//./_}:fa" \
    --adapter "$PY $SRC/adapters/vllm/vllm_planner.py --site $site --backend fa $extra" 2>&1)
  if grep -q "finding(s)" <<<"$out" && grep -q -- "$pattern" <<<"$out"; then echo "ok: $name is caught by $(basename "$case")"
  else fail "$name is not caught by $case"; echo "$out" | tail -3; fi
}
