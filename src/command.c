/*
 * command.c - the shell text a host runs: the lifeline wrapper around a user's command, and the
 * small scripts behind file transfers and working directories. Every value is single-quoted, so a
 * host's login shell passes it through untouched (a POSIX login shell is assumed: sh, bash, zsh).
 */
#include "runtime_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/*
 * The lifeline: runs "$3" in its own process group, with stdin as a control line: "h" =
 * heartbeat, "s" = stop, EOF = stop. Stop = SIGTERM to the group, $2 tenths of a second of grace,
 * then SIGKILL. With $1 > 0, $1 seconds without a heartbeat also stop it. Processes that left the
 * group (setsid, double fork) are found by the LC_LIFELINE variable they inherited and ended with
 * it, also when the command exits by itself. After that, $4 (when not empty) runs: cleanup that
 * must happen however the command ended. The wrapper exits as the command did; a command ended by
 * a signal is reported as that signal.
 *
 * Every command pays for this text, and a cluster start runs a hundred of them at once, so it
 * forks little and execs nothing of its own where it can. Under bash (the login shell of most
 * hosts: the composed command then runs the text in that shell, without exec'ing another) the
 * command's group comes from job control (set -m: no tty needed, and the group exists as soon as
 * the job is started), and the heartbeat limit is the reader's own `read -t`: two forks in all.
 * Under any other shell it runs in /bin/sh, where the group takes an exec of setsid and the
 * heartbeat limit a watchdog subshell ticking with sleep 1, heartbeats reaching it as SIGUSR1.
 * The sweep for processes that left the group reads only the PIDs made since the wrapper started,
 * when that range is known to be complete (below), instead of every process's environ on the host.
 */
static const char lifeline_sh[] =
    "hb=$1; g=$2; c=$3; x=$4\n"
    "exec 3<&0 </dev/null\n"
    "read -r t _ </proc/uptime 2>/dev/null || t=\n"
    "case $t in *.[0-9][0-9]) ;; *) t= ;; esac; case $t in 0*) t= ;; esac\n"
    "if [ -n \"${BASH_VERSION-}\" ]; then\n"
    /* a login shell's rc file may have set these */
    "  set +eu; set -m; LC_LIFELINE=$$ /bin/sh -c \"$c\" 3<&- & p=$!; set +m\n"
    "else\n"
    "  LC_LIFELINE=$$ setsid /bin/sh -c \"$c\" 3<&- & p=$!\n"
    "fi\n"
    /* not the command's: ignored here, so that a heartbeat that comes before the watchdog set its
     * trap cannot end it (or the reader) */
    "trap '' USR1\n"
    /* the wrapper itself writes nothing: a shell's job message into a channel the host already
     * closed would kill it with SIGPIPE before it ends the group and its watchdog */
    "exec >/dev/null 2>&1\n"
    /*
     * sweep SIG: processes that left the group (setsid, daemons) still carry LC_LIFELINE. They
     * were all made after this wrapper, so their PIDs lie between $$ and the last PID handed out
     * (/proc/loadavg), unless PIDs wrapped around: a lap needs more than 32468 new PIDs (the
     * kernel's smallest default pid_max, 32768, less the 300 it skips), and fork and exit each
     * hold the kernel's task list lock for writing, so no host makes 250000 a second. So when the
     * last PID is above $$, at most 4096 further, and less than 32468 / 250000 s (12
     * hundredths) passed since the start, only those PIDs are read, and a short command that
     * left nothing behind costs no grep at all. The reader, the watchdog and the watchdog's sleep
     * (its parent, field 4 of /proc/PID/stat) are ours and carry no LC_LIFELINE: left out. Anything
     * else reads every process.
     */
    "sweep() {\n"
    "  z=1; l=\n"
    "  if [ -n \"$t\" ] && read -r u _ </proc/uptime && read -r _ _ _ _ e </proc/loadavg &&\n"
    "     [ $(( (${u%.*}${u#*.} - ${t%.*}${t#*.} + 1) * 2500 )) -lt 32468 ] &&\n"
    "     [ \"$e\" -ge $$ ] && [ $((e - $$)) -le 4096 ]; then\n"
    "    q=$$\n"
    "    while [ \"$q\" -lt \"$e\" ]; do q=$((q+1))\n"
    "      [ \"$q\" != \"$r\" ] && [ \"$q\" != \"$w\" ] && read -r v </proc/$q/stat &&\n"
    "        v=${v##*) } && v=${v#* } && [ \"${v%% *}\" != \"$w\" ] && l=\"$l /proc/$q/environ\"\n"
    "    done\n"
    "  else l='/proc/[0-9]*/environ'; fi\n"
    "  [ -n \"$l\" ] || return 1\n"
    "  for q in $(grep -lzxF \"LC_LIFELINE=$$\" $l); do\n"
    "    q=${q#/proc/}; kill -\"$1\" \"${q%/environ}\"; z=0\n"
    "  done\n"
    "  return $z\n"
    "}\n"
    /* the grace period and the SIGKILLs only when something was still there */
    "end() {\n"
    "  kill -TERM -\"$p\"; a=$?; sweep TERM; b=$?\n"
    "  if [ \"$a\" = 0 ] || [ \"$b\" = 0 ]; then\n"
    "    i=0\n"
    "    while [ \"$i\" -lt \"$g\" ] && kill -0 -\"$p\"; do sleep 0.1; i=$((i+1)); done\n"
    "    kill -KILL -\"$p\"; [ \"$b\" = 0 ] && sweep KILL\n"
    "  fi\n"
    "  [ -z \"$x\" ] || eval \"$x\"\n"
    "  return 0\n"
    "}\n"
    "w=\n"
    "if [ -n \"${BASH_VERSION-}\" ]; then\n"
    "  o=; [ \"$hb\" -gt 0 ] && o=\"-t $hb\"\n"
    "  ( while IFS= read -r $o l <&3; do [ \"$l\" = s ] && break; done; end ) &\n"
    "else\n"
    /* the watchdog: one second a tick, a heartbeat (USR1) starts the count again; its sleep dies
     * with it, so nothing lingers after the command */
    "  if [ \"$hb\" -gt 0 ]; then\n"
    "    ( trap 'n=0' USR1; trap 'kill $s; wait $s; exit 0' TERM; n=0\n"
    "      while [ \"$n\" -le \"$hb\" ]; do sleep 1 & s=$!\n"
    "        while ! wait $s && kill -0 $s; do :; done; s=; n=$((n+1)); done; end ) 3<&- &\n"
    "    w=$!\n"
    "  fi\n"
    /* its own group exists only once setsid ran: until then a stop could not reach it */
    "  while kill -0 \"$p\" && ! kill -0 -\"$p\"; do :; done\n"
    "  ( while IFS= read -r l <&3; do [ \"$l\" = s ] && break; [ -z \"$w\" ] || kill -USR1 $w;"
    " done; end ) &\n"
    "fi\n"
    "r=$!\n"
    /* a signal to the wrapper itself (Ctrl-C in a terminal, kill) also ends the group */
    "quit() { kill $r $w; end; exit \"$1\"; }\n"
    "trap 'quit 129' HUP; trap 'quit 130' INT; trap 'quit 143' TERM\n"
    "wait \"$p\"; s=$?\n"
    /* the watchdog is not waited for: a TERM that comes as it starts waiting for its sleep
     * takes effect only when that sleep ends (up to a second); its sleep is left out of the
     * sweep by its parent instead */
    "kill $r $w; wait $r\n"
    "end\n"
    "if [ \"$s\" -gt 128 ]; then n=$(kill -l \"$s\") && { trap - \"$n\"; kill -s \"$n\" $$; }; fi\n"
    "exit \"$s\"\n";

