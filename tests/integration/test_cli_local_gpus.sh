#!/usr/bin/env bash
# test_cli_local_gpus.sh - this machine's GPUs when it is the one runtime (no host configured), as
# a user with a GPU box runs `lazyclusterctl start` and `map` on it with the defaults: each worker
# and each job gets a GPU of its own (CUDA_VISIBLE_DEVICES, PCI order); under the user's own
# CUDA_VISIBLE_DEVICES (a shared box: "keep to GPUs 3 and 1") each gets one of those, named as the
# user named it, in the user's device order; without a GPU none is set. After each run nothing of
# it is left running.
#
# The GPUs come from the stand-in CUDA runtime of the unit tests (tests/unit/fake_cudart.c through
# LC_CUDART_PATH: LC_FAKE_CUDA=2 devices, as the real runtime reports the devices that
# CUDA_VISIBLE_DEVICES lets it see; 35: no driver). What is tested is the placement and the
# environment, not CUDA: the same start ran on an H100 with the real runtime (docs/gpus.md).
set -u
. "$(dirname "$0")/../support/check.sh"
ctl=${LC_CTL:?LC_CTL names the lazyclusterctl binary}
fake=${LC_FAKE_CUDART:?LC_FAKE_CUDART names the stand-in CUDA runtime}
tmp=$(mktemp -d)
token=lcg$$r$RANDOM
lc_private_home # no ssh config: this machine is the one runtime
export LC_CUDART_PATH=$fake LC_NVML_PATH=/nonexistent/libnvidia-ml.so.1 LC_FAKE_CUDA=2
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
cleanup() {
  for p in $(pgrep -f -- "$token"); do kill -9 "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
procs() { pgrep -fc -- "$token"; }

# start NAME [ENV=VALUE...] -- ARGS: a start held until its --ttl; each worker writes
# "wI CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER {gpu}" into $tmp/NAME.rec
start() {
  local name=$1 rec=$tmp/$1.rec envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 120 "$ctl" start --name "$name" --ttl 3s \
    --master-cmd "exec '$ctl' serve {master_port} m-$token" \
    --worker-cmd "echo w{worker_index} \"\${{CUDA_VISIBLE_DEVICES-unset}}\" \"\${{CUDA_DEVICE_ORDER-unset}}\" {gpu} >>'$rec'; exec '$ctl' serve {worker_port} w-$token" \
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
has() { grep -qxF -- "$2" "$tmp/$1.rec"; }

start two -- --workers 3; rc=$?
check "2 GPUs, 3 workers: exit 0, this machine" \
  all '[ "$rc" -eq 0 ]' 'grep -q "no hosts configured: using this machine" "$tmp/two.err"' ||
  show err "$tmp/two.err"
check "2 GPUs: worker-0 GPU 0, worker-1 GPU 1, worker-2 shares GPU 0 (spread), PCI order" \
  all 'has two "w0 0 PCI_BUS_ID 0"' 'has two "w1 1 PCI_BUS_ID 1"' 'has two "w2 0 PCI_BUS_ID 0"' ||
  show rec "$tmp/two.rec"
check "2 GPUs: the ready table names each worker's GPU" \
  all 'grep -qE "^worker-0 .* gpu 0$" "$tmp/two.out"' 'grep -qE "^worker-1 .* gpu 1$" "$tmp/two.out"' ||
  show out "$tmp/two.out"
check "2 GPUs: nothing left" wait_for 10 eval '[ "$(procs)" -eq 0 ]'

start mine CUDA_VISIBLE_DEVICES=" 3, 1" -- --workers 2; rc=$?
check "CUDA_VISIBLE_DEVICES=' 3, 1': exit 0" [ "$rc" -eq 0 ] || show err "$tmp/mine.err"
check "CUDA_VISIBLE_DEVICES=' 3, 1': worker-0 gets 3, worker-1 gets 1, in the user's order (none set)" \
  all 'has mine "w0 3 unset 0"' 'has mine "w1 1 unset 1"' || show rec "$tmp/mine.rec"
check "CUDA_VISIBLE_DEVICES: nothing left" wait_for 10 eval '[ "$(procs)" -eq 0 ]'

start uuid CUDA_VISIBLE_DEVICES=GPU-8a1f,0 CUDA_DEVICE_ORDER=FASTEST_FIRST -- --workers 2; rc=$?
check "CUDA_VISIBLE_DEVICES=GPU-8a1f,0 and the user's CUDA_DEVICE_ORDER: the UUID and the index, as written" \
  all '[ "$rc" -eq 0 ]' 'has uuid "w0 GPU-8a1f FASTEST_FIRST 0"' 'has uuid "w1 0 FASTEST_FIRST 1"' ||
  { show err "$tmp/uuid.err"; show rec "$tmp/uuid.rec"; }

start nogpu LC_FAKE_CUDA=35 -- --workers 2; rc=$?
check "no driver: exit 0, no worker gets CUDA_VISIBLE_DEVICES" \
  all '[ "$rc" -eq 0 ]' 'has nogpu "w0 unset unset -1"' 'has nogpu "w1 unset unset -1"' ||
  { show err "$tmp/nogpu.err"; show rec "$tmp/nogpu.rec"; }
check "no driver: nothing left" wait_for 10 eval '[ "$(procs)" -eq 0 ]'

# map: one slot per GPU; each job records its GPU
job='echo {} "${{CUDA_VISIBLE_DEVICES-unset}} ${{CUDA_DEVICE_ORDER-unset}} $LAZYCLUSTER_GPU"; sleep 0.3'
"$ctl" map -- "$job" ::: a b c d >"$tmp/map.out" 2>"$tmp/map.err"; rc=$?
check "map, 2 GPUs: exit 0, every job on GPU 0 or 1 in PCI order, both GPUs used" \
  all '[ "$rc" -eq 0 ]' '[ "$(grep -cE "^\[localhost gpu([01]) #[0-9]+\] [abcd] \1 PCI_BUS_ID \1$" "$tmp/map.out")" -eq 4 ]' \
  'grep -q "gpu0 " "$tmp/map.out"' 'grep -q "gpu1 " "$tmp/map.out"' || { show out "$tmp/map.out"; show err "$tmp/map.err"; }
CUDA_VISIBLE_DEVICES=3,1 "$ctl" map -- "$job" ::: a b c d >"$tmp/map2.out" 2>"$tmp/map2.err"; rc=$?
check "map under CUDA_VISIBLE_DEVICES=3,1: slot gpu0 runs on 3, gpu1 on 1" \
  all '[ "$rc" -eq 0 ]' '[ "$(grep -cE "^\[localhost gpu0 #[0-9]+\] [abcd] 3 unset 0$|^\[localhost gpu1 #[0-9]+\] [abcd] 1 unset 1$" "$tmp/map2.out")" -eq 4 ]' ||
  { show out "$tmp/map2.out"; show err "$tmp/map2.err"; }
check "map: nothing left" [ "$(procs)" -eq 0 ]

checks_done
