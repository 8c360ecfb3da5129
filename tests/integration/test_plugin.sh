#!/usr/bin/env bash
# test_plugin.sh [refused] - cluster types from shared objects: `lazyclusterctl start --type
# PATH.so` with examples/plugin_type.c (libmytype.so, type "greeter": every process answers a
# connection with one line; the master's line is staged on its host through the public API and
# names the library's version) on this machine and on test hosts; the master and each worker
# answer on their ports; SIGINT stops everything with exit 0 and leaves nothing. Then the plug-ins
# the loader refuses, each with its message, exit 1 and no crash or sanitizer report: no entry
# point, a missing file, a struct of a newer version (which holds nothing past its version), only
# the version-1 entry point, one that refuses the library's version, one without make; a make that
# fails (with and without a detail) and an unknown --type-arg. Then the launcher structs'
# versions: a plug-in with the older layouts (master 1, worker 2) starts and keeps the library's
# start limits; one that states its own limits gets them unless a flag says otherwise, and a
# timeout's message names the limit, its source and the flag.
# With `refused`, only the refusals and make failures, on this machine (no test hosts needed).
set -u
. "$(dirname "$0")/../support/check.sh"
mode=${1:-all}
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
so=${LC_PLUGIN:?LC_PLUGIN names libmytype.so}
noentry=${LC_PLUGIN_NOENTRY:?LC_PLUGIN_NOENTRY names the plug-in without an entry point}
newer=${LC_PLUGIN_NEWER:?LC_PLUGIN_NEWER names the plug-in with struct version 3}
v1only=${LC_PLUGIN_V1ONLY:?LC_PLUGIN_V1ONLY names the plug-in with only lc_cluster_type_v1}
refuse=${LC_PLUGIN_REFUSE:?LC_PLUGIN_REFUSE names the plug-in that refuses every library}
nomake=${LC_PLUGIN_NOMAKE:?LC_PLUGIN_NOMAKE names the plug-in without make}
makefail=${LC_PLUGIN_MAKEFAIL:?LC_PLUGIN_MAKEFAIL names the plug-in whose make fails}
if [ "$mode" = all ]; then
  oldso=${LC_PLUGIN_OLD:?LC_PLUGIN_OLD names the plug-in with the older launcher layouts}
  limitsso=${LC_PLUGIN_LIMITS:?LC_PLUGIN_LIMITS names the plug-in that states its start limits}
  staged=${LC_PLUGIN_STAGED:?LC_PLUGIN_STAGED names libstaged.so (examples/staged_type.c)}
  dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
  th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
  cfg=$dir/ssh_config
fi
# the library's version, as the greeter's master and the loader's messages name it
libver=$("$ctl" --version | sed -n 's/.*(liblazycluster \([0-9.]*\),.*/\1/p')
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  if [ "$mode" = all ]; then
    for i in 0 1 2; do "$th" exec $i -- rm -rf /root/lcbin-plugin 2>/dev/null; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# The line a service on 127.0.0.1:PORT answers with, or nothing.
answer() {
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && read -r l <&3 && printf "%s\n" "$l"' _ "$1" 2>/dev/null
}
# True when nothing answers on PORT with this run's token.
not_ours() { ! answer "$1" | grep -qF -- "$token"; }
# Starts `lazyclusterctl start ARGS...` in the background (in $tmp/run) and waits for "ready:".
start() {
  rm -f "$tmp/out" "$tmp/err"
  (cd "$tmp/run" && exec "$ctl" start "$@") >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 600); do
    grep -q '^ready:' "$tmp/out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
# nothing_left LABEL HOST...: no process with this run's token and no working directory on the
# test hosts numbered HOST...
nothing_left() {
  local label=$1 i procs left; shift
  for i in "$@"; do
    procs=$("$th" pids $i | while read -r p; do
      tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -c -- "$token")
    check "$label: lab$i: no process left" [ "$procs" -eq 0 ]
    left=$("$th" exec $i -- sh -c 'ls -A "$HOME/.cache/lazycluster" 2>/dev/null')
    check "$label: lab$i: no working directory (nor staged file) left" [ -z "$left" ]
  done
}
# Sends SIGINT, waits; sets rc.
stop() {
  kill -INT "$pid"
  wait "$pid"; rc=$?
  pid=
}
show() { sed 's/^/  out: /' "$tmp/out" >&2; sed 's/^/  err: /' "$tmp/err" >&2; }
# "ROLE PORT HOST" for each process from start's table.
table() {
  awk '$2 ~ /^localhost:[0-9]+$/ { split($2, a, ":"); print $1, a[2], $4 }' "$tmp/out"
}

