#!/usr/bin/env bash
# scale.sh - issue 16's scale benchmark: what one lazyclusterctl costs per host at 64 and 256 test
# hosts (tests/support/testhosts: one sshd per network namespace, all on this machine), per phase:
#
#   exec    lazyclusterctl exec --fanout H -- true on every host; peers on the same hosts:
#           pdsh -R ssh -f H true (OpenSSH's ssh per host, curve25519 as libssh negotiates) and
#           OpenSSH `ssh labI true` in a serial loop (one connection at a time)
#   light   lazyclusterctl start, the command type, 4 workers per host (`lazyclusterctl serve` on
#           its port) with the mesh (expose=mesh: every worker's port on every host, W x H remote
#           listens), the master (serve) here; timed until its "ready:" line, then stopped
#   dask    lazyclusterctl start --type dask, 1 worker per host (Debian's python3-distributed),
#           scheduler here, mutual TLS; until "ready:", then stopped. Peer: Dask's SSHCluster
#           (tests/bench/sshcluster.py) at up to 64 hosts, not in --quick
#
# Measured per run: wall (until "ready:" for the starts; their stop is a row of its own), our
# CPU (user+sys of lazyclusterctl alone: /proc/PID/stat at "ready:" for a start; for exec and the
# peers /usr/bin/time, which counts the tool and the children it waited for), our RSS (VmHWM at
# "ready:", /usr/bin/time's max RSS otherwise), and the hosts' CPU: the change in
# utime+stime+cutime+cstime of the H listening sshds (measure.sh's sshd_ticks: sshd and what it
# ran and reaped, the workers included, in 10 ms ticks), and with --pid-ns of each host's pid 1,
# which reaps what sshd's session left running at its end (the host's agent, runtimes/ssh/agent.c,
# and the workers it reaped). Per host = divided by H. Our RSS per host
# is given two ways: the whole peak / H, and the marginal (RSS at 256 - RSS at 64) / 192.
# Targets (issue 16): our CPU <= 5 ms per host, our RSS <= 200 KB per host, 256 hosts within 4.5x
# of 64 (wall); each is printed PASS or MISS.
#
# After every start and stop it counts what is left on every host against what was there after
# `testhosts up` (processes, listens, /tmp entries, ~/.cache/lazycluster entries) and here (our
# ports); anything left makes the run fail loudly (exit 1) after the table.
#
# Usage: tests/bench/scale.sh [--hosts "64 256"] [--quick] [--rounds N] [--lc PATH]
#                             [--dir DIR] [--markdown FILE] [--no-dask] [--no-peers] [--pid-ns]
#   --hosts LIST     host counts, in order (default "64 256"; at most 1000); the ratio rows need
#                    two counts, the last against the first
#   --quick          one round, no SSHCluster, no serial ssh loop (e.g. --quick --hosts 64)
#   --rounds N       rounds of the exec rows (default 3) and of the light start (default 2 up
#                    to 64 hosts, 1 above); the Dask start runs once per host count
#   --lc PATH        lazyclusterctl (default build/lazyclusterctl; not under /tmp: the hosts run
#                    `lazyclusterctl serve` by that path and have their own /tmp)
#   --dir DIR        testhosts directory (default /tmp/lc-scale.PID), taken down at the end
#   --markdown FILE  also write the report (markdown) to FILE
#   --no-dask        skip the Dask rows; --no-peers: skip pdsh, ssh and SSHCluster
#   --pid-ns         give every test host its own PID namespace (testhosts up --pid-ns): its own
#                    process table, as separate machines have; without it whatever reads every
#                    process on a host (a lifeline's sweep) reads all hosts' processes
# Needs root. It runs itself in a private network namespace (unshare -n) so that its hosts and
# ports meet no one else's; everything it started is stopped. Dask's workers take ~100 MB each:
# a Dask start whose workers do not fit in MemAvailable is not run, and the table says so.

set -uo pipefail
LC_ALL=C
export LC_ALL

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
SELF=$ROOT/tests/bench/scale.sh
die() {
  printf 'scale.sh: %s\n' "$*" >&2
  exit 1
}
say() { printf 'scale.sh: %s\n' "$*" >&2; }

