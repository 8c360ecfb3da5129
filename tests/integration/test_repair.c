/*
 * test_repair.c - lc_cluster_wait repairs command clusters on real test hosts: a worker killed
 * with SIGKILL on its host comes back on the same place (index, port, GPU, host) and answers
 * again; the restart budget (max_restarts) gives a worker up and the others run on; the policies
 * never / always / on-failure; options of version 4 keep today's behaviour (no restart, no new
 * events); a worker of a plain user with fish as login shell restarts the same way; the master's
 * end fails the cluster, a restartable master comes back on its port; the ttl ends the cluster.
 * After each: nothing left on any host (processes, listeners).
 *
 * Time bounds are generous upper bounds (60 s where the issue says "within 10 s"); nothing
 * passes or fails on a measured time otherwise.
 */
#include "clusterenv.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define HOSTS 3
#define BOUND_MS 60000

static lc_engine *engine;
static lc_group *group;
static char ctl[4096];
static char master_tmpl[4200];

static const char *hosts[] = {"lab0", "lab1", "lab2"};
static const char *worker_tmpl = "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

/* ---- events ---- */

static struct {
  int ev[256], idx[256];
  int n;
} E;

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  (void)c;
  (void)payload;
  if (E.n < 256) {
    E.ev[E.n] = ev;
    E.idx[E.n++] = index;
  }
}

static int event_count(int ev, int index) {
  int n = 0;
  for (int i = 0; i < E.n; i++)
    n += E.ev[i] == ev && E.idx[i] == index;
  return n;
}

/* Position of the first ev for index, or -1. */
static int event_at(int ev, int index) {
  for (int i = 0; i < E.n; i++)
    if (E.ev[i] == ev && E.idx[i] == index)
      return i;
  return -1;
}

/* Holds c (lc_cluster_wait) until ev for index was seen, a wait returned something else than
 * -ETIMEDOUT (returned, with its detail in msg), or the bound passed (-ETIMEDOUT). */
static int hold_until(lc_cluster *c, int ev, int index, char *msg, size_t size) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  msg[0] = '\0';
  for (;;) {
    int r;
    if (event_count(ev, index) > 0)
      return 0;
    r = lc_cluster_wait(c, 250);
    if (r != -ETIMEDOUT) {
      snprintf(msg, size, "%s", lc_error_last());
      if (event_count(ev, index) > 0 && r == 0)
        return 0;
      return r;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > BOUND_MS)
      return -ETIMEDOUT;
  }
}

static lc_cluster_options options(int port) {
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  static char ports[64];
  snprintf(ports, sizeof(ports), "%d-%d", port + 1, port + 99);
  o.master_port = port;
  o.worker_ports = ports;
  o.on_event = on_event;
  o.restart_backoff_ms = 100;
  memset(&E, 0, sizeof(E));
  return o;
}

/* ---- what is left ---- */

static int count_local(const char *pattern) {
  char cmd[256];
  FILE *p;
  int k = 0;
  snprintf(cmd, sizeof(cmd), "pgrep -fc '^[^ ]*lazyclusterctl %s' || true", pattern + 1);
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%d", &k) != 1)
      k = -1;
    pclose(p);
  }
  return k;
}

/* Processes whose command line starts with pattern on every host and here; and for a cluster's
 * ports: listeners in [port, port+99] on every host. */
static int count_everywhere(const char *pattern) {
  int n = count_local(pattern);
  for (int i = 0; i < HOSTS; i++)
    n += th_count_procs(i, pattern);
  return n;
}

static int listeners_in(int port) {
  int n = 0;
  for (int i = 0; i < HOSTS; i++) {
    lc_ports *l = NULL;
    if (lc_ports_listening(&l, lc_group_at(group, (size_t)i), 10000) < 0)
      return -1;
    for (int p = port; p < port + 100; p++)
      n += lc_ports_contains(l, p);
    lc_ports_free(l);
  }
  return n;
}

/* Nothing of the cluster on port.. is left: polled a while (the lifelines end their groups). */
static void check_nothing_left(const char *pattern, int port) {
  int procs = -1, ls = -1;
  for (int t = 0; t < 100 && (procs != 0 || ls != 0); t++) {
    procs = count_everywhere(pattern);
    ls = listeners_in(port);
    if (procs != 0 || ls != 0)
      usleep(200 * 1000);
  }
  if (procs != 0 || ls != 0)
    fprintf(stderr, "  left: %d processes \"%s\", %d listeners from port %d\n", procs, pattern, ls,
            port);
  LC_CHECK(procs == 0);
  LC_CHECK(ls == 0);
}

