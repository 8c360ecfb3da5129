/*
 * command.c - the shell text a host runs: the command line every login shell runs alike, the
 * lifeline wrapper around a user's command, and the small scripts behind file transfers and
 * working directories. The scripts run in /bin/sh and reach it through the channel's stdin.
 */
#include "runtime_internal.h"

#include <errno.h>
#include <pthread.h>
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
 * The lifeline, in POSIX sh (dash on Debian): runs $lc_command in its own process group (setsid),
 * with stdin as a control line: "h" = heartbeat, "s" = stop, EOF = stop. Stop = SIGTERM to the
 * group, $lc_grace_tenths tenths of a second of grace, then SIGKILL. With $lc_heartbeat_s > 0,
 * that many seconds without a heartbeat also stop it. Processes that left the group (setsid,
 * double fork) are found by the LC_LIFELINE variable they inherited and ended with it, also when
 * the command exits by itself. After that, $lc_cleanup (when not empty) runs: cleanup that must
 * happen however the command ended. The wrapper exits as the command did; a command ended by a
 * signal is reported as that signal.
 *
 * Nothing waits busily: the reader blocks in `read`, the watchdog in `wait` on one `sleep` per
 * third of the limit (a heartbeat, SIGUSR1 from the reader, resets its count), the wrapper in
 * `wait` on the command. A stop that comes before setsid made the group reaches the process
 * itself. The watchdog's sleep is ended with SIGKILL: a SIGTERM that came between its fork and
 * its exec would be taken by the shell's inherited trap and lost.
 *
 * With $lc_input = 1 the command's stdin is a FIFO that the control reader feeds: a control line
 * "dTEXT" goes in as "TEXT\n" (read with IFS= and -r: blanks and backslashes stay as they came),
 * "e" closes it (the command reads EOF), and each of them counts as a heartbeat. The wrapper
 * makes the FIFO in a directory of its own (mktemp -d, lc-input.XXXXXX under $TMPDIR or /tmp),
 * opens both ends at once (a read-write open first, which Linux grants without waiting for a
 * peer, so that neither plain open blocks) and removes the directory before it starts anything:
 * nothing of it stays on the host, whatever ends the wrapper later. The limit: the reader writes
 * each line into the FIFO itself, so while the command leaves more than the pipe's buffer (64
 * KiB on Linux) unread, the reader waits, and the heartbeats and a stop behind that line wait
 * with it; a command that reads nothing for the heartbeat limit is then ended by the watchdog.
 * Without input the command's stdin is /dev/null.
 *
 * The variables set before this text: lc_heartbeat_s lc_grace_tenths lc_input lc_cleanup
 * lc_command, and the exports in setup(). Every variable of the wrapper starts with lc_, so that
 * none takes the value or the export of a variable of the login environment.
 */

/*
 * lc_sweep SIG: sends SIG to the processes that left the command's group (setsid, daemons) but
 * still carry LC_LIFELINE=$$; returns 0 when it found any, else 1. They were all made after this
 * wrapper, so their PIDs lie between $$ and the last PID handed out (/proc/loadavg), unless PIDs
 * wrapped around: a lap needs more than pid_max - 300 new PIDs (the kernel skips the first 300;
 * pid_max from /proc/sys/kernel/pid_max, 32768 when it cannot be read: the kernel's smallest
 * default; systemd's hosts have 4194304), and fork and exit each hold the kernel's task list lock
 * for writing, so no host makes 250000 a second. So when the last PID is above $$, at most 4096
 * further, and less than (pid_max - 300) / 250000 s passed since $lc_started (the uptime when the
 * wrapper started, "SECONDS.HH", or empty when unknown: 12 hundredths at pid_max 32768, 16.7 s at
 * 4194304), only those PIDs whose environ this user may read are looked at, and a command that
 * left nothing behind costs no grep at all (the reader, the watchdog and its sleep are reaped
 * before the last sweep). Anything else reads every process (lc_swept_all=1). Tested alone by
 * test_core (lc__command_lifeline_sweep), where lc_pid_max_file stands for the sysctl's file.
 */
