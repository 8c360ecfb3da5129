#!/usr/bin/env bash
# test_cli_lives.sh - clusters that live (issue 13), through lazyclusterctl on the real test hosts
# with the command type: start --detach with a name, list, status, env, logs, scale, stop; a taken
# name; two clusters at once; --ttl; run; SIGKILL of a supervisor; the control socket and another
# user; a foreground start seen and stopped from another shell; a plain user with fish as login
# shell; kill -9 of a worker and its restart; bad input. After every stop or crash: nothing of the
# cluster left on any host (processes, working directories) nor here (processes, the supervisor,
# its state directory entry).
#
# Time bounds are generous upper limits, not measurements: the issue's "within 10 s" of a restart
# is checked as 60 s, the heartbeat limit (--heartbeat 5) as 60 s, --ttl 20s as 90 s.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
cfg=$dir/ssh_config
tmp=$(mktemp -d)
token=lcl$$r$RANDOM
# The hosts see this machine's files except /tmp, /root and /home: a build tree under /tmp (CI's
# clone) is not there. The binary runs from a copy the hosts and their plain users can reach, so
# that the commands below (and the default command type's own `serve`) find it everywhere.
# (Its path must not hold $token: processes are counted by it.)
lc_ctl_copy
lc_private_home
state=$XDG_RUNTIME_DIR/lazycluster
cleanup() {
  "$ctl" stop --all >/dev/null 2>&1
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT
# json FILE EXPR: a Python expression over d, the JSON in FILE (nothing when it is not JSON).
json() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# gone PID: no such process, or one that ended and waits to be reaped (a zombie holds nothing;
# pid 1 of a container may be slow to reap the supervisors it inherits).
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0; case $st in Z*) return 0 ;; esac; return 1; }
# list [--json]: "$ctl" list into $tmp/list (or list.json), and every cluster it named with its
# state appended to $tmp/lists. A list shows a cluster that ended once, then forgets it; which of
# the test's lists comes first after t's --ttl runs out depends on how fast the machine is.
list() {
  if [ "${1:-}" = --json ]; then
    "$ctl" list --json >"$tmp/list.json" 2>&1
    json "$tmp/list.json" '"\n".join(e["name"] + " " + e["state"] for e in d)' >>"$tmp/lists"
  else
    "$ctl" list >"$tmp/list" 2>&1
    awk '/^[^ ]+ +[a-z]+ / && $1 != "NAME" { print $1, $2 }' "$tmp/list" >>"$tmp/lists"
  fi
}
is_json() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
# The command type with this run's token in every command line, so that its processes (and their
# lifelines) can be counted on every host: the master answers "m-TAG-TOKEN", worker N "wN-TAG-...".
cmds() { # TAG: sets cmd, the options
  cmd=(--master-cmd "exec $ctl serve {master_port} m-$1-$token"
    --worker-cmd "exec $ctl serve {worker_port} w{worker_index}-$1-$token")
}
# Processes of this run (TAG: of one cluster) on host I / here.
host_procs() { # I [TAG]
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -- "${2:+$2-}$token"
}
local_procs() { pgrep -fc -- "${1:+$1-}$token"; }
# The working directories of lazycluster on host I for USER (default root); with SUPERVISOR_PID,
# only that cluster's (their names carry its supervisor's pid: NAME-PID.N.RANDOM).
host_dirs() { # I [USER [SUPERVISOR_PID]]
  local home=/root
  [ -n "${2:-}" ] && home=/home/$2
  "$th" exec "$1" -- sh -c "ls -A $home/.cache/lazycluster 2>/dev/null" | grep -- "${3:+-$3\.}"
}
# nothing_left LABEL TAG SUPERVISOR_PID [USER [HOST...]]: nothing of cluster TAG on the hosts
# numbered HOST (default lab1 and lab2) or here, at once: stop (and run, and a foreground start
# that was told to stop) return only when nothing is left. With $patience (seconds) set, polled
# that long instead: only where the issue gives a limit (the heartbeat limit after a SIGKILL of
# the supervisor).
nothing_left() {
  local label=$1 tag=$2 sup=$3 user=${4:-} i hosts="1 2" now=()
  [ $# -gt 4 ] && { shift 4; hosts="$*"; }
  [ "${patience:-0}" -gt 0 ] && now=(wait_for "$patience")
  for i in $hosts; do
    check "$label: lab$i: no process left" "${now[@]}" [ "$(host_procs $i "$tag")" -eq 0 ]
    check "$label: lab$i: no working directory left" "${now[@]}" [ -z "$(host_dirs $i "$user" "$sup")" ]
  done
  check "$label: no process left here" "${now[@]}" [ "$(local_procs "$tag")" -eq 0 ]
  check "$label: its supervisor is gone" "${now[@]}" gone "$sup"
  check "$label: no state directory entry left" [ ! -e "$state/$tag" ]
}
# Starts a detached cluster NAME (TAG = NAME) with ARGS...; sets rc, and sup (its supervisor).
detached() { # NAME ARGS...
  local name=$1; shift
  cmds "$name"
  "$ctl" start --detach --name "$name" "${cmd[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  sup=$("$ctl" status "$name" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor_pid"])' 2>/dev/null)
}
on2=(-F "$cfg" --hosts "lab1,lab2" --heartbeat 5)

