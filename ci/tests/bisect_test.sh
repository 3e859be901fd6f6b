#!/usr/bin/env bash
# kvfuzz bisect (ci/bisect.py) on a fake engine: a fake release list and a fake engine script that
# prints fingerprint lines by release, so no wheel is downloaded. Checked: for every place of the fix
# among 19 releases the bisection names the right first release without (and runs at most 8 of
# them); a release where the case is unsupported, crashes or would not install is reported as
# such, never as "without"; a saved finding is bisected by its fingerprint key; a case with
# --issue uses the issue's match clauses whatever its affected range; bad input exits 2. About 5 s.
# Usage: bisect_test.sh KVFUZZ WORK_DIR
set -uo pipefail
# (grep -q <<<"$out", not echo | grep -q: under pipefail, grep -q quitting early SIGPIPEs the echo, a flaky failure)
KVFUZZ=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

printf '%s\n' 0.5.23 0.5.9 0.5.10.post1 0.5.11 0.5.12 0.5.12.post1 0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 \
  0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.10 >"$WORK/releases.txt"   # unsorted, two below the span
# The fake engine script: `fingerprint CASE BACKEND` at SGLANG_VERSION. The mechanism (a window
# layer's extra-before) from FAKE_FIRST up to FAKE_FIXED (the index of the first release without,
# in the span's order); FAKE_UNSUPPORTED, FAKE_CRASH, FAKE_ERROR: releases that answer so.
# Every release run is logged to $WORK/runs.
cat >"$WORK/engine.sh" <<'SH'
[ "$1" = fingerprint ] || exit 2
echo "$SGLANG_VERSION" >>"$FAKE_LOG"
span="0.5.10.post1 0.5.11 0.5.12 0.5.12.post1 0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23"
i=0; for r in $span; do [ "$r" = "$SGLANG_VERSION" ] && break; i=$((i + 1)); done
line() { echo "{\"file\": \"$2\", \"key\": \"$1/sglang_flashinfer/extend/sliding_window: $3\", \"count\": 1, \"replay\": \"r\", \"fingerprint\": {\"property\": \"$1\", \"planner\": \"sglang_flashinfer\", \"backend\": \"sglang_flashinfer\", \"release\": \"$SGLANG_VERSION\", \"mode\": \"extend\", \"mechanism\": \"$3\", \"layer\": {\"kind\": \"sliding_window\", \"window\": 2}, \"context\": {\"graph\": false}}}"; }
case " ${FAKE_ERROR:-} " in *" $SGLANG_VERSION "*) echo "no wheel for $SGLANG_VERSION" >&2; exit 1 ;; esac
case " ${FAKE_UNSUPPORTED:-} " in *" $SGLANG_VERSION "*) echo "$2: no finding on x (unsupported there)" >&2; exit 0 ;; esac
case " ${FAKE_CRASH:-} " in *" $SGLANG_VERSION "*) line crash "$2" "AttributeError: no attribute @ plan"; exit 0 ;; esac
[ "$i" -ge "${FAKE_FIRST:-0}" ] && [ "$i" -lt "$FAKE_FIXED" ] && line cache-extent "$2" extra-before
[ "$i" -ge "$FAKE_FIXED" ] && line plan-run "$2" "plan-run:logits_soft_cap"   # another mechanism: still "without"
exit 0
SH
cat >"$WORK/issues.json" <<'JSON'
{"issues": [{"id": "fake-window", "title": "t", "verdict": "v", "kind": "upstream-bug",
  "affected": {"package": "sglang", "first": "0.5.13", "fixed": "0.5.14"},
  "minimal_case": {"case": "corpus/sglang/flashinfer_swa_full_prefix.json", "backend": "flashinfer", "release": "0.5.13"},
  "match": [{"property": ["cache-extent", "oracle"], "backend": "sglang_flashinfer", "layer_kinds": ["sliding_window"],
             "mechanisms": ["extra-before"]}]},
 {"id": "fake-flags", "title": "t", "verdict": "v", "kind": "upstream-bug",
  "affected": {"package": "sglang", "first": "0.5.13", "fixed": "0.5.14"},
  "minimal_case": {"case": "corpus/sglang/flashinfer_swa_full_prefix.json", "backend": "flashinfer", "release": "0.5.13",
                   "deterministic": true, "adapter_flags": ["--fake-flag", "on"]},
  "match": [{"property": ["cache-extent", "oracle"], "backend": "sglang_flashinfer", "layer_kinds": ["sliding_window"],
             "mechanisms": ["extra-before"]}]}]}
