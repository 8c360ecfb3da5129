#!/bin/sh
# run.sh TARGET FUZZDIR WORKDIR NAME [LIBFUZZER FLAGS...]: runs a fuzz target over its seed
# corpus (FUZZDIR/corpus/NAME, read only) with its dictionary (FUZZDIR/NAME.dict) when there is
# one. New inputs go to WORKDIR/NAME/corpus (emptied first: each run starts from the seeds
# alone), a crash's input to WORKDIR/NAME/. The flags say how long: -runs=N (ctest -L fuzz) or
# -max_total_time=S (the long runs of docs/security.md); a flag given again overrides the
# defaults below (the last one counts).
set -eu
target=$1 fuzzdir=$2 work=$3 name=$4
shift 4
rm -rf "$work/$name/corpus"
mkdir -p "$work/$name/corpus"
dict=
[ -f "$fuzzdir/$name.dict" ] && dict="-dict=$fuzzdir/$name.dict"
# shellcheck disable=SC2086
exec "$target" -artifact_prefix="$work/$name/" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  $dict "$@" "$work/$name/corpus" "$fuzzdir/corpus/$name"
