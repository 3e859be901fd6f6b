#!/usr/bin/env bash
# Opens a kvfuzz report in headless chromium and checks what a reader would see: the page rendered
# (its load script ran), it shows every expected finding group, and every picture loaded.
# Usage: report_browser_check.sh REPORT.html KEYS_FILE [SCREENSHOT.png]
#   KEYS_FILE  the fingerprint keys the page must show, one a line (may be empty: no findings)
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
while IFS= read -r key; do
  [ -z "$key" ] && continue
  escaped=$(printf '%s' "$key" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/"/\&quot;/g')
  grep -qF "data-key=\"$escaped\"" "$dom" || fail "finding group '$key' is not on the page"
done <"$keys"
[ "$(attr data-images-broken)" = 0 ] || fail "$(attr data-images-broken) of $(attr data-images) pictures did not load"
if [ -n "$shot" ]; then
  timeout 120 "$browser" "${flags[@]}" --window-size=1400,2400 --screenshot="$(realpath -m "$shot")" "file://$report" >/dev/null 2>&1
  [ -s "$shot" ] || fail "no screenshot written to $shot"
fi
[ $failed = 0 ] && echo "report_browser_check: $report renders: $expected groups, $(attr data-images) pictures loaded"
exit $failed
