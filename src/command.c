/*
 * command.c - the shell text a host runs: the command line every login shell runs alike, the
 * lifeline wrapper around a user's command, and the small scripts behind file transfers and
 * working directories. The scripts run in /bin/sh and reach it through the channel's stdin.
 */
#include "runtime_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/*
 * How a command reaches a host. sshd hands the command line to the user's login shell, which may
 * be bash, dash, zsh, ksh, ash, fish, tcsh or csh, and whose rc files may print text. So the line
 * is one that every such shell runs alike, and that shows in `ps` as what it is:
 *
 *     exec /bin/sh -s lc-lifeline HOST LABEL
 *
 * and everything else, the script with its values (working directory, environment, the command),
 * goes into the channel's stdin, never into a command line. The script's first act is to print
 * LC__COMMAND_MARK on stdout and stderr: what comes before it is the rc files' noise, and is
 * dropped (runtime.c). Until the mark arrives on stdout nothing but the script is written into
 * stdin, because sh reads its script in blocks and would swallow data that followed it; the
 * script is one compound command that ends in `exit`, so sh has read all of it before it runs,
 * and never reads stdin again itself.
 */

/*
 * The lifeline, in POSIX sh (dash on Debian): runs $c in its own process group (setsid), with
 * stdin as a control line: "h" = heartbeat, "s" = stop, EOF = stop. Stop = SIGTERM to the group,
 * $g tenths of a second of grace, then SIGKILL. With $hb > 0, $hb seconds without a heartbeat
 * also stop it. Processes that left the group (setsid, double fork) are found by the LC_LIFELINE
 * variable they inherited and ended with it, also when the command exits by itself. After that, $x
 * (when not empty) runs: cleanup that must happen however the command ended. The wrapper exits
 * as the command did; a command ended by a signal is reported as that signal.
 *
 * Nothing waits busily: the reader blocks in `read`, the watchdog in `wait` on one `sleep` per
 * third of the limit (a heartbeat, SIGUSR1 from the reader, resets its count), the wrapper in
 * `wait` on the command. A stop that comes before setsid made the group reaches the process
 * itself. The watchdog's sleep is ended with SIGKILL: a SIGTERM that came between its fork and
 * its exec would be taken by the shell's inherited trap and lost.
 *
 * The sweep for processes that left the group reads only the PIDs made since the wrapper started,
 * when that range is known to be complete (below), instead of every process's environ on the
 * host. The variables set before this text: hb g x c, and the exports in setup().
 */
static const char lifeline_sh[] =
    "exec 3<&0 </dev/null\n"
    "read -r t _ </proc/uptime || t=\n"
    "case $t in *.[0-9][0-9]) ;; *) t= ;; esac; case $t in 0*) t= ;; esac\n"
    "for S in /usr/bin/setsid /bin/setsid setsid; do [ -x \"$S\" ] && break; done\n"
    "{ setup; export LC_LIFELINE=$$; exec \"$S\" /bin/sh -c \"$c\"; } 3<&- &\n"
    "p=$!\n"
    /* not the command's: ignored here, so that a heartbeat that comes before the watchdog set its
     * trap cannot end it (or the reader) */
    "trap '' USR1\n"
    /* the wrapper itself writes nothing: a message into a channel the host already closed would
     * kill it with SIGPIPE before it ends the group and its watchdog */
    "exec >/dev/null 2>&1\n"
    /*
     * sweep SIG: processes that left the group (setsid, daemons) still carry LC_LIFELINE. They
     * were all made after this wrapper, so their PIDs lie between $$ and the last PID handed out
     * (/proc/loadavg), unless PIDs wrapped around: a lap needs more than 32468 new PIDs (the
     * kernel's smallest default pid_max, 32768, less the 300 it skips), and fork and exit each
     * hold the kernel's task list lock for writing, so no host makes 250000 a second. So when the
     * last PID is above $$, at most 4096 further, and less than 32468 / 250000 s (12
     * hundredths) passed since the start, only those PIDs whose environ this user may read are
     * looked at, and a command that left nothing behind costs no grep at all (the reader, the
     * watchdog and its sleep are reaped before the last sweep). Anything else reads every process.
     */
    "sweep() {\n"
    "  z=1; l=\n"
    "  if [ -n \"$t\" ] && read -r u _ </proc/uptime && read -r _ _ _ _ e </proc/loadavg &&\n"
    "     [ $(( (${u%.*}${u#*.} - ${t%.*}${t#*.} + 1) * 2500 )) -lt 32468 ] &&\n"
    "     [ \"$e\" -ge $$ ] && [ $((e - $$)) -le 4096 ]; then\n"
    "    q=$$\n"
    "    while [ \"$q\" -lt \"$e\" ]; do q=$((q+1))\n"
    "      [ -r /proc/$q/environ ] && l=\"$l /proc/$q/environ\"\n"
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
    "  kill -TERM -\"$p\" || kill -TERM \"$p\"; a=$?; sweep TERM; b=$?\n"
    "  if [ \"$a\" = 0 ] || [ \"$b\" = 0 ]; then\n"
    "    i=0\n"
    "    while [ \"$i\" -lt \"$g\" ] && kill -0 -\"$p\"; do sleep 0.1; i=$((i+1)); done\n"
    "    kill -KILL -\"$p\"; [ \"$b\" = 0 ] && sweep KILL\n"
    "  fi\n"
    "  [ -z \"$x\" ] || eval \"$x\"\n"
    "  return 0\n"
    "}\n"
    "w=\n"
    "if [ \"$hb\" -gt 0 ]; then\n"
    /* the watchdog: a sleep of P = a third of the limit (whole seconds, rounded up) at a time; the
     * fourth end of one with no heartbeat since ends the group, after more than 3P >= hb and at
     * most 4P seconds of silence. $! is the command's pid until the first sleep is forked. */
    "  ( trap 'n=0; i=1' USR1\n"
    "    trap '[ \"$!\" = \"$p\" ] || { kill -9 $!; wait $!; }; exit 0' TERM\n"
    "    n=0\n"
    "    while :; do sleep $(( (hb + 2) / 3 )) &\n"
    "      i=1; while [ \"$i\" = 1 ]; do i=0; wait $!; done\n"
    "      n=$((n+1)); [ \"$n\" -gt 3 ] && break\n"
    "    done; end ) 3<&- &\n"
    "  w=$!\n"
    "fi\n"
    "( while IFS= read -r l <&3; do [ \"$l\" = s ] && break; [ -z \"$w\" ] || kill -USR1 $w;"
    " done; end ) &\n"
    "r=$!\n"
    /* a signal to the wrapper itself (Ctrl-C in a terminal, kill) also ends the group */
    "quit() { kill $r $w; end; exit \"$1\"; }\n"
    "trap 'quit 129' HUP; trap 'quit 130' INT; trap 'quit 143' TERM\n"
    "wait \"$p\"; s=$?\n"
    "kill $r $w; wait $r $w\n"
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

