/*
 * test_lifeline.c - nothing outlives its launcher. A child process starts commands on every test
 * host and on this machine, then is killed with SIGKILL; on half of the hosts the network is cut
 * first, so only the heartbeat can end them. Every process must be gone once the heartbeat limit
 * and the grace period have passed, counted in every host's namespace. lc_process_pid names
 * the command's group leader; and a command whose output is read slower than it comes, for longer
 * than the heartbeat limit, is not ended by its lifeline.
 */
#include "lc_test.h"
#include "testenv.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define HOSTS 8
#define HEARTBEAT_MS 3000
#define GRACE_MS 1000

static const char *const commands[] = {
    "sleep 4301", "sh -c 'sleep 4302 & sleep 4303'",
    "trap '' TERM; sleep 4304 & wait", /* ignores SIGTERM: needs the SIGKILL after the grace */
    "setsid sleep 4306 </dev/null >/dev/null 2>&1 & sleep 4307", /* leaves the process group */
};

static int count_local(const char *pattern) {
  char cmd[256];
  FILE *p;
  int n = -1;
  snprintf(cmd, sizeof(cmd), "pgrep -cxf '%s'", pattern);
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

static int count_all(void) {
  int total = 0;
  for (int i = 0; i < HOSTS; i++)
    total += th_count_procs(i, "sleep 430"); /* the sleeps, and the wrappers that run them */
  return total + count_local("sleep 4305");
}

/* The launcher: connects, starts everything, says ready, waits to be killed. */
static void launcher(int ready_fd) {
  lc_engine *engine = NULL;
  lc_runtime *rt[HOSTS + 1];
  lc_process *p;
  lc_runtime_options o = th_options();
  o.heartbeat_timeout_ms = HEARTBEAT_MS;
  o.kill_grace_ms = GRACE_MS;
  if (lc_engine_new(&engine, NULL) < 0)
    _exit(3);
  for (int i = 0; i < HOSTS; i++) {
    char name[16];
    snprintf(name, sizeof(name), "lab%d", i);
    if (lc_runtime_new_ssh(&rt[i], engine, name, &o) < 0) {
      fprintf(stderr, "launcher: %s\n", lc_error_last());
      _exit(4);
    }
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
      if (lc_runtime_spawn(&p, rt[i], commands[k], NULL) < 0)
        _exit(5);
  }
  if (lc_runtime_new_local(&rt[HOSTS], engine, &o) < 0 ||
      lc_runtime_spawn(&p, rt[HOSTS], "sleep 4305", NULL) < 0)
    _exit(6);
  if (write(ready_fd, "r", 1) != 1)
    _exit(7);
  for (;;)
    pause();
}

static void test_sigkill_leaves_nothing(void) {
  int fds[2], status, left = -1;
  char c;
  pid_t pid;
  uint64_t t0;
  LC_REQUIRE(count_all() == 0);
  LC_REQUIRE(pipe(fds) == 0);
  if ((pid = fork()) == 0) {
    close(fds[0]);
    launcher(fds[1]);
  }
  close(fds[1]);
  LC_REQUIRE(read(fds[0], &c, 1) == 1);
  close(fds[0]);
  /* everything runs: 6 sleeps per host (setsid'd one included), one lifeline per command;
   * polled, since a spawn returns once the host accepted the command, not once it ran */
  for (uint64_t end = (uint64_t)time(NULL) + 30; (uint64_t)time(NULL) < end;) {
    int started = count_local("sleep 4305") == 1;
    for (int i = 0; started && i < HOSTS; i++)
      started = th_count_procs(i, "^sleep 430") == 6;
    if (started)
      break;
    usleep(100 * 1000);
  }
  for (int i = 0; i < HOSTS; i++) {
    LC_CHECK(th_count_procs(i, "^sleep 430") == 6);
    LC_CHECK(th_count_procs(i, "sleep 430") >= 6 + 4); /* and a wrapper per command */
  }
  LC_CHECK(count_local("sleep 4305") == 1);
  for (int i = HOSTS / 2; i < HOSTS; i++)
    LC_CHECK(th_run("link-down %d", i) == 0);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  t0 = (uint64_t)time(NULL);
  /* heartbeat limit + watchdog tick + grace, with a wide margin for a loaded machine */
  for (int tries = 0; tries < 60; tries++) {
    left = count_all();
    if (left == 0)
      break;
    usleep(500 * 1000);
  }
  fprintf(stderr, "  all gone after about %lu s (heartbeat limit %d ms)\n",
          (unsigned long)(time(NULL) - t0), HEARTBEAT_MS);
  for (int i = HOSTS / 2; i < HOSTS; i++)
    th_run("link-up %d", i);
  if (left != 0)
    for (int i = 0; i < HOSTS; i++)
      fprintf(stderr, "  lab%d: %d left\n", i, th_count_procs(i, "sleep 430"));
  LC_CHECK(left == 0);
}

/* ---- lc_process_pid ---- */

typedef struct lines {
  char first[256];
  int n;
  int pid_seen; /* a line with the pid mark reached the callback */
} lines;

static void on_line(const char *line, size_t len, lc_stream stream, void *payload) {
  lines *l = payload;
  if (stream != LC_STDOUT)
    return;
  if (l->n++ == 0)
    snprintf(l->first, sizeof(l->first), "%.*s", (int)len, line);
  l->pid_seen |= memchr(line, '\036', len) != NULL;
}

static int has_text(long pid, const char *text, const void *arg) {
  (void)pid;
  return strstr(text, arg) != NULL;
}

/* The 5th field of /proc/PID/stat: the process group (the comm in parentheses may hold spaces). */
static long pgid_of(long pid) {
  char path[64], buf[512];
  const char *close_paren;
  long pgid = -1;
  FILE *f;
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  if (fgets(buf, sizeof(buf), f) != NULL && (close_paren = strrchr(buf, ')')) != NULL &&
      sscanf(close_paren + 1, " %*c %*d %ld", &pgid) != 1)
    pgid = -1;
  fclose(f);
  return pgid;
}

/* On host (lab1 as root, lcfish@lab2, this machine when host is NULL): the pid is the command's
 * group leader (its environ has the command's variable and LC_LIFELINE, its group is its pid),
 * and the line that told it reaches no callback; once stopped, nothing is left. */
static void check_pid(lc_engine *engine, const char *host, int index) {
  lc_runtime_options o = th_options();
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const char *env[] = {"LC_PID_TEST=4321", NULL};
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lines l = {{0}, 0, 0};
  long pid = 0;
  eo.env = env;
  eo.on_line = on_line;
  eo.payload = &l;
  if (host != NULL)
    LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, host, &o));
  else
    LC_REQUIRE_OK(lc_runtime_new_local(&rt, engine, &o));
  LC_REQUIRE_OK(lc_runtime_spawn(&p, rt, "echo first; exec sleep 4311", &eo));
  for (int tries = 0; tries < 300 && (pid == 0 || l.n == 0); tries++) {
    pid = lc_process_pid(p);
    usleep(50 * 1000); /* a test's bounded poll: the spawn returns before the host ran it */
  }
  fprintf(stderr, "  %s: pid %ld, first line \"%s\"\n", host ? host : "localhost", pid, l.first);
  LC_CHECK(pid > 1);
  LC_CHECK_STR(l.first, "first");
  LC_CHECK(!l.pid_seen);
  if (index >= 0) {
    LC_CHECK(th_each_proc(index, "environ", has_text, "LC_PID_TEST=4321") >= 1);
    pid = th_pid_here(index, pid); /* the host's own count when it has a PID namespace */
  }
  /* "first" comes before the shell's exec of sleep: on this machine the check can come first
   * (seen once on a loaded machine: the pid was the shell's, not yet sleep's) */
  for (int tries = 0; tries < 200; tries++) {
    if (th_proc_apply(pid, "cmdline", th_cmdline_matches, "^sleep 4311") == 1)
      break;
    usleep(50 * 1000);
  }
  LC_CHECK(th_proc_apply(pid, "environ", has_text, "LC_PID_TEST=4321") == 1);
  LC_CHECK(th_proc_apply(pid, "environ", has_text, "LC_LIFELINE=") == 1);
  LC_CHECK(th_proc_apply(pid, "cmdline", th_cmdline_matches, "^sleep 4311") == 1);
  LC_CHECK(pgid_of(pid) == pid);
  LC_CHECK_OK(lc_process_stop(p));
  lc_process_wait(NULL, p, 30000);
  lc_process_free(p);
  lc_runtime_free(rt);
  LC_CHECK(th_proc_apply(pid, "cmdline", th_cmdline_matches, "^sleep 4311") == 0);
  if (index >= 0)
    LC_CHECK(th_count_procs(index, "sleep 4311") == 0);
  LC_CHECK(count_local("sleep 4311") == 0);
}