static const char lifeline_sweep_sh[] =
    "lc_sweep() {\n"
    "  lc_none_found=1; lc_environs=; lc_swept_all=0\n"
    "  read -r lc_pid_max 2>/dev/null <\"${lc_pid_max_file:-/proc/sys/kernel/pid_max}\" ||\n"
    "    lc_pid_max=\n"
    "  case $lc_pid_max in ''|*[!0-9]*) lc_pid_max=32768 ;; esac\n"
    "  if [ -n \"$lc_started\" ] && read -r lc_now _ </proc/uptime &&\n"
    "     read -r _ _ _ _ lc_last_pid </proc/loadavg &&\n"
    "     [ $(( (${lc_now%.*}${lc_now#*.} - ${lc_started%.*}${lc_started#*.} + 1) * 2500 )) "
    "-lt $((lc_pid_max - 300)) ] &&\n"
    "     [ \"$lc_last_pid\" -ge $$ ] && [ $((lc_last_pid - $$)) -le 4096 ]; then\n"
    "    lc_next_pid=$$\n"
    "    while [ \"$lc_next_pid\" -lt \"$lc_last_pid\" ]; do lc_next_pid=$((lc_next_pid+1))\n"
    "      [ -r /proc/$lc_next_pid/environ ] && "
    "lc_environs=\"$lc_environs /proc/$lc_next_pid/environ\"\n"
    "    done\n"
    "  else lc_environs='/proc/[0-9]*/environ'; lc_swept_all=1; fi\n"
    "  [ -n \"$lc_environs\" ] || return 1\n"
    "  for lc_found in $(grep -lzxF \"LC_LIFELINE=$$\" $lc_environs); do\n"
    "    lc_found=${lc_found#/proc/}; kill -\"$1\" \"${lc_found%/environ}\"; lc_none_found=0\n"
    "  done\n"
    "  return $lc_none_found\n"
    "}\n";

