/*
 * test_core.c - the pieces below the runtimes that need no host: error codes and details, the
 * buffer and shell quoting, the composed shell text (run through this machine's /bin/sh, and the
 * lifeline also through bash, where it takes its other branch), signal names, and the engine's
 * start and stop.
 */
#include "lc_test.h"
#include "runtime_internal.h"

#include "lazycluster/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void test_error_names_and_texts(void) {
  LC_CHECK_STR(lc_err_name(LC_EAUTH), "LC_EAUTH");
  LC_CHECK_STR(lc_err_name(LC_EHOSTKEYCHANGED), "LC_EHOSTKEYCHANGED");
  LC_CHECK_STR(lc_err_name(-ETIMEDOUT), "ETIMEDOUT");
  LC_CHECK_STR(lc_err_name(-EADDRINUSE), "EADDRINUSE");
  LC_CHECK_STR(lc_err_name(0), "LC_OK");
  LC_CHECK_STR(lc_err_name(-29999), "LC_EUNKNOWN");
  LC_CHECK_STR(lc_strerror(LC_EKEYLOCKED), "private key is encrypted and cannot be unlocked");
  LC_CHECK_STR(lc_strerror(-ECONNREFUSED), "Connection refused");
  LC_CHECK_STR(lc_err_name(LC_ECANCELED), "LC_ECANCELED");
  LC_CHECK_STR(lc_strerror(LC_ECANCELED), "canceled");
  LC_CHECK(lc_cluster_cancel(NULL) == -EINVAL);
  LC_CHECK_STR(lc_strerror(12345), "unknown error");
  LC_CHECK(lc_error_last() != NULL);
  LC_CHECK(lc__error_set(LC_ECONFIG, "lab%d: bad %s", 3, "thing") == LC_ECONFIG);
  LC_CHECK_STR(lc_error_last(), "lab3: bad thing");
  lc__error_clear();
  LC_CHECK_STR(lc_error_last(), "");
}

static void *other_thread(void *arg) {
  (void)arg;
  lc__error_set(-EINVAL, "from another thread");
  return NULL;
}

static void test_error_detail_is_per_thread(void) {
  pthread_t t;
  lc__error_set(-EIO, "mine");
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  LC_CHECK_STR(lc_error_last(), "mine");
}

static void test_err_carries_across_threads(void) {
  lc__err e = {0};
  LC_CHECK(lc__err_set(&e, LC_EREMOTE, "host %s", "lab1") == LC_EREMOTE);
  LC_CHECK(lc__err_raise(&e) == LC_EREMOTE);
  LC_CHECK_STR(lc_error_last(), "host lab1");
}

/* Runs text with /bin/sh -c and returns its stdout (first 4 KiB). */
static const char *sh_out(const char *text) {
  static char out[4096];
  lc__buf cmd = {0};
  FILE *p;
  size_t n = 0;
  lc__buf_puts(&cmd, "/bin/sh -c ");
  lc__buf_shell_quote(&cmd, text);
  out[0] = '\0';
  if ((p = popen(cmd.data, "r")) != NULL) {
    n = fread(out, 1, sizeof(out) - 1, p);
    pclose(p);
  }
  out[n] = '\0';
  lc__buf_free(&cmd);
  return out;
}

static void test_shell_quote_round_trip(void) {
  static const char *values[] = {"plain",       "two words", "it's",   "'", "''", "$HOME", "`id`",
                                 "back\\slash", "new\nline", "ü∑日本", "*", "",   "a\"b"};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    char *q = NULL;
    lc__buf cmd = {0};
    LC_REQUIRE_OK(lc_shell_quote(&q, values[i]));
    lc__buf_printf(&cmd, "printf '%%s' %s", q);
    LC_CHECK_STR(sh_out(cmd.data), values[i]);
    lc_free(q);
    lc__buf_free(&cmd);
  }
  {
    char *q = NULL;
    LC_CHECK(lc_shell_quote(&q, NULL) == -EINVAL && q == NULL);
  }
}

