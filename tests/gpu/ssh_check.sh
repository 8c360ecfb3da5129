#!/usr/bin/env bash
# ssh_check.sh DIR - a GPU machine as an SSH host, for real: lazyclusterctl reaches this
# machine's GPU over SSH as it reaches any host (discovery's nvidia-smi, the GPU placement,
# CUDA_VISIBLE_DEVICES in the worker's environment on the host, exec, map), then counts what is
# left there. The device machine has no sshd of its own, so DIR carries one: DIR is
# device_check.sh's folder (lazyclusterctl and lib/) plus sshd/ with Debian's sshd, ssh-keygen and
# ip; their libraries go into lib/ too:
#   mkdir -p build/gpu/sshd && cp /usr/sbin/sshd /usr/bin/ssh-keygen /usr/sbin/ip build/gpu/sshd/
#   for l in $(ldd /usr/sbin/sshd /usr/bin/ssh-keygen /usr/sbin/ip | awk '/=>/{print $3}' | sort -u)
#   do case $l in */libc.so.6|*/libresolv.so.2) ;; *) cp -L "$l" build/gpu/lib/ ;; esac; done
# The "host" is a network namespace of this machine with its own loopback, and each SSH
# connection is an `sshd -i` started in it by the ssh config's ProxyCommand (nsenter): no
# listener, no port. GPUs are not namespaced: the host sees the machine's GPUs. "gpuself" is
# this machine itself over SSH on its own loopback (sshd -i with no namespace), as a shared ssh
# config that lists the machine one runs on reaches it. Needs root (namespaces). Exits non-zero when a step that must pass failed.
set -u
D=$(cd "${1:-build/gpu}" && pwd) || exit 2
LC=$D/lazyclusterctl
status=0
step() { printf '\n== %s\n' "$*"; }
must() { "$@" || { echo "FAILED ($?): $*"; status=1; }; }
[ "$(id -u)" = 0 ] || { echo "ssh_check.sh needs root (a network namespace)"; exit 2; }
W=$(mktemp -d /tmp/lc-sshcheck.XXXXXX) || exit 2
NS_PID=
done_() {
  [ -n "$NS_PID" ] && kill "$NS_PID" 2>/dev/null
  rm -rf "$W"
}
trap done_ EXIT
export LD_LIBRARY_PATH=$D/lib # ours and the carried tools'; sshd gives sessions a fresh environment

step "the host: a network namespace, its sshd run per connection by the ProxyCommand"
unshare -n sh -c "'$D/sshd/ip' link set lo up && exec sleep 100000" &
NS_PID=$!
sleep 1
kill -0 "$NS_PID" 2>/dev/null || { echo "FAILED: no network namespace (unshare -n, ip)"; exit 1; }
"$D/sshd/ssh-keygen" -q -t ed25519 -N '' -f "$W/host_key" </dev/null || exit 1
"$D/sshd/ssh-keygen" -q -t ed25519 -N '' -f "$W/id_ed25519" </dev/null || exit 1
cp "$W/id_ed25519.pub" "$W/authorized_keys"
chmod 600 "$W/host_key" "$W/id_ed25519"
getent passwd sshd >/dev/null || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd ||
  echo "cannot make the sshd user (privilege separation)"
mkdir -p /run/sshd && chmod 755 /run/sshd
printf '%s\n' "HostKey $W/host_key" "PidFile none" "AuthorizedKeysFile $W/authorized_keys" \
  "PermitRootLogin prohibit-password" "PasswordAuthentication no" \
  "KbdInteractiveAuthentication no" "UsePAM no" "StrictModes no" "AllowTcpForwarding yes" \
  "LogLevel VERBOSE" >"$W/sshd_config"
read -r kt kb _ <"$W/host_key.pub"
printf 'gpubox %s %s\n' "$kt" "$kb" >"$W/known_hosts"
printf '%s\n' "Host gpubox" "  User root" \
  "  ProxyCommand nsenter -t $NS_PID -n $D/sshd/sshd -i -f $W/sshd_config -E $W/sshd.log" \
  "  IdentityFile $W/id_ed25519" "  IdentitiesOnly yes" "  UserKnownHostsFile $W/known_hosts" \
  "  GlobalKnownHostsFile /dev/null" "  StrictHostKeyChecking yes" "" \
  "Host gpuself" "  User root" "  HostKeyAlias gpubox" \
  "  ProxyCommand $D/sshd/sshd -i -f $W/sshd_config -E $W/sshd.log" \
  "  IdentityFile $W/id_ed25519" "  IdentitiesOnly yes" "  UserKnownHostsFile $W/known_hosts" \
  "  GlobalKnownHostsFile /dev/null" "  StrictHostKeyChecking yes" >"$W/ssh_config"
