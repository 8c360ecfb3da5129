#!/usr/bin/env bash
# test_example_sweep.sh - runs examples/sweep against two test hosts (lab1, lab2) and checks what
# it prints: the 6 jobs of the sweep in the order submitted, each with its arguments and where it
# ran; the pool's 6 answers with the update ("scale 10") applied by every worker; then that
# nothing is left: no process of it and no working directory on either host.
set -u
. "$(dirname "$0")/../support/check.sh"
bin=${LC_SWEEP:?LC_SWEEP names the sweep example binary}
dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}
th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

timeout 150 "$bin" -F "$dir/ssh_config" lab1 lab2 >"$tmp/out" 2>"$tmp/err"; rc=$?
show out "$tmp/out"
show err "$tmp/err"
check "it exits 0" [ "$rc" -eq 0 ]
want=$(for lr in 0.1 0.01; do for s in 1 2 3; do echo "lr=$lr seed=$s"; done; done)
got=$(sed -nE 's/^job ([0-9]+) (lr=[^ ]+ seed=[0-9]+) on lab[12] gpu (-1|[0-9]+): trained \2 on gpu (none|[0-9]+)$/\2/p' "$tmp/out")
check "the sweep's 6 results, in the order submitted, each from a host" [ "$got" = "$want" ]
check "the sweep's job numbers are 1..6 in order" \
  [ "$(sed -nE 's/^job ([0-9]+) .*/\1/p' "$tmp/out" | tr '\n' ' ')" = "1 2 3 4 5 6 " ]
check "the pool's 6 answers, each its number times 10 (the update reached the workers)" \
  [ "$(sed -nE 's/^answer ([0-9]+) from lab[12] slot [0-9]+: ([0-9]+)$/\1 \2/p' "$tmp/out" | awk '$2 == $1 * 10' | sort -n | awk '{print $1}' | tr '\n' ' ')" = "1 2 3 4 5 6 " ]
for i in 1 2; do
  check "lab$i: no working directory of lazycluster left" \
    [ -z "$("$th" exec $i -- sh -c 'ls -A /root/.cache/lazycluster 2>/dev/null')" ]
  check "lab$i: no worker left" \
    [ "$("$th" pids $i | while read -r p; do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done | grep -c 'scale=1; while')" -eq 0 ]
done
checks_done