# ---- bad input -------------------------------------------------------------------------------
"$ctl" status nosuch >"$tmp/o" 2>"$tmp/e"; rc=$?
check "status of an unknown name exits 1" [ "$rc" -eq 1 ]
check "status of an unknown name names it" grep -q "nosuch" "$tmp/e"
"$ctl" start --workers 1 --ttl 5x >"$tmp/o" 2>"$tmp/e"; rc=$?
check "--ttl 5x is refused (exit 2), the value quoted" all '[ "$rc" -eq 2 ]' "grep -q \"'5x'\" \"\$tmp/e\""
"$ctl" start --workers 1 --restart sometimes >"$tmp/o" 2>"$tmp/e"; rc=$?
check "--restart sometimes is refused (exit 2), the value quoted" \
  all '[ "$rc" -eq 2 ]' "grep -q \"'sometimes'\" \"\$tmp/e\""
"$ctl" scale a >"$tmp/o" 2>"$tmp/e"; rc=$?
check "scale without --workers is refused (exit 2)" all '[ "$rc" -eq 2 ]' 'grep -q -- --workers "$tmp/e"'
"$ctl" start --workers 1 --name 'bad/name' >"$tmp/o" 2>"$tmp/e"; rc=$?
check "a bad --name is refused (exit 2), the name quoted" all '[ "$rc" -eq 2 ]' 'grep -q "bad/name" "$tmp/e"'
check "nothing was started by bad input" [ -z "$(ls -A "$state" 2>/dev/null)" ]

# ---- start --detach that fails: the cause, exit 1, nothing left ------------------------------
"$ctl" start --detach --name bad --workers 1 --master-cmd "echo oops-$token >&2; exit 3" >"$tmp/o" 2>"$tmp/e"; rc=$?
check "a failing start --detach exits 1" [ "$rc" -eq 1 ]
check "it prints the cause: the master's status and last stderr line" \
  all 'grep -q "exited with status 3" "$tmp/e"' 'grep -q "oops-$token" "$tmp/e"' || show err "$tmp/e"
check "it prints no name/master/logs lines on stdout" [ ! -s "$tmp/o" ]
check "nothing of it is left here (no supervisor, no master, no state entry)" \
  wait_for 10 all '[ "$(pgrep -fc -- "oops-$token")" -eq 0 ]' '[ ! -e "$state/bad" ]'

# ---- two that run beside what follows, on hosts of their own: t with a ttl (lab3), and k, whose
# ---- supervisor will be killed (lab4, lab5)
detached t -F "$cfg" --hosts lab3 --workers 1 --ttl 20s; t_rc=$rc t_sup=$sup
t_started=$(date +%s)
check "t (--ttl 20s) starts" [ "$t_rc" -eq 0 ] || show err "$tmp/t.err"
"$ctl" status t --json >"$tmp/t.json" 2>&1
check "status t shows the time left (0-20 s)" \
  [ "$(json "$tmp/t.json" '0 < d["time_left_s"] <= 20')" = True ]
