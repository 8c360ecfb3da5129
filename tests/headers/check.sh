#!/bin/sh
# check.sh - compiles each public header alone, as C11 and as C++11, each in a translation unit
# that includes only that header. Prints "N passed, N failed" at its end.
#
#   check.sh INCLUDE_DIR [HEADER...]
#
# HEADER is a path under INCLUDE_DIR (lazycluster.h, lazycluster/common.h); without any, every
# header under INCLUDE_DIR is checked. Environment: CC (default cc), CXX (default g++).
set -u

if [ $# -lt 1 ]; then
  echo "usage: $0 INCLUDE_DIR [HEADER...]" >&2
  exit 2
fi
INC=$1
shift
CC=${CC:-cc}
CXX=${CXX:-g++}
WARN="-Wall -Wextra -Wpedantic -Werror"

if [ $# -eq 0 ]; then
  # shellcheck disable=SC2046 # header paths have no spaces
  set -- $(cd "$INC" && find . -name '*.h' | sed 's|^\./||' | sort)
fi

passed=0
failed=0

# check LANG HEADER COMPILER FLAGS...
check() {
  lang=$1
  header=$2
  shift 2
  # shellcheck disable=SC2086 # WARN is a list of flags
  if out=$(printf '#include <%s>\n' "$header" | "$@" $WARN -fsyntax-only -I"$INC" -x "$lang" - 2>&1)
  then
    echo "PASS $header as $lang"
    passed=$((passed + 1))
  else
    echo "FAIL $header as $lang: $*"
    printf '%s\n' "$out" | sed 's/^/  /'
    failed=$((failed + 1))
  fi
}

have_cxx=1
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "FAIL no C++ compiler '$CXX' (install g++ or set CXX): the C++ checks cannot run"
  have_cxx=0
fi

for h in "$@"; do
  check c "$h" "$CC" -std=c11
  if [ $have_cxx -eq 1 ]; then
    check c++ "$h" "$CXX" -std=c++11
  else
    failed=$((failed + 1))
  fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -gt 0 ]
