/*
 * test_staged_type.c - examples/staged_type.c, a cluster type written against the public headers
 * alone, linked in as a static type and run on real test hosts: staging once per host and per
 * worker, placement with spread and with pack on two hosts that declare 8 GPUs each, one worker
 * stopped and restarted, one worker killed (WORKER_DOWN, reported once by lc_cluster_wait, the
 * others keep answering), and nothing left on any host after each cluster is freed. The same file
 * as a plug-in (libstaged.so) is run by lazyclusterctl in test_plugin.sh.
 */
#include "clusterenv.h"
#include "lc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const lc_cluster_type *staged_type(void);

#define HOSTS 2

static lc_engine *engine;
static lc_group *group;
static char ctl[4096];
static const char *hosts[] = {"lab0", "lab1"};

/* Events seen, as "WORKER_DOWN 2;" etc. */
static char events[4096];

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  static const char *name[] = {"?", "MASTER_UP", "WORKER_UP", "MASTER_DOWN", "WORKER_DOWN"};
  size_t used = strlen(events);
  (void)c;
  (void)payload;
  snprintf(events + used, sizeof(events) - used, "%s %d;", ev >= 1 && ev <= 4 ? name[ev] : name[0],
           index);
}

/* The line a service on localhost:port answers, or "" when it does not. */
static void answer(char *out, size_t size, int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ssize_t n = 0, k;
  out[0] = '\0';
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0)
    return;
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
    while ((size_t)n < size - 1 && (k = read(fd, out + n, size - 1 - (size_t)n)) > 0)
      n += k;
  close(fd);
  out[n > 0 ? n : 0] = '\0';
  if (n > 0 && out[n - 1] == '\n')
    out[n - 1] = '\0';
}

static int procs_everywhere(void) {
  int n = 0;
  for (int i = 0; i < HOSTS; i++)
    n += th_count_procs(i, "lc-serve");
  return n;
}

static int make(lc_master_launcher **m, lc_worker_launcher **w) {
  char serve[4200];
  const char *args[] = {serve, "text=hello", NULL};
  snprintf(serve, sizeof(serve), "serve=%s", ctl);
  return staged_type()->make(m, w, args);
}

static int start(lc_cluster **out, lc_master_launcher **m, lc_worker_launcher **w, int policy,
                 int n) {
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int r;
  events[0] = '\0';
  o.master_port = 62400;
  o.worker_ports = "62401-62450";
  o.placement = policy;
  o.on_event = on_event;
  o.restart =
      LC_RESTART_NEVER; /* every end reported, as this test checks (test_repair: restarts) */
  if ((r = make(m, w)) < 0)
    return r;
  if ((r = lc_cluster_new(out, group, *m, *w, &o)) < 0)
    return r;
  return lc_cluster_start(*out, n);
}

static void stop(lc_cluster *c, lc_master_launcher *m, lc_worker_launcher *w) {
  lc_cluster_free(c);
  staged_type()->release(m, w);
  LC_CHECK(procs_everywhere() == 0);
}

/* Worker i answers with what was staged on its host and for it, and the GPU it was given. */
static void check_worker(lc_cluster *c, size_t i, const char *host, int gpu) {
  const lc_worker_info *wi = lc_cluster_worker(c, i);
  char got[512], want[512];
  LC_REQUIRE(wi != NULL);
  LC_CHECK_STR(wi->host, host);
  LC_CHECK(wi->gpu == gpu);
  answer(got, sizeof(got), wi->port);
  snprintf(want, sizeof(want), "hello from %s, worker-%zu, cuda=%d", host, i, gpu);
  LC_CHECK_STR(got, want);
}

/* spread: 4 workers on two 8-GPU hosts go 2 + 2, GPUs 0 and 1 of each. */
static void test_spread(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  char got[256];
  LC_REQUIRE_OK(start(&c, &m, &w, LC_PLACE_SPREAD, 4));
  check_worker(c, 0, "lab0", 0);
  check_worker(c, 1, "lab1", 0);
  check_worker(c, 2, "lab0", 1);
  check_worker(c, 3, "lab1", 1);
  answer(got, sizeof(got), lc_cluster_master_port(c));
  LC_CHECK_STR(got, "staged master");
  /* staged once per host: the binary of each host is one file, and the log says one task each */
  LC_CHECK(th_count_procs(0, "lc-serve") == 2 && th_count_procs(1, "lc-serve") == 2);
  LC_CHECK_CONTAINS(events, "MASTER_UP -1;");
  LC_CHECK_CONTAINS(events, "WORKER_UP 3;");
  stop(c, m, w);
}

