#!/usr/bin/env bash
# test_dask_lives.sh - issue 13's scenario, run the way a user runs it: a detached Dask cluster of
# 8 workers on 4 test hosts (lab1-lab4, 2 each: spread placement, no other option), a Dask client
# that finds it through `eval "$(lazyclusterctl env NAME)"` and computes, then
#   1. kill -9 of worker 0's process on its host (pid from `status --json`): status shows it
#      restarted (restarts 1, running, a new pid) and the client sees 8 workers again, one of
#      them a new process (the issue says within 10 s; the bound here is 90 s, the measured
#      seconds are printed);
#   2. lab3's link down for 45 s: status shows lab3 lost and its workers moved or waiting; after
#      link-up lab3 is back, all 8 workers run and the client sees 8 (bounds 120 s, printed);
#   3. scale to 12, then to 4: status and the client see 12, then exactly 4;
#   4. logs --worker 0: worker 0's lines, each tagged [HOST worker-0] with its host;
#   5. stop: nothing left anywhere: on every test host no process, listener, working directory or
#      /tmp entry that was not there before; here no supervisor, no scheduler, no listener on the
#      cluster's ports, no state directory entry, no working directory of the supervisor.
# The state directory is the test's own ($XDG_RUNTIME_DIR in a temporary directory), so clusters
# of other users of the machine are neither seen nor touched. Each check prints what it saw.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
cfg=$dir/ssh_config
hosts=(lab1 lab2 lab3 lab4)
down_host=lab3 # the host whose link goes down (worker 0 is on lab1 with spread placement)
tmp=$(mktemp -d)
name=lives$$
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
sup="" link_is_down=0
cleanup() {
  [ "$link_is_down" -eq 0 ] || "$th" link-up "$down_host" >/dev/null 2>&1
  if [ -n "$sup" ] && kill -0 "$sup" 2>/dev/null; then
    timeout 60 "$ctl" stop "$name" >/dev/null 2>&1
    kill -0 "$sup" 2>/dev/null && kill -KILL "$sup" 2>/dev/null # ours, by its id
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { echo "  $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
within() { # SECONDS CMD...: runs CMD every 0.2 s until it succeeds (0) or SECONDS passed (1)
  local t0 limit=$1; shift
  t0=$(now)
  until "$@"; do
    awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }' && return 1
    sleep 0.2
  done
}

# The Python that has Dask (the first python3 in PATH may be a virtualenv or pyenv without it).
if ! python3 -c 'import distributed' 2>/dev/null; then
  py=$(sed -n '1s/^#!//p' "$(command -v dask || command -v dask-scheduler)" 2>/dev/null)
  [ -n "$py" ] && [ -x "$py" ] && PATH=$(dirname "$py"):$PATH
  echo "note: python3 in PATH has no Dask; using ${py:-?}" >&2
fi

# status --json into $tmp/st.json; sq EXPR prints a Python expression over it (s: the object).
status() { timeout 30 "$ctl" status "$name" --json >"$tmp/st.json" 2>"$tmp/st.err"; }
sq() { python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(" ".join(map(str, v)) if isinstance(v, (list, tuple)) else v)' "$tmp/st.json" "$1" 2>/dev/null; }

# The client: waits until the scheduler has exactly N workers that answer (client.run) and, with
# OLD (a file of worker pids seen before), until one of them is a process not in OLD; then
# computes on them. Prints "N workers on HOSTS, sum of squares 0..99 = 328350, after S s" and
# writes the workers' pids to PIDS. Exit 1 when that did not happen within LIMIT seconds.
cat >"$tmp/client.py" <<'EOF'
import os, signal, socket, sys, time, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.ERROR)
from distributed import Client
n, limit, pids_out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
old = set(open(sys.argv[4]).read().split()) if len(sys.argv) > 4 else None
seen = None
def give_up(*_):  # a call that hangs (a worker that went away mid-call) still ends in time
    print("not %d workers within %g s (a call hung); last seen: %s" % (n, limit, seen))
    os._exit(1)
signal.signal(signal.SIGALRM, give_up)
signal.alarm(int(limit) + 10)
t0 = time.monotonic()
c = Client(timeout=30)  # DASK_SCHEDULER_ADDRESS, from `lazyclusterctl env`
def me():
    return socket.gethostname(), os.getpid()
while time.monotonic() - t0 < limit:
    try:
        if len(c.scheduler_info()["workers"]) == n:
            r = c.run(me)
            pids = set(str(p) for _, p in r.values())
            seen = "%d workers" % len(r)
            if len(r) == n and (old is None or pids - old):
                hosts = " ".join(sorted(h for h, _ in r.values()))
                total = sum(c.gather(c.map(lambda x: x * x, range(100))))
                open(pids_out, "w").write("\n".join(sorted(pids)) + "\n")
                print("%d workers on %s, sum of squares 0..99 = %d, after %.1f s"
                      % (n, hosts, total, time.monotonic() - t0))
                c.close()
                sys.exit(0)
        else:
            seen = "%d workers" % len(c.scheduler_info()["workers"])
    except Exception as e:  # a worker that went away meanwhile: look again
        seen = "error %s" % e
    time.sleep(0.2)
print("not %d workers%s within %g s; last seen: %s"
      % (n, " with a new one" if old is not None else "", limit, seen))
sys.exit(1)
EOF
client() { # N LIMIT [OLD]: runs the client with the cluster's environment; its line in $tmp/client
  (eval "$("$ctl" env "$name")" && timeout $(( ${2%.*} + 30 )) python3 "$tmp/client.py" \
    "$1" "$2" "$tmp/pids.new" ${3:+"$3"}) >"$tmp/client" 2>"$tmp/client.err"
  local rc=$?
  say "client: $(cat "$tmp/client")"
  [ "$rc" -eq 0 ] || sed 's/^/    client stderr: /' "$tmp/client.err" | tail -5 >&2
  [ "$rc" -eq 0 ] && mv "$tmp/pids.new" "$tmp/pids"
  return "$rc"
}

# What is on the hosts before the cluster: processes, listeners, working directories, /tmp.
host_state() { # I KIND -> lines
  case $2 in
    procs) for p in $("$th" pids "$1"); do
             [ "$p" = "$(cat "$dir/hosts/$1/sshd.pid" 2>/dev/null)" ] && continue
             c=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) && echo "$p $c"
           done ;;
    listen) "$th" exec "$1" -- ss -ltnH | awk '{ print $4 }' | sort ;;
    dirs) ls -A "$dir/hosts/$1/home/.cache/lazycluster" 2>/dev/null | sort ;;
    tmp) "$th" exec "$1" -- find /tmp -mindepth 1 -maxdepth 3 | sort ;;
  esac
}
for i in 0 1 2 3 4 5 6 7; do
  for k in procs listen dirs tmp; do host_state $i $k >"$tmp/before.$i.$k"; done
