/*
 * test_hangs.c - every wait has a bound, and what is kept per host has one too, on real SSH test
 * hosts: a group exec whose command on one host never ends (the per-host timeout ends it there and
 * nowhere else), a command that writes 1 GB through a group exec (our memory stays bounded, the
 * report keeps the last lines), and discovery with a host whose nvidia-smi hangs (the facts step's
 * timeout reports that host and leaves nothing behind on it), and a group's free whose hosts
 * answer but do not end their processes (one deadline for all of them, not one each in turn).
 */
#include "lc_test.h"
#include "testenv.h"

#include "clusterenv.h"

#include <errno.h>
#include <pthread.h>
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

/* 1 GB (LC_TEST_BULK_BYTES) of output in lines of 1000 bytes through a group exec: our peak memory
 * grows by far less than that, and the report holds the last lines after a note of how many
 * went. */
static void test_exec_big_output(void) {
  lc_group_report *rep = NULL;
  lc_group *g = connect_labs(1);
  long hwm0, hwm1;
  const char *log;
  char cmd[200];
  LC_REQUIRE(g != NULL);
  hwm0 = status_kib("VmHWM");
  LC_REQUIRE(hwm0 > 0);
  snprintf(cmd, sizeof(cmd),
           "head -c %llu /dev/zero | tr '\\0' x | fold -w 1000; echo; echo the-last-line",
           LC_TEST_BULK_BYTES);
  LC_REQUIRE_OK(lc_group_exec(&rep, g, cmd, NULL, NULL, NULL));
  hwm1 = status_kib("VmHWM");
  fprintf(stderr, "  peak RSS %ld KiB before, %ld KiB after (+%ld KiB)\n", hwm0, hwm1, hwm1 - hwm0);
#ifndef LC_TEST_ASAN /* AddressSanitizer keeps freed memory resident (lc_test.h) */
  LC_CHECK(hwm1 - hwm0 < 64 * 1024);
#endif
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

/* Runs command as root on host (its exit status, or -1). */
static int host_sh(const char *host, const char *command) {
  lc_runtime_options ro = th_options();
  lc_runtime *rt = NULL;
  lc_exec_result res = {.exit_status = -1};
  if (lc_runtime_new_ssh(&rt, engine, host, &ro) < 0 ||
      lc_runtime_exec(&res, rt, command, NULL) < 0) {
    fprintf(stderr, "  %s: %s\n", host, lc_error_last());
    res.exit_status = -1;
  }
  lc_runtime_free(rt);
  return res.exit_status;
}

/* lab2's nvidia-smi never ends, not even on SIGTERM (as one stuck in D state): discovery gives
 * up on lab2 after the facts timeout, names it and the step, keeps lab1, and nothing of the step
 * is left on lab2. */
static void test_discover_facts_timeout(void) {
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_runtime_options ro = th_options();
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  uint64_t t0;
  double took;
  /* root's bash reads ~/.bashrc for every ssh command: it puts the fake first on the PATH */
  LC_REQUIRE(host_sh("lab2", "mkdir -p /root/fakebin && "
                             "printf '#!/bin/sh\\ntrap \"\" TERM INT HUP\\n"
                             "while :; do sleep 1; done\\n' > /root/fakebin/nvidia-smi && "
                             "chmod 755 /root/fakebin/nvidia-smi && "
                             "{ cp /root/.bashrc /root/.bashrc.saved 2>/dev/null || :; } && "
                             "echo 'export PATH=/root/fakebin:$PATH' >> /root/.bashrc") == 0);
  o.hosts = "lab1,lab2";
  o.runtime = &ro;
  o.facts = 1;
  o.facts_timeout_ms = 3000;
  t0 = now_ms();
  LC_REQUIRE_OK(lc_discover(&g, &d, engine, &o));
  took = (double)(now_ms() - t0) / 1000.0;
  fprintf(stderr, "  discovery took %.2f s\n", took);
  LC_CHECK(took < 60.0); /* a bound, not a timing: without the limit it never ends */
  LC_CHECK(lc_discovery_count(d) == 2);
  for (size_t i = 0; i < lc_discovery_count(d); i++) {
    const char *h = lc_discovery_host(d, i);
    if (strcmp(h, "lab2") == 0) {
      fprintf(stderr, "  lab2: %s\n", lc_discovery_reason(d, i));
      LC_CHECK(lc_discovery_state(d, i) == LC_HOST_UNREACHABLE);
      LC_CHECK(lc_discovery_error(d, i) == -ETIMEDOUT);
      LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "lab2");
      LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "facts step");
      LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "nvidia-smi");
      LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "3.0 s");
    } else {
      LC_CHECK(lc_discovery_state(d, i) == LC_HOST_READY);
    }
  }
  LC_CHECK(lc_group_count(g) == 1 && lc_group_find(g, "lab1") != NULL);
  LC_CHECK(procs_left(2, "fakebin/nvidia-smi") == 0);
  LC_CHECK(procs_left(2, "sleep 1") == 0);
  lc_discovery_free(d);
  lc_group_free(g);
  LC_CHECK(host_sh("lab2",
                   "rm -rf /root/fakebin; if [ -e /root/.bashrc.saved ]; then "
                   "mv /root/.bashrc.saved /root/.bashrc; else rm -f /root/.bashrc; fi") == 0);
}

