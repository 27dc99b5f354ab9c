#!/usr/bin/env bash
# run-tests.sh VARIANT BIN... - run test binaries of one build and keep count.
# run-tests.sh --summary      - print the total over every build run so far.
#
# Each binary is a cmocka suite; its own summary lines are printed as they
# come. A binary that exits non-zero (a failed test or a sanitizer report)
# fails the run. Counts accumulate in build/.test-summary so that `make test`
# can close with one line over all three builds.
set -uo pipefail
summary=build/.test-summary
if [ "${1:-}" = "--summary" ]; then
  read -r p f < <(awk '{p+=$1; f+=$2} END {print p+0, f+0}' "$summary" 2>/dev/null || echo "0 0")
  echo "all builds: $p passed, $f failed"
  [ "$f" -eq 0 ] && [ "$p" -gt 0 ]
  exit
fi
variant=$1; shift
mkdir -p build
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
passed=0; failed=0; bad=()
for bin in "$@"; do
  echo "=== [$variant] $(basename "$bin")"
  log=$(mktemp)
  "$bin" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  rm -f "$log"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi     # crash or sanitizer report
  passed=$((passed + p)); failed=$((failed + f))
  [ "$rc" -ne 0 ] && bad+=("$(basename "$bin") (exit $rc)")
done
echo "$passed $failed" >> "$summary"
echo "$variant: $passed passed, $failed failed"
if [ ${#bad[@]} -ne 0 ]; then
  echo "failing in $variant: ${bad[*]}"
  exit 1
fi
