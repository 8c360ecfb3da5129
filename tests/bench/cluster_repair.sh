#!/usr/bin/env bash
# cluster_repair.sh - issue 13's benchmark: how fast a detached cluster repairs itself, and what an
# idle supervisor costs. Parts (all by default; --only PART,... picks some):
#
#   dask     a detached Dask cluster, 8 workers on lab1-lab4 (scheduler here); per round, kill -9
#            of one worker's process on its host (a different worker each round, so each waits
#            its first backoff, 1 s by default): seconds until the scheduler noticed (its
#            "remove-worker" event), and until it counts all 8 again with the restarted one
#            registered (its "add-worker" event after the kill). The clock starts just before
#            the kill; the scheduler's events carry this machine's clock.
#   command  a detached command cluster, 8 workers on lab5-lab8, each `lazyclusterctl serve` on its
#            worker port, exposed here (expose=here); per round, kill -9 of one worker's process:
#            seconds until its port answers a line here again (tests/bench/portprobe).
#   link     the command cluster's lab5 link down for --down seconds (default 45: longer than the
#            30 s in which a host that stops answering is reported lost), then up: seconds from
#            link-up until status shows lab5 connected, until all 8 workers run, and until lab5's
#            workers' ports answer here. The same for the Dask cluster's lab1 once: until all 8
#            run and until the scheduler counts 8.
#   idle     a detached command cluster of 64 workers on 16 hosts (lab0-lab15): its supervisor's
#            RSS (VmRSS) and peak (VmHWM) from /proc/PID/status, and its CPU time (utime + stime
#            of /proc/PID/stat) over --idle seconds (default 60) of doing nothing.
#   sshcluster  the peer: Dask's own SSHCluster, 4 workers on lab1-lab4 (scheduler on lab0):
#            kill -9 of a worker's nanny (what we kill above: the process our lifeline started),
#            then whether the scheduler ever counts 4 again within 60 s; and kill -9 of a worker
#            process under its nanny (the nanny starts a new one): seconds until 4 again.
#
# usage: tests/bench/cluster_repair.sh [--rounds R] [--down S] [--idle S] [--ctl PATH]
#                                      [--dir DIR] [--only PARTS] [--markdown FILE]
# Needs root (test hosts), python3-distributed, python3-asyncssh for sshcluster, and a build
# outside /tmp (the hosts run lazyclusterctl serve by its path). Uses its own test hosts (--dir,
# default /tmp/lc-repair, 16 of them) and its own state directory, tears both down at the end,
# whatever happens; only ever signals processes it started itself. Not a ctest test: no pass/fail.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=5 down=45 idle=60 dir=/tmp/lc-repair ctl="" md="" only=dask,command,link,idle,sshcluster
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --down) down=$2; shift 2 ;;
    --idle) idle=$2; shift 2 ;;
    --ctl) ctl=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --markdown) md=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }
th=$root/tests/support/testhosts
if [ -z "$ctl" ]; then
  for b in build-bench build; do
    [ -x "$root/$b/lazyclusterctl" ] && { ctl=$root/$b/lazyclusterctl; break; }
  done
