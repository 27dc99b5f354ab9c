#!/usr/bin/env bash
# run-fuzz.sh SECONDS BIN... - run each libFuzzer target for SECONDS and keep count.
#
# Each target grows its own corpus in build/fuzz/corpus/<target>, starting
# from the seeds in tests/fuzz/corpus/<target> (read only), and writes the
# input of a failure to build/fuzz/artifacts/<target>/. Its full log is
# build/fuzz/<target>.log; this prints one line per target (executions, or
# the broken invariant and how to replay it). A target that stops with a
# failure (crash, sanitizer report, broken invariant, timeout, out of
# memory) fails the run. Counts go to build/.test-summary as in
# tools/run-tests.sh: one per target. Before its timed run, each target
# replays the inputs of tests/fuzz/crashes-found/ named after it.
set -uo pipefail
secs=$1; shift
summary=build/.test-summary
mkdir -p build/fuzz
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# liburcu's rcu_barrier frees its completion a moment after it returns (see the file)
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:${LSAN_OPTIONS:-}"
passed=0; failed=0; bad=()
for bin in "$@"; do
  name=$(basename "$bin")
  work=build/fuzz/corpus/$name
  art=build/fuzz/artifacts/$name
  log=build/fuzz/$name.log
  mkdir -p "$work" "$art"
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
  # first the inputs that once broke this target: each must pass now
  # (a known open one is stepped around, see tests/fuzz/fuzz.h)
  found=(tests/fuzz/crashes-found/"${name#fuzz_}"-*)
  if [ -e "${found[0]}" ]; then
    if ! "$bin" "${found[@]}" >"$log.found" 2>&1; then
      echo "fuzz: $name FAILED on a reproducer in tests/fuzz/crashes-found/; log: $log.found"
      grep -E '^\*\*\* |^SUMMARY|runtime error|Running: ' "$log.found" | tail -6 | sed 's/^/    /'
      failed=$((failed + 1)); bad+=("$name"); continue
    fi
    echo "fuzz: $name: ${#found[@]} reproducers from tests/fuzz/crashes-found/ pass"
  fi
  "$bin" -max_total_time="$secs" -timeout=60 -print_final_stats=1 -artifact_prefix="$art/" \
      "$work" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $name: ${execs:-0} executions in $secs s (${rate:-0}/s), no failure"
    passed=$((passed + 1))
  else
    echo "fuzz: $name FAILED (exit $rc) after ${execs:-?} executions; log: $log"
    grep -E '^\*\*\* |^SUMMARY|runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log" \
        | head -6 | sed 's/^/    /'
    input=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    [ -n "$input" ] && echo "    replay: $bin $input"
    failed=$((failed + 1))
    bad+=("$name")
  fi
done
echo "$passed $failed" >> "$summary"
echo "fuzz: $passed passed, $failed failed"
if [ ${#bad[@]} -ne 0 ]; then
  echo "failing fuzz targets: ${bad[*]}"
  exit 1
fi
