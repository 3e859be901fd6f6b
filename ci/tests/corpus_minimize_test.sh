#!/usr/bin/env bash
# ci/corpus_minimize.sh replaces a corpus only with a non-empty, successful merge, and leaves it
# untouched (and no temporary folder behind) otherwise. Uses fake fuzzers: no libFuzzer build.
# Run by ctest (ci_corpus_minimize_test); exit 0 when every check holds.
# shellcheck disable=SC2016,SC2317,SC2012  # fake fuzzers in single quotes; helpers called via check
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}

# Fake fuzzers, called as FUZZER -merge=1 OUT IN: keep two inputs; keep none; fail after one.
cat >"$work/keep_two" <<'F'
#!/usr/bin/env bash
ls "$3" | sort | head -2 | while read -r f; do cp "$3/$f" "$2/"; done
F
printf '#!/usr/bin/env bash\nexit 0\n' >"$work/keep_none"
printf '#!/usr/bin/env bash\ncp "$3"/a.json "$2"/\nexit 1\n' >"$work/crash"
chmod +x "$work"/keep_two "$work"/keep_none "$work"/crash

fresh() {
  rm -rf "$work/corpus"
  mkdir -p "$work/corpus/t"
  for n in a b c d; do echo "{\"$n\": 1}" >"$work/corpus/t/$n.json"; done
}
listing() { (cd "$work/corpus" && find . -type f | sort | xargs md5sum); }
run() { KVFUZZ_CORPUS_ROOT="$work/corpus" KVFUZZ_FUZZER="$work/$1" bash "$repo/ci/corpus_minimize.sh" t >"$work/out" 2>&1; }
no_temp_left() { [ -z "$(find "$work/corpus" -name '.t.minimize.*')" ]; }

fresh
check "a good merge replaces the corpus" run keep_two
check "  with exactly the merged inputs" test "$(ls "$work/corpus/t" | tr '\n' ' ')" = "a.json b.json "
check "  and reports the counts" grep -q "4 -> 2 inputs" "$work/out"
check "  leaving no temporary folder" no_temp_left

for fuzzer in keep_none crash; do
  fresh
  want=$(listing)
  check "$fuzzer: exits non-zero" bash -c "! KVFUZZ_CORPUS_ROOT='$work/corpus' KVFUZZ_FUZZER='$work/$fuzzer' bash '$repo/ci/corpus_minimize.sh' t >'$work/out' 2>&1"
  check "$fuzzer: the corpus is untouched" test "$(listing)" = "$want"
  check "$fuzzer: says why" grep -q "untouched" "$work/out"
  check "$fuzzer: no temporary folder left" no_temp_left
done

fresh
check "an unknown target is a usage error (exit 2)" bash -c "KVFUZZ_CORPUS_ROOT='$work/corpus' KVFUZZ_FUZZER=/bin/false bash '$repo/ci/corpus_minimize.sh' nosuch >/dev/null 2>&1; [ \$? -eq 2 ]"
exit $fail
