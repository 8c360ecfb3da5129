#!/usr/bin/env bash
# cluster_start_dask.sh - benchmark tests/bench/cluster_start, workload 1 (Dask): the time until all
# N Dask workers (one per test host, N = 16) are registered with the scheduler, for
#
#   ours        lazyclusterctl start --type dask --workers N --hosts lab0,...  (scheduler here,
#               workers on the hosts, everything through SSH tunnels, mutual TLS with the
#               cluster's own CA), from its launch until it prints "ready:" (the scheduler logged
#               the N-th "Register worker")
#   insecure    the same with --insecure (plain tcp://): what TLS costs a start
#   sshcluster  Dask's own distributed.deploy.ssh.SSHCluster on the same hosts (asyncssh, scheduler
#               on lab0, workers reach it over the hosts' network), from SSHCluster(...) until a
#               client's wait_for_workers(N) returns (the Python imports are done before the clock
#               starts)
#   floor       the same Dask processes as ours (`dask scheduler` and N `dask worker`, or the
#               dash names where there is no dask command; same options)
#               started at once on this machine without SSH, until a Dask client sees N workers
#
# alternated within each round (the order rotates from round to round), several rounds; prints
# each run, then medians (min-max) and a Markdown section for docs/benchmarks.md. For ours and the
# floor it also reports when the scheduler logged the N-th "Register worker" (the registrations
# themselves, without the readiness check's Python client).
#
# usage: tests/bench/cluster_start_dask.sh [--rounds R] [--hosts N] [--ctl PATH] [--dir DIR]
#                                          [--markdown FILE]
# Needs root (test hosts), python3-distributed and python3-asyncssh. Uses its own test hosts
# (--dir, default /tmp/lc-dask) and tears them down at the end, whatever happens. It only ever
# signals processes it started itself.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=5 n=16 dir=/tmp/lc-dask ctl="" md=""
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --hosts) n=$2; shift 2 ;;
    --ctl) ctl=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --markdown) md=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
th=$root/tests/support/testhosts
if [ -z "$ctl" ]; then
  for b in build-bench build build-dask; do
    [ -x "$root/$b/lazyclusterctl" ] && { ctl=$root/$b/lazyclusterctl; break; }
  done
fi
[ -x "$ctl" ] || { echo "no lazyclusterctl: give --ctl PATH" >&2; exit 2; }

# The interpreter Dask is installed for (SSHCluster runs sys.executable on the hosts, and our
# readiness check runs python3: make python3 that one when the first in PATH lacks Dask).
py=$(command -v python3)
if ! python3 -c 'import distributed' 2>/dev/null; then
  py=$(sed -n '1s/^#!//p' "$(command -v dask || command -v dask-scheduler)")
  PATH=$(dirname "$py"):$PATH
  export PATH
fi
"$py" -W ignore -c 'import distributed, asyncssh' 2>/dev/null ||
  { echo "needs python3-distributed and python3-asyncssh (apt-get install -y ...)" >&2; exit 2; }

