# Sourced by the campaign tests that compare two campaigns of one seed (adapter_server_test.sh,
# compile_ahead_test.sh); they set WORK (NAME's output in $WORK/NAME.out, its exit status in
# $WORK/NAME.rc, its findings in $WORK/NAME/) and define fail MESSAGE.

# findings NAME: "case_index key" of every finding in the campaign's index, sorted.
findings() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    f = json.loads(line)
    print(f["case_index"], f["key"])' "$WORK/$1/index.jsonl" | sort
}

# same_findings A B PROPERTY: both campaigns exited 1 with the same findings, some of PROPERTY.
same_findings() {
  local a=$1 b=$2 prop=$3
  for n in "$a" "$b"; do
    [ "$(cat "$WORK/$n.rc")" = 1 ] || { fail "$n exited $(cat "$WORK/$n.rc"), expected 1"; tail -5 "$WORK/$n.out"; return; }
  done
  findings "$a" >"$WORK/$a.findings"
  findings "$b" >"$WORK/$b.findings"
  grep -q " $prop/" "$WORK/$a.findings" || { fail "$a: no $prop finding"; return; }
  if ! diff "$WORK/$a.findings" "$WORK/$b.findings" >"$WORK/$a.diff"; then
    fail "$b found other findings than $a:"
    cat "$WORK/$a.diff"
    return
  fi
  echo "ok: $b: the same $(wc -l <"$WORK/$a.findings") findings as $a"
}
