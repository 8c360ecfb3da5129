#!/usr/bin/env bash
# test_cli_map.sh - `lazyclusterctl map` (issue 15) on the real test hosts, as a user runs it
# (default timeouts): 40 jobs over 4 hosts with gpus=2 (never two at once on one GPU, each once,
# --keep-order output in order), as root and as lcfish (fish login shell); a host's link cut while
# its jobs run; --retries; Ctrl-C on a terminal then --resume; a pool (worker starts counted, 100
# jobs, a worker killed mid-job, --update reaching every worker); --results; --send and
# --return; no host configured (this machine); bad input. After every run: nothing of it left on
# any host (processes, working directories) nor here.
#
# The jobs record what they saw into files under a directory in /var/tmp, which every host and
# this machine share (the hosts' own /tmp and homes are theirs alone).
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names tests/support/testhosts}
cfg=$dir/ssh_config
tmp=$(mktemp -d)
token=lcm$$r$RANDOM
# The binary from a copy the hosts' users can read (its path must not hold $token); the jobs'
# shared directory holds it: every job and worker process names it, so they can be counted.
lc_ctl_copy
sh=/var/tmp/$token
mkdir -m 1777 "$sh" || { echo "cannot make $sh" >&2; exit 1; }
lc_private_home
cleanup() {
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" "$bindir" "$sh"
}
trap cleanup EXIT
# Processes of this run on host I (their command line names $token).
host_procs() {
  "$th" pids "$1" | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done |
    grep -c -- "$token"
}
host_dirs() { # I [USER]: lazycluster's working directories on host I
  local home=/root
  [ -n "${2:-}" ] && home=/home/$2
  "$th" exec "$1" -- sh -c "ls -A $home/.cache/lazycluster 2>/dev/null"
}
# nothing_left LABEL [USER]: no process of this run on lab1-lab4 or here, no working directory.
nothing_left() {
  local i
  for i in 1 2 3 4; do
    check "$1: lab$i: no process left" [ "$(host_procs $i)" -eq 0 ]
    check "$1: lab$i: no working directory left" [ -z "$(host_dirs $i "${2:-}")" ]
  done
  check "$1: no process left here" [ "$(pgrep -fc -- "$token")" -eq 0 ]
}
# py EXPR FILE...: a Python expression over the lines of the files (L: a list of split lines).
py() {
  local e=$1; shift
  python3 -c 'import sys
L = [l.split() for f in sys.argv[2:] for l in open(f)]
print(eval(sys.argv[1]))' "$e" "$@"
}
# The job: records "SEQ HOST GPU START END ARG" when it ends, prints "out ARG" (and on stderr
# "err ARG"), takes a moment so that the slots fill.
cat >"$sh/job.sh" <<EOF
s=\$(date +%s.%N)
sleep \${JOB_SLEEP:-0.3}
echo "\$1 \$(hostname) \${CUDA_VISIBLE_DEVICES:-none} \$s \$(date +%s.%N) \$2 \$LAZYCLUSTER_GPU" >>"\$REC"
echo "out \$2"
echo "err \$2" >&2
EOF
job="sh $sh/job.sh {#} {1}"
printf '%s gpus=2\n' lab1 lab2 lab3 lab4 >"$tmp/inv"
printf '%s gpus=2\n' lcfish@lab1 lcfish@lab2 lcfish@lab3 lcfish@lab4 >"$tmp/inv.fish"
hosts=(-F "$cfg" --inventory "$tmp/inv")

# ---- 40 jobs over 4 hosts with gpus=2, --keep-order, as root -----------------------------------
"$ctl" map "${hosts[@]}" --keep-order --env REC="$sh/rec1" -- "$job" ::: $(seq 40) \
  >"$tmp/o1" 2>"$tmp/e1"; rc=$?
check "40 jobs: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/e1"
check "40 jobs: each ran exactly once" [ "$(py 'sorted(int(r[0]) for r in L) == list(range(1, 41))' "$sh/rec1")" = True ]
check "40 jobs: CUDA_VISIBLE_DEVICES is 0 or 1, LAZYCLUSTER_GPU the same" \
  [ "$(py 'all(r[2] in ("0", "1") and r[2] == r[6] for r in L)' "$sh/rec1")" = True ]
