#!/usr/bin/env bash
# map.sh - issue 15's benchmark: many short jobs over the test hosts' slots.
#
# Part 1, command jobs: JOBS (default 1000) jobs of `true` over HOSTS (default 16) test hosts with
# SLOTS (default 4) jobs at once per host, one process per job:
#   lazyclusterctl    lazyclusterctl map -F CONF --hosts lab0,..,labN-1 --slots-per-host 4
#                     -a JOBFILE -- true      (one process, one libssh connection per host, each
#                     job one channel, its command inside the lifeline)
#   parallel          parallel --will-cite --ssh 'ssh -F CONF' -S 4/lab0,..,4/labN-1 true
#                     :::: JOBFILE            (GNU parallel: one OpenSSH `ssh` per job, each a new
#                     connection with its own key exchange; the job runs under GNU parallel's
#                     remote perl wrapper)
#   parallel -M       the same with --controlmaster: one ssh ControlMaster per host, every job a
#                     session multiplexed over it (what a careful user would run)
#   parallel c25519   the same as `parallel` with -o KexAlgorithms=curve25519-sha256, the key
#                     exchange libssh 0.10 gets (OpenSSH 9.2 picks sntrup761x25519 by default)
# Every job gets its number as its argument (`true 17`), in both tools. Same hosts, same user key,
# same ssh config, same known_hosts. Per run: wall time (bash $EPOCHREALTIME around the command),
# CPU = user+sys of the tool and every child it waited for (bash `times` before and after: for
# lazyclusterctl that is the process itself, for GNU parallel perl and all its `ssh` processes),
# and sshd CPU = the growth of utime+stime+cutime+cstime of the hosts' listening sshds (their
# per-connection children, the shells and the jobs, once reaped; 10 ms ticks). After every run the
# processes left on every host are counted (`testhosts pids I`: only the listening sshd may stay;
# waited for up to 10 s, then counted in the "left" column).
# The first run of each variant is a warm-up with a joblog (not counted): every job must appear in
# it exactly once with exit value 0, else the script stops. Before that, lazyclusterctl runs the
# jobs once as `echo {} >>/tmp/lc-map-sanity` (untimed): the files of every host's own /tmp, read
# back through testhosts exec, must hold every job number exactly once (a check that does not
# rest on our own joblog).
#
# Part 2, a pool: lazyclusterctl map --pool --worker-cmd WORKER, where WORKER is
#   while IFS= read -r l; do printf '%s\n' "$l"; done
# one worker per slot (SLOTS per host), every job one line `jK` written to a worker, its answer the
# line echoed back; on 1 host and on HOSTS hosts. Jobs per second over the whole command (connect,
# worker starts and the POOLJOBS jobs), and the marginal rate: (POOLJOBS - 64) / (wall with
# POOLJOBS jobs - wall with 64 jobs), which takes the start away. Every answer must come back
# exactly once (checked on every run).
#
# Usage: tests/bench/map.sh [--rounds N] [--jobs N] [--hosts N] [--slots N] [--pool-jobs N]
#                           [--lc PATH] [--dir DIR] [--markdown FILE] [--only PARTS]
#   --rounds N      timed rounds per variant after the warm-up (default 3), variants alternating
#   --jobs N        command jobs (default 1000); --hosts N (default 16); --slots N (default 4)
#   --pool-jobs N   jobs of the big pool runs (default 100000)
#   --only PARTS    comma-separated, of: lazyclusterctl,parallel,parallel-M,parallel-c25519,pool
#                   (default: all)
#   --lc PATH       the lazyclusterctl binary (default build/lazyclusterctl)
#   --dir DIR       testhosts directory (default /tmp/lc-map.PID); always taken down at the end
#   --markdown FILE also write the report (markdown) to FILE, and the raw runs to FILE.tsv
# Needs root (the test hosts are network namespaces) and GNU parallel (apt-get install -y
# parallel; on the hosts it runs perl, which the hosts share with this machine). Not a ctest
# test with pass/fail on timings: it fails only when a tool fails or a job is lost or doubled.
# On a shared machine run it in a network namespace of its own:
#   unshare -n sh -c 'ip link set lo up; tests/bench/map.sh'

