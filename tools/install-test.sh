#!/usr/bin/env bash
# install-test.sh - run README.md's install recipes exactly as written, the
# way a user would, in a scratch HOME: `make install` puts both libhive.a
# and libhive.so in the prefix, then
#   - the static recipe (the ```sh block after <!-- install-test: static -->)
#     must build an app that does not need libhive.so (ldd) and runs;
#   - the shared recipe (the block after <!-- install-test: shared -->)
#     must build an app that loads the prefix's libhive.so and runs.
# The app is examples/hello.c, copied to app.c in an empty directory; the
# recipes' `make` runs in this tree. Counts as one test in the summary.
set -uo pipefail
repo=$PWD
readme=${README:-README.md}
summary=build/.test-summary
mkdir -p build
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

block() {   # the ```sh block right after the marker line $1 in README.md
  awk -v marker="$1" '
    $0 == marker { armed = 1; next }
    armed == 1 && /^```sh[ \t]*$/ { armed = 2; next }
    armed == 2 && /^```[ \t]*$/ { exit }
    armed == 2 { print }
    armed == 1 && !/^[ \t]*$/ { exit }   # the marker must sit just above its block
  ' "$readme"
}
static_recipe=$(block "<!-- install-test: static -->")
shared_recipe=$(block "<!-- install-test: shared -->")
ok=1
[ -n "$static_recipe" ] || { echo "install test: README.md has no static recipe"; ok=0; }
[ -n "$shared_recipe" ] || { echo "install test: README.md has no shared recipe"; ok=0; }

mkdir -p "$tmp/home" "$tmp/app"
cp examples/hello.c "$tmp/app/app.c"
cat > "$tmp/run.sh" <<EOF
set -euo pipefail
make() { command make --no-print-directory -s -C "$repo" "\$@" >/dev/null; }
cd "$tmp/app"
echo "--- the static recipe"
$static_recipe
echo "--- ldd app"
libs=\$(ldd ./app); echo "\$libs"
if grep -q 'libhive\.so' <<< "\$libs"; then echo "the static recipe's app needs libhive.so"; exit 1; fi
[ -f "\$HOME/opt/hive/lib/libhive.so" ] || { echo "libhive.so was not installed: nothing was tested"; exit 1; }
rm -f app
echo "--- the shared recipe"
$shared_recipe
echo "--- ldd app"
libs=\$(ldd ./app); echo "\$libs"
grep -q "libhive\.so.* => \$HOME/opt/hive/lib/libhive\.so" <<< "\$libs" ||
  { echo "the shared recipe's app does not load the installed libhive.so"; exit 1; }
EOF
if [ $ok -eq 1 ]; then
  # a clean environment: nothing from the caller's pkg-config or loader paths
  env -i PATH="$PATH" HOME="$tmp/home" bash "$tmp/run.sh" || ok=0
fi
if [ $ok -eq 1 ]; then
  echo "install: 1 passed, 0 failed"; echo "1 0" >> "$summary"
else
  echo "install: 0 passed, 1 failed"; echo "0 1" >> "$summary"; exit 1
fi