check "40 jobs: all 4 hosts and both GPUs of each were used" \
  [ "$(py 'len(set((r[1], r[2]) for r in L))' "$sh/rec1")" = 8 ]
check "40 jobs: never two jobs at once on one GPU" \
  [ "$(py 'all(float(a[4]) <= float(b[3]) for k in set((r[1], r[2]) for r in L) for s in [sorted((r for r in L if (r[1], r[2]) == k), key=lambda r: float(r[3]))] for a, b in zip(s, s[1:]))' "$sh/rec1")" = True ]
check "40 jobs: stdout is 40 lines [labN gpuG #SEQ] out SEQ, in order (--keep-order)" \
  [ "$(grep -cE '^\[lab[1-4] gpu[01] #([0-9]+)\] out [0-9]+$' "$tmp/o1")" = 40 ] ||
  show out "$tmp/o1"
check "40 jobs: the order is 1..40 and each tag's #SEQ is its job's" \
  [ "$(sed -nE 's/^\[lab[1-4] gpu[01] #([0-9]+)\] out ([0-9]+)$/\1 \2/p' "$tmp/o1" | awk '$1 == $2 && $1 == NR' | wc -l)" = 40 ]
check "40 jobs: each line's tag names the host and GPU its job recorded" \
  [ "$(python3 -c 'import re, sys
rec = {r[0]: (r[1], r[2]) for r in (l.split() for l in open(sys.argv[1]))}
tags = [re.match(r"\[(\S+) gpu(\d) #(\d+)\] out", l).groups() for l in open(sys.argv[2])]
print(len(tags) == 40 and all(rec[s] == (h, g) for h, g, s in tags))' "$sh/rec1" "$tmp/o1" 2>&1)" = True ]
check "40 jobs: stderr has each job's line, tagged" [ "$(grep -cE '^\[lab[1-4] gpu[01] #[0-9]+\] err [0-9]+$' "$tmp/e1")" = 40 ]
check "40 jobs: the summary says 40 jobs: 40 done" grep -q "^40 jobs: 40 done" "$tmp/e1" || show err "$tmp/e1"
nothing_left "40 jobs as root"

# ---- the same as lcfish (fish login shell), as the output comes ------------------------------
"$ctl" map -F "$cfg" --inventory "$tmp/inv.fish" --env REC="$sh/rec2" -- "$job" ::: $(seq 40) \
  >"$tmp/o2" 2>"$tmp/e2"; rc=$?
check "lcfish: 40 jobs: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/e2"
check "lcfish: each ran exactly once" [ "$(py 'sorted(int(r[0]) for r in L) == list(range(1, 41))' "$sh/rec2")" = True ]
check "lcfish: never two jobs at once on one GPU" \
  [ "$(py 'all(float(a[4]) <= float(b[3]) for k in set((r[1], r[2]) for r in L) for s in [sorted((r for r in L if (r[1], r[2]) == k), key=lambda r: float(r[3]))] for a, b in zip(s, s[1:]))' "$sh/rec2")" = True ]
check "lcfish: 40 tagged output lines" [ "$(grep -cE '^\[lcfish@lab[1-4] gpu[01] #[0-9]+\] out [0-9]+$|^\[lab[1-4] gpu[01] #[0-9]+\] out [0-9]+$' "$tmp/o2")" = 40 ] || show out "$tmp/o2"
check "lcfish: the jobs ran as lcfish" all '[ -e "$sh/rec2" ]' '[ "$(stat -c %u "$sh/rec2")" != 0 ]'
nothing_left "40 jobs as lcfish" lcfish

# ---- a host's link cut while its jobs run -----------------------------------------------------
# 8 jobs of 8 s on lab1 and lab2 (2 GPUs each): lab2's first two are running when its link goes.
printf '%s gpus=2\n' lab1 lab2 >"$tmp/inv2"
cat >"$sh/slow.sh" <<EOF
echo "\$1 \$(hostname)" >>"$sh/started"
sleep 8
echo "\$1 \$(hostname)" >>"$sh/ended"
EOF
"$ctl" map -F "$cfg" --inventory "$tmp/inv2" --joblog "$tmp/cut.log" -- "sh $sh/slow.sh {#}" \
  ::: $(seq 8) >"$tmp/o3" 2>"$tmp/e3" &
map_pid=$!
check "link cut: lab2 runs its first jobs" wait_for 60 grep -qs " lab2$" "$sh/started"
"$th" link-down 2
on_lab2=$(awk '$2 == "lab2" {print $1}' "$sh/started" | sort -n | tr '\n' ' ')
wait "$map_pid"; rc=$?
check "link cut: map exits 0 (lab2's jobs ran elsewhere)" [ "$rc" -eq 0 ] || show err "$tmp/e3"
check "link cut: the joblog lists each of the 8 jobs once, each exit 0" \
  all '[ "$(awk -F"\t" "NR > 1 {print \$1}" "$tmp/cut.log" | sort -n | tr "\n" " ")" = "1 2 3 4 5 6 7 8 " ]' \
  '[ "$(awk -F"\t" "NR > 1 && \$7 != 0" "$tmp/cut.log" | wc -l)" = 0 ]' || show joblog "$tmp/cut.log"
ok_elsewhere=1
for s in $on_lab2; do
  awk -F'\t' -v s="$s" 'NR > 1 && $1 == s && $2 == "lab1" {f = 1} END {exit !f}' "$tmp/cut.log" || ok_elsewhere=0
done
check "link cut: the jobs that ran on lab2 ($on_lab2) finished on lab1" all '[ -n "$on_lab2" ]' '[ "$ok_elsewhere" = 1 ]'
check "link cut: map said lab2 was lost" grep -q "lab2" "$tmp/e3" || show err "$tmp/e3"
"$th" link-up 2
# What ran there, and the keeper of lab2's working directory, end by their lifelines once the
# heartbeat stops arriving (15 s by default); the keeper's removes the directory. Nothing is
# removed by hand.
check "link cut: nothing of them left on lab2 once it is back (within 60 s)" \
  wait_for 60 eval '[ "$(host_procs 2)" -eq 0 ]'
check "link cut: lab2's working directory removed by its keeper (within 60 s)" \
  wait_for 60 eval '[ -z "$(host_dirs 2)" ]'
nothing_left "link cut"

# ---- --retries: a job that fails twice, then passes -------------------------------------------
cat >"$sh/flaky.sh" <<EOF
n=\$(cat "$sh/flaky.\$1" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$sh/flaky.\$1"
echo "attempt \$n"
[ \$n -ge 3 ] || exit 3
EOF
"$ctl" map -F "$cfg" --hosts lab1,lab2 --retries 2 -- "sh $sh/flaky.sh a{}" ::: x >"$tmp/o4" 2>"$tmp/e4"; rc=$?
check "--retries 2: a job failing twice then passing: exit 0, 3 attempts" \
  all '[ "$rc" -eq 0 ]' '[ "$(cat "$sh/flaky.ax")" = 3 ]' || show err "$tmp/e4"
"$ctl" map -F "$cfg" --hosts lab1,lab2 --retries 1 -- "sh $sh/flaky.sh b{}" ::: x >"$tmp/o5" 2>"$tmp/e5"; rc=$?
check "--retries 1: the same fails: exit 1, 2 attempts" all '[ "$rc" -eq 1 ]' '[ "$(cat "$sh/flaky.bx")" = 2 ]'
check "--retries 1: the summary names job #1, where and its exit 3" \
  grep -qE "^1 jobs: 0 done.*1 failed: #1 \(lab[12] slot[0-9]+\) exit 3" "$tmp/e5" || show err "$tmp/e5"
nothing_left "retries"

# ---- Ctrl-C on a terminal mid-run, then --resume ------------------------------------------------
# 16 jobs of 1 s on 2 slots; Ctrl-C once 4 ended. script(1) gives map a terminal (stdin and
# stderr): the status line shows; bash, since dash would die of the SIGINT itself.
printf '%s slots=1\n' lab1 lab2 >"$tmp/inv3"
cat >"$sh/run.sh" <<EOF
echo "\$1" >>"$sh/runs.started"
sleep 1
echo "\$1" >>"$sh/runs"
EOF
printf -v mapline '%q ' "$ctl" map -F "$cfg" --inventory "$tmp/inv3" --joblog "$tmp/j.log" -- "sh $sh/run.sh {#}" ::: $(seq 16)
(for _ in $(seq 600); do [ "$(cat "$sh/runs" 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 0.1; done
  printf '\003'
  for _ in $(seq 600); do grep -q "rc=" "$tmp/tty" 2>/dev/null && break; sleep 0.1; done) |
  SHELL=/bin/bash script -qec "$mapline; echo rc=\$?" /dev/null >"$tmp/tty" 2>&1
check "Ctrl-C: map exits 130" grep -q "rc=130" "$tmp/tty" || show tty "$tmp/tty"
check "Ctrl-C: the status line showed done / running / failed / queued" \
  grep -qE "[0-9]+/16 done, [0-9]+ running, [0-9]+ failed, [0-9]+ queued" "$tmp/tty"
check "Ctrl-C: it printed what finished (the summary: done and cancelled)" \
  grep -qE "16 jobs: [0-9]+ done, [0-9]+ cancelled" "$tmp/tty" || show tty "$tmp/tty"
nothing_left "Ctrl-C"
done1=$(awk -F'\t' 'NR > 1 && $7 == 0 {print $1}' "$tmp/j.log" | sort -n | tr '\n' ' ')
check "Ctrl-C: the joblog has some jobs done, not all" \
  all '[ -n "$done1" ]' '[ "$(echo $done1 | wc -w)" -lt 16 ]'
cp "$sh/runs" "$tmp/runs.before"
"$ctl" map -F "$cfg" --inventory "$tmp/inv3" --joblog "$tmp/j.log" --resume -- "sh $sh/run.sh {#}" \
  ::: $(seq 16) >"$tmp/o6" 2>"$tmp/e6"; rc=$?
check "--resume: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/e6"
again=$(tail -n +$(($(wc -l <"$tmp/runs.before") + 1)) "$sh/runs" | sort -n | tr '\n' ' ')
twice=0
for s in $done1; do case " $again" in *" $s "*) twice=1 ;; esac; done
check "--resume: none of the done jobs ($done1) ran again" [ "$twice" = 0 ]
check "--resume: the rest ran: every job is done once in the joblog's last say" \
  [ "$(awk -F'\t' 'NR > 1 && $7 == 0 {print $1}' "$tmp/j.log" | sort -nu | wc -l)" = 16 ]
check "--resume: the summary counts the skipped ones" grep -qE "^16 jobs: [0-9]+ done, [0-9]+ skipped" "$tmp/e6" || show err "$tmp/e6"
nothing_left "--resume"

# ---- a pool: starts counted, 100 jobs, a worker killed mid-job, --update --------------------------
# Jobs after the slow one wait until the killed worker was started again (9 starts; at most
# 60 s, then they answer anyway and the count below fails), so the pool is still busy when the
# restart comes.
cat >"$sh/worker.sh" <<EOF
echo "start \$LAZYCLUSTER_HOST \$LAZYCLUSTER_GPU \$\$" >>"$sh/starts"
echo "worker \$\$ ready" >&2
while IFS= read -r line; do
  case \$line in
  update*) echo "\$\$ \$line" >>"$sh/updates"; echo "updated \$line" ;;
  slow*) if mkdir "$sh/slow.once" 2>/dev/null; then echo "\$LAZYCLUSTER_HOST \$\$" >"$sh/slow.pid"; while :; do sleep 1; done; fi
    echo "answer \$line" ;;
  w*) n=0; while [ \$(wc -l <"$sh/starts") -lt 9 ] && [ \$n -lt 300 ]; do sleep 0.2; n=\$((n + 1)); done
    echo "answer \$line" ;;
  *) echo "answer \$line" ;;
  esac
