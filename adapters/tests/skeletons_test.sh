#!/usr/bin/env bash
# The per-family skeletons of docs/adapters.md work as pasted: each (the common part, then the
# family's block) is written to a file and run through a short campaign of its family, which must
# pass clean (exit 0: the skeleton's numpy kernel is right for what it declares).
# Usage: skeletons_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
# The python blocks after the heading "## A skeleton for each family", up to the next heading.
python3 - "$SRC/docs/adapters.md" "$WORK" <<'PY' || { echo "FAIL: cannot extract the skeletons"; exit 1; }
import re, sys
text = open(sys.argv[1]).read()
part = text.split("## A skeleton for each family", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```python\n(.*?)```", part, re.S)
assert len(blocks) == 5, f"{len(blocks)} python blocks, expected the common part and 4 families"
for b in blocks[1:]:
    family = re.search(r'family="(\w+)"', b).group(1)
    open(f"{sys.argv[2]}/{family}.py", "w").write(
        f"import sys\nsys.path.insert(0, {sys.argv[1].rsplit('/docs/', 1)[0] + '/adapters'!r})\n" + blocks[0] + "\n" + b)
PY
failures=0
for family in page_table paged_csr token_csr mla; do
  # Campaigns draw cases within the declared support (kvfuzz run): 20 of each family.
  "$K" run --cases 20 --profile tiny --jobs 1 --no-shrink --adapter "python3 $WORK/$family.py" --backend my_kernel \
    --out "$WORK/findings-$family" >"$WORK/$family.out" 2>&1
  rc=$?
  checked=$(grep -E "^[a-z_]+:my_kernel +[0-9]+" "$WORK/$family.out" | awk '{s += $2} END {print s + 0}')
  if [ "$rc" != 0 ] || [ "$checked" -lt 3 ]; then
    echo "FAIL: the $family skeleton: exit $rc, $checked cases checked"
    tail -30 "$WORK/$family.out"
    failures=$((failures + 1))
  else
    echo "ok: the $family skeleton passes $checked checked cases"
  fi
done
[ "$failures" = 0 ] && echo "skeleton tests: all passed" || { echo "skeleton tests: $failures failed"; exit 1; }