/* Appends a word for the command line that every login shell passes through as it is: anything
 * but letters, digits and ._-@: becomes _ (it is only a name in the host's process list). */
static int append_word(lc__buf *b, const char *s) {
  int r = 0;
  if ((r = lc__buf_puts(b, " ")) < 0)
    return r;
  for (size_t i = 0; s[i] != '\0' && i < 64 && r >= 0; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-' || c == '@' || c == ':';
    r = lc__buf_append(b, ok ? &c : "_", 1);
  }
  return r;
}

/* setup(): the working directory and the environment, for the command alone. */
static int append_setup(lc__buf *b, const lc_exec_options *opts, const char *setup, lc__err *err) {
  int r;
  if ((r = lc__buf_puts(b, "setup() {\n:\n")) < 0)
    return r;
  if (opts != NULL && opts->cwd != NULL && opts->cwd[0] != '\0') {
    if ((r = lc__buf_puts(b, "cd -- ")) < 0 || (r = append_path(b, opts->cwd)) < 0 ||
        (r = lc__buf_puts(b, " || exit 126\n")) < 0)
      return r;
  }
  for (const char *const *e = opts ? opts->env : NULL; e != NULL && *e != NULL; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || !valid_env_name(*e, (size_t)(eq - *e)))
      return lc__err_set(err, -EINVAL,
                         "bad environment entry \"%s\": want NAME=VALUE with NAME made "
                         "of letters, digits and _",
                         *e);
    if ((r = lc__buf_puts(b, "export ")) < 0 ||
        (r = lc__buf_append(b, *e, (size_t)(eq - *e) + 1)) < 0 ||
        (r = lc__buf_shell_quote(b, eq + 1)) < 0 || (r = lc__buf_puts(b, "\n")) < 0)
      return r;
  }
  if (setup != NULL && ((r = lc__buf_puts(b, setup)) < 0 || (r = lc__buf_puts(b, "\n")) < 0))
    return r;
  return lc__buf_puts(b, "}\n");
}

int lc__command_compose(lc__buf *line, lc__buf *script, const char *command,
                        const lc_exec_options *opts, int heartbeat_s, int grace_ms,
                        const char *setup, const char *cleanup, const char *host, lc__err *err) {
  const char *label = opts != NULL && opts->version >= 2 ? opts->label : NULL;
  int r;

  if ((r = lc__buf_puts(line, heartbeat_s >= 0 ? "exec /bin/sh -s lc-lifeline"
                                               : "exec /bin/sh -s lc-run")) < 0 ||
      (r = append_word(line, host != NULL && host[0] != '\0' ? host : "host")) < 0 ||
      (label != NULL && label[0] != '\0' && (r = append_word(line, label)) < 0))
    goto out;
  /* one compound command, read whole before it runs; the mark first */
  if ((r = lc__buf_puts(script, "{\nprintf '" LC__COMMAND_MARK_SH "'; printf '" LC__COMMAND_MARK_SH
                                "' >&2\n")) < 0 ||
      (r = append_setup(script, opts, setup, err)) < 0)
    goto out;
  if (heartbeat_s >= 0) {
    if ((r = lc__buf_printf(script, "hb=%d g=%d x=", heartbeat_s, (grace_ms + 99) / 100)) < 0 ||
        (r = lc__buf_shell_quote(script, cleanup != NULL ? cleanup : "")) < 0 ||
        (r = lc__buf_puts(script, " c=")) < 0 || (r = lc__buf_shell_quote(script, command)) < 0 ||
        (r = lc__buf_puts(script, "\n")) < 0 || (r = lc__buf_puts(script, lifeline_sh)) < 0)
      goto out;
  } else if ((r = lc__buf_puts(script, "setup\neval ")) < 0 ||
             (r = lc__buf_shell_quote(script, command)) < 0 ||
             (r = lc__buf_puts(script, "\nexit\n")) < 0) {
    goto out;
  }
  r = lc__buf_puts(script, "}\n");
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory");
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
