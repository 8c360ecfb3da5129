#!/usr/bin/env bash
# test_cli_user.sh - clusters that live, run by plain users on their own machine: lazyclusterctl
# runs inside test host lab7 as lcbash (login shell bash) and as lcfish (fish), with no host
# configured (this machine is the one runtime) and no XDG_RUNTIME_DIR (the state directory is
# then ~/.cache/lazycluster/run). start --detach, list, status, stop, run; what runs is the user's,
# the state directory is the user's and 0700, and nothing is left after stop or run.
#
# The binary is copied into the users' homes on lab7: the build tree may lie under /tmp, which
# the hosts do not see. Time bounds are generous upper limits, not measurements.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
host=7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
uid_of() { awk -v u="$1" '$1 == u { print $2 }' "$dir/users.txt"; }
# as USER ARGS...: lazyclusterctl ARGS as USER on lab7, in a clean environment (no XDG_RUNTIME_DIR)
as() {
  local user=$1; shift
  "$th" exec "$host" -- setpriv --reuid="$user" --regid="$user" --init-groups -- \
    env -i HOME="/home/$user" USER="$user" PATH=/usr/bin:/bin LANG=C.UTF-8 \
    "/home/$user/lc/lazyclusterctl" "$@"
}
# Processes of uid U on lab7 (the host's own: its network namespace).
user_procs() { uid_procs "$host" "$1"; }
on_host() { "$th" exec "$host" -- sh -c "$1"; }

for user in lcbash lcfish; do
  "$th" exec "$host" -- sh -c "mkdir -p /home/$user/lc && cat > /home/$user/lc/lazyclusterctl &&
    chmod 755 /home/$user/lc/lazyclusterctl && chown -R $user: /home/$user/lc" <"$ctl"
done

# ---- lcbash: start --detach, list, status, stop ------------------------------------------------
u=lcbash uid=$(uid_of lcbash)
check "lcbash has a uid" [ -n "$uid" ]
check "nothing of lcbash runs on lab7 before" [ "$(user_procs "$uid")" -eq 0 ]
as $u start --detach --name mine --workers 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "start --detach as lcbash exits 0" [ "$rc" -eq 0 ] || { show out "$tmp/out"; show err "$tmp/err"; }
check "it prints the name, the master and the logs in lcbash's home" \
  all 'grep -qx "name mine" "$tmp/out"' 'grep -qE "^master localhost:[0-9]+ on " "$tmp/out"' \
  'grep -qx "logs /home/lcbash/.cache/lazycluster/run/mine/logs" "$tmp/out"'
check "the state directory is lcbash's, mode 700" \
  [ "$(on_host "stat -c '%a %u' /home/lcbash/.cache/lazycluster/run")" = "700 $uid" ]
check "the control socket is lcbash's, mode 600" \
  [ "$(on_host "stat -c '%a %u' /home/lcbash/.cache/lazycluster/run/mine/control.sock")" = "600 $uid" ]
as $u list >"$tmp/list" 2>&1
check "list shows mine running 2/2" grep -qE "^mine +running +2/2 " "$tmp/list" || show list "$tmp/list"
as $u status mine --json >"$tmp/st.json" 2>&1
check "status --json: state running, 2 workers with pids" \
  [ "$(json "$tmp/st.json" 'd["state"] == "running" and len(d["workers"]) == 2 and all(w["pid"] > 0 for w in d["workers"])')" = True ] ||
  show status "$tmp/st.json"
sup=$(json "$tmp/st.json" 'd["supervisor_pid"]')
# the supervisor's pid is lab7's own count (the host has its own PID namespace): read it there
sup_uid=$(on_host "awk '/^Uid:/ { print \$2 }' /proc/${sup:-0}/status")
check "the supervisor, the master and the workers run as lcbash (4 processes at least)" \
  all '[ "$sup_uid" = "$uid" ]' '[ "$(user_procs "$uid")" -ge 4 ]'
check "root's state directory on lab7 knows nothing of it" \
  [ -z "$(on_host 'ls -A /root/.cache/lazycluster/run 2>/dev/null')" ]
as $u stop mine >"$tmp/out" 2>"$tmp/err"; rc=$?
check "stop mine exits 0" [ "$rc" -eq 0 ] || show err "$tmp/err"
# stop returns once the supervisor has torn everything down; its own exit may lag a moment
for _ in $(seq 20); do [ "$(user_procs "$uid")" -eq 0 ] && break; sleep 0.5; done
check "after stop: no process of lcbash left on lab7" [ "$(user_procs "$uid")" -eq 0 ]
check "after stop: no state entry and no working directory left" \
  all '[ -z "$(on_host "ls -A /home/lcbash/.cache/lazycluster/run")" ]' \
  '[ -z "$(on_host "ls -A /home/lcbash/.cache/lazycluster | grep -vx run")" ]'

# ---- lcfish: run exits with the driver's status, nothing left ----------------------------------
u=lcfish uid=$(uid_of lcfish)
as $u run --workers 1 -- sh -c 'echo "driver sees $LAZYCLUSTER_MASTER_PORT"; exit 7' >"$tmp/out" 2>"$tmp/err"; rc=$?
check "run as lcfish exits 7 (the driver's status)" [ "$rc" -eq 7 ] || show err "$tmp/err"
check "the driver got the master's port" grep -qE "^driver sees [0-9]+$" "$tmp/out"
for _ in $(seq 20); do [ "$(user_procs "$uid")" -eq 0 ] && break; sleep 0.5; done
check "after run: no process of lcfish left on lab7" [ "$(user_procs "$uid")" -eq 0 ]
check "after run: no state entry left" [ -z "$(on_host "ls -A /home/lcfish/.cache/lazycluster/run 2>/dev/null")" ]

# ---- another user's cluster is not this user's ------------------------------------------------
as lcbash start --detach --name theirs --workers 1 >/dev/null 2>"$tmp/err"; rc=$?
check "lcbash starts theirs" [ "$rc" -eq 0 ] || show err "$tmp/err"
as lcfish status theirs >"$tmp/out" 2>"$tmp/err"; rc=$?
check "lcfish does not see lcbash's cluster (its own state directory): exit 1 naming it" \
  all '[ "$rc" -eq 1 ]' 'grep -q theirs "$tmp/err"'
as lcbash stop theirs >/dev/null 2>&1
for _ in $(seq 20); do [ "$(user_procs "$(uid_of lcbash)")" -eq 0 ] && break; sleep 0.5; done
check "theirs stopped: nothing of lcbash left" [ "$(user_procs "$(uid_of lcbash)")" -eq 0 ]

"$th" exec "$host" -- rm -rf /home/lcbash/lc /home/lcfish/lc /home/lcbash/.cache /home/lcfish/.cache
checks_done
