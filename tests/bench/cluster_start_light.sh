#!/usr/bin/env bash
# cluster_start_light.sh - issue 5's light workload: 64 workers on 16 test hosts, each a small
# process listening on its worker port (lazyclusterctl serve), timed from `lazyclusterctl start`
# until every worker port answers on this machine through the tunnels (the worker mesh), against
# `pdsh -R ssh` running `true` once on the same 16 hosts (default key exchange and curve25519).
# "Answers" is checked by tests/bench/portprobe (built beside lazyclusterctl): it connects to all
# 64 ports at once and reads a whole line from each, trying again until each has answered.
#   tests/bench/cluster_start_light.sh [--rounds N] [--lc PATH-TO-lazyclusterctl] [--probe PATH]
# Needs root (test hosts are network namespaces) and a build directory outside /tmp (the hosts
# run the same lazyclusterctl binary by its path; each host has its own /tmp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=5
lc=$root/build-bench/lazyclusterctl
probe=""
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --lc) lc=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--lc PATH] [--probe PATH]" >&2; exit 2 ;;
  esac
done
[ -n "$probe" ] || probe=$(dirname "$lc")/tests/bench/portprobe
[ -x "$probe" ] || { echo "no portprobe at $probe (it is built with lazyclusterctl; or give --probe)" >&2; exit 2; }
[ -x "$lc" ] || { echo "no lazyclusterctl at $lc (build: cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build build-bench)" >&2; exit 2; }
case $lc in /tmp/*) echo "$lc is under /tmp, which the test hosts cannot see" >&2; exit 2 ;; esac
command -v pdsh >/dev/null || apt-get install -y -qq pdsh >/dev/null
dir=/tmp/lc-bench-light.$$
trap '"$root/tests/support/testhosts" down --dir "$dir" >/dev/null 2>&1 || true' EXIT
cfg=$("$root/tests/support/testhosts" up 16 --dir "$dir")
hosts=$(for i in $(seq 0 15); do printf 'lab%d,' "$i"; done); hosts=${hosts%,}

now() { date +%s.%N; }
ours() { # prints seconds until all 64 ports answer here
  local out t0 t1 pid ports="" line p ready=0
  out=$(mktemp -u)
  mkfifo "$out"
  t0=$(now)
  "$lc" start -F "$cfg" --hosts "$hosts" --workers 64 --type-arg expose=here --master-port 62000 --ports 62001-62199 \
    --master-cmd "exec '$lc' serve {master_port} master" \
    --worker-cmd "exec '$lc' serve {worker_port} w{worker_index}" >"$out" 2>"$out.err" &
  pid=$!
  # its stdout, line by line as it comes (no polling): the workers' ports, then "ready:"
  exec 3<"$out"
  while IFS= read -r line <&3; do
    case $line in
      worker-*) p=${line#*localhost:}; ports="$ports ${p%% *}" ;;
      ready:*) ready=1; break ;;
    esac
  done
  if [ "$ready" -ne 1 ]; then
    echo "start failed" >&2; cat "$out.err" >&2; exec 3<&-; wait "$pid" || true; rm -f "$out" "$out.err"; return 1
  fi
  # shellcheck disable=SC2086 # one argument a port
  "$probe" --timeout 60 $ports >/dev/null || { kill -INT "$pid"; exec 3<&-; wait "$pid" || true; return 1; }
  t1=$(now)
  kill -INT "$pid"; wait "$pid" || true
  exec 3<&-
  [ "$(echo "$ports" | wc -w)" -eq 64 ] || { echo "expected 64 workers" >&2; return 1; }
  echo "$t1 - $t0" | bc
  rm -f "$out" "$out.err"
}
pdsh_true() { # $1: extra ssh options
  local t0 t1
  t0=$(now)
  PDSH_SSH_ARGS_APPEND="-F $cfg $1" pdsh -R ssh -f 16 -w "$hosts" true
  t1=$(now)
  echo "$t1 - $t0" | bc
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

ours >/dev/null; pdsh_true "" >/dev/null # warm up
: >/tmp/lc-light-ours.$$; : >/tmp/lc-light-pdsh.$$; : >/tmp/lc-light-pdsh25519.$$
for r in $(seq 1 "$rounds"); do
  ours >>/tmp/lc-light-ours.$$
  pdsh_true "" >>/tmp/lc-light-pdsh.$$
  pdsh_true "-o KexAlgorithms=curve25519-sha256" >>/tmp/lc-light-pdsh25519.$$
done
o=$(median </tmp/lc-light-ours.$$); p=$(median </tmp/lc-light-pdsh.$$); q=$(median </tmp/lc-light-pdsh25519.$$)
rm -f /tmp/lc-light-*.$$
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| what | median s over $rounds rounds |"
echo "|---|---|"
echo "| lazyclusterctl start: 64 workers on 16 hosts, until all 64 ports answer here | $o |"
echo "| pdsh -R ssh true on 16 hosts (default kex, sntrup761) | $p |"
echo "| pdsh -R ssh true on 16 hosts (curve25519) | $q |"
