# shellcheck shell=bash disable=SC2034 # SSHD_TICKS, CHILD_MS: outputs the benchmark reads
# measure.sh - what the shell benchmarks that time a tool over many test hosts share (sourced by
# tests/bench/fanout.sh and tests/bench/map.sh; bash):
#
#   bench_begin NAME   WORK (a fresh directory /tmp/lc-NAME-work.XXXXXX), RESULTS (an empty
#                      $WORK/results.tsv), HOSTS_UP=0, and an EXIT trap that takes the test hosts
#                      of $DIR down when HOSTS_UP is 1 and removes WORK (INT, TERM: exit 130, 143)
#   sshd_ticks         SSHD_TICKS: utime+stime+cutime+cstime of the sshds in SSHD_PIDS and the
#                      PID namespaces' reapers in INIT_PIDS (--pid-ns), in ticks
#   child_ms FILE      CHILD_MS: user+sys of the children this shell waited for, in ms, from the
#                      output of `times` saved in FILE (its second line)
#   ms_of XmY.ZZZs     REPLY: that duration in ms
#   median             the median of the numbers on stdin, "%.3f", or "-" when there are none
#
# No forks between two `times` snapshots other than the tool measured: bash's `times` reports
# every waited-for child of this shell, so command substitutions must stay out of that stretch.
# Needs die, TESTHOSTS and DIR from the benchmark.

bench_begin() {
  WORK=$(mktemp -d "/tmp/lc-$1-work.XXXXXX") || die "mktemp failed"
  RESULTS=$WORK/results.tsv
  : >"$RESULTS"
  HOSTS_UP=0
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

bench_cleanup() {
  if ((HOSTS_UP)); then
    "$TESTHOSTS" down --dir "$DIR" >/dev/null 2>&1 || "$TESTHOSTS" down --dir "$DIR" || true
  fi
  rm -rf -- "$WORK"
}

SSHD_PIDS=()
INIT_PIDS=() # with a PID namespace per host: its pid 1, which reaps what sshd left (an agent)
SSHD_TICKS=0
sshd_ticks() {
  local p f s=0
  for p in "${SSHD_PIDS[@]}" "${INIT_PIDS[@]}"; do
    if read -r -a f <"/proc/$p/stat" 2>/dev/null; then
      s=$((s + f[13] + f[14] + f[15] + f[16]))
    fi
  done
  SSHD_TICKS=$s
}

CHILD_MS=0
child_ms() {
  local u s a
  { read -r _; read -r u s; } <"$1"
  ms_of "$u"
  a=$REPLY
  ms_of "$s"
  CHILD_MS=$((a + REPLY))
}

ms_of() {
  local m=${1%%m*} rest=${1#*m}
  rest=${rest%s}
  local sec=${rest%.*} frac=${rest#*.}
  frac=${frac}000
  frac=${frac:0:3}
  REPLY=$((10#$m * 60000 + 10#$sec * 1000 + 10#$frac))
}

# (printf, not print: awk prints a non-whole 1015040.5 as 1.01504e+06, which bc reads as 0)
median() {
  sort -n | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} if (NR%2) m = v[(NR+1)/2]; else m = (v[NR/2]+v[NR/2+1])/2; printf "%.3f\n", m}'
}
