/*
 * test_scale.c - lc_cluster_scale with the command type on real test hosts: 2 -> 5 -> 1 -> 3
 * workers. Up: more workers with the next indices, reachable through their tunnels. Down: the
 * highest indices go (WORKER_REMOVED each, highest first), and with them their processes, their
 * ports (free again here and on every host: no worker and no tunnel listens there any more),
 * their tunnels on every host and their directories; up again: the removed indices come back.
 * Bad input (n < 0) is refused and named. After lc_cluster_free nothing is left on any host.
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define HOSTS 3

static lc_engine *engine;
static lc_group *group;
static char ctl[4096];
static char master_tmpl[4200];
static const char *hosts[] = {"lab0", "lab1", "lab2"};
static const char *worker_tmpl = "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

/* The line a service on localhost:port of host i answers, or "". */
static void answer_on(char *out, size_t size, int i, int port) {
  collect col;
  lc_exec_result res;
  char cmd[256];
  out[0] = '\0';
  snprintf(cmd, sizeof(cmd),
           "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && read -r l <&3 && echo \"$l\"' 2>/dev/null",
           port);
  if (collect_exec(&col, &res, lc_group_at(group, (size_t)i), cmd, NULL) == 0 &&
      col.text[0] != NULL)
    snprintf(out, size, "%s", col.text[0]);
  collect_free(&col);
}

/* Whether port listens on host i (a worker or a tunnel). */
static int listens_on(int i, int port) {
  lc_ports *l = NULL;
  int up = lc_ports_listening(&l, lc_group_at(group, (size_t)i), 10000) == 0 &&
           lc_ports_contains(l, port);
  lc_ports_free(l);
  return up;
}

/* Whether path exists on host i. */
static int exists_on(int i, const char *path) {
  lc_exec_result res;
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "test -e '%s'", path);
  return lc_runtime_exec(&res, lc_group_at(group, (size_t)i), cmd, NULL) == 0 &&
         res.exit_status == 0;
}

static int host_of(const char *name) { return name[3] - '0'; }

typedef struct events {
  int removed[16], nremoved;
  int up;
} events;

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  events *e = payload;
  (void)c;
  if (ev == LC_CLUSTER_WORKER_REMOVED && e->nremoved < 16)
    e->removed[e->nremoved++] = index;
  if (ev == LC_CLUSTER_WORKER_UP)
    e->up++;
}

/* Every worker of c answers as itself here and on every host (its tunnels). */
static void check_reachable(lc_cluster *c) {
  char text[256], want[32];
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *w = lc_cluster_worker(c, i);
    LC_CHECK(w->index == (int)i);
    snprintf(want, sizeof(want), "w%zu\n", i);
    th_answer_here(text, sizeof(text), w->port);
    LC_CHECK_STR(text, want);
    for (int h = 0; h < HOSTS; h++) {
      answer_on(text, sizeof(text), h, w->port);
      LC_CHECK_STR(text, want);
    }
  }
}

static void test_scale_up_down_up(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  events ev = {0};
  int gone_port[5] = {0}, gone_host[5] = {0};
  char gone_dir[5][4096];

  LC_REQUIRE_OK(th_command_type_with(&m, &w, master_tmpl, worker_tmpl, "expose=mesh"));
  o.master_port = 62400;
  o.worker_ports = "62401-62450";
  o.on_event = on_event;
  o.payload = &ev;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  LC_CHECK(lc_cluster_scale(c, 2) == 0); /* as many as there are: nothing happens */
  LC_CHECK(lc_cluster_worker_count(c) == 2 && ev.up == 2 && ev.nremoved == 0);

  LC_REQUIRE_OK(lc_cluster_scale(c, 5));
  LC_REQUIRE(lc_cluster_worker_count(c) == 5);
  LC_CHECK(ev.up == 5);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 6);
  check_reachable(c);
  for (int i = 1; i < 5; i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, (size_t)i);
    gone_port[i] = wi->port;
    gone_host[i] = host_of(wi->host);
    snprintf(gone_dir[i], sizeof(gone_dir[i]), "%s", wi->workdir);
    LC_CHECK(exists_on(gone_host[i], gone_dir[i]));
  }

  LC_REQUIRE_OK(lc_cluster_scale(c, 1));
  LC_CHECK(lc_cluster_worker_count(c) == 1);
  LC_CHECK(lc_cluster_worker(c, 1) == NULL);
  LC_CHECK(ev.nremoved == 4);
  for (int k = 0; k < ev.nremoved && k < 4; k++)
    LC_CHECK(ev.removed[k] == 4 - k); /* the highest first */
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 2);
  for (int i = 1; i < 5; i++) {
    LC_CHECK(!lc_port_is_reserved(gone_port[i]));
    LC_CHECK(lc_port_is_free_local(gone_port[i]) == 1); /* no tunnel here */
    for (int h = 0; h < HOSTS; h++)
      LC_CHECK(!listens_on(h, gone_port[i])); /* neither the worker nor a tunnel */
    LC_CHECK(!exists_on(gone_host[i], gone_dir[i]));
  }
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-4 removed");
  check_reachable(c); /* worker 0 still answers everywhere */

  LC_REQUIRE_OK(lc_cluster_scale(c, 3));
  LC_CHECK(lc_cluster_worker_count(c) == 3);
  LC_CHECK(ev.up == 7);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 4);
  check_reachable(c); /* indices 1 and 2 again */
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);

  /* bad input */
  LC_CHECK(lc_cluster_scale(c, -1) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "cannot scale to -1 workers");
  LC_CHECK(lc_cluster_worker_count(c) == 3);
  LC_CHECK(lc_cluster_scale(NULL, 1) == -EINVAL);

  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 0);
  for (int p = 62400; p <= 62410; p++)
    for (int h = 0; h < HOSTS; h++)
      LC_CHECK(!listens_on(h, p));
  th_command_type_free(m, w);
}

/* To zero and back: the master alone runs meanwhile. */
static void test_scale_to_zero(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE_OK(th_command_type_with(&m, &w, master_tmpl, worker_tmpl, "expose=mesh"));
  o.master_port = 62460;
  o.worker_ports = "62461-62490";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK(lc_cluster_scale(c, 1) == -EINVAL); /* no master yet */
  LC_CHECK_CONTAINS(lc_error_last(), "start the master first");
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  LC_REQUIRE_OK(lc_cluster_scale(c, 0));
  LC_CHECK(lc_cluster_worker_count(c) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624[6-9]") == 1);
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT); /* the master still runs */
  LC_REQUIRE_OK(lc_cluster_scale(c, 1));
  LC_CHECK(lc_cluster_worker(c, 0) != NULL && lc_cluster_worker(c, 0)->index == 0);
  check_reachable(c);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624[6-9]") == 0);
  th_command_type_free(m, w);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_scale_up_down_up),
      LC_TEST(test_scale_to_zero),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  th_group_setup(&engine, &group, hosts, HOSTS, ctl);
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_group_free(group);
  lc_engine_free(engine);
  return r;
}
