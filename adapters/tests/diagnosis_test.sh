#!/usr/bin/env bash
# Diagnoses that name the mechanism: bugs planted one at a time in the numpy page_table executor
# (KVFUZZ_EXAMPLE_BREAK, adapters/examples/numpy_page_table.py) are filed under the name of what
# went wrong, and a different planted bug is not given that name.
#   gqa_mod   q head h reads kv head h % kv_heads   -> in-bounds other-head, oracle reads:other-head
#   no_scale  softmax of q.k without sm_scale        -> oracle values:scale (the scale it used named);
#             not given to bf16_out (outputs cut to bf16) nor to lse_base2
#   nan_out   every output NaN                       -> oracle values:non-finite, once per query
#   hang      no answer                              -> one hang key, without the adapter's last output
# Usage: diagnosis_test.sh KVFUZZ_BIN SOURCE_DIR WORK_DIR
set -uo pipefail
K=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
EXEC="python3 $SRC/adapters/examples/numpy_page_table.py"
GQA=$SRC/adapters/tests/cases/gqa_decode.json  # q_heads 4, kv_heads 2; only request 1 in the batch
MHA=$SRC/adapters/tests/cases/mha_extend.json  # q_heads = kv_heads = 2; two requests, bf16
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# check NAME BREAK CASE [flags]: runs kvfuzz check with the variant; $WORK/NAME.out, its exit in $rc,
# its fingerprint keys in $WORK/NAME.keys.
check() {
  local name=$1 variant=$2 case=$3
  shift 3
  "$K" check "$case" --adapter "KVFUZZ_EXAMPLE_BREAK=$variant $EXEC" --backend numpy_page_table "$@" \
    >"$WORK/$name.out" 2>&1
  rc=$?
  sed -n 's/^  fingerprint: //p' "$WORK/$name.out" | sort -u >"$WORK/$name.keys"
}
has() { grep -qE -- "$2" "$WORK/$1.$3" || { fail "$1: no line matches /$2/ in its $3"; sed -n 1,40p "$WORK/$1.out"; }; }
lacks() { ! grep -qE -- "$2" "$WORK/$1.$3" || { fail "$1: a line matches /$2/ in its $3"; grep -E -- "$2" "$WORK/$1.$3" | head -5; }; }
exits() { [ "$rc" = "$2" ] || { fail "$1: exit $rc, expected $2"; tail -20 "$WORK/$1.out"; }; }

# The executor as written passes both cases.
for c in GQA MHA; do
  check "clean_$c" "" "${!c}"
  exits "clean_$c" 0
done

# GQA head mapping: the keys read are request 1's own, in another kv head; named as such, the
# oracle's disagreements filed under the read set, and no read of another request (before: in-bounds
# other-request, "reads of keys of request 0" in a case without request 0).
check gqa_mod gqa_mod "$GQA"
exits gqa_mod 1
has gqa_mod '^in-bounds/fa:numpy_page_table/decode/full: other-head$' keys
has gqa_mod '^oracle/fa:numpy_page_table/decode/full: reads:other-head$' keys
lacks gqa_mod 'other-request|values:' keys
has gqa_mod 'q head 1 read kv head 1, q head 2 read kv head 0 \(GQA maps q head h to kv head h / 2\)' out
lacks gqa_mod 'request 0' out
# ... only where the mapping is wrong: with as many q heads as kv heads, h % kv_heads is right.
check gqa_mod_mha gqa_mod "$MHA"
exits gqa_mod_mha 0
# A different foreign read (the row's last page one page on) is not a head mapping error.
check next_page next_page "$GQA"
exits next_page 1
lacks next_page 'other-head' keys

# A wrong softmax scale is a scale error on every query and head, decode or extend, fp32 or bf16,
# and the message names the scale the kernel used (1, not 0.5).
for c in GQA MHA; do
  check "no_scale_$c" no_scale "${!c}"
  exits "no_scale_$c" 1
  has "no_scale_$c" ': values:scale$' keys
  lacks "no_scale_$c" 'lse-base2|values:gross|values:marginal|reads:|cache-extent|in-bounds' keys
  has "no_scale_$c" "softmax at scale 1, not the case's sm_scale 0.5 \\(2 times it\\)" out
done
# ... and it shrinks: one request, still values:scale (a name the small case keeps).
"$K" shrink "$MHA" --adapter "KVFUZZ_EXAMPLE_BREAK=no_scale $EXEC" --backend numpy_page_table --seconds 20 \
  -o "$WORK/no_scale_min.json" >"$WORK/no_scale_shrink.out" 2>&1
grep -q "as oracle/fa:numpy_page_table/.*: values:scale" "$WORK/no_scale_shrink.out" &&
  grep -q "requests 2 -> 1" "$WORK/no_scale_shrink.out" ||
  { fail "no_scale shrink"; cat "$WORK/no_scale_shrink.out"; }
# Outputs rounded past the declared precision are not a scale error either.
check bf16_out bf16_out "$GQA"
exits bf16_out 1
has bf16_out ': values:(marginal|gross)$' keys
lacks bf16_out 'values:scale' keys
# An LSE in base 2 (outputs right) is not a scale error.
check lse_base2 lse_base2 "$MHA"
exits lse_base2 1
has lse_base2 ': values:lse-base2$' keys
lacks lse_base2 'values:scale' keys

# NaN output: values:non-finite, one finding per query (at most 4 per layer kind), and no
# read-set finding from the probes that could not decode (before: undecodable + missing-all, 202
# findings in 437 lines on one case).
for c in GQA MHA; do
  check "nan_$c" nan_out "${!c}"
  exits "nan_$c" 1
  has "nan_$c" ': values:non-finite$' keys
  lacks "nan_$c" 'undecodable|missing|cache-extent|in-bounds' keys
  dup=$(grep -oE '^numpy_page_table: oracle: layer [0-9]+ \([a-z_]+\), row [0-9]+ \(request [0-9]+\), query position [0-9]+' \
    "$WORK/nan_$c.out" | sort | uniq -d | head -1)
  [ -z "$dup" ] || fail "nan_$c: two findings for one query: $dup"
  [ "$(wc -l <"$WORK/nan_$c.out")" -le 40 ] || fail "nan_$c: $(wc -l <"$WORK/nan_$c.out") lines of output"
done

# A hang is one key, its message without the adapter's last output.
check hang hang "$GQA" --adapter-timeout 2
exits hang 1
has hang '^hang/fa:numpy_page_table/decode/-: adapter Q gave no answer within N s and was killed$' keys

if [ "$failures" -gt 0 ]; then
  echo "diagnosis tests: $failures failed"
  exit 1
fi
echo "diagnosis tests: all passed"