/* The wrapper around the command; lifeline_sweep_sh comes before it. */
static const char lifeline_sh[] =
    "exec 3<&0 </dev/null\n"
    /* the sweep's file for pid_max is the kernel's, whatever the environment says (only
     * test_core's sweep alone sets it) */
    "lc_pid_max_file=\n"
    "read -r lc_started _ </proc/uptime || lc_started=\n"
    "case $lc_started in *.[0-9][0-9]) ;; *) lc_started= ;; esac\n"
    "case $lc_started in 0*) lc_started= ;; esac\n"
    "for lc_setsid in /usr/bin/setsid /bin/setsid setsid; do\n"
    "  [ -x \"$lc_setsid\" ] && break\n"
    "done\n"
    /* the command's stdin on fd 5, the reader's end of it on fd 6 */
    "lc_in_dir=\n"
    "if [ \"$lc_input\" = 1 ]; then\n"
    "  if lc_in_dir=$(mktemp -d \"${TMPDIR:-/tmp}/lc-input.XXXXXX\") &&\n"
    "     mkfifo -m 600 \"$lc_in_dir/in\" &&\n"
    "     command exec 4<>\"$lc_in_dir/in\" 5<\"$lc_in_dir/in\" 6>\"$lc_in_dir/in\" 4<&-; then\n"
    "    rm -rf -- \"$lc_in_dir\"\n"
    "  else\n"
    "    [ -z \"$lc_in_dir\" ] || rm -rf -- \"$lc_in_dir\"\n"
    "    printf 'lc-lifeline: cannot make a FIFO for the command'\\''s input under %s\\n' "
    "\"${TMPDIR:-/tmp}\" >&2\n"
    "    [ -z \"$lc_cleanup\" ] || eval \"$lc_cleanup\"\n"
    "    exit 126\n"
    "  fi\n"
    "else exec 5</dev/null 6>/dev/null; fi\n"
    /* the group leader's pid (its own, read from /proc/self, as $$ is the wrapper's) goes first
     * on stdout, before anything of the command: runtime.c takes that line (lc_process_pid) */
    "{ read -r lc_self _ </proc/self/stat && printf '" LC__COMMAND_PID_SH "%s\\n' \"$lc_self\"\n"
    "  setup; export LC_LIFELINE=$$; exec \"$lc_setsid\" /bin/sh -c \"$lc_command\"; } 3<&- "
    "<&5 5<&- 6>&- &\n"
    "lc_command_pid=$!\n"
    /* not the command's: ignored here, so that a heartbeat that comes before the watchdog set its
     * trap cannot end it (or the reader) */
    "trap '' USR1\n"
    /* the wrapper itself writes nothing: a message into a channel the host already closed would
     * kill it with SIGPIPE before it ends the group and its watchdog. fd 7 keeps the channel's
     * stderr for the watchdog's one line, which a child of its own writes (below). */
    "exec 7>&2 >/dev/null 2>&1\n"
    /* the grace period and the SIGKILLs only when something was still there */
    "lc_end() {\n"
    "  kill -TERM -\"$lc_command_pid\" || kill -TERM \"$lc_command_pid\"; lc_group_missed=$?\n"
    "  lc_sweep TERM; lc_sweep_missed=$?\n"
    "  if [ \"$lc_group_missed\" = 0 ] || [ \"$lc_sweep_missed\" = 0 ]; then\n"
    "    lc_tenths=0\n"
    "    while [ \"$lc_tenths\" -lt \"$lc_grace_tenths\" ] && kill -0 -\"$lc_command_pid\"; do\n"
    "      sleep 0.1; lc_tenths=$((lc_tenths+1))\n"
    "    done\n"
    "    kill -KILL -\"$lc_command_pid\"; [ \"$lc_sweep_missed\" = 0 ] && lc_sweep KILL\n"
    "  fi\n"
    /* the FIFO's directory went before the command started, unless that rm failed */
    "  [ -z \"$lc_in_dir\" ] || [ ! -e \"$lc_in_dir\" ] || rm -rf -- \"$lc_in_dir\"\n"
    "  [ -z \"$lc_cleanup\" ] || eval \"$lc_cleanup\"\n"
    "  return 0\n"
    "}\n"
    "lc_watchdog_pid=\n"
    "if [ \"$lc_heartbeat_s\" -gt 0 ]; then\n"
    /* the watchdog: a sleep of P = a third of the limit (whole seconds, rounded up) at a time; the
     * fourth end of one with no heartbeat since ends the group, after more than 3P >= the limit
     * and at most 4P seconds of silence. $! is the command's pid until the first sleep is
     * forked. Then it says why on the channel's stderr (the last stderr lines a cluster's message
     * quotes; else a process "ended by signal 15" says nothing of the cause), from a child that
     * ignores SIGPIPE (the usual cause: the channel is gone) and that it does not wait for (a
     * full pipe would block the write while the program that started it is stopped); the TERM
     * trap leaves that child alone once it was forked, the last sleep being over by then. */
    "  ( trap 'lc_silent_sleeps=0; lc_woken=1' USR1\n"
    "    trap '[ -n \"$lc_said\" ] || [ \"$!\" = \"$lc_command_pid\" ] || "
    "{ kill -9 $!; wait $!; }; exit 0' TERM\n"
    "    lc_silent_sleeps=0; lc_said=\n"
    "    while :; do sleep $(( (lc_heartbeat_s + 2) / 3 )) &\n"
    "      lc_woken=1; while [ \"$lc_woken\" = 1 ]; do lc_woken=0; wait $!; done\n"
    "      lc_silent_sleeps=$((lc_silent_sleeps+1)); [ \"$lc_silent_sleeps\" -gt 3 ] && break\n"
    "    done\n"
    "    lc_said=1; ( trap '' PIPE; printf 'lc-lifeline: no heartbeat for over %s s (the program "
    "that started this command is gone, stopped or cut off from this host): ending the "
    "command\\n' \"$lc_heartbeat_s\" >&7 ) &\n"
    "    lc_end ) 3<&- 5<&- 6>&- &\n"
    "  lc_watchdog_pid=$!\n"
    "fi\n"
    /* a command that closed its stdin makes a write fail (EPIPE), not end the reader */
    "( trap '' PIPE\n"
    "  while IFS= read -r lc_control <&3; do\n"
    "    [ \"$lc_control\" = s ] && break\n"
    "    [ -z \"$lc_watchdog_pid\" ] || kill -USR1 $lc_watchdog_pid\n"
    "    case $lc_control in\n"
    "    d*) printf '%s\\n' \"${lc_control#d}\" >&6 ;;\n"
    "    e) exec 6>&- ;;\n"
    "    esac\n"
    /* fd 6 stays open through lc_end: a stop is a SIGTERM, not an EOF the command might answer
     * first by exiting 0 */
    "  done; lc_end ) 5<&- 7>&- &\n"
    "lc_reader_pid=$!\n"
    "exec 5<&- 6>&-\n"
    /* a signal to the wrapper itself (Ctrl-C in a terminal, kill) also ends the group */
    "lc_quit() { kill $lc_reader_pid $lc_watchdog_pid; lc_end; exit \"$1\"; }\n"
    "trap 'lc_quit 129' HUP; trap 'lc_quit 130' INT; trap 'lc_quit 143' TERM\n"
    "wait \"$lc_command_pid\"; lc_status=$?\n"
    "kill $lc_reader_pid $lc_watchdog_pid; wait $lc_reader_pid $lc_watchdog_pid\n"
    "lc_end\n"
    "if [ \"$lc_status\" -gt 128 ]; then\n"
    "  lc_signal=$(kill -l \"$lc_status\") &&\n"
    "    { trap - \"$lc_signal\"; kill -s \"$lc_signal\" $$; }\n"
    "fi\n"
    "exit \"$lc_status\"\n";