static int valid_env_name(const char *s, size_t n) {
  if (n == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return 0;
  return 1;
}

/* Appends a path for sh: a leading "~/" becomes "$HOME"/'rest', anything else is quoted. */
static int append_path(lc__buf *b, const char *path) {
  int r;
  if (strncmp(path, "~/", 2) == 0) {
    if ((r = lc__buf_puts(b, "\"$HOME\"/")) < 0)
      return r;
    return lc__buf_shell_quote(b, path + 2);
  }
  if (strcmp(path, "~") == 0)
    return lc__buf_puts(b, "\"$HOME\"");
  return lc__buf_shell_quote(b, path);
}

int lc__command_compose(lc__buf *out, const char *command, const lc_exec_options *opts,
                        int heartbeat_s, int grace_ms, const char *cleanup, lc__err *err) {
  lc__buf inner = {0};
  int r = 0;

  if (opts != NULL && opts->cwd != NULL && opts->cwd[0] != '\0') {
    if ((r = lc__buf_puts(&inner, "cd -- ")) < 0 || (r = append_path(&inner, opts->cwd)) < 0 ||
        (r = lc__buf_puts(&inner, " || exit 126\n")) < 0)
      goto out;
  }
  for (const char *const *e = opts ? opts->env : NULL; e != NULL && *e != NULL; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || !valid_env_name(*e, (size_t)(eq - *e))) {
      r = lc__err_set(err, -EINVAL,
                      "bad environment entry \"%s\": want NAME=VALUE with NAME made "
                      "of letters, digits and _",
                      *e);
      goto out;
    }
    if ((r = lc__buf_puts(&inner, "export ")) < 0 ||
        (r = lc__buf_append(&inner, *e, (size_t)(eq - *e) + 1)) < 0 ||
        (r = lc__buf_shell_quote(&inner, eq + 1)) < 0 || (r = lc__buf_puts(&inner, "\n")) < 0)
      goto out;
  }
  if ((r = lc__buf_append(&inner, command, strlen(command))) < 0)
    goto out;

  if (heartbeat_s >= 0) {
    /* the lifeline runs in the login shell when that is bash, else in a /bin/sh of its own */
    if ((r = lc__buf_printf(out, "set -- %d %d ", heartbeat_s, (grace_ms + 99) / 100)) < 0 ||
        (r = lc__buf_shell_quote(out, inner.data)) < 0 ||
        (cleanup != NULL &&
         ((r = lc__buf_puts(out, " ")) < 0 || (r = lc__buf_shell_quote(out, cleanup)) < 0)) ||
        (r = lc__buf_puts(out, "\nL=")) < 0 || (r = lc__buf_shell_quote(out, lifeline_sh)) < 0 ||
        (r = lc__buf_puts(out, "\nif [ -n \"${BASH_VERSION-}\" ]; then eval \"$L\"; "
                               "else exec /bin/sh -c \"$L\" lc-lifeline \"$@\"; fi\n")) < 0)
      goto out;
  } else if ((r = lc__buf_puts(out, "exec /bin/sh -c ")) < 0 ||
             (r = lc__buf_shell_quote(out, inner.data)) < 0) {
    goto out;
  }
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory");
  lc__buf_free(&inner);
  return r;
}

