#!/usr/bin/env bash
# test_cli_hosts.sh - `lazyclusterctl hosts` and `exec` against the real test hosts: the table and
# JSON, prefixed line-atomic output under load, failure summaries and exit codes, bad arguments.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
cfg=$dir/ssh_config
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# hosts: a table of 8 ready hosts, and JSON
"$ctl" hosts -F "$cfg" >"$tmp/hosts" 2>&1; rc=$?
check "hosts exits 0" [ "$rc" -eq 0 ]
check "hosts lists 8 ready hosts" [ "$(grep -c ' ready ' "$tmp/hosts")" -eq 8 ]
"$ctl" hosts -F "$cfg" --hosts lab0,lab1 --json >"$tmp/hosts.json" 2>&1
check "hosts --json has the two hosts" [ "$(grep -c '"state": "ready"' "$tmp/hosts.json")" -eq 2 ]
check "hosts --json has cores" grep -q '"cores": ' "$tmp/hosts.json"

# an unreachable host makes hosts exit 1 and says why
printf 'Host closed\n  HostName %s\n  Port 2\n' "$(awk '$1=="lab0"{print $2}' "$dir/hosts.txt")" >"$tmp/cfg"
cat "$cfg" >>"$tmp/cfg"
"$ctl" hosts -F "$tmp/cfg" --hosts lab0,closed >"$tmp/h2" 2>&1; rc=$?
check "hosts exits 1 with an unreachable host" [ "$rc" -eq 1 ]
check "hosts says why" grep -q 'closed .*unreachable.*refused' "$tmp/h2"

# exec: every line prefixed with its own host, whole, under load (8 hosts, long lines at once)
"$ctl" exec -F "$cfg" -- 'c=$(hostname | cut -c4 | tr 0-7 a-h); i=0; while [ $i -lt 300 ]; do
  head -c 3000 /dev/zero | tr "\0" "$c"; echo; i=$((i+1)); done' >"$tmp/out" 2>"$tmp/err"; rc=$?
check "exec exits 0" [ "$rc" -eq 0 ]
check "exec printed 2400 lines" [ "$(wc -l <"$tmp/out")" -eq 2400 ]
bad=$(awk '{ h = substr($1, 5, 1); c = substr("abcdefgh", h + 1, 1);
             body = substr($0, length($1) + 2);
             if ($1 !~ /^\[lab[0-7]\]$/ || length(body) != 3000 || body !~ ("^" c "+$")) n++ }
           END { print n + 0 }' "$tmp/out")
check "every line is whole and carries its own host's prefix" [ "$bad" -eq 0 ]

# exec: a failing host is summarised and the exit is 1
"$ctl" exec -F "$cfg" --hosts lab0,lab1,lab2 -- '[ $(hostname) != lab1 ] || exit 3' >"$tmp/o3" 2>"$tmp/e3"; rc=$?
check "exec exits 1 when a host failed" [ "$rc" -eq 1 ]
check "exec names the failed host and status" grep -q "lab1.*status 3" "$tmp/e3"
check "exec counts the failures" grep -q "1 of 3 hosts failed" "$tmp/e3"

# exec --timeout: per host; a host past it is stopped (its process group), reported timed out,
# and the exit is 1; the other hosts succeed
th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
sleeps() { # the sleep 1000 processes on host I
  for p in $("$th" pids "$1" --dir "$dir"); do
    tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null
    echo
  done | grep -c '^sleep 1000 *$'
}
"$ctl" exec -F "$cfg" --hosts lab0,lab1 --timeout 2 -- \
  'if [ $(hostname) = lab1 ]; then sleep 1000; else echo done; fi' >"$tmp/o14" 2>"$tmp/e14"
rc=$?
sed 's/^/    /' "$tmp/e14" >&2
check "exec --timeout: exits 1 when a host timed out" [ "$rc" -eq 1 ]
check "exec --timeout: names the host and the limit" grep -q "lab1: .*timed out after 2.0 s" "$tmp/e14"
check "exec --timeout: the other host ran" grep -qx '\[lab0\] done' "$tmp/o14"
check "exec --timeout: one of 2 hosts failed" grep -q "1 of 2 hosts failed" "$tmp/e14"
no_sleeps() { [ "$(sleeps 1)" -eq 0 ]; }
check "exec --timeout: nothing left on lab1" wait_for 30 no_sleeps
"$ctl" exec -F "$cfg" --hosts lab0 --timeout soon -- true >"$tmp/o15" 2>&1; rc=$?
check "exec --timeout soon: exits 2 and quotes it" sh -c "[ $rc -eq 2 ] && grep -q soon '$tmp/o15'"