detached k -F "$cfg" --hosts lab4,lab5 --heartbeat 5 --workers 2; k_sup=$sup
check "k starts" all '[ "$rc" -eq 0 ]' '[ -n "$k_sup" ]'
check "k runs its workers on lab4 and lab5" \
  all '[ "$(host_procs 4 k)" -gt 0 ]' '[ "$(host_procs 5 k)" -gt 0 ]'

# ---- a: start --detach, list, status, env, logs, scale ----------------------------------------
detached a "${on2[@]}" --workers 2; a_sup=$sup
check "start --detach --name a exits 0" [ "$rc" -eq 0 ] || { show out "$tmp/a.out"; show err "$tmp/a.err"; }
check "it prints the name" grep -qx "name a" "$tmp/a.out"
check "it prints the master's address" grep -qE "^master localhost:[0-9]+ on " "$tmp/a.out"
check "it prints where the logs are" grep -qx "logs $state/a/logs" "$tmp/a.out"
check "its supervisor runs" kill -0 "${a_sup:-0}"
check "its supervisor is nobody's child (ppid 1 or a subreaper, not this shell)" \
  [ "$(ps -o ppid= -p "${a_sup:-0}" | tr -d ' ')" != "$$" ]
check "its supervisor has no terminal and leads no session of this shell" \
  all '[ "$(ps -o tty= -p "${a_sup:-0}" | tr -d " ")" = "?" ]' \
  '[ "$(ps -o sid= -p "${a_sup:-0}" | tr -d " ")" != "$(ps -o sid= -p $$ | tr -d " ")" ]'
list
check "list shows a running, 2/2" grep -qE "^a +running +2/2 " "$tmp/list" || show list "$tmp/list"
list --json
check "list --json is valid JSON" is_json "$tmp/list.json" || show list "$tmp/list.json"
check "list --json has a" [ "$(json "$tmp/list.json" '[e["name"] for e in d if e["state"] == "running"].count("a")')" = 1 ]
"$ctl" status a --json >"$tmp/status.json" 2>&1
check "status a --json is valid JSON" is_json "$tmp/status.json" || show status "$tmp/status.json"
check "status a --json has name, state, supervisor_pid, master, workers" \
  [ "$(json "$tmp/status.json" 'all(k in d for k in ("name", "state", "supervisor_pid", "master", "workers"))')" = True ]
check "status a --json: name a, running, 2 workers, its supervisor" \
  [ "$(json "$tmp/status.json" '(d["name"], d["state"], len(d["workers"]), d["supervisor_pid"])')" = "('a', 'running', 2, $a_sup)" ]
"$ctl" status a >"$tmp/status" 2>&1
check "status a (text) names the workers' hosts" grep -q "lab1" "$tmp/status"
"$ctl" env a >"$tmp/env" 2>&1
check "env a prints export lines" grep -q "^export LAZYCLUSTER_MASTER_PORT=" "$tmp/env"
answer=$( (eval "$(cat "$tmp/env")"; exec 3<>"/dev/tcp/127.0.0.1/$LAZYCLUSTER_MASTER_PORT" && head -1 <&3) 2>&1)
check "after eval of env a, LAZYCLUSTER_MASTER_PORT reaches a's master" [ "$answer" = "m-a-$token" ]
check "env a names the cluster" grep -q "^export LAZYCLUSTER_NAME='\?a'\?$" "$tmp/env"
check "a's logs have worker 0's output" wait_for 10 eval "'$ctl' logs a --worker 0 | grep -q 'w0-a-$token listening on'"
"$ctl" logs a --worker 0 --tail 5 >"$tmp/logs" 2>&1; rc=$?
check "logs a --worker 0 --tail 5 exits 0, at most 5 lines, tagged" \
  all '[ "$rc" -eq 0 ]' '[ "$(wc -l <"$tmp/logs")" -le 5 ]' 'grep -qE "^\[lab[12] worker-0\] " "$tmp/logs"'
check "logs a --worker 0 shows no other worker" eval "! grep -q 'worker-1' '$tmp/logs'"
"$ctl" logs a >"$tmp/logs.all" 2>&1
check "logs a has the master, the workers and the events" \
  all 'grep -q "\[localhost master\]" "$tmp/logs.all"' 'grep -q "worker-1\]" "$tmp/logs.all"' \
  'grep -q "workers up: 2/2" "$tmp/logs.all"'