mkdir -p "$tmp/home" "$tmp/run"
cp "$so" "$tmp/run/libmytype.so"   # the issue's spelling: --type ./libmytype.so
export HOME=$tmp/home
unset XDG_CACHE_HOME
check "the library's version is known" [ -n "$libver" ]

# ---- refused plug-ins: exit 1 (no crash: no signal, no sanitizer report), and say which file
# ---- and what is wrong; nothing starts
# refused NAME ARGS...: runs start ARGS... into $tmp/o; checks exit 1 and no crash or report
refused() {
  local name=$1; shift
  timeout 60 "$ctl" start "$@" >"$tmp/o" 2>&1; rc=$?
  sed "s/^/  $name: /" "$tmp/o" >&2
  check "$name: exit 1 (no crash)" [ "$rc" -eq 1 ]
  check "$name: no sanitizer report" not grep -q "Sanitizer\|runtime error" "$tmp/o"
}
has() { grep -qF -- "$1" "$tmp/o"; }

refused "no entry point" --type "$noentry" --workers 1
check "no entry point: names the file and the entry point it wants" \
  has "$noentry is not a cluster type: it exports no lc_cluster_type_entry"

refused "missing file" --type "$tmp/no/such/libmissing.so" --workers 1
check "missing file: names it" has "cannot load the cluster type $tmp/no/such/libmissing.so"

refused "newer struct" --type "$newer" --workers 1
check "newer struct: names the file and both versions" has "$newer: built for cluster type \
version 3; this library (lazycluster $libver) knows 1 to 2"

refused "version-1 plug-in" --type "$v1only" --workers 1
check "version-1 plug-in: names the interface it was built for and how to port it" has "$v1only \
was built for the version-1 cluster type interface (lc_cluster_type_v1), which lazycluster \
$libver no longer loads: port it to \`const lc_cluster_type *lc_cluster_type_entry(unsigned int \
library_version)\` returning a static struct (see lazycluster/cluster.h)"

refused "refusing plug-in" --type "$refuse" --workers 1
check "refusing plug-in: names the library version and the plug-in's reason" has "$refuse: the \
plug-in refused library version $libver ($(echo "$libver" | awk -F. '{ print $1 * 1000000 + $2 * 1000 + $3 }')): \
refuse: needs lazycluster 99.0.0 (99000000), got"

refused "no make" --type "$nomake" --workers 1
check "no make: says so" has "$nomake: its cluster type has no make: it needs a name and make"

# a plug-in others could have written: refused, naming the file or directory, owner and mode
mkdir -m 0755 "$tmp/unsafe"
cp "$so" "$tmp/unsafe/libww.so"; chmod 0666 "$tmp/unsafe/libww.so"
refused "world-writable plug-in" --type "$tmp/unsafe/libww.so" --workers 1
check "world-writable plug-in: names the file, its owner and mode" has "refused the cluster type \
$tmp/unsafe/libww.so: its file $tmp/unsafe/libww.so is owned by uid $(id -u) with mode 0666"
chmod 0644 "$tmp/unsafe/libww.so"; chmod 0777 "$tmp/unsafe"
refused "plug-in in a world-writable directory" --type "$tmp/unsafe/libww.so" --workers 1
check "plug-in in a world-writable directory: names the directory" has "its directory \
$tmp/unsafe is owned by uid $(id -u) with mode 0777"
chmod 0755 "$tmp/unsafe"
# a name without a slash is not looked up in LD_LIBRARY_PATH
LD_LIBRARY_PATH=$tmp/unsafe refused "plug-in by bare name" --type libww.so --workers 1
check "plug-in by bare name: not searched, says to give ./libww.so" has "give ./libww.so"

refused "make fails" --type "$makefail" --workers 1
check "make fails: the type's detail, after the file and the type" has "start: --type $makefail: \
the makefail type could not make its launchers: makefail: the licence server lic.invalid:27000 \
did not answer"
refused "make fails quietly" --type "$makefail" --type-arg quiet=1 --workers 1
check "make fails quietly: the code's text, and that the type gave no detail" has "start: --type \
$makefail: the makefail type could not make its launchers: Input/output error (the type gave no detail)"