set -uo pipefail
LC_ALL=C
export LC_ALL

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/bench/measure.sh
. "$ROOT/tests/bench/measure.sh"
TESTHOSTS=$ROOT/tests/support/testhosts
ROUNDS=3
JOBS=1000
NHOSTS=16
SLOTS=4
POOLJOBS=100000
LC=$ROOT/build/lazyclusterctl
DIR=/tmp/lc-map.$$
MARKDOWN=
ONLY=lazyclusterctl,parallel,parallel-M,parallel-c25519,pool
WORKER='while IFS= read -r l; do printf '"'"'%s\n'"'"' "$l"; done'

die() {
  printf 'map.sh: %s\n' "$*" >&2
  exit 1
}
say() { printf 'map.sh: %s\n' "$*" >&2; }
while (($#)); do
  case $1 in
  --rounds) ROUNDS=${2:?}; shift 2 ;;
  --jobs) JOBS=${2:?}; shift 2 ;;
  --hosts) NHOSTS=${2:?}; shift 2 ;;
  --slots) SLOTS=${2:?}; shift 2 ;;
  --pool-jobs) POOLJOBS=${2:?}; shift 2 ;;
  --lc) LC=${2:?}; shift 2 ;;
  --dir) DIR=${2:?}; shift 2 ;;
  --markdown) MARKDOWN=${2:?}; shift 2 ;;
  --only) ONLY=${2:?}; shift 2 ;;
  -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
