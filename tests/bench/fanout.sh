#!/usr/bin/env bash
# fanout.sh - `lazyclusterctl exec -- true` against `pdsh -R ssh` and `clush` on the same test hosts
# (tests/support/testhosts: real sshd per host, same key, same ssh config), the tools alternating
# inside each round, N rounds, medians. First 16 hosts, then 64 (--hosts). Needs root, pdsh and
# clush (apt-get install -y pdsh clustershell).
#
# Usage: tests/bench/fanout.sh [--rounds N] [--hosts "16 64"] [--lc PATH] [--dir DIR]
#                              [--user NAME] [--markdown FILE] [--no-remote]
#   --rounds N       timed rounds per host count (default 15), after one untimed warm-up round
#   --hosts LIST     host counts to run, in order (default "16 64")
#   --lc PATH        the lazyclusterctl binary (default build/lazyclusterctl)
#   --dir DIR        testhosts directory (default /tmp/lc-fanout.PID); always taken down at the end
#   --user NAME      log in as this user of the test hosts instead of root, with every tool, so the
#                    commands run under that user's login shell: lcsh (/bin/sh = dash), lcbash,
#                    lczsh, lcksh, lcash, lcfish, lctcsh, lccsh, lcgreet... (tests/support/README.md).
#                    The remote-cost rows need a POSIX login shell (the plain-ssh row quotes for sh)
#   --markdown FILE  also write the result tables (markdown) to FILE
#   --no-remote      skip the per-exec remote cost measurement (one host: ssh and exec wall time;
#                    on the host: tests/bench/wrapcost as the user, its CPU per command)
#   --wrapcost PATH  the wrapcost binary (default: tests/bench/wrapcost beside --lc's build)
#
# What each variant runs (fan-out = the host count, so every tool starts all hosts at once):
#   lazyclusterctl  exec -F CONFIG --hosts lab0,..,labN-1 --fanout N -- true (USER@labI with --user)
#                   one process, libssh (negotiates curve25519-sha256), one connection per host,
#                   the command runs on each host inside the lifeline wrapper (src/command.c)
#   pdsh            pdsh -R ssh -S -f N -w lab[0-N-1] true, PDSH_SSH_ARGS_APPEND="-F CONFIG"
#                   (-l USER with --user)
#                   forks one OpenSSH `ssh` per host (OpenSSH 9.x default kex:
#                   sntrup761x25519-sha512)
#   clush           clush -S -f N -w lab[0-N-1] -o "-F CONFIG" true (Python; one `ssh` per host)
#                   (-l USER with --user)
#   ... +c25519     the same with -o KexAlgorithms=curve25519-sha256 added to ssh's options
#
# Measured per run: wall time (bash $EPOCHREALTIME around the command), CPU = user+sys of the tool
# and all its waited-for children (bash `times` before and after, 1 ms resolution), and sshd CPU =
# the change in utime+stime+cutime+cstime of the N listening sshds (10 ms ticks; it covers the
# per-connection sshd processes and the sessions' shells once they exit, but not processes that
# were orphaned, so it is a lower bound). Every host runs on this machine, so on a small machine the
# sshd side competes with the tool for the same CPUs: read the wall times with that in mind.

set -uo pipefail
LC_ALL=C
export LC_ALL

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/bench/measure.sh
. "$ROOT/tests/bench/measure.sh"
TESTHOSTS=$ROOT/tests/support/testhosts
ROUNDS=15
HOSTCOUNTS="16 64"
LC=$ROOT/build/lazyclusterctl
WRAPCOST=
DIR=/tmp/lc-fanout.$$
MARKDOWN=
REMOTE=1
RUSER=

die() {
  printf 'fanout.sh: %s\n' "$*" >&2
  exit 1
}
while (($#)); do
  case $1 in
  --rounds) ROUNDS=${2:?}; shift 2 ;;
  --hosts) HOSTCOUNTS=${2:?}; shift 2 ;;
  --lc) LC=${2:?}; shift 2 ;;
  --wrapcost) WRAPCOST=${2:?}; shift 2 ;;
  --dir) DIR=${2:?}; shift 2 ;;
  --user) RUSER=${2:?}; shift 2 ;;
  --markdown) MARKDOWN=${2:?}; shift 2 ;;
  --no-remote) REMOTE=0; shift ;;
  -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive number"