# a taken name
"$ctl" start --detach --name a "${on2[@]}" --workers 1 >"$tmp/o" 2>"$tmp/e"; rc=$?
check "a second start --name a is refused (exit 1)" [ "$rc" -eq 1 ]
check "the refusal names the running one" grep -q "'a' is running.*pid $a_sup" "$tmp/e" || show err "$tmp/e"
"$ctl" start --name a "${on2[@]}" --workers 1 >"$tmp/o" 2>"$tmp/e"; rc=$?
check "a foreground start --name a is refused too" all '[ "$rc" -eq 1 ]' "grep -q \"'a' is running\" \"\$tmp/e\""
check "a still runs its 2 workers" all '[ "$(host_procs 1 a)" -gt 0 ]' '[ "$(host_procs 2 a)" -gt 0 ]'

# b beside a on the same hosts: no port or name collision
detached b "${on2[@]}" --workers 2; b_sup=$sup
check "b starts beside a" [ "$rc" -eq 0 ] || show err "$tmp/b.err"
"$ctl" status b --json >"$tmp/b.json" 2>&1
ports_a=$(json "$tmp/status.json" '" ".join(str(p) for p in sorted([d["master"]["port"]] + [w["port"] for w in d["workers"]]))')
ports_b=$(json "$tmp/b.json" '" ".join(str(p) for p in sorted([d["master"]["port"]] + [w["port"] for w in d["workers"]]))')
check "a and b have 3 ports each, none shared" \
  [ "$(echo $ports_a $ports_b | tr ' ' '\n' | sort -u | wc -l)" -eq 6 ]
bport=$(json "$tmp/b.json" 'd["master"]["port"]')
answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$bport" && head -1 <&3) 2>&1)
check "b's master answers as b's" [ "$answer" = "m-b-$token" ]
list
check "list shows a and b running" grep -qE "^a +running" "$tmp/list" && grep -qE "^b +running" "$tmp/list"

# kill -9 of one of b's workers: restarted (the repair of the cluster layer)
wpid=$(json "$tmp/b.json" 'd["workers"][0]["pid"]')
whost=$(json "$tmp/b.json" 'd["workers"][0]["host"]')
check "b's worker 0 has a pid and a host" all '[ -n "$wpid" ]' '[ "$wpid" != 0 ]' '[ -n "$whost" ]'
"$th" exec "$whost" -- kill -9 "$wpid"
restarted() {
  "$ctl" status b --json >"$tmp/b2.json" 2>/dev/null &&
    [ "$(json "$tmp/b2.json" '(d["workers"][0]["restarts"], d["workers"][0]["state"], d["state"])')" = "(1, 'running', 'running')" ]
}
check "kill -9 of b's worker 0: status shows restarts 1, running (within 60 s)" wait_for 60 restarted ||
  show status "$tmp/b2.json"
check "the restart is in b's events" eval "'$ctl' logs b | grep -q 'worker-0 restarted'"

# scale a to 3, then to 1
"$ctl" scale a --workers 3 >"$tmp/o" 2>"$tmp/e"; rc=$?
check "scale a --workers 3 exits 0" [ "$rc" -eq 0 ] || show err "$tmp/e"
"$ctl" status a --json >"$tmp/s3.json" 2>&1
check "a has 3 workers" [ "$(json "$tmp/s3.json" 'len(d["workers"])')" = 3 ]
serves() { # TAG: serve processes of cluster TAG's workers on lab1 and lab2
  echo $(($("$th" pids 1 | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done | grep -c "^[^ ]*lazyclusterctl serve [0-9]* w[0-9]*-$1-$token") +
    $("$th" pids 2 | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done | grep -c "^[^ ]*lazyclusterctl serve [0-9]* w[0-9]*-$1-$token")))
}
check "3 of a's workers run on the hosts" [ "$(serves a)" -eq 3 ]
"$ctl" scale a --workers 1 >"$tmp/o" 2>"$tmp/e"; rc=$?
check "scale a --workers 1 exits 0" [ "$rc" -eq 0 ] || show err "$tmp/e"
"$ctl" status a --json >"$tmp/s1.json" 2>&1
check "a has 1 worker" [ "$(json "$tmp/s1.json" 'len(d["workers"])')" = 1 ]
check "1 of a's workers runs on the hosts" wait_for 10 [ "$(serves a)" -eq 1 ]

