#!/usr/bin/env bash
# python-check.sh VARIANT BUILDDIR - run the Python module's pytest suite
# (python/tests) against BUILDDIR/python with Debian's /usr/bin/python3.
# Counts pass/fail into build/.test-summary as the other checks do.
# asan: the interpreter is not instrumented, so the runtime is preloaded and
# leak checking is off (CPython keeps memory until exit by design).
# tsan: skipped (an uninstrumented interpreter under TSan reports its own
# GIL handoffs); the C code it calls is covered by the C suites under TSan.
set -uo pipefail
variant=${1:-normal}
bdir=${2:-build}
summary=build/.test-summary
mkdir -p build
if [ "$variant" = tsan ]; then
  echo "=== [python] skipped under tsan"
  exit 0
fi
export PYTHONPATH=$PWD/$bdir/python
export HIVE_PYTASKS=$PWD/$bdir/python/tests/libpytasks.so
export PYTHONDONTWRITEBYTECODE=1
if [ "$variant" = asan ]; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
fi
echo "=== [python] pytest python/tests ($variant)"
out=$(mktemp)
timeout 600 /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
passed=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | grep -oE '[0-9]+' || true)
failed=$(grep -oE '[0-9]+ (failed|error)' "$out" | awk '{s+=$1} END {print s+0}')
rm -f "$out"
passed=${passed:-0}; failed=${failed:-0}
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "$passed $failed" >> "$summary"
echo "python: $passed passed, $failed failed"
[ "$rc" -eq 0 ]
