#!/usr/bin/env bash
# test_cli_secrets.sh - what others see of a cluster (issue 14), through lazyclusterctl with the
# command type on real test hosts (lab1, lab2) and this machine (the master):
#   - values given with --env (and the cluster's secret) appear in no process's command line on
#     any host or here (ps), nor in the cluster's logs and state directory, nor in a failed
#     start's error message; the workers did get them;
#   - on the hosts: working directories 0700, the secret and cluster.json 0600 (cluster.json is
#     JSON and holds the same secret as LAZYCLUSTER_SECRET_FILE), what the workers make has umask
#     077; with --umask 022 their files are 0644 while ours stay 0600 and 0700; the master here
#     (on the cluster's own runtime) gets the same umask as the workers;
#   - after every stop: nothing of it left on any host (processes, working directories) or here.
set -u
. "$(dirname "$0")/../support/check.sh"
lc_hosts_env
label=lcs$$r$RANDOM
# the hosts see this machine's files except /tmp, /root and /home: the binary runs from /var/tmp
lc_ctl_copy
lc_private_home
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  for p in $(pgrep -f -- "$label"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT
rand() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# Command lines of every process on host I, one a line.
host_cmdlines() { "$th" pids "$1" | while read -r p; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done; }
# How many command lines contain S (letters and digits) on host I, or here (I = here; pgrep
# leaves itself out).
seen() { # I S
  if [ "$1" = here ]; then pgrep -fc -- "$2"; else host_cmdlines "$1" | grep -cF -- "$2"; fi
}
on_host() { "$th" exec "$1" -- sh -c "$2"; }
# Starts `start ARGS...` in the background and waits for its "ready:" line.
start() {
  ("$ctl" start "$@") >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 600); do
    grep -q '^ready:' "$tmp/out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
stop() { kill -INT "$pid"; wait "$pid"; rc=$?; pid=; }
show() { sed 's/^/  out: /' "$tmp/out" >&2; sed 's/^/  err: /' "$tmp/err" >&2; }
# nothing_left LABEL: no process of this run on lab1, lab2 or here; no working directory there
nothing_left() {
  for i in 1 2; do
    check "$1: lab$i: no process left" [ "$(seen $i "$label")" -eq 0 ]
    check "$1: lab$i: no working directory left" \
      [ -z "$(on_host $i 'ls -A /root/.cache/lazycluster 2>/dev/null')" ]
  done
  check "$1: no process left here" [ "$(seen here "$label")" -eq 0 ]
  check "$1: no working directory left here" [ -z "$(ls -A "$HOME/.cache/lazycluster" 2>/dev/null)" ]
}
# The mode of PATH on host I (octal, as stat %a prints it).
mode() { on_host "$1" "stat -c %a $2"; }
wcmd="umask > umask.txt; : > made.txt; printf %s \"\$TOKEN\" > token.txt; exec $ctl serve {worker_port} w{worker_index}-$label"
mcmd="umask > umask.txt; exec $ctl serve {master_port} m-$label"

# ---- a cluster with two values: TOKEN from this environment (--env TOKEN), TOKEN2 on the
# ---- command line (--env TOKEN2=...)
value=$(rand) value2=$(rand)
export TOKEN=$value
start -F "$cfg" --hosts lab1,lab2 --workers 2 --env TOKEN --env "TOKEN2=$value2" \
  --master-cmd "$mcmd" --worker-cmd "$wcmd"; ok=$?
check "start with --env: ready" [ "$ok" -eq 0 ] || show
secret=$(on_host 1 'cat /root/.cache/lazycluster/*/worker-*/secret' | head -1)
check "the workers' secret is there: 64 hex characters" eval '[ "${#secret}" -eq 64 ] && [ -z "${secret//[0-9a-f]/}" ]'
for i in 1 2; do
  got=$(on_host $i 'cat /root/.cache/lazycluster/*/worker-*/token.txt')
  check "lab$i: the worker got TOKEN" [ "$got" = "$value" ]
  check "lab$i: TOKEN's value is in no command line" [ "$(seen $i "$value")" -eq 0 ]
  check "lab$i: TOKEN2's value is in no command line" [ "$(seen $i "$value2")" -eq 0 ]
  check "lab$i: the secret is in no command line" [ "$(seen $i "$secret")" -eq 0 ]
  check "lab$i: the cluster's processes run" [ "$(seen $i "w")" -gt 0 ]
done
check "here: TOKEN's value is in no command line" [ "$(seen here "$value")" -eq 0 ]
check "here: the secret is in no command line" [ "$(seen here "$secret")" -eq 0 ]
# (TOKEN2's value is in this start's own command line here, where it was typed)

# modes on the hosts
for i in 1 2; do
  wd=$(on_host $i 'ls -d /root/.cache/lazycluster/*' | head -1)
  w=$(on_host $i "ls -d $wd/worker-*" | head -1)
  check "lab$i: the working directory is 0700" [ "$(mode $i "$wd")" = 700 ]
  check "lab$i: the worker's directory is 0700" [ "$(mode $i "$w")" = 700 ]
  check "lab$i: the secret is 0600" [ "$(mode $i "$w/secret")" = 600 ]
  check "lab$i: cluster.json is 0600" [ "$(mode $i "$w/cluster.json")" = 600 ]
  check "lab$i: a worker's own file is 0600 (umask 077)" [ "$(mode $i "$w/made.txt")" = 600 ]
  check "lab$i: the worker's umask is 0077" [ "$(on_host $i "cat $w/umask.txt")" = 0077 ]
  on_host $i "cat $w/cluster.json" >"$tmp/cluster.json"
  check "lab$i: cluster.json is JSON and has the secret of LAZYCLUSTER_SECRET_FILE" \
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$tmp/cluster.json" 2>&1)" = "$secret" ]
done
mwd=$(ls -d "$HOME"/.cache/lazycluster/* | head -1)
check "here: the master's directory is 0700 and its secret 0600, the same secret" \
  eval '[ "$(stat -c %a "$mwd")" = 700 ] && [ "$(stat -c %a "$mwd/secret")" = 600 ] && [ "$(cat "$mwd/secret")" = "$secret" ]'
check "here: the master's umask is 0077" [ "$(cat "$mwd/umask.txt")" = 0077 ]

# logs and state: no value, no secret
check "the logs and state hold neither value nor the secret" \
  not grep -rqF -e "$value" -e "$value2" -e "$secret" "$XDG_RUNTIME_DIR" "$tmp/out" "$tmp/err"
stop
check "stop: exit 0" [ "$rc" -eq 0 ] || show
nothing_left "after the stop"

# ---- a failed start: its message has no value
start -F "$cfg" --hosts lab1 --workers 1 --env TOKEN --env "TOKEN2=$value2" \
  --master-cmd "echo failing-$label >&2; exit 3" --worker-cmd "$wcmd"; ok=$?
wait "$pid"; rc=$?; pid=
check "a failing start exits 1" [ "$rc" -eq 1 ] || show
check "its message names the master's end" grep -q "failing-$label" "$tmp/err"
check "its message holds no value" not grep -qF -e "$value" -e "$value2" "$tmp/out" "$tmp/err"
check "the state holds no value after it" not grep -rqF -e "$value" -e "$value2" "$XDG_RUNTIME_DIR"
nothing_left "after the failed start"

# ---- --umask 022: the workers' files 0644; ours stay 0600 in 0700 directories
start -F "$cfg" --hosts lab1,lab2 --workers 2 --umask 022 --master-cmd "$mcmd" --worker-cmd "$wcmd"; ok=$?
check "start --umask 022: ready" [ "$ok" -eq 0 ] || show
for i in 1 2; do
  wd=$(on_host $i 'ls -d /root/.cache/lazycluster/*' | head -1)
  w=$(on_host $i "ls -d $wd/worker-*" | head -1)
  check "--umask 022: lab$i: the worker's umask is 0022" [ "$(on_host $i "cat $w/umask.txt")" = 0022 ]
  check "--umask 022: lab$i: a worker's own file is 0644" [ "$(mode $i "$w/made.txt")" = 644 ]
  check "--umask 022: lab$i: directories stay 0700" \
    eval '[ "$(mode $i "$wd")" = 700 ] && [ "$(mode $i "$w")" = 700 ]'
  check "--umask 022: lab$i: the secret and cluster.json stay 0600" \
    eval '[ "$(mode $i "$w/secret")" = 600 ] && [ "$(mode $i "$w/cluster.json")" = 600 ]'
done
mwd=$(ls -d "$HOME"/.cache/lazycluster/* | head -1)
check "--umask 022: here: the master (on this machine) has umask 0022 too" \
  [ "$(cat "$mwd/umask.txt")" = 0022 ]
check "--umask 022: here: the master's directory stays 0700, its secret 0600" \
  eval '[ "$(stat -c %a "$mwd")" = 700 ] && [ "$(stat -c %a "$mwd/secret")" = 600 ]'
stop
check "--umask 022: stop: exit 0" [ "$rc" -eq 0 ] || show
nothing_left "--umask 022: after the stop"

checks_done