(cd "$tmp/run" && "$ctl" start --type ./libmytype.so --type-arg colour=red --workers 1) >"$tmp/o" 2>&1; rc=$?
sed 's/^/  badarg: /' "$tmp/o" >&2
check "unknown --type-arg: exit 2" [ "$rc" -eq 2 ]
check "unknown --type-arg: the type's detail (lc_error_set), once" [ "$(grep -c \
"the greeter type could not make its launchers: greeter: --type-arg colour=red: unknown" \
"$tmp/o")" -eq 1 ]
check "nothing started for the refused ones" [ -z "$(ls -A "$HOME/.cache/lazycluster" 2>/dev/null | grep -vx run)" ]
if [ "$mode" = refused ]; then
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

# ---- on this machine: no --hosts, and a HOME without ~/.ssh/config: no host configured --------
token=hi-$$-$RANDOM
start --type ./libmytype.so --type-arg greeting=$token --workers 3; ok=$?
check "start with the plug-in reaches ready:" [ "$ok" -eq 0 ]
check "it found no host and used this machine" grep -q "no hosts configured: using this machine" "$tmp/err"
table >"$tmp/table"
check "it lists a master and 3 workers" [ "$(wc -l <"$tmp/table")" -eq 4 ]
while read -r role port host; do
  if [ "$role" = master ]; then want="$token master on localhost, lazycluster $libver"
  else want="$token $role of 3 on localhost"; fi
  got=$(answer "$port")
  check "$role answers on $port: $want" [ "$got" = "$want" ]
done <"$tmp/table"
stop
show
check "SIGINT: exit 0" [ "$rc" -eq 0 ]
check "no process left" [ "$(pgrep -fc -- "$token" || true)" -eq 0 ]
# (another cluster on a shared machine may take the port at once: ours must not answer)
while read -r role port host; do
  check "$role's port $port: ours no longer answers" not_ours "$port"
done <"$tmp/table"
check "no working directory left" [ -z "$(ls -A "$HOME/.cache/lazycluster" 2>/dev/null | grep -vx run)" ]

# ---- on test hosts: the master on lab1, 4 workers, mesh: every port also answers here ---------
# serve= gives the hosts their own lazyclusterctl: a copy in each home (not under the build tree,
# which the hosts may not see when it lies under /tmp)
token=hey-$$-$RANDOM
for i in 0 1 2; do
  "$th" exec $i -- sh -c 'mkdir -p /root/lcbin-plugin && cat >/root/lcbin-plugin/lazyclusterctl &&
    chmod +x /root/lcbin-plugin/lazyclusterctl' <"$ctl"
done
start -F "$cfg" --hosts lab0,lab1,lab2 --type "$so" --type-arg serve=/root/lcbin-plugin/lazyclusterctl \
  --type-arg mesh=1 --type-arg greeting=$token --master-host lab1 --workers 4; ok=$?
check "hosts: start reaches ready:" [ "$ok" -eq 0 ]
table >"$tmp/table"
check "hosts: a master and 4 workers" [ "$(grep -c . "$tmp/table")" -eq 5 ]
check "hosts: the master on lab1" grep -q '^master [0-9]* lab1$' "$tmp/table"
while read -r role port host; do
  if [ "$role" = master ]; then want="$token master on lab1, lazycluster $libver"
  else want="$token $role of 4 on $host"; fi
  got=$(answer "$port")
  check "hosts: $role on $host answers here on $port through the tunnel" [ "$got" = "$want" ]
done <"$tmp/table"
stop
show
check "hosts: SIGINT: exit 0" [ "$rc" -eq 0 ]
nothing_left hosts 0 1 2
while read -r role port host; do
  check "hosts: $role's port $port: ours no longer answers here" not_ours "$port"
done <"$tmp/table"

# ---- examples/staged_type.c as a plug-in (libstaged.so): it stages lazyclusterctl and a file on
# ---- each host with prepare_host, one file per worker with prepare_worker; spread over two hosts
token=st$$x$RANDOM
start -F "$cfg" --hosts lab0,lab1 --type "$staged" --type-arg serve="$ctl" --type-arg text=$token \
  --workers 4; ok=$?
check "staged: start reaches ready:" [ "$ok" -eq 0 ]
table >"$tmp/table"
check "staged: a master and 4 workers" [ "$(grep -c . "$tmp/table")" -eq 5 ]
while read -r role port host; do
  [ "$role" = master ] && want="staged master" || want="$token from $host, $role, cuda=none"
  got=$(answer "$port")
  check "staged: $role on $host answers here on $port: $want" [ "$got" = "$want" ]
done <"$tmp/table"
check "staged: spread: two workers on each host" [ "$(grep -c '^worker.* lab0$' "$tmp/table")" -eq 2 \
  -a "$(grep -c '^worker.* lab1$' "$tmp/table")" -eq 2 ]