/* pack: the first host's GPUs 0-3. */
static void test_pack(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  LC_REQUIRE_OK(start(&c, &m, &w, LC_PLACE_PACK, 4));
  for (int i = 0; i < 4; i++)
    check_worker(c, (size_t)i, "lab0", i);
  LC_CHECK(th_count_procs(1, "lc-serve") == 0);
  stop(c, m, w);
}

/* One worker stopped (its port goes, no report, no event) and restarted on the same place. */
static void test_stop_restart_one(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  char got[256];
  int port;
  LC_REQUIRE_OK(start(&c, &m, &w, LC_PLACE_SPREAD, 3));
  port = lc_cluster_worker(c, 1)->port;
  LC_REQUIRE_OK(lc_cluster_worker_stop(c, 1));
  LC_CHECK(lc_cluster_worker_process(c, 1) == NULL);
  LC_CHECK(th_count_procs(1, "lc-serve") == 0); /* worker 1 was lab1's only one */
  answer(got, sizeof(got), port);
  LC_CHECK_STR(got, "");
  LC_CHECK(lc_cluster_wait(c, 300) == -ETIMEDOUT); /* a stop is not an end to report */
  LC_CHECK(strstr(events, "DOWN") == NULL);
  LC_CHECK(lc_cluster_worker_stop(c, 1) == -EINVAL); /* not running */
  LC_CHECK(lc_cluster_worker_stop(c, 7) == -ENOENT);
  LC_REQUIRE_OK(lc_cluster_worker_restart(c, 1));
  LC_CHECK(lc_cluster_worker(c, 1)->port == port);
  check_worker(c, 1, "lab1", 0);
  check_worker(c, 0, "lab0", 0);
  stop(c, m, w);
}

/* kill -9 of one worker: WORKER_DOWN with its index, reported once, the others answer on. */
static void test_killed_worker(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_exec_result res;
  char cmd[4200];
  int r;
  LC_REQUIRE_OK(start(&c, &m, &w, LC_PLACE_SPREAD, 3));
  snprintf(cmd, sizeof(cmd), "kill -9 $(cat '%s/pid')", lc_cluster_worker(c, 2)->workdir);
  LC_REQUIRE_OK(lc_runtime_exec(&res, lc_cluster_worker_runtime(c, 2), cmd, NULL));
  LC_CHECK(res.exit_status == 0);
  r = lc_cluster_wait(c, 30000);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "lab0 worker-2");
  LC_CHECK_CONTAINS(lc_error_last(), "signal 9");
  LC_CHECK_CONTAINS(events, "WORKER_DOWN 2;");
  LC_CHECK(lc_cluster_wait(c, 500) == -ETIMEDOUT); /* not the same end again */
  check_worker(c, 0, "lab0", 0);
  check_worker(c, 1, "lab1", 0);
  LC_REQUIRE_OK(lc_cluster_worker_restart(c, 2));
  check_worker(c, 2, "lab0", 1);
  stop(c, m, w);
}

/* Bad options of the type: named. */
static void test_bad_args(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  const char *nofile[] = {"serve=/nonexistent/lazyclusterctl", NULL};
  const char *badtext[] = {"text=two words", NULL};
  LC_CHECK(staged_type()->make(&m, &w, nofile) == -ENOENT);
  LC_CHECK_CONTAINS(lc_error_last(), "serve=/nonexistent/lazyclusterctl");
  LC_CHECK(staged_type()->make(&m, &w, badtext) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "text=two words");
  LC_CHECK(m == NULL && w == NULL);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_bad_args),         LC_TEST(test_spread),        LC_TEST(test_pack),
      LC_TEST(test_stop_restart_one), LC_TEST(test_killed_worker),
  };
  int r;
  th_ctl_setup(ctl, NULL, 0);
  th_group_setup(&engine, &group, hosts, HOSTS, NULL);
  for (int i = 0; i < HOSTS; i++) /* as an inventory's gpus=8 declares them */
    lc_runtime_set_resources(lc_group_at(group, i), 8, 0);
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_group_free(group);
  lc_engine_free(engine);
  return r;
}