done

# ---- start --detach ----------------------------------------------------------------------------
t=$(now)
timeout 300 "$ctl" start --detach --name "$name" --type dask --workers 8 \
  --hosts "$(IFS=,; echo "${hosts[*]}")" -F "$cfg" >"$tmp/start.out" 2>"$tmp/start.err"
rc=$?
say "start --detach: exit $rc after $(since "$t") s"
sed 's/^/    out: /' "$tmp/start.out" >&2
sed 's/^/    err: /' "$tmp/start.err" | tail -20 >&2
check "start --detach exits 0" [ "$rc" -eq 0 ]
check "start prints its name" grep -qx "name $name" "$tmp/start.out"
check "start prints the master's address" grep -qE '^master localhost:[0-9]+ on ' "$tmp/start.out"
check "start prints where the logs are" grep -qE '^logs /' "$tmp/start.out"
status; rc=$?
sup=$(sq 's["supervisor_pid"]')
case $sup in ''|*[!0-9]*) sup="" ;; esac
say "status: exit $rc, state $(sq 's["state"]'), supervisor $sup"
check "status --json answers" [ "$rc" -eq 0 ]
check "the supervisor runs after start returned" sh -c "[ -n '$sup' ] && kill -0 '$sup'"
if [ -n "$sup" ]; then
  say "supervisor $sup: session $(ps -o sid= -p "$sup"), tty $(ps -o tty= -p "$sup"); ours: session $(ps -o sid= -p $$)"
  check "the supervisor is in a session of its own, without a terminal" \
    sh -c "[ $(ps -o sid= -p "$sup") -ne $(ps -o sid= -p $$) ] && [ '$(ps -o tty= -p "$sup" | tr -d ' ')' = '?' ]"