/* What the service on port answers in host i (this machine when i < 0), or "". */
static void ask(int i, int port, char *out, size_t size) {
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = th_socket_in(i);
  ssize_t n = -1;
  out[0] = '\0';
  if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
    n = read(fd, out, size - 1);
  out[n > 0 ? n : 0] = '\0';
  if (fd >= 0)
    close(fd);
}

/* kill -9 of pid, run inside host i (testhosts exec); its exit status. */
static int kill9_on(int i, long pid) {
  char cmd[8192];
  int st;
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- kill -9 %ld", th_script(), i, th_dir(), pid);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static lc_worker_status status_of(lc_cluster *c, size_t i) {
  lc_worker_status s = {.version = LC_WORKER_STATUS_VERSION};
  LC_CHECK_OK(lc_cluster_worker_status(c, i, &s));
  return s;
}

/* ---- tests ---- */

/* kill -9 of a worker's process on its host: DOWN, then RESTARTED on the same place. */
static void test_kill9_restarts_worker(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = options(63100);
  lc_worker_status before, after;
  lc_process *master;
  char msg[4096], text[256];
  int hi;
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  master = lc_cluster_master_process(c);
  before = status_of(c, 1);
  hi = atoi(before.host + 3);
  LC_CHECK(before.state == LC_WORKER_RUNNING);
  LC_CHECK(before.pid > 1 && before.restarts == 0 && before.ended == 0 && before.started_ms > 0);
  LC_CHECK(th_host_proc_apply(hi, before.pid, "cmdline", th_cmdline_matches, "serve") == 1);
  LC_CHECK(lc_process_pid(lc_cluster_worker_process(c, 1)) == before.pid);
  LC_CHECK(kill9_on(hi, before.pid) == 0);
  LC_CHECK_OK(hold_until(c, LC_CLUSTER_WORKER_RESTARTED, 1, msg, sizeof(msg)));
  LC_CHECK(event_at(LC_CLUSTER_WORKER_DOWN, 1) >= 0);
  LC_CHECK(event_at(LC_CLUSTER_WORKER_DOWN, 1) < event_at(LC_CLUSTER_WORKER_RESTARTED, 1));
  after = status_of(c, 1);
  LC_CHECK(after.state == LC_WORKER_RUNNING);
  LC_CHECK_STR(after.host, before.host);
  LC_CHECK(after.port == before.port && after.gpu == before.gpu);
  LC_CHECK(lc_cluster_worker(c, 1)->index == 1);
  LC_CHECK(after.restarts == 1);
  LC_CHECK(after.pid > 1 && after.pid != before.pid);
  LC_CHECK(after.ended == 1 && after.last_signal == 9);
  LC_CHECK_STR(after.last_end, "it was ended by signal 9");
  LC_CHECK(lc_cluster_master_process(c) == master && lc_cluster_master_restarts(c) == 0);
  LC_CHECK(event_count(LC_CLUSTER_MASTER_DOWN, -1) == 0);
  ask(hi, after.port, text, sizeof(text));
  LC_CHECK_STR(text, "w1\n"); /* a client reaches the worker again */
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);
  LC_CHECK(status_of(c, 0).restarts == 0 && status_of(c, 2).restarts == 0);
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-1 restarted (restart 1)");
  lc_cluster_free(c);
  check_nothing_left("^serve 631", 63100);
  th_command_type_free(m, w);
}

/* Worker 2 ends with status 1 two seconds after each start: with max_restarts 2 it is given up
 * at its third end; the other workers run on. */
