#!/bin/sh
# check.sh - a cluster type source written on the public API alone: it includes only
# <lazycluster.h> and system headers, compiles with nothing but the public include directory on
# its include path, and its object uses no lc__ symbol (it may define one: the built-in type's
# entry). Prints what is wrong, names the file and line, and exits 1; 0 when all is well.
#
#   check.sh INCLUDE_DIR SOURCE...
#
# Environment: CC (default cc), NM (default nm).
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 INCLUDE_DIR SOURCE..." >&2
  exit 2
fi
INC=$1
shift
CC=${CC:-cc}
NM=${NM:-nm}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
bad=0

for src in "$@"; do
  # includes: <lazycluster.h> or a system header (no lazycluster/ path, no quoted header)
  if grep -n '^[[:space:]]*#[[:space:]]*include' "$src" |
    grep -v '#[[:space:]]*include[[:space:]]*<lazycluster\.h>' |
    grep -E '"|<lazycluster/|\.\./' >"$tmp/inc"; then
    sed "s|^|$src:|; s|\$|: includes a header other than <lazycluster.h> and libc|" "$tmp/inc"
    bad=1
  fi
  # compiled alone, in a directory of its own, with only the public headers
  cp "$src" "$tmp/type.c"
  if ! $CC -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -c -I "$INC" -o "$tmp/type.o" \
    "$tmp/type.c" 2>"$tmp/cc"; then
    sed "s|$tmp/type.c|$src|g" "$tmp/cc"
    echo "$src: does not compile with only $INC on its include path"
    bad=1
    continue
  fi
  # the symbols it uses (undefined in its object) are public ones
  if $NM -u "$tmp/type.o" | awk '{print $NF}' | grep '^lc__' >"$tmp/sym"; then
    sed "s|^|$src: uses the private symbol |" "$tmp/sym"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "$# file(s) on the public API alone"
exit $bad
