#!/usr/bin/env bash
# run_tunnel.sh - the tunnel benchmark with its own test hosts (needs root).
#
#   tests/bench/run_tunnel.sh [TUNNEL [TCPBENCH [LAZYCLUSTERCTL]]] [-- TUNNEL-OPTIONS...]
#
# The programs default to those in build-bench (tests/bench/tunnel, tests/bench/tcpbench,
# lazyclusterctl), built with -DCMAKE_BUILD_TYPE=Release. Brings up two test
# hosts in $LC_BENCH_DIR (default /tmp/lc-bench), then for each cipher of $LC_BENCH_CIPHERS
# (default: aes128-gcm@openssh.com, the one our SSH backend puts first, and
# chacha20-poly1305@openssh.com, the one OpenSSH puts first):
#  1. the cipher check: a short run of tunnel goes to lab1, whose sshd logs at DEBUG1, and every
#     SSH session it made (ours and OpenSSH's) must have negotiated that cipher both ways, as
#     sshd's log says;
#  2. the measurement: tunnel against lab0 (sshd as testhosts makes it), table on stdout;
# and tears the hosts down, also on failure or Ctrl-C.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tunnel=$root/build-bench/tests/bench/tunnel
tcpbench=$root/build-bench/tests/bench/tcpbench
ctl=$root/build-bench/lazyclusterctl
if (($#)) && [[ $1 != -- ]]; then tunnel=$1; shift; fi
if (($#)) && [[ $1 != -- ]]; then tcpbench=$1; shift; fi
if (($#)) && [[ $1 != -- ]]; then ctl=$1; shift; fi
if (($#)) && [[ $1 == -- ]]; then shift; fi
th=$root/tests/support/testhosts
dir=${LC_BENCH_DIR:-/tmp/lc-bench}
ciphers=${LC_BENCH_CIPHERS:-aes128-gcm@openssh.com chacha20-poly1305@openssh.com}

for f in "$tunnel" "$tcpbench" "$ctl"; do
  [[ -x $f ]] || { echo "run_tunnel.sh: $f is missing (build with cmake in build-bench)" >&2; exit 1; }
done
trap '"$th" down --dir "$dir" >/dev/null 2>&1 || true' EXIT
"$th" up 2 --dir "$dir" >/dev/null

# lab1's sshd logs which cipher each session negotiates
log=$dir/hosts/1/sshd.log
"$th" stop-sshd 1 --dir "$dir"
printf 'LogLevel DEBUG1\n' >>"$dir/hosts/1/sshd_config"
"$th" start-sshd 1 --dir "$dir"

for want in $ciphers; do
  # 1. which cipher each side negotiates, from sshd's own log
  start=$(($(stat -c %s "$log") + 1))
  "$tunnel" --dir "$dir" --testhosts "$th" --tcpbench "$tcpbench" --ctl "$ctl" --host 1 --mib 1 \
    --runs 1 --conns 3 --idle 2 --busy 2 --busy-seconds 1 --cipher "$want" >/dev/null
  # "remote software version libssh_0.10.6" starts a session; "kex: client->server cipher: X ..."
  sessions=$(tail -c "+$start" "$log" | awk '
    /remote software version/ { sw = $0; sub(/^.*remote software version /, "", sw); sub(/ .*/, "", sw) }
    /kex: client->server cipher:/ { c2s = $5 }
    /kex: server->client cipher:/ { print sw, c2s, $5 }')
  echo "cipher check for $want (client, client->server, server->client; sessions):" >&2
  sort <<<"$sessions" | uniq -c | sed 's/^/  /' >&2
  if ! grep -q '^libssh' <<<"$sessions" || ! grep -q '^OpenSSH' <<<"$sessions"; then
    echo "run_tunnel.sh: the cipher check saw no session of ours or none of OpenSSH's" >&2
    exit 1
  fi
  if awk -v w="$want" '$2 != w || $3 != w { bad = 1 } END { exit !bad }' <<<"$sessions"; then
    echo "run_tunnel.sh: a session negotiated another cipher than $want" >&2
    exit 1
  fi

  # 2. the measurement
  printf '\n#### Cipher %s\n\n' "$want"
  "$tunnel" --dir "$dir" --testhosts "$th" --tcpbench "$tcpbench" --ctl "$ctl" --host 0 \
    --cipher "$want" "$@"
done
