#!/usr/bin/env bash
# test_example_dask_cluster.sh - runs examples/dask_cluster against two test hosts (lab0, lab1;
# 2 workers, the scheduler on this machine) and checks what it prints: the scheduler's address
# (tls://: mutual TLS by default), the client's files' directory (gone afterwards), one worker
# on each host, the Dask client's result (sum of squares 0..9 = 285) and the hosts the
# workers ran on; then that nothing is left: no Dask (python) process on either host and no
# working directory of the example's run there or here. The example sets no start limits: the
# dask type's own are the ones it runs with.
set -u
. "$(dirname "$0")/../support/check.sh"
bin=${LC_DASK_CLUSTER:?LC_DASK_CLUSTER names the dask_cluster example binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The example's client runs `python3`: make it the interpreter Dask is installed for when the
# first python3 in PATH (a virtualenv, pyenv) has no Dask.
if ! python3 -c 'import distributed' 2>/dev/null; then
  py=$(sed -n '1s/^#!//p' "$(command -v dask || command -v dask-scheduler)" 2>/dev/null)
  [ -n "$py" ] && [ -x "$py" ] && PATH=$(dirname "$py"):$PATH
  echo "note: python3 in PATH has no Dask; using ${py:-?}" >&2
fi

# (the shell records the example's pid, which names its working directories, then becomes it)
timeout 240 sh -c 'echo $$ >"$0"; exec "$@"' "$tmp/pid" \
  "$bin" -F "$dir/ssh_config" -n 2 lab0 lab1 >"$tmp/out" 2>"$tmp/err"; rc=$?
pid=$(cat "$tmp/pid")
sed 's/^/  out: /' "$tmp/out" >&2
sed 's/^/  err: /' "$tmp/err" >&2

check "it exits 0" [ "$rc" -eq 0 ]
check "it prints the scheduler's address, tls://" grep -qE '^scheduler: tls://127\.0\.0\.1:[0-9]+$' "$tmp/out"
check "its client connected with TLS" grep -qE '^  client connected to tls://127\.0\.0\.1:[0-9]+$' "$tmp/out"
cdir=$(sed -n 's/^client files: //p' "$tmp/out")
check "it names the client's files' directory" [ -n "$cdir" ]
check "the client's files' directory went with the cluster" sh -c '[ -n "$1" ] && [ ! -e "$1" ]' _ "$cdir"
check "worker 0 is on lab0" grep -qE '^worker 0: on lab0, port [0-9]+ \(nanny [0-9]+\)$' "$tmp/out"
check "worker 1 is on lab1" grep -qE '^worker 1: on lab1, port [0-9]+ \(nanny [0-9]+\)$' "$tmp/out"
check "the client's result is 285" grep -qx '  sum of squares 0..9: 285' "$tmp/out"
check "the workers ran on lab0 and lab1" grep -qx '  workers run on: lab0 lab1' "$tmp/out"
check "it stops the cluster" grep -qx 'done: stopping the cluster' "$tmp/out"

prefix="$(hostname)-$pid."
for i in 0 1; do
  # the lifelines end the process groups as the runtimes go: allow them their kill grace (3 s)
  for _ in $(seq 100); do
    procs=$("$th" pids $i | while read -r p; do
      tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -c 'python')
    [ "$procs" -eq 0 ] && break
    sleep 0.1
  done
  check "lab$i: no Dask process left (within 10 s)" [ "$procs" -eq 0 ]
  left=$(ls -A "$dir/hosts/$i/home/.cache/lazycluster" 2>/dev/null | grep -F "$prefix")
  check "lab$i: no working directory left" [ -z "$left" ]
done
left=$(ls -A "${XDG_CACHE_HOME:-$HOME/.cache}/lazycluster" 2>/dev/null | grep -F "$prefix")
check "here: no working directory left" [ -z "$left" ]
port=$(sed -nE 's/^scheduler: tls:\/\/127\.0\.0\.1:([0-9]+)$/\1/p' "$tmp/out")
if [ -n "$port" ]; then
  for _ in $(seq 100); do
    left=$(pgrep -af 'dask[ -]scheduler --host' | grep -F -- "--port $port ")
    [ -z "$left" ] && break
    sleep 0.1
  done
  check "here: the scheduler is gone (within 10 s)" [ -z "$left" ]
fi

checks_done
