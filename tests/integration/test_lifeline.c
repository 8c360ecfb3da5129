/*
 * test_lifeline.c - nothing outlives its launcher. A child process starts commands on every test
 * host and on this machine, then is killed with SIGKILL; on half of the hosts the network is cut
 * first, so only the heartbeat can end them. Every process must be gone once the heartbeat limit
 * and the grace period have passed, counted in every host's namespace.
 */
#include "lc_test.h"
#include "testenv.h"

#include <signal.h>
#include <time.h>
#include <sys/wait.h>

#define HOSTS 8
#define HEARTBEAT_MS 3000
#define GRACE_MS 1000

static const char *const commands[] = {
    "sleep 4301",
    "sh -c 'sleep 4302 & sleep 4303'",
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

LC_TEST_MAIN(LC_TEST(test_sigkill_leaves_nothing))