echo "namespace of pid $NS_PID; root's login shell $(getent passwd root | cut -d: -f7)"

step "hosts: the GPU seen over SSH (nvidia-smi through the session)"
must timeout 90 "$LC" hosts -F "$W/ssh_config" --hosts gpubox
timeout 90 "$LC" hosts -F "$W/ssh_config" --hosts gpubox --json
echo

step "exec over SSH"
must timeout 60 "$LC" exec -F "$W/ssh_config" --hosts gpubox -- 'nvidia-smi -L; echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"'

# the worker runs on the SSH host: our serve needs our libraries there, named in its command
serve="LD_LIBRARY_PATH='$D/lib' exec '$LC' serve {worker_port} w{worker_index}"
step "start --workers 1 on the SSH host (defaults otherwise; --ttl ends it)"
out=$(timeout 180 "$LC" start -F "$W/ssh_config" --hosts gpubox --workers 1 --ttl 12s --debug \
  --worker-cmd "echo \"gpu={gpu} CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=\${{CUDA_DEVICE_ORDER-unset}}\"; nvidia-smi -L; $serve" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "exit $rc"
[ $rc -eq 0 ] || { echo "FAILED: start exit $rc"; status=1; }
printf '%s\n' "$out" | grep -q 'worker-0 .* gpu 0' || { echo "FAILED: worker-0 has no GPU"; status=1; }
printf '%s\n' "$out" | grep -q 'CUDA_VISIBLE_DEVICES=0 ' ||
  { echo "FAILED: the worker did not see CUDA_VISIBLE_DEVICES=0"; status=1; }

step "start --workers 2 on the SSH host's one GPU"
timeout 180 "$LC" start -F "$W/ssh_config" --hosts gpubox --workers 2 --ttl 8s --debug \
  --worker-cmd "echo \"gpu={gpu} CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; $serve" 2>&1
echo "exit $?"

step "start --workers 2 on the GPU machine reached over SSH on its own loopback (a shared config)"
# "gpuself" is this very machine: the same sshd, but no namespace, so it shares every port with
# the master here; the tunnels must not listen twice (docs/architecture.md, "Hosts that share a
# 127.0.0.1"). Before, this failed with "port 60005 is in use on gpuself".
out=$(timeout 180 "$LC" start -F "$W/ssh_config" --hosts gpuself,gpubox --workers 2 --ttl 8s \
  --type-arg expose=mesh --debug \
  --worker-cmd "echo \"gpu={gpu} CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; $serve" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "exit $rc"
[ $rc -eq 0 ] || { echo "FAILED: start with gpuself exit $rc"; status=1; }
printf '%s\n' "$out" | grep -q 'on gpuself gpu' || { echo "FAILED: no worker on gpuself"; status=1; }

step "map over SSH: 3 jobs on the host's GPU slot"
must timeout 120 "$LC" map -F "$W/ssh_config" --hosts gpubox -- \
  'echo {} "$CUDA_VISIBLE_DEVICES"; nvidia-smi --query-gpu=uuid --format=csv,noheader' ::: a b c

step "left on the host after the starts"
sleep 1
left=$(pgrep -af "serve [0-9]+ w[0-9]|lc-lifeline|nvidia-smi -L" | grep -v pgrep)
if [ -n "$left" ]; then
  printf '%s\n' "$left"
  echo "FAILED: processes of the starts are left"
  status=1
else
  echo "nothing of ours runs"
fi
left=$(pgrep -af "sshd -i -f $W" | grep -v pgrep)
[ -z "$left" ] || { printf '%s\n' "$left"; echo "FAILED: sshd sessions are left"; status=1; }
step "sshd's log (last lines)"
tail -n 5 "$W/sshd.log"
exit $status