JSON
export FAKE_LOG=$WORK/runs
span=(0.5.10.post1 0.5.11 0.5.12 0.5.12.post1 0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23)
bisect() { "$KVFUZZ" bisect --releases-file "$WORK/releases.txt" --runner "bash $WORK/engine.sh" "$@"; }
issue() { bisect --issue fake-window --issues "$WORK/issues.json" "$@" 2>"$WORK/err"; }

# 1. Every place of the fix: the first release without, found in at most 8 runs.
for fixed in $(seq 1 16); do
  rm -f "$FAKE_LOG"
  out=$(FAKE_FIXED=$fixed issue) || fail "fix at ${span[$fixed]}: exit $?: $(cat "$WORK/err")"
  grep -qx "  first with: 0.5.10.post1 (the lower bound: maybe earlier); first without: ${span[$fixed]}" <<<"$out" ||
    fail "fix at ${span[$fixed]}: $(echo "$out" | grep 'first with')"
  [ "$(wc -l <"$FAKE_LOG")" -le 8 ] || fail "fix at ${span[$fixed]}: $(wc -l <"$FAKE_LOG") releases run, more than log2(17) + 3"
done
# never fixed: every release with, three runs (the bounds and the minimal case agree)
rm -f "$FAKE_LOG"
out=$(FAKE_FIXED=99 issue)
grep -q "first without: none" <<<"$out" || fail "never fixed: $(echo "$out" | grep 'first with')"
[ "$(wc -l <"$FAKE_LOG")" -eq 3 ] || fail "never fixed: $(wc -l <"$FAKE_LOG") runs, expected the two bounds and the minimal case's release"

# 2. Introduced after the span's start and fixed later: both boundaries (0.5.13 .. 0.5.20), and the
# release outside the issue's affected range still counts as "with" (no triage range applied).
out=$(FAKE_FIRST=4 FAKE_FIXED=14 issue --method sweep)
grep -q "first with: 0.5.13; first without: 0.5.21" <<<"$out" || fail "two boundaries: $(echo "$out" | grep 'first with')"
grep -q "runs: 0.5.10.post1..0.5.12.post1 without; 0.5.13..0.5.20 with; 0.5.21..0.5.23 without" <<<"$out" ||
  fail "two boundaries' runs: $(echo "$out" | grep 'runs:')"
grep -q "^  0.5.21  *without  *SGLANG_VERSION=0.5.21 bash $WORK/engine.sh fingerprint corpus/sglang/flashinfer_swa_full_prefix.json flashinfer   # other findings: plan-run" <<<"$out" ||
  fail "no command beside the verdict: $(echo "$out" | grep '0.5.21 ')"

# ... and by bisection: the minimal case's release (0.5.13) is tested, so a mechanism absent at
# both bounds is still found.
out=$(FAKE_FIRST=3 FAKE_FIXED=14 issue)
grep -q "first with: 0.5.12.post1; first without: 0.5.21" <<<"$out" || fail "bisect, absent at both bounds: $(echo "$out" | grep 'first with')"

# 3. Honest verdicts: unsupported, crash and error are never "without".
out=$(FAKE_FIXED=9 FAKE_UNSUPPORTED=0.5.15.post1 FAKE_CRASH=0.5.15 FAKE_ERROR=0.5.11 issue --method sweep)
grep -q "^  0.5.15.post1  *unsupported " <<<"$out" || fail "unsupported: $(echo "$out" | grep '0.5.15.post1 ')"
grep -q "^  0.5.15  *crash .*# crash/.*AttributeError" <<<"$out" || fail "crash: $(echo "$out" | grep '0.5.15 ')"
grep -q "^  0.5.11  *error .*no wheel for 0.5.11" <<<"$out" || fail "error: $(echo "$out" | grep '0.5.11 ')"
grep -q "first without: 0.5.16 (or one of 0.5.15..0.5.15.post1, not judged)$" <<<"$out" ||
  fail "first without past a crash and an unsupported release: $(echo "$out" | grep 'first with')"
