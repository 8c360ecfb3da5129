#!/bin/sh
# run.sh - installs a built lazycluster into a temporary prefix and builds a small consumer
# program against it, once through find_package(lazycluster) and once through pkg-config, each
# with the shared and with the static library. Prints "N passed, N failed" at its end.
#
#   run.sh CMAKE BUILD_DIR WORK_DIR [LIBDIR]
#
# CMAKE      the cmake executable
# BUILD_DIR  the lazycluster build tree (already built)
# WORK_DIR   scratch directory, emptied first; the prefix is WORK_DIR/prefix
# LIBDIR     the library directory relative to the prefix (CMAKE_INSTALL_LIBDIR; default lib)
#
# Environment: CC (default cc), CMAKE_GENERATOR (honoured by cmake), LC_CONSUMER_FLAGS (extra
# compile and link flags, e.g. the sanitizer flags the library was built with).
set -u

if [ $# -lt 3 ]; then
  echo "usage: $0 CMAKE BUILD_DIR WORK_DIR [LIBDIR]" >&2
  exit 2
fi
CMAKE=$1
BUILD_DIR=$2
WORK=$3
LIBDIR=${4:-lib}
SRC=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
FLAGS=${LC_CONSUMER_FLAGS:-}
PREFIX=$WORK/prefix
LIB=$PREFIX/$LIBDIR
LOG=$WORK/log

passed=0
failed=0
installed=0

pass() {
  echo "PASS $1"
  passed=$((passed + 1))
}

# fail NAME WHY: prints the reason and the tail of the step's log.
fail() {
  echo "FAIL $1: $2"
  if [ -s "$LOG" ]; then
    echo "---- last lines of $LOG"
    tail -n 40 "$LOG"
    echo "----"
  fi
  failed=$((failed + 1))
}

# needs NAME LIB: true when the ELF file NAME lists a DT_NEEDED entry that starts with LIB.
needs() {
  readelf -d "$1" 2>/dev/null | grep NEEDED | grep -q "\[$2"
}

rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
: >"$LOG"

# 1. cmake --install into the prefix.
echo "== install: $CMAKE --install $BUILD_DIR --prefix $PREFIX"
if "$CMAKE" --install "$BUILD_DIR" --prefix "$PREFIX" >"$LOG" 2>&1; then
  installed=1
  pass install
else
  fail install "cmake --install failed (is the build complete?)"
fi

# 2. The installed files.
echo "== layout"
: >"$LOG"
missing=
if [ $installed -eq 1 ]; then
  for f in include/lazycluster.h include/lazycluster/common.h "$LIBDIR/liblazycluster.so" \
    "$LIBDIR/liblazycluster.a" "$LIBDIR/pkgconfig/lazycluster.pc" \
    "$LIBDIR/cmake/lazycluster/lazyclusterConfig.cmake" \
    "$LIBDIR/cmake/lazycluster/lazyclusterConfigVersion.cmake" \
    "$LIBDIR/cmake/lazycluster/lazyclusterTargets.cmake" bin/lazyclusterctl; do
    [ -e "$PREFIX/$f" ] || missing="$missing $f"
  done
  soname=$(readelf -d "$LIB/liblazycluster.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  (cd "$PREFIX" && find . | sort) >"$LOG"
  if [ -n "$missing" ]; then
    fail layout "missing:$missing"
  elif [ -z "$soname" ]; then
    fail layout "$LIB/liblazycluster.so has no SONAME"
  elif [ ! -e "$LIB/$soname" ]; then
    fail layout "SONAME $soname is not installed in $LIB"
  elif [ ! -x "$PREFIX/bin/lazyclusterctl" ]; then
    fail layout "bin/lazyclusterctl is not executable"
  else
    pass "layout (SONAME $soname)"
  fi
else
  fail layout "not installed"
fi

# 3. find_package(lazycluster) from the consumer's CMakeLists.txt.
echo "== find_package"
: >"$LOG"
cbuild=$WORK/cmake-build
cmake_ok=0
if [ $installed -eq 1 ] &&
  "$CMAKE" -S "$SRC" -B "$cbuild" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >>"$LOG" 2>&1 &&
  "$CMAKE" --build "$cbuild" >>"$LOG" 2>&1; then
  found=$(sed -n 's/^lazycluster_DIR:PATH=//p' "$cbuild/CMakeCache.txt")
  if [ "$found" = "$LIB/cmake/lazycluster" ]; then
    cmake_ok=1
  else
    echo "lazycluster_DIR=$found" >>"$LOG"
    fail "find_package shared" "found lazycluster in $found, not in the prefix"
    fail "find_package static" "found lazycluster in $found, not in the prefix"
  fi
elif [ $installed -eq 0 ]; then
  fail "find_package shared" "not installed"
  fail "find_package static" "not installed"
else
  fail "find_package shared" "configure or build of tests/consumer failed"
  fail "find_package static" "configure or build of tests/consumer failed"
fi
if [ $cmake_ok -eq 1 ]; then
  if ! needs "$cbuild/consumer" liblazycluster.so; then
    fail "find_package shared" "consumer does not link liblazycluster.so"
  elif "$cbuild/consumer" >>"$LOG" 2>&1; then
    pass "find_package shared (lazycluster::lazycluster)"
  else
    fail "find_package shared" "consumer exited with an error"
  fi
  if needs "$cbuild/consumer_static" liblazycluster; then
    fail "find_package static" "consumer_static links liblazycluster.so"
  elif "$cbuild/consumer_static" >>"$LOG" 2>&1; then
    pass "find_package static (lazycluster::lazycluster_static)"
  else
    fail "find_package static" "consumer_static exited with an error"
  fi
fi

# 4. pkg-config: the way a Makefile would build against the prefix.
#      cc main.c $(pkg-config --cflags --libs lazycluster)
echo "== pkg-config"
PKG_CONFIG_PATH=$LIB/pkgconfig
export PKG_CONFIG_PATH
: >"$LOG"
pc_ok=0
if [ $installed -eq 1 ]; then
  pc_prefix=$(pkg-config --variable=prefix lazycluster 2>>"$LOG")
  pc_requires=$(pkg-config --print-requires-private lazycluster 2>>"$LOG" | tr '\n' ' ')
  {
    echo "prefix=$pc_prefix"
    echo "Requires.private: $pc_requires"
    echo "cflags: $(pkg-config --cflags lazycluster)"
    echo "libs: $(pkg-config --libs lazycluster)"
    echo "static libs: $(pkg-config --static --libs lazycluster)"
  } >>"$LOG" 2>&1
  if [ "$pc_prefix" != "$PREFIX" ]; then
    fail "pkg-config shared" "lazycluster.pc has prefix=$pc_prefix, want $PREFIX"
    fail "pkg-config static" "lazycluster.pc has prefix=$pc_prefix"
  else
    case $pc_requires in
    *libssh*libuv* | *libuv*libssh*) pc_ok=1 ;;
    *)
      fail "pkg-config shared" "Requires.private lacks libssh or libuv: $pc_requires"
      fail "pkg-config static" "Requires.private lacks libssh or libuv"
      ;;
    esac
  fi
