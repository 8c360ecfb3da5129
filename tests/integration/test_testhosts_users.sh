#!/usr/bin/env bash
# test_testhosts_users.sh - the test hosts' plain users (tests/support/testhosts), through the real
# OpenSSH client: each logs in with the test key, runs its own login shell (the binary, and for
# lcash busybox as ash), is not root, has a home private to each host; the clean users' shells
# print nothing around a command, the greeting users print their line on stdout and on stderr;
# root still logs in; none of the users exists on the real machine.
set -u
. "$(dirname "$0")/../support/check.sh"
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
cfg=$dir/ssh_config
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shopt -s extglob
# shellcheck disable=SC2053 # the right side is a pattern on purpose
base_is() { [[ -n $1 && ${1##*/} == $2 ]]; } # PATH PATTERN
rssh() { ssh -F "$cfg" -o BatchMode=yes -o ConnectTimeout=10 "$@" </dev/null; }

# The users and the binary each login shell must be (base name of /proc/PID/exe, a pattern), and
# the greeting an rc file prints ('-': none). Written here, not read from the script's users.txt.
declare -A want_exe=(
  [lcbash]=bash [lcsh]=dash [lczsh]=zsh [lcksh]='@(ksh93|mksh)' [lcash]=busybox [lcfish]=fish
  [lctcsh]=tcsh [lccsh]=bsd-csh [lcgreet]=bash [lcgreetfish]=fish [lcgreetcsh]=tcsh)
declare -A want_greet=(
  [lcbash]=- [lcsh]=- [lczsh]=- [lcksh]=- [lcash]=- [lcfish]=- [lctcsh]=- [lccsh]=-
  [lcgreet]='hello from .bashrc' [lcgreetfish]='hello from config.fish'
  [lcgreetcsh]='hello from .tcshrc')
users=(lcbash lcsh lczsh lcksh lcash lcfish lctcsh lccsh lcgreet lcgreetfish lcgreetcsh)

check "users.txt lists exactly these users" \
  [ "$(cut -d' ' -f1 "$dir/users.txt" | tr '\n' ' ')" == "${users[*]} " ]

# One line that every login shell passes to sh unchanged: single quotes, no '!', no newline.
# sh's parent is the login shell (the '; true' keeps the shell from exec'ing sh in its place).
probe="sh -c 'echo \"exe=\$(readlink /proc/\$PPID/exe)\"; echo \"argv0=\$(tr \"\\0\" \"\\n\" </proc/\$PPID/cmdline | head -n 1)\"; echo \"user=\$(id -un) uid=\$(id -u)\"; echo \"home=\$HOME\"; echo \"host=\$(hostname)\"; echo \"\$(hostname)\" >\"\$HOME/testhosts-private\" && echo wrote'; true"
peek="sh -c 'if [ -e \"\$HOME/testhosts-private\" ]; then echo present; else echo absent; fi'; true"

for u in "${users[@]}"; do
  rssh "$u@lab1" "$probe" >"$tmp/$u.out" 2>"$tmp/$u.err"
  rc=$?
  check "$u: logs in on lab1 and runs a command" [ "$rc" -eq 0 ]
  [ "$rc" -eq 0 ] || sed 's/^/    /' "$tmp/$u.err" >&2
  exe=$(sed -n 's/^exe=//p' "$tmp/$u.out")
  check "$u: the login shell is ${want_exe[$u]} (got '$exe')" base_is "$exe" "${want_exe[$u]}"
  if [[ $u == lcash ]]; then
    check "lcash: busybox runs as ash (argv[0] '$(sed -n 's/^argv0=//p' "$tmp/$u.out")')" \
      grep -qx 'argv0=-\{0,1\}ash' "$tmp/$u.out"
  fi
  check "$u: is itself, not root" grep -qx "user=$u uid=[1-9][0-9]*" "$tmp/$u.out"
  check "$u: HOME is /home/$u" grep -qx "home=/home/$u" "$tmp/$u.out"
  check "$u: runs on lab1" grep -qx "host=lab1" "$tmp/$u.out"
  check "$u: writes in its home on lab1" grep -qx wrote "$tmp/$u.out"
  check "$u: its lab1 file is there on lab1" [ "$(rssh "$u@lab1" "$peek" 2>/dev/null | tail -n 1)" == present ]
  check "$u: its lab1 file is not on lab2" [ "$(rssh "$u@lab2" "$peek" 2>/dev/null | tail -n 1)" == absent ]
  check "$u: no /home/$u on the real machine" [ ! -e "/home/$u" ]
  check "$u: not a user of the real machine" bash -c "! getent passwd $u >/dev/null"

  # a plain `ssh USER@lab1 true`: the clean shells print nothing, the greeting users their line
  # once on stdout and once on stderr
  rssh "$u@lab1" true >"$tmp/$u.true.out" 2>"$tmp/$u.true.err"
  rc=$?
  check "$u: 'true' exits 0" [ "$rc" -eq 0 ]
  if [[ ${want_greet[$u]} == - ]]; then
    check "$u: prints nothing on stdout" [ ! -s "$tmp/$u.true.out" ]
    check "$u: prints nothing on stderr" [ ! -s "$tmp/$u.true.err" ]
  else
    check "$u: greets on stdout, one line" [ "$(cat "$tmp/$u.true.out")" == "${want_greet[$u]}" ]
    check "$u: greets on stderr" grep -qx "${want_greet[$u]}" "$tmp/$u.true.err"
  fi
done
rssh lab1 'rm -f /home/*/testhosts-private' >/dev/null 2>&1

# shellcheck disable=SC2016 # $HOME is the host's
check "root still logs in (uid 0, /root)" [ "$(rssh lab1 'id -u; echo $HOME' | tr '\n' ' ')" == "0 /root " ]

checks_done