static void test_pid(void) {
  lc_engine *engine = NULL;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  check_pid(engine, "lab1", 1);
  check_pid(engine, "lcfish@lab2", 2);
  check_pid(engine, "lctcsh@lab3", 3);
  check_pid(engine, NULL, -1);
  lc_engine_free(engine);
}

/* ---- a reader slower than the host: the heartbeats still go ---- */

typedef struct slow_reader {
  unsigned long lines;
} slow_reader;

/* 5 ms every 1000 lines: 3,000,000 lines take at least 15 s here, whatever the host's speed. */
static void read_slowly(const char *line, size_t len, lc_stream stream, void *payload) {
  slow_reader *r = payload;
  (void)line;
  (void)len;
  if (stream == LC_STDOUT && ++r->lines % 1000 == 0)
    usleep(5000);
}

/* A command whose output streams in for longer than the heartbeat limit, read slower than it is
 * written (the window always full, each read answered by a window adjust), runs to its end: its
 * lifeline hears the heartbeats all along. Before the fix they waited behind libssh's write gate
 * and the lifeline ended the command after the limit (8.6 s of 15+ here, with a limit of 6 s). */
static void test_slow_reader_keeps_heartbeat(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  slow_reader r = {0};
  o.keepalive_timeout_ms = 3000; /* heartbeat limit 6 s: the default rule, twice the keepalive */
  eo.on_line = read_slowly;
  eo.payload = &r;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab5", &o));
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "yes 012345678 | head -n 3000000", &eo));
  fprintf(stderr, "  exit %d, signal %d, %lu lines\n", res.exit_status, res.signal, r.lines);
  LC_CHECK(res.exit_status == 0 && res.signal == 0);
  LC_CHECK(r.lines == 3000000ul);
  LC_CHECK(th_count_procs(5, "012345678") == 0);
  lc_runtime_free(rt);
  lc_engine_free(engine);
}

LC_TEST_MAIN(LC_TEST(test_sigkill_leaves_nothing), LC_TEST(test_pid),
             LC_TEST(test_slow_reader_keeps_heartbeat))