tmp=$(mktemp -d)
mine=() # process groups this script started (the floor's), ended by id
cleanup() {
  for p in "${mine[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  "$th" down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cfg=$("$th" up "$n" --dir "$dir")
hostlist=$(seq -s, -f 'lab%g' 0 $((n - 1)))

now() { date +%s.%N; }
# When the scheduler registered its N-th worker: from its own event log ("add-worker" events carry
# the scheduler's time.time(); the scheduler runs on this machine or on a test host, which share
# this machine's clock). Asked through a Dask client after the run's clock has stopped.
cat >"$tmp/registered.py" <<'EOF'
import sys, warnings
warnings.simplefilter("ignore")
import distributed
c = distributed.Client(sys.argv[1], timeout=30)
ts = sorted(t for t, m in c.get_events("all") if isinstance(m, dict) and m.get("action") == "add-worker")
n, t0 = int(sys.argv[2]), float(sys.argv[3])
print("%.2f" % (ts[n - 1] - t0) if len(ts) >= n else "-")
c.close()
EOF
registered_at() { # SCHEDULER_ADDRESS T0 -> seconds, or "-"
  timeout 60 "$py" "$tmp/registered.py" "$1" "$n" "$2" 2>/dev/null || echo -
}

# Waits until no Dask (python) process is left on any host and none of ours here; at most 60 s.
wait_clean() {
  local left
  for _ in $(seq 600); do
    left=0
    for i in $(seq 0 $((n - 1))); do
      for p in $("$th" pids "$i" --dir "$dir"); do
        grep -q python "/proc/$p/cmdline" 2>/dev/null && left=$((left + 1))
      done
    done
    for p in "${mine[@]}"; do kill -0 -- "-$p" 2>/dev/null && left=$((left + 1)); done
    [ "$left" -eq 0 ] && return 0
    sleep 0.1
  done
  echo "warning: $left Dask processes still there after 60 s" >&2
}

run_ours() { # [--insecure] -> "SECONDS REGISTERED"
  local t0 t1 pid line name g
  t0=$(now)
  exec 3< <(exec "$ctl" start --type dask --workers "$n" --hosts "$hostlist" -F "$cfg" \
    --master-port 62600 --ports 62601-62799 "$@" \
    2>"$tmp/ours.err")
  pid=$!
  t1="" name=""
  while IFS= read -r -u 3 line; do
    case $line in
      name*) name=${line#name}; name=${name// /} ;;
      ready:*) t1=$(now); break ;;
    esac
  done
  if [ -z "$t1" ]; then
    echo "ours: no \"ready:\"; its stderr:" >&2; tail -20 "$tmp/ours.err" >&2
    exec 3<&-
    return 1
  fi
  # the client as a user's: the cluster's address (tls:// unless --insecure) and TLS files
  g=$(eval "$("$ctl" env "$name")" && registered_at "$DASK_SCHEDULER_ADDRESS" "$t0")
  kill -INT "$pid"
  cat <&3 >/dev/null # until it exits (it closes stdout)
  exec 3<&-
  awk -v a="$t0" -v b="$t1" -v g="$g" 'BEGIN { printf "%.2f %s\n", b - a, g }'
}

run_insecure() { run_ours --insecure; }

run_sshcluster() {
  timeout 300 "$py" -W ignore "$here/sshcluster.py" "$dir" "$n" 2>"$tmp/ssh.err" ||
    { echo "sshcluster failed:" >&2; tail -20 "$tmp/ssh.err" >&2; return 1; }
}

cat >"$tmp/check.py" <<'EOF'
import sys, distributed
c = distributed.Client("tcp://127.0.0.1:%s" % sys.argv[1], timeout=60)
c.wait_for_workers(int(sys.argv[2]))
c.close()
EOF
run_floor() {
  local t0 t1 sp=62900 i g
  mine=()
  t0=$(now)
  local dask=(dask-scheduler) worker=(dask-worker)
  if command -v dask >/dev/null 2>&1; then dask=(dask scheduler) worker=(dask worker); fi
  setsid "${dask[@]}" --host 127.0.0.1 --port $sp --no-dashboard </dev/null \
    >/dev/null 2>"$tmp/floor.err" &
  mine+=($!)
  for i in $(seq 0 $((n - 1))); do
    setsid "${worker[@]}" tcp://127.0.0.1:$sp --host 127.0.0.1 --worker-port $((sp + 1 + 2 * i)) \
      --nanny-port $((sp + 2 + 2 * i)) --no-dashboard --nthreads 1 --memory-limit 0 \
      --name "worker-$i" </dev/null >/dev/null 2>&1 &
    mine+=($!)
  done
  # the check starts once the scheduler listens (a client started earlier backs off: slower)
  until (exec 5<>/dev/tcp/127.0.0.1/$sp) 2>/dev/null; do sleep 0.01; done
  timeout 300 "$py" "$tmp/check.py" $sp "$n" || { echo "floor: check failed" >&2; return 1; }
  t1=$(now)
  g=$(registered_at "tcp://127.0.0.1:$sp" "$t0")
  for p in "${mine[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  awk -v a="$t0" -v b="$t1" -v g="$g" 'BEGIN { printf "%.2f %s\n", b - a, g }'
}