fi
if [ -z "$sup" ]; then
  failed=$((failed + 1))
  echo "FAIL no detached cluster to work with: steps 1-5 (kill, link down, scale, logs, stop) not run" >&2
  echo "$passed passed, $failed failed"
  exit 1
fi
say "workers: $(sq '["%s:%s:%s" % (w["index"], w["host"], w["state"]) for w in s["workers"]]')"
check "status: state running" [ "$(sq 's["state"]')" = running ]
check "status: 8 workers, all running" [ "$(sq 'sum(w["state"] == "running" for w in s["workers"])')" = 8 ]
check "status: 2 workers on each of lab1-lab4" \
  [ "$(sq 'sorted(w["host"] for w in s["workers"])')" = "lab1 lab1 lab2 lab2 lab3 lab3 lab4 lab4" ]
check "status: the 4 hosts connected" [ "$(sq 'sum(bool(h["connected"]) for h in s["hosts"])')" = 4 ]
mport=$(sq 's["master"]["port"]')
# the master's working directory here: HOSTNAME-PID.* (PID the supervisor's)
local_dirs() { find "${XDG_CACHE_HOME:-$HOME/.cache}/lazycluster" -mindepth 1 -maxdepth 1 \
  -name "$(hostname)-$sup.*" 2>/dev/null; }
say "here: the supervisor's working directories: $(local_dirs | tr '\n' ' ')"
check "here: the supervisor has its working directory (what stop must remove)" [ -n "$(local_dirs)" ]
"$ctl" env "$name" >"$tmp/env" 2>&1
sed 's/^/    env: /' "$tmp/env" >&2
check "env exports DASK_SCHEDULER_ADDRESS" grep -qE "^export DASK_SCHEDULER_ADDRESS=.*:$mport" "$tmp/env"
check "a client computes on the 8 workers, 2 on each host" client 8 60
check "the client's workers are on lab1-lab4, 2 each" \
  grep -q ' on lab1 lab1 lab2 lab2 lab3 lab3 lab4 lab4, sum of squares 0..99 = 328350' "$tmp/client"
"$ctl" list --json >"$tmp/list" 2>&1
check "list --json shows the cluster" grep -q "\"$name\"" "$tmp/list"

# ---- 1. kill -9 of worker 0's process ----------------------------------------------------------
h0=$(sq 's["workers"][0]["host"]') p0=$(sq 's["workers"][0]["pid"]')
say "worker 0: on $h0, pid $p0; kill -9 there"
t=$(now)
"$th" exec "$h0" -- kill -9 "$p0"; rc=$?
check "kill -9 of worker 0's process (pid $p0 on $h0)" [ "$rc" -eq 0 ]
restarted() {
  status && [ "$(sq '[s["workers"][0][k] for k in ("state", "restarts")]')" = "running 1" ] &&
    [ "$(sq 's["workers"][0]["pid"]')" != "$p0" ]
}
ok=0; within 90 restarted && ok=1
say "status after $(since "$t") s: worker 0 $(sq '[s["workers"][0][k] for k in ("host", "state", "pid", "restarts", "last_exit")]')"
check "status: worker 0 restarted (restarts 1, running, a new pid) within 90 s" [ "$ok" -eq 1 ]
last0=$(sq 's["workers"][0]["last_exit"]')
check "status: worker 0's last exit names signal 9 ('$last0')" grep -q 'signal 9' <<<"$last0"
check "status: the other workers were not restarted" \
  [ "$(sq 'sum(w["restarts"] for w in s["workers"][1:])')" = 0 ]
