#!/usr/bin/env bash
# test_cli_silent.sh - a lazyclusterctl that is alive but silent past the heartbeat limit (stopped
# with SIGSTOP, as a machine too busy to run it, or a debugger, would leave it): the worker on the
# host ends through its lifeline, and the reason reaches the user instead of a bare "ended by
# signal 15": the lifeline says it heard no heartbeat. Then Ctrl-C stops the start, and nothing
# of it is left on the host or here. Before the fix: a bare "ended by signal 15", and every
# restart failed ("the cluster's context is not there": the lifeline of the working directory's
# keeper had removed it) until the start gave up.
set -u
. "$(dirname "$0")/../support/check.sh"
lc_hosts_env
token=lcs$$r$RANDOM
lc_ctl_copy
lc_private_home
pid=
cleanup() {
  [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT
# Processes of this test on host I / here (their command lines carry the token).
host_procs() { # I
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -- "$token"
}
nothing_left() { [ "$(host_procs 3)" = 0 ] && [ "$(pgrep -fc -- "$token")" = 0 ]; }

# --heartbeat 4: the lifeline's watchdog ends the worker after 6-8 s without a heartbeat (the
# keepalive, 30 s, keeps the connection through the 15 s of silence below).
"$ctl" start -F "$cfg" --hosts lab3 --workers 1 --heartbeat 4 --name "$token" \
  --master-cmd "exec $ctl serve {master_port} m-$token" \
  --worker-cmd "exec $ctl serve {worker_port} w-$token" >"$tmp/out" 2>"$tmp/err" </dev/null &
pid=$!
check "start is ready" wait_for 120 grep -q "^ready:" "$tmp/out" || { show out "$tmp/out"; show err "$tmp/err"; }
check "the worker runs on lab3" test "$(host_procs 3)" -gt 0
port=$(sed -n 's/^worker-0 *localhost:\([0-9]*\) on lab3.*/\1/p' "$tmp/out")
answers() { # the worker on lab3's localhost: `serve` says its name
  [ "$("$th" exec 3 -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$port"' && read -r -t 5 l <&3 &&
    echo "$l"' 2>/dev/null)" = "w-$token" ]
}
check "the worker answers on lab3's port $port" wait_for 30 answers
kill -STOP "$pid"
sleep 15 # past the heartbeat limit: the watchdog ends the worker meanwhile
check "the worker ended on lab3 while lazyclusterctl was stopped" test "$(host_procs 3)" = 0
kill -CONT "$pid"
told() { grep -q "^lab3 worker-0 ended: it was ended by signal 15 by its lifeline: no heartbeat for over 4 s" "$tmp/err"; }
check "lazyclusterctl says the worker's lifeline heard no heartbeat" wait_for 60 told
# Its lifeline's cleanup removed the working directory (the keeper's too): the worker's restart
# finds the directory and the cluster's context there again.
check "the worker restarted" wait_for 60 grep -q "^lab3 worker-0 restarted" "$tmp/err"
check "the restarted worker answers on lab3's port $port" wait_for 60 answers
check "no restart failed" not grep -q "exited with status 125\|given up" "$tmp/err"
kill -INT "$pid"
wait "$pid"
rc=$?
pid=
check "the start ended (exit $rc, not killed)" test "$rc" -lt 128 -o "$rc" = 130
check "nothing left on lab3 nor here" wait_for 30 nothing_left
[ "$failed" -eq 0 ] || { show out "$tmp/out"; show err "$tmp/err"; }
checks_done