int lc__command_write_file(lc__buf *out, const char *path, uint64_t size, unsigned int mode) {
  int r;
  if ((r = lc__buf_puts(out, "umask 077\nf=")) < 0 || (r = append_path(out, path)) < 0)
    return r;
  return lc__buf_printf(
      out,
      "\nt=\"$f.lc-tmp.$$\"\n"
      "trap 'rm -f \"$t\"' EXIT\n"
      "trap 'exit 1' HUP INT TERM PIPE\n"
      "cat >\"$t\" || exit 1\n"
      "s=$(wc -c <\"$t\") || exit 1\n"
      "if [ \"$s\" -ne %llu ]; then echo \"transfer cut short: $s of %llu bytes arrived\" >&2; "
      "exit 1; fi\n"
      "chmod %o \"$t\" && mv -f \"$t\" \"$f\" || exit 1\n",
      (unsigned long long)size, (unsigned long long)size, mode & 07777u);
}

int lc__command_get_file(lc__buf *out, const char *path) {
  int r;
  if ((r = lc__buf_puts(out, "f=")) < 0 || (r = append_path(out, path)) < 0)
    return r;
  return lc__buf_printf(out, "\n"
                             "[ -f \"$f\" ] || { echo \"$f: no such regular file\" >&2; exit 2; }\n"
                             "[ -r \"$f\" ] || { echo \"$f: not readable\" >&2; exit 2; }\n"
                             "m=$(stat -c '%%a %%s' \"$f\") || exit 2\n"
                             "echo \"lc-stat $m\" >&2\n"
                             "exec cat \"$f\"\n");
}

/* The parent of working directories, as sh text. */
static int append_root(lc__buf *out, const char *root) {
  if (root == NULL || root[0] == '\0')
    return lc__buf_puts(out, "\"${XDG_CACHE_HOME:-$HOME/.cache}/lazycluster\"");
  return append_path(out, root);
}

int lc__command_workdir(lc__buf *out, lc__buf *cleanup, const char *root, const char *name,
                        int keep) {
  int r;
  if ((r = lc__buf_puts(out, "r=")) < 0 || (r = append_root(out, root)) < 0 ||
      (r = lc__buf_puts(out, "\n{ [ -d \"$r\" ] || mkdir -p \"$r\"; } && mkdir \"$r\"/")) < 0 ||
      (r = lc__buf_shell_quote(out, name)) < 0 ||
      (r = lc__buf_puts(out, " && printf '%s\\n' \"$r\"/")) < 0 ||
      (r = lc__buf_shell_quote(out, name)) < 0 || (r = lc__buf_puts(out, " || exit 1\n")) < 0)
    return r;
  if (keep)
    return 0;
  /* the keeper stays; its lifeline removes the directory however it ends */
  if ((r = lc__buf_puts(out, "while :; do sleep 3600 & wait $!; done\n")) < 0 ||
      (r = lc__buf_puts(cleanup, "rm -rf -- ")) < 0 || (r = append_root(cleanup, root)) < 0 ||
      (r = lc__buf_puts(cleanup, "/")) < 0)
    return r;
  return lc__buf_shell_quote(cleanup, name);
}

int lc__signal_from_name(const char *name) {
  static const struct {
    const char *name;
    int sig;
  } sigs[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},
              {"ABRT", SIGABRT}, {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV},
              {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
              {"USR2", SIGUSR2}, {"BUS", SIGBUS},   {"TRAP", SIGTRAP}, {"XCPU", SIGXCPU}};
  if (name == NULL)
    return 0;
  if (strncmp(name, "SIG", 3) == 0)
    name += 3;
  for (size_t i = 0; i < LC_ARRAY_SIZE(sigs); i++)
    if (strcmp(sigs[i].name, name) == 0)
      return sigs[i].sig;
  return 0;
}

int lc_shell_quote(char **out, const char *arg) {
  lc__buf b = {0};
  *out = NULL;
  if (arg == NULL)
    return lc__error_set(-EINVAL, "shell_quote: no argument given");
  if (lc__buf_shell_quote(&b, arg) < 0) {
    lc__buf_free(&b);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  *out = b.data;
  return 0;
}