static void test_restart_budget(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = options(63200);
  lc_worker_status s;
  char msg[4096];
  const char *tmpl = "if [ {worker_index} = 2 ]; then ~/lcbin/lazyclusterctl serve {worker_port} "
                     "w2 & sleep 2; echo failing on purpose >&2; exit 1; fi; "
                     "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, tmpl));
  o.max_restarts = 2;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  LC_CHECK(hold_until(c, LC_CLUSTER_WORKER_FAILED, 2, msg, sizeof(msg)) == LC_EREMOTE);
  fprintf(stderr, "  given up: %s\n", msg);
  LC_CHECK_CONTAINS(msg, "lab2 worker-2 ended 3 times within 10 minutes: given up");
  LC_CHECK_CONTAINS(msg, "it exited with status 1");
  LC_CHECK_CONTAINS(msg, "failing on purpose");
  LC_CHECK(event_count(LC_CLUSTER_WORKER_DOWN, 2) == 3);
  LC_CHECK(event_count(LC_CLUSTER_WORKER_RESTARTED, 2) == 2);
  LC_CHECK(event_count(LC_CLUSTER_WORKER_FAILED, 2) == 1);
  s = status_of(c, 2);
  LC_CHECK(s.state == LC_WORKER_FAILED && s.restarts == 2 && s.pid == 0);
  LC_CHECK(s.ended == 1 && s.last_status == 1 && s.last_signal == 0);
  LC_CHECK(status_of(c, 0).state == LC_WORKER_RUNNING);
  LC_CHECK(status_of(c, 1).state == LC_WORKER_RUNNING);
  LC_CHECK(lc_cluster_wait(c, 300) == -ETIMEDOUT); /* reported once; the rest run on */
  LC_CHECK(count_everywhere("^serve 632") == 3);
  lc_cluster_free(c);
  check_nothing_left("^serve 632", 63200);
  th_command_type_free(m, w);
}

/* One worker that ends with status code after its start, under policy (version: the options'). */
static void policy_case(int version, int policy, int code, int port) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = options(port);
  char tmpl[512], msg[4096], want[64], pattern[32];
  snprintf(tmpl, sizeof(tmpl),
           "~/lcbin/lazyclusterctl serve {worker_port} w{worker_index} & sleep 2; exit %d", code);
  snprintf(pattern, sizeof(pattern), "^serve %d", port / 100);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, tmpl));
  o.version = (unsigned)version;
  o.restart = version >= 5 ? policy : 0;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 1));
  if (version >= 5 && policy == LC_RESTART_ALWAYS) {
    LC_CHECK_OK(hold_until(c, LC_CLUSTER_WORKER_RESTARTED, 0, msg, sizeof(msg)));
    LC_CHECK(status_of(c, 0).restarts >= 1);
  } else {
    LC_CHECK(hold_until(c, LC_CLUSTER_WORKER_DOWN, 0, msg, sizeof(msg)) == LC_EREMOTE);
    snprintf(want, sizeof(want), "worker-0 ended: it exited with status %d", code);
    LC_CHECK_CONTAINS(msg, want);
    LC_CHECK(event_count(LC_CLUSTER_WORKER_DOWN, 0) == 1);
    LC_CHECK(event_count(LC_CLUSTER_WORKER_RESTARTED, 0) == 0);
    /* the new kinds only for options of version 5 */
    LC_CHECK(event_count(LC_CLUSTER_WORKER_FAILED, 0) == (version >= 5));
    LC_CHECK(status_of(c, 0).state == LC_WORKER_FAILED && status_of(c, 0).restarts == 0);
    LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT); /* the master runs on */
  }
  lc_cluster_free(c);
  check_nothing_left(pattern, port);
  th_command_type_free(m, w);
}

static void test_policies(void) {
  fprintf(stderr, "  never, status 3\n");
  policy_case(5, LC_RESTART_NEVER, 3, 63300);
  fprintf(stderr, "  always, status 0\n");
  policy_case(5, LC_RESTART_ALWAYS, 0, 63400);
  fprintf(stderr, "  on-failure, status 0\n");
  policy_case(5, LC_RESTART_ON_FAILURE, 0, 63500);
  fprintf(stderr, "  options version 4, status 2\n");
  policy_case(4, 0, 2, 63600);
}