cp "$tmp/pids" "$tmp/pids.old"
check "the client sees 8 workers again, one a new process (90 s)" client 8 90 "$tmp/pids.old"
say "from kill -9 to the client seeing 8 workers: $(since "$t") s"

# ---- 2. a host's link down for 45 s ------------------------------------------------------------
say "link of $down_host down for 45 s"
t=$(now)
"$th" link-down "$down_host" && link_is_down=1
lost="" lost_states=""
while [ "$(since "$t" | cut -d. -f1)" -lt 45 ]; do
  if [ -z "$lost" ] && status &&
     [ "$(sq '[h["connected"] for h in s["hosts"] if h["name"] == "'$down_host'"][0]')" = False ]; then
    lost=$(since "$t")
    say "status after $lost s: $down_host $(sq '[h for h in s["hosts"] if h["name"] == "'$down_host'"][0]')"
  fi
  sleep 1
done
status
lost_states=$(sq '[w["state"] for w in s["workers"] if w["host"] == "'$down_host'"]')
say "status at 45 s: hosts $(sq '[(h["name"], h["connected"], h["lost_s"]) for h in s["hosts"]]')"
say "status at 45 s: workers $(sq '["%s:%s:%s" % (w["index"], w["host"], w["state"]) for w in s["workers"]]')"
check "status: $down_host reported lost while its link was down" [ -n "$lost" ]
check "status: $down_host's workers moved away or waiting (left there: '$lost_states')" \
  sh -c "! echo '$lost_states' | grep -qw running"
check "status: still 8 workers wanted" [ "$(sq 'len(s["workers"])')" = 8 ]
"$th" link-up "$down_host" && link_is_down=0
t=$(now)
back() {
  status && [ "$(sq '[h["connected"] for h in s["hosts"] if h["name"] == "'$down_host'"][0]')" = True ] &&
    [ "$(sq 'sum(w["state"] == "running" for w in s["workers"])')" = 8 ]
}
ok=0; within 120 back && ok=1
say "status $(since "$t") s after link-up: hosts $(sq '[(h["name"], h["connected"], h["workers"]) for h in s["hosts"]]')"
say "  workers $(sq '["%s:%s:%s" % (w["index"], w["host"], w["state"]) for w in s["workers"]]')"
check "status: $down_host back and 8 workers running within 120 s of link-up" [ "$ok" -eq 1 ]
check "the client sees 8 workers after link-up (90 s)" client 8 90
say "from link-up to the client seeing 8 workers: $(since "$t") s"

# ---- 3. scale to 12, then to 4 -----------------------------------------------------------------
t=$(now)
timeout 180 "$ctl" scale "$name" --workers 12 >"$tmp/scale" 2>&1; rc=$?
say "scale --workers 12: exit $rc after $(since "$t") s: $(tr '\n' ' ' <"$tmp/scale")"
check "scale --workers 12 exits 0" [ "$rc" -eq 0 ]
status
say "workers: $(sq '["%s:%s:%s" % (w["index"], w["host"], w["state"]) for w in s["workers"]]')"
check "status: 12 workers running" [ "$(sq 'sum(w["state"] == "running" for w in s["workers"])')/$(sq 'len(s["workers"])')" = 12/12 ]
check "the client sees 12 workers (60 s)" client 12 60
t=$(now)
timeout 180 "$ctl" scale "$name" --workers 4 >"$tmp/scale" 2>&1; rc=$?
say "scale --workers 4: exit $rc after $(since "$t") s: $(tr '\n' ' ' <"$tmp/scale")"
check "scale --workers 4 exits 0" [ "$rc" -eq 0 ]
status
say "workers: $(sq '["%s:%s:%s" % (w["index"], w["host"], w["state"]) for w in s["workers"]]')"
check "status: workers 0-3 left, running" \
  [ "$(sq '["%s:%s" % (w["index"], w["state"]) for w in s["workers"]]')" = "0:running 1:running 2:running 3:running" ]