static volatile sig_atomic_t discover_cancel;

static void *set_cancel_later(void *arg) {
  (void)arg;
  usleep(2000 * 1000);
  __atomic_store_n(&discover_cancel, 1, __ATOMIC_RELAXED); /* another thread: atomic */
  return NULL;
}

/* Discovery whose facts step hangs on lab2 (limit 60 s), canceled through its flag after 2 s:
 * lc_discover returns LC_ECANCELED long before the limit, with nothing out, and what its facts
 * step started on lab2 is ended. */
static void test_discover_cancel(void) {
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_runtime_options ro = th_options();
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  pthread_t th;
  uint64_t t0;
  double took;
  int r;
  LC_REQUIRE(host_sh("lab2", "mkdir -p /root/fakebin && "
                             "printf '#!/bin/sh\\ntrap \"\" TERM INT HUP\\n"
                             "while :; do sleep 1; done\\n' > /root/fakebin/nvidia-smi && "
                             "chmod 755 /root/fakebin/nvidia-smi && "
                             "{ cp /root/.bashrc /root/.bashrc.saved 2>/dev/null || :; } && "
                             "echo 'export PATH=/root/fakebin:$PATH' >> /root/.bashrc") == 0);
  o.hosts = "lab1,lab2";
  o.runtime = &ro;
  o.facts = 1;
  o.facts_timeout_ms = 60000;
  o.cancel = &discover_cancel;
  discover_cancel = 0;
  LC_REQUIRE(pthread_create(&th, NULL, set_cancel_later, NULL) == 0);
  t0 = now_ms();
  r = lc_discover(&g, &d, engine, &o);
  took = (double)(now_ms() - t0) / 1000.0;
  pthread_join(th, NULL);
  fprintf(stderr, "  discovery returned %s after %.2f s: %s\n", lc_err_name(r), took,
          lc_error_last());
  LC_CHECK(r == LC_ECANCELED);
  LC_CHECK(g == NULL && d == NULL);
  LC_CHECK(took < 30.0); /* a bound, not a timing: without the cancel it takes the 60 s limit */
  LC_CHECK_CONTAINS(lc_error_last(), "canceled");
  for (int k = 0; k < 30 && procs_left(2, "fakebin/nvidia-smi") != 0; k++)
    sleep(1); /* the lifeline ends its group after the kill grace */
  LC_CHECK(procs_left(2, "fakebin/nvidia-smi") == 0);
  lc_discovery_free(d);
  lc_group_free(g);
  LC_CHECK(host_sh("lab2",
                   "rm -rf /root/fakebin; if [ -e /root/.bashrc.saved ]; then "
                   "mv /root/.bashrc.saved /root/.bashrc; else rm -f /root/.bashrc; fi") == 0);
}

static char ctl[4096], master_tmpl[4200];

typedef struct canceler {
  lc_cluster *c;
  int after_ms;
} canceler;

static void *cancel_later(void *arg) {
  canceler *k = arg;
  usleep((useconds_t)k->after_ms * 1000);
  lc_cluster_cancel(k->c);
  return NULL;
}

/* Starts a cluster (2 workers on lab0 and lab1) whose master (or workers) never listen, with
 * limits of 120 s, and cancels it from another thread after_ms into the start: the start returns
 * LC_ECANCELED long before its limit, and nothing it started is left on any host. */