/* A worker of lcfish@lab1 (fish as login shell) killed with SIGKILL restarts the same way. */
static void test_fish_user_restarts(void) {
  const char *fish[] = {"lcfish@lab1"};
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  lc_group *g = NULL;
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = options(63700);
  lc_worker_status before, after;
  char msg[4096], text[256];
  LC_REQUIRE_OK(lc_group_new(&g, engine, NULL));
  LC_REQUIRE_OK(lc_group_connect(&rep, g, fish, 1, &ro));
  LC_REQUIRE(lc_group_report_failures(rep) == 0);
  lc_group_report_free(rep);
  LC_REQUIRE(th_ship_ctl(g, ctl) == 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 1));
  before = status_of(c, 0);
  LC_CHECK(before.pid > 1);
  LC_CHECK(th_host_proc_apply(1, before.pid, "environ", th_cmdline_matches,
                              "LAZYCLUSTER_WORKER_INDEX=0") == 1);
  LC_CHECK(kill9_on(1, before.pid) == 0);
  LC_CHECK_OK(hold_until(c, LC_CLUSTER_WORKER_RESTARTED, 0, msg, sizeof(msg)));
  after = status_of(c, 0);
  LC_CHECK(after.restarts == 1 && after.port == before.port && after.last_signal == 9);
  LC_CHECK(after.pid > 1 && after.pid != before.pid);
  ask(1, after.port, text, sizeof(text));
  LC_CHECK_STR(text, "w0\n");
  lc_cluster_free(c);
  lc_group_free(g);
  check_nothing_left("^serve 637", 63700);
  th_command_type_free(m, w);
}

/* A master launcher of version 4 that runs our serve and may be restartable. */
static int master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  char cmd[4400];
  (void)self;
  (void)c;
  snprintf(cmd, sizeof(cmd), "exec '%s' serve %d master", ctl, port);
  *out = strdup(cmd);
  return *out ? 0 : -ENOMEM;
}

static void master_case(int restartable, int port) {
  lc_master_launcher *cm = NULL;
  lc_worker_launcher *w = NULL;
  lc_master_launcher m = {.version = 4, .command = master_command, .restartable = restartable};
  lc_cluster *c = NULL;
  lc_cluster_options o = options(port);
  char msg[4096], text[256], pattern[32];
  long pid;
  int master_port;
  snprintf(pattern, sizeof(pattern), "^serve %d", port / 100);
  LC_REQUIRE_OK(th_command_type(&cm, &w, master_tmpl, worker_tmpl));
  LC_REQUIRE_OK(lc_cluster_new(&c, group, &m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  master_port = lc_cluster_master_port(c);
  pid = lc_process_pid(lc_cluster_master_process(c));
  LC_CHECK(pid > 1);
  LC_CHECK(th_proc_apply(pid, "cmdline", th_cmdline_matches, "serve") == 1);
  LC_CHECK(kill((pid_t)pid, SIGKILL) == 0);
  if (!restartable) {
    LC_CHECK(hold_until(c, LC_CLUSTER_MASTER_DOWN, -1, msg, sizeof(msg)) == LC_EREMOTE);
    LC_CHECK_CONTAINS(msg, "localhost master ended: it was ended by signal 9");
    LC_CHECK(event_count(LC_CLUSTER_MASTER_RESTARTED, -1) == 0);
  } else {
    LC_CHECK_OK(hold_until(c, LC_CLUSTER_MASTER_RESTARTED, -1, msg, sizeof(msg)));
    LC_CHECK(event_count(LC_CLUSTER_MASTER_DOWN, -1) == 1);
    LC_CHECK(lc_cluster_master_restarts(c) == 1);
    LC_CHECK(lc_cluster_master_port(c) == master_port);
    LC_CHECK(lc_process_pid(lc_cluster_master_process(c)) != pid);
    ask(-1, master_port, text, sizeof(text));
    LC_CHECK_STR(text, "master\n");
    ask(2, master_port, text, sizeof(text)); /* through the tunnel, which stayed */
    LC_CHECK_STR(text, "master\n");
    LC_CHECK(status_of(c, 0).state == LC_WORKER_RUNNING && status_of(c, 0).restarts == 0);
    LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);
  }
  lc_cluster_free(c);
  check_nothing_left(pattern, port);
  th_command_type_free(cm, w);
}

static void test_master_end(void) {
  fprintf(stderr, "  not restartable\n");
  master_case(0, 63800);
  fprintf(stderr, "  restartable\n");
  master_case(1, 63900);
}

/* A restartable master whose restarts fail at once (its first start runs our serve). */
static int failing_master_calls;
static int failing_master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  (void)self;
  (void)c;
  if (failing_master_calls++ == 0)
    return master_command(self, c, port, out);
  *out = strdup("echo no master this time >&2; exit 1");
  return *out ? 0 : -ENOMEM;
}