check "the client sees exactly 4 workers (60 s)" client 4 60

# ---- 4. logs of one worker ---------------------------------------------------------------------
h0=$(sq 's["workers"][0]["host"]')
timeout 30 "$ctl" logs "$name" --worker 0 >"$tmp/logs" 2>&1; rc=$?
say "logs --worker 0: exit $rc, $(wc -l <"$tmp/logs") lines; the first 3:"
head -3 "$tmp/logs" | sed 's/^/    /' >&2
check "logs --worker 0 exits 0" [ "$rc" -eq 0 ]
check "logs --worker 0 has lines tagged [$h0 worker-0]" grep -qF "[$h0 worker-0] " "$tmp/logs"
check "logs --worker 0 has only worker 0's lines" \
  [ "$(grep -cv "\[lab[0-9] worker-0\] " "$tmp/logs")" -eq 0 ]
timeout 30 "$ctl" logs "$name" --worker 0 --tail 5 >"$tmp/logs5" 2>&1
check "logs --worker 0 --tail 5 gives 5 lines" [ "$(grep -c 'worker-0\] ' "$tmp/logs5")" -eq 5 ]

# ---- 5. stop: nothing left ---------------------------------------------------------------------
wports=$(sq '[w["port"] for w in s["workers"]]')
t=$(now)
timeout 180 "$ctl" stop "$name" >"$tmp/stop" 2>&1; rc=$?
say "stop: exit $rc after $(since "$t") s: $(tr '\n' ' ' <"$tmp/stop")"
check "stop exits 0" [ "$rc" -eq 0 ]
sup_gone() { ! kill -0 "$sup" 2>/dev/null; }
check "here: the supervisor is gone (within 10 s of stop's exit)" within 10 sup_gone
left=$(pgrep -af 'dask[ -]scheduler' | grep -F -- "--port $mport ")
[ -z "$left" ] || say "scheduler left: $left"
check "here: the scheduler (port $mport) is gone" [ -z "$left" ]
left=""
for p in $mport $wports; do
  ss -ltnH "sport = :$p" | grep -q . && left="$left $p"
done
check "here: no listener on the cluster's ports ($mport $wports)${left:+, left:$left}" [ -z "$left" ]
check "here: no state directory entry" [ ! -e "$XDG_RUNTIME_DIR/lazycluster/$name" ]
"$ctl" list --json >"$tmp/list" 2>&1
check "list does not show the cluster" sh -c "! grep -q '\"$name\"' '$tmp/list'"
left=$(local_dirs)
check "here: no working directory of the supervisor left" [ -z "$left" ]
for i in 0 1 2 3 4 5 6 7; do
  # the lifelines end what is left as the sessions go: allow them a bounded while (15 s)
  for _ in $(seq 75); do
    host_state $i procs | awk '{ print $1 }' | sort >"$tmp/now.procs"
    awk '{ print $1 }' "$tmp/before.$i.procs" | sort | comm -13 - "$tmp/now.procs" >"$tmp/new"
    [ -s "$tmp/new" ] || break
    sleep 0.2
  done
  [ -s "$tmp/new" ] && host_state $i procs | grep -wFf "$tmp/new" | sed "s/^/    lab$i left: /" >&2
  check "lab$i: no process left" [ ! -s "$tmp/new" ]
  for k in listen dirs tmp; do
    host_state $i $k | comm -13 "$tmp/before.$i.$k" - >"$tmp/new"
    [ -s "$tmp/new" ] && sed "s/^/    lab$i $k left: /" "$tmp/new" >&2
    check "lab$i: no $k left" [ ! -s "$tmp/new" ]
  done
done

checks_done