# k's supervisor killed (SIGKILL): checked below, after the heartbeat limit
kill -9 "$k_sup"
k_killed=$(date +%s)

# stop a and b
"$ctl" stop a >"$tmp/o" 2>"$tmp/e"; rc=$?
check "stop a exits 0" [ "$rc" -eq 0 ] || show err "$tmp/e"
nothing_left "stop a" a "$a_sup"
check "b still runs after a's stop" kill -0 "$b_sup"
"$ctl" logs b -f >"$tmp/follow" 2>&1 &
follow_pid=$!
sleep 1
"$ctl" stop b >"$tmp/o" 2>"$tmp/e"; rc=$?
check "stop b exits 0" [ "$rc" -eq 0 ]
check "logs b -f ends by itself once b is gone (within 30 s)" wait_for 30 eval "! kill -0 $follow_pid 2>/dev/null"
check "logs b -f printed b's output and its stop" \
  all 'grep -q "w1-b-$token listening on" "$tmp/follow"' 'grep -q "stopping (asked by" "$tmp/follow"'
nothing_left "stop b" b "$b_sup"

# ---- t: --ttl 20s; k: its supervisor was killed (SIGKILL) ------------------------------------
check "t stops by itself (--ttl 20s, within 90 s)" \
  wait_for $((90 - ($(date +%s) - t_started))) eval "! kill -0 $t_sup 2>/dev/null"
check "t ran at least its 20 s" [ $(($(date +%s) - t_started)) -ge 19 ]
check "k: nothing on lab4 and lab5 within the heartbeat limit (60 s)" \
  wait_for $((60 - ($(date +%s) - k_killed))) eval '[ "$(host_procs 4 k)" -eq 0 ] && [ "$(host_procs 5 k)" -eq 0 ]'
list
check "the lists showed t as ended by its time (expired), once" \
  [ "$(grep -c '^t expired$' "$tmp/lists")" -eq 1 ] || show lists "$tmp/lists"
check "list shows k as gone" grep -qE "^k +gone " "$tmp/list" || show list "$tmp/list"
list
check "the next list shows neither t nor k" eval "! grep -qE '^(t|k) ' '$tmp/list'"
nothing_left "t after its ttl" t "$t_sup" "" 3
patience=20 nothing_left "SIGKILL of k's supervisor" k "$k_sup" "" 4 5

# ---- run -- sh -c 'exit 7' ---------------------------------------------------------------------
cmds r
"$ctl" run -F "$cfg" --hosts lab1 --workers 1 "${cmd[@]}" -- sh -c 'echo "$LAZYCLUSTER_NAME $LAZYCLUSTER_MASTER_ADDR:$LAZYCLUSTER_MASTER_PORT"; exit 7' >"$tmp/run.out" 2>"$tmp/run.err"; rc=$?
check "run -- sh -c 'exit 7' exits 7" [ "$rc" -eq 7 ] || show err "$tmp/run.err"
check "the driver had the cluster's context" grep -qE "^lc-[a-z0-9-]+ localhost:[0-9]+$" "$tmp/run.out" || show out "$tmp/run.out"
check "run: nothing left on lab1" [ "$(host_procs 1 r)" -eq 0 ]
check "run: no working directory on lab1" [ -z "$(host_dirs 1)" ]
check "run: nothing left here, no state entry" all '[ "$(local_procs r)" -eq 0 ]' '[ -z "$(ls -A "$state")" ]'
"$ctl" run --workers 1 "${cmd[@]}" -- sh -c 'kill -TERM $$' >/dev/null 2>&1; rc=$?
check "run: a driver ended by SIGTERM gives 143" [ "$rc" -eq 143 ]