static void cancel_case(const char *master, const char *master_host, int after_ms) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  lc_cluster *c = NULL;
  lc_group *g = connect_labs(2);
  lc_process *outsider = NULL;
  lc_exec_result res;
  canceler k;
  pthread_t th;
  uint64_t t0;
  double took;
  int r;
  LC_REQUIRE(g != NULL);
  LC_REQUIRE_OK(th_command_type(&m, &w, master, "exec sleep 1002"));
  o.master_port = 61900;
  o.worker_ports = "61901-61950";
  o.master_host = master_host;
  o.master_timeout_ms = 120000;
  o.worker_timeout_ms = 120000;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  /* other work on the same group (a user's exec): the cancel must leave it alone */
  LC_REQUIRE_OK(lc_runtime_spawn(&outsider, lc_group_find(g, "lab0"), "exec sleep 2003", NULL));
  k.c = c;
  k.after_ms = after_ms;
  LC_REQUIRE(pthread_create(&th, NULL, cancel_later, &k) == 0);
  t0 = now_ms();
  r = lc_cluster_start(c, 2);
  took = (double)(now_ms() - t0) / 1000.0;
  pthread_join(th, NULL);
  fprintf(stderr, "  start returned %s after %.2f s: %s\n", lc_err_name(r), took, lc_error_last());
  LC_CHECK(r == LC_ECANCELED);
  LC_CHECK_CONTAINS(lc_error_last(), "canceled");
  LC_CHECK(took < 60.0); /* a bound, not a timing: without the cancel it is 120 s */
  LC_CHECK(lc_cluster_wait(c, 0) == LC_ECANCELED);
  lc_cluster_free(c);
  th_command_type_free(m, w);
  sleep(2); /* the cancel's stops (again every 250 ms while the cluster lived) had time to act */
  LC_CHECK(th_count_procs(0, "sleep 2003") == 1);
  LC_CHECK(lc_process_wait(&res, outsider, 0) == -ETIMEDOUT);
  lc_process_free(outsider);
  LC_CHECK(procs_left(0, "sleep 2003") == 0);
  lc_group_free(g);
  for (int i = 0; i < 2; i++) {
    LC_CHECK(procs_left(i, "sleep 100") == 0);
    LC_CHECK(procs_left(i, "LC_LIFELINE") == 0);
  }
  LC_CHECK(th_count_everywhere(2, "^serve 61900") == 0);
}

/* During the master's wait: a master on lab0 that never listens. */
static void test_cancel_master_wait(void) { cancel_case("exec sleep 1001", "lab0", 3000); }

/* During the workers' starts: the master (here) listens, the workers never do. */
static void test_cancel_worker_wait(void) { cancel_case(master_tmpl, NULL, 6000); }

/* Sends the signal *arg to a process of a host that is not an sshd. */
/*
 * lc_group_free awaits the ends of all its hosts' processes against one deadline fixed when it
 * began: with every process but sshd stopped (SIGSTOP) on 4 hosts that still answer, no end is
 * confirmed, and the free returns after one kill grace plus margin (13 s), not one per host in
 * turn (52 s: what a 64-host Dask stop on a loaded machine waited, several minutes). Resumed, the
 * keepers see their lifelines gone and remove the working directories: nothing is left.
 */
static void test_free_slow_hosts(void) {
  const int stop = SIGSTOP, cont = SIGCONT;
  char dirs[4][512];
  lc_group *g = connect_labs(4);
  uint64_t t0;
  double took;
  LC_REQUIRE(g != NULL);
  for (int i = 0; i < 4; i++) {
    const char *wd = NULL;
    LC_REQUIRE_OK(lc_runtime_workdir(&wd, lc_group_at(g, i)));
    snprintf(dirs[i], sizeof(dirs[i]), "%s", wd);
  }
  for (int i = 0; i < 4; i++) {
    LC_CHECK(th_count_procs(i, "sleep 2147483647") == 1); /* its keeper, counted again below */
    LC_CHECK(th_each_proc(i, "comm", th_signal_unless_sshd, &stop) > 0);
  }
  t0 = now_ms();
  lc_group_free(g);
  took = (double)(now_ms() - t0) / 1000.0;
  fprintf(stderr, "  the free of 4 hosts that end nothing returned after %.2f s\n", took);
  LC_CHECK(took < 30.0); /* a bound, not a timing: one host after the other is 4 x 13 s */
  for (int i = 0; i < 4; i++)
    th_each_proc(i, "comm", th_signal_unless_sshd, &cont);
  for (int i = 0; i < 4; i++) {
    LC_CHECK(procs_left(i, "sleep 2147483647") == 0); /* the keeper (LC__KEEPER_SH) */
    LC_CHECK(th_run("exec %d -- sh -c 'for k in $(seq 100); do [ -e %s ] || exit 0; sleep 0.1; "
                    "done; exit 1'",
                    i, dirs[i]) == 0);
  }
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_exec_timeout),           LC_TEST(test_exec_big_output),
      LC_TEST(test_discover_facts_timeout), LC_TEST(test_cancel_master_wait),
      LC_TEST(test_cancel_worker_wait),     LC_TEST(test_discover_cancel),
      LC_TEST(test_free_slow_hosts),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