for n in $HOSTCOUNTS; do [[ $n =~ ^[1-9][0-9]*$ ]] && ((n <= 240)) || die "bad host count $n"; done
[[ -z $RUSER || $RUSER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "--user wants a user name, got '$RUSER'"
[[ $LC == /* ]] || LC=$PWD/$LC
[[ -x $LC ]] || die "$LC is not built (cmake --build build --target lazyclusterctl, or --lc PATH)"
[[ -n $WRAPCOST ]] || WRAPCOST=$(dirname -- "$LC")/tests/bench/wrapcost
for t in pdsh clush ssh base64; do
  command -v "$t" >/dev/null || die "$t not found (apt-get install -y pdsh clustershell)"
done
((EUID == 0)) || die "needs root (tests/support/testhosts makes network namespaces)"

bench_begin fanout

VARIANTS=(lazyclusterctl pdsh pdsh+c25519 clush clush+c25519)
# --user: the user in front of each host for lazyclusterctl and ssh, -l USER for pdsh and clush
AT=
LOGIN=()
if [[ -n $RUSER ]]; then AT=$RUSER@; LOGIN=(-l "$RUSER"); fi
KEX_CURVE=curve25519-sha256

# ---------------------------------------------------------------------------------------------
# Measurement (tests/bench/measure.sh): no forks between the two `times` snapshots but the tool.

# run_variant NAME N CONFIG ROUND -> appends "N NAME ROUND wall_us cpu_ms sshd_ticks rc" to RESULTS
run_variant() {
  local name=$1 n=$2 conf=$3 round=$4 rc t0 t1 k0 c0 c1
  local -a cmd
  local wl="lab[0-$((n - 1))]"
  case $name in
  lazyclusterctl) cmd=("$LC" exec -F "$conf" --hosts "$LCLIST" --fanout "$n" -- true) ;;
  pdsh) export PDSH_SSH_ARGS_APPEND="-F $conf"; cmd=(pdsh -R ssh -S "${LOGIN[@]}" -f "$n" -w "$wl" true) ;;
  pdsh+c25519)
    export PDSH_SSH_ARGS_APPEND="-F $conf -o KexAlgorithms=$KEX_CURVE"
    cmd=(pdsh -R ssh -S "${LOGIN[@]}" -f "$n" -w "$wl" true) ;;
  clush) cmd=(clush -S "${LOGIN[@]}" -f "$n" -w "$wl" -o "-F $conf" true) ;;
  clush+c25519) cmd=(clush -S "${LOGIN[@]}" -f "$n" -w "$wl" -o "-F $conf -o KexAlgorithms=$KEX_CURVE" true) ;;
  esac
  sleep 0.3 # the previous run's sshd processes finish and are accounted before the snapshot
  sshd_ticks; k0=$SSHD_TICKS
  times >"$WORK/t0"
  t0=${EPOCHREALTIME/./}
  "${cmd[@]}" >"$WORK/out" 2>"$WORK/err" </dev/null
  rc=$?
  t1=${EPOCHREALTIME/./}
  times >"$WORK/t1"
  sleep 0.3
  sshd_ticks
  child_ms "$WORK/t0"; c0=$CHILD_MS
  child_ms "$WORK/t1"; c1=$CHILD_MS
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$name" "$round" $((t1 - t0)) $((c1 - c0)) \
    $((SSHD_TICKS - k0)) "$rc" >>"$RESULTS"
  if ((rc != 0)); then
    printf 'fanout.sh: %s on %s hosts (round %s) exited %s:\n' "$name" "$n" "$round" "$rc" >&2
    head -5 "$WORK/err" >&2
  fi
}

# Each tool runs `hostname` once: every host answers exactly once (also the warm-up).
sanity() {
  local n=$1 conf=$2 name got
  local wl="lab[0-$((n - 1))]"
  for name in "${VARIANTS[@]}"; do
    case $name in
    lazyclusterctl) got=$("$LC" exec -F "$conf" --hosts "$LCLIST" -- hostname 2>&1 | sort -u | grep -c "^\[${AT}lab[0-9]*\] lab[0-9]*\$") ;;
    pdsh*) got=$(PDSH_SSH_ARGS_APPEND="-F $conf" pdsh -R ssh "${LOGIN[@]}" -f "$n" -w "$wl" hostname 2>&1 | sort -u | grep -c '^lab[0-9]*: lab[0-9]*$') ;;
    clush*) got=$(clush "${LOGIN[@]}" -f "$n" -w "$wl" -o "-F $conf" hostname 2>&1 | sort -u | grep -c '^lab[0-9]*: lab[0-9]*$') ;;
    esac
    [[ $got == "$n" ]] || die "$name: $got of $n hosts answered the sanity check${RUSER:+ (as $RUSER)}"
  done
}

kex_of() { # the key exchange OpenSSH negotiates with lab0, given extra ssh options
  ssh -v -F "$1" "${@:2}" -o BatchMode=yes "${AT}lab0" true 2>&1 </dev/null |
    sed -n 's/^debug1: kex: algorithm: //p' | head -1
}

# ---------------------------------------------------------------------------------------------
# Remote per-exec cost: what the lifeline wrapper adds on the host, against a plain `ssh host true`.

REMOTE_MD=
remote_cost() {
  local conf=$1 s t0 t1 r user shell
  local -A w
  for ((r = 1; r <= ROUNDS; r++)); do
    for s in ssh lazyclusterctl; do
      sleep 0.1
      t0=${EPOCHREALTIME/./}
      case $s in
      ssh) ssh -F "$conf" -o KexAlgorithms=$KEX_CURVE "${AT}lab0" true </dev/null ;;
      lazyclusterctl) "$LC" exec -F "$conf" --hosts "${AT}lab0" -- true >/dev/null ;;
      esac
      t1=${EPOCHREALTIME/./}
      w[$s]+="$((t1 - t0)) "
    done
  done
  # on the host itself, no SSH, as the user with its login shell: tests/bench/wrapcost runs the
  # library's own text as sshd would (`SHELL -c LINE`, the script into stdin)
  user=${RUSER:-root}
  shell=$(LC_TESTHOSTS_DIR=$DIR "$TESTHOSTS" exec 0 -- getent passwd "$user" | cut -d: -f7)
  local host_md=
  if [[ -x $WRAPCOST && -n $shell ]]; then
    host_md=$(LC_TESTHOSTS_DIR=$DIR "$TESTHOSTS" exec 0 -- runuser -u "$user" -- \
      "$WRAPCOST" --shell "$shell" --runs 200 2>&1) || host_md="wrapcost failed: $host_md"
  else
    host_md="(no $WRAPCOST: build the target lc_wrapcost)"
  fi
  local m_ssh m_lc
  m_ssh=$(tr ' ' '\n' <<<"${w[ssh]}" | grep . | median)
  m_lc=$(tr ' ' '\n' <<<"${w[lazyclusterctl]}" | grep . | median)
  REMOTE_MD=$(
    printf '| one host (%slab0), %s rounds alternating | median wall ms |\n|---|---|\n' "$AT" "$ROUNDS"
    printf '| `ssh -o KexAlgorithms=curve25519-sha256 %slab0 true` | %.1f |\n' "$AT" "$(bc -l <<<"$m_ssh/1000")"
    printf '| `lazyclusterctl exec --hosts %slab0 -- true` | %.1f |\n' "$AT" "$(bc -l <<<"$m_lc/1000")"
    printf '\nOn lab0 as %s, no SSH (tests/bench/wrapcost: CPU = user+sys of everything one command ran, from the login shell'"'"'s start to the wrapper'"'"'s exit; %s processes on the machine):\n\n%s\n' \
      "$user" "$(ls -d /proc/[0-9]* | wc -l)" "$host_md"
  )
}

# ---------------------------------------------------------------------------------------------

MACHINE="$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), kernel $(uname -r)"
VERSIONS="$(ssh -V 2>&1 | cut -d, -f1), libssh $(dpkg-query -W -f '${Version}' libssh-4 2>/dev/null || echo '?'), $(pdsh -V 2>&1 | head -1), $(clush --version 2>&1)"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$ROOT" diff --quiet HEAD -- src runtimes include 2>/dev/null || COMMIT="$COMMIT + uncommitted changes"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
printf 'fanout.sh: %s; %s\n' "$MACHINE" "$VERSIONS" >&2

KEX_LINE=
for n in $HOSTCOUNTS; do
  printf 'fanout.sh: %s hosts: starting them\n' "$n" >&2
  HOSTS_UP=1
  CONF=$("$TESTHOSTS" up "$n" --dir "$DIR") || die "testhosts up $n failed"
  SSHD_PIDS=()
  for ((i = 0; i < n; i++)); do SSHD_PIDS+=("$(cat "$DIR/hosts/$i/sshd.pid")"); done
  LCLIST=${AT}lab0
  for ((i = 1; i < n; i++)); do LCLIST+=",${AT}lab$i"; done
  if [[ -n $RUSER && -z ${RSHELL:-} ]]; then
    RSHELL=$(awk -v u="$RUSER" '$1 == u { print $3 " (" $4 ")" }' "$DIR/users.txt")
    [[ -n $RSHELL ]] || die "--user $RUSER: no such user on the test hosts (see $DIR/users.txt)"
    printf 'fanout.sh: as %s, login shell %s\n' "$RUSER" "$RSHELL" >&2
  fi
  if [[ -z $KEX_LINE ]]; then
    KEX_LINE="OpenSSH's key exchange with these hosts: $(kex_of "$CONF") by default, $(kex_of "$CONF" -o KexAlgorithms=$KEX_CURVE) with -o KexAlgorithms=$KEX_CURVE; libssh $(dpkg-query -W -f '${Version}' libssh-4 2>/dev/null) offers no sntrup761 and gets curve25519-sha256"
    printf 'fanout.sh: %s\n' "$KEX_LINE" >&2
  fi
  sanity "$n" "$CONF"
  for name in "${VARIANTS[@]}"; do run_variant "$name" "$n" "$CONF" 0; done # warm-up, not counted
  for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < ${#VARIANTS[@]}; k++)); do # rotate the order: no tool always goes first
      run_variant "${VARIANTS[(r + k) % ${#VARIANTS[@]}]}" "$n" "$CONF" "$r"
    done
    printf 'fanout.sh: %s hosts: round %s of %s done\n' "$n" "$r" "$ROUNDS" >&2
  done
  if ((REMOTE)) && [[ -z $REMOTE_MD ]]; then
    printf 'fanout.sh: remote per-exec cost on lab0\n' >&2
    remote_cost "$CONF"
  fi
  "$TESTHOSTS" down --dir "$DIR" || die "testhosts down failed"
  HOSTS_UP=0
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------------
# Tables

TABLE=$(
  printf '| tool | kex | hosts | median wall s | min-max wall s | vs pdsh wall | CPU ms/host (tool+children) | sshd CPU ms/host | failed runs |\n'
  printf '|---|---|---|---|---|---|---|---|---|\n'
  for n in $HOSTCOUNTS; do
    pdsh_wall=$(awk -F'\t' -v n="$n" '$1==n && $2=="pdsh" && $3>0 {print $4}' "$RESULTS" | median)
    for name in "${VARIANTS[@]}"; do
      sel() { awk -F'\t' -v n="$n" -v t="$name" '$1==n && $2==t && $3>0' "$RESULTS"; }
      wall=$(sel | cut -f4 | median)
      lo=$(sel | cut -f4 | sort -n | head -1)
      hi=$(sel | cut -f4 | sort -n | tail -1)
      cpu=$(sel | awk -F'\t' -v n="$n" '{print $5/n}' | median)
      sshd=$(sel | awk -F'\t' -v n="$n" '{print $6*1000/'"$(getconf CLK_TCK)"'/n}' | median)
      bad=$(sel | awk -F'\t' '$7!=0' | wc -l)
      case $name in lazyclusterctl) kex="curve25519-sha256 (libssh)" ;; *c25519) kex=$KEX_CURVE ;; *) kex="default (sntrup761x25519)" ;; esac
      printf '| %s | %s | %s | %.3f | %.3f-%.3f | %.2fx | %.1f | %.1f | %s |\n' "${name/+c25519/}" "$kex" "$n" \
        "$(bc -l <<<"$wall/1000000")" "$(bc -l <<<"$lo/1000000")" "$(bc -l <<<"$hi/1000000")" \
        "$(bc -l <<<"$wall/$pdsh_wall")" "$cpu" "$sshd" "$bad/$ROUNDS"
    done
  done
)

{
  printf 'Run %s on %s; %s. Load average %s before, %s after. lazyclusterctl at %s.\n' \
    "$START" "$MACHINE" "$VERSIONS" "$LOAD0" "$LOAD1" "$COMMIT"
  printf '%s rounds per host count after one warm-up round, the five variants alternating in a rotating order.' "$ROUNDS"
  if [[ -n $RUSER ]]; then
    printf ' Every tool logs in as %s, login shell %s on the hosts.' "$RUSER" "$RSHELL"
  else
    printf ' Every tool logs in as root (login shell /bin/bash).'
  fi
  printf '\n\n' 
  printf '%s\n' "$TABLE"
  printf '\n%s\n' "$KEX_LINE."
  if [[ -n $REMOTE_MD ]]; then printf '\n%s\n' "$REMOTE_MD"; fi
} | tee "$WORK/report.md"
if [[ -n $MARKDOWN ]]; then cp "$WORK/report.md" "$MARKDOWN" && cp "$RESULTS" "$MARKDOWN.tsv"; fi
