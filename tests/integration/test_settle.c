/*
 * test_settle.c - after a host loss, the lost connection's processes end as soon as the host
 * answers again (the runtime's sweep, src/runtime.c), not when their heartbeat limit runs out,
 * and nothing else of the same user on that host is touched.
 *
 * A cluster of the command type on lab0 and lcfish@lab1 (a plain user whose login shell is
 * fish) with the default keepalive (30 s) and a heartbeat limit of 300 s (so that without the
 * sweep the old worker would outlive the test's bounds by minutes); beside it, a runtime of its
 * own to lcfish@lab1 (another connection, keepalive 120 s: it survives the cut) runs a process
 * under a lifeline of its own. lab1's link goes down for 35 s (lost at ~30 s), then up: the old
 * worker on lab1 is gone within a few seconds of the link coming back, the host is back
 * (HOST_BACK) and its worker runs again with a new process; the other connection's process still
 * runs. After that, and after everything is freed: nothing left on any host (processes,
 * lifelines, listeners, working directories).
 */
#include "clusterenv.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <time.h>

#define HOSTS 2
#define LOST 1

static lc_engine *engine;
static char ctl[4096];
static char master_tmpl[4200];
static const char *hosts[] = {"lab0", "lcfish@lab1"};
static const char *worker_tmpl = "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct seen {
  int lost, back;
} seen;

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  seen *s = payload;
  (void)c;
  if (ev == LC_CLUSTER_HOST_LOST && index == LOST)
    s->lost++;
  if (ev == LC_CLUSTER_HOST_BACK && index == LOST)
    s->back++;
}

