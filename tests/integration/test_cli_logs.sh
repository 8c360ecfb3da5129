#!/usr/bin/env bash
# test_cli_logs.sh - `lazyclusterctl logs` on a cluster entry written by hand (no hosts, no
# supervisor: `flock` holds its lock, so it counts as alive): the files merged by time (FILE.1
# before FILE), --master, --worker N, --host H, --tail N, --time; -f follows appended lines, a
# line written in two parts, a rotation (FILE -> FILE.1, a new FILE) and a new worker's file, and
# ends once the lock is free; bad input.
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
tmp=$(mktemp -d)
holder=
trap '[ -n "$holder" ] && pkill -P "$holder" sleep; rm -rf "$tmp"' EXIT
# same FILE LINE...: FILE holds exactly these lines
same() { local f=$1; shift; [ "$(cat "$f")" = "$(printf '%s\n' "$@")" ] || { sed 's/^/  got: /' "$f" >&2; return 1; }; }

export XDG_RUNTIME_DIR=$tmp/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
st=$XDG_RUNTIME_DIR/lazycluster
mkdir -m 700 "$st" "$st/x" "$st/x/logs"
printf 'pid %d\ncreated %s\ntype command\n' $$ "$(date +%s)000" >"$st/x/info"
flock -o "$st/x/lock" sleep 300 & # -o: only flock holds the lock, not its sleep
holder=$!
check "the entry's lock is held" wait_for 10 eval "! flock -n '$st/x/lock' true"
L=$st/x/logs
printf '1000 o [lab0 master] m1\n4000 o [lab0 master] m4\n' >"$L/master.log"
printf '2000 o [lab1 worker-0] w0a\n' >"$L/worker-0.log.1"
printf '5000 e [lab1 worker-0] w0b\n' >"$L/worker-0.log"
printf '3000 o [lab2 worker-1] w1a\n' >"$L/worker-1.log"
printf '3500 c [- cluster] ev\n' >"$L/cluster.log"

"$ctl" logs x >"$tmp/o" 2>&1
check "logs x: every file, merged by time, FILE.1 first, tagged" same "$tmp/o" \
  "[lab0 master] m1" "[lab1 worker-0] w0a" "[lab2 worker-1] w1a" "[cluster] ev" "[lab0 master] m4" "[lab1 worker-0] w0b"
"$ctl" logs >"$tmp/o" 2>&1
check "logs with no name: the one cluster there" [ "$(wc -l <"$tmp/o")" -eq 6 ]
"$ctl" logs x --tail 2 >"$tmp/o" 2>&1
check "--tail 2: the last two" same "$tmp/o" "[lab0 master] m4" "[lab1 worker-0] w0b"
"$ctl" logs x --worker 0 >"$tmp/o" 2>&1
check "--worker 0: its file and its FILE.1" same "$tmp/o" "[lab1 worker-0] w0a" "[lab1 worker-0] w0b"
"$ctl" logs x --master >"$tmp/o" 2>&1
check "--master" same "$tmp/o" "[lab0 master] m1" "[lab0 master] m4"
"$ctl" logs x --host lab2 >"$tmp/o" 2>&1
check "--host lab2" same "$tmp/o" "[lab2 worker-1] w1a"
"$ctl" logs x --time --tail 1 >"$tmp/o" 2>&1
check "--time puts the time first" grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} \[lab1 worker-0\] w0b$' "$tmp/o"

# bad input
"$ctl" logs x --worker 9 >"$tmp/o" 2>&1; rc=$?
check "--worker 9 (none): exit 1, named" all '[ "$rc" -eq 1 ]' 'grep -q "no worker 9" "$tmp/o"'
"$ctl" logs nosuch >"$tmp/o" 2>&1; rc=$?
check "an unknown name: exit 1, named, the live ones listed" \
  all '[ "$rc" -eq 1 ]' 'grep -q "nosuch" "$tmp/o"' 'grep -q "here: x" "$tmp/o"'
"$ctl" logs x --master --worker 1 >"$tmp/o" 2>&1; rc=$?
check "--master with --worker: exit 2" [ "$rc" -eq 2 ]
"$ctl" logs x --tail many >"$tmp/o" 2>&1; rc=$?
check "--tail many: exit 2, quoted" all '[ "$rc" -eq 2 ]' 'grep -q "many" "$tmp/o"'

# -f: appended lines, a line in two parts, a rotation, a new worker's file; ends when x is gone
"$ctl" logs x -f --tail 0 >"$tmp/f" 2>&1 &
follow=$!
sleep 0.5
printf '6000 o [lab2 worker-1] w1b\n' >>"$L/worker-1.log"
check "-f: an appended line comes" wait_for 10 grep -qx "\[lab2 worker-1\] w1b" "$tmp/f"
printf '7000 o [lab1 worker-0] w0c\n' >>"$L/worker-0.log"
mv "$L/worker-0.log" "$L/worker-0.log.1"
printf '8000 o [lab1 worker-0] w0d\n' >"$L/worker-0.log"
printf '9000 o [lab3 worker-2] w2a\n' >"$L/worker-2.log"
printf '10000 o [lab0 master] par' >>"$L/master.log"
sleep 0.5
printf 'tial\n' >>"$L/master.log"
check "-f: the line written just before the rotation, and the one after" \
  wait_for 10 eval "grep -qx '\[lab1 worker-0\] w0c' '$tmp/f' && grep -qx '\[lab1 worker-0\] w0d' '$tmp/f'"
check "-f: a new worker's file" wait_for 10 grep -qx "\[lab3 worker-2\] w2a" "$tmp/f"
check "-f: a line written in two parts is one line" wait_for 10 grep -qx "\[lab0 master\] partial" "$tmp/f"
check "-f: still following while x lives" kill -0 "$follow"
pkill -P "$holder" sleep; wait "$holder" 2>/dev/null; holder=
check "-f ends once x is gone (within 10 s)" wait_for 10 eval "! kill -0 $follow 2>/dev/null"
check "-f: nothing twice, nothing from before (--tail 0)" same "$tmp/f" \
  "[lab2 worker-1] w1b" "[lab1 worker-0] w0c" "[lab1 worker-0] w0d" "[lab3 worker-2] w2a" "[lab0 master] partial"

checks_done