done
EOF
jobs100="$(seq -f 'j%g' 49) slow $(seq -f 'w%g' 51 100)"
"$ctl" map "${hosts[@]}" --pool --worker-cmd "sh $sh/worker.sh" --update "update u1" \
  ::: $jobs100 >"$tmp/o7" 2>"$tmp/e7" &
map_pid=$!
check "pool: the slow job reaches a worker" wait_for 60 test -s "$sh/slow.pid"
check "pool: 8 workers started, once each (before the kill)" [ "$(wc -l <"$sh/starts")" = 8 ]
# the worker's pid is its host's own count (each test host has its own PID namespace): kill there
read -r slow_host slow_pid <"$sh/slow.pid"
"$th" exec "$slow_host" -- kill -9 "$slow_pid"
wait "$map_pid"; rc=$?
check "pool: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/e7"
check "pool: 100 answers, each job once, tagged [labN gpuG #SEQ]" \
  [ "$(grep -E '^\[lab[1-4] gpu[01] #[0-9]+\] answer ' "$tmp/o7" | sed 's/.*answer //' | sort -u | wc -l)" = 100 ] ||
  show out "$tmp/o7"
check "pool: no job answered twice" [ "$(grep -c ' answer ' "$tmp/o7")" = 100 ]
check "pool: the killed worker's job was run again" grep -qE '^\[lab[1-4] gpu[01] #50\] answer slow$' "$tmp/o7"
check "pool: the killed worker was started again (9 starts: 8 + 1)" [ "$(wc -l <"$sh/starts")" = 9 ]
check "pool: the update reached every worker, the restarted one too (9)" \
  [ "$(grep -c ' update u1$' "$sh/updates")" = 9 ]