stop
show
check "staged: SIGINT: exit 0" [ "$rc" -eq 0 ]
nothing_left staged 0 1

# ---- the greeter's master method checks its host through the API: a listener that is not there
(cd "$tmp/run" && timeout 60 "$ctl" start --type ./libmytype.so --type-arg serve=/no/such/ctl \
  --workers 1) >"$tmp/o" 2>&1; rc=$?
sed 's/^/  noserve: /' "$tmp/o" >&2
check "no listener on the master's host: exit 1" [ "$rc" -eq 1 ]
check "no listener on the master's host: the type's detail names host and path" grep -qF \
  "greeter: localhost: /no/such/ctl is not an executable there (give --type-arg serve=PATH)" "$tmp/o"

# ---- launcher struct versions, on this machine ---------------------------------------------------
token=old-$$-$RANDOM
serve_m="exec '$ctl' serve \"\$LAZYCLUSTER_MASTER_PORT\" $token-master"
serve_w="exec '$ctl' serve \"\$LAZYCLUSTER_WORKER_PORT\" $token-worker"
start --type "$oldso" --type-arg "master=$serve_m" --type-arg "worker=$serve_w" --workers 2; ok=$?
check "older launcher layouts: start reaches ready:" [ "$ok" -eq 0 ]
table >"$tmp/table"
check "older launcher layouts: a master and 2 workers" [ "$(grep -c . "$tmp/table")" -eq 3 ]
while read -r role port host; do
  want="$token-master"; [ "$role" = master ] || want="$token-worker"
  check "older launcher layouts: $role answers on $port" [ "$(answer "$port")" = "$want" ]
done <"$tmp/table"
stop
check "older launcher layouts: SIGINT: exit 0" [ "$rc" -eq 0 ]
# run: start ARGS... with a 60 s guard; its output in $tmp/o, its status in rc
run() { timeout 60 "$ctl" start "$@" >"$tmp/o" 2>&1; rc=$?; sed 's/^/  limits: /' "$tmp/o" >&2; }
never="master=exec sleep 62"
run --type "$oldso" --type-arg "$never" --type-arg "worker=$serve_w" --workers 1
check "older launcher layouts: a master that never listens fails (exit 1)" [ "$rc" -eq 1 ]
check "older launcher layouts: the library's 3 s held (no newer field was read)" grep -qF \
  "within 3 s (the default master timeout; --master-timeout S changes it): it still runs" "$tmp/o"
run --type "$limitsso" --type-arg "$never" --type-arg "worker=$serve_w" --workers 1
check "the type's master limit: exit 1" [ "$rc" -eq 1 ]
check "the type's master limit: named, with its flag" grep -qE "the master did not start on port \
[0-9]+ within 1\.5 s \(the limits type's default master timeout; --master-timeout S changes it\)" \
  "$tmp/o"
# The default master port is 61000, another when it is taken (by another program on a shared
# machine): when it was, say who held it, for the log
mport=$(sed -n 's/.*the master did not start on port \([0-9]*\) within.*/\1/p' "$tmp/o")
if [ -n "$mport" ] && [ "$mport" != 61000 ]; then
  echo "  limits: the master got port $mport; port 61000 now: $(ss -tanpH '( sport = :61000 )')" >&2
fi
run --type "$limitsso" --type-arg "$never" --type-arg "worker=$serve_w" --workers 1 \
  --master-timeout 0.5
check "--master-timeout over the type's limit" grep -qF \
  "within 0.5 s (the master timeout given; --master-timeout S changes it)" "$tmp/o"
run --type "$limitsso" --type-arg "master=$serve_m" --type-arg "worker=exec sleep 62" --workers 1
check "the type's worker limit: exit 1" [ "$rc" -eq 1 ]
check "the type's worker limit: named, with its flag" grep -qE \
  "localhost worker-0 did not listen on port [0-9]+ within 1 s \(the limits type's default worker timeout; --timeout S changes it\)" \
  "$tmp/o"
for _ in $(seq 50); do [ "$(pgrep -fc -- "^sleep 62$|$token" || true)" -eq 0 ] && break; sleep 0.1; done
check "limits: no process left" [ "$(pgrep -fc -- "^sleep 62$|$token" || true)" -eq 0 ]
check "limits: no working directory left" [ -z "$(ls -A "$HOME/.cache/lazycluster" 2>/dev/null | grep -vx run)" ]

checks_done