const char *lc__command_lifeline_sweep(void) { return lifeline_sweep_sh; }

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

/*
 * The start of every script, the same for every process of its kind, and so never copied into
 * one (lc__command_compose_parts): the mark, and for a lifeline the wrapper itself as a function
 * (lc_lifeline, called at the end of the process's own part). A process's stdin holds the ~5 KB
 * of the wrapper only by pointer: a start of 1,024 workers queues hundreds of processes at once
 * (heaptrack, 64 hosts: 3.3 MB of copies at the peak). Made once; one C string may not be longer
 * than 4,095 bytes, so it is put together at run time.
 */
#define SCRIPT_MARK_SH "{\nprintf '" LC__COMMAND_MARK_SH "'; printf '" LC__COMMAND_MARK_SH "' >&2\n"
static char *lifeline_head;
static size_t lifeline_head_len;
static pthread_once_t lifeline_head_once = PTHREAD_ONCE_INIT;

static void lifeline_head_make(void) {
  lc__buf b = {0};
  if (lc__buf_puts(&b, SCRIPT_MARK_SH) == 0 && lc__buf_puts(&b, lifeline_sweep_sh) == 0 &&
      lc__buf_puts(&b, "lc_lifeline() {\n") == 0 && lc__buf_puts(&b, lifeline_sh) == 0 &&
      lc__buf_puts(&b, "}\n") == 0) {
    lifeline_head = b.data; /* for the life of the process */
    lifeline_head_len = b.len;
  } else {
    lc__buf_free(&b);
  }
}

