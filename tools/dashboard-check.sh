#!/usr/bin/env bash
# dashboard-check.sh BUILDDIR - test tools/hive-dashboard as a person would
# (tests/dashboard: the demo from BUILDDIR/examples with statistics on, the
# JSON API, the page in headless Chromium when it is installed) with
# Debian's /usr/bin/python3 and pytest. Screenshots go to BUILDDIR/dashboard/.
# Counts pass/fail into build/.test-summary as the other checks do.
set -uo pipefail
bdir=${1:-build}
summary=build/.test-summary
mkdir -p build
command -v chromium >/dev/null || echo "=== [dashboard] no chromium: the browser checks are skipped"
echo "=== [dashboard] pytest tests/dashboard"
out=$(mktemp)
HIVE_BUILD=$bdir PYTHONDONTWRITEBYTECODE=1 timeout 900 \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/dashboard 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
passed=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | grep -oE '[0-9]+' || true)
failed=$(grep -oE '[0-9]+ (failed|error)' "$out" | awk '{s+=$1} END {print s+0}')
rm -f "$out"
passed=${passed:-0}; failed=${failed:-0}
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "$passed $failed" >> "$summary"
echo "dashboard: $passed passed, $failed failed"
[ "$rc" -eq 0 ]
