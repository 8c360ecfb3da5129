#!/usr/bin/env bash
# test_plugin_exports.sh - lazyclusterctl exports the whole public API to the plug-ins it loads:
# every function a public header declares with LC_EXTERN is in its dynamic symbol table, defined
# (not only those the CLI itself calls), and nothing else of the library is (internal lc__ names
# stay hidden). Usage: test_plugin_exports.sh LAZYCLUSTERCTL INCLUDE_DIR
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${1:?the lazyclusterctl binary}
inc=${2:?the include directory}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -h '^LC_EXTERN' "$inc"/lazycluster.h "$inc"/lazycluster/*.h |
  grep -o '\blc_[a-z0-9_]*(' | tr -d '(' | sort -u >"$tmp/declared"
nm -D --defined-only "$ctl" | awk '$2 ~ /^[TtWwDdBbRrVv]$/ { print $3 }' | grep '^lc_' |
  sort -u >"$tmp/exported"
check "the headers declare the API (over 100 functions)" [ "$(wc -l <"$tmp/declared")" -gt 100 ]
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/missing"
sed 's/^/  not exported: /' "$tmp/missing" >&2
check "every LC_EXTERN function is exported" [ ! -s "$tmp/missing" ]
comm -13 "$tmp/declared" "$tmp/exported" >"$tmp/extra"
sed 's/^/  exported, not public: /' "$tmp/extra" >&2
check "nothing else named lc_ is exported" [ ! -s "$tmp/extra" ]
check "the entry point's helpers are among them" grep -qx lc_version_number "$tmp/exported"
checks_done