int lc__command_compose_parts(lc__buf *line, const char **head, size_t *head_len, lc__buf *rest,
                              const char *command, const lc_exec_options *opts, int heartbeat_s,
                              int grace_ms, const char *setup, const char *cleanup,
                              const char *host, lc__err *err) {
  const char *label = opts != NULL && opts->version >= 2 ? opts->label : NULL;
  int input = opts != NULL && opts->version >= 3 && opts->input != 0;
  int r;

  if (heartbeat_s >= 0) {
    pthread_once(&lifeline_head_once, lifeline_head_make);
    if (lifeline_head == NULL)
      return lc__err_set(err, -ENOMEM, "out of memory");
    *head = lifeline_head;
    *head_len = lifeline_head_len;
  } else {
    *head = SCRIPT_MARK_SH;
    *head_len = sizeof(SCRIPT_MARK_SH) - 1;
  }
  if ((r = lc__buf_puts(line, heartbeat_s >= 0 ? "exec /bin/sh -s lc-lifeline"
                                               : "exec /bin/sh -s lc-run")) < 0 ||
      (r = append_word(line, host != NULL && host[0] != '\0' ? host : "host")) < 0 ||
      (label != NULL && label[0] != '\0' && (r = append_word(line, label)) < 0))
    goto out;
  /* one compound command, read whole before it runs (the head opened it) */
  if ((r = append_setup(rest, opts, setup, err)) < 0)
    goto out;
  if (heartbeat_s >= 0) {
    if ((r = lc__buf_printf(rest, "lc_heartbeat_s=%d lc_grace_tenths=%d lc_input=%d lc_cleanup=",
                            heartbeat_s, (grace_ms + 99) / 100, input)) < 0 ||
        (r = lc__buf_shell_quote(rest, cleanup != NULL ? cleanup : "")) < 0 ||
        (r = lc__buf_puts(rest, " lc_command=")) < 0 ||
        (r = lc__buf_shell_quote(rest, command)) < 0 ||
        (r = lc__buf_puts(rest, "\nlc_lifeline\n")) < 0)
      goto out;
  } else if ((r = lc__buf_puts(rest, "setup\neval ")) < 0 ||
             (r = lc__buf_shell_quote(rest, command)) < 0 ||
             (r = lc__buf_puts(rest, "\nexit\n")) < 0) {
    goto out;
  }
  r = lc__buf_puts(rest, "}\n");
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory");
  return r;
}

int lc__command_compose(lc__buf *line, lc__buf *script, const char *command,
                        const lc_exec_options *opts, int heartbeat_s, int grace_ms,
                        const char *setup, const char *cleanup, const char *host, lc__err *err) {
  const char *head = NULL;
  size_t head_len = 0;
  lc__buf rest = {0};
  int r = lc__command_compose_parts(line, &head, &head_len, &rest, command, opts, heartbeat_s,
                                    grace_ms, setup, cleanup, host, err);
  if (r == 0 && ((r = lc__buf_append(script, head, head_len)) < 0 ||
                 (r = lc__buf_append(script, rest.data, rest.len)) < 0))
    lc__err_set(err, r, "out of memory");
  lc__buf_free(&rest);
  return r;
}

/*
 * The temporary file beside the target is made new (mktemp: O_EXCL, 0600, a random name), so that
 * a symlink planted at a name we would pick cannot redirect the write; without mktemp, sh's
 * noclobber (O_EXCL as well) makes one. Mode 0 means 0600. gz: stdin is gzip's format, which
 * `gzip -dc` unpacks into the file (size is the unpacked size); a host where gzip cannot run (not
 * found: 127, not executable: 126; no check can tell in every sh, whose `command -v` may name a
 * file it cannot run) exits 3, saying so.
 */
