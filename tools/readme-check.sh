#!/usr/bin/env bash
# readme-check.sh BUILDDIR [CFLAGS] - compile and run the API tour of README.md, so
# that its snippets can never drift from include/hive.h, and check that the
# links and repository paths in README.md and docs/*.md exist inside the
# repository. Counts as one test.
#
# The program is made mechanically from README.md:
#   - every ```c block is part of the body of one main(), in README order;
#   - a block right after the line <!-- readme-check: file-scope --> goes
#     above main() instead (task functions, actor classes, ...), in order;
#   - a block right after <!-- readme-check: skip --> is left out;
#   - the lines between <!-- readme-check and --> (an HTML comment, so not
#     shown) are added to main() at that point: checks of what the text
#     claims, written with expect(condition);
#   - a printf line ending in a comment, or followed by a line that is only
#     a comment, claims that the comment's text is the line it prints: the
#     program's output must contain those lines in that order.
# main() opens with the includes the README names and ends with
# hive_shutdown(h). #line directives point compiler errors at README.md.
# CFLAGS (one word list) are added to the compile and link, e.g. the
# sanitizer flags of BUILDDIR's library.
set -uo pipefail
bdir=${1:-build}
read -r -a extra <<< "${2:-}"
readme=${README:-README.md}
summary=build/.test-summary
mkdir -p build
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/top.c" "$tmp/body.c" "$tmp/expected.txt"

awk -v top="$tmp/top.c" -v body="$tmp/body.c" -v want="$tmp/expected.txt" '
  function emit(line) { if (kind == "file") print line > top; else print line > body }
  function claim(text) { sub(/^[ \t]*\/\*[ \t]*/, "", text); sub(/[ \t]*\*\/[ \t]*$/, "", text); print text > want }
  BEGIN { kind = ""; next_kind = "main"; hidden = 0; pending = 0 }
  hidden && /^-->[ \t]*$/ { hidden = 0; next }
  hidden { print > body; next }
  /^<!-- readme-check[ \t]*$/ { hidden = 1; printf "#line %d \"%s\"\n", NR + 1, FILENAME > body; next }
  /^<!-- readme-check: file-scope -->/ { next_kind = "file"; next }
  /^<!-- readme-check: skip -->/ { next_kind = "skip"; next }
  kind == "" && /^```c[ \t]*$/ {
    kind = next_kind; next_kind = "main"
    if (kind != "skip") emit(sprintf("#line %d \"%s\"", NR + 1, FILENAME))
    next
  }
  kind != "" && /^```[ \t]*$/ { kind = ""; pending = 0; next }
  kind == "skip" { next }
  kind != "" {
    emit($0)
    if (kind != "main") next
    if (pending && $0 ~ /^[ \t]*\/\*.*\*\/[ \t]*$/) claim($0)
    pending = 0
    if ($0 ~ /printf\(/) {
      if (match($0, /;[ \t]*\/\*.*\*\/[ \t]*$/)) claim(substr($0, RSTART + 1))
      else if ($0 ~ /;[ \t]*$/) pending = 1
    }
    next
  }
' "$readme"
touch "$tmp/expected.txt"

{
  cat <<'EOF'
/* made by tools/readme-check.sh from README.md: do not edit */
#include <hive.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define expect(cond) \
    do { if (!(cond)) { fprintf(stderr, "README claim broken: %s\n", #cond); exit(1); } } while (0)
EOF
  cat "$tmp/top.c"
  echo "int main(void)"
  echo "{"
  cat "$tmp/body.c"
  echo "#line 1 \"tools/readme-check.sh\""
  echo "    return hive_shutdown(h) == HIVE_OK ? 0 : 1;"
  echo "}"
} > "$tmp/readme_tour.c"
mkdir -p "$bdir/readme"
cp "$tmp/readme_tour.c" "$bdir/readme/readme_tour.c"

ok=1
echo "=== [readme] the API tour as one program ($bdir/readme/readme_tour.c)"
# unused: the tour declares things it only shows (a slice it never reads)
flags=(-std=gnu11 -Wall -Wextra -Werror -Wno-unused-variable -Wno-unused-but-set-variable
       -Wno-unused-function -pthread -D_GNU_SOURCE -Iinclude "${extra[@]}")
# shellcheck disable=SC2046
cc "${flags[@]}" "$tmp/readme_tour.c" -o "$bdir/readme/readme_tour" "$bdir/libhive.a" -pthread \
   $(pkg-config --libs liburcu-memb liburcu-cds hwloc numa) -lm || ok=0
if [ $ok -eq 1 ]; then
  "$bdir/readme/readme_tour" > "$tmp/out.txt"
  rc=$?
  cat "$tmp/out.txt"
  [ $rc -eq 0 ] || { echo "the tour exited with $rc"; ok=0; }
  # each claimed line, in order, as a whole line of the output
  awk 'NR == FNR { want[++n] = $0; next } i < n && $0 == want[i + 1] { i++ }
       END { if (i < n) { printf "README claims the line \"%s\" (claim %d of %d); not printed in that order\n",
                                 want[i + 1], i + 1, n; exit 1 } }' \
      "$tmp/expected.txt" "$tmp/out.txt" || ok=0
  echo "claims checked: $(wc -l < "$tmp/expected.txt") printed lines"
fi

# The documents' links and the repository paths they name must exist, inside
# the repository: nothing may point outside it, or at a file that moved.
slugs() {   # GitHub's heading anchors of a markdown file
  sed -n 's/^#\{1,6\} //p' "$1" | tr 'A-Z' 'a-z' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}
root=$(pwd -P)
nlinks=0
for doc in README.md docs/*.md; do
  [ -f "$doc" ] || continue
  dir=$(dirname "$doc")
  while read -r link; do
    case $link in http://*|https://*|mailto:*) continue ;; esac
    nlinks=$((nlinks + 1))
    path=${link%%#*}; anchor=""
    [[ $link == *"#"* ]] && anchor=${link#*#}
    target=$doc
    [ -n "$path" ] && target=$dir/$path
    real=$(realpath -e "$target" 2>/dev/null)
    if [ -z "$real" ] || [[ $real != "$root"/* ]]; then
      echo "$doc: link ($link) names no file in the repository"; ok=0; continue
    fi
    if [ -n "$anchor" ] && ! slugs "$target" | grep -qxF "$anchor"; then
      echo "$doc: link ($link): $path has no heading #$anchor"; ok=0
    fi
  done < <(grep -oE '\]\([^) ]+\)' "$doc" | sed -E 's/^\]\((.*)\)$/\1/')
  # `examples/x.c`, `src/{a,b}.c`, ...: repository paths in code spans
  while read -r span; do
    for path in $(eval "echo $span"); do     # brace expansion only: the pattern allows no other syntax
      nlinks=$((nlinks + 1))
      [ -e "$path" ] || { echo "$doc: names \`$span\`, which is not in the repository"; ok=0; }
    done
  done < <(grep -oE '`(examples|src|tests|tools|include|docs|bench|\.ci)/[A-Za-z0-9_./{},-]*`' "$doc" |
           tr -d '`' | grep -v '^bench/results/' | sort -u)
done
echo "links and paths checked: $nlinks"

if [ $ok -eq 1 ]; then
  echo "readme: 1 passed, 0 failed"; echo "1 0" >> "$summary"
else
  echo "readme: 0 passed, 1 failed"; echo "0 1" >> "$summary"; exit 1
fi
