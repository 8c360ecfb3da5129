#!/usr/bin/env bash
# test_custom_cluster.sh MODE - runs examples/custom_cluster and checks its result against the
# exact value computed here (awk), that every worker joined and worked, what each worker computed
# with (GPU, or CPU and why), and that nothing is left behind.
#   hosts: 3 test hosts, 6 workers (2 a host); the CUDA runtime is what the hosts have (on a
#          machine without a GPU: libcudart loads and finds no device, or does not load).
#   local: this machine alone, 4 workers; LC_CUDART_PATH points nowhere: the "no CUDA" path.
set -u
mode=${1:?usage: test_custom_cluster.sh hosts|local}
bin=${LC_CUSTOM_CLUSTER:?LC_CUSTOM_CLUSTER names the custom_cluster example binary}
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # NAME CONDITION...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name" >&2
  else failed=$((failed + 1)); echo "FAIL $name" >&2; fi
}

# The exact value, independently: sum of (i % 13) * (i % 11) for i < 2^24.
exact=$(awk 'BEGIN { n = 2^24; p = 0; r = 0
  for (i = 0; i < 143; i++) p += (i % 13) * (i % 11)
  for (i = 0; i < n % 143; i++) r += (i % 13) * (i % 11)
  printf "%d\n", int(n / 143) * p + r }')

if [ "$mode" = hosts ]; then
  dir=${LC_TESTHOSTS_DIR:?no test hosts: run through ctest}   # testhosts reads it too
  th=${LC_TESTHOSTS:?LC_TESTHOSTS names the testhosts script}
  workers=6
  hosts=(lab0 lab1 lab2)
  timeout 180 "$bin" -F "$dir/ssh_config" -n $workers "${hosts[@]}" >"$tmp/out" 2>"$tmp/err"; rc=$?
else
  workers=4
  hosts=(localhost)
  mkdir -p "$tmp/home"
  # HOME: the local runtime's working directory lands there, and we can see it go
  HOME=$tmp/home XDG_CACHE_HOME= LC_CUDART_PATH=/nonexistent/libcudart.so \
    timeout 120 "$bin" >"$tmp/out" 2>"$tmp/err"; rc=$?
fi
sed 's/^/  out: /' "$tmp/out" >&2
sed 's/^/  err: /' "$tmp/err" >&2

check "it exits 0" [ "$rc" -eq 0 ]
check "the master's result is the exact value $exact" grep -qx "\[localhost master\] result: $exact" "$tmp/out"
check "the launcher says it matches" grep -qx "result $exact matches the exact value $exact ($workers workers)" "$tmp/out"
check "the master ended first, with status 0" \
  grep -qx "first process to end: localhost master ended: it exited with status 0" "$tmp/out"
check "all $workers workers joined" grep -q "^\[localhost master\] all $workers workers joined: 256 items" "$tmp/out"
check "$workers workers said how they compute" \
  [ "$(grep -cE '^\[[^ ]+ worker-[0-9]+\] compute: (GPU .* via CUDA|CPU \(.+\))$' "$tmp/out")" -eq $workers ]
for h in "${hosts[@]}"; do
  check "$h ran $((workers / ${#hosts[@]})) workers" \
    [ "$(grep -cE "^\[$h worker-[0-9]+\] compute: " "$tmp/out")" -eq $((workers / ${#hosts[@]})) ]
done
# the master's summary: one line a worker, each with at least one item
check "every worker computed items" \
  [ "$(grep -cE '^\[localhost master\] worker-[0-9]+ on [^ ]+: [1-9][0-9]* items, ' "$tmp/out")" -eq $workers ]
check "the items add up to 256" \
  [ "$(sed -nE 's/^\[localhost master\] worker-[0-9]+ on [^ ]+: ([0-9]+) items, .*/\1/p' "$tmp/out" | awk '{ s += $1 } END { print s + 0 }')" -eq 256 ]
check "nothing on stderr" [ ! -s "$tmp/err" ]

if [ "$mode" = hosts ]; then
  check "the binary went to each host's working directory" \
    [ "$(grep -cE '^sent custom_cluster to lab[0-2]:/.+/custom_cluster$' "$tmp/out")" -eq 3 ]
  check "the hosts' CUDA path ran (runtime probed: GPU, or CPU with the reason)" \
    grep -qE 'compute: (GPU|CPU \((CUDA runtime .* loaded|no CUDA runtime))' "$tmp/out"
  for i in 0 1 2; do
    left=$("$th" exec $i -- sh -c 'ls -A "$HOME/.cache/lazycluster" 2>/dev/null')
    check "lab$i: no working directory left" [ -z "$left" ]
    for _ in $(seq 50); do # the lifelines' kill grace, as below
      procs=$("$th" pids $i | while read -r p; do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -c 'custom_cluster')
      [ "$procs" -eq 0 ] && break
      sleep 0.1
    done
    check "lab$i: no process left (within 5 s)" [ "$procs" -eq 0 ]
  done
else
  check "the workers had no CUDA runtime, and said so" \
    [ "$(grep -c 'compute: CPU (no CUDA runtime: /nonexistent/libcudart.so' "$tmp/out")" -eq $workers ]
  check "no working directory left" [ -z "$(ls -A "$tmp/home/.cache/lazycluster" 2>/dev/null)" ]
  # lifelines end their process groups as the runtime goes, but need not be gone by the time the
  # launcher exits: allow them the kill grace (3 s) and a little
  left=$(pgrep -af -- "$tmp/home")
  [ -z "$left" ] || echo "$left" | sed 's/^/  still there as it exited: /' >&2
  for _ in $(seq 50); do [ -z "$left" ] && break; sleep 0.1; left=$(pgrep -af -- "$tmp/home"); done
  check "no process left (within 5 s)" [ -z "$left" ]
  [ -z "$left" ] || echo "$left" | sed 's/^/  left: /' >&2
  # outside a cluster a worker says what it misses and exits 2
  env -u LAZYCLUSTER_MASTER_PORT "$bin" worker >"$tmp/w" 2>&1; rc=$?
  check "a worker outside a cluster exits 2" [ "$rc" -eq 2 ]
  check "and says what it misses" grep -q "LAZYCLUSTER_MASTER_PORT" "$tmp/w"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