# bisection: the unsupported release at the fix's place is not taken for the fix
out=$(FAKE_FIRST=6 FAKE_FIXED=9 FAKE_UNSUPPORTED="0.5.13.post1 0.5.15.post1" issue --method sweep)
grep -q "first with: 0.5.14 (or one of 0.5.13.post1, not judged); first without: 0.5.16 (or one of 0.5.15.post1, not judged)$" <<<"$out" ||
  fail "gaps before the first with and the first without: $(echo "$out" | grep 'first with')"
out=$(FAKE_FIXED=9 FAKE_UNSUPPORTED="0.5.15.post1" issue)
grep -q "first without: 0.5.16" <<<"$out" || fail "bisect past unsupported: $(echo "$out" | grep 'first with')"

# --skip: releases not run are reported so, and the fix may be among them.
rm -f "$FAKE_LOG"
out=$(FAKE_FIXED=9 issue --skip 0.5.15,0.5.15.post1)
grep -q "^  0.5.15  *skipped  *--skip" <<<"$out" || fail "skipped: $(echo "$out" | grep '0.5.15 ')"
grep -qx "0.5.15" "$FAKE_LOG" && fail "a skipped release was run"
grep -q "first without: 0.5.16 (or one of 0.5.15..0.5.15.post1, not judged)$" <<<"$out" ||
  fail "skip: $(echo "$out" | grep 'first with')"

# 4. A saved finding: its record's key, its replay line's backend and planner flags.
mkdir -p "$WORK/findings"
echo '{}' >"$WORK/findings/f.json"
cat >"$WORK/findings/f.finding.json" <<JSON
{"case": "$WORK/findings/f.json", "replay": "kvfuzz check $WORK/findings/f.json --backend sglang_flashinfer_0_5_11_det:flashinfer_paged --adapter 'python3 adapters/sglang/sglang_planner.py --site .sglang/0.5.11 --device cpu --backend flashinfer --deterministic'",
 "fingerprints": [{"key": "cache-extent/sglang_flashinfer/extend/sliding_window: extra-before"}]}
JSON
out=$(FAKE_FIXED=12 bisect "$WORK/findings/f.json" 2>"$WORK/err")
grep -q "first without: 0.5.19" <<<"$out" || fail "saved finding: $(echo "$out" | grep 'first with') $(cat "$WORK/err")"
grep -q "fingerprint [^ ]*findings/f.json flashinfer --deterministic" <<<"$out" || fail "saved finding's flags: $(echo "$out" | head -3)"

# An issue whose minimal case runs under planner flags (minimal_case.adapter_flags) is bisected
# under them: every release's command carries them.
out=$(FAKE_FIXED=12 bisect --issue fake-flags --issues "$WORK/issues.json" --method sweep 2>"$WORK/err")
grep -q "fingerprint corpus/sglang/flashinfer_swa_full_prefix.json flashinfer --deterministic --fake-flag on" <<<"$out" ||
  fail "the issue's adapter_flags: $(echo "$out" | grep -m1 'fingerprint') $(cat "$WORK/err")"

# 5. Bad input: exit 2 with the reason.
bisect --issue no-such --issues "$WORK/issues.json" >/dev/null 2>"$WORK/err"
[ $? -eq 2 ] && grep -q "no-such: no such issue" "$WORK/err" || fail "unknown issue: $(cat "$WORK/err")"
FAKE_FIXED=3 bisect --issue fake-window --issues "$WORK/issues.json" --from 0.5.99 >/dev/null 2>"$WORK/err"
[ $? -eq 2 ] && grep -q "release 0.5.99 is not on the index" "$WORK/err" || fail "unknown release: $(cat "$WORK/err")"

[ $failures -eq 0 ] && echo "bisect_test: all passed" || echo "bisect_test: $failures failure(s)"
[ $failures -eq 0 ]