check "pool: each worker's update answer is printed" [ "$(grep -c 'updated update u1' "$tmp/o7")" -ge 8 ]
nothing_left "pool"

# ---- --results DIR ------------------------------------------------------------------------------
"$ctl" map -F "$cfg" --hosts lab1 --results "$tmp/res" -- 'echo out {}; echo err {} >&2; exit {}' \
  ::: 0 3 >"$tmp/o8" 2>"$tmp/e8"; rc=$?
check "--results: exit 1 (job 2 exits 3)" [ "$rc" -eq 1 ]
check "--results: DIR/1 and DIR/2 hold stdout, stderr, exit, command" \
  all '[ "$(cat "$tmp/res/1/stdout")" = "out 0" ]' '[ "$(cat "$tmp/res/1/stderr")" = "err 0" ]' \
  '[ "$(cat "$tmp/res/2/stdout")" = "out 3" ]' 'grep -qx 3 "$tmp/res/2/exit"' \
  'grep -q "echo out" "$tmp/res/1/command"' || ls -R "$tmp/res" >&2
nothing_left "--results"

# ---- --send FILE and --return PATTERN -----------------------------------------------------------
echo "sent-$token" >"$tmp/input.txt"
mkdir "$tmp/back"
(cd "$tmp/back" && "$ctl" map -F "$cfg" --hosts lab1,lab2 --send "$tmp/input.txt" --return 'out-{#}.txt' \
  -- 'cat input.txt >out-{#}.txt; echo {} >>out-{#}.txt' ::: a b c >"$tmp/o9" 2>"$tmp/e9"); rc=$?
