#!/usr/bin/env bash
# Opens a kvfuzz report in headless chromium and checks what a reader would see: the page rendered
# (its load script ran), it shows every expected finding group, and every picture loaded.
# Usage: report_browser_check.sh REPORT.html KEYS_FILE [SCREENSHOT.png]
#   KEYS_FILE  the finding groups the page must show, one a line: LABEL<tab>KEY (LABEL known, NEW,
#              regression or untriaged); empty when the campaign found nothing
# Exit 0 when all holds, 1 naming what does not, 2 on bad usage; 77 (ctest's skip) when chromium
# is not installed, unless KVFUZZ_REQUIRE_BROWSER=1 (ci/test.sh sets it), then 1.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: report_browser_check.sh REPORT.html KEYS_FILE [SCREENSHOT.png]" >&2; exit 2; }
report=$(realpath "$1") keys=$2 shot=${3:-}
[ -f "$report" ] && [ -f "$keys" ] || { echo "report_browser_check: $1 or $2 not found" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "report_browser_check: chromium not installed (bash ci/setup.sh browser installs it)"
  [ "${KVFUZZ_REQUIRE_BROWSER:-0}" = 1 ] && exit 1
  exit 77
fi
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=10000)
dom=$(mktemp)
trap 'rm -f "$dom"' EXIT
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$report" >"$dom" 2>/dev/null
attr() { grep -o "<body[^>]*" "$dom" | grep -o "$1=\"[^\"]*\"" | cut -d'"' -f2; }
failed=0
fail() { echo "report_browser_check: $*"; failed=1; }
[ "$(attr data-rendered)" = yes ] || fail "the page did not render (its load script never ran)"
expected=$(grep -c . "$keys" || true)
[ "$(attr data-groups)" = "$expected" ] || fail "the page shows $(attr data-groups) finding groups, expected $expected"
# Every expected (label, key) among the page's groups, read back from the DOM with entities decoded.
missing=$(python3 - "$dom" "$keys" <<'PY'
import html, re, sys
dom = open(sys.argv[1]).read()
attr = lambda tag, name: html.unescape(re.search(name + r'="([^"]*)"', tag).group(1))
shown = {(attr(tag, "data-label"), attr(tag, "data-key")) for tag in re.findall(r'<section class="group"[^>]*>', dom)}
for line in open(sys.argv[2]):
    if line.strip():
        label, key = line.rstrip("\n").split("\t", 1)
        if (label, key) not in shown:
            print(f"finding group '{key}' ({label}) is not on the page")
PY
)
[ -z "$missing" ] || fail "$missing"
[ "$(attr data-images-broken)" = 0 ] || fail "$(attr data-images-broken) of $(attr data-images) pictures did not load"
if [ -n "$shot" ]; then
  timeout 120 "$browser" "${flags[@]}" --window-size=1400,2400 --screenshot="$(realpath -m "$shot")" "file://$report" >/dev/null 2>&1
  [ -s "$shot" ] || fail "no screenshot written to $shot"
fi
[ $failed = 0 ] && echo "report_browser_check: $report renders: $expected groups, $(attr data-images) pictures loaded"
exit $failed