else
  fail "pkg-config shared" "not installed"
  fail "pkg-config static" "not installed"
fi
if [ $pc_ok -eq 1 ]; then
  # shellcheck disable=SC2046,SC2086 # word splitting of the flags is intended
  if ! $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $FLAGS -o "$WORK/pc-shared" "$SRC/main.c" \
    $(pkg-config --cflags --libs lazycluster) >>"$LOG" 2>&1; then
    fail "pkg-config shared" "compile or link failed"
  elif ! needs "$WORK/pc-shared" liblazycluster.so; then
    fail "pkg-config shared" "pc-shared does not link liblazycluster.so"
  elif LD_LIBRARY_PATH=$LIB "$WORK/pc-shared" >>"$LOG" 2>&1; then
    pass "pkg-config shared (pkg-config --cflags --libs)"
  else
    fail "pkg-config shared" "pc-shared exited with an error"
  fi

  # The static library: the flags of pkg-config --static, with -llazycluster replaced by the
  # archive so that the linker cannot take the shared library that sits next to it.
  static_libs=
  for w in $(pkg-config --static --libs lazycluster); do
    [ "$w" = -llazycluster ] && w=-l:liblazycluster.a
    static_libs="$static_libs $w"
  done
  echo "static link: $static_libs" >>"$LOG"
  # shellcheck disable=SC2046,SC2086
  if ! $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $FLAGS -o "$WORK/pc-static" "$SRC/main.c" \
    $(pkg-config --cflags lazycluster) $static_libs >>"$LOG" 2>&1; then
    fail "pkg-config static" "compile or link with pkg-config --static --libs failed"
  elif needs "$WORK/pc-static" liblazycluster; then
    fail "pkg-config static" "pc-static links liblazycluster.so"
  elif env -u LD_LIBRARY_PATH "$WORK/pc-static" >>"$LOG" 2>&1; then
    pass "pkg-config static (pkg-config --static --libs, liblazycluster.a)"
  else
    fail "pkg-config static" "pc-static exited with an error"
  fi
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
