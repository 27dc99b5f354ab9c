#!/usr/bin/env bash
# run-mpi-tests.sh VARIANT BIN... - run each MPI test binary under mpirun with
# 2 and then 4 ranks (--oversubscribe: more ranks than cores is fine) and
# count rank 0's cmocka verdicts into build/.test-summary, as run-tests.sh
# does. Every rank runs every test (they are collective); a rank that fails
# makes mpirun exit non-zero, which fails the run. A world that hangs is
# killed after MPI_TEST_TIMEOUT seconds (default 120).
set -uo pipefail
variant=$1; shift
[ $# -gt 0 ] || exit 0
summary=build/.test-summary
mkdir -p build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# Open MPI keeps its own buffers until exit, some of them allocated by
# components it unloads before LeakSanitizer looks: full stacks at malloc
# (fast_unwind_on_malloc=0) let tests/mpi/lsan.supp match them by Open MPI's
# library names, and only by those.
#
# A sanitizer reads one suppressions= (the last): the caller's own
# suppressions file, if its options name one, joins ours in one file, and
# the caller's other options follow ours.
merge_supp() {   # merge_supp OUT OPTIONS OURS... -> the options without suppressions=
  local out=$1 opts=$2 rest=() o; shift 2
  cat "$@" > "$out"
  local IFS=': '
  for o in $opts; do
    case $o in
      suppressions=*) cat "${o#suppressions=}" >> "$out" ;;
      ?*) rest+=("$o") ;;
    esac
  done
  echo "${rest[*]}"
}
if [ "$variant" = asan ]; then
  export ASAN_OPTIONS="fast_unwind_on_malloc=0:$ASAN_OPTIONS"
  lsupp=build/.mpi-lsan.supp
  lrest=$(merge_supp "$lsupp" "${LSAN_OPTIONS:-}" tests/mpi/lsan.supp)
  export LSAN_OPTIONS="suppressions=$PWD/$lsupp${lrest:+:${lrest// /:}}"
fi
# Open MPI is not built with TSan: tests/mpi/tsan.supp names its modules
# (see there), on top of the suppressions every TSan test uses
if [ "$variant" = tsan ]; then
  supp=build/.mpi-tsan.supp
  trest=$(merge_supp "$supp" "${TSAN_OPTIONS:-}" tests/tsan.supp tests/mpi/tsan.supp)
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/$supp $trest"
fi
timeout_s=${MPI_TEST_TIMEOUT:-120}
passed=0; failed=0; bad=()
for bin in "$@"; do
  for np in 2 4; do
    echo "=== [$variant] $(basename "$bin") (mpirun -np $np)"
    log=$(mktemp)
    timeout "$timeout_s" mpirun --oversubscribe --tag-output -np "$np" "$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[1,0\]<std...>:\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[1,[0-9]*\]<std...>:\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    rm -f "$log"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" -ne 0 ] && bad+=("$(basename "$bin") -np $np (exit $rc)")
  done
done
echo "$passed $failed" >> "$summary"
echo "$variant mpi: $passed passed, $failed failed"
if [ ${#bad[@]} -ne 0 ]; then
  echo "failing in $variant: ${bad[*]}"
  exit 1
fi
