#!/usr/bin/env bash
# test_testhosts_pidns.sh - test hosts with a PID namespace each (tests/support/testhosts up
# --pid-ns, the scale benchmark's hosts): a host's pid 1 is its reaper and `ps` there shows only
# its own processes; `exec` and logins run inside it, as root and as a plain user whose login
# shell is fish; the lifeline's /proc/loadavg counts the host's own PIDs; sshd-pid names the
# listening sshd as this machine counts, and stop-sshd / start-sshd work on it; `down` leaves no
# process, namespace or mount of these hosts. Its own two hosts in a directory of its own, beside
# the fixture's.
set -u
. "$(dirname "$0")/../support/check.sh"
th=${LC_TESTHOSTS:?run through ctest}
pdir=${LC_TESTHOSTS_DIR:?run through ctest}-pidns
tmp=$(mktemp -d)
trap '"$th" down --dir "$pdir" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
rssh() { ssh -F "$pdir/ssh_config" -o BatchMode=yes -o ConnectTimeout=10 "$@" </dev/null; }

check "up 2 --pid-ns" "$th" up 2 --dir "$pdir" --pid-ns >"$tmp/up.out" 2>"$tmp/up.err" ||
  show up "$tmp/up.err"
inits=()
for i in 0 1; do
  read -r p <"$pdir/hosts/$i/init.pid" || p=
  inits+=("$p")
  check "lab$i: its pid 1 runs (pid $p here)" [ "$(tr -d '\0' <"/proc/$p/cmdline" 2>/dev/null)" == lc-testhost-init ]
done
check "the two hosts have two PID namespaces, neither this machine's" \
  all '[ "$(readlink /proc/${inits[0]}/ns/pid)" != "$(readlink /proc/${inits[1]}/ns/pid)" ]' \
      '[ "$(readlink /proc/${inits[0]}/ns/pid)" != "$(readlink /proc/self/ns/pid)" ]'

check "pids: lab0's own processes, its listening sshd alone on a quiet host" \
  [ "$("$th" pids 0 --dir "$pdir")" == "$("$th" sshd-pid 0 --dir "$pdir")" ]

# exec: inside the namespace, pid 1 is the reaper, and ps shows only the host's processes
"$th" exec 0 --dir "$pdir" -- sh -c 'echo "self=$$"; ps -e -o pid=,comm= ; read -r _ _ _ _ l </proc/loadavg; echo "last=$l"' >"$tmp/exec.out" 2>&1
check "exec: its shell has a small pid of the host's own" grep -Eq '^self=[0-9]{1,3}$' "$tmp/exec.out"
check "exec: ps shows pid 1 as the reaper" grep -Eq '^ +1 lc-testhost-ini' "$tmp/exec.out"
check "exec: ps shows sshd and not this machine's processes (no ctest)" \
  all 'grep -q " sshd$" "$tmp/exec.out"' '! grep -q ctest "$tmp/exec.out"'
check "exec: /proc/loadavg's last PID is the host's (under 1000)" grep -Eq '^last=[0-9]{1,3}$' "$tmp/exec.out"

# logins, as root and as lcfish (fish, whose sh -c sees the host's /proc)
rssh lab1 'echo $$; ps -e -o comm=' >"$tmp/root.out" 2>&1
check "root logs in on lab1, its shell a host pid; ps lists no ctest" \
  all 'grep -Eq "^[0-9]{1,3}$" "$tmp/root.out"' '! grep -q ctest "$tmp/root.out"'
rssh lcfish@lab1 "sh -c 'id -un; ps -e -o comm= | head -n 1'" >"$tmp/fish.out" 2>&1
check "lcfish logs in on lab1 and sees the reaper as the first process" \
  all 'grep -qx lcfish "$tmp/fish.out"' 'grep -qx lc-testhost-ini "$tmp/fish.out"'

# sshd-pid, stop-sshd, start-sshd
sp=$("$th" sshd-pid 1 --dir "$pdir")
check "sshd-pid names lab1's listening sshd here" [ "$(readlink "/proc/$sp/exe")" == /usr/sbin/sshd ]
check "sshd-pid: its pid in the host is the one sshd wrote" \
  grep -Eq "^NSpid:[[:space:]]+${sp}[[:space:]]+$(cat "$pdir/hosts/1/sshd.pid")\$" "/proc/$sp/status"
# exec passes stdin, the exit status and a SIGTERM on to its command (nsenter forks into the
# PID namespace: without passing it on, the command would outlive a kill of exec)
check "exec passes stdin and the exit status" \
  all '[ "$(echo hi | "$th" exec 0 --dir "$pdir" -- cat)" == hi ]' \
  '"$th" exec 0 --dir "$pdir" -- sh -c "exit 7"; [ $? -eq 7 ]'
"$th" exec 0 --dir "$pdir" -- sleep 4821 &
ex=$!
sleeping() { "$th" pids 0 --dir "$pdir" | while read -r p; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -c '^sleep 4821'; }
check "exec's command runs in lab0" wait_for 10 eval '[ "$(sleeping)" -eq 1 ]'
kill "$ex"
wait "$ex"
check "kill of exec ends it with its command's status (143)" [ $? -eq 143 ]
check "and its command is gone from lab0" wait_for 5 eval '[ "$(sleeping)" -eq 0 ]'

# pid-here: the host's own count to this machine's, and bad input
check "pid-here turns the pid in lab1's sshd.pid into sshd-pid's" \
  [ "$("$th" pid-here 1 "$(cat "$pdir/hosts/1/sshd.pid")" --dir "$pdir")" == "$sp" ]
check "pid-here of a pid that lab0 does not have fails, naming the host and the pid" \
  all 'not "$th" pid-here 0 999999 --dir "$pdir" >/dev/null 2>"$tmp/ph.err"' \
  'grep -q "lab0: no process 999999" "$tmp/ph.err"'
check "pid-here: lab1's pid 1 (the reaper, as lab1 counts it) is this machine's init.pid" \
  [ "$("$th" pid-here 1 1 --dir "$pdir")" == "${inits[1]}" ]
check "pid-here without a pid, or with a word, is refused" \
  all 'not "$th" pid-here 0 --dir "$pdir" 2>/dev/null' 'not "$th" pid-here 0 abc --dir "$pdir" 2>/dev/null'
"$th" stop-sshd 1 --dir "$pdir" 2>"$tmp/stop.err"
check "stop-sshd: lab1's sshd is gone, no login" \
  all '[ ! -e /proc/'"$sp"' ] || grep -q "^State:.*Z" /proc/'"$sp"'/status' 'not rssh lab1 true 2>/dev/null'
check "start-sshd: lab1 takes logins again" "$th" start-sshd 1 --dir "$pdir"
check "start-sshd: the new sshd is in lab1's PID namespace" \
  [ "$(readlink "/proc/$("$th" sshd-pid 1 --dir "$pdir")/ns/pid")" == "$(readlink "/proc/${inits[1]}/ns/pid")" ]
check "lab1 answers after the restart" rssh lab1 true
check "--pid-ns is refused by other subcommands" not "$th" exec 0 --dir "$pdir" --pid-ns -- true 2>/dev/null

# down: nothing of these hosts is left
check "down" "$th" down --dir "$pdir"
# (a pid 1 that was killed first ends every process of its namespace, then itself: a moment)
check "no process of the hosts is left (their pid 1s included), nothing mounted, no DIR" \
  all 'wait_for 10 all "[ ! -e /proc/${inits[0]} ]" "[ ! -e /proc/${inits[1]} ]"' \
      '! grep -qs "$pdir" /proc/self/mountinfo' '[ ! -e "$pdir" ]'
checks_done
