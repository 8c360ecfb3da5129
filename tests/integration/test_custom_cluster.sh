#!/usr/bin/env bash
# test_custom_cluster.sh MODE - runs examples/custom_cluster and checks its result against the
# exact value computed here (awk), that every worker joined and worked, what each worker computed
# with (GPU, or CPU and why), and that nothing is left behind.
#   hosts:   3 test hosts, 6 workers (2 a host); the CUDA runtime is what the hosts have (on a
#            machine without a GPU: libcudart loads and finds no device, or does not load).
#   local:   this machine alone, 4 workers; LC_CUDART_PATH points nowhere: the "no CUDA" path.
#   fakegpu: this machine alone, 4 workers, with a stand-in CUDA runtime and cuBLAS
#            (LC_FAKE_CUDA, fake_cuda_compute.c: "device" memory is checked host memory), so the
#            example's GPU code runs without a GPU: cublasSdot; a device round trip without
#            cuBLAS; copies that fail (the CPU takes over). No real GPU is involved.
#   intruders: the job server alone on test host lab1 (as root, its secret in a 0600 file under
#            /root), and on lab1: a worker run by nobody (cannot read the secret), a connection
#            by nobody that does not authenticate, a worker of nobody with a secret of its own
#            (a wrong proof): the master refuses each (closes, logs); then the owner's worker
#            with the secret does the whole job. And on this machine: a worker refuses a server
#            on the master's port that cannot prove the secret (a squatter).
set -u
. "$(dirname "$0")/../support/check.sh"
mode=${1:?usage: test_custom_cluster.sh hosts|local|fakegpu}
bin=${LC_CUSTOM_CLUSTER:?LC_CUSTOM_CLUSTER names the custom_cluster example binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The exact value, independently: sum of (i % 13) * (i % 11) for i < 2^24.
exact=$(awk 'BEGIN { n = 2^24; p = 0; r = 0
  for (i = 0; i < 143; i++) p += (i % 13) * (i % 11)
  for (i = 0; i < n % 143; i++) r += (i % 13) * (i % 11)
  printf "%d\n", int(n / 143) * p + r }')

# Runs the example on this machine with a HOME of its own (the local runtime's working directory
# lands there, and we can see it go) and extra environment: run_local NAME=VALUE...
run_local() {
  rm -rf "$tmp/home"
  mkdir -p "$tmp/home"
  env HOME="$tmp/home" XDG_CACHE_HOME= "$@" timeout 120 "$bin" >"$tmp/out" 2>"$tmp/err"; rc=$?
  sed 's/^/  out: /' "$tmp/out" >&2
  sed 's/^/  err: /' "$tmp/err" >&2
}

# What every run must show: its exit, the exact result, the master first to end, every worker
# joined, said how it computes and computed items; spread evenly over the hosts given.
# common_checks LABEL WORKERS HOST...
# Nothing on stderr but a master's lost race for its port: another program (a test running
# beside this one) took the port between the launcher's check and the master's bind, and the
# launcher started the master again on another port (the run's other checks prove it got there).
quiet_stderr() {
  ! grep -vqE '^\[localhost master\] master: cannot listen on 127\.0\.0\.1:[0-9]+: address already in use$' "$tmp/err"
}

common_checks() {
  local label=$1 workers=$2; shift 2
  local hosts=("$@")
  check "$label: it exits 0" [ "$rc" -eq 0 ]
  check "$label: the master's result is the exact value $exact" \
    grep -qx "\[localhost master\] result: $exact" "$tmp/out"
  check "$label: the launcher says it matches" \
    grep -qx "result $exact matches the exact value $exact ($workers workers)" "$tmp/out"
  check "$label: the master ended first, with status 0" \
    grep -qx "first process to end: localhost master ended: it exited with status 0" "$tmp/out"
  check "$label: all $workers workers joined" \
    grep -q "^\[localhost master\] all $workers workers joined: 256 items" "$tmp/out"
  check "$label: $workers workers said how they compute" \
    [ "$(grep -cE '^\[[^ ]+ worker-[0-9]+\] compute: (GPU .* via CUDA .+|CPU \(.+\))$' "$tmp/out")" -eq "$workers" ]
  for h in "${hosts[@]}"; do
    check "$label: $h ran $((workers / ${#hosts[@]})) workers" \
      [ "$(grep -cE "^\[$h worker-[0-9]+\] compute: " "$tmp/out")" -eq $((workers / ${#hosts[@]})) ]
  done
  # the master's summary: one line a worker, each with at least one item
  check "$label: every worker computed items" \
    [ "$(grep -cE '^\[localhost master\] worker-[0-9]+ on [^ ]+: [1-9][0-9]* items, ' "$tmp/out")" -eq "$workers" ]
  check "$label: the items add up to 256" \
    [ "$(sed -nE 's/^\[localhost master\] worker-[0-9]+ on [^ ]+: ([0-9]+) items, .*/\1/p' "$tmp/out" | awk '{ s += $1 } END { print s + 0 }')" -eq 256 ]
}

# Nothing of a local run is left: no master or worker (nor their lifelines: their command lines
# name the program, and the master's its port), no working directory. (Whether the master's port
# is closed is not asked: on a shared machine another cluster may take 60000 at once.) Lifelines
# end their process groups as the runtime goes, but need not be gone by the time the launcher
# exits: allow them the kill grace (3 s) and a little.
# Known library issue, reported, not failed here: now and then (1 run in 20 before commit
# 0a1fd65, 1 in 250 after) the working directory keeper's lifeline leaves its watchdog subshell
# behind (ppid 1, running `sleep 1`) until the heartbeat timeout (15 s). Its command line names
# the directory, not the program; it is listed below as a note.
local_leftovers() {
  local label=$1 left port
  port=$(sed -nE 's/^\[localhost master\] listening on 127\.0\.0\.1:([0-9]+): .*/\1/p' "$tmp/out")
  ours() { pgrep -af -- "$tmp/home/.*custom_cluster|custom_cluster'? master ${port:-none}( |'|\$)"; }
  left=$(ours)
  [ -z "$left" ] || echo "$left" | sed 's/^/  still there as it exited: /' >&2
  for _ in $(seq 50); do [ -z "$left" ] && break; sleep 0.1; left=$(ours); done
  check "$label: no master or worker left (within 5 s)" [ -z "$left" ]
  [ -z "$left" ] || echo "$left" | sed 's/^/  left: /' >&2
  check "$label: no working directory left" [ -z "$(ls -A "$tmp/home/.cache/lazycluster" 2>/dev/null)" ]
  left=$(pgrep -af -- "$tmp/home")
  [ -z "$left" ] || echo "$left" | cut -c1-60 | sed "s/^/  note: outlived the program (the keeper lifeline issue): /" >&2
}

# The command lines of host I's processes that name the program, after waiting up to 5 s for
# them to go (the lifelines' kill grace, as in local_leftovers); empty when none is left.
host_leftovers() {
  local left
  for _ in $(seq 50); do
    left=$("$th" pids "$1" | while read -r p; do
      tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep 'custom_cluster')
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "$left" | cut -c1-100
}

case $mode in
hosts)
  dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
  th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
  timeout 180 "$bin" -F "$dir/ssh_config" -n 6 lab0 lab1 lab2 >"$tmp/out" 2>"$tmp/err"; rc=$?
  sed 's/^/  out: /' "$tmp/out" >&2
  sed 's/^/  err: /' "$tmp/err" >&2
  common_checks hosts 6 lab0 lab1 lab2
  check "hosts: nothing on stderr (but a lost race for a port)" quiet_stderr
  check "hosts: the binary went to each host's working directory" \
    [ "$(grep -cE '^sent custom_cluster to lab[0-2]:/.+/custom_cluster$' "$tmp/out")" -eq 3 ]
  check "hosts: the CUDA runtime was probed (GPU, or CPU with the reason)" \
    grep -qE 'compute: (GPU|CPU \((CUDA runtime .* loaded|no CUDA runtime))' "$tmp/out"
  for i in 0 1 2; do
    left=$("$th" exec $i -- sh -c 'ls -A "$HOME/.cache/lazycluster" 2>/dev/null')
    check "hosts: lab$i: no working directory left" [ -z "$left" ]
    left=$(host_leftovers $i)
    check "hosts: lab$i: no process left (within 5 s)" [ -z "$left" ] || echo "$left" | sed 's/^/  left: /' >&2
  done
  ;;
local)
  run_local LC_CUDART_PATH=/nonexistent/libcudart.so
  common_checks local 4 localhost
  check "local: nothing on stderr (but a lost race for a port)" quiet_stderr
  check "local: the workers had no CUDA runtime, and said so" \
    [ "$(grep -c 'compute: CPU (no CUDA runtime: /nonexistent/libcudart.so' "$tmp/out")" -eq 4 ]
  local_leftovers local
  # outside a cluster a worker says what it misses and exits 2
  env -u LAZYCLUSTER_MASTER_PORT "$bin" worker >"$tmp/w" 2>&1; rc=$?
  check "a worker outside a cluster exits 2" [ "$rc" -eq 2 ]
  check "and says what it misses" grep -q "LAZYCLUSTER_MASTER_PORT" "$tmp/w"
  ;;
fakegpu)
  fake=${LC_FAKE_CUDA:?LC_FAKE_CUDA names the stand-in CUDA runtime and cuBLAS}
  # the library's own probe loads it too (LC_CUDART_PATH): this machine has "1 GPU", and every
  # worker is placed on it with CUDA_VISIBLE_DEVICES=0
  run_local LC_CUDART_PATH="$fake" LC_CUBLAS_PATH="$fake"
  common_checks cublas 4 localhost
  check "cublas: nothing on stderr (but a lost race for a port)" quiet_stderr
  check "cublas: this machine's probe saw the GPU" grep -q '^this machine: .* 1 GPUs' "$tmp/out"
  check "cublas: every worker was placed on it" [ "$(grep -o 'worker-[0-9]@localhost(GPU)' "$tmp/out" | wc -l)" -eq 4 ]
  check "cublas: every worker computed with cublasSdot" \
    [ "$(grep -c 'compute: GPU 0 via CUDA 12.4 (cublasSdot)$' "$tmp/out")" -eq 4 ]
  local_leftovers cublas

  run_local LC_CUDART_PATH="$fake" LC_CUBLAS_PATH=/nonexistent/libcublas.so
  common_checks roundtrip 4 localhost
  check "roundtrip: nothing on stderr (but a lost race for a port)" quiet_stderr
  check "roundtrip: every worker made a device round trip, and said why" \
    [ "$(grep -c 'compute: GPU 0 via CUDA 12.4 (device round trip; arithmetic on the CPU: no cuBLAS: /nonexistent/libcublas.so' "$tmp/out")" -eq 4 ]
  local_leftovers roundtrip

  run_local LC_CUDART_PATH="$fake" LC_CUBLAS_PATH="$fake" LC_FAKE_CUDA_FAIL_AFTER=0
  common_checks fallback 4 localhost
  check "fallback: each worker's copies failed and the CPU took over" \
    [ "$(grep -c 'worker-[0-9]\] worker: cudaMemcpy to the device failed: error 1: invalid argument: the CPU takes over$' "$tmp/err")" -eq 4 ]
  local_leftovers fallback
  ;;
intruders)
  dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
  th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
  # the binary where nobody may run it (this machine's /var/tmp is the hosts' too)
  bindir=$(mktemp -d /var/tmp/lc-custom.XXXXXX) && chmod 755 "$bindir" &&
    cp "$bin" "$bindir/custom_cluster" && chmod 755 "$bindir/custom_cluster" ||
    { echo "cannot copy $bin to /var/tmp" >&2; exit 1; }
  trap 'rm -rf "$tmp" "$bindir"; "$th" exec 1 -- rm -rf /root/lc-custom-secret /tmp/lc-nobody' EXIT
  port=$((64400 + RANDOM % 500))
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  "$th" exec 1 -- sh -c "umask 077 && mkdir -p /root/lc-custom-secret &&
    printf '%s\n' $secret > /root/lc-custom-secret/secret"
  as_nobody() { "$th" exec 1 -- setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  worker_env() { # SECRET_FILE: a worker's environment for a job of one worker
    echo LAZYCLUSTER_SECRET_FILE="$1" LAZYCLUSTER_MASTER_PORT=$port LAZYCLUSTER_WORKER_INDEX=0 \
      LAZYCLUSTER_WORKER_COUNT=1 LAZYCLUSTER_HOST=lab1 LC_CUDART_PATH=/nonexistent/libcudart.so
  }
  "$th" exec 1 -- env LAZYCLUSTER_SECRET_FILE=/root/lc-custom-secret/secret \
    timeout 120 "$bindir/custom_cluster" master $port >"$tmp/m.out" 2>"$tmp/m.err" &
  mpid=$!
  for _ in $(seq 100); do grep -q '^listening on' "$tmp/m.out" && break; sleep 0.1; done
  check "intruders: the master listens on lab1" grep -q "^listening on 127.0.0.1:$port" "$tmp/m.out"

  # nobody cannot read the owner's secret
  as_nobody env $(worker_env /root/lc-custom-secret/secret) timeout 20 \
    "$bindir/custom_cluster" worker >"$tmp/w1" 2>&1; rc=$?
  sed 's/^/  nobody without the secret: /' "$tmp/w1" >&2
  check "intruders: nobody's worker cannot read the secret (exit 2)" [ "$rc" -eq 2 ]
  check "intruders: and says so" grep -q "cannot read the cluster's secret" "$tmp/w1"
  # nobody connects and speaks the protocol without authenticating
  as_nobody bash -c 'exec 3<>/dev/tcp/127.0.0.1/'$port' && read -r c <&3 &&
    echo "HELLO 0 1 intruder CPU" >&3 && if read -r l <&3; then echo "got: $l"; else echo closed; fi' \
    >"$tmp/w2" 2>&1
  sed 's/^/  nobody without authenticating: /' "$tmp/w2" >&2
  check "intruders: nobody's plain connection is closed, with no work" grep -qx closed "$tmp/w2"
  # nobody with a secret of its own: a wrong proof
  as_nobody sh -c 'umask 077 && mkdir -p /tmp/lc-nobody &&
    head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n" > /tmp/lc-nobody/secret'
  as_nobody env $(worker_env /tmp/lc-nobody/secret) timeout 20 \
    "$bindir/custom_cluster" worker >"$tmp/w3" 2>&1; rc=$?
  sed 's/^/  nobody with a wrong secret: /' "$tmp/w3" >&2
  check "intruders: nobody's worker with a wrong secret is refused (exit 1)" [ "$rc" -eq 1 ]
  check "intruders: it was told by a closed connection" grep -q "it refused our proof" "$tmp/w3"
  # the owner's worker does the whole job
  "$th" exec 1 -- env $(worker_env /root/lc-custom-secret/secret) timeout 60 \
    "$bindir/custom_cluster" worker >"$tmp/w4" 2>&1 &
  wpid=$!
  wait "$mpid"; rc=$?
  kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null
  sed 's/^/  master out: /' "$tmp/m.out" >&2
  sed 's/^/  master err: /' "$tmp/m.err" >&2
  check "intruders: the master exits 0" [ "$rc" -eq 0 ]
  check "intruders: with the exact value from the owner's worker" grep -qx "result: $exact" "$tmp/m.out"
  check "intruders: only the owner's worker joined" [ "$(grep -c '^joined:' "$tmp/m.out")" -eq 1 ]
  check "intruders: the master refused the plain connection" \
    grep -qx "master: refused a connection: it did not authenticate (it may not know the cluster's secret)" "$tmp/m.err"
  check "intruders: the master refused the wrong proof" \
    grep -qx "master: refused a connection: wrong proof: it does not know the cluster's secret" "$tmp/m.err"
  check "intruders: the secret is in none of the messages" not grep -qF -- "$secret" "$tmp/m.out" "$tmp/m.err" "$tmp/w1" "$tmp/w2" "$tmp/w3"
  "$th" exec 1 -- rm -rf /root/lc-custom-secret /tmp/lc-nobody
  left=$(host_leftovers 1)
  check "intruders: lab1: no process left (within 5 s)" [ -z "$left" ] || echo "$left" | sed 's/^/  left: /' >&2

  # a squatter on the master's port here, who cannot prove the secret: the worker leaves
  printf '%s\n' "$secret" > "$tmp/secret"; chmod 600 "$tmp/secret"
  sport=$((64900 + RANDOM % 90))
  python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); print("up", flush=True)
c, _ = s.accept(); f = c.makefile("rw")
f.write("CHALLENGE 00\n"); f.flush(); f.readline()
f.write("PROOF " + "0" * 64 + "\n"); f.flush()
c.recv(1)' $sport >"$tmp/sq" 2>&1 &
  sqpid=$!
  for _ in $(seq 50); do grep -q up "$tmp/sq" && break; sleep 0.1; done
  env LAZYCLUSTER_SECRET_FILE="$tmp/secret" LAZYCLUSTER_MASTER_PORT=$sport LAZYCLUSTER_WORKER_INDEX=0 \
    LAZYCLUSTER_WORKER_COUNT=1 LC_CUDART_PATH=/nonexistent/libcudart.so timeout 20 "$bin" worker >"$tmp/w5" 2>&1; rc=$?
  kill "$sqpid" 2>/dev/null; wait "$sqpid" 2>/dev/null
  sed 's/^/  worker vs a squatter: /' "$tmp/w5" >&2
  check "intruders: a worker leaves a server that cannot prove the secret (exit 1)" [ "$rc" -eq 1 ]
  check "intruders: and says why" grep -q "did not prove that it knows the cluster's secret: not our master" "$tmp/w5"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac

checks_done
