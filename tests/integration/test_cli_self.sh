#!/usr/bin/env bash
# test_cli_self.sh - SSH hosts that share a 127.0.0.1: one that is this very machine (an sshd on
# localhost, or a shared ~/.ssh/config that lists the machine one runs on, which `start` uses by
# default), and two names of one host. Before, the master's tunnel to such a host found its port
# taken by the master itself and the start failed after five ports ("port 60005 is in use on
# self"); a worker mesh failed the same way. Here "self" and "me" are this machine, reached as a
# user's ssh config would reach it, through a ProxyCommand that runs sshd -i (the same sshd,
# keys and users as the test hosts, but in this machine's own network); "lab1" and "twin" are one
# test host; "hop" is reached through another (ProxyCommand ssh -W). A start with the defaults and the worker mesh must come up, every worker and the master
# must answer on localhost here and on lab1, a Ctrl-C to the whole process group (what a terminal
# sends: the ProxyCommands get it too unless they run apart) must stop it cleanly, and nothing
# may be left on any host or here. Then the same as a plain user whose login shell is fish:
# lcfish runs `lazyclusterctl run` inside lab7 with an ssh config that lists lab7 itself.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
tmp=$(mktemp -d)
token=lcself$$r$RANDOM
lc_ctl_copy
lc_private_home
cleanup() {
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir"
}
trap cleanup EXIT

# The ssh config: the test hosts' entries, then "self" and "me" (this machine; the host key is
# lab0's, which its sshd_config names, so its known_hosts entry is lab0's address), "twin"
# (lab1 under another name) and "hop" (lab2 through lab0, with the usual ProxyCommand ssh -W).
lab0_addr=$(awk '/^Host lab0$/{f=1} f && $1 == "HostName" {print $2; exit}' "$dir/ssh_config")
lab1_addr=$(awk '/^Host lab1$/{f=1} f && $1 == "HostName" {print $2; exit}' "$dir/ssh_config")
lab2_addr=$(awk '/^Host lab2$/{f=1} f && $1 == "HostName" {print $2; exit}' "$dir/ssh_config")
cfg=$tmp/ssh_config
{
  for name in self me; do
    cat <<EOF
Host $name
  HostName $name.invalid
  ProxyCommand /usr/sbin/sshd -i -f $dir/hosts/0/sshd_config
  HostKeyAlias $lab0_addr

EOF
  done
  cat <<EOF
Host hop
  HostName $lab2_addr
  ProxyCommand ssh -F $cfg -W %h:%p lab0

Host twin
  HostName $lab1_addr

Host self me hop twin
  User root
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes

EOF
  cat "$dir/ssh_config"
} >"$cfg"

# Processes of this run: here (self and me are here too) and on host I.
local_procs() { pgrep -fc -- "$token"; }
host_procs() { # I
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -- "$token"
}
# Working directories of the cluster whose supervisor (the foreground start) is PID: here (self's
# and me's sessions run as root with this machine's /root) and on host I.
dirs_here() { ls -A /root/.cache/lazycluster 2>/dev/null | grep -c -- "-$1\."; }
dirs_host() { "$th" exec "$2" -- sh -c 'ls -A /root/.cache/lazycluster 2>/dev/null' | grep -c -- "-$1\."; }
# answers WHERE PORT: what the service on localhost:PORT says, here or on lab1 ("lab1").
answers() {
  local script='exec 3<>/dev/tcp/127.0.0.1/'$2' && read -r -t 10 l <&3 && echo "$l"'
  if [ "$1" = lab1 ]; then "$th" exec 1 -- bash -c "$script" 2>/dev/null; else bash -c "$script" 2>/dev/null; fi
}

# ---- the hosts: self shares this machine's loopback, twin lab1's --------------------------------
"$ctl" hosts -F "$cfg" --hosts self,me,lab1,twin,hop >"$tmp/hosts" 2>&1
check "hosts: self, me, lab1, twin and hop are ready" \
  [ "$(grep -cE '^(self|me|lab1|twin|hop) +ready' "$tmp/hosts")" -eq 5 ] || show hosts "$tmp/hosts"

# ---- start with the defaults but the mesh (the command type, expose=mesh), 7 workers on the five -
setsid "$ctl" start -F "$cfg" --hosts self,me,lab1,twin,hop --workers 7 --type-arg expose=mesh \
  --master-cmd "exec $ctl serve {master_port} m-$token" \
  --worker-cmd "exec $ctl serve {worker_port} w{worker_index}-$token" \
  >"$tmp/out" 2>"$tmp/err" </dev/null &
pid=$!
check "start is ready" wait_for 120 grep -q "^ready:" "$tmp/out" || { show out "$tmp/out"; show err "$tmp/err"; }
mport=$(sed -n 's/^master *localhost:\([0-9]*\) .*/\1/p' "$tmp/out")
mapfile -t wports < <(sed -n 's/^worker-[0-9]* *localhost:\([0-9]*\) on .*/\1/p' "$tmp/out")
mapfile -t whosts < <(sed -n 's/^worker-[0-9]* *localhost:[0-9]* on \([a-z0-9]*\).*/\1/p' "$tmp/out")
check "7 workers, on all five hosts" \
  all '[ "${#wports[@]}" -eq 7 ]' '[ "$(printf "%s\n" "${whosts[@]}" | sort -u | wc -l)" -eq 5 ]' ||
  show out "$tmp/out"