((EUID == 0)) || die "needs root (tests/support/testhosts makes network namespaces)"
if [[ -z ${LC_SCALE_PRIVATE_NET:-} ]]; then
  # A network namespace of our own: our test hosts' addresses and every port here are private.
  # shellcheck disable=SC2016 # the inner shell expands them
  exec unshare -n env LC_SCALE_PRIVATE_NET=1 bash -c 'ip link set lo up && exec "$0" "$@"' "$SELF" "$@"
fi

# shellcheck source=tests/bench/measure.sh
. "$ROOT/tests/bench/measure.sh"
TESTHOSTS=$ROOT/tests/support/testhosts
HOSTCOUNTS="64 256"
QUICK=0
ROUNDS=
LC=$ROOT/build/lazyclusterctl
DIR=/tmp/lc-scale.$$
MARKDOWN=
DASK=1
PEERS=1
PIDNS=()
while (($#)); do
  case $1 in
  --hosts) HOSTCOUNTS=${2:?}; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --rounds) ROUNDS=${2:?}; shift 2 ;;
  --lc) LC=${2:?}; shift 2 ;;
  --dir) DIR=${2:?}; shift 2 ;;
  --markdown) MARKDOWN=${2:?}; shift 2 ;;
  --no-dask) DASK=0; shift ;;
  --no-peers) PEERS=0; shift ;;
  --pid-ns) PIDNS=(--pid-ns); shift ;;
  -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$SELF"; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