# exec joins the words after -- with single blanks, as ssh, pdsh and clush do; the host's shell
# parses the result
"$ctl" exec -F "$cfg" --hosts lab0,lab1 -- echo a  b >"$tmp/o7" 2>"$tmp/e7"; rc=$?
check "exec -- echo a b exits 0" [ "$rc" -eq 0 ]
check "exec -- echo a b prints 'a b' tagged per host" \
  [ "$(sort "$tmp/o7")" = "$(printf '[lab0] a b\n[lab1] a b')" ]
"$ctl" exec -F "$cfg" --hosts lab2 -- echo a '&&' echo b >"$tmp/o8" 2>&1
check "exec -- joined words are read by the host's shell" \
  [ "$(cat "$tmp/o8")" = "$(printf '[lab2] a\n[lab2] b')" ]
"$ctl" exec -F "$cfg" --hosts lab3 -- 'echo $HOME; hostname' >"$tmp/o9" 2>&1
check "exec -- 'one quoted command' still works, expanded on the host" \
  [ "$(cat "$tmp/o9")" = "$(printf '[lab3] /root\n[lab3] lab3')" ]
"$ctl" exec -F "$cfg" --hosts lab0 -- >"$tmp/o10" 2>&1; rc=$?
check "exec -- without a command exits 2 and says so" \
  sh -c "[ $rc -eq 2 ] && grep -q 'no command after --' '$tmp/o10'"

# host ranges as pdsh and ClusterShell write them, in --hosts and in inventory files
"$ctl" exec -F "$cfg" --hosts 'lab[0-2]' -- hostname >"$tmp/o11" 2>"$tmp/e11"; rc=$?
check "exec --hosts 'lab[0-2]' exits 0" [ "$rc" -eq 0 ]
check "exec --hosts 'lab[0-2]' runs on exactly lab0, lab1, lab2" \
  [ "$(sort "$tmp/o11")" = "$(printf '[lab0] lab0\n[lab1] lab1\n[lab2] lab2')" ]
printf '# ranges\nlab[5-6] gpus=3 slots=2\nlab[1,7]\nlab6 gpus=3 slots=2\n' >"$tmp/inv"
"$ctl" hosts -F "$cfg" --inventory "$tmp/inv" --json >"$tmp/o12" 2>&1; rc=$?
check "hosts --inventory with ranges exits 0" [ "$rc" -eq 0 ]
check "hosts --inventory with ranges finds the 4 hosts, lab6 once" \
  [ "$(grep -o '"host": "lab[0-9]"' "$tmp/o12" | sort | tr '\n' ' ')" = \
    '"host": "lab1" "host": "lab5" "host": "lab6" "host": "lab7" ' ]
check "gpus=3 goes to every host of the range" \
  [ "$(grep -c '"gpus": 3' "$tmp/o12")" -eq 2 ]
"$ctl" exec -F "$cfg" --hosts 'lab[3-1]' -- true >"$tmp/o13" 2>&1; rc=$?
check "a reversed range exits 1" [ "$rc" -eq 1 ]
check "a reversed range is refused with a message quoting it" \
  grep -qF "bad host range 'lab[3-1]': '3-1' in '[3-1]' runs backwards" "$tmp/o13"

# bad arguments: exit 2 with a message quoting them
"$ctl" exec -F "$cfg" >"$tmp/o4" 2>&1; rc=$?
check "exec without a command exits 2" [ "$rc" -eq 2 ]
"$ctl" exec --fanout zero -- true >"$tmp/o5" 2>&1; rc=$?
check "a bad --fanout exits 2 and quotes it" sh -c "[ $rc -eq 2 ] && grep -q zero '$tmp/o5'"
"$ctl" hosts --inventory /no/such/file >"$tmp/o6" 2>&1; rc=$?
check "a missing inventory exits 1 and names it" sh -c "[ $rc -eq 1 ] && grep -q /no/such/file '$tmp/o6'"

checks_done