for v in ROUNDS JOBS NHOSTS SLOTS POOLJOBS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v,,} wants a positive number"
done
((NHOSTS <= 240)) || die "at most 240 hosts"
((POOLJOBS > 64)) || die "--pool-jobs must be above 64 (the marginal rate subtracts a run of 64)"
want() { [[ ,$ONLY, == *,$1,* ]]; }
[[ $LC == /* ]] || LC=$PWD/$LC
if want lazyclusterctl || want pool; then
  [[ -x $LC ]] || die "$LC is not built (cmake --build build --target lazyclusterctl, or --lc PATH)"
fi
for t in parallel ssh perl; do
  command -v "$t" >/dev/null || die "$t not found (apt-get install -y parallel)"
done
((EUID == 0)) || die "needs root (tests/support/testhosts makes network namespaces)"

bench_begin map

# ---------------------------------------------------------------------------------------------
# Measurement (tests/bench/measure.sh): no forks between the two `times` snapshots but the tool.

# Processes on hosts 0..n-1 other than the listening sshd, and processes here that name WORK (ssh
# wrappers, ControlMasters, a stray GNU parallel), waited for up to 10 s to go -> LEFT.
LEFT=0
left_on_hosts() {
  local n=$1 i c tries
  for ((tries = 0; tries < 100; tries++)); do
    LEFT=$(pgrep -fc -- "$WORK/")
    for ((i = 0; i < n; i++)); do
      c=$("$TESTHOSTS" pids "$i" --dir "$DIR" | wc -l)
      LEFT=$((LEFT + c - 1))
    done
    ((LEFT == 0)) && return
    sleep 0.1
  done
  pgrep -fa -- "$WORK/" | sed 's/^/map.sh: left here: /' >&2
  for ((i = 0; i < n; i++)); do
    "$TESTHOSTS" pids "$i" --dir "$DIR" | while read -r p; do
      [[ $p == "${SSHD_PIDS[i]}" ]] || printf 'map.sh: left on lab%s: %s\n' "$i" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" >&2
    done
  done
}

# The command of a variant over n hosts: fills CMD. joblog: "" or a file (the warm-up's check).
CMD=()
JOBCMD=true
variant_cmd() {
  local name=$1 n=$2 joblog=$3 i hosts="" slogins=""
  for ((i = 0; i < n; i++)); do hosts+=",lab$i"; slogins+=",$SLOTS/lab$i"; done
  hosts=${hosts#,} slogins=${slogins#,}
  case $name in
  lazyclusterctl)
    CMD=("$LC" map -F "$CONF" --hosts "$hosts" --slots-per-host "$SLOTS" ${joblog:+--joblog "$joblog"}
      -a "$WORK/jobs.txt" -- "$JOBCMD") ;;
  parallel)
    CMD=(parallel --will-cite --ssh "$WORK/ssh" -S "$slogins" ${joblog:+--joblog "$joblog"} "$JOBCMD" :::: "$WORK/jobs.txt") ;;
  parallel-M)
    CMD=(parallel --will-cite -M --ssh "$WORK/ssh" -S "$slogins" ${joblog:+--joblog "$joblog"} "$JOBCMD" :::: "$WORK/jobs.txt") ;;
  parallel-c25519)
    CMD=(parallel --will-cite --ssh "$WORK/ssh-c25519" -S "$slogins" ${joblog:+--joblog "$joblog"} "$JOBCMD" :::: "$WORK/jobs.txt") ;;
  pool)
    CMD=("$LC" map -F "$CONF" --hosts "$hosts" --slots-per-host "$SLOTS" --pool --worker-cmd "$WORKER"
      -a "$WORK/pool.txt") ;;
  esac
}

# run NAME HOSTS ROUND [JOBFILE-FOR-POOL] -> "name hosts round wall_us cpu_ms sshd_ticks rc left jobs"
run() {
  local name=$1 n=$2 round=$3 njobs=$JOBS rc t0 t1 k0 c0 c1
  [[ $name == pool ]] && njobs=$(wc -l <"$WORK/pool.txt")
  variant_cmd "$name" "$n" ""
  sleep 0.3 # the previous run's sshd children are reaped and counted before the snapshot
  sshd_ticks; k0=$SSHD_TICKS
  times >"$WORK/t0"
  t0=${EPOCHREALTIME/./}
  "${CMD[@]}" >"$WORK/out" 2>"$WORK/err" </dev/null
  rc=$?
  t1=${EPOCHREALTIME/./}
  times >"$WORK/t1"
  left_on_hosts "$n"
  sshd_ticks
  child_ms "$WORK/t0"; c0=$CHILD_MS
  child_ms "$WORK/t1"; c1=$CHILD_MS
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$n" "$round" $((t1 - t0)) $((c1 - c0)) \
    $((SSHD_TICKS - k0)) "$rc" "$LEFT" "$njobs" >>"$RESULTS"
  if ((rc != 0)); then
    say "$name on $n hosts (round $round) exited $rc:"
    head -5 "$WORK/err" >&2
  fi
  if [[ $name == pool ]]; then pool_check "$njobs"; fi
  say "$name, $n hosts, $njobs jobs, round $round: $(((t1 - t0) / 1000)) ms, CPU $((c1 - c0)) ms, rc $rc, left $LEFT"
}

# Every pool answer jK came back exactly once.
pool_check() {
  local want=$1 got
  got=$(grep -oE '(^|[] ])j[0-9]+$' "$WORK/out" | tr -d ' ]' | sort -u | wc -l)
  local lines
  lines=$(grep -cE '(^|[] ])j[0-9]+$' "$WORK/out")
  [[ $got == "$want" && $lines == "$want" ]] ||
    die "pool: $got distinct answers in $lines lines for $want jobs; its output began: $(head -3 "$WORK/out")"
}

# The warm-up run of a variant, with a joblog: every job number exactly once, exit value 0;
# prints the hosts the jobs ran on.
warmup() {
  local name=$1 n=$2 log=$WORK/joblog.$1 bad
  rm -f "$log"
  variant_cmd "$name" "$n" "$log"
  "${CMD[@]}" >"$WORK/out" 2>"$WORK/err" </dev/null || {
    head -20 "$WORK/err" >&2
    die "$name: the warm-up run failed"
  }
  # Seq Host Starttime JobRuntime Send Receive Exitval Signal Command
  bad=$(awk -F'\t' -v n="$JOBS" 'NR > 1 { if ($7 != 0 || $8 != 0) b++; seen[$1]++ }
    END { for (i = 1; i <= n; i++) if (seen[i] != 1) b++; for (s in seen) if (s + 0 < 1 || s + 0 > n) b++; print b + 0 }' "$log")
  ((bad == 0)) || die "$name: the joblog $log does not list every job once with exit value 0 ($bad wrong)"
  left_on_hosts "$n"
  ((LEFT == 0)) || die "$name: $LEFT processes left on the hosts after the warm-up"
  say "$name warm-up: $JOBS jobs once each, on $(awk -F'\t' 'NR > 1 {print $2}' "$log" | sort -u | wc -l) hosts"
}

# lazyclusterctl's own joblog is its own word: once, untimed, every job appends its argument to a
# file in its host's /tmp (each host has its own), read back from every host: each number 1..JOBS
# exactly once, and on how many hosts.
sanity() {
  local n=$1 i bad hosts=0 rec=/tmp/lc-map-sanity
  JOBCMD="echo {} >>$rec"
  variant_cmd lazyclusterctl "$n" ""
  JOBCMD=true
  "${CMD[@]}" >"$WORK/out" 2>"$WORK/err" </dev/null || {
    head -20 "$WORK/err" >&2
    die "lazyclusterctl: the sanity run failed"
  }
  : >"$WORK/sanity"
  for ((i = 0; i < n; i++)); do
    "$TESTHOSTS" exec "$i" --dir "$DIR" -- sh -c "cat $rec 2>/dev/null; rm -f $rec" >"$WORK/sanity.$i"
    [[ -s $WORK/sanity.$i ]] && hosts=$((hosts + 1))
    cat "$WORK/sanity.$i" >>"$WORK/sanity"
  done
  bad=$(awk -v n="$JOBS" '{ seen[$1]++ } END { for (i = 1; i <= n; i++) if (seen[i] != 1) b++;
    for (s in seen) if (s + 0 < 1 || s + 0 > n) b++; print b + 0 }' "$WORK/sanity")
  ((bad == 0)) || die "lazyclusterctl: the jobs' own records on the hosts do not list every job once ($bad wrong)"
  say "lazyclusterctl sanity: the hosts' own records show $JOBS jobs once each, on $hosts hosts"
}

# ---------------------------------------------------------------------------------------------

MACHINE="$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) memory, Linux $(uname -r)"
OSREL=$(. /etc/os-release && echo "$PRETTY_NAME")
VERSIONS="$(ssh -V 2>&1 | cut -d, -f1), libssh $(dpkg-query -W -f '${Version}' libssh-4 2>/dev/null || echo '?'), $(parallel --will-cite --version | head -1), $(perl -e 'printf "perl %vd", $^V')"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$ROOT" diff --quiet HEAD -- src runtimes include 2>/dev/null || COMMIT="$COMMIT + uncommitted changes"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
say "$MACHINE, $OSREL; $VERSIONS"

seq "$JOBS" >"$WORK/jobs.txt"
HOSTS_UP=1
CONF=$("$TESTHOSTS" up "$NHOSTS" --dir "$DIR") || die "testhosts up $NHOSTS failed"
# GNU parallel's --ssh: one executable. With --ssh 'ssh -F CONF', -M forks a process per host
# that execs the words as one file name; the exec fails and the fork goes on running jobs as a
# second parallel (jobs run twice, forks left behind). A careful user has the hosts in
# ~/.ssh/config; here a two-line wrapper (dash, about 1 ms a job) gives every ssh the same -F.
printf '#!/bin/sh\nexec ssh -F %q "$@"\n' "$CONF" >"$WORK/ssh"
printf '#!/bin/sh\nexec ssh -F %q -o KexAlgorithms=curve25519-sha256 "$@"\n' "$CONF" >"$WORK/ssh-c25519"
chmod 755 "$WORK/ssh" "$WORK/ssh-c25519"
SSHD_PIDS=()
for ((i = 0; i < NHOSTS; i++)); do SSHD_PIDS+=("$(cat "$DIR/hosts/$i/sshd.pid")"); done

CVARIANTS=()
for v in lazyclusterctl parallel parallel-M parallel-c25519; do want "$v" && CVARIANTS+=("$v"); done
want lazyclusterctl && sanity "$NHOSTS"
for v in "${CVARIANTS[@]}"; do warmup "$v" "$NHOSTS"; done
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 0; k < ${#CVARIANTS[@]}; k++)); do # a rotating order: no variant always goes first
    run "${CVARIANTS[(r + k) % ${#CVARIANTS[@]}]}" "$NHOSTS" "$r"
  done
done

if want pool; then
  for n in 1 "$NHOSTS"; do
    seq -f 'j%.0f' 64 >"$WORK/pool.txt"
    run pool "$n" 0 # warm-up
    for ((r = 1; r <= ROUNDS; r++)); do
      seq -f 'j%.0f' 64 >"$WORK/pool.txt"
      run pool "$n" "$r"
      seq -f 'j%.0f' "$POOLJOBS" >"$WORK/pool.txt"
      run pool "$n" "$r"
    done
  done
fi
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
"$TESTHOSTS" down --dir "$DIR" || die "testhosts down failed"
HOSTS_UP=0

# ---------------------------------------------------------------------------------------------
# Tables

TICK=$(getconf CLK_TCK)
sel() { awk -F'\t' -v t="$1" -v n="$2" -v j="$3" '$1==t && $2==n && $3>0 && $9==j' "$RESULTS"; }
CTABLE=
if ((${#CVARIANTS[@]})); then
  pwall=$(sel parallel "$NHOSTS" "$JOBS" | cut -f4 | median)
  CTABLE=$(
    printf '| tool | median wall s | min-max wall s | vs GNU parallel wall | tool CPU ms/job | sshd-side CPU ms/job | failed runs | left (hosts + here) |\n'
    printf '|---|---|---|---|---|---|---|---|\n'
    for name in "${CVARIANTS[@]}"; do
      wall=$(sel "$name" "$NHOSTS" "$JOBS" | cut -f4 | median)
      lo=$(sel "$name" "$NHOSTS" "$JOBS" | cut -f4 | sort -n | head -1)
      hi=$(sel "$name" "$NHOSTS" "$JOBS" | cut -f4 | sort -n | tail -1)
      cpu=$(sel "$name" "$NHOSTS" "$JOBS" | awk -F'\t' -v j="$JOBS" '{print $5/j}' | median)
      sshd=$(sel "$name" "$NHOSTS" "$JOBS" | awk -F'\t' -v j="$JOBS" -v t="$TICK" '{print $6*1000/t/j}' | median)
      bad=$(sel "$name" "$NHOSTS" "$JOBS" | awk -F'\t' '$7!=0' | wc -l)
      left=$(sel "$name" "$NHOSTS" "$JOBS" | awk -F'\t' '{s+=$8} END {print s+0}')
      case $name in
      lazyclusterctl) label='`lazyclusterctl map`' ;;
      parallel) label='GNU parallel `-S 4/host`' ;;
      parallel-M) label='GNU parallel `-S 4/host -M` (ControlMaster)' ;;
      parallel-c25519) label='GNU parallel `-S 4/host`, ssh `-o KexAlgorithms=curve25519-sha256`' ;;
      esac
      ratio=-
      [[ $pwall != - && $wall != - ]] && ratio=$(printf '%.2fx' "$(bc -l <<<"$wall/$pwall")")
      printf '| %s | %.2f | %.2f-%.2f | %s | %.2f | %.2f | %s/%s | %s |\n' "$label" \
        "$(bc -l <<<"$wall/1000000")" "$(bc -l <<<"$lo/1000000")" "$(bc -l <<<"$hi/1000000")" \
        "$ratio" "$cpu" "$sshd" "$bad" "$ROUNDS" "$left"
    done
  )
fi
PTABLE=
if want pool; then
  PTABLE=$(
    printf '| pool | workers | jobs | median wall s | jobs/s (whole command) | jobs/s per host | marginal jobs/s | marginal per host | tool CPU µs/job | sshd-side CPU µs/job | failed runs | left (hosts + here) |\n'
    printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
    for n in 1 "$NHOSTS"; do
      wbig=$(sel pool "$n" "$POOLJOBS" | cut -f4 | median)
      wsmall=$(sel pool "$n" 64 | cut -f4 | median)
      cpu=$(sel pool "$n" "$POOLJOBS" | awk -F'\t' -v j="$POOLJOBS" '{print $5*1000/j}' | median)
      sshd=$(sel pool "$n" "$POOLJOBS" | awk -F'\t' -v j="$POOLJOBS" -v t="$TICK" '{print $6*1000000/t/j}' | median)
      bad=$(sel pool "$n" "$POOLJOBS" | awk -F'\t' '$7!=0' | wc -l)
      left=$(awk -F'\t' -v n="$n" '$1=="pool" && $2==n {s+=$8} END {print s+0}' "$RESULTS")
      rate=$(bc -l <<<"$POOLJOBS/($wbig/1000000)")
      # the marginal rate means nothing when the big runs were not longer (too few jobs)
      marg=- margh=-
      if (($(bc <<<"$wbig > $wsmall"))); then
        marg=$(printf '%.0f' "$(bc -l <<<"($POOLJOBS-64)/(($wbig-$wsmall)/1000000)")")
        margh=$(printf '%.0f' "$(bc -l <<<"$marg/$n")")
      fi
      printf '| %s host%s x %s slots | %s | %s | %.2f (64 jobs: %.2f) | %.0f | %.0f | %s | %s | %.0f | %.0f | %s/%s | %s |\n' \
        "$n" "$([[ $n == 1 ]] || echo s)" "$SLOTS" $((n * SLOTS)) "$POOLJOBS" \
        "$(bc -l <<<"$wbig/1000000")" "$(bc -l <<<"$wsmall/1000000")" "$rate" "$(bc -l <<<"$rate/$n")" \
        "$marg" "$margh" "$cpu" "$sshd" "$bad" "$ROUNDS" "$left"
    done
  )
fi

{
  printf 'Run %s on %s, %s; %s. Load average %s before, %s after. lazyclusterctl at %s.\n' \
    "$START" "$MACHINE" "$OSREL" "$VERSIONS" "$LOAD0" "$LOAD1" "$COMMIT"
  if [[ -n $CTABLE ]]; then
    printf '\n%s jobs of `true` over %s hosts x %s slots; %s timed rounds after one warm-up run each (with a joblog, checked), the variants alternating in a rotating order.\n\n%s\n' \
      "$JOBS" "$NHOSTS" "$SLOTS" "$ROUNDS" "$CTABLE"
  fi
  if [[ -n $PTABLE ]]; then
    printf '\nPool: one `while IFS= read -r l; do printf '"'"'%%s\\n'"'"' "$l"; done` worker per slot, %s rounds of 64 and of %s jobs after one warm-up; every answer checked.\n\n%s\n' \
      "$ROUNDS" "$POOLJOBS" "$PTABLE"
  fi
} | tee "$WORK/report.md"
if [[ -n $MARKDOWN ]]; then cp "$WORK/report.md" "$MARKDOWN" && cp "$RESULTS" "$MARKDOWN.tsv"; fi