check "--send/--return: exit 0" [ "$rc" -eq 0 ] || show err "$tmp/e9"
check "--send/--return: out-1..3.txt came back with the sent file's text and the argument" \
  all "[ \"\$(cat '$tmp/back/out-1.txt')\" = \"sent-$token
a\" ]" "grep -qx c '$tmp/back/out-3.txt'" "grep -qx 'sent-$token' '$tmp/back/out-2.txt'"
nothing_left "--send/--return"

# ---- --cluster NAME: the hosts of a running cluster (lab3, lab4) ------------------------------
"$ctl" start --detach --name mc -F "$cfg" --hosts lab3,lab4 --workers 2 \
  --master-cmd "exec $ctl serve {master_port} m-$token" --worker-cmd "exec $ctl serve {worker_port} w-$token" \
  >"$tmp/mc.out" 2>"$tmp/mc.err"; rc=$?
check "--cluster: the cluster mc starts on lab3 and lab4" [ "$rc" -eq 0 ] || show err "$tmp/mc.err"
"$ctl" map --cluster mc -F "$cfg" -- 'echo on $(hostname)' ::: 1 2 3 4 5 6 >"$tmp/o12" 2>"$tmp/e12"; rc=$?
check "--cluster mc: exit 0, 6 jobs, each on lab3 or lab4 (its tag and its hostname agree; the argument appended)" \
  all '[ "$rc" -eq 0 ]' '[ "$(grep -cE "^\[(lab[34]) slot[0-9]+ #([0-9]+)\] on \1 \2$" "$tmp/o12")" = 6 ]' || show out "$tmp/o12"