/* A worker that ended while the master is down (in its backoff) waits for the master: it is not
 * restarted against no master, which would spend its restart budget for the master's end. The
 * master's restarts fail until it is given up (3 within the window): the worker was never
 * restarted, and it is still in its backoff. */
static void test_master_down_holds_workers(void) {
  lc_master_launcher *cm = NULL;
  lc_worker_launcher *w = NULL;
  lc_master_launcher m = {.version = 4, .command = failing_master_command, .restartable = 1};
  lc_cluster *c = NULL;
  lc_cluster_options o = options(63600);
  char msg[4096];
  long mpid, wpid;
  failing_master_calls = 0;
  o.max_restarts = 3;
  LC_REQUIRE_OK(th_command_type(&cm, &w, master_tmpl, worker_tmpl));
  LC_REQUIRE_OK(lc_cluster_new(&c, group, &m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  mpid = lc_process_pid(lc_cluster_master_process(c));
  wpid = status_of(c, 0).pid;
  LC_CHECK(mpid > 1 && wpid > 1);
  LC_CHECK(kill((pid_t)mpid, SIGKILL) == 0);
  LC_CHECK(kill9_on(atoi(status_of(c, 0).host + 3), wpid) == 0);
  LC_CHECK(hold_until(c, LC_CLUSTER_WORKER_RESTARTED, 0, msg, sizeof(msg)) == LC_EREMOTE);
  LC_CHECK_CONTAINS(msg, "master ended 4 times within");
  LC_CHECK_CONTAINS(msg, "given up");
  LC_CHECK(event_count(LC_CLUSTER_MASTER_DOWN, -1) >= 3);
  LC_CHECK(event_count(LC_CLUSTER_WORKER_DOWN, 0) == 1);
  LC_CHECK(event_count(LC_CLUSTER_WORKER_RESTARTED, 0) == 0);
  LC_CHECK(status_of(c, 0).state == LC_WORKER_BACKOFF && status_of(c, 0).restarts == 0);
  lc_cluster_free(c);
  check_nothing_left("^serve 636", 63600);
  th_command_type_free(cm, w);
}

/* ttl 3 s: -ETIME and EXPIRED, from the end of the start. */
static void test_ttl(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = options(64000);
  long long left;
  struct timespec t0, t1;
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.ttl_ms = 3000;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK(lc_cluster_time_left_ms(c) == 3000);
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  clock_gettime(CLOCK_MONOTONIC, &t0);
  left = lc_cluster_time_left_ms(c);
  LC_CHECK(left > 0 && left <= 3000);
  LC_CHECK(lc_cluster_wait(c, BOUND_MS) == -ETIME);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  LC_CHECK_CONTAINS(lc_error_last(), "the cluster's time limit of 3 s is up");
  LC_CHECK(event_count(LC_CLUSTER_EXPIRED, -1) == 1);
  LC_CHECK(lc_cluster_time_left_ms(c) == 0);
  LC_CHECK(t1.tv_sec - t0.tv_sec >= 2); /* not before its time (3 s less rounding) */
  lc_cluster_free(c);
  check_nothing_left("^serve 640", 64000);
  th_command_type_free(m, w);
  {
    lc_cluster_options bad = LC_CLUSTER_OPTIONS_INIT;
    lc_master_launcher *m2 = NULL;
    lc_worker_launcher *w2 = NULL;
    LC_REQUIRE_OK(th_command_type(&m2, &w2, master_tmpl, worker_tmpl));
    bad.restart = 7;
    LC_CHECK(lc_cluster_new(&c, group, m2, w2, &bad) == -EINVAL);
    LC_CHECK_CONTAINS(lc_error_last(), "restart policy 7 is unknown");
    bad.restart = 0;
    bad.ttl_ms = -1;
    LC_CHECK(lc_cluster_new(&c, group, m2, w2, &bad) == -EINVAL);
    LC_CHECK_CONTAINS(lc_error_last(), "ttl_ms -1 is negative");
    th_command_type_free(m2, w2);
  }
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_kill9_restarts_worker),
      LC_TEST(test_restart_budget),
      LC_TEST(test_policies),
      LC_TEST(test_fish_user_restarts),
      LC_TEST(test_master_end),
      LC_TEST(test_master_down_holds_workers),
      LC_TEST(test_ttl),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  th_group_setup(&engine, &group, hosts, HOSTS, ctl);
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_group_free(group);
  lc_engine_free(engine);
  return r;
}
