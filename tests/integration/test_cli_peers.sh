#!/usr/bin/env bash
# test_cli_peers.sh - lazyclusterctl --peers (issue 14): who may connect to our listeners on this
# machine. nobody (uid 65534) connects to `forward --local -L` and to the master's port here of a
# detached cluster whose master runs on lab0: it gets no byte, the refusal is reported (on
# forward's stderr; in the cluster's log, through `logs`), root (the owner) still gets through;
# --peers any lets nobody in; a bad value is a usage error. Nothing is left running afterwards.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
cfg=$dir/ssh_config
tmp=$(mktemp -d)
token=lcp$$r$RANDOM
# the hosts (and nobody) run the binary from a copy they can reach; its path must not hold $token
lc_ctl_copy
lc_private_home
cleanup() {
  "$ctl" stop --all >/dev/null 2>&1
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT
# What 127.0.0.1:PORT sends to a connection made as USER (root or nobody) until it closes.
answer_as() { # USER PORT
  local run=()
  [ "$1" = nobody ] && run=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  "${run[@]}" timeout 20 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && cat <&3' _ "$2" 2>/dev/null
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host_procs() { # I: processes of this run on host I
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -- "$token"
}
local_procs() { pgrep -fc -- "$token"; }

# ---- forward --local -------------------------------------------------------------------------
tport=$(free_port)
"$ctl" serve "$tport" "target-$token" >/dev/null 2>&1 &
target=$!
wait_for 10 eval "answer_as root $tport | grep -q target-$token"

forward() { # PEERS_ARGS...: starts `forward --local -L PORT:127.0.0.1:TPORT`; sets fport, fpid
  fport=$(free_port)
  : >"$tmp/fwd.err"
  "$ctl" forward --local "$@" -L "$fport:127.0.0.1:$tport" 2>"$tmp/fwd.err" &
  fpid=$!
  wait_for 10 grep -q 'up: listening' "$tmp/fwd.err"
}
forward
check "forward: nobody gets no byte" eval '[ -z "$(answer_as nobody "$fport")" ]'
check "forward: the refusal is reported on stderr, naming the port and uid 65534" \
  wait_for 10 grep -q "127.0.0.1:$fport: refused a connection from uid 65534 (nobody): only uid 0 (root) may connect" "$tmp/fwd.err"
check "forward: root gets through" eval '[ "$(answer_as root "$fport")" = "target-$token" ]'
kill "$fpid"; wait "$fpid"
sed 's/^/  forward: /' "$tmp/fwd.err" >&2

forward --peers any
check "forward --peers any: nobody gets through" eval '[ "$(answer_as nobody "$fport")" = "target-$token" ]'
check "forward --peers any: nothing refused" eval '! grep -q refused "$tmp/fwd.err"'
kill "$fpid"; wait "$fpid"

"$ctl" forward --local --peers everyone -L "1:127.0.0.1:$tport" >"$tmp/o" 2>"$tmp/e"; rc=$?
check "forward --peers everyone: a usage error" \
  eval '[ "$rc" -eq 2 ] && grep -q "want owner, owner+root or any" "$tmp/e"'
kill "$target"; wait "$target" 2>/dev/null

# ---- a detached cluster whose master runs on lab0 ---------------------------------------------
name=pe-$token
"$ctl" start --detach --workers 1 --name "$name" -F "$cfg" --hosts lab0 --master-host lab0 \
  --master-port 62450 --ports 62451-62470 \
  --master-cmd "exec $ctl serve {master_port} m-$token" \
  --worker-cmd "exec $ctl serve {worker_port} w-$token" >"$tmp/start.out" 2>"$tmp/start.err"; rc=$?
check "start --detach with the master on lab0" eval '[ "$rc" -eq 0 ]'
[ "$rc" -eq 0 ] || sed 's/^/  start: /' "$tmp/start.err" >&2
mport=$(sed -n 's/^master localhost:\([0-9]*\) .*/\1/p' "$tmp/start.out")
check "start: the master's port here is known" eval '[ -n "$mport" ]'
check "cluster: nobody gets no byte from the master" eval '[ -z "$(answer_as nobody "${mport:-1}")" ]'
check "cluster: the refusal is in the cluster's log (uid 65534, the port)" \
  wait_for 10 eval "'$ctl' logs '$name' 2>&1 | grep -q '127.0.0.1:${mport:-1}: refused a connection from uid 65534 (nobody)'"
check "cluster: the refusal is in the supervisor's log" \
  eval "grep -q 'refused a connection from uid 65534' '$XDG_RUNTIME_DIR/lazycluster/$name/supervisor.log'"
check "cluster: root reaches the master" eval '[ "$(answer_as root "${mport:-1}")" = "m-$token" ]'
"$ctl" stop "$name" >/dev/null 2>&1
check "cluster: nothing left on lab0" eval '[ "$(host_procs 0)" -eq 0 ]'
check "cluster: nothing left here" eval '[ "$(local_procs)" -eq 0 ]'

checks_done
