#!/usr/bin/env bash
# test_cli_cancel.sh - SIGINT stops `lazyclusterctl start` at any moment of its start: during
# discovery (a host whose nvidia-smi hangs), while the master never listens, while the workers
# never listen. Each time: exit 130 within a bound (not a timing: the limits in play are 60-120 s),
# and nothing of the start left on any host (processes, listens, files in /tmp and the home) nor
# here.
set -u
. "$(dirname "$0")/../support/check.sh"
lc_hosts_env
trap 'rm -rf "$tmp"' EXIT
lc_private_home

# What is on host I: its processes' command lines (sshd aside), its listens, /tmp and ~ entries.
state_of() {
  local i=$1 p
  for p in $("$th" pids "$i" --dir "$dir"); do
    tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | grep -v '^sshd\|^/usr/sbin/sshd' && echo
  done | grep -v '^$' | sort
  "$th" exec "$i" --dir "$dir" -- sh -c 'cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk "\$4 == \"0A\" { print \"listen\", \$2 }" | sort; ls -A /tmp /root | grep -vx .cache'
}
snapshot() { for i in 0 1 2; do state_of "$i"; done >"$1"; }
# The hosts are as before (the lifelines told to stop end their groups within the kill grace).
settled() { snapshot "$tmp/now" && cmp -s "$tmp/before" "$tmp/now"; }

# Runs a start in the background, SIGINTs it after $1 seconds; rc and seconds it took after the
# signal in $tmp/rc and $tmp/took.
start_and_interrupt() {
  local after=$1 pid t0 t1
  shift
  "$ctl" start -F "$cfg" "$@" >"$tmp/out" 2>&1 &
  pid=$!
  sleep "$after"
  t0=$(date +%s)
  kill -INT "$pid"
  wait "$pid"
  echo $? >"$tmp/rc"
  t1=$(date +%s)
  echo $((t1 - t0)) >"$tmp/took"
  sed 's/^/    /' "$tmp/out" >&2
  echo "    (ended $((t1 - t0)) s after the signal, rc $(cat "$tmp/rc"))" >&2
}

snapshot "$tmp/before"

# 1. during discovery: lab2's nvidia-smi (first on root's PATH via ~/.bashrc) never ends
"$ctl" exec -F "$cfg" --hosts lab2 -- 'mkdir -p /root/fakebin &&
  printf "#!/bin/sh\ntrap \"\" TERM INT HUP\nwhile :; do sleep 1; done\n" >/root/fakebin/nvidia-smi &&
  chmod 755 /root/fakebin/nvidia-smi && cp /root/.bashrc /root/.bashrc.saved 2>/dev/null;
  echo "export PATH=/root/fakebin:\$PATH" >>/root/.bashrc' >/dev/null 2>&1
check "the fake nvidia-smi is in place on lab2" \
  "$ctl" exec -F "$cfg" --hosts lab2 -- 'command -v nvidia-smi | grep -q fakebin'
# the facts limit (60 s) is far beyond the bound: discovery itself must stop at the signal
start_and_interrupt 3 --hosts lab0,lab1,lab2 --workers 2 --facts-timeout 60 \
  --master-cmd 'sleep 7761' --worker-cmd 'sleep 7762'
check "SIGINT during discovery: exit 130" [ "$(cat "$tmp/rc")" -eq 130 ]
check "SIGINT during discovery: ended within 10 s (facts limit 60 s)" [ "$(cat "$tmp/took")" -lt 10 ]
check "SIGINT during discovery: said so" grep -q 'stopping (SIGINT)' "$tmp/out"
check "SIGINT during discovery: discovery says it stopped" \
  grep -q 'stopped by SIGINT during discovery' "$tmp/out"
check "SIGINT during discovery: no cluster started" sh -c "! grep -q 'master:' '$tmp/out'"

# the same for \`hosts\`, whose discovery has a signal handler instead of a watcher thread
for sub in hosts; do
  "$ctl" "$sub" -F "$cfg" --hosts lab0,lab2 --facts-timeout 60 >"$tmp/out" 2>&1 &
  pid=$!
  sleep 3
  t0=$(date +%s)
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  took=$(($(date +%s) - t0))
  sed 's/^/    /' "$tmp/out" >&2
  check "$sub: SIGINT during discovery: exit 130 (was $rc)" [ "$rc" -eq 130 ]
  check "$sub: SIGINT during discovery: ended within 10 s (took $took)" [ "$took" -lt 10 ]
done
"$ctl" exec -F "$cfg" --hosts lab2 -- 'rm -rf /root/fakebin; if [ -e /root/.bashrc.saved ];
  then mv /root/.bashrc.saved /root/.bashrc; else rm -f /root/.bashrc; fi' >/dev/null 2>&1
sleep 1
wait_for 30 settled
snapshot "$tmp/after1"
check "SIGINT during discovery: nothing left on the hosts" diff "$tmp/before" "$tmp/after1"

# 2. during the master's wait: a master on lab0 that never listens
start_and_interrupt 4 --hosts lab0,lab1 --workers 2 --master-host lab0 \
  --master-timeout 120 --timeout 120 --master-cmd 'sleep 7761' --worker-cmd 'sleep 7762'
check "SIGINT during the master's wait: exit 130" [ "$(cat "$tmp/rc")" -eq 130 ]
check "SIGINT during the master's wait: ended within 40 s" [ "$(cat "$tmp/took")" -lt 40 ]
wait_for 30 settled
snapshot "$tmp/after2"
check "SIGINT during the master's wait: nothing left on the hosts" diff "$tmp/before" "$tmp/after2"

# 3. during the workers' starts: the master (here) listens, the workers never do
start_and_interrupt 6 --hosts lab0,lab1 --workers 2 --master-timeout 120 --timeout 120 \
  --master-cmd "exec '$ctl' serve {master_port} master" --worker-cmd 'sleep 7762'
check "SIGINT during the workers' starts: exit 130" [ "$(cat "$tmp/rc")" -eq 130 ]
check "SIGINT during the workers' starts: ended within 40 s" [ "$(cat "$tmp/took")" -lt 40 ]
wait_for 30 settled
snapshot "$tmp/after3"
check "SIGINT during the workers' starts: nothing left on the hosts" diff "$tmp/before" "$tmp/after3"
check "nothing left here" sh -c "! pgrep -f 'sleep 776[12]|serve 6000[0-9] master' >/dev/null"

checks_done
