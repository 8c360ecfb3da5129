/*
 * script.c - the POSIX sh script that gathers a host's facts in one round trip
 * (lc__hostfacts_command).
 */
#include "hostfacts_text.h"
#include "ports_internal.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/*
 * Marker lines "@@LCF TAG VALUE" carry single values; "file PATH", "tcp" and "gpu KIND" are
 * followed by raw content up to the next marker. Only shell builtins read files (the shell's own
 * /proc/self is the cgroup of the command), so the script forks for uname, the listing of
 * listening ports (LC__LISTING_WHO, LC__LISTING_COMMAND) and the GPU tools only.
 *
 * The cgroup part mirrors what hostinfo.c reads: /proc/self/cgroup, the cgroup lines of
 * /proc/self/mountinfo, and for each v2 hierarchy and each v1 hierarchy with the cpu or memory
 * controller, the cgroup's directory and its parents up to the mount point (when one exists) with
 * the limit files found there. Where mountinfo names no hierarchy for a controller, the usual
 * places under /sys/fs/cgroup are walked, as hostinfo.c assumes them.
 */
static const char script_head[] =
    "m() { printf '" LC__HOSTFACTS_MARK " %s\\n' \"$*\"; }\n"
    "c() { while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done; }\n"
    "f() { [ -r \"$1\" ] && { m file \"$1\"; c <\"$1\"; }; }\n"
    /* w MOUNTROOT MOUNTPOINT CGROUPPATH FILES: the cgroup's directory and its parents */
    "w() {\n"
    "  wp=$2; wx=$3\n"
    "  case $1 in /) ;; *) case $wx in \"$1\"|\"$1\"/*) wx=${wx#\"$1\"} ;; *) wx= ;; esac ;; esac\n"
    "  case $wx in */..*) wx= ;; esac\n"
    "  wx=$wp${wx%/}\n"
    "  while [ -n \"$wx\" ]; do\n"
    "    if [ -d \"$wx\" ]; then m dir \"$wx\"; for wn in $4; do f \"$wx/$wn\"; done; fi\n"
    "    [ \"${#wx}\" -le \"${#wp}\" ] && break\n"
    "    wx=${wx%/*}\n"
    "  done\n"
    "}\n"
    /* v CONTROLLER(0: v2) MOUNTROOT MOUNTPOINT FILES: w for this process's cgroup there */
    "v() {\n"
    "  while IFS=: read -r vi vn vx; do\n"
    "    case $1 in\n"
    "      0) { [ \"$vi\" = 0 ] && [ -z \"$vn\" ]; } || continue ;;\n"
    "      *) case \",$vn,\" in *\",$1,\"*) ;; *) continue ;; esac ;;\n"
    "    esac\n"
    "    w \"$2\" \"$3\" \"$vx\" \"$4\"\n"
    "  done </proc/self/cgroup\n"
    "}\n"
    "m begin 1\n"
    "printf '" LC__HOSTFACTS_MARK " uname '; uname -snrm 2>/dev/null || echo\n"
    "if [ -r /sys/devices/system/cpu/online ] && read -r a </sys/devices/system/cpu/online; then\n"
    "  m online \"$a\"\n"
    "else\n"
    "  m nproc \"$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)\"\n"
    "fi\n"
    "[ -r /proc/self/status ] && while read -r a b; do\n"
    "  [ \"$a\" = Cpus_allowed_list: ] && { m allowed \"$b\"; break; }\n"
    "done </proc/self/status\n"
    "[ -r /proc/meminfo ] && while read -r a b u; do\n"
    "  [ \"$a\" = MemTotal: ] && { m file /proc/meminfo; printf '%s %s %s\\n' \"$a\" \"$b\" "
    "\"$u\"; "
    "break; }\n"
    "done </proc/meminfo\n"
    "if [ -r /etc/os-release ]; then f /etc/os-release; else f /usr/lib/os-release; fi\n"
    "if [ -r /proc/self/cgroup ]; then\n"
    "  f /proc/self/cgroup\n"
    "  m file /proc/self/mountinfo\n"
    "  [ -r /proc/self/mountinfo ] && while IFS= read -r a; do\n"
    "    case $a in *' - cgroup '*|*' - cgroup2 '*) printf '%s\\n' \"$a\" ;; esac\n"
    "  done </proc/self/mountinfo\n"
    "  k2=; kc=; km=\n"
    "  [ -r /proc/self/mountinfo ] && while read -r a b d r p o; do\n"
    "    t=${o#* - }; [ \"$t\" = \"$o\" ] && continue\n"
    "    y=${t%% *}; s=${t##* }\n"
    "    case $p in *\\\\*) p=$(printf '%b' \"$p\") ;; esac\n"
    "    case $r in *\\\\*) r=$(printf '%b' \"$r\") ;; esac\n"
    "    case $y in\n"
    "      cgroup2) k2=1; v 0 \"$r\" \"$p\" 'cpu.max memory.max' ;;\n"
    "      cgroup)\n"
    "        case \",$s,\" in *,cpu,*) kc=1; v cpu \"$r\" \"$p\" "
    "'cpu.cfs_quota_us cpu.cfs_period_us' ;; esac\n"
    "        case \",$s,\" in *,memory,*) km=1; v memory \"$r\" \"$p\" memory.limit_in_bytes ;; "
    "esac ;;\n"
    "    esac\n"
    "  done </proc/self/mountinfo\n"
    "  if [ -z \"$k2\" ]; then\n"
    "    f /sys/fs/cgroup/cgroup.controllers\n"
    "    if [ -e /sys/fs/cgroup/cgroup.controllers ]; then "
    "v 0 / /sys/fs/cgroup 'cpu.max memory.max'\n"
    "    else v 0 / /sys/fs/cgroup/unified 'cpu.max memory.max'; fi\n"
    "  fi\n"
    "  if [ -z \"$kc\" ]; then\n"
    "    if [ -d /sys/fs/cgroup/cpu ]; then "
    "v cpu / /sys/fs/cgroup/cpu 'cpu.cfs_quota_us cpu.cfs_period_us'\n"
    "    else v cpu / /sys/fs/cgroup/cpu,cpuacct 'cpu.cfs_quota_us cpu.cfs_period_us'; fi\n"
    "  fi\n"
    "  [ -z \"$km\" ] && v memory / /sys/fs/cgroup/memory memory.limit_in_bytes\n"
    "fi\n";