int lc__command_write_file(lc__buf *out, const char *path, uint64_t size, unsigned int mode,
                           int gz) {
  int r;
  if ((mode & 07777u) == 0)
    mode = 0600;
  if ((r = lc__buf_puts(out, "umask 077\nf=")) < 0 || (r = append_path(out, path)) < 0)
    return r;
  return lc__buf_printf(
      out,
      "\nt=\n"
      "trap '[ -z \"$t\" ] || rm -f \"$t\"' EXIT\n"
      "trap 'exit 1' HUP INT TERM PIPE\n"
      "if ! t=$(mktemp \"$f.lc-tmp.XXXXXX\" 2>/dev/null); then\n"
      "  t=\"$f.lc-tmp.$$\"; (set -C && : >\"$t\") || { t=; exit 1; }\n"
      "fi\n"
      "%s"
      "s=$(wc -c <\"$t\") || exit 1\n"
      "if [ \"$s\" -ne %llu ]; then echo \"transfer cut short: $s of %llu bytes arrived\" >&2; "
      "exit 1; fi\n"
      "chmod %o \"$t\" && mv -f \"$t\" \"$f\" || exit 1\n",
      gz ? "gzip -dc >\"$t\"; s=$?\n"
           "case $s in 0) ;;\n"
           "126|127) echo \"gzip cannot run here (exit status $s)\" >&2; exit 3 ;;\n"
           "*) exit 1 ;; esac\n"
         : "cat >\"$t\" || exit 1\n",
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

/*
 * The root must be this user's (or root's) and writable by nobody else, as ssh asks of a key's
 * directory: else another user could swap our directories under us. A refusal is one stderr line
 * "lc-refuse ..." naming the path, its owner and mode (lc_runtime_workdir takes it). The root and
 * the directory are made under umask 077 (0700), whatever umask the runtime gives processes.
 */
int lc__command_workdir(lc__buf *out, lc__buf *cleanup, const char *root, const char *name,
                        int keep) {
  int r;
  if ((r = lc__buf_puts(out, "umask 077\nlc_bad=\nr=")) < 0 || (r = append_root(out, root)) < 0 ||
      (r = lc__buf_puts(
           out,
           "\n{ [ -d \"$r\" ] || mkdir -p \"$r\"; } || exit 1\n"
           "lc_owner_mode=$(stat -L -c '%u %a' -- \"$r\") || exit 1\n"
           "lc_uid=$(id -u)\n"
           "case \"${lc_owner_mode% *}\" in \"$lc_uid\"|0) ;; *) lc_bad=1 ;; esac\n"
           "[ $((0${lc_owner_mode#* } & 022)) -eq 0 ] || lc_bad=1\n"
           "if [ -n \"$lc_bad\" ]; then\n"
           "  printf 'lc-refuse %s is owned by uid %s with mode %s: it must be owned by uid "
           "%s (or root) and not writable by group or others\\n' \"$r\" \"${lc_owner_mode% *}\" "
           "\"${lc_owner_mode#* }\" \"$lc_uid\" >&2; exit 1\n"
           "fi\n"
           "mkdir \"$r\"/")) < 0 ||
      (r = lc__buf_shell_quote(out, name)) < 0 ||
      (r = lc__buf_puts(out, " && printf '%s\\n' \"$r\"/")) < 0 ||
      (r = lc__buf_shell_quote(out, name)) < 0 || (r = lc__buf_puts(out, " || exit 1\n")) < 0)
    return r;
  if (keep)
    return 0;
  /* the keeper stays; its lifeline removes the directory however it ends */
  if ((r = lc__buf_puts(out, LC__KEEPER_SH)) < 0 || (r = lc__buf_puts(cleanup, "rm -rf -- ")) < 0 ||
      (r = append_root(cleanup, root)) < 0 || (r = lc__buf_puts(cleanup, "/")) < 0)
    return r;
  return lc__buf_shell_quote(cleanup, name);
}

int lc__command_workdir_again(lc__buf *out, lc__buf *cleanup, const char *path, int keep) {
  int r;
  if ((r = lc__buf_puts(out, "umask 077\nd=")) < 0 || (r = lc__buf_shell_quote(out, path)) < 0 ||
      (r = lc__buf_puts(out, "\nmkdir -p \"$d\" && printf '%s\\n' \"$d\" || exit 1\n")) < 0 || keep)
    return r;
  if ((r = lc__buf_puts(out, LC__KEEPER_SH)) < 0 || (r = lc__buf_puts(cleanup, "rm -rf -- ")) < 0)
    return r;
  return lc__buf_shell_quote(cleanup, path);
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