cmds r
: >"$tmp/run2.err"
"$ctl" run --workers 1 "${cmd[@]}" -- sleep 120 >/dev/null 2>"$tmp/run2.err" &
run_pid=$!
check "run -- sleep 120: the cluster comes up" wait_for 30 grep -q "^logs " "$tmp/run2.err"
check "run: the driver runs" wait_for 10 eval "pgrep -x -P $run_pid sleep >/dev/null"
kill -TERM "$run_pid"
wait "$run_pid"; rc=$?
check "run: SIGTERM to run ends the driver too, exit 143 (its SIGTERM)" [ "$rc" -eq 143 ]
check "run: SIGTERM: nothing left here" all '[ "$(local_procs r)" -eq 0 ]' '! pgrep -x -P 1 -f "sleep 120"' '[ -z "$(ls -A "$state")" ]'

# Ctrl-C on a terminal (a pty from script(1)) reaches run and its driver: both stop. script runs
# $SHELL -c, and CI has no SHELL (then /bin/sh): dash, not interactive, dies of the SIGINT itself
# instead of waiting for run's exit status, so the shell is named.
cmds r
printf -v runline '%q ' "$ctl" run --workers 1 "${cmd[@]}" -- sh -c "echo driver-up; exec sleep 97"
(for _ in $(seq 300); do grep -q driver-up "$tmp/tty" 2>/dev/null && break; sleep 0.1; done
  printf '\003'
  for _ in $(seq 300); do grep -q "rc=" "$tmp/tty" 2>/dev/null && break; sleep 0.1; done) | SHELL=/bin/bash script -qec "$runline; echo rc=\$?" /dev/null >"$tmp/tty" 2>&1
check "run: Ctrl-C stops the driver and the cluster, exit 130" grep -q "rc=130" "$tmp/tty" || show tty "$tmp/tty"
check "run: Ctrl-C: it said so" grep -q "stopping (SIGINT)" "$tmp/tty"
check "run: Ctrl-C: nothing left here" \
  all '[ "$(local_procs r)" -eq 0 ]' '! pgrep -f "sleep 97" >/dev/null' '[ -z "$(ls -A "$state")" ]'

# ---- the control socket refuses another user ---------------------------------------------------
detached c --workers 1; c_sup=$sup
check "c starts (this machine)" [ "$rc" -eq 0 ]
chmod 711 "$tmp" "$XDG_RUNTIME_DIR"
runuser -u nobody -- env XDG_RUNTIME_DIR="$XDG_RUNTIME_DIR" HOME=/nonexistent "$ctl" status c >"$tmp/o" 2>"$tmp/e"; rc=$?
check "status c as nobody fails" all '[ "$rc" -ne 0 ]' '! grep -q running "$tmp/o"'
# The socket's mode (0600) and the state directory's (0700) keep nobody out before it could ask;
# open them for this check, so that the supervisor's own SO_PEERCRED check is what refuses.
check "the control socket is 0600" [ "$(stat -c %a "$state/c/control.sock")" = 600 ]
chmod 711 "$state" "$state/c"
chmod 666 "$state/c/control.sock"
runuser -u nobody -- /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"status\n")
print(s.recv(4096).decode(errors="replace"))' "$state/c/control.sock" >"$tmp/o" 2>"$tmp/e"
check "the supervisor answers nobody no status" eval "! grep -q 'running' '$tmp/o'"
chmod 600 "$state/c/control.sock"
chmod 700 "$state" "$state/c" "$XDG_RUNTIME_DIR"
check "the supervisor logged the refusal of uid $(id -u nobody)" \
  wait_for 5 eval "'$ctl' logs c | grep -q 'refused a connection from uid $(id -u nobody)'"
"$ctl" stop c >/dev/null 2>&1
check "c stops" gone "$c_sup"
check "c: nothing left here" all '[ "$(local_procs c)" -eq 0 ]' '[ ! -e "$state/c" ]'