fi
[ -x "$ctl" ] || { echo "no lazyclusterctl: give --ctl PATH" >&2; exit 2; }
case $ctl in /tmp/*) echo "$ctl is under /tmp, which the test hosts cannot see" >&2; exit 2 ;; esac
probe=$(dirname "$ctl")/tests/bench/portprobe
[ -x "$probe" ] || { echo "no portprobe beside $ctl (built with it)" >&2; exit 2; }
[ "$rounds" -le 8 ] || { echo "--rounds: at most 8 (one worker each)" >&2; exit 2; }

# The interpreter Dask is installed for.
py=$(command -v python3)
if ! python3 -c 'import distributed' 2>/dev/null; then
  py=$(sed -n '1s/^#!//p' "$(command -v dask || command -v dask-scheduler)")
  PATH=$(dirname "$py"):$PATH
  export PATH
fi
"$py" -c 'import distributed' 2>/dev/null || { echo "needs python3-distributed" >&2; exit 2; }
if want sshcluster && ! "$py" -W ignore -c 'import asyncssh' 2>/dev/null; then
  echo "sshcluster needs python3-asyncssh (apt-get install -y python3-asyncssh); left out" >&2
  only=${only//sshcluster/}
fi

tmp=$(mktemp -d)
export XDG_RUNTIME_DIR=$tmp/run LC_TESTHOSTS_DIR=$dir
mkdir -m 700 "$XDG_RUNTIME_DIR"
names=() link_down=""
cleanup() {
  [ -z "$link_down" ] || "$th" link-up "$link_down" --dir "$dir" >/dev/null 2>&1 || true
  for n in "${names[@]}"; do timeout 60 "$ctl" stop "$n" >/dev/null 2>&1 || true; done
  "$th" down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() { echo "$*" >&2; }
# status NAME -> $tmp/st.json; sq EXPR: a Python expression over it (s)
status() { "$ctl" status "$1" --json >"$tmp/st.json" 2>/dev/null; }
sq() { "$py" -c 'import json, sys
s = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(" ".join(map(str, v)) if isinstance(v, (list, tuple)) else v)' "$tmp/st.json" "$1"; }
stats() { # numbers... -> "median (min-max), n=N" (ignores "-")
  printf '%s\n' "$@" | grep -v '^-$' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "-"; exit }
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f (%.2f-%.2f), n=%d\n", m, v[1], v[NR], NR }'
}
start() { # NAME START-OPTIONS...: a detached cluster
  local n=$1 t; shift
  t=$(now)
  "$ctl" start --detach --name "$n" -F "$cfg" "$@" >"$tmp/$n.out" 2>"$tmp/$n.err" ||
    { log "start $n failed:"; tail -20 "$tmp/$n.err" >&2; return 1; }
  names+=("$n")
  log "started $n in $(since "$t") s: $(tr '\n' ' ' <"$tmp/$n.out")"
}
stop() { # NAME
  "$ctl" stop "$1" >/dev/null 2>&1 || log "stop $1 failed"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
cfg=$("$th" up 16 --dir "$dir")
declare -A res

# ---- dask: kill -9 of a worker until the scheduler counts all 8 again --------------------------
cat >"$tmp/dask_kill.py" <<'EOF'
import os, subprocess, sys, time, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.ERROR)
from distributed import Client
# pid "-": no kill; the clock started at argv[6] (seconds since the epoch: a host's link-up)
addr, n, th, host, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
c = Client(addr, timeout=30)
if pid != "-":
    c.wait_for_workers(n, timeout=60)
    t0 = time.time()
    subprocess.run([th, "exec", host, "--", "kill", "-9", pid], check=True)
else:
    t0 = float(sys.argv[6])
whole = "-"
while time.time() - t0 < 120:
    if len(c.scheduler_info()["workers"]) == n:
        ev = c.get_events("all")
        if any(t > t0 and isinstance(m, dict) and m.get("action") == "add-worker" for t, m in ev):
            whole = "%.2f" % (time.time() - t0)
            break
    time.sleep(0.05)
ev = c.get_events("all")
rm = [t for t, m in ev if t > t0 and isinstance(m, dict) and m.get("action") == "remove-worker"]
print("%s %s" % ("%.2f" % (min(rm) - t0) if rm else "-", whole))
c.close()
EOF
if want dask || want link; then
  start rdask --type dask --workers 8 --hosts lab1,lab2,lab3,lab4
  status rdask
  daddr=tcp://127.0.0.1:$(sq 's["master"]["port"]')
fi
if want dask; then
  log "# dask: kill -9 of a worker's process, $rounds rounds"
  for r in $(seq 0 $((rounds - 1))); do
    status rdask
    h=$(sq "s['workers'][$r]['host']") p=$(sq "s['workers'][$r]['pid']")
    read -r noticed whole < <("$py" -W ignore "$tmp/dask_kill.py" "$daddr" 8 "$th" "$h" "$p")
    status rdask
    log "  worker $r on $h (pid $p): scheduler noticed after $noticed s, 8 again after $whole s;" \
        "status: restarts $(sq "s['workers'][$r]['restarts']"), $(sq "s['workers'][$r]['state']")"
    res[dask_noticed]+="$noticed " res[dask_whole]+="$whole "
  done
  log "# dask: kill -9 of the worker process under a worker's nanny, $rounds rounds"
  for r in $(seq 0 $((rounds - 1))); do
    status rdask
    w=$((7 - r)) h=$(sq "s['workers'][$((7 - r))]['host']")
    # the nanny: `dask worker ... --name worker-W`; the worker process: its child
    nanny="" child=""
    for p in $("$th" pids "$h"); do
      c=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) || continue
      case $c in *python*" --name worker-$w "*) nanny=$p ;; esac
    done
    for p in $("$th" pids "$h"); do
      [ -n "$nanny" ] && [ "$(awk '/^PPid/ { print $2 }' "/proc/$p/status" 2>/dev/null)" = "$nanny" ] &&
        grep -q multiprocessing-fork "/proc/$p/cmdline" 2>/dev/null && child=$p
    done
    [ -n "$child" ] || { log "  worker $w: no worker process under a nanny found on $h"; continue; }
    read -r noticed whole < <("$py" -W ignore "$tmp/dask_kill.py" "$daddr" 8 "$th" "$h" "$child")
    status rdask
    log "  worker $w on $h (worker process $child under nanny $nanny): scheduler noticed after" \
        "$noticed s, 8 again after $whole s; status: restarts $(sq "s['workers'][$w]['restarts']")"
    res[dask_child_noticed]+="$noticed " res[dask_child_whole]+="$whole "
  done
fi

# ---- command: kill -9 of a worker until its port answers here again ----------------------------
if want command || want link; then
  start rcmd --workers 8 --hosts lab5,lab6,lab7,lab8 --type-arg expose=here \
    --master-cmd "exec '$ctl' serve {master_port} master" \
    --worker-cmd "exec '$ctl' serve {worker_port} w{worker_index}"
fi
if want command; then
  log "# command: kill -9 of a worker's process, $rounds rounds"
  for r in $(seq 0 $((rounds - 1))); do
    status rcmd
    h=$(sq "s['workers'][$r]['host']") p=$(sq "s['workers'][$r]['pid']") port=$(sq "s['workers'][$r]['port']")
    "$probe" --timeout 10 "$port" >/dev/null
    t=$(now)
    "$th" exec "$h" -- kill -9 "$p"
    if "$probe" --timeout 120 "$port" >/dev/null; then s=$(since "$t"); else s=-; fi
    status rcmd
    log "  worker $r on $h (pid $p): port $port answers again after $s s;" \
        "status: restarts $(sq "s['workers'][$r]['restarts']"), $(sq "s['workers'][$r]['state']"), pid $(sq "s['workers'][$r]['pid']")"
    res[cmd_whole]+="$s "
  done
fi

# ---- link: a host's link down, then up ---------------------------------------------------------
link_cycle() { # NAME HOST -> "LOST_AFTER CONNECTED RUNNING" (seconds; LOST_AFTER from link-down)
  local n=$1 h=$2 t lost=- conn=- run=-
  "$th" link-down "$h" && link_down=$h
  t=$(now)
  while [ "$(since "$t" | cut -d. -f1)" -lt "$down" ]; do
    if [ "$lost" = - ] && status "$n" &&
       [ "$(sq "[x['connected'] for x in s['hosts'] if x['name'] == '$h'][0]")" = False ]; then
      lost=$(since "$t")
    fi
    sleep 0.5
  done
  "$th" link-up "$h"
  link_down=""
  t=$(now)
  while [ "$(since "$t" | cut -d. -f1)" -lt 180 ]; do
    status "$n" || { sleep 0.1; continue; }
    if [ "$conn" = - ] && [ "$(sq "[x['connected'] for x in s['hosts'] if x['name'] == '$h'][0]")" = True ]; then
      conn=$(since "$t")
    fi
    if [ "$conn" != - ] && [ "$(sq 'sum(w["state"] == "running" for w in s["workers"])')" = 8 ]; then
      run=$(since "$t"); break
    fi
    sleep 0.1
  done
  echo "$lost $conn $run $t"
}
if want link; then
  log "# link: lab5 (command cluster) down for $down s, then up; $((rounds > 2 ? 2 : rounds)) rounds"
  for _ in $(seq 1 $((rounds > 2 ? 2 : rounds))); do
    status rcmd
    ports=$(sq "[w['port'] for w in s['workers'] if w['host'] == 'lab5']")
    link_cycle rcmd lab5 >"$tmp/cycle"
    read -r lost conn run t <"$tmp/cycle"
    # shellcheck disable=SC2086 # one argument a port
    if "$probe" --timeout 60 $ports >/dev/null; then ans=$(since "$t"); else ans=-; fi
    log "  lab5 lost after $lost s of link-down; after link-up: connected $conn s, 8 running $run s," \
        "its ports ($ports) answer $ans s"
    res[link_lost]+="$lost " res[link_conn]+="$conn " res[link_run]+="$run " res[link_ans]+="$ans "
  done
  log "# link: lab1 (Dask cluster) down for $down s, then up"
  link_cycle rdask lab1 >"$tmp/cycle"
  read -r lost conn run t <"$tmp/cycle"
  read -r _ whole < <("$py" -W ignore "$tmp/dask_kill.py" "$daddr" 8 "$th" - - "$t")
  log "  lab1 lost after $lost s; after link-up: connected $conn s, 8 running $run s," \
      "the scheduler counts 8 (lab1's add-worker) $whole s"
  res[dlink_lost]+="$lost " res[dlink_conn]+="$conn " res[dlink_run]+="$run " res[dlink_sched]+="$whole "
fi
for n in rdask rcmd; do
  case " ${names[*]} " in *" $n "*) stop "$n" ;; esac
done

# ---- idle: a supervisor holding 64 workers on 16 hosts -----------------------------------------
if want idle; then
  log "# idle: 64 workers on 16 hosts, the supervisor over $idle s"
  start ridle --workers 64 --hosts "$(seq -s, -f 'lab%g' 0 15)" \
    --master-cmd "exec '$ctl' serve {master_port} master" \
    --worker-cmd "exec '$ctl' serve {worker_port} w{worker_index}"
  status ridle
  sp=$(sq 's["supervisor_pid"]')
  running=$(sq 'sum(w["state"] == "running" for w in s["workers"])')
  sleep 5 # the start's last replies and logs settle
  tick=$(getconf CLK_TCK)
  cpu() { awk '{ print $14 + $15 }' "/proc/$sp/stat"; } # utime + stime, ticks (no spaces in comm)
  c0=$(cpu) t=$(now)
  sleep "$idle"
  c1=$(cpu) el=$(since "$t")
  rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$sp/status")
  hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$sp/status")
  thr=$(awk '/^Threads/ { print $2 }' "/proc/$sp/status")
  fds=$(ls "/proc/$sp/fd" | wc -l)
  res[idle_cpu]=$(awk -v a="$c0" -v b="$c1" -v k="$tick" 'BEGIN { printf "%.2f", (b - a) / k }')
  res[idle_pct]=$(awk -v a="$c0" -v b="$c1" -v k="$tick" -v e="$el" 'BEGIN { printf "%.2f", 100 * (b - a) / k / e }')
  res[idle_rss]=$(awk -v x="$rss" 'BEGIN { printf "%.1f", x / 1024 }')
  res[idle_hwm]=$(awk -v x="$hwm" 'BEGIN { printf "%.1f", x / 1024 }')
  log "  supervisor $sp, $running/64 running: CPU ${res[idle_cpu]} s over $el s (${res[idle_pct]}%)," \
      "RSS ${res[idle_rss]} MiB, peak ${res[idle_hwm]} MiB, $thr threads, $fds fds"
  res[idle_thr]=$thr res[idle_fds]=$fds
  stop ridle
fi

# ---- sshcluster: the peer ----------------------------------------------------------------------
cat >"$tmp/sshcluster.py" <<'EOF'
import os, subprocess, sys, time, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.CRITICAL)
import distributed
from distributed.deploy.ssh import SSHCluster
d, th = sys.argv[1], sys.argv[2]
addrs = [line.split()[1] for line in open(d + "/hosts.txt")][:5]
opts = {"known_hosts": d + "/known_hosts", "client_keys": [d + "/id_ed25519"],
        "username": "root", "agent_path": None}
cluster = SSHCluster(addrs, connect_options=opts,
                     scheduler_options={"host": addrs[0], "port": 0, "dashboard": False},
                     worker_options={"nthreads": 1, "memory_limit": 0, "dashboard": False})
c = distributed.Client(cluster)
c.wait_for_workers(4)
def procs(i, child):  # the pids on lab i of the worker's nanny (child: its worker process)
    out = subprocess.run([th, "pids", str(i)], capture_output=True, text=True).stdout.split()
    r = []
    for p in out:
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "python" not in cmd.split()[0]:
            continue  # the shell that started it
        if ("multiprocessing-fork" in cmd) == child and ("dask_spec" in cmd or child):
            r.append(p)
    return r
def count_until(n, limit, t0):  # -> "NOTICED/WHOLE" (seconds from t0; "-": not within limit)
    whole = "-"
    while time.time() - t0 < limit:
        if len(c.scheduler_info()["workers"]) == n:
            ev = c.get_events("all")
            if any(t > t0 and isinstance(m, dict) and m.get("action") == "add-worker" for t, m in ev):
                whole = "%.2f" % (time.time() - t0)
                break
        time.sleep(0.05)
    rm = [t for t, m in c.get_events("all")
          if t > t0 and isinstance(m, dict) and m.get("action") == "remove-worker"]
    return "%s/%s" % ("%.2f" % (min(rm) - t0) if rm else "-", whole)
# kill -9 of a worker process under its nanny (lab2): the nanny starts a new one
child = procs(2, True)
t0 = time.time()
subprocess.run([th, "exec", "2", "--", "kill", "-9", child[0]], check=True)
child_back = count_until(4, 60, t0)
# kill -9 of a nanny (lab1): nothing starts it again
nanny = procs(1, False)
t0 = time.time()
subprocess.run([th, "exec", "1", "--", "kill", "-9", nanny[0]], check=True)
nanny_back = count_until(4, 60, t0)
left = len(c.scheduler_info()["workers"])
print("%s %s %d" % (child_back, nanny_back, left))
c.close()
cluster.close()
EOF
if want sshcluster; then
  log "# sshcluster: Dask's SSHCluster, 4 workers on lab1-lab4, scheduler on lab0"
  if read -r cb nb left < <(timeout 300 "$py" -W ignore "$tmp/sshcluster.py" "$dir" "$th" 2>"$tmp/ssh.err"); then
    log "  kill -9 of a worker process: 4 again after $cb s (its nanny); kill -9 of a nanny:" \
        "4 again after $nb s ('-': not within 60 s), the scheduler counts $left"
    res[ssh_child]=$cb res[ssh_nanny]=$nb res[ssh_left]=$left
  else
    log "  sshcluster failed:"; tail -5 "$tmp/ssh.err" >&2
  fi
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table ---------------------------------------------------------------------------------
v() { local k=$1; [ -n "${res[$k]:-}" ] || { echo "not run"; return; }
      # shellcheck disable=SC2086
      stats ${res[$k]}; }
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
{
  echo "### Run of $(date -u '+%Y-%m-%d %H:%M UTC') ($commit)"
  echo
  echo "\`tests/bench/cluster_repair.sh --rounds $rounds --down $down --idle $idle\`. Machine: $(nproc) CPUs,"
  echo "$cpu, Linux $(uname -r); load average $load0 at the start, $load1 at the end."
  echo "Dask $("$py" -c 'import distributed; print(distributed.__version__)'). Seconds: median (min-max), n runs."
  echo
  echo "| What | ours | Dask's SSHCluster |"
  echo "|---|---|---|"
  echo "| Dask, kill -9 of a worker's process (ours: the process group leader our lifeline started, \`dask worker\`, the nanny): the scheduler notices (remove-worker) / counts all again (the new one's add-worker) | $(v dask_noticed) / $(v dask_whole) | the same kill of a nanny: ${res[ssh_nanny]:-not run} ('-': never within 60 s; then the scheduler counts ${res[ssh_left]:-?} of 4) |"
  echo "| Dask, kill -9 of the worker process under its nanny (the nanny starts a new one, in ours as in theirs): notices / all again | $(v dask_child_noticed) / $(v dask_child_whole) | ${res[ssh_child]:-not run} |"
  echo "| command, kill -9 of a worker's process: its port answers here again | $(v cmd_whole) | |"
  echo "| command, lab5's link down ${down} s: reported lost after (from link-down) | $(v link_lost) | |"
  echo "| command, after link-up: lab5 connected | $(v link_conn) | |"
  echo "| command, after link-up: all 8 workers running | $(v link_run) | |"
  echo "| command, after link-up: lab5's workers answer here | $(v link_ans) | |"
  echo "| Dask, lab1's link down ${down} s: reported lost after (from link-down) | $(v dlink_lost) | |"
  echo "| Dask, after link-up: lab1 connected | $(v dlink_conn) | |"
  echo "| Dask, after link-up: all 8 workers running | $(v dlink_run) | |"
  echo "| Dask, after link-up: the scheduler counts all 8 again (lab1's add-worker) | $(v dlink_sched) | |"
  echo "| idle supervisor, 64 workers on 16 hosts (command), over ${idle} s: CPU (utime+stime) | ${res[idle_cpu]:-not run} s (${res[idle_pct]:-?}% of one CPU) | |"
  echo "| idle supervisor: RSS / peak RSS (VmRSS / VmHWM) | ${res[idle_rss]:-?} / ${res[idle_hwm]:-?} MiB (${res[idle_thr]:-?} threads, ${res[idle_fds]:-?} fds) | |"
} >"$tmp/md"
cat "$tmp/md"
[ -z "$md" ] || cp "$tmp/md" "$md"
