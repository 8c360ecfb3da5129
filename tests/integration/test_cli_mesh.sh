#!/usr/bin/env bash
# test_cli_mesh.sh - a start with the worker mesh (expose=mesh) and otherwise the defaults, on four
# hosts, one of which (lab4) has no perl (hidden by a bind mount in its mount namespace), as a user
# runs it: every worker answers on every host. On lab1-lab3 the other hosts' worker ports are
# held by the mesh relay (one perl process per host, one sshd listen: its carrier), on lab4 by
# sshd's own listens (the fallback). The relay killed on lab2 is made again by the cluster and
# the workers answer there again. Ctrl-C: nothing of the cluster left on any host nor here.
set -u
. "$(dirname "$0")/../support/check.sh"
lc_hosts_env
token=lcm$$r$RANDOM
lc_ctl_copy
lc_private_home
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  "$th" exec 4 -- umount /usr/bin/perl 2>/dev/null
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT
hosts="1 2 3 4"
# Processes of this cluster on host I (the workers' command lines carry the token; the relay is
# "perl /dev/fd/3").
host_procs() { # I
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -e "$token" -e "perl /dev/fd/3"
}
nothing_left() {
  for h in $hosts; do [ "$(host_procs "$h")" = 0 ] || return 1; done
  [ "$(pgrep -fc -- "$token")" = 0 ]
}
# Who listens on 127.0.0.1:PORT on host I (a process name), from ss.
listener() { # I PORT
  "$th" exec "$1" -- ss -ltnpH "sport = :$2" | sed -n 's/.*users:(("\([^"]*\)".*/\1/p' | head -1
}

check "perl is hidden on lab4" "$th" exec 4 -- mount --bind /dev/null /usr/bin/perl
check "and still here" test -x /usr/bin/perl
"$ctl" start -F "$cfg" --hosts lab1,lab2,lab3,lab4 --workers 8 --type-arg expose=mesh \
  --name "$token" --master-cmd "exec $ctl serve {master_port} m-$token" \
  --worker-cmd "exec $ctl serve {worker_port} w{worker_index}-$token" \
  >"$tmp/out" 2>"$tmp/err" </dev/null &
pid=$!
check "start is ready" wait_for 120 grep -q "^ready:" "$tmp/out" || { show out "$tmp/out"; show err "$tmp/err"; }
# "worker-3   localhost:60004 on lab4 gpu -" -> "3 60004 lab4"
sed -n 's/^worker-\([0-9]*\) *localhost:\([0-9]*\) on \(lab[0-9]*\).*/\1 \2 \3/p' "$tmp/out" >"$tmp/workers"
check "8 workers on the four hosts" test "$(wc -l <"$tmp/workers")" = 8
# Every worker's name, asked on host I's localhost at its port: what does not answer.
silent_on() { # I
  local n p h bad=
  while read -r n p h; do
    [ "$("$th" exec "$1" -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$p"' && read -r -t 5 l <&3 &&
      echo "$l"' 2>/dev/null)" = "w$n-$token" ] || bad="$bad worker-$n"
  done <"$tmp/workers"
  echo "$bad"
}
for h in $hosts; do
  check "every worker answers on lab$h" test -z "$(silent_on "$h")" || echo "  silent on lab$h:$(silent_on "$h")" >&2
done
# The other hosts' workers' ports: the relay's on lab1-lab3, sshd's on lab4.
holders() { # I: "NAME" per port of a worker on another host
  local n p h
  while read -r n p h; do [ "$h" = "lab$1" ] || listener "$1" "$p"; done <"$tmp/workers" | sort | uniq -c | awk '{ print $2 "=" $1 }' | tr '\n' ' '
}
for h in 1 2 3; do
  check "on lab$h the mesh's ports are the relay's" test "$(holders "$h")" = "perl=6 "
  check "one relay on lab$h" test "$("$th" pids "$h" | while read -r p; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -c "perl /dev/fd/3")" = 1
done
check "on lab4 (no perl) they are sshd's" test "$(holders 4)" = "sshd=6 "
# The relay on lab2 dies: the cluster makes it again, and lab2 reaches every worker again.
relay_pid() { # I: the pid of the relay on host I, or nothing
  local p
  for p in $("$th" pids "$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^perl /dev/fd/3" && echo "$p"
  done
}
old=$(relay_pid 2)
check "the relay on lab2 is killed" "$th" exec 2 -- pkill -KILL -f "perl /dev/fd/3"
new_relay() { local p; p=$(relay_pid 2); [ -n "$p" ] && [ "$p" != "$old" ]; }
check "a new relay runs on lab2" wait_for 60 new_relay
lab2_answers() { [ -z "$(silent_on 2)" ]; }
check "every worker answers on lab2 again" wait_for 30 lab2_answers
check "through the new relay" test "$(holders 2)" = "perl=6 "
check "no worker was restarted for it" not grep -q "restarted\|ended" "$tmp/err"
kill -INT "$pid"
wait "$pid"
rc=$?
pid=
check "the start ended (exit $rc, not killed)" test "$rc" -lt 128 -o "$rc" = 130
check "nothing left on lab1-lab4 nor here" wait_for 30 nothing_left
for h in $hosts; do [ "$(host_procs "$h")" = 0 ] || echo "  left on lab$h: $(host_procs "$h")" >&2; done
[ "$failed" -eq 0 ] || { show out "$tmp/out"; show err "$tmp/err"; }
checks_done