kinds=(ours insecure sshcluster floor)
declare -A res reg
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# $n Dask workers on $n test hosts, $rounds rounds; load average at start: $load0" >&2
printf '%-6s %-11s %9s %12s\n' round who seconds registered >&2
for r in $(seq 1 "$rounds"); do
  for k in 0 1 2 3; do
    who=${kinds[$(((k + r - 1) % 4))]}
    wait_clean
    out=$(run_$who) || out="- -"
    read -r s g <<<"$out"
    res[$who]+="$s "
    reg[$who]+="$g "
    printf '%-6s %-11s %9s %12s\n' "$r" "$who" "$s" "$g" >&2
  done
done
wait_clean
load1=$(cut -d' ' -f1-3 /proc/loadavg)

stats() { # numbers... -> "median min max" (ignores "-")
  printf '%s\n' "$@" | grep -v '^-$' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "- - -"; exit }
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f %.2f %.2f\n", m, v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f\n", a / b }'; }
# shellcheck disable=SC2086
{
  for k in 0 1 2 3; do
    read -r "gm[$k]" "gmin[$k]" "gmax[$k]" <<<"$(stats ${reg[${kinds[$k]}]})"
    read -r "rd[$k]" "rdmin[$k]" "rdmax[$k]" <<<"$(stats ${res[${kinds[$k]}]})"
  done
}
label=("ours: \`lazyclusterctl start --type dask --workers $n\`, mutual TLS (ready: its \"ready:\" line)"
       "ours with \`--insecure\` (plain tcp://)"
       "Dask's \`SSHCluster\`, asyncssh (ready: \`SSHCluster()\` and \`wait_for_workers($n)\` returned)"
       "floor: the same processes here, no SSH (ready: a client started once the scheduler listens sees $n)")

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
{
  echo "## Cluster start: Dask"
  echo
  echo "Time from the start until all $n Dask workers, one on each of $n test hosts, are registered"
  echo "with the scheduler (\`tests/bench/cluster_start_dask.sh\`, workload 1 of"
  echo "\`tests/bench/cluster_start\`). *Registered*: the scheduler's own \"add-worker\" event of the"
  echo "${n}th worker (its clock is this machine's); *ready*: when the tool itself reports that all"
  echo "are there. The four alternate within each of $rounds rounds; medians (min-max), seconds."
  echo
  echo "- Machine: $(nproc) CPUs, $cpu, Linux $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "- Load average (other work on the machine): $load0 at the start, $load1 at the end."
  echo "- Dask $("$py" -c 'import distributed; print(distributed.__version__)'), asyncssh"\
       "$("$py" -W ignore -c 'import asyncssh; print(asyncssh.__version__)'), $(ssh -V 2>&1 | cut -d, -f1)."
  echo
  echo "| | all $n registered | vs floor | ready | vs floor |"
  echo "|---|---|---|---|---|"
  for k in 0 1 2 3; do
    echo "| ${label[$k]} | ${gm[$k]} (${gmin[$k]}-${gmax[$k]}) | $(ratio "${gm[$k]}" "${gm[3]}") |" \
         "${rd[$k]} (${rdmin[$k]}-${rdmax[$k]}) | $(ratio "${rd[$k]}" "${rd[3]}") |"
  done
  echo
  echo "Runs, registered / ready (s): ours: $(paste -d/ <(tr ' ' '\n' <<<"${reg[ours]}") <(tr ' ' '\n' <<<"${res[ours]}") | grep -v '^/$' | tr '\n' ' ')"
  echo "insecure: $(paste -d/ <(tr ' ' '\n' <<<"${reg[insecure]}") <(tr ' ' '\n' <<<"${res[insecure]}") | grep -v '^/$' | tr '\n' ' ')"
  echo "SSHCluster: $(paste -d/ <(tr ' ' '\n' <<<"${reg[sshcluster]}") <(tr ' ' '\n' <<<"${res[sshcluster]}") | grep -v '^/$' | tr '\n' ' ')"
  echo "floor: $(paste -d/ <(tr ' ' '\n' <<<"${reg[floor]}") <(tr ' ' '\n' <<<"${res[floor]}") | grep -v '^/$' | tr '\n' ' ')"
} >"$tmp/md"
cat "$tmp/md"
[ -z "$md" ] || cp "$tmp/md" "$md"
