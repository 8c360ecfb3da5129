#!/bin/sh
# sshconfig_vs_ssh.sh LAZYCLUSTERCTL CORPUS_DIR - `lazyclusterctl config` against `ssh -G`.
#
# Each file CORPUS_DIR/NN-name.conf is a config; its first line "# hosts: a b c" names the hosts
# to resolve. For every host, every keyword that `lazyclusterctl config` prints is compared with
# what `ssh -G` prints for it. The algorithm lists (ciphers, kexalgorithms, hostkeyalgorithms,
# pubkeyacceptedalgorithms) start from the backend's defaults, not OpenSSH's: they are compared
# only where the config sets the list outright (no +, - or ^), as the defaults differ on purpose.
# Relative Includes are under ~/.ssh, where ssh takes ~ from the password database: the corpus's
# inc/ files are copied for the run to ~/.ssh/lc-corpus-XXXXXX (@INC@ in the files), and HOME is
# set to the password database's home so that both read the same ~.
set -u
ctl=$(realpath "$1")
corpus=$(realpath "$2")
HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
export HOME LC_TEST_VAR=fromenv
mkdir -p "$HOME/.ssh"
work=$(mktemp -d "$HOME/.ssh/lc-corpus-XXXXXX")
trap 'rm -rf "$work"' EXIT
inc=$(basename "$work")
mkdir "$work/inc"
for f in "$corpus"/inc/*.conf; do
  sed "s#@INC@#$inc/inc#g" "$f" >"$work/inc/$(basename "$f")"
done
fail=0 pass=0 configs=0
for conf in "$corpus"/*.conf; do
  configs=$((configs + 1))
  sed "s#@INC@#$inc/inc#g" "$conf" >"$work/cfg"
  hosts=$(sed -n '1s/^# hosts: //p' "$conf")
  for h in $hosts; do
    ours=$("$ctl" config -F "$work/cfg" "$h" 2>"$work/err")
    if [ $? -ne 0 ]; then
      echo "FAIL $conf $h: lazyclusterctl config failed: $(cat "$work/err")"
      fail=$((fail + 1))
      continue
    fi
    theirs=$(ssh -G -F "$work/cfg" "$h" 2>/dev/null)
    for kw in $(printf '%s\n' "$ours" | cut -d' ' -f1 | sort -u); do
      case $kw in
      ciphers | kexalgorithms | hostkeyalgorithms | pubkeyacceptedalgorithms)
        # compared only when the config sets the list outright
        set_kw=$(grep -i -E "^[[:space:]]*$kw([[:space:]]|=)" "$work/cfg" | head -1)
        [ -z "$set_kw" ] && continue
        case $(printf '%s' "$set_kw" | sed -E 's/^[[:space:]]*[A-Za-z]+[[:space:]=]+//') in
        [-+^]*) continue ;;
        esac
        ;;
      esac
      a=$(printf '%s\n' "$ours" | grep "^$kw " | cut -d' ' -f2-)
      b=$(printf '%s\n' "$theirs" | grep -i "^$kw " | cut -d' ' -f2-)
      if [ "$a" != "$b" ]; then
        echo "FAIL $(basename "$conf") $h $kw: ours '$a', ssh -G '$b'"
        fail=$((fail + 1))
      else
        pass=$((pass + 1))
      fi
    done
  done
done
echo "$configs configs; $pass passed, $fail failed"
[ "$configs" -ge 30 ] || { echo "FAIL: fewer than 30 configs"; exit 1; }
[ "$fail" -eq 0 ]