# ---- the supervisor outlives the session that started it (SIGHUP to the whole session) ---------
cmds h
setsid bash -c '"$0" start --detach --name h --workers 1 "${@}" >"'"$tmp"'/h.out" 2>&1; echo $? >"'"$tmp"'/h.rc"; exec sleep 120' "$ctl" "${cmd[@]}" &
h_sess=$!
check "start --detach in a session of its own returns 0" wait_for 30 eval "[ \"\$(cat '$tmp/h.rc' 2>/dev/null)\" = 0 ]"
h_sup=$("$ctl" status h --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor_pid"])' 2>/dev/null)
check "h's supervisor is in another session than the one that started it" \
  [ "$(ps -o sid= -p "${h_sup:-0}" | tr -d ' ')" != "$h_sess" ]
kill -HUP -- "-$h_sess" # the session's process group, as a closing terminal does
{ wait "$h_sess"; } 2>/dev/null
check "the starting session is gone" eval "! kill -0 $h_sess 2>/dev/null"
sleep 1
"$ctl" status h --json >"$tmp/h.json" 2>&1
check "h runs on after its session got SIGHUP and ended" \
  all "kill -0 ${h_sup:-0}" '[ "$(json "$tmp/h.json" "d[\"state\"]")" = running ]'
"$ctl" stop h >/dev/null 2>&1
check "h: stopped, nothing left here" all "gone ${h_sup:-0}" '[ "$(local_procs h)" -eq 0 ]' '[ ! -e "$state/h" ]'

# ---- a worker given up (--restart never): degraded; the master's end: failed ------------------
detached e --workers 2 --restart never; e_sup=$sup
check "e starts (this machine, --restart never)" [ "$rc" -eq 0 ]
"$ctl" status e --json >"$tmp/e.json" 2>&1
kill -9 "$(json "$tmp/e.json" 'd["workers"][1]["pid"]')"
degraded() {
  "$ctl" status e --json >"$tmp/e2.json" 2>/dev/null &&
    [ "$(json "$tmp/e2.json" '(d["state"], d["workers"][1]["state"], d["workers"][0]["state"])')" = "('degraded', 'failed', 'running')" ]
}
check "kill -9 of e's worker 1 under --restart never: e degraded, worker 1 failed, 0 runs (60 s)" \
  wait_for 60 degraded || show status "$tmp/e2.json"
kill -9 "$(json "$tmp/e.json" 'd["master"]["pid"]')"
check "kill -9 of e's master: its supervisor ends (60 s)" wait_for 60 eval "! kill -0 $e_sup 2>/dev/null"
list
check "list shows e failed, once, with why (the master ended)" \
  all 'grep -qE "^e +failed " "$tmp/list"' 'grep -q "^  e: .*master" "$tmp/list"' || show list "$tmp/list"
list
check "then e is gone from list" eval "! grep -q '^e ' '$tmp/list'"
check "e: nothing left here" all '[ "$(local_procs e)" -eq 0 ]' '[ ! -e "$state/e" ]'

# ---- a foreground start, seen and stopped from another shell -----------------------------------
cmds f
: >"$tmp/f.out"
"$ctl" start --name f "${on2[@]}" --workers 2 "${cmd[@]}" >"$tmp/f.out" 2>"$tmp/f.err" &
f_pid=$!
check "the foreground start f is ready" wait_for 60 grep -q "^ready:" "$tmp/f.out" || show err "$tmp/f.err"
"$ctl" status f --json >"$tmp/f.json" 2>&1
check "status f from another shell: running, its pid is the start's" \
  [ "$(json "$tmp/f.json" '(d["state"], d["supervisor_pid"])')" = "('running', $f_pid)" ]
fpid=$(json "$tmp/f.json" 'd["workers"][1]["pid"]')
fhost=$(json "$tmp/f.json" 'd["workers"][1]["host"]')
"$th" exec "$fhost" -- kill -9 "$fpid"
check "the foreground start prints the worker's end and its restart (60 s)" \
  wait_for 60 eval "grep -q '$fhost worker-1 ended' '$tmp/f.err' && grep -q '$fhost worker-1 restarted' '$tmp/f.err'" ||
  show err "$tmp/f.err"
"$ctl" stop f >"$tmp/o" 2>&1; rc=$?
check "stop f exits 0" [ "$rc" -eq 0 ]
wait "$f_pid"; rc=$?
check "the foreground start exits 0 after the stop" [ "$rc" -eq 0 ]
check "it said why it stopped" grep -q "stopping (asked by" "$tmp/f.err"
nothing_left "foreground f" f "$f_pid"

# ---- a plain user whose login shell is fish ----------------------------------------------------
detached fish -F "$cfg" --hosts lcfish@lab1,lcfish@lab2 --heartbeat 5 --workers 2; fish_sup=$sup
check "start --detach on lcfish@lab1,lcfish@lab2 exits 0" [ "$rc" -eq 0 ] || show err "$tmp/fish.err"
"$ctl" status fish --json >"$tmp/fish.json" 2>&1
check "fish: 2 workers running" [ "$(json "$tmp/fish.json" '[w["state"] for w in d["workers"]]')" = "['running', 'running']" ]
"$ctl" stop fish >/dev/null 2>&1; rc=$?
check "stop fish exits 0" [ "$rc" -eq 0 ]
nothing_left "fish" fish "$fish_sup" lcfish 1 2

# ---- Dask: eval "$(lazyclusterctl env d)" and a Client reaches it; run -- python (this machine)
dask_py=python3 # the Python that has Dask (CI: Debian's python3-distributed)
for p in python3 /usr/bin/python3; do
  "$p" -c 'import distributed' 2>/dev/null && { dask_py=$p; break; }
done
client='from dask.distributed import Client; c = Client(timeout=30); print("workers", len(c.scheduler_info()["workers"])); c.close()'
"$ctl" start --detach --name d --type dask --workers 2 >"$tmp/d.out" 2>"$tmp/d.err"; rc=$?
check "start --detach --type dask exits 0" [ "$rc" -eq 0 ] || show err "$tmp/d.err"
"$ctl" env d >"$tmp/d.env" 2>&1
check "env d has DASK_SCHEDULER_ADDRESS, tls://" grep -q "^export DASK_SCHEDULER_ADDRESS='\?tls://127.0.0.1:[0-9]*'\?$" "$tmp/d.env"
# NAME=VALUE among the export lines of env d (the value shell-quoted or not)
envhas() { grep -qxF "export $1='$2'" "$tmp/d.env" || grep -qxF "export $1=$2" "$tmp/d.env"; }
check "env d has the client's TLS files, in d's state entry, and requires encryption" \
  all "envhas DASK_DISTRIBUTED__COMM__TLS__CA_FILE '$state/d/client/dask-ca.pem'" \
  "envhas DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT '$state/d/client/dask-client.pem'" \
  "envhas DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY '$state/d/client/dask-client-key.pem'" \
  "envhas DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION True" || show env "$tmp/d.env"
check "d's client files are 0600 in a 0700 directory" \
  all '[ "$(stat -c %a "$state/d/client")" = 700 ]' \
  '[ "$(stat -c %a "$state/d/client/dask-ca.pem" "$state/d/client/dask-client.pem" "$state/d/client/dask-client-key.pem" | sort -u)" = 600 ]'
(eval "$(cat "$tmp/d.env")"; timeout 60 "$dask_py" -c "$client") >"$tmp/o" 2>&1
check "after eval of env d, Client() sees the 2 workers" grep -qx "workers 2" "$tmp/o" || show out "$tmp/o"
"$ctl" stop d >/dev/null 2>&1; rc=$?
check "stop d exits 0, no state entry left" all '[ "$rc" -eq 0 ]' '[ ! -e "$state/d" ]'
timeout 120 "$ctl" run --type dask --workers 2 -- "$dask_py" -c "$client" >"$tmp/o" 2>"$tmp/e"; rc=$?
check "run --type dask -- python: Client() sees the 2 workers, exit 0" \
  all '[ "$rc" -eq 0 ]' 'grep -qx "workers 2" "$tmp/o"' || show err "$tmp/e"

# ---- stop --all -------------------------------------------------------------------------------
detached g1 --workers 1; g1_sup=$sup
detached g2 --workers 1; g2_sup=$sup
"$ctl" stop --all >"$tmp/o" 2>&1; rc=$?
check "stop --all exits 0 and stops both" all '[ "$rc" -eq 0 ]' 'grep -qx "g1: stopped" "$tmp/o"' 'grep -qx "g2: stopped" "$tmp/o"'
check "stop --all: nothing left here" \
  all "gone $g1_sup" "gone $g2_sup" '[ "$(local_procs g1)" -eq 0 ]' '[ "$(local_procs g2)" -eq 0 ]'

check "the state directory is empty at the end" [ -z "$(ls -A "$state")" ]
for i in 1 2 3 4 5; do
  check "lab$i: no working directory of lazycluster at the end" [ -z "$(host_dirs $i)" ]
done
checks_done
