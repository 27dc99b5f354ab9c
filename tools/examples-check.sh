#!/usr/bin/env bash
# examples-check.sh BUILDDIR - run every example and compare what it prints
# with what it should print. Counts as one test per example in the summary.
#
# For each examples/<name>.c there must be examples/expected/<name>.txt, the
# expected standard output. Optional beside it:
#   <name>.args  arguments to pass (one line, split on spaces)
#   <name>.sed   a `sed -E` script applied to the output before the compare;
#                it masks what changes from run to run (timings, addresses,
#                the machine's worker count), e.g. s/took [0-9.]+ s/took <seconds> s/
# An example passes when it exits 0 and its filtered output equals the
# expected file line for line; otherwise the diff is printed.
set -uo pipefail
bdir=${1:-build}
summary=build/.test-summary
mkdir -p build
# as tools/run-tests.sh: a sanitizer report fails the example
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
passed=0; failed=0; bad=()
for src in examples/*.c; do
  name=$(basename "$src" .c)
  exp=examples/expected/$name.txt
  echo "=== [examples] $name"
  if [ ! -f "$exp" ]; then
    echo "no $exp: every example needs its expected output"
    failed=$((failed + 1)); bad+=("$name (no expected output)"); continue
  fi
  args=()
  [ -f "examples/expected/$name.args" ] && read -r -a args < "examples/expected/$name.args"
  out=$(mktemp)
  timeout 300 "$bdir/examples/$name" "${args[@]}" > "$out"
  rc=$?
  if [ -f "examples/expected/$name.sed" ]; then
    sed -E -f "examples/expected/$name.sed" "$out" > "$out.f"
  else
    cp "$out" "$out.f"
  fi
  if [ "$rc" -eq 0 ] && diff -u --label "expected/$name.txt" --label "$name (filtered output)" \
       "$exp" "$out.f"; then
    echo "$name: output as expected"
    passed=$((passed + 1))
  else
    [ "$rc" -ne 0 ] && echo "$name exited with $rc; its output:" && cat "$out"
    failed=$((failed + 1)); bad+=("$name")
  fi
  rm -f "$out" "$out.f"
done
echo "$passed $failed" >> "$summary"
echo "examples: $passed passed, $failed failed"
if [ ${#bad[@]} -ne 0 ]; then
  echo "failing examples: ${bad[*]}"
  exit 1
fi