for n in $HOSTCOUNTS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] && ((n <= 1000)) || die "--hosts: bad host count '$n' (1..1000)"
done
if [[ -n $ROUNDS ]]; then
  [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
  EXEC_ROUNDS=$ROUNDS LIGHT_ROUNDS=$ROUNDS
elif ((QUICK)); then
  EXEC_ROUNDS=1 LIGHT_ROUNDS=1
else
  EXEC_ROUNDS=3 LIGHT_ROUNDS=2
fi
[[ $LC == /* ]] || LC=$PWD/$LC
[[ -x $LC ]] || die "$LC is not built (cmake --build build --target lazyclusterctl, or --lc PATH)"
case $LC in /tmp/*) die "$LC is under /tmp, which the test hosts do not see (they have their own)" ;; esac
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install -y time)"
if ((PEERS)); then command -v pdsh >/dev/null || die "pdsh not found (apt-get install -y pdsh; or --no-peers)"; fi
PY=
if ((DASK)); then
  # The interpreter Dask is installed for (Debian's python3-distributed): our dask type runs
  # `python3`, so that one comes first in PATH.
  for PY in python3 /usr/bin/python3; do "$PY" -c 'import distributed' 2>/dev/null && break; done
  "$PY" -W ignore -c 'import distributed' 2>/dev/null || die "needs python3-distributed (apt-get install -y python3-distributed; or --no-dask)"
  PY=$(command -v "$PY")
  PATH=$(dirname -- "$PY"):$PATH
  export PATH
fi

bench_begin scale
DIR=$(realpath -m -- "$DIR")
TICK_MS=$((1000 / $(getconf CLK_TCK)))
KEX=curve25519-sha256
FAIL=0 # something was left behind or a run failed

# ---------------------------------------------------------------------------------------------
# What is on the hosts (and here)

NETNS=() # per host, from hosts.txt
host_state() { # I -> sorted lines "KIND what" of host I
  local i=$1 p lp c
  lp=${SSHD_PIDS[$i]}
  for p in $(ip netns pids "${NETNS[$i]}" 2>/dev/null); do
    [[ $p == "$lp" ]] && continue
    c=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | cut -c1-120)
    [[ -z $c ]] || printf 'proc %s\n' "$c" # (empty: it ended meanwhile)
  done
  nsenter --net="/run/netns/${NETNS[$i]}" --mount="$DIR/hosts/$i/mnt" -- sh -c \
    'ss -ltnH | awk "{ print \"listen \" \$4 }"; find /tmp -mindepth 1 -maxdepth 2 | sed "s/^/tmp /"
     ls -A /root/.cache/lazycluster 2>/dev/null | sed "s/^/cache /"' 2>/dev/null
} # (a process's line is its command: pids change, the baseline holds none but strays)

snapshot() { # FILE: every host's state, "labI KIND what" lines
  local i
  for ((i = 0; i < H; i++)); do host_state "$i" | sed "s/^/lab$i /"; done | sort >"$1"
}

# Waits (20 s: the lifelines end what the sessions leave) until the hosts hold what they held
# after `up`; names what is left and marks the run failed. With PEER set, the files a peer leaves
# in the hosts' /tmp (SSHCluster: /tmp/dask-worker-space) are noted and removed instead.
LEFT_REPORT=
FAILED_REPORT=
check_left() { # WHAT [PEER]
  local k i f
  if [[ -n ${2:-} ]]; then
    for ((k = 0; k < 40; k++)); do
      snapshot "$WORK/now"
      comm -13 "$WORK/base" "$WORK/now" | grep -v '^lab[0-9]* tmp ' >"$WORK/left"
      [[ -s $WORK/left ]] || break
      sleep 0.5
    done
    comm -13 "$WORK/base" "$WORK/now" | awk '$2 == "tmp" && $3 ~ /^\/tmp\/[^\/]+$/ { print $1, $3 }' >"$WORK/peerfiles"
    if [[ -s $WORK/peerfiles ]]; then
      NOTES+="- $2 left on $(cut -d' ' -f1 "$WORK/peerfiles" | sort -u | wc -l) of $H hosts: $(cut -d' ' -f2 "$WORK/peerfiles" | sort -u | tr '\n' ' ')(removed by scale.sh; not counted as ours)."$'\n'
      while read -r i f; do
        i=${i#lab}
        nsenter --net="/run/netns/${NETNS[$i]}" --mount="$DIR/hosts/$i/mnt" -- rm -rf -- "$f"
      done <"$WORK/peerfiles"
    fi
  fi
  for ((k = 0; k < 40; k++)); do
    snapshot "$WORK/now"
    comm -13 "$WORK/base" "$WORK/now" >"$WORK/left"
    [[ -s $WORK/left ]] || break
    sleep 0.5
  done
  # here: the cluster's ports
  ss -ltnH | awk '{ print "here listen " $4 }' | grep -v ':22$' >>"$WORK/left" || true
  if [[ -s $WORK/left ]]; then
    FAIL=1
    say "LEFT after $1 on $H hosts ($(wc -l <"$WORK/left") items):"
    head -20 "$WORK/left" | sed 's/^/    /' >&2
    LEFT_REPORT+="after $1 on $H hosts: $(wc -l <"$WORK/left") left, e.g. $(head -3 "$WORK/left" | tr '\n' ';')"$'\n'
  fi
}

# ---------------------------------------------------------------------------------------------
# Runs. Each appends "H PHASE TOOL ROUND wall_ms cpu_ms rss_kb sshd_ticks rc" to RESULTS.

record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"; }

# A command under /usr/bin/time: CPU of it and its waited-for children, their max RSS.
timed() { # PHASE TOOL ROUND CMD...
  local phase=$1 tool=$2 round=$3 rc t0 t1 k0 m c0
  shift 3
  sleep 0.3 # the previous run's sshd children are reaped and counted before the snapshot
  sshd_ticks; k0=$SSHD_TICKS
  # CPU from bash's `times` (1 ms; /usr/bin/time's own ~1 ms included), RSS from /usr/bin/time
  times >"$WORK/t0"
  t0=${EPOCHREALTIME/./}
  /usr/bin/time -f '%M' -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
  rc=$?
  t1=${EPOCHREALTIME/./}
  times >"$WORK/t1"
  sleep 0.3
  ((QUIET)) && hosts_quiet 60
  sshd_ticks
  m=$(tail -n 1 "$WORK/time")
  [[ $m =~ ^[0-9]+$ ]] || { m=0 rc=99; } # time's line was not there
  child_ms "$WORK/t0"; c0=$CHILD_MS
  child_ms "$WORK/t1"
  record "$H" "$phase" "$tool" "$round" $(((t1 - t0) / 1000)) $((CHILD_MS - c0)) "$m" $((SSHD_TICKS - k0)) "$rc"
  if ((rc != 0)); then
    FAIL=1
    say "$tool ($phase) on $H hosts, round $round: exit $rc: $(head -c 600 "$WORK/err")"
  fi
}

# Waits (at most LIMIT s) until no host runs anything but what it ran after `up` (its listening
# sshd; with --pid-ns also its pid 1 and the processes that entered the namespace): a peer that
# returns before its remote processes are gone would otherwise have them missing from the sshd
# ticks.
QUIET=0
hosts_quiet() { # LIMIT_S
  local k i busy
  for ((k = 0; k < $1 * 5; k++)); do
    busy=0
    for ((i = 0; i < H; i++)); do
      [[ $(ip netns pids "${NETNS[$i]}" 2>/dev/null) == "${BASE_PIDS[$i]}" ]] || { busy=1; break; }
    done
    ((busy)) || return 0
    sleep 0.2
  done
  say "hosts still busy $1 s after the run (lab$i)"
}

# At "ready:": lazyclusterctl's descriptors and threads, the hosts' memory (VmRSS of everything
# in their network namespaces, sshd's included, / H; with --pid-ns not the namespace's pid 1 and
# the processes that entered it at `up`, which a real host does not have), one worker's context on lab0 (its
# cluster.json, the largest environment of a process there): a line for the notes.
side_measure() { # PHASE PID WORKERS
  local fds thr rss=0 p json env=0 e k v
  fds=$(find "/proc/$2/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  thr=$(find "/proc/$2/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  for ((i = 0; i < H; i++)); do
    for p in $(ip netns pids "${NETNS[$i]}" 2>/dev/null); do
      [[ $p != "${SSHD_PIDS[$i]}" && $'\n'${BASE_PIDS[$i]}$'\n' == *$'\n'$p$'\n'* ]] && continue
      # builtins only: a fork per process takes minutes on hosts loaded by 64 Dask workers
      while read -r k v _; do
        [[ $k == VmRSS: ]] && { rss=$((rss + v)); break; }
      done 2>/dev/null <"/proc/$p/status"
      if ((i == 0)); then
        e=$({ wc -c <"/proc/$p/environ"; } 2>/dev/null)
        ((${e:-0} > env)) && env=$e
      fi
    done
  done
  json=$(find "$DIR/hosts/0/home/.cache/lazycluster" -name cluster.json -printf '%s\n' 2>/dev/null | sort -n | tail -1)
  NOTES+="- at \"ready:\" of $1 on $H hosts ($3 workers): lazyclusterctl holds $fds descriptors, $thr threads; the hosts' processes $((rss / H)) KB RSS per host; on lab0 a worker's cluster.json is ${json:-?} bytes, the largest environment of a process ${env} bytes."$'\n'
}

# lazyclusterctl's own CPU (ms, in CPU_MS) and peak RSS (KB, in HWM; kept when the process has
# no memory any more), from /proc: its children (the local master, Dask's scheduler) not counted.
CPU_MS=0 HWM=0
proc_usage() { # PID
  local -a st f
  # (a process that is exiting may show half a file: no field is taken for granted)
  if { read -r -a st <"/proc/$1/stat"; } 2>/dev/null && [[ ${st[14]:-} =~ ^[0-9]+$ ]]; then
    CPU_MS=$(((st[13] + st[14]) * TICK_MS))
  fi
  if [[ -r /proc/$1/status ]]; then
    while read -r -a f; do
      [[ ${f[0]:-} == VmHWM: && ${f[1]:-} =~ ^[0-9]+$ ]] && HWM=${f[1]}
    done < <(cat "/proc/$1/status" 2>/dev/null)
  fi
}

# A cluster start in the foreground until "ready:", then Ctrl-C (SIGINT) and its stop.
# Rows: PHASE (start: wall until ready, CPU and VmHWM of lazyclusterctl then, sshd ticks of the
# whole start and stop) and PHASE-stop (wall of the stop from its SIGINT, lazyclusterctl's CPU
# during it, its last value read every 20 ms until it exits).
start_stop() { # PHASE ROUND LIMIT_S WORKERS START-ARGS...
  local phase=$1 round=$2 limit=$3 workers=$4 pid line ready=0 t0 t1 ts t2 k0 cpu_ready cpu_stop rss
  local rc cat_pid s
  shift 4
  sleep 0.3
  sshd_ticks; k0=$SSHD_TICKS
  rm -f "$WORK/fifo"
  mkfifo "$WORK/fifo"
  t0=${EPOCHREALTIME/./}
  CPU_MS=0 HWM=0
  "$LC" start "$@" >"$WORK/fifo" 2>"$WORK/start.err" </dev/null &
  pid=$!
  exec 3<"$WORK/fifo"
  # its stdout as it comes: "ready:" once every worker is ready (or EOF when it failed)
  local why="it ended before \"ready:\""
  while :; do
    if ! IFS= read -r -t "$limit" line <&3; then
      (($? > 128)) && why="no \"ready:\" within $limit s"
      break
    fi
    [[ $line == ready:* ]] && { ready=1; break; }
  done
  t1=${EPOCHREALTIME/./}
  proc_usage "$pid"
  cpu_ready=$CPU_MS rss=$HWM
  ((ready && round == 1)) && side_measure "$phase" "$pid" "$workers"
  # the stop's row begins here, not at "ready:" (side_measure's time is no one's)
  proc_usage "$pid"
  cpu_stop=$CPU_MS
  ts=${EPOCHREALTIME/./}
  kill -INT "$pid" 2>/dev/null
  cat <&3 >/dev/null & # until it exits (it closes stdout)
  cat_pid=$!
  exec 3<&-
  # its usage until it is a zombie (not reaped yet: /proc still has its times)
  while s=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) && [[ $s != Z ]]; do
    proc_usage "$pid"
    sleep 0.02
  done
  proc_usage "$pid"
  wait "$cat_pid"
  wait "$pid"
  rc=$?
  t2=${EPOCHREALTIME/./}
  sleep 0.3
  sshd_ticks
  if ((!ready)); then
    FAIL=1
    say "$phase start on $H hosts, round $round: $why (exit $rc after $(((t1 - t0) / 1000)) ms): $(tail -n 5 "$WORK/start.err" | tr '\n' ' ')"
    FAILED_REPORT+="- $phase start on $H hosts, round $round: $why, after $(((t1 - t0) / 1000000)) s (exit $rc); its last words: $(tail -n 2 "$WORK/start.err" | tr '\n' ' ')"$'\n'
    record "$H" "$phase" lazyclusterctl "$round" $(((t1 - t0) / 1000)) "$cpu_ready" "$rss" $((SSHD_TICKS - k0)) 1
    return 1
  fi
  # rc of a stopped foreground start: 130 (SIGINT) is its normal end
  ((rc == 0 || rc == 130)) || { FAIL=1; say "$phase on $H hosts: stop exited $rc: $(tail -n 3 "$WORK/start.err" | tr '\n' ' ')"; }
  record "$H" "$phase" lazyclusterctl "$round" $(((t1 - t0) / 1000)) "$cpu_ready" "$rss" $((SSHD_TICKS - k0)) 0
  record "$H" "$phase-stop" lazyclusterctl "$round" $(((t2 - ts) / 1000)) $((CPU_MS - cpu_stop)) "$HWM" 0 "$rc"
}

sshcluster() { # ROUND
  QUIET=1 timed dask SSHCluster "$1" timeout 600 "$PY" -W ignore "$ROOT/tests/bench/sshcluster.py" "$DIR" "$H"
}

# ---------------------------------------------------------------------------------------------

MACHINE="$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
VERSIONS="$(ssh -V 2>&1 | cut -d, -f1), libssh $(dpkg-query -W -f '${Version}' libssh-4 2>/dev/null || echo '?'), $(pdsh -V 2>&1 | head -1)"
((DASK)) && VERSIONS+=", Dask $("$PY" -c 'import distributed; print(distributed.__version__)' 2>/dev/null)"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$ROOT" diff --quiet HEAD -- src runtimes include launchers 2>/dev/null || COMMIT="$COMMIT + uncommitted changes"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
NOFILE="soft $(ulimit -Sn), hard $(ulimit -Hn)"
say "$MACHINE; $VERSIONS; lazyclusterctl $COMMIT; load $LOAD0; RLIMIT_NOFILE $NOFILE"
NOTES=

for H in $HOSTCOUNTS; do
  say "$H hosts: starting them"
  HOSTS_UP=1
  t0=${EPOCHREALTIME/./}
  CONF=$("$TESTHOSTS" up "$H" --dir "$DIR" "${PIDNS[@]}") || die "testhosts up $H failed"
  say "$H hosts up in $(((${EPOCHREALTIME/./} - t0) / 1000)) ms"
  SSHD_PIDS=()
  INIT_PIDS=()
  NETNS=()
  while read -r _ _ ns; do NETNS+=("$ns"); done <"$DIR/hosts.txt"
  BASE_PIDS=()
  for ((i = 0; i < H; i++)); do
    SSHD_PIDS+=("$("$TESTHOSTS" sshd-pid "$i" --dir "$DIR")")
    ((${#PIDNS[@]} == 0)) || INIT_PIDS+=("$(<"$DIR/hosts/$i/init.pid")")
    BASE_PIDS+=("$(ip netns pids "${NETNS[$i]}" 2>/dev/null)")
  done
  LIST="lab[0-$((H - 1))]"
  snapshot "$WORK/base"

  # exec -- true
  "$LC" exec -F "$CONF" --hosts "$LIST" --fanout "$H" -- true >/dev/null 2>&1 || true # warm-up
  for ((r = 1; r <= EXEC_ROUNDS; r++)); do
    timed exec lazyclusterctl "$r" "$LC" exec -F "$CONF" --hosts "$LIST" --fanout "$H" -- true
    if ((PEERS)); then
      PDSH_SSH_ARGS_APPEND="-F $CONF -o KexAlgorithms=$KEX" timed exec "pdsh -R ssh" "$r" \
        pdsh -R ssh -S -f "$H" -w "$LIST" true
      # shellcheck disable=SC2016 # the loop's variables are its own
      ((QUICK)) || timed exec "ssh loop" "$r" bash -c \
        'for ((i = 0; i < $1; i++)); do ssh -F "$2" -o BatchMode=yes -o KexAlgorithms="$3" "lab$i" true || exit 1; done' \
        ssh_loop "$H" "$CONF" "$KEX"
    fi
    say "$H hosts: exec round $r of $EXEC_ROUNDS done"
  done
  check_left exec

  # the light start: 4 workers per host, the mesh
  W=$((4 * H))
  lr=$LIGHT_ROUNDS
  [[ -z $ROUNDS ]] && ((H > 64)) && lr=1 # (the mesh of 1024 workers on 256 hosts takes minutes)
  for ((r = 1; r <= lr; r++)); do
    start_stop light "$r" 900 "$W" -F "$CONF" --hosts "$LIST" --fanout "$H" --workers "$W" \
      --type-arg expose=mesh --master-port 60999 --fixed-master-port --ports "61000-$((61000 + W + 99))" \
      --timeout 900 --name "scale-light-$H-$r" \
      --master-cmd "exec '$LC' serve {master_port} master" \
      --worker-cmd "exec '$LC' serve {worker_port} w{worker_index}"
    check_left "light start $r"
    say "$H hosts: light start round $r of $lr done"
  done

  # Dask: one worker per host
  if ((DASK)); then
    avail=$(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo)
    if ((avail < H * 150 + 1024)); then
      NOTES+="- Dask on $H hosts not run: $H workers of ~100-150 MB each do not fit in the $avail MiB available here."$'\n'
      say "Dask on $H hosts not run (MemAvailable $avail MiB)"
    else
      start_stop dask 1 1200 "$H" -F "$CONF" --hosts "$LIST" --fanout "$H" --type dask --workers "$H" \
        --master-port 62900 --ports 63000-$((63000 + 2 * H + 99)) --timeout 1200 --master-timeout 300 \
        --name "scale-dask-$H"
      check_left "dask start"
      if ((PEERS && !QUICK && H <= 64)); then
        sshcluster 1
        check_left SSHCluster "Dask's SSHCluster"
      elif ((PEERS)); then
        NOTES+="- Dask's SSHCluster on $H hosts not run ($( ((QUICK)) && echo "--quick" || echo "only up to 64 hosts: its scheduler and $H workers run at once on these 2 CPUs, over 10 minutes"))."$'\n'
      fi
    fi
    say "$H hosts: Dask done"
  fi

  "$TESTHOSTS" down --dir "$DIR" || die "testhosts down failed"
  HOSTS_UP=0 # (read by bench_cleanup)
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------------
# Tables

sel() { awk -F'\t' -v h="$1" -v p="$2" -v t="$3" '$1 == h && $2 == p && $3 == t && $9 == 0' "$RESULTS"; }
col() { sel "$1" "$2" "$3" | cut -f"$4" | median; } # H PHASE TOOL FIELD -> median
per() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (a == "-" || b == "" || b == 0) print "-"; else printf f "\n", a / b }'; }
verdict() { awk -v a="$1" -v lim="$2" 'BEGIN { if (a == "-") print "-"; else print (a + 0 <= lim + 0 ? "PASS" : "MISS") }'; }
PHASES=(exec light light-stop dask dask-stop)
TOOLS=(lazyclusterctl "pdsh -R ssh" "ssh loop" SSHCluster)
FIRST=${HOSTCOUNTS%% *}
LAST=${HOSTCOUNTS##* }

TABLE=$(
  printf '| hosts | phase | tool | runs ok | wall s | CPU ms/host | RSS KB/host (peak/H) | peak RSS MB | hosts CPU ms/host (sshd and what it ran) |\n'
  printf '|---|---|---|---|---|---|---|---|---|\n'
  for H in $HOSTCOUNTS; do
    for p in "${PHASES[@]}"; do
      for t in "${TOOLS[@]}"; do
        n_all=$(awk -F'\t' -v h="$H" -v p="$p" -v t="$t" '$1 == h && $2 == p && $3 == t' "$RESULTS" | wc -l)
        ((n_all)) || continue
        n_ok=$(sel "$H" "$p" "$t" | wc -l)
        wall=$(col "$H" "$p" "$t" 5)
        cpu=$(col "$H" "$p" "$t" 6)
        rss=$(col "$H" "$p" "$t" 7)
        tk=$(col "$H" "$p" "$t" 8)
        if [[ $p == *-stop ]]; then rsscol="-" rssmb="-" hostcol="(in the start's)"; else
          rsscol=$(per "$rss" "$H" %.0f) rssmb=$(per "$rss" 1024 %.1f)
          hostcol=$(per "$(per "$tk" 1 "%.0f" | awk -v m="$TICK_MS" '{ print ($1 == "-") ? "-" : $1 * m }')" "$H" %.1f)
        fi
        printf '| %s | %s | %s | %s/%s | %s | %s | %s | %s | %s |\n' "$H" "$p" "$t" "$n_ok" "$n_all" \
          "$(per "$wall" 1000 %.2f)" "$(per "$cpu" "$H" %.2f)" "$rsscol" "$rssmb" "$hostcol"
      done
    done
  done
)

TARGETS=$(
  printf '| target (issue 16) | phase | measured | verdict |\n|---|---|---|---|\n'
  for H in $HOSTCOUNTS; do
    for p in exec light dask; do
      n_all=$(awk -F'\t' -v h="$H" -v p="$p" '$1 == h && $2 == p && $3 == "lazyclusterctl"' "$RESULTS" | wc -l)
      cpu=$(col "$H" "$p" lazyclusterctl 6)
      if [[ $cpu == - ]]; then
        ((n_all)) && printf '| every target | %s, %s hosts | no run succeeded (0/%s) | MISS |\n' "$p" "$H" "$n_all"
        continue
      fi
      c=$(per "$cpu" "$H" %.2f)
      printf '| our CPU <= 5 ms/host | %s, %s hosts | %s ms/host | %s |\n' "$p" "$H" "$c" "$(verdict "$c" 5)"
      rss=$(col "$H" "$p" lazyclusterctl 7)
      c=$(per "$rss" "$H" %.0f)
      printf '| our RSS <= 200 KB/host (whole peak / H) | %s, %s hosts | %s KB/host | %s |\n' "$p" "$H" "$c" "$(verdict "$c" 200)"
    done
  done
  if [[ $FIRST != "$LAST" ]]; then
    for p in exec light dask; do
      a=$(col "$FIRST" "$p" lazyclusterctl 7)
      b=$(col "$LAST" "$p" lazyclusterctl 7)
      if [[ $a != - && $b != - ]]; then
        c=$(awk -v a="$a" -v b="$b" -v n=$((LAST - FIRST)) 'BEGIN { printf "%.0f", (b - a) / n }')
        printf '| our RSS <= 200 KB/host (marginal: (peak at %s - peak at %s) / %s) | %s | %s KB/host | %s |\n' \
          "$LAST" "$FIRST" $((LAST - FIRST)) "$p" "$c" "$(verdict "$c" 200)"
      fi
      a=$(col "$FIRST" "$p" lazyclusterctl 5)
      b=$(col "$LAST" "$p" lazyclusterctl 5)
      lim=$(awk -v a="$FIRST" -v b="$LAST" 'BEGIN { printf "%.2f", 4.5 * b / a / 4 }')
      if [[ $a != - && $b != - ]]; then
        c=$(per "$b" "$a" %.2f)
        printf '| %s hosts within %sx of %s (wall) | %s | %sx | %s |\n' "$LAST" "$lim" "$FIRST" "$p" "$c" "$(verdict "$c" "$lim")"
      elif [[ $a != - ]] && grep -q "^$LAST	$p	lazyclusterctl	" "$RESULTS"; then
        printf '| %s hosts within %sx of %s (wall) | %s | %s hosts: no run succeeded | MISS |\n' "$LAST" "$lim" "$FIRST" "$p" "$LAST"
      fi
    done
  fi
)

RATIOS=$(
  if [[ $FIRST != "$LAST" ]]; then
    printf '| phase | tool | wall %s/%s | CPU %s/%s | peak RSS %s/%s | hosts CPU %s/%s |\n|---|---|---|---|---|---|\n' \
      "$LAST" "$FIRST" "$LAST" "$FIRST" "$LAST" "$FIRST" "$LAST" "$FIRST"
    for p in "${PHASES[@]}"; do
      for t in "${TOOLS[@]}"; do
        a=$(col "$FIRST" "$p" "$t" 5)
        b=$(col "$LAST" "$p" "$t" 5)
        [[ $a != - && $b != - ]] || continue
        printf '| %s | %s | %sx | %sx | %sx | %sx |\n' "$p" "$t" "$(per "$b" "$a")" \
          "$(per "$(col "$LAST" "$p" "$t" 6)" "$(col "$FIRST" "$p" "$t" 6)")" \
          "$(per "$(col "$LAST" "$p" "$t" 7)" "$(col "$FIRST" "$p" "$t" 7)")" \
          "$(per "$(col "$LAST" "$p" "$t" 8)" "$(col "$FIRST" "$p" "$t" 8)")"
      done
    done | sed 's/ -x / - /g'
  fi
)

{
  printf 'Run %s on %s (nproc %s); %s. lazyclusterctl at %s. Load average %s before, %s after. RLIMIT_NOFILE %s.\n' \
    "$START" "$MACHINE" "$(nproc)" "$VERSIONS" "$COMMIT" "$LOAD0" "$LOAD1" "$NOFILE"
  printf 'Rounds: exec %s, light start %s, Dask 1; medians of the runs that succeeded. Every host is a namespace on this machine: the hosts'"'"' sshd and workers compete with the tool for the same CPUs.\n\n' \
    "$EXEC_ROUNDS" "$LIGHT_ROUNDS"
  printf '%s\n\n' "$TABLE"
  if [[ -n $RATIOS ]]; then printf '%s\n\n' "$RATIOS"; fi
  printf '%s\n' "$TARGETS"
  if [[ -n $NOTES ]]; then printf '\n%s' "$NOTES"; fi
  if [[ -n $FAILED_REPORT ]]; then printf '\nFAILED RUNS:\n%s' "$FAILED_REPORT"; fi
  if [[ -n $LEFT_REPORT ]]; then printf '\nLEFT BEHIND:\n%s' "$LEFT_REPORT"; fi
} | tee "$WORK/report.md"
if [[ -n $MARKDOWN ]]; then cp "$WORK/report.md" "$MARKDOWN" && cp "$RESULTS" "$MARKDOWN.tsv"; fi
if ((FAIL)); then
  say "FAILED: a run failed or something was left behind (see above)"
  exit 1
fi
