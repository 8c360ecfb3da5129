# check.sh - what the shell tests of lazyclusterctl share; sourced (bash) by
# tests/integration/test_cli_*.sh:
#   . "$(dirname "$0")/../support/check.sh"
#
#   check NAME CONDITION...  runs CONDITION; counts and prints "ok   NAME" or "FAIL NAME"
#                            (then returns 1: `check ... || show ...`)
#   not CONDITION...         true when CONDITION fails
#   all 'COND' 'COND'...     true when every condition (a shell string) holds
#   wait_for S CONDITION...  true once CONDITION holds, looked at every 0.2 s for at most S s
#                            (the limit only ends a broken run; it is never what is measured)
#   show LABEL FILE          FILE on stderr, each line prefixed with "  LABEL: "
#   lc_hosts_env             the environment a test of the test hosts runs in (through ctest):
#                            ctl (LC_CTL), th (LC_TESTHOSTS), dir (LC_TESTHOSTS_DIR), cfg (their
#                            ssh config) and tmp (a fresh directory of the test's; it removes it)
#   lc_ctl_copy              copies $ctl to a fresh directory under /var/tmp and points ctl at
#                            it (the hosts see this machine's files but /tmp, /root and /home,
#                            and another user must be able to run it); $bindir is that
#                            directory, for the test's cleanup to remove
#   lc_private_home          HOME and XDG_RUNTIME_DIR of the test's own under $tmp (so that no
#                            state of the user running it is seen or touched)
#   uid_procs I UID          how many processes of uid UID run on test host I (its own pids,
#                            from "$th" pids: the caller sets th to tests/support/testhosts)
#   checks_done              the test's exit status: 0 only when checks ran and none failed
passed=0 failed=0

check() { # NAME CONDITION...
  local lc_check_name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok   $lc_check_name" >&2
  else
    failed=$((failed + 1))
    echo "FAIL $lc_check_name" >&2
    return 1 # so that `check ... || show ...` shows what failed
  fi
}

not() { ! "$@"; }

all() {
  local c
  for c in "$@"; do eval "$c" || return 1; done
}

wait_for() { # SECONDS CONDITION...
  local n=$(($1 * 5))
  shift
  while [ "$n" -gt 0 ]; do
    "$@" && return 0
    sleep 0.2
    n=$((n - 1))
  done
  "$@"
}

show() { sed "s/^/  $1: /" "$2" >&2; }

lc_hosts_env() {
  ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
  th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
  dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
  cfg=$dir/ssh_config
  tmp=$(mktemp -d)
}

lc_ctl_copy() {
  bindir=$(mktemp -d /var/tmp/lcctl.XXXXXX) && chmod 755 "$bindir" &&
    install -m 755 "$ctl" "$bindir/lazyclusterctl" && ctl=$bindir/lazyclusterctl ||
    {
      echo "cannot copy $ctl to /var/tmp" >&2
      exit 1
    }
}

lc_private_home() {
  export XDG_RUNTIME_DIR=$tmp/xdg HOME=$tmp/home
  unset XDG_CACHE_HOME
  mkdir -m 700 "$XDG_RUNTIME_DIR" "$HOME"
}

uid_procs() { # I UID
  local n=0 p
  for p in $("$th" pids "$1"); do
    [ "$(awk '/^Uid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)" = "$2" ] && n=$((n + 1))
  done
  echo "$n"
}

checks_done() {
  echo "$passed passed, $failed failed" >&2
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}
