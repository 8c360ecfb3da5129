#!/usr/bin/env bash
# device_check.sh DIR - the GPU paths run for real on a machine with an NVIDIA GPU, from binaries
# built on a machine without one (docs/gpus.md, "What was run, and where"). DIR holds
# lazyclusterctl, test_gpu and custom_cluster, and lib/ with the shared libraries they link
# (libssh, libuv, libcrypto, ...) and a libcudart.so.13 for a machine whose driver has no CUDA
# runtime beside it. Prints what it saw, step by step; exits non-zero when a step that must pass
# failed (test_gpu, the probe, the start, the example's exact result).
#
# Make DIR (on the build machine):
#   cmake --build build --target lazyclusterctl test_gpu custom_cluster
#   mkdir -p build/gpu/lib && cp build/lazyclusterctl build/tests/test_gpu \
#     build/examples/custom_cluster build/gpu/
#   for l in $(ldd build/lazyclusterctl | awk '/=>/{print $3}'); do
#     case $l in */libc.so.6|*/libresolv.so.2) ;; *) cp -L "$l" build/gpu/lib/ ;; esac; done
#   cp -L /usr/local/cuda/lib64/libcudart.so.13 build/gpu/lib/
set -u
D=$(cd "${1:-build/gpu}" && pwd) || exit 2
export LD_LIBRARY_PATH=$D/lib
LC=$D/lazyclusterctl
status=0
step() { printf '\n== %s\n' "$*"; }
must() { "$@" || { echo "FAILED ($?): $*"; status=1; }; }

step machine
uname -srm; grep PRETTY_NAME /etc/os-release; ldd --version | head -1; nproc; id -un
step driver
nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader,nounits
ls /proc/driver/nvidia/gpus 2>&1
step "CUDA libraries on this machine"
ldconfig -p | grep -E 'libcudart|libcublas\.|libnvidia-ml|libcuda\.so' | sed 's/^\s*//'
sys_cudart=$(ldconfig -p | awk '/libcudart\.so(\.[0-9]+)? /{print $NF; exit}')
sys_cublas=$(ldconfig -p | awk '/libcublas\.so(\.[0-9]+)? /{print $NF; exit}')
cudart=${sys_cudart:-$D/lib/libcudart.so.13}
echo "CUDA runtime used below: $cudart; cuBLAS: ${sys_cublas:-none}"

step "probe (the library's own search for the CUDA runtime)"
must timeout 60 "$LC" probe
must timeout 60 "$LC" probe --json
step "probe with LC_CUDART_PATH=$D/lib/libcudart.so.13 (CUDA 13.0 runtime)"
LC_CUDART_PATH=$D/lib/libcudart.so.13 timeout 60 "$LC" probe --json
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
for v in 0 1 "" "${uuid:0:12}"; do
  step "probe under CUDA_VISIBLE_DEVICES='$v'"
  CUDA_VISIBLE_DEVICES=$v LC_CUDART_PATH=$cudart timeout 60 "$LC" probe --json
done

step "test_gpu (ctest label gpu)"
must env LC_CTL="$LC" timeout 120 "$D/test_gpu"
step "test_gpu with LC_CUDART_PATH=$cudart"
must env LC_CTL="$LC" LC_CUDART_PATH="$cudart" timeout 120 "$D/test_gpu"

step "start --workers 1: the worker sees its GPU (defaults otherwise; --ttl ends it)"
must timeout 120 "$LC" start --workers 1 --ttl 12s --debug --env LD_LIBRARY_PATH \
  --env LC_CUDART_PATH="$cudart" \
  --worker-cmd "echo \"gpu={gpu} CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=\$CUDA_DEVICE_ORDER\"; nvidia-smi -L; exec '$LC' serve {worker_port} w{worker_index}"
step "start --workers 2 on one GPU"
timeout 120 "$LC" start --workers 2 --ttl 8s --debug --env LD_LIBRARY_PATH \
  --worker-cmd "echo \"gpu={gpu} CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; exec '$LC' serve {worker_port} w{worker_index}"
echo "exit $?"
step "start --workers 1 under CUDA_VISIBLE_DEVICES=${uuid:0:12} (the worker gets that entry)"
CUDA_VISIBLE_DEVICES=${uuid:0:12} timeout 120 "$LC" start --workers 1 --ttl 8s --debug \
  --env LD_LIBRARY_PATH --env LC_CUDART_PATH="$cudart" \
  --worker-cmd "echo \"CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=\${{CUDA_DEVICE_ORDER-unset}}\"; nvidia-smi -L; exec '$LC' serve {worker_port} w{worker_index}"
echo "exit $?"
step "map: 3 jobs on the one GPU"
LC_CUDART_PATH=$cudart timeout 120 "$LC" map -- 'echo {} "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"; nvidia-smi --query-gpu=uuid --format=csv,noheader' ::: a b c
echo "exit $?"
step "left after the starts"
pgrep -af "$LC|nvidia-smi -L" | grep -v pgrep || echo "nothing of ours runs"

step "examples/custom_cluster -n 1 on this machine: the dot product on the GPU"
envs=(LC_CUDART_PATH="$cudart")
[ -n "$sys_cublas" ] && envs+=(LC_CUBLAS_PATH="$sys_cublas")
out=$(env "${envs[@]}" timeout 180 "$D/custom_cluster" -n 1 2>&1)
rc=$?
printf '%s\n' "$out" | tail -25
[ $rc -eq 0 ] || { echo "FAILED: custom_cluster exit $rc"; status=1; }
step "custom_cluster without cuBLAS (device round trip, CPU sum)"
LC_CUDART_PATH=$cudart LC_CUBLAS_PATH=/nonexistent timeout 180 "$D/custom_cluster" -n 1 2>&1 |
  grep -E 'compute:|exact|total|result|error' | head
echo "exit ${PIPESTATUS[0]}"
exit $status