static void test_buf(void) {
  lc__buf b = {0};
  LC_CHECK_OK(lc__buf_puts(&b, "hello"));
  LC_CHECK_OK(lc__buf_printf(&b, " %d %s", 42, "x"));
  LC_CHECK_STR(b.data, "hello 42 x");
  lc__buf_consume(&b, 6);
  LC_CHECK_STR(b.data, "42 x");
  lc__buf_consume(&b, 100);
  LC_CHECK(b.len == 0 && b.data[0] == '\0');
  for (int i = 0; i < 10000; i++)
    lc__buf_puts(&b, "0123456789");
  LC_CHECK(b.len == 100000);
  lc__buf_free(&b);
  LC_CHECK(b.data == NULL && b.len == 0);
  /* numbers as printf writes them */
  LC_CHECK_OK(lc__buf_put_number(&b, 0, 0));
  LC_CHECK_OK(lc__buf_put_number(&b, ' ', 7));
  LC_CHECK_OK(lc__buf_put_number(&b, ',', 65535));
  LC_CHECK_OK(lc__buf_put_number(&b, ' ', ULONG_MAX));
  {
    char want[64];
    snprintf(want, sizeof(want), "0 7,65535 %lu", ULONG_MAX);
    LC_CHECK_STR(b.data, want);
  }
  lc__buf_free(&b);
  /* fit: the text stays, the slack goes, and the buffer grows again after it */
  lc__buf_fit(&b);
  LC_CHECK(b.data == NULL && b.cap == 0);
  LC_CHECK_OK(lc__buf_puts(&b, "0123456789"));
  LC_CHECK(b.cap == 64);
  lc__buf_fit(&b);
  LC_CHECK(b.cap == 11 && b.len == 10);
  LC_CHECK_STR(b.data, "0123456789");
  LC_CHECK_OK(lc__buf_puts(&b, "abc"));
  LC_CHECK_STR(b.data, "0123456789abc");
  LC_CHECK(b.cap >= 14);
  lc__buf_free(&b);
  /* shell quoting: runs between quotes go whole, each quote becomes '\'' */
  {
    static const struct {
      const char *in, *out;
    } q[] = {{"", "''"},
             {"plain words", "'plain words'"},
             {"'", "''\\'''"},
             {"it's", "'it'\\''s'"},
             {"''a''", "''\\'''\\''a'\\'''\\'''"},
             {"end'", "'end'\\'''"}};
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
      LC_CHECK_OK(lc__buf_puts(&b, "x="));
      LC_CHECK_OK(lc__buf_shell_quote(&b, q[i].in));
      LC_CHECK_STR(b.data + 2, q[i].out);
      lc__buf_free(&b);
    }
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* The login shells a host may have: sshd runs `SHELL -c LINE` with argv[0] the shell's name. */
static const struct {
  const char *path, *argv0;
} shells[] = {{"/bin/sh", "sh"},         {"/bin/bash", "bash"},      {"/usr/bin/zsh", "zsh"},
              {"/usr/bin/ksh", "ksh"},   {"/bin/busybox", "ash"},    {"/usr/bin/fish", "fish"},
              {"/usr/bin/tcsh", "tcsh"}, {"/usr/bin/bsd-csh", "csh"}};

/*
 * Runs what lc__command_compose made as sshd would with SHELL as the login shell: `SHELL -c line`,
 * the script into stdin, and once the mark came on stdout, every `tick` ms the control line
 * `ctl` (NULL: none) for `ticks` times, then `last` (NULL: none), then EOF unless hold is set.
 * Returns the wait status (-1 when it did not end within 30 s, after killing it); stdout after
 * the mark (without a lifeline's pid line) goes to out, stderr after its mark to composed_err.
 * Kept on one line each so the tests below read as a table.
 */
static char composed_err[1024];

/* Reads what fd has now into buf (at most size - 1 bytes in all, NUL-terminated). */
static void read_some(int fd, char *buf, size_t size, size_t *n) {
  ssize_t k;
  while (*n + 1 < size && (k = read(fd, buf + *n, size - 1 - *n)) > 0)
    *n += (size_t)k;
  buf[*n] = '\0';
}

static int run_composed(const char *path, const char *argv0, const lc__buf *line,
                        const lc__buf *script, const char *ctl, int ticks, const char *last,
                        int hold, char *out, size_t outsz) {
  int in[2], o[2], e[2], status = -1;
  size_t n = 0, ne = 0, mark = sizeof(LC__COMMAND_MARK) - 1;
  ssize_t k;
  pid_t pid;

  out[0] = '\0';
  composed_err[0] = '\0';
  if (pipe(in) < 0 || pipe(o) < 0 || pipe(e) < 0 || (pid = fork()) < 0)
    return -1;
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(o[1], 1);
    dup2(e[1], 2);
    close(in[0]), close(in[1]), close(o[0]), close(o[1]), close(e[0]), close(e[1]);
    execl(path, argv0, "-c", line->data, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(o[1]);
  close(e[1]);
  fcntl(e[0], F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);
  if (write(in[1], script->data, script->len) != (ssize_t)script->len)
    goto wait;
  /* the mark, before anything else is written */
  while (n < mark && (k = read(o[0], out + n, mark - n)) > 0)
    n += (size_t)k;
  if (n < mark || memcmp(out, LC__COMMAND_MARK, mark) != 0)
    goto wait;
  n = 0;
  for (int t = 0; ctl != NULL && t < ticks; t++) {
    if (write(in[1], ctl, strlen(ctl)) != (ssize_t)strlen(ctl))
      break;
    sleep_ms(100);
  }
  if (last != NULL && write(in[1], last, strlen(last)) != (ssize_t)strlen(last))
    goto wait;
  if (!hold) {
    close(in[1]);
    in[1] = -1;
  }
wait:
  fcntl(o[0], F_SETFL, O_NONBLOCK);
  for (int i = 0; i < 3000; i++) {
    while (n + 1 < outsz && (k = read(o[0], out + n, outsz - 1 - n)) > 0)
      n += (size_t)k;
    read_some(e[0], composed_err, sizeof(composed_err), &ne);
    if (waitpid(pid, &status, WNOHANG) == pid)
      break;
    status = -1;
    sleep_ms(10);
  }
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  while (n + 1 < outsz && (k = read(o[0], out + n, outsz - 1 - n)) > 0)
    n += (size_t)k;
  out[n] = '\0';
  /* a child of the wrapper may still hold stderr a moment (the watchdog's line): up to 1 s */
  for (int i = 0; i < 100; i++) {
    k = read(e[0], composed_err + ne, sizeof(composed_err) - 1 - ne);
    if (k == 0 || ne + 1 >= sizeof(composed_err))
      break;
    if (k > 0)
      ne += (size_t)k;
    else
      sleep_ms(10);
  }
  composed_err[ne] = '\0';
  close(e[0]);
  if (strncmp(composed_err, LC__COMMAND_MARK, mark) == 0)
    memmove(composed_err, composed_err + mark, strlen(composed_err + mark) + 1);
  /* a lifeline's first line, the group leader's pid (runtime.c takes it), is not the command's */
  if (strncmp(out, LC__COMMAND_PID, sizeof(LC__COMMAND_PID) - 1) == 0) {
    const char *nl = strchr(out, '\n');
    size_t digits = strspn(out + sizeof(LC__COMMAND_PID) - 1, "0123456789");
    if (nl != NULL && digits > 0 && out + sizeof(LC__COMMAND_PID) - 1 + digits == nl)
      memmove(out, nl + 1, strlen(nl + 1) + 1);
  }
  if (in[1] >= 0)
    close(in[1]);
  close(o[0]);
  return status;
}

/*
 * The composed command, in every login shell: env values and cwd arrive intact, and the line the
 * shell runs holds none of them; bad names are refused by name.
 */
/* lc__grow: the growable array every list of the code base uses. */
static void test_grow(void) {
  size_t cap = 0;
  int *v = NULL, *w;
  LC_REQUIRE((v = lc__grow(v, &cap, 1, sizeof(*v), 4)) != NULL);
  LC_CHECK(cap == 4);
  for (int i = 0; i < 4; i++)
    v[i] = i;
  LC_CHECK(lc__grow(v, &cap, 4, sizeof(*v), 4) == v && cap == 4); /* room: itself */
  LC_REQUIRE((w = lc__grow(v, &cap, 5, sizeof(*v), 4)) != NULL);
  v = w;
  LC_CHECK(cap == 8 && v[3] == 3); /* doubled, kept */
  LC_REQUIRE((w = lc__grow(v, &cap, 100, sizeof(*v), 4)) != NULL);
  v = w;
  LC_CHECK(cap == 128 && v[0] == 0 && v[3] == 3); /* doubled until need */
  /* too large: NULL, items and cap as they were */
  LC_CHECK(lc__grow(v, &cap, SIZE_MAX / 2, sizeof(*v), 4) == NULL && cap == 128 && v[3] == 3);
  LC_CHECK(lc__grow(v, &cap, SIZE_MAX, 1, 4) == NULL && cap == 128);
  free(v);
  cap = 0; /* first 0: starts at one */
  LC_REQUIRE((v = lc__grow(NULL, &cap, 3, sizeof(*v), 0)) != NULL);
  LC_CHECK(cap == 4);
  free(v);
}

/* The mesh relay's log (what a cluster listened on through which host's relay): drops by port,
 * on one host or all, and from a mark, keep the other entries in their order. Runtimes without
 * a relay: the log alone (meshrelay.c tells no helper then). */
static int is_entry(const lc__relaylog *log, size_t i, const lc_runtime *rt, int port) {
  return i < log->n && lc__relaylog_rt(log, i) == rt && log->port[i] == port;
}

static void test_relaylog(void) {
  lc_runtime *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
  lc__relaylog log = {0};
  const int p25[] = {2, 5}, p3[] = {3};
  LC_REQUIRE(a != NULL && b != NULL);
  for (int k = 0; k < 8; k++) /* a: 1 2 3, then b: 4 5 1 2 3 */
    LC_REQUIRE_OK(lc__relaylog_add(&log, k < 3 ? a : b, k < 5 ? k + 1 : k - 4));
  LC_CHECK(log.nrun == 2 && lc__relaylog_rt(&log, 2) == a && lc__relaylog_rt(&log, 3) == b);
  /* 2 and 5 on every host: a 1 3, b 4 1 3 */
  lc__relaylog_drop_ports(&log, p25, 2, NULL);
  LC_REQUIRE(log.n == 5);
  LC_CHECK(is_entry(&log, 0, a, 1) && is_entry(&log, 1, a, 3));
  LC_CHECK(is_entry(&log, 2, b, 4) && is_entry(&log, 3, b, 1) && is_entry(&log, 4, b, 3));
  /* 3 on a alone: a 1, b 4 1 3 */
  lc__relaylog_drop_ports(&log, p3, 1, a);
  LC_REQUIRE(log.n == 4);
  LC_CHECK(is_entry(&log, 0, a, 1) && is_entry(&log, 1, b, 4) && is_entry(&log, 3, b, 3));
  lc__relaylog_drop_ports(&log, p3, 0, NULL); /* no ports: nothing */
  LC_CHECK(log.n == 4);
  lc__relaylog_drop(&log, 2); /* from a mark: a 1, b 4 */
  LC_CHECK(log.n == 2 && log.nrun == 2 && is_entry(&log, 1, b, 4));
  /* a 1, b 4, a 7, b 8 (four runs): without a, one run of b; a again makes a new run */
  LC_REQUIRE_OK(lc__relaylog_add(&log, a, 7));
  LC_REQUIRE_OK(lc__relaylog_add(&log, b, 8));
  lc__relaylog_drop_ports(&log, (const int[]){1, 7}, 2, a); /* b 4, b 8: one run */
  LC_CHECK(log.n == 2 && log.nrun == 1 && is_entry(&log, 0, b, 4) && is_entry(&log, 1, b, 8));
  LC_REQUIRE_OK(lc__relaylog_add(&log, a, 9));
  lc__relaylog_drop(&log, 1); /* from inside b's run: b 4 */
  LC_CHECK(log.n == 1 && log.nrun == 1 && is_entry(&log, 0, b, 4));
  LC_REQUIRE_OK(lc__relaylog_add(&log, a, 65535)); /* the highest port fits */
  LC_CHECK(log.nrun == 2 && is_entry(&log, 1, a, 65535));
  lc__relaylog_free(&log);
  LC_CHECK(log.n == 0);
  free(a);
  free(b);
}

static void test_compose(void) {
  const char *env[] = {"A=x y", "B=it's $HOME", "C=", "D=secret-token", NULL};
  lc_exec_options o = LC_EXEC_OPTIONS_INIT;
  lc__buf line = {0}, script = {0};
  lc__err err = {0};
  char out[256];
  o.env = env;
  o.cwd = "/";
  o.label = "worker-5 'x'";
  LC_REQUIRE_OK(lc__command_compose(&line, &script, "printf '%s|%s|%s|' \"$A\" \"$B\" \"$C\"; pwd",
                                    &o, -1, 0, "printf 'S:%s|' \"$A\"", NULL, "lab3", &err));
  LC_CHECK_STR(line.data, "exec /bin/sh -s lc-run lab3 worker-5__x_");
  for (size_t i = 0; i < LC_ARRAY_SIZE(shells); i++) {
    int st = run_composed(shells[i].path, shells[i].argv0, &line, &script, NULL, 0, NULL, 0, out,
                          sizeof(out));
    LC_CHECK_STR(out, "S:x y|x y|it's $HOME||/\n");
    LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  lc__buf_free(&line);
  lc__buf_free(&script);
  LC_REQUIRE_OK(lc__command_compose(&line, &script, "true", &o, 15, 100, NULL, NULL, "lab3", &err));
  LC_CHECK_STR(line.data, "exec /bin/sh -s lc-lifeline lab3 worker-5__x_");
  LC_CHECK(strstr(line.data, "secret") == NULL);
  lc__buf_free(&line);
  lc__buf_free(&script);
  /* in two parts: the wrapper is a head that every lifeline shares (one pointer, never copied
   * into a process's stdin), and head + rest is the script above */
  {
    const char *h1 = NULL, *h2 = NULL;
    size_t n1 = 0, n2 = 0;
    lc__buf l1 = {0}, r1 = {0}, l2 = {0}, r2 = {0};
    LC_REQUIRE_OK(
        lc__command_compose(&line, &script, "true", &o, 15, 100, NULL, NULL, "lab3", &err));
    LC_REQUIRE_OK(lc__command_compose_parts(&l1, &h1, &n1, &r1, "true", &o, 15, 100, NULL, NULL,
                                            "lab3", &err));
    LC_REQUIRE_OK(lc__command_compose_parts(&l2, &h2, &n2, &r2, "false", NULL, 20, 100, NULL, NULL,
                                            "lab4", &err));
    LC_CHECK(h1 == h2 && n1 == n2 && n1 > 3000);
    LC_CHECK(script.len == n1 + r1.len && memcmp(script.data, h1, n1) == 0 &&
             memcmp(script.data + n1, r1.data, r1.len) == 0);
    LC_CHECK(strstr(r1.data, "lc_sweep") == NULL && r1.len < 1000); /* its own part is small */
    LC_CHECK_STR(l1.data, line.data);
    lc__buf_free(&l1);
    lc__buf_free(&r1);
    lc__buf_free(&l2);
    lc__buf_free(&r2);
    lc__buf_free(&line);
    lc__buf_free(&script);
  }
  {
    const char *bad[] = {"NOEQUALS", NULL};
    o.env = bad;
    LC_CHECK(lc__command_compose(&line, &script, "true", &o, -1, 0, NULL, NULL, "h", &err) ==
             -EINVAL);
    LC_CHECK_CONTAINS(err.msg, "NOEQUALS");
    lc__buf_free(&line);
    lc__buf_free(&script);
  }
  {
    const char *bad[] = {"A-B=1", NULL};
    o.env = bad;
    LC_CHECK(lc__command_compose(&line, &script, "true", &o, -1, 0, NULL, NULL, "h", &err) ==
             -EINVAL);
    LC_CHECK_CONTAINS(err.msg, "A-B=1");
    lc__buf_free(&line);
    lc__buf_free(&script);
  }
}

/* The lifeline with stdin at EOF right after the script: the command is ended. */
static void test_lifeline_ends_on_eof(void) {
  lc__buf line = {0}, script = {0};
  lc__err err = {0};
  char out[64];
  int st;
  LC_REQUIRE_OK(lc__command_compose(&line, &script, "sleep 5; echo not-reached", NULL, 0, 100, NULL,
                                    NULL, "h", &err));
  st = run_composed("/bin/sh", "sh", &line, &script, NULL, 0, NULL, 0, out, sizeof(out));
  LC_CHECK_STR(out, "");
  LC_CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  LC_CHECK_STR(composed_err, ""); /* no watchdog here (limit 0), and an EOF says nothing */
  lc__buf_free(&line);
  lc__buf_free(&script);
}

/* Runs the lifeline around COMMAND with a heartbeat limit of 1 s (see run_composed). */
static int run_lifeline(size_t shell, const char *command, int heartbeats, int stop, char *out,
                        size_t outsz) {
  lc__buf line = {0}, script = {0};
  lc__err err = {0};
  int st = -1;
  if (lc__command_compose(&line, &script, command, NULL, 1, 100, NULL, NULL, "h", &err) == 0)
    st = run_composed(shells[shell].path, shells[shell].argv0, &line, &script, "h\n", heartbeats,
                      stop ? "s\n" : NULL, 1, out, outsz);
  lc__buf_free(&line);
  lc__buf_free(&script);
  return st;
}

/*
 * The lifeline under every login shell: heartbeats keep the command alive past the limit; without
 * them it is ended within four thirds of the limit (whole seconds), long before it would have
 * written; "s" stops it; either way the wrapper reports the SIGTERM that ended the command. The
 * wrapper runs in /bin/sh whatever the login shell, so the timed cases (7 s) run under sh and
 * bash, the quick ones under every shell.
 */
static void test_lifeline_heartbeat_in_every_shell(void) {
  char out[256];
  for (size_t i = 0; i < LC_ARRAY_SIZE(shells); i++) {
    int st;
    if (access(shells[i].path, X_OK) != 0) {
      fprintf(stderr, "  %s is not installed (bash .ci/deps installs it)\n", shells[i].path);
      LC_CHECK(!"a login shell is missing");
      continue;
    }
    if (i < 2) {
      st = run_lifeline(i, "sleep 2.5; echo alive; exec sleep 30", 30, 1, out, sizeof(out));
      LC_CHECK_STR(out, "alive\n");
      LC_CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
      LC_CHECK_STR(composed_err, ""); /* a stop says nothing */
      st = run_lifeline(i, "sleep 6; echo alive; exec sleep 30", 0, 0, out, sizeof(out));
      LC_CHECK_STR(out, "");
      LC_CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
      /* the watchdog says why, on the channel's stderr, after what the command wrote there */
      LC_CHECK_STR(composed_err,
                   "lc-lifeline: no heartbeat for over 1 s (the program that started this command "
                   "is gone, stopped or cut off from this host): ending the command\n");
      st = run_lifeline(i, "echo err-first >&2; exec sleep 30", 0, 0, out, sizeof(out));
      LC_CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
      LC_CHECK(strncmp(composed_err, "err-first\nlc-lifeline: no heartbeat for over 1 s", 48) == 0);
    }
    st = run_lifeline(i, "echo started; exec sleep 30", 3, 1, out, sizeof(out));
    LC_CHECK_STR(out, "started\n");
    LC_CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    st = run_lifeline(i, "exit 3", 0, 0, out, sizeof(out));
    LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3);
  }
}

/*
 * A lifeline with input (lc_exec_options.input), under every login shell: "dTEXT" control lines
 * reach the command's stdin as TEXT lines, byte for byte (blanks, backslashes, quotes, $(...),
 * tabs, control-line look-alikes), "e" gives it EOF, and it ends by itself with its own status;
 * the FIFO's directory under $TMPDIR is gone.
 */
static void test_lifeline_input(void) {
  static const char sent[] = "dhello\n"
                             "d  two  blanks\t\n"
                             "da\\b\\\\c \"q\" 'q' $(echo no) `echo no` $HOME\n"
                             "d\n"
                             "ds\n"
                             "de\n"
                             "h\n"
                             "dlast\n"
                             "e\n";
  static const char want[] = "[hello]\n"
                             "[  two  blanks\t]\n"
                             "[a\\b\\\\c \"q\" 'q' $(echo no) `echo no` $HOME]\n"
                             "[]\n"
                             "[s]\n"
                             "[e]\n"
                             "[last]\n"
                             "eof 7\n";
  lc_exec_options o = LC_EXEC_OPTIONS_INIT;
  lc__buf line = {0}, script = {0};
  lc__err err = {0};
  char tmp[] = "/tmp/lc-core-input-XXXXXX", out[512], *old = getenv("TMPDIR");
  char *saved = old != NULL ? strdup(old) : NULL;
  o.input = 1;
  LC_REQUIRE(mkdtemp(tmp) != NULL);
  setenv("TMPDIR", tmp, 1);
  LC_REQUIRE_OK(lc__command_compose(&line, &script,
                                    "n=0; while IFS= read -r l; do n=$((n+1)); "
                                    "printf '[%s]\\n' \"$l\"; done; echo \"eof $n\"; exit 4",
                                    &o, 15, 100, NULL, NULL, "h", &err));
  LC_CHECK_CONTAINS(script.data, "lc_input=1");
  for (size_t i = 0; i < LC_ARRAY_SIZE(shells); i++) {
    int st = run_composed(shells[i].path, shells[i].argv0, &line, &script, NULL, 0, sent, 1, out,
                          sizeof(out));
    LC_CHECK_STR(out, want);
    LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 4);
    LC_CHECK(rmdir(tmp) == 0); /* empty: the FIFO's directory went */
    LC_REQUIRE(mkdir(tmp, 0700) == 0);
  }
  rmdir(tmp);
  if (saved != NULL)
    setenv("TMPDIR", saved, 1);
  else
    unsetenv("TMPDIR");
  free(saved);
  lc__buf_free(&line);
  lc__buf_free(&script);
}

static void test_transfer_scripts(void) {
  lc__buf b = {0};
  LC_REQUIRE_OK(lc__command_write_file(&b, "~/dir/it's", 12, 0640, 0));
  LC_CHECK_CONTAINS(b.data, "f=\"$HOME\"/'dir/it'\\''s'");
  LC_CHECK_CONTAINS(b.data, "-ne 12 ]");
  LC_CHECK_CONTAINS(b.data, "chmod 640");
  lc__buf_free(&b);
  LC_REQUIRE_OK(lc__command_get_file(&b, "/etc/hostname"));
  LC_CHECK_CONTAINS(b.data, "f='/etc/hostname'");
  lc__buf_free(&b);
  {
    lc__buf cleanup = {0};
    LC_REQUIRE_OK(lc__command_workdir(&b, &cleanup, NULL, "h-1", 0));
    LC_CHECK_CONTAINS(b.data, "XDG_CACHE_HOME");
    LC_CHECK_CONTAINS(cleanup.data, "rm -rf -- ");
    LC_CHECK_CONTAINS(cleanup.data, "/'h-1'");
    lc__buf_free(&cleanup);
  }
  lc__buf_free(&b);
}

/*
 * Runs the script that writes a file (lc__command_write_file) for "$dir/target" with /bin/sh,
 * with a symlink planted first at the temporary name a script could predict from its pid
 * ("$f.lc-tmp.$$": the child's pid is known before it execs sh), pointing at "$dir/victim".
 * path_dir, when not NULL, is the only PATH (without mktemp: the noclobber fallback). Returns
 * the script's exit status.
 */
static int write_with_planted_link(const char *dir, const char *path_dir) {
  char target[512], victim[512], link[600];
  lc__buf script = {0};
  int go[2], in[2], status = -1;
  pid_t pid;
  snprintf(target, sizeof(target), "%s/target", dir);
  snprintf(victim, sizeof(victim), "%s/victim", dir);
  if (lc__command_write_file(&script, target, 4, 0644, 0) < 0 ||
      lc__buf_append(&script, "", 1) < 0 || pipe(go) < 0 || pipe(in) < 0) {
    lc__buf_free(&script);
    return -1;
  }
  if ((pid = fork()) == 0) {
    char c;
    dup2(in[0], 0);
    close(in[1]);
    close(go[1]);
    if (read(go[0], &c, 1) != 1)
      _exit(99);
    if (path_dir != NULL)
      setenv("PATH", path_dir, 1);
    execl("/bin/sh", "sh", "-c", script.data, (char *)NULL);
    _exit(98);
  }
  close(in[0]);
  close(go[0]);
  snprintf(link, sizeof(link), "%s.lc-tmp.%ld", target, (long)pid);
  LC_CHECK(symlink(victim, link) == 0);
  LC_CHECK(write(go[1], "g", 1) == 1);
  LC_CHECK(write(in[1], "new\n", 4) == 4);
  close(in[1]);
  close(go[1]);
  waitpid(pid, &status, 0);
  unlink(link);
  lc__buf_free(&script);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A symlink planted at a predictable temporary name redirects no write: with mktemp the write
 * goes to a new file of a random name, without it the noclobber fallback refuses. */
static void test_write_file_planted_symlink(void) {
  char dir[] = "/tmp/lc-test-plant.XXXXXX", victim[512], target[512], bin[600], cmd[2048];
  char buf[64] = "";
  FILE *f;
  struct stat st;
  LC_REQUIRE(mkdtemp(dir) != NULL);
  snprintf(victim, sizeof(victim), "%s/victim", dir);
  snprintf(target, sizeof(target), "%s/target", dir);
  snprintf(bin, sizeof(bin), "%s/bin", dir);
  LC_REQUIRE((f = fopen(victim, "w")) != NULL);
  fputs("old\n", f);
  fclose(f);
  LC_CHECK(write_with_planted_link(dir, NULL) == 0);
  LC_REQUIRE((f = fopen(victim, "r")) != NULL);
  LC_CHECK(fgets(buf, sizeof(buf), f) != NULL);
  fclose(f);
  LC_CHECK_STR(buf, "old\n");
  LC_REQUIRE((f = fopen(target, "r")) != NULL);
  LC_CHECK(fgets(buf, sizeof(buf), f) != NULL);
  fclose(f);
  LC_CHECK_STR(buf, "new\n");
  LC_CHECK(lstat(target, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644);
  unlink(target);
  /* no mktemp on PATH: the fallback's name is the predictable one, and it refuses */
  snprintf(cmd, sizeof(cmd),
           "mkdir '%s' && for t in cat wc chmod mv rm; do ln -s \"$(command -v $t)\" '%s'/$t; "
           "done",
           bin, bin);
  LC_REQUIRE(system(cmd) == 0);
  LC_CHECK(write_with_planted_link(dir, bin) != 0);
  LC_REQUIRE((f = fopen(victim, "r")) != NULL);
  LC_CHECK(fgets(buf, sizeof(buf), f) != NULL);
  fclose(f);
  LC_CHECK_STR(buf, "old\n");
  LC_CHECK(access(target, F_OK) != 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  LC_CHECK(system(cmd) == 0);
}

/* Runs the gzip form of the write script (lc__command_write_file, gz) for path with /bin/sh, in
 * as stdin, PATH path_env when not NULL; its exit status, the start of its stderr in err. */
static int write_gz_script(const char *path, const lc__buf *in, uint64_t unpacked,
                           const char *path_env, char *err, size_t err_size) {
  lc__buf script = {0};
  int fd_in[2], fd_err[2], status = -1;
  ssize_t n;
  pid_t pid;
  err[0] = '\0';
  if (lc__command_write_file(&script, path, unpacked, 0640, 1) < 0 || pipe(fd_in) < 0 ||
      pipe(fd_err) < 0) {
    lc__buf_free(&script);
    return -1;
  }
  if ((pid = fork()) == 0) {
    dup2(fd_in[0], 0);
    dup2(fd_err[1], 2);
    close(fd_in[1]);
    close(fd_err[0]);
    if (path_env != NULL)
      setenv("PATH", path_env, 1);
    execl("/bin/sh", "sh", "-c", script.data, (char *)NULL);
    _exit(98);
  }
  close(fd_in[0]);
  close(fd_err[1]);
  signal(SIGPIPE, SIG_IGN); /* a script that gives up early reads no more */
  for (size_t done = 0; done < in->len; done += (size_t)n)
    if ((n = write(fd_in[1], in->data + done, in->len - done)) <= 0)
      break;
  close(fd_in[1]);
  for (size_t got = 0; got < err_size - 1; got += (size_t)n) { /* until EOF: writes come apart */
    if ((n = read(fd_err[0], err + got, err_size - 1 - got)) <= 0)
      break;
    err[got + (size_t)n] = '\0';
  }
  close(fd_err[0]);
  waitpid(pid, &status, 0);
  signal(SIGPIPE, SIG_DFL);
  lc__buf_free(&script);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Files in dir (the target and any temporary file left). */
static int files_in(const char *dir) {
  char cmd[600], line[64] = "";
  FILE *p;
  snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
  if ((p = popen(cmd, "r")) == NULL)
    return -1;
  if (fgets(line, sizeof(line), p) == NULL)
    line[0] = '\0';
  pclose(p);
  return atoi(line);
}

/*
 * A cluster's context in gzip's format (lc__buf_gzip) and the script that unpacks it on a host:
 * 300 KB of a context's text packs to a fraction and comes out whole, 0640; a corrupt stream, a
 * cut one, a wrong size and a host whose gzip cannot run (not found: exit 3, said on stderr)
 * each write nothing and leave no temporary file.
 */
static void test_write_gz(void) {
  char dir[] = "/tmp/lc-test-gz.XXXXXX", target[512], bin[600], cmd[2048], err[512];
  lc__buf text = {0}, gz = {0}, cut = {0}, back = {0};
  struct stat st;
  FILE *f;
  LC_REQUIRE(mkdtemp(dir) != NULL);
  snprintf(target, sizeof(target), "%s/cluster-context", dir);
  for (int i = 0; i < 4000; i++)
    lc__buf_printf(&text, "%s{\"index\":%d,\"host\":\"gpu-node-%03d\",\"port\":%d,\"gpu\":%d}",
                   i ? "," : "[", i, i / 8, 61000 + i, i % 8);
  lc__buf_puts(&text, "]\n");
  LC_REQUIRE_OK(lc__buf_gzip(&gz, text.data, text.len));
  LC_CHECK(gz.len > 0 && gz.len * 5 < text.len);
  LC_CHECK(write_gz_script(target, &gz, text.len, NULL, err, sizeof(err)) == 0);
  LC_CHECK(stat(target, &st) == 0 && (size_t)st.st_size == text.len &&
           (st.st_mode & 07777) == 0640);
  if ((f = fopen(target, "r")) != NULL) {
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
      lc__buf_append(&back, chunk, n);
    fclose(f);
  }
  LC_CHECK(back.len == text.len && memcmp(back.data, text.data, text.len) == 0);
  LC_CHECK(files_in(dir) == 1);
  unlink(target);
  /* corrupt: gzip's magic broken */
  gz.data[0] ^= 0x55;
  LC_CHECK(write_gz_script(target, &gz, text.len, NULL, err, sizeof(err)) == 1);
  LC_CHECK_CONTAINS(err, "gzip");
  gz.data[0] ^= 0x55;
  LC_CHECK(files_in(dir) == 0);
  /* cut short: half the stream */
  lc__buf_append(&cut, gz.data, gz.len / 2);
  LC_CHECK(write_gz_script(target, &cut, text.len, NULL, err, sizeof(err)) == 1);
  LC_CHECK(files_in(dir) == 0);
  /* whole, but not the size the file should have */
  LC_CHECK(write_gz_script(target, &gz, text.len + 1, NULL, err, sizeof(err)) == 1);
  LC_CHECK_CONTAINS(err, "transfer cut short");
  LC_CHECK(files_in(dir) == 0);
  /* no gzip on PATH (the other tools the script needs are there) */
  snprintf(bin, sizeof(bin), "%s-bin", dir);
  snprintf(cmd, sizeof(cmd),
           "mkdir '%s' && for t in mktemp wc chmod mv rm; do ln -s \"$(command -v $t)\" '%s'/$t; "
           "done",
           bin, bin);
  LC_REQUIRE(system(cmd) == 0);
  LC_CHECK(write_gz_script(target, &gz, text.len, bin, err, sizeof(err)) == 3);
  LC_CHECK_CONTAINS(err, "gzip cannot run here");
  LC_CHECK(files_in(dir) == 0);
  /* a gzip that is there but cannot run (not executable) */
  snprintf(cmd, sizeof(cmd), "touch '%s/gzip' && chmod 644 '%s/gzip'", bin, bin);
  LC_REQUIRE(system(cmd) == 0);
  LC_CHECK(write_gz_script(target, &gz, text.len, bin, err, sizeof(err)) == 3);
  LC_CHECK(files_in(dir) == 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, bin);
  LC_CHECK(system(cmd) == 0);
  lc__buf_free(&text);
  lc__buf_free(&gz);
  lc__buf_free(&cut);
  lc__buf_free(&back);
}

static void test_signal_names(void) {
  LC_CHECK(lc__signal_from_name("KILL") == SIGKILL);
  LC_CHECK(lc__signal_from_name("SIGTERM") == SIGTERM);
  LC_CHECK(lc__signal_from_name("SEGV") == SIGSEGV);
  LC_CHECK(lc__signal_from_name("NOPE") == 0);
  LC_CHECK(lc__signal_from_name(NULL) == 0);
}

static void test_engine_start_stop(void) {
  for (int i = 0; i < 20; i++) {
    lc_engine *e = NULL;
    LC_REQUIRE_OK(lc_engine_new(&e, NULL));
    lc_engine_free(e);
  }
  lc_engine_free(NULL);
}

/*
 * What a runtime is comes from its backend's ops table, chosen by the backend's constructor:
 * the local one runs on this machine, an SSH one (settings read, never connected) does not.
 */
/*
 * A backend whose kick ends its process at once, and processes whose owner lets go of them as
 * they end (on_finish, as the job queue does): a heartbeat's kick then frees the process it
 * kicked. One heartbeat reaches every process (at its first kick, every process's stdin ends
 * with the heartbeat's line), and the walk of the list never reads a freed one (it did: the walk
 * stopped at the first freed process, the others missed that heartbeat, and AddressSanitizer
 * would report a heap-use-after-free; ThreadSanitizer saw it in CI).
 */
static int kicked_ends;   /* atomic: written on the engine thread */
static int reached_first; /* atomic: processes with a heartbeat waiting, at the first kick */
static void kicker_connect(lc_runtime *rt) { lc__runtime_connected(rt, NULL); }
static void kicker_start(lc_process *p) { p->backend = &kicked_ends; }
static void kicker_end(lc_process *p) {
  if (p->backend != NULL) {
    p->backend = NULL;
    lc__proc_closed(p, NULL);
  }
}
static void kicker_kick(lc_process *p) {
  if (__atomic_load_n(&kicked_ends, __ATOMIC_RELAXED) == 0) {
    int n = 0;
    for (const lc_process *q = p->rt->procs; q != NULL; q = q->next)
      n += q->in.len >= 2 && memcmp(q->in.data + q->in.len - 2, "h\n", 2) == 0;
    __atomic_store_n(&reached_first, n, __ATOMIC_RELAXED);
  }
  if (p->backend != NULL)
    __atomic_add_fetch(&kicked_ends, 1, __ATOMIC_RELAXED);
  kicker_end(p);
}
static void kicker_close(lc_runtime *rt, void (*done)(lc_runtime *rt)) { done(rt); }
static const lc__backend_ops kicker_ops = {
    .name = "kicker",
    .connect = kicker_connect,
    .proc_start = kicker_start,
    .proc_kick = kicker_kick,
    .proc_abort = kicker_end,
    .close = kicker_close,
};
static void let_go(lc_process *p, void *arg) {
  (void)arg;
  lc__proc_release(p);
}
typedef struct launch_call {
  lc__call call;
  lc_process **ps;
  int n;
} launch_call;
static void launch_fn(lc__call *c) {
  launch_call *l = (launch_call *)c;
  for (int i = 0; i < l->n; i++) {
    l->ps[i]->on_finish = let_go;
    if (lc__proc_launch(l->ps[i], &c->err) < 0) {
      lc__call_done(c, c->err.code);
      return;
    }
  }
  lc__call_done(c, 0);
}
static void test_heartbeat_kick_ends(void) {
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  lc_engine *e = NULL;
  lc_runtime *rt = NULL;
  lc_process *ps[5] = {0};
  launch_call l = {.ps = ps, .n = 5};
  int ended = 0;
  o.heartbeat_timeout_ms = 600; /* a heartbeat every 200 ms */
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  LC_REQUIRE_OK(lc__runtime_make(&rt, &kicker_ops, e, "kicker", NULL, &o, 1));
  for (int i = 0; i < 5; i++)
    LC_REQUIRE_OK(lc__proc_new(&ps[i], rt, "true", NULL, 1, NULL, NULL));
  LC_REQUIRE_OK(lc__engine_run(e, &l.call, launch_fn));
  for (int t = 0; t < 100 && ended < 5; t++) {
    usleep(50 * 1000);
    ended = __atomic_load_n(&kicked_ends, __ATOMIC_RELAXED);
  }
  fprintf(stderr,
          "  %d of 5 processes ended by a heartbeat's kick; the first heartbeat reached %d\n",
          ended, __atomic_load_n(&reached_first, __ATOMIC_RELAXED));
  LC_CHECK(ended == 5);
  LC_CHECK(__atomic_load_n(&reached_first, __ATOMIC_RELAXED) == 5);
  lc_runtime_free(rt);
  lc_engine_free(e);
}

static void test_backend_caps(void) {
  char config[] = "/tmp/lc-test-caps-XXXXXX";
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  lc_engine *e = NULL;
  lc_runtime *local = NULL, *ssh = NULL;
  int fd = mkstemp(config);
  LC_REQUIRE(fd >= 0);
  LC_REQUIRE(write(fd, "Host capstest\n  HostName 127.0.0.1\n  Port 1\n", 44) == 44);
  close(fd);
  o.ssh_config = config;
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  LC_REQUIRE_OK(lc_runtime_new_local(&local, e, NULL));
  LC_CHECK(lc__runtime_on_this_machine(local));
  LC_REQUIRE_OK(lc__runtime_prepare_ssh(&ssh, e, "capstest", &o));
  LC_CHECK(!lc__runtime_on_this_machine(ssh));
  lc__runtime_discard(ssh);
  lc_runtime_free(local);
  lc_engine_free(e);
  unlink(config);
}

/*
 * Runs the lifeline's sweep alone in /bin/sh: a process carrying LC_LIFELINE=<the shell's pid>
 * (as one that left the command's group would) gets the signal, one carrying another value does
 * not, and a sweep that finds nothing says so; "all=" tells which path the first sweep took.
 * started is what the wrapper would have read from /proc/uptime: "now", "ago" (1.5 s before
 * now) or "" (unknown). pid_max is the content of the file read for the sysctl (NULL: the real
 * one; "-": a file that is not there).
 */
static void sweep_alone(const char *started, const char *pid_max, char *out, size_t outsz) {
  char file[] = "/tmp/lc-pid-max-XXXXXX";
  lc__buf script = {0};
  FILE *f;
  size_t n = 0;
  int fd = -1;
  out[0] = '\0';
  if (pid_max != NULL && (fd = mkstemp(file)) >= 0) {
    if (write(fd, pid_max, strlen(pid_max)) != (ssize_t)strlen(pid_max))
      fprintf(stderr, "  cannot write %s\n", file);
    close(fd);
    if (strcmp(pid_max, "-") == 0)
      unlink(file);
  }
  if (lc__buf_puts(&script, lc__command_lifeline_sweep()) < 0 ||
      (pid_max != NULL && lc__buf_printf(&script, "lc_pid_max_file=%s\n", file) < 0) ||
      lc__buf_printf(&script,
                     "LC_LIFELINE=$$ sleep 5 & marked=$!\n"
                     "LC_LIFELINE=other sleep 30 & unmarked=$!\n"
                     /* both have exec'd (their environ is their own) before the sweep looks */
                     "i=0; until grep -qzx \"LC_LIFELINE=$$\" /proc/$marked/environ &&\n"
                     "  grep -qzx LC_LIFELINE=other /proc/$unmarked/environ; do\n"
                     "  i=$((i+1)); [ $i -gt 200 ] && break; sleep 0.05; done\n"
                     "lc_started=%s\n"
                     "[ \"$lc_started\" = now ] && read -r lc_started _ </proc/uptime\n"
                     "if [ \"$lc_started\" = ago ]; then read -r lc_now _ </proc/uptime\n"
                     "  lc_t=$((${lc_now%%.*}${lc_now#*.} - 150))\n"
                     "  lc_started=$((lc_t / 100)).$((lc_t %% 100 / 10))$((lc_t %% 10)); fi\n"
                     "lc_sweep TERM 2>/dev/null; echo \"swept=$? all=$lc_swept_all\"\n"
                     "wait $marked; echo \"marked=$?\"\n"
                     "kill -0 $unmarked && echo unmarked=alive\n"
                     "kill $unmarked; wait $unmarked 2>/dev/null\n"
                     "lc_sweep TERM 2>/dev/null; echo \"again=$?\"\n",
                     started) < 0 ||
      lc__buf_append(&script, "", 1) < 0) {
    lc__buf_free(&script);
    return;
  }
  if ((f = popen(script.data, "r")) != NULL) {
    n = fread(out, 1, outsz - 1, f);
    pclose(f);
  }
  out[n] = '\0';
  if (pid_max != NULL)
    unlink(file);
  lc__buf_free(&script);
}

/* The sweep of the lifeline, on both of its paths, on its own (not through a whole wrapper):
 * the PIDs made since the wrapper while no lap of PIDs can have passed (pid_max's), else all. */
static void test_lifeline_sweep_alone(void) {
  static const struct {
    const char *started, *pid_max, *want;
  } cases[] = {
      {"now", NULL, "swept=0 all=0\nmarked=143\nunmarked=alive\nagain=1\n"},
      {"", NULL, "swept=0 all=1\nmarked=143\nunmarked=alive\nagain=1\n"},
      /* 1.5 s: past a lap at pid_max 32768 (0.13 s), within one at 4194304 (16.7 s) */
      {"ago", "4194304\n", "swept=0 all=0\nmarked=143\nunmarked=alive\nagain=1\n"},
      {"ago", "32768\n", "swept=0 all=1\nmarked=143\nunmarked=alive\nagain=1\n"},
      /* unreadable or not a number: 32768, the smallest default */
      {"ago", "-", "swept=0 all=1\nmarked=143\nunmarked=alive\nagain=1\n"},
      {"ago", "lots\n", "swept=0 all=1\nmarked=143\nunmarked=alive\nagain=1\n"},
  };
  char out[256];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    sweep_alone(cases[i].started, cases[i].pid_max, out, sizeof(out));
    LC_CHECK_STR(out, cases[i].want);
  }
}

/* The script's shared head and the start of the script go out together (lc__proc_in_gather),
 * within the gate while the host's sh has not read the script; a write cut short takes the head
 * first; once the head is out, stdin is peeked as before, and data after the script waits for
 * the mark (go). */
static void test_stdin_gather(void) {
  static char head[3000];
  char buf[3584], script[1000];
  const char *data;
  lc_process p;
  memset(&p, 0, sizeof(p));
  memset(head, 'h', sizeof(head));
  memset(script, 's', sizeof(script));
  p.in_fd = -1;
  p.in_head = head;
  p.in_head_left = sizeof(head);
  LC_REQUIRE_OK(lc__buf_append(&p.in, script, sizeof(script)));
  LC_REQUIRE_OK(lc__buf_append(&p.in, "dddd", 4)); /* a line sent before the mark */
  p.in_gate = sizeof(head) + sizeof(script);
  /* a packet smaller than the head: the head alone */
  LC_CHECK(lc__proc_in_gather(&p, buf, 1000) == 1000);
  LC_CHECK(lc__proc_in_gather(&p, buf, sizeof(buf)) == sizeof(buf));
  LC_CHECK(buf[2999] == 'h' && buf[3000] == 's' && buf[3583] == 's');
  lc__proc_in_consume(&p, 3484); /* the socket took less: the head, then 484 of the script */
  LC_CHECK(p.in_head_left == 0 && p.in.len == 1000 - 484 + 4 && p.in_gate == 516);
  LC_CHECK(lc__proc_in_gather(&p, buf, sizeof(buf)) == 0);
  LC_CHECK(lc__proc_in_peek(&p, &data) == 516 && data[0] == 's' && data[515] == 's');
  lc__proc_in_consume(&p, 516);
  LC_CHECK(lc__proc_in_peek(&p, &data) == 0); /* the line waits for the mark */
  p.go = 1;
  LC_CHECK(lc__proc_in_peek(&p, &data) == 4 && memcmp(data, "dddd", 4) == 0);
  lc__proc_in_consume(&p, 4);
  LC_CHECK(lc__proc_in_peek(&p, &data) == 0);
  /* after the mark nothing gates the script's start */
  p.in_head = head;
  p.in_head_left = 10;
  LC_REQUIRE_OK(lc__buf_append(&p.in, script, 20));
  LC_CHECK(lc__proc_in_gather(&p, buf, sizeof(buf)) == 30);
  lc__buf_free(&p.in);
}

LC_TEST_MAIN(LC_TEST(test_heartbeat_kick_ends), LC_TEST(test_error_names_and_texts),
             LC_TEST(test_error_detail_is_per_thread), LC_TEST(test_err_carries_across_threads),
             LC_TEST(test_shell_quote_round_trip), LC_TEST(test_buf), LC_TEST(test_grow),
             LC_TEST(test_relaylog), LC_TEST(test_compose), LC_TEST(test_lifeline_ends_on_eof),
             LC_TEST(test_lifeline_heartbeat_in_every_shell), LC_TEST(test_lifeline_input),
             LC_TEST(test_transfer_scripts), LC_TEST(test_write_file_planted_symlink),
             LC_TEST(test_write_gz), LC_TEST(test_signal_names), LC_TEST(test_engine_start_stop),
             LC_TEST(test_backend_caps), LC_TEST(test_lifeline_sweep_alone),
             LC_TEST(test_stdin_gather))
