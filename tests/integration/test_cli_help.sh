#!/usr/bin/env bash
# test_cli_help.sh - the defaults that start, hosts, map and exec state in --help are the ones the
# code uses: each number is read from the public headers (or the runtime's defaults) and looked
# for in the help text of every command that takes the option.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

define() { # HEADER NAME: the value of #define NAME in include/lazycluster/HEADER
  awk -v n="$2" '$1 == "#define" && $2 == n { print $3 }' "$src/include/lazycluster/$1"
}
runtime_default() { # FIELD: the runtime's default for opts.FIELD (src/runtime.c)
  awk -v f="$1" '$0 ~ "rt->opts." f " = " { sub(/;/, "", $3); print $3; exit }' "$src/src/runtime.c"
}

connect=$(($(runtime_default connect_timeout_ms) / 1000))
keepalive=$(($(runtime_default keepalive_timeout_ms) / 1000))
# the heartbeat limit defaults to twice the keepalive limit (src/runtime.c heartbeat_settle)
grep -q 'long long least = 2LL \* rt->opts.keepalive_timeout_ms;' "$src/src/runtime.c" &&
  heartbeat=$((2 * keepalive))
facts=$(($(define manager.h LC_DISCOVER_FACTS_TIMEOUT_MS) / 1000))
master=$(($(define cluster.h LC_CLUSTER_MASTER_TIMEOUT_MS) / 1000))
worker=$(($(define cluster.h LC_CLUSTER_WORKER_TIMEOUT_MS) / 1000))
fanout=$(awk '/->fanout = opts && opts->fanout > 0/ { sub(/;/, "", $NF); print $NF }' "$src/src/group.c")
check "the defaults were read from the code" \
  [ -n "$connect" ] && [ -n "${heartbeat:-}" ] && [ -n "$facts" ] && [ -n "$fanout" ]
echo "  connect $connect s, heartbeat $heartbeat s, facts $facts s, fanout $fanout," \
  "master $master s, workers $worker s" >&2

for cmd in start hosts map exec; do
  "$ctl" "$cmd" --help >"$tmp/$cmd" 2>&1
  h=$(tr -s ' \n' ' ' <"$tmp/$cmd") # options' texts wrap over lines
  check "$cmd --help: --connect-timeout default $connect" \
    grep -q -- "--connect-timeout S give up on a host after S seconds (default $connect)" <<<"$h"
  check "$cmd --help: --facts-timeout default $facts" \
    grep -q -- "--facts-timeout S .*(default $facts)" <<<"$h"
  check "$cmd --help: --fanout default $fanout" grep -q -- "--fanout N .*(default $fanout)" <<<"$h"
  check "$cmd --help: --heartbeat default $heartbeat" \
    grep -q -- "--heartbeat S .*default $heartbeat: twice the $keepalive s keepalive" <<<"$h"
done
h=$(tr -s ' \n' ' ' <"$tmp/exec")
check "exec --help: --timeout, per host, no limit by default" \
  grep -q -- "--timeout S per host: .*(default none: no limit)" <<<"$h"
h=$(tr -s ' \n' ' ' <"$tmp/start")
check "start --help: master port 61000" grep -q -- "--master-port P .*(default 61000;" <<<"$h"
check "start --help: worker ports 61001-61199" grep -q -- "(default 61001-61199)" <<<"$h"
check "start --help: the command type's limits" \
  grep -q "command master $master s, workers $worker s" <<<"$h"
check "the code's port defaults are those" \
  grep -q '#define LC_CLUSTER_WORKER_PORTS "61001-61199"' "$src/include/lazycluster/cluster.h"
check "the code's master port default is 61000" \
  grep -q '#define LC_CLUSTER_MASTER_PORT 61000$' "$src/include/lazycluster/cluster.h"
# ... and lie above every host's ephemeral range (see cluster.h): here, this machine's
read -r _ eph_hi </proc/sys/net/ipv4/ip_local_port_range
check "the default ports lie above the ephemeral range (up to $eph_hi)" [ "$eph_hi" -lt 61000 ]

checks_done