check "the master answers here" [ "$(answers here "${mport:-0}")" = "m-$token" ]
check "the master answers on lab1" [ "$(answers lab1 "${mport:-0}")" = "m-$token" ]
bad=
for i in "${!wports[@]}"; do
  for where in here lab1; do
    [ "$(answers "$where" "${wports[$i]}")" = "w$i-$token" ] || bad="$bad worker-$i@$where(${whosts[$i]})"
  done
done
check "every worker answers here and on lab1 (the mesh)" [ -z "$bad" ] || echo "  did not answer:$bad" >&2
check "no host was lost" not grep -q "lost" "$tmp/err" || show err "$tmp/err"

# ---- Ctrl-C as a terminal sends it: to the whole process group ----------------------------------
kill -INT -- "-$pid"
rc=124
for _ in $(seq 1 300); do
  if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; rc=$?; break; fi
  sleep 0.2
done
check "a Ctrl-C to its process group stops it: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/err"
check "no host was lost while it stopped" not grep -q "lost" "$tmp/err" || show err "$tmp/err"
check "nothing left here (master, workers of self and me, ProxyCommands)" wait_for 10 [ "$(local_procs)" -eq 0 ]
check "nothing left on lab1 (its and twin's workers) nor on lab2 (hop's)" \
  wait_for 10 all '[ "$(host_procs 1)" -eq 0 ]' '[ "$(host_procs 2)" -eq 0 ]'
check "no ssh -W of hop left" [ "$(pgrep -fc -- "-W $lab2_addr:22 lab0")" -eq 0 ]
check "no working directory left here, on lab1 or on lab2" \
  all '[ "$(dirs_here "$pid")" -eq 0 ]' '[ "$(dirs_host "$pid" 1)" -eq 0 ]' \
  '[ "$(dirs_host "$pid" 2)" -eq 0 ]'
check "no sshd -i of self or me left" [ "$(pgrep -fc -- "sshd -i -f $dir/hosts/0/")" -eq 0 ]

# ---- a plain user with fish as login shell, on a host whose ssh config lists that host itself --
# lcfish runs lazyclusterctl inside lab7 with an ssh config of its own that names lab7 by its
# address ("me", its real sshd) and lab6: the shared-config case, as a plain user.
lab7_addr=$(awk '/^Host lab7$/{f=1} f && $1 == "HostName" {print $2; exit}' "$dir/ssh_config")
lab6_addr=$(awk '/^Host lab6$/{f=1} f && $1 == "HostName" {print $2; exit}' "$dir/ssh_config")
uid=$(awk '$1 == "lcfish" { print $2 }' "$dir/users.txt")
ucfg=/home/lcfish/lc/ssh_config
for h in 6 7; do
  "$th" exec "$h" -- sh -c "mkdir -p /home/lcfish/lc && cat > /home/lcfish/lc/lazyclusterctl &&
    chmod 755 /home/lcfish/lc/lazyclusterctl && chown -R lcfish: /home/lcfish/lc" <"$ctl"
done
"$th" exec 7 -- sh -c "cat > /home/lcfish/lc/id && chmod 600 /home/lcfish/lc/id" <"$dir/id_ed25519"
"$th" exec 7 -- sh -c "cat > /home/lcfish/lc/known_hosts" <"$dir/known_hosts"
"$th" exec 7 -- sh -c "cat > $ucfg && chown -R lcfish: /home/lcfish/lc" <<EOF
Host me
  HostName $lab7_addr
Host other
  HostName $lab6_addr
Host *
  User lcfish
  IdentityFile /home/lcfish/lc/id
  IdentitiesOnly yes
  UserKnownHostsFile /home/lcfish/lc/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
EOF
# Processes of lcfish on host I.
user_procs() { uid_procs "$1" "$uid"; }
check "lcfish has a uid, and nothing of it runs on lab6 or lab7" \
  all '[ -n "$uid" ]' '[ "$(user_procs 6)" -eq 0 ]' '[ "$(user_procs 7)" -eq 0 ]'
driver='exec 3<>/dev/tcp/127.0.0.1/$LAZYCLUSTER_MASTER_PORT && read -r l <&3 && echo "driver reads $l"'
"$th" exec 7 -- setpriv --reuid=lcfish --regid=lcfish --init-groups -- \
  env -i HOME=/home/lcfish USER=lcfish PATH=/usr/bin:/bin LANG=C.UTF-8 \
  /home/lcfish/lc/lazyclusterctl run -F "$ucfg" --hosts me,other --workers 4 --type-arg expose=mesh \
  --master-cmd "exec /home/lcfish/lc/lazyclusterctl serve {master_port} m-fish" \
  --worker-cmd "exec /home/lcfish/lc/lazyclusterctl serve {worker_port} w{worker_index}-fish" \
  -- bash -c "$driver" >"$tmp/fout" 2>"$tmp/ferr"
rc=$?
check "run as lcfish on lab7, with lab7 itself among its hosts, exits 0" [ "$rc" -eq 0 ] ||
  { show out "$tmp/fout"; show err "$tmp/ferr"; }
check "its driver reached the master" grep -qx "driver reads m-fish" "$tmp/fout" || show out "$tmp/fout"
check "nothing of lcfish left on lab7 or lab6" \
  wait_for 10 all '[ "$(user_procs 7)" -eq 0 ]' '[ "$(user_procs 6)" -eq 0 ]'
check "no working directory of lcfish left on lab7 or lab6" \
  all '[ -z "$("$th" exec 7 -- sh -c "ls -A /home/lcfish/.cache/lazycluster 2>/dev/null | grep -vx run")" ]' \
  '[ -z "$("$th" exec 6 -- sh -c "ls -A /home/lcfish/.cache/lazycluster 2>/dev/null | grep -vx run")" ]'
checks_done