/* A command run in host i's namespace (also while our connection is down): its first number. */
static int count_on(int i, const char *sh) {
  char cmd[2048];
  FILE *p;
  int n = -1;
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- sh -c \"%s\"", th_script(), i, th_dir(), sh);
  if ((p = popen(cmd, "r")) != NULL) { /* NOLINT(cert-env33-c): the testhosts script */
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

/* Working directories of this process under lab0's root and lab1's lcfish. */
static int workdirs(void) {
  char sh[512];
  int n = 0, k;
  snprintf(sh, sizeof(sh),
           "ls -A /root/.cache/lazycluster ~lcfish/.cache/lazycluster 2>/dev/null | "
           "grep -c -- -%d\\\\.",
           (int)getpid());
  for (int i = 0; i < HOSTS; i++)
    n += (k = count_on(i, sh)) < 0 ? 100 : k;
  return n;
}

static int listeners(int lo, int hi) {
  char sh[512];
  int n = 0, k;
  snprintf(sh, sizeof(sh),
           "ss -Hltn | awk '{n=split(\\$4,a,\\\":\\\"); if (a[n]>=%d && a[n]<=%d) c++} END "
           "{print c+0}'",
           lo, hi);
  for (int i = 0; i < HOSTS; i++)
    n += (k = count_on(i, sh)) < 0 ? 100 : k;
  return n;
}

/* Processes whose command line holds text, on every host. */
static int procs(const char *text) {
  int n = 0;
  for (int i = 0; i < HOSTS; i++)
    n += th_count_procs(i, text);
  return n;
}

/* Whether lab1 (LOST, where every process this test follows runs) has pid with that command. */
static int alive(long pid, const char *cmdline_start) {
  return th_host_proc_apply(LOST, pid, "cmdline", th_cmdline_matches, cmdline_start);
}

/* Holds the cluster (lc_cluster_wait) until done(s) or limit_ms; the time taken. */
static long long hold(lc_cluster *c, seen *s, int (*done)(seen *, void *), void *arg,
                      long long limit_ms) {
  long long t0 = now_ms();
  while (!done(s, arg) && now_ms() - t0 < limit_ms) {
    int r = lc_cluster_wait(c, 200);
    if (r != -ETIMEDOUT)
      fprintf(stderr, "  lc_cluster_wait: %d %s\n", r, lc_error_last());
  }
  return now_ms() - t0;
}

static int is_lost(seen *s, void *arg) {
  (void)arg;
  return s->lost > 0;
}
static int never(seen *s, void *arg) {
  (void)s;
  (void)arg;
  return 0;
}
typedef struct old_proc {
  long pid;
  char start[64];
} old_proc;
static int old_gone(seen *s, void *arg) {
  const old_proc *o = arg;
  (void)s;
  return !alive(o->pid, o->start);
}
static int is_back(seen *s, void *arg) {
  (void)arg;
  return s->back > 0;
}

/* Everything of the test gone: the cluster's processes, lifelines (ours and the sweep's),
 * listeners, working directories; bounded polls, the hosts end things asynchronously. */
static void check_nothing_left(void) {
  int p = -1, l = -1, d = -1, s = -1;
  for (int t = 0; t < 40 && (p != 0 || l != 0 || d != 0 || s != 0); t++) {
    if (t > 0)
      usleep(500 * 1000);
    p = th_count_everywhere(HOSTS, "^serve 647") + procs("sleep 4343");
    s = procs("lc-lifeline") + procs("lc-run");
    l = listeners(64700, 64730);
    d = workdirs();
  }
  fprintf(stderr, "  left: %d processes, %d lifelines or commands, %d listeners, %d directories\n",
          p, s, l, d);
  LC_CHECK(p == 0 && s == 0 && l == 0 && d == 0);
}

static void test_sweep_after_loss(void) {
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options(), bo = th_options();
  lc_runtime *other = NULL;
  lc_process *bystander = NULL;
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  seen s = {0};
  old_proc old = {0};
  long bpid = 0, newpid = 0;
  long long down_at, up_at, took;
  int port;

  ro.heartbeat_timeout_ms = 300000; /* keepalive: the default, 30 s */
  LC_REQUIRE_OK(lc_group_new(&g, engine, NULL));
  LC_REQUIRE(lc_group_connect(&rep, g, hosts, HOSTS, &ro) == 0 &&
             lc_group_report_failures(rep) == 0);
  lc_group_report_free(rep);
  LC_REQUIRE(th_ship_ctl(g, ctl) == 0);

  /* another connection of the same user to the same host, with a lifeline of its own */
  bo.keepalive_timeout_ms = 120000;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&other, engine, "lcfish@lab1", &bo));
  LC_REQUIRE_OK(lc_runtime_spawn(&bystander, other, "exec sleep 4343", NULL));
  for (int t = 0; t < 300 && (bpid = lc_process_pid(bystander)) == 0; t++)
    usleep(50 * 1000);
  LC_REQUIRE(bpid > 1);

  LC_REQUIRE_OK(th_command_type_with(&m, &w, master_tmpl, worker_tmpl, NULL));
  o.master_port = 64700;
  o.worker_ports = "64701-64730";
  o.host_loss = LC_HOST_LOSS_WAIT;
  o.on_event = on_event;
  o.payload = &s;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  LC_REQUIRE(strcmp(lc_cluster_worker(c, 1)->host, "lcfish@lab1") == 0);
  port = lc_cluster_worker(c, 1)->port;
  old.pid = lc_process_pid(lc_cluster_worker_process(c, 1));
  snprintf(old.start, sizeof(old.start), "lazyclusterctl serve %d w1", port);
  fprintf(stderr, "  old worker pid %ld, other connection's process pid %ld\n", old.pid, bpid);
  LC_REQUIRE(old.pid > 1 && alive(old.pid, old.start));
  LC_REQUIRE(alive(bpid, "^sleep 4343"));

  LC_REQUIRE(th_run("link-down %d", LOST) == 0);
  down_at = now_ms();
  took = hold(c, &s, is_lost, NULL, 60000);
  fprintf(stderr, "  lost after %.1f s\n", took / 1000.0);
  LC_CHECK(s.lost == 1);
  hold(c, &s, never, NULL, 35000 - (now_ms() - down_at));
  LC_CHECK(alive(old.pid, old.start)); /* the host did not notice: sshd holds its channel */
  LC_REQUIRE(th_run("link-up %d", LOST) == 0);
  up_at = now_ms();

  /* without the sweep it would run until its heartbeat limit, 300 s */
  took = hold(c, &s, old_gone, &old, 90000);
  fprintf(stderr, "  the old worker gone %.1f s after link-up\n", took / 1000.0);
  LC_CHECK(!alive(old.pid, old.start));
  LC_CHECK(took < 45000);
  took = hold(c, &s, is_back, NULL, 90000 - (now_ms() - up_at));
  fprintf(stderr, "  back %.1f s after link-up\n", (now_ms() - up_at) / 1000.0);
  LC_CHECK(s.back == 1);
  hold(c, &s, never, NULL, 1000); /* its waiting worker starts in the tick after HOST_BACK */
  LC_CHECK(lc_cluster_worker_process(c, 1) != NULL);
  if (lc_cluster_worker_process(c, 1) != NULL)
    for (int t = 0; t < 300 && (newpid = lc_process_pid(lc_cluster_worker_process(c, 1))) == 0; t++)
      usleep(50 * 1000);
  LC_CHECK(newpid > 1 && newpid != old.pid && alive(newpid, old.start));
  LC_CHECK_CONTAINS(lc_cluster_log(c), "lcfish@lab1 back");
  /* the token, not the user or the host, chose: the other connection's process still runs */
  LC_CHECK(alive(bpid, "^sleep 4343"));
  LC_CHECK(lc_process_wait(NULL, bystander, 0) == -ETIMEDOUT);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 647") == 3); /* master, 2 workers: no old one */
  LC_CHECK(procs("lost-sweep") == 0);

  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
  LC_CHECK(alive(bpid, "^sleep 4343"));
  lc_process_stop(bystander);
  lc_process_wait(NULL, bystander, 30000);
  lc_process_free(bystander);
  lc_runtime_free(other);
  check_nothing_left();
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_sweep_after_loss),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  th_run("link-up %d", LOST); /* whatever happened */
  lc_engine_free(engine);
  return r;
}