"$ctl" stop mc >/dev/null 2>&1
nothing_left "--cluster"

# ---- no host configured: this machine ----------------------------------------------------------
"$ctl" map -- 'echo here {} {#}' ::: a b >"$tmp/o10" 2>"$tmp/e10"; rc=$?
check "no hosts: exit 0, on this machine" all '[ "$rc" -eq 0 ]' 'grep -q "no hosts configured: using this machine" "$tmp/e10"'
check "no hosts: the lines are tagged [localhost slotN #SEQ]" \
  all 'grep -qE "^\[localhost slot[0-9]+ #1\] here a 1$" "$tmp/o10"' 'grep -qE "^\[localhost slot[0-9]+ #2\] here b 2$" "$tmp/o10"' || show out "$tmp/o10"

# ---- bad input: exit 2, the value named -------------------------------------------------------
bad() { # NAME WANT ARGS...: exit 2 and WANT (a fixed string) in the message
  local name=$1 want=$2; shift 2
  "$ctl" map "$@" </dev/null >"$tmp/ob" 2>"$tmp/eb"; local rc=$?
  check "bad input: $name: exit 2, says '$want'" all '[ "$rc" -eq 2 ]' 'grep -qF -- "$want" "$tmp/eb"' || show err "$tmp/eb"
}
bad "an unknown placeholder" "{nope}" -- 'echo {nope}' ::: a
bad "an empty ::: list" "no jobs" -- 'echo {}' :::
bad "an empty second ::: list" "no jobs" -- 'echo {}' ::: a :::
: >"$tmp/empty"
bad "an empty -a file" "$tmp/empty" -a "$tmp/empty" -- 'echo {}'
printf 'this is not\na joblog\n' >"$tmp/notlog"
bad "a joblog that is not one (file and line)" "line 1" --joblog "$tmp/notlog" --resume -- 'echo {}' ::: a
bad "a joblog that is not one names the file" "$tmp/notlog" --joblog "$tmp/notlog" --resume -- 'echo {}' ::: a
bad "--resume without --joblog" "--joblog" --resume -- 'echo {}' ::: a
bad "--update without --pool" "--pool" --update hello -- 'echo {}' ::: a
bad "--pool without --worker-cmd" "--worker-cmd" --pool ::: a
bad "--retries x" "'x'" --retries x -- 'echo {}' ::: a
printf 'a\nb\n' | "$ctl" map -- 'echo line {}' >"$tmp/o11" 2>"$tmp/e11"; rc=$?
check "stdin (not a terminal) gives the jobs" all '[ "$rc" -eq 0 ]' '[ "$(grep -c "\] line [ab]$" "$tmp/o11")" = 2 ]'
check "the joblog that was not one is unchanged" [ "$(cat "$tmp/notlog")" = "$(printf 'this is not\na joblog')" ]
check "nothing left here at the end" [ "$(pgrep -fc -- "$token")" -eq 0 ]
checks_done
