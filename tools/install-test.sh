#!/usr/bin/env bash
# install-test.sh - `make install` into a scratch prefix, then build an
# example outside the tree against the installed copy with pkg-config, the
# way a user would, and run it. Counts as one test in the summary.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok=1
make --no-print-directory -s install PREFIX="$tmp/prefix" >/dev/null || ok=0
cp examples/hello.c "$tmp/"
if [ $ok -eq 1 ]; then
  export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
  flags=$(pkg-config --static --cflags --libs hive) || ok=0
  echo "install test: cc hello.c $flags"
  ( cd "$tmp" && cc -std=gnu11 -Wall -Werror hello.c $flags -o hello ) || ok=0
  [ $ok -eq 1 ] && { LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/hello" >/dev/null || ok=0; }
fi
if [ $ok -eq 1 ]; then
  echo "install: 1 passed, 0 failed"; echo "1 0" >> build/.test-summary
else
  echo "install: 0 passed, 1 failed"; echo "0 1" >> build/.test-summary; exit 1
fi