static const char script_tail[] =
    "m tcp\n" LC__LISTING_WHO "\n" LC__LISTING_COMMAND "\n"
    "t=; command -v timeout >/dev/null 2>&1 && t='timeout " STR(
        LC__HOSTFACTS_GPU_WAIT_S) "'\n"
                                  "g=0\n"
                                  "if command -v lazyclusterctl >/dev/null 2>&1; then\n"
                                  "  m gpu probe\n"
                                  "  o=$($t lazyclusterctl probe --json </dev/null 2>&1); s=$?\n"
                                  "  printf '%s\\n' \"$o\"; m gpu_exit \"$s\"\n"
                                  "  g=1; [ \"$s\" = 0 ] && g=2\n"
                                  "fi\n"
                                  "if [ \"$g\" != 2 ] && command -v nvidia-smi >/dev/null 2>&1; "
                                  "then\n"
                                  "  m gpu nvidia-smi\n"
                                  "  o=$($t nvidia-smi --query-gpu=index,uuid,name,memory.total "
                                  "--format=csv "
                                  "</dev/null 2>&1); s=$?\n"
                                  "  printf '%s\\n' \"$o\"; m gpu_exit \"$s\"\n"
                                  "  g=2\n"
                                  "fi\n"
                                  "[ \"$g\" = 0 ] && m gpu none\n"
                                  "m end\n";

int lc__hostfacts_command(lc__buf *out, const char *const *executables) {
  int r;
  if ((r = lc__buf_append(out, script_head, sizeof(script_head) - 1)) < 0)
    return r;
  for (size_t i = 0; executables && executables[i]; i++) {
    if ((r = lc__buf_printf(out, "printf '" LC__HOSTFACTS_MARK " exe %zu '; command -v -- ", i)) <
            0 ||
        (r = lc__buf_shell_quote(out, executables[i])) < 0 ||
        (r = lc__buf_puts(out, " 2>/dev/null || echo\n")) < 0)
      return r;
  }
  return lc__buf_append(out, script_tail, sizeof(script_tail) - 1);
}
