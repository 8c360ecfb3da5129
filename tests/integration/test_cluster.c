/*
 * test_cluster.c - command clusters on real test hosts: more workers than hosts, every worker's
 * context and its way to the master through the tunnels, declared GPUs, the error cases (master
 * timeout with its stderr, a master that dies, port in use, no ports left, a worker that fails at
 * start, an early worker that ends before its readiness is judged, and the same at a restart)
 * and that nothing is left on any host: after lc_cluster_free, and after SIGKILL of
 * lazyclusterctl start (no process, no listener, no working directory). The start limits: the
 * options' over the type's (launcher timeout_ms) over the library's, launchers of older versions
 * keep the library's, and a timeout's message names the limit, where it came from and what
 * changes it (the options' field; through lazyclusterctl, its flag).
 *
 * The hosts run our own `lazyclusterctl serve` as master and workers: the binary is sent to each
 * host's home first, so the build directory need not be visible there.
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define HOSTS 3

static lc_engine *engine;
static lc_group *group;
static char ctl[4096];

static const char *hosts[] = {"lab0", "lab1", "lab2"};

/* Master (on this machine): our serve. Worker: write its context, read the master through the
 * tunnel, serve. */
static char master_tmpl[4200];
static const char *worker_tmpl =
    "env | grep -E '^(LAZYCLUSTER_|TF_CONFIG|CUDA_)' | sort > ctx.txt; "
    "bash -c 'exec 3<>/dev/tcp/127.0.0.1/'\"$LAZYCLUSTER_MASTER_PORT\"'; read -r l <&3; "
    "echo \"$l\"' > master.txt; "
    "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

/* A file of a worker, read on its host. */
static void worker_file(char *out, size_t size, lc_cluster *c, size_t i, const char *name) {
  const lc_worker_info *w = lc_cluster_worker(c, i);
  lc_runtime *rt = lc_group_find(group, w->host);
  collect col;
  lc_exec_result res;
  char cmd[4200];
  out[0] = '\0';
  snprintf(cmd, sizeof(cmd), "cat '%s/%s'", w->workdir, name);
  if (rt != NULL && collect_exec(&col, &res, rt, cmd, NULL) == 0 && col.text[0] != NULL)
    snprintf(out, size, "%s", col.text[0]);
  collect_free(&col);
}

static void test_more_workers_than_hosts(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int per_host[HOSTS] = {0};
  char text[4096], want[256];
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 61000;
  o.worker_ports = "61001-61100";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 7));
  LC_CHECK(lc_cluster_master_port(c) == 61000);
  LC_CHECK_STR(lc_cluster_master_host(c), "localhost");
  LC_REQUIRE(lc_cluster_worker_count(c) == 7);
  for (size_t i = 0; i < 7; i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    per_host[atoi(wi->host + 3)]++;
    LC_CHECK(wi->index == (int)i && wi->count == 7 && wi->gpu == -1);
    LC_CHECK(wi->port >= 61001 && wi->port <= 61100);
    worker_file(text, sizeof(text), c, i, "master.txt");
    LC_CHECK_STR(text, "master\n"); /* reached the master on localhost through the tunnel */
    worker_file(text, sizeof(text), c, i, "ctx.txt");
    snprintf(want, sizeof(want), "LAZYCLUSTER_WORKER_INDEX=%zu\n", i);
    LC_CHECK_CONTAINS(text, want);
    LC_CHECK_CONTAINS(text, "LAZYCLUSTER_MASTER_ADDR=localhost\n");
    LC_CHECK_CONTAINS(text, "LAZYCLUSTER_MASTER_PORT=61000\n");
    LC_CHECK_CONTAINS(text, "LAZYCLUSTER_WORKER_COUNT=7\n");
    snprintf(want, sizeof(want), "LAZYCLUSTER_HOST=%s\n", wi->host);
    LC_CHECK_CONTAINS(text, want);
    LC_CHECK_CONTAINS(text, "TF_CONFIG={\"cluster\":{\"master\":[\"localhost:61000\"]");
    worker_file(text, sizeof(text), c, i, "cluster.json");
    LC_CHECK_CONTAINS(text, "\"worker_count\":7");
  }
  LC_CHECK(per_host[0] == 3 && per_host[1] == 2 && per_host[2] == 2); /* spread */
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 610") == 8);
  /* more workers later */
  LC_CHECK_OK(lc_cluster_start_workers(c, 2));
  LC_CHECK(lc_cluster_worker_count(c) == 9);
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT); /* all still run */
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 610") == 0);
  th_command_type_free(m, w);
}

/*
 * A context larger than LC__CONTEXT_GZ_MIN (72 workers: ~5 KB) goes to the hosts in gzip's format
 * and comes out whole: every worker's TF_CONFIG names the 72 workers' ports and its cluster.json
 * the 72 workers; lab2, whose gzip cannot run (a file that is not executable mounted over it),
 * gets it unpacked, as the start's log says. After the free nothing is left on any host.
 */
static void test_context_gzip(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  static char text[16384];
  char want[128];
  LC_REQUIRE(th_run("exec 2 -- sh -c ': > /tmp/gzip-off && mount --bind /tmp/gzip-off "
                    "/usr/bin/gzip'") == 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 62500;
  o.worker_ports = "62501-62600";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start(c, 72));
  LC_CHECK_CONTAINS(lc_cluster_log(c), "sent in gzip's format) written on 2 hosts");
  LC_CHECK_CONTAINS(lc_cluster_log(c), "gzip cannot run on 1 host: the context goes there "
                                       "unpacked");
  LC_CHECK(lc_cluster_worker_count(c) == 72);
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    const lc_worker_info *last = lc_cluster_worker(c, 71);
    worker_file(text, sizeof(text), c, i, "ctx.txt");
    snprintf(want, sizeof(want), "\"localhost:%d\"]},\"task\":{\"type\":\"worker\",\"index\":%zu}}",
             last->port, i);
    LC_CHECK_CONTAINS(text, want); /* the last worker's port ends the list */
    worker_file(text, sizeof(text), c, i, "cluster.json");
    LC_CHECK_CONTAINS(text, "\"worker_count\":72");
    snprintf(want, sizeof(want), "{\"index\":71,\"host\":\"%s\",\"port\":%d,", last->host,
             last->port);
    LC_CHECK_CONTAINS(text, want);
    LC_CHECK(wi->index == (int)i);
  }
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 625") == 73);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 625") == 0);
  th_command_type_free(m, w);
  LC_CHECK(th_run("exec 2 -- sh -c 'umount /usr/bin/gzip'") == 0);
}

/* Every worker of c reached the master (its master.txt) and was told its port (ctx.txt). */
static void check_workers_reached_master(lc_cluster *c, int port) {
  char text[4096], want[128];
  snprintf(want, sizeof(want), "LAZYCLUSTER_MASTER_PORT=%d\n", port);
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    worker_file(text, sizeof(text), c, i, "master.txt");
    LC_CHECK_STR(text, "master\n");
    worker_file(text, sizeof(text), c, i, "ctx.txt");
    LC_CHECK_CONTAINS(text, want);
  }
}

/* tmpl, made to die once of "Address already in use" (before mark exists), as a process whose
 * port was taken after all, and to run normally afterwards. */
static void fail_once(char *out, size_t size, const char *mark, const char *tmpl) {
  snprintf(out, size,
           "if [ ! -e %s ]; then : > %s; echo 'bind: Address already in use' >&2; exit 1; fi; %s",
           mark, mark, tmpl);
}

/* A master that dies of "address in use" on its first port moves to another; early workers,
 * started before it was ready, are taken down and started again with the new port. */
static void test_master_moves_with_early_workers(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char mark[64], tmpl[4400];
  int port;
  snprintf(mark, sizeof(mark), "/tmp/lc-test-moved-%d", (int)getpid());
  unlink(mark);
  fail_once(tmpl, sizeof(tmpl), mark, master_tmpl);
  LC_REQUIRE_OK(th_command_type(&m, &w, tmpl, worker_tmpl));
  LC_REQUIRE(w->version >= 2);
  w->early = 1;
  o.master_port = 61800;
  o.worker_ports = "61801-61850";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start(c, 3));
  port = lc_cluster_master_port(c);
  LC_CHECK(port != 61800 && port >= 61801 && port <= 61850);
  LC_CHECK(lc_cluster_worker_count(c) == 3);
  check_workers_reached_master(c, port); /* the restarted workers too */
  /* one master and three workers: the first generation of workers is gone */
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 618") == 4);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 618") == 0);
  th_command_type_free(m, w);
  unlink(mark);
}

/* The command type's own master command, and the port that the wrapper below takes on lab2 the
 * moment the master's command is asked for it: after the listing, as a connection that the kernel
 * gives that port as its local port does (held: its two ends, -1 until then). */
static int (*own_master_command)(lc_master_launcher *self, lc_cluster *cluster, int port,
                                 char **out);
static int take_port = -1, taken[2] = {-1, -1};

static int command_then_take(lc_master_launcher *self, lc_cluster *cluster, int port, char **out) {
  if (port == take_port && taken[0] < 0 && th_hold_port_by_connection(2, port, taken) < 0)
    return -EIO; /* the test could not take the port on lab2 */
  return own_master_command(self, cluster, port, out);
}

/* The master's port held on a host by a connection's local port, nothing listening there:
 * before the start, the listing sees it and the master takes another port at once. */
static void test_master_port_held_before_the_start(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int held[2], port;
  LC_REQUIRE(th_hold_port_by_connection(2, 61660, held) == 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 61660;
  o.worker_ports = "61661-61690";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start(c, 3));
  port = lc_cluster_master_port(c);
  LC_CHECK(port >= 61661 && port <= 61690);
  LC_CHECK(strstr(lc_cluster_log(c), "taken after all") == NULL); /* no second attempt */
  check_workers_reached_master(c, port);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616[6-9]") == 4);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616[6-9]") == 0);
  /* that port or nothing: the error names the port and the host */
  o.master_port_fixed = 1;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK(lc_cluster_start(c, 3) == -EADDRINUSE);
  LC_CHECK_CONTAINS(lc_error_last(), "port 61660 is in use on lab2");
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616[6-9]") == 0);
  th_command_type_free(m, w);
  close(held[1]);
  close(held[0]);
}

/* The master's port taken on a host after the listing, by a connection's local port (the
 * listing could not see it then): the master's tunnel there cannot listen, and the master moves
 * to another port with its tunnels; the workers reach it there. */
static void test_master_moves_when_its_tunnel_port_is_taken(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int *held = taken, port;
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  own_master_command = m->command;
  m->command = command_then_take;
  take_port = 61600;
  o.master_port = 61600;
  o.worker_ports = "61601-61650";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start(c, 3));
  port = lc_cluster_master_port(c);
  LC_CHECK(port != 61600 && port >= 61601 && port <= 61650);
  LC_CHECK_CONTAINS(lc_cluster_log(c),
                    "port 61600 was taken after all (port 61600 is in use on lab2");
  check_workers_reached_master(c, port);                   /* through their tunnels */
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == 4); /* the first master is gone */
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == 0);
  LC_CHECK(held[0] >= 0); /* the wrapper did take it */
  m->command = own_master_command;
  th_command_type_free(m, w);
  close(held[1]);
  close(held[0]);
  held[0] = held[1] = take_port = -1;
}

/* Workers whose port is taken after all (here: each says "Address already in use" and dies on its
 * first run, as when an outgoing connection on the host took the port after the listing) are
 * started again, all of them, on other ports; every worker's context names the final ports. */
static void test_workers_move_when_port_taken(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char mark[4200], tmpl[8800], text[4096], want[128];
  snprintf(mark, sizeof(mark), "%s/worker-port-taken-$LAZYCLUSTER_WORKER_INDEX", th_dir());
  fail_once(tmpl, sizeof(tmpl), mark, worker_tmpl);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, tmpl));
  o.master_port = 61900;
  o.worker_ports = "61901-61950";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start(c, 3));
  LC_CHECK_CONTAINS(lc_cluster_log(c), "taken after all");
  LC_CHECK(lc_cluster_worker_count(c) == 3);
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    LC_CHECK(wi->port >= 61904 && wi->port <= 61950); /* 61901-61903 were the first, taken */
    worker_file(text, sizeof(text), c, i, "master.txt");
    LC_CHECK_STR(text, "master\n");
    worker_file(text, sizeof(text), c, i, "ctx.txt");
    for (size_t j = 0; j < lc_cluster_worker_count(c); j++) {
      snprintf(want, sizeof(want), ":%d", lc_cluster_worker(c, j)->port);
      LC_CHECK_CONTAINS(text, want); /* TF_CONFIG lists every worker's final port */
    }
  }
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 619") == 4);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 619") == 0);
  th_command_type_free(m, w);
  for (int i = 0; i < 3; i++) {
    snprintf(text, sizeof(text), "%s/worker-port-taken-%d", th_dir(), i);
    unlink(text);
  }
}

static void test_declared_gpus(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char text[4096];
  lc_runtime_set_resources(lc_group_find(group, "lab0"), 2, 0);
  lc_runtime_set_resources(lc_group_find(group, "lab1"), -1, 3);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 61200;
  o.worker_ports = "61201-61300";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  /* slots: lab0 gpu 0 and 1, lab1 x3, lab2 x1; spread: lab0, lab1, lab2, lab0, lab1, lab1 */
  LC_CHECK_OK(lc_cluster_start(c, 6));
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    if (strcmp(wi->host, "lab0") == 0) {
      char want[64];
      LC_CHECK(wi->gpu == (int)i / 3); /* workers 0 and 3 */
      worker_file(text, sizeof(text), c, i, "ctx.txt");
      snprintf(want, sizeof(want), "CUDA_VISIBLE_DEVICES=%d\n", wi->gpu);
      LC_CHECK_CONTAINS(text, want);
      LC_CHECK_CONTAINS(text, "CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
    } else {
      LC_CHECK(wi->gpu == -1);
    }
  }
  LC_CHECK(lc_cluster_worker_count(c) == 6 && strcmp(lc_cluster_worker(c, 1)->host, "lab1") == 0 &&
           strcmp(lc_cluster_worker(c, 2)->host, "lab2") == 0 &&
           strcmp(lc_cluster_worker(c, 3)->host, "lab0") == 0 &&
           strcmp(lc_cluster_worker(c, 5)->host, "lab1") == 0);
  lc_cluster_free(c);
  lc_runtime_set_resources(lc_group_find(group, "lab0"), -1, 0);
  lc_runtime_set_resources(lc_group_find(group, "lab1"), -1, 0);
  th_command_type_free(m, w);
}

static void test_master_errors(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  lc_process *blocker = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;
  /* not ready in time: the error carries what it wrote to stderr */
  LC_REQUIRE_OK(th_command_type(&m, &w, "echo boom-from-master >&2; exec sleep 30", worker_tmpl));
  o.master_port = 61400;
  o.master_timeout_ms = 1500;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "boom-from-master");
  LC_CHECK_CONTAINS(lc_error_last(), "within 1.5 s (the master timeout given; "
                                     "lc_cluster_options.master_timeout_ms changes it)");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  /* it dies: its exit status and stderr */
  LC_REQUIRE_OK(th_command_type(&m, &w, "echo dying-now >&2; exit 3", worker_tmpl));
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "status 3");
  LC_CHECK_CONTAINS(lc_error_last(), "dying-now");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  /* port in use on a host: a fixed port fails naming it; otherwise another port is taken */
  eo.timeout_ms = 0;
  LC_REQUIRE_OK(lc_runtime_spawn(&blocker, lc_group_find(group, "lab1"),
                                 "exec ~/lcbin/lazyclusterctl serve 61500 blocker", &eo));
  for (int i = 0; i < 100 && th_count_procs(1, "^serve 61500") == 0; i++)
    lc_process_wait(NULL, blocker, 50);
  lc_process_wait(NULL, blocker, 300);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 61500;
  o.master_port_fixed = 1;
  o.master_timeout_ms = 5000;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -EADDRINUSE);
  LC_CHECK_CONTAINS(lc_error_last(), "port 61500 is in use on lab1");
  lc_cluster_free(c);
  o.master_port_fixed = 0;
  o.worker_ports = "61501-61510";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK_OK(lc_cluster_start_master(c));
  LC_CHECK(lc_cluster_master_port(c) == 61501);
  lc_cluster_free(c);
  lc_process_free(blocker);
  th_command_type_free(m, w);
}

static void test_worker_errors(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int r;
  /* no ports left for the workers */
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 61600;
  o.worker_ports = "61601";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start_master(c));
  r = lc_cluster_start_workers(c, 2);
  LC_CHECK(r == LC_ENOPORTS);
  LC_CHECK_CONTAINS(lc_error_last(), "61601");
  LC_CHECK(lc_cluster_worker_count(c) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 6160") ==
           1); /* the master only: the start was undone */
  lc_cluster_free(c);
  th_command_type_free(m, w);
  /* worker 1 fails at start: host, index, status and stderr; the others of that start go */
  LC_REQUIRE_OK(
      th_command_type(&m, &w, master_tmpl,
                      "[ {worker_index} != 1 ] || {{ echo bad-worker-here >&2; exit 7; }}; "
                      "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}"));
  o.worker_ports = "61601-61650";
  o.worker_timeout_ms = 20000;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start_master(c));
  r = lc_cluster_start_workers(c, 3);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1 worker-1");
  LC_CHECK_CONTAINS(lc_error_last(), "status 7");
  LC_CHECK_CONTAINS(lc_error_last(), "bad-worker-here");
  LC_CHECK(lc_cluster_worker_count(c) == 0);
  for (int i = 0; i < 100 && th_count_everywhere(HOSTS, "^serve 616") > 1; i++)
    usleep(50 * 1000);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == 1);
  lc_cluster_free(c);
  th_command_type_free(m, w);
  /* an unknown placeholder is refused when the type is made, quoting it */
  LC_CHECK(th_command_type(&m, &w, master_tmpl, "serve {worker_prot}") == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "{worker_prot}");
}

/* Masters that never listen ("sleep 61" on this machine), to time out: nothing of them is left. */
static int count_sleepers(void) {
  int n = th_each_local_proc("cmdline", th_cmdline_matches, "^sleep 61");
  for (int i = 0; i < HOSTS; i++)
    n += th_count_procs(i, "^sleep 61");
  return n;
}

static void wait_no_sleepers(void) {
  for (int i = 0; i < 100 && count_sleepers() > 0; i++)
    usleep(100 * 1000);
  LC_CHECK(count_sleepers() == 0);
}

/*
 * Which start limit holds, and what its message says: the type's (the launcher's timeout_ms) when
 * the options set none; the options' over it; the library's for a launcher of version 1 (its
 * struct ends before timeout_ms, so the field must not be read); the option's name in the message
 * from lc_cluster_options v3 (copied), not from an older version's struct.
 */
static void test_timeout_sources(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char flag[32];
  int r;
  LC_REQUIRE_OK(th_command_type(&m, &w, "exec sleep 61", worker_tmpl));
  LC_CHECK(m->version == LC_MASTER_LAUNCHER_VERSION && w->version == LC_WORKER_LAUNCHER_VERSION);
  LC_CHECK_STR(m->type_name, "command");
  LC_CHECK(m->timeout_ms == 0 && w->timeout_ms == 0); /* command: the library's limits */
  o.master_port = 61800;
  o.worker_ports = "61801-61850";
  /* the type's limit */
  m->timeout_ms = 1200;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "localhost: the master did not start on port 61800 within "
                                     "1.2 s (the command type's default master timeout; "
                                     "lc_cluster_options.master_timeout_ms changes it): it still "
                                     "runs");
  lc_cluster_free(c);
  /* the options' over the type's; the option named as the caller says */
  o.master_timeout_ms = 700;
  snprintf(flag, sizeof(flag), "--master-timeout S");
  o.master_timeout_option = flag;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  flag[0] = 'X'; /* copied by lc_cluster_new */
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(),
                    "within 0.7 s (the master timeout given; --master-timeout S changes it)");
  lc_cluster_free(c);
  /* options of version 2 end before master_timeout_option: it is not read */
  o.version = 2;
  snprintf(flag, sizeof(flag), "--master-timeout S");
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "within 0.7 s (the master timeout given; "
                                     "lc_cluster_options.master_timeout_ms changes it)");
  lc_cluster_free(c);
  o.version = LC_CLUSTER_OPTIONS_VERSION;
  o.master_timeout_option = NULL;
  o.master_timeout_ms = 0;
  /* a version 1 master launcher: its timeout_ms is not read; the library's 3 s hold */
  m->version = 1;
  m->timeout_ms = 1; /* would time out at once if it were read */
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start_master(c);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "within 3 s (the default master timeout; "
                                     "lc_cluster_options.master_timeout_ms changes it)");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  wait_no_sleepers();
  /* the workers' limit from the type: a worker that never listens */
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, "exec sleep 61"));
  w->timeout_ms = 1000;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start_master(c));
  r = lc_cluster_start_workers(c, 1);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "lab0 worker-0 did not listen on port ");
  LC_CHECK_CONTAINS(lc_error_last(), " within 1 s (the command type's default worker timeout; "
                                     "lc_cluster_options.worker_timeout_ms changes it): it still "
                                     "runs");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  wait_no_sleepers();
}

/* lazyclusterctl with args, to its end. */
static int run_ctl(const char *const *args, char *out, size_t size) {
  return th_run_ctl(ctl, args, 0, out, size);
}

/* `start` on lab0 with one worker, these commands, and a limit flag and value unless NULL. */
static const char *const *start_argv(const char *argv[18], const char *master, const char *worker,
                                     const char *flag, const char *value) {
  const char *words[18] = {"start",       "-F",
                           th_config(),   "--hosts",
                           "lab0",        "--workers",
                           "1",           "--master-port",
                           "61860",       "--ports",
                           "61861-61890", "--master-cmd",
                           master,        "--worker-cmd",
                           worker,        flag,
                           value,         NULL};
  memcpy(argv, words, sizeof(words));
  return argv;
}

/* lazyclusterctl start with the command type's defaults (no limit given) and with the limits
 * given: a timeout names the limit, where it came from, and the flag that changes it. */
static void test_cli_timeout_messages(void) {
  char out[16384];
  const char *argv[18];
  LC_CHECK(run_ctl(start_argv(argv, "echo held-back >&2; exec sleep 61", worker_tmpl, NULL, NULL),
                   out, sizeof(out)) == 1);
  LC_CHECK_CONTAINS(out, "the cluster did not start: localhost: the master did not start on port "
                         "61860 within 3 s (the default master timeout; --master-timeout S "
                         "changes it): it still runs; its last stderr lines:");
  LC_CHECK_CONTAINS(out, "held-back");
  LC_CHECK(run_ctl(start_argv(argv, "echo held-back >&2; exec sleep 61", worker_tmpl,
                              "--master-timeout", "1.5"),
                   out, sizeof(out)) == 1);
  LC_CHECK_CONTAINS(out, "within 1.5 s (the master timeout given; --master-timeout S changes "
                         "it): it still runs");
  LC_CHECK(run_ctl(start_argv(argv, master_tmpl, "exec sleep 61", "--timeout", "1"), out,
                   sizeof(out)) == 1);
  LC_CHECK_CONTAINS(out, "the workers did not start: lab0 worker-0 did not listen on port ");
  LC_CHECK_CONTAINS(out, " within 1 s (the worker timeout given; --timeout S changes it): it "
                         "still runs");
  wait_no_sleepers();
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 618") == 0);
}

/* lazyclusterctl start --help states each built-in type's limits. */
static void test_cli_help_states_limits(void) {
  char out[16384];
  const char *args[] = {"start", "--help", NULL};
  LC_CHECK(run_ctl(args, out, sizeof(out)) == 0);
  LC_CHECK_CONTAINS(out, "  command                 master 3 s, workers 30 s\n");
  LC_CHECK_CONTAINS(out, "  dask                    master 30 s, workers 60 s\n");
}

/* lazyclusterctl start, then SIGKILL: after the heartbeat limit nothing is left anywhere. */
static void test_sigkill_of_start(void) {
  char cmd[8192], line[512];
  FILE *out;
  int fds[2], ready = 0, status;
  pid_t pid;
  LC_REQUIRE(pipe(fds) == 0);
  if ((pid = fork()) == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(ctl, ctl, "start", "-F", th_config(), "--hosts", "lab0,lab1,lab2", "--workers", "4",
          "--heartbeat", "3", "--master-port", "61700", "--ports", "61701-61750", "--master-cmd",
          master_tmpl, "--worker-cmd", worker_tmpl, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  out = fdopen(fds[0], "r");
  while (out != NULL && fgets(line, sizeof(line), out) != NULL)
    if (strncmp(line, "ready:", 6) == 0) {
      ready = 1;
      break;
    }
  LC_CHECK(ready);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 617") == 5);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  if (out != NULL)
    fclose(out);
  {
    int left = -1, dirs = -1;
    for (int t = 0; t < 60 && (left != 0 || dirs != 0); t++) {
      left = th_count_everywhere(HOSTS, "^serve 617");
      dirs = 0;
      for (int i = 0; i < HOSTS; i++) {
        FILE *p;
        int n = 0;
        snprintf(cmd, sizeof(cmd),
                 "%s exec %d --dir %s -- sh -c 'ls -A /root/.cache/lazycluster 2>/dev/null | "
                 "grep -c -- -%d\\.'",
                 getenv("LC_TESTHOSTS"), i, th_dir(), (int)pid);
        if ((p = popen(cmd, "r")) != NULL) {
          if (fscanf(p, "%d", &n) != 1)
            n = -1;
          pclose(p);
        }
        dirs += n;
      }
      if (left != 0 || dirs != 0)
        usleep(500 * 1000);
    }
    fprintf(stderr, "  after SIGKILL: %d processes, %d working directories left\n", left, dirs);
    LC_CHECK(left == 0);
    LC_CHECK(dirs == 0);
  }
}

/* ---- the API for types: line hooks, counter, events, one worker, after_start ---------------- */

/* What a cluster's callbacks saw (engine thread and caller's thread: under mu). */
typedef struct seen {
  pthread_mutex_t mu;
  int master_lines, worker_lines[8], tagged_lines, wrong_host;
  int up[9], down[9]; /* [0]: the master; [1 + i]: worker i */
  int after_calls;
  size_t after_first, after_n;
  int after_fail;
  int ready_n[16];
  int nready;
} seen;

static seen S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void seen_reset(void) {
  pthread_mutex_lock(&S.mu);
  memset((char *)&S + sizeof(S.mu), 0, sizeof(S) - sizeof(S.mu));
  pthread_mutex_unlock(&S.mu);
}

static int seen_get(const int *field) {
  int v;
  pthread_mutex_lock(&S.mu);
  v = *field;
  pthread_mutex_unlock(&S.mu);
  return v;
}

/* Master line hook: "count-up" +1, "count-down" -1 on the cluster's counter. */
static void hook_master_line(lc_master_launcher *self, lc_cluster *c, const char *line, size_t len,
                             lc_stream stream) {
  (void)self;
  (void)len;
  (void)stream;
  if (strstr(line, "count-up") != NULL)
    lc_cluster_counter_add(c, 1);
  else if (strstr(line, "count-down") != NULL)
    lc_cluster_counter_add(c, -1);
}

static void hook_worker_line(lc_worker_launcher *self, lc_cluster *c, int index, const char *line,
                             size_t len, lc_stream stream) {
  (void)self;
  (void)c;
  (void)len;
  (void)stream;
  if (strncmp(line, "wline-", 6) == 0 && index >= 0 && index < 8 && atoi(line + 6) == index) {
    pthread_mutex_lock(&S.mu);
    S.worker_lines[index]++;
    pthread_mutex_unlock(&S.mu);
  }
}

/* on_output: the master's lines with index -1 from localhost, each worker's with its index from
 * its host. */
static void seen_output(lc_cluster *c, int index, const char *host, const char *line, size_t len,
                        lc_stream stream, void *payload) {
  (void)payload;
  (void)len;
  (void)stream;
  pthread_mutex_lock(&S.mu);
  if (index == -1 && strstr(line, "count-") != NULL)
    S.master_lines += strcmp(host, "localhost") == 0;
  else if (index >= 0 && strncmp(line, "wline-", 6) == 0) {
    const lc_worker_info *w = lc_cluster_worker(c, (size_t)index); /* only read, not kept */
    S.wrong_host += w == NULL || strcmp(w->host, host) != 0 || atoi(line + 6) != index;
  }
  pthread_mutex_unlock(&S.mu);
}

static void seen_tagged(const char *tag, const char *line, size_t len, lc_stream stream,
                        void *payload) {
  (void)len;
  (void)stream;
  (void)payload;
  pthread_mutex_lock(&S.mu);
  S.tagged_lines += strcmp(tag, "lab1 worker-1") == 0 && strcmp(line, "wline-1") == 0;
  pthread_mutex_unlock(&S.mu);
}

static void seen_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  (void)c;
  (void)payload;
  pthread_mutex_lock(&S.mu);
  if (index >= -1 && index < 8) {
    if (ev == LC_CLUSTER_MASTER_UP || ev == LC_CLUSTER_WORKER_UP)
      S.up[index + 1]++;
    else if (ev == LC_CLUSTER_MASTER_DOWN || ev == LC_CLUSTER_WORKER_DOWN)
      S.down[index + 1] += (ev == LC_CLUSTER_MASTER_DOWN) == (index == -1);
  }
  pthread_mutex_unlock(&S.mu);
}

static int hook_after_start(lc_worker_launcher *self, lc_cluster *c, size_t first, size_t n) {
  (void)self;
  (void)c;
  pthread_mutex_lock(&S.mu);
  S.after_calls++;
  S.after_first = first;
  S.after_n = n;
  pthread_mutex_unlock(&S.mu);
  return S.after_fail ? lc_error_set(-EPROTO, "after-start refuses (%zu, %zu)", first, n) : 0;
}

/* wait_ready that records its n, then waits for every running worker's port on its host. */
static int hook_wait_ready(lc_worker_launcher *self, lc_cluster *c, int n, int timeout_ms) {
  (void)self;
  pthread_mutex_lock(&S.mu);
  if (S.nready < 16)
    S.ready_n[S.nready++] = n;
  pthread_mutex_unlock(&S.mu);
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    lc_process *p = lc_cluster_worker_process(c, i);
    int up = 0;
    for (int t = 0; p != NULL && !up && t * 50 < timeout_ms; t++) {
      lc_ports *l = NULL;
      up = lc_ports_listening(&l, lc_cluster_worker_runtime(c, i), 10000) == 0 &&
           lc_ports_contains(l, lc_cluster_worker(c, i)->port);
      lc_ports_free(l);
      if (!up && lc_process_wait(NULL, p, 50) != -ETIMEDOUT)
        up = 1; /* stopped or ended: not ours to wait for */
    }
  }
  return 0;
}

/* Whether port listens on worker i's host. */
static int worker_listens(lc_cluster *c, size_t i) {
  lc_ports *l = NULL;
  int up = lc_ports_listening(&l, lc_cluster_worker_runtime(c, i), 10000) == 0 &&
           lc_ports_contains(l, lc_cluster_worker(c, i)->port);
  lc_ports_free(l);
  return up;
}

/* Waits (up to 10 s) for *field to reach want; returns the value seen. */
static int seen_wait(const int *field, int want) {
  for (int t = 0; t < 200 && seen_get(field) < want; t++)
    usleep(50 * 1000);
  return seen_get(field);
}

/* The master's line hook moves the counter (reset to 0 when the master starts), counter_wait
 * waits for it and says how many changes came; worker line hooks get their index; on_output gets
 * index -1 and "localhost" for the master, each worker's index and host; on_line still gets the
 * tag; options of version 3 end before on_output (not read). */
static void test_line_hooks_and_counter(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char mt[4400];
  long changes = -1;
  seen_reset();
  snprintf(mt, sizeof(mt), "echo count-up; echo count-down >&2; echo count-up; echo count-up; %s",
           master_tmpl);
  LC_REQUIRE_OK(th_command_type(&m, &w, mt,
                                "echo wline-{worker_index}; "
                                "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}"));
  LC_REQUIRE(m->version >= 3 && w->version >= 4);
  m->on_line = hook_master_line;
  w->on_line = hook_worker_line;
  o.master_port = 62000;
  o.worker_ports = "62001-62050";
  o.on_output = seen_output;
  o.on_line = seen_tagged;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK(lc_cluster_counter_add(c, 5) == 5); /* before the master: reset when it starts */
  LC_CHECK(lc_cluster_master_process(c) == NULL && lc_cluster_master_runtime(c) == NULL);
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  LC_CHECK(lc_cluster_master_process(c) != NULL);
  LC_CHECK(lc_cluster_master_runtime(c) != NULL &&
           strcmp(lc_runtime_name(lc_cluster_master_runtime(c)), "localhost") == 0);
  LC_CHECK(lc_cluster_master_timeout_ms(c) == LC_CLUSTER_MASTER_TIMEOUT_MS);
  LC_CHECK(lc_cluster_worker_timeout_ms(c) == LC_CLUSTER_WORKER_TIMEOUT_MS);
  /* up, down, up, up: 2 only after all four lines */
  LC_CHECK_OK(lc_cluster_counter_wait(c, 2, 10000, &changes));
  LC_CHECK(changes == 4);
  LC_CHECK(lc_cluster_counter_add(c, 0) == 2);
  LC_CHECK(lc_cluster_counter_wait(c, 3, 200, &changes) == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "counter was 2 of 3");
  LC_CHECK(changes == 5); /* the add of 0 above counts as a change */
  for (int i = 0; i < 3; i++) {
    LC_CHECK(seen_wait(&S.worker_lines[i], 1) == 1);
    LC_CHECK(lc_cluster_worker_process(c, (size_t)i) != NULL);
    LC_CHECK(lc_cluster_worker_runtime(c, (size_t)i) ==
             lc_group_find(group, lc_cluster_worker(c, (size_t)i)->host));
  }
  LC_CHECK(lc_cluster_worker_process(c, 3) == NULL && lc_cluster_worker_runtime(c, 3) == NULL);
  LC_CHECK(seen_wait(&S.master_lines, 4) == 4);
  LC_CHECK(seen_get(&S.wrong_host) == 0);
  LC_CHECK(seen_wait(&S.tagged_lines, 1) == 1);
  lc_cluster_free(c);
  /* options version 3: on_output is not read */
  seen_reset();
  o.version = 3;
  o.on_output = (lc_cluster_output_cb)(void (*)(void))abort;
  o.on_line = NULL;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 1));
  LC_CHECK_OK(lc_cluster_counter_wait(c, 2, 10000, NULL));
  LC_CHECK(seen_wait(&S.worker_lines[0], 1) == 1);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 620") == 0);
  th_command_type_free(m, w);
}

/* Kills (-9) worker i's process on its host, found by the pid file it wrote. */
static void kill_worker(lc_cluster *c, size_t i) {
  lc_exec_result res;
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "kill -9 $(cat '%s/pid.txt')", lc_cluster_worker(c, i)->workdir);
  LC_CHECK_OK(lc_runtime_exec(&res, lc_cluster_worker_runtime(c, i), cmd, NULL));
  LC_CHECK(res.exit_status == 0);
}

static const char *pid_worker_tmpl =
    "echo $$ > pid.txt; exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

/* A worker killed on its host: WORKER_DOWN once, lc_cluster_wait reports it once (naming it), the
 * rest keep running; a restart brings it back (WORKER_UP). The master killed: MASTER_DOWN and its
 * report. When every process ended and was reported: "nothing runs". */
static void test_down_events_each_end_once(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char mt[4400], pidfile[256], text[64];
  FILE *f;
  int r, mpid = 0;
  seen_reset();
  snprintf(pidfile, sizeof(pidfile), "/tmp/lc-test-master-pid-%d", (int)getpid());
  snprintf(mt, sizeof(mt), "echo $$ > %s; %s", pidfile, master_tmpl);
  LC_REQUIRE_OK(th_command_type(&m, &w, mt, pid_worker_tmpl));
  o.master_port = 62100;
  o.worker_ports = "62101-62150";
  o.on_event = seen_event;
  o.restart = LC_RESTART_NEVER; /* every end reported (test_repair: the restart policy) */
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 621") == 4);
  kill_worker(c, 1);
  r = lc_cluster_wait(c, 30000);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1 worker-1 ended: it was ended by signal 9");
  LC_CHECK(seen_get(&S.down[2]) == 1);
  LC_CHECK(lc_cluster_worker_process(c, 1) == NULL); /* reported */
  LC_CHECK(lc_cluster_worker_process(c, 0) != NULL && lc_cluster_worker_process(c, 2) != NULL);
  /* never the same dead process again; the others run */
  LC_CHECK(lc_cluster_wait(c, 300) == -ETIMEDOUT);
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);
  LC_CHECK(seen_get(&S.down[2]) == 1);
  LC_CHECK(seen_get(&S.down[0]) == 0 && seen_get(&S.down[1]) == 0 && seen_get(&S.down[3]) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 621") == 3);
  LC_CHECK(lc_cluster_worker_stop(c, 1) == -EINVAL); /* ended: nothing to stop */
  /* back on its place */
  LC_CHECK_OK(lc_cluster_worker_restart(c, 1));
  LC_CHECK(seen_get(&S.up[2]) == 2);
  LC_CHECK(worker_listens(c, 1));
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 621") == 4);
  /* the master */
  if ((f = fopen(pidfile, "r")) != NULL) {
    if (fgets(text, sizeof(text), f) != NULL)
      mpid = atoi(text);
    fclose(f);
  }
  LC_REQUIRE(mpid > 1);
  kill(mpid, SIGKILL);
  r = lc_cluster_wait(c, 30000);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "localhost master ended");
  LC_CHECK(seen_get(&S.down[0]) == 1);
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT); /* the workers still run */
  /* every worker ends: each reported once, then nothing runs */
  for (size_t i = 0; i < 3; i++)
    kill_worker(c, i);
  for (int k = 0; k < 3; k++) {
    r = lc_cluster_wait(c, 30000);
    LC_CHECK(r == LC_EREMOTE);
    LC_CHECK_CONTAINS(lc_error_last(), " worker-");
  }
  LC_CHECK(seen_get(&S.down[1]) == 1 && seen_get(&S.down[2]) == 2 && seen_get(&S.down[3]) == 1);
  r = lc_cluster_wait(c, 1000);
  LC_CHECK(r == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "nothing runs");
  LC_CHECK(seen_get(&S.down[0]) == 1);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 621") == 0);
  th_command_type_free(m, w);
  unlink(pidfile);
}

/* The pid of the process whose command line contains arg (th_each_proc sums: one match). */
static int pid_if_matches(long pid, const char *text, const void *arg) {
  return strstr(text, arg) != NULL ? (int)pid : 0;
}

/* lc_cluster_worker_stop: its port listens no more, nothing of it is left on its host, no event
 * and no report; restart: the same host and port, listening again, WORKER_UP; wait_ready gets n =
 * every running worker. */
static void test_worker_stop_restart(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int before, after, h0;
  char host[64];
  int port, h;
  seen_reset();
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, pid_worker_tmpl));
  w->wait_ready = hook_wait_ready;
  o.master_port = 62200;
  o.worker_ports = "62201-62250";
  o.on_event = seen_event;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  LC_CHECK(seen_get(&S.nready) == 1 && S.ready_n[0] == 3);
  snprintf(host, sizeof(host), "%s", lc_cluster_worker(c, 2)->host);
  port = lc_cluster_worker(c, 2)->port;
  h = atoi(host + 3);
  LC_CHECK(worker_listens(c, 2));
  LC_CHECK(th_count_procs(h, "lc-lifeline lab2 worker-2") >= 1);
  LC_CHECK_OK(lc_cluster_worker_stop(c, 2));
  LC_CHECK(!worker_listens(c, 2));
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 622") == 3);
  LC_CHECK(th_count_procs(h, " w2") == 0);
  for (int t = 0; t < 100 && th_count_procs(h, "lc-lifeline lab2 worker-2") > 0; t++)
    usleep(100 * 1000); /* the lifeline's shell goes after its group */
  LC_CHECK(th_count_procs(h, "lc-lifeline lab2 worker-2") == 0);
  LC_CHECK(lc_cluster_worker_process(c, 2) == NULL);
  LC_CHECK(lc_cluster_wait(c, 300) == -ETIMEDOUT); /* no report */
  LC_CHECK(seen_get(&S.down[3]) == 0);
  LC_CHECK(lc_cluster_worker_stop(c, 2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab2 worker-2 does not run");
  LC_CHECK(lc_cluster_worker_stop(c, 7) == -ENOENT);
  LC_CHECK(lc_cluster_worker_restart(c, 7) == -ENOENT);
  /* more workers while one is stopped: n counts the running ones (0, 1 and the new 3) */
  LC_CHECK_OK(lc_cluster_start_workers(c, 1));
  LC_CHECK(seen_get(&S.nready) == 2 && S.ready_n[1] == 3);
  /* restart: same place, listening again, an event, n = the four running */
  LC_CHECK_OK(lc_cluster_worker_restart(c, 2));
  LC_CHECK(seen_get(&S.nready) == 3 && S.ready_n[2] == 4);
  LC_CHECK_STR(lc_cluster_worker(c, 2)->host, host);
  LC_CHECK(lc_cluster_worker(c, 2)->port == port);
  LC_CHECK(worker_listens(c, 2));
  LC_CHECK(th_count_procs(h, " w2") == 1);
  LC_CHECK(seen_get(&S.up[3]) == 2);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 622") == 5);
  /* a running worker restarted: a new process on its host (by pid: a handle's address may be
   * reused) */
  h0 = atoi(lc_cluster_worker(c, 0)->host + 3);
  before = th_each_proc(h0, "cmdline", pid_if_matches, " w0");
  LC_CHECK_OK(lc_cluster_worker_restart(c, 0));
  after = th_each_proc(h0, "cmdline", pid_if_matches, " w0");
  LC_CHECK(lc_cluster_worker_process(c, 0) != NULL);
  LC_CHECK(before > 1 && after > 1 && after != before);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 622") == 5);
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 622") == 0);
  th_command_type_free(m, w);
}

/* after_start: once per start of workers with (first, n); its error undoes that start. */
static void test_after_start(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  int r;
  seen_reset();
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  w->after_start = hook_after_start;
  o.master_port = 62300;
  o.worker_ports = "62301-62350";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  LC_CHECK(S.after_calls == 1 && S.after_first == 0 && S.after_n == 2);
  LC_CHECK_OK(lc_cluster_start_workers(c, 1));
  LC_CHECK(S.after_calls == 2 && S.after_first == 2 && S.after_n == 1);
  /* refused: the workers of that start go, the earlier ones stay */
  S.after_fail = 1;
  r = lc_cluster_start_workers(c, 2);
  LC_CHECK(r == -EPROTO);
  LC_CHECK_CONTAINS(lc_error_last(), "after_start failed: after-start refuses (3, 2)");
  LC_CHECK(S.after_calls == 3);
  LC_CHECK(lc_cluster_worker_count(c) == 3);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 623") == 4);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 623") == 0);
  /* refused after lc_cluster_start: nothing is left on any host */
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start(c, 3);
  LC_CHECK(r == -EPROTO);
  LC_CHECK_CONTAINS(lc_error_last(), "after-start refuses (0, 3)");
  LC_CHECK(S.after_calls == 4);
  LC_CHECK(lc_cluster_worker_count(c) == 0 && lc_cluster_master_port(c) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 623") == 0);
  lc_cluster_free(c);
  th_command_type_free(m, w);
}

/* A worker launcher's wait_ready that counts the master's "count-up" lines, as the dask type
 * counts its scheduler's registrations, after a second's pause (a launcher that asks a scheduler
 * takes that long): a worker that fails at once has ended by then. */
static int counting_wait_ready(lc_worker_launcher *self, lc_cluster *c, int n, int timeout_ms) {
  (void)self;
  usleep(1000 * 1000);
  return lc_cluster_counter_wait(c, n, timeout_ms, NULL);
}

/*
 * An early worker that fails at once, while the master is still starting (what CI saw with
 * `start --type dask --type-arg worker_args=--no-such-option`): by the time the workers' readiness
 * is judged it has ended, so "every worker that runs now" is 0, a counter of 0 meets it, and the
 * start was reported ready with its only worker dead. The start must fail naming the worker, and
 * leave nothing anywhere.
 */
static void test_early_worker_dead_before_ready(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char mt[4400];
  int r;
  snprintf(mt, sizeof(mt), "sleep 1; %s", master_tmpl); /* the worker ends meanwhile */
  LC_REQUIRE_OK(th_command_type(&m, &w, mt, "echo early-worker-gives-up >&2; exit 3"));
  LC_REQUIRE(w->version >= 4);
  w->early = 1;
  w->wait_ready = counting_wait_ready;
  o.master_port = 62400;
  o.worker_ports = "62401-62450";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start(c, 1);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "worker-0 failed to start");
  LC_CHECK_CONTAINS(lc_error_last(), "status 3");
  LC_CHECK_CONTAINS(lc_error_last(), "early-worker-gives-up");
  LC_CHECK(lc_cluster_worker_count(c) == 0 && lc_cluster_master_port(c) == 0);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 0);
  LC_CHECK(th_each_local_proc("cmdline", th_cmdline_matches, "^serve 624") == 0);
  th_command_type_free(m, w);
  /* the same for a restart: the restarted worker fails at once, the count (1) is met anyway */
  snprintf(mt, sizeof(mt), "echo count-up; %s", master_tmpl);
  LC_REQUIRE_OK(th_command_type(&m, &w, mt,
                                "if [ -e again ]; then echo restart-gives-up >&2; exit 4; fi; "
                                "touch again; "
                                "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}"));
  m->on_line = hook_master_line;
  w->wait_ready = counting_wait_ready;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 1));
  r = lc_cluster_worker_restart(c, 0);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "worker-0 failed to restart");
  LC_CHECK_CONTAINS(lc_error_last(), "restart-gives-up");
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 624") == 0);
  th_command_type_free(m, w);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_more_workers_than_hosts),
      LC_TEST(test_context_gzip),
      LC_TEST(test_declared_gpus),
      LC_TEST(test_master_errors),
      LC_TEST(test_worker_errors),
      LC_TEST(test_timeout_sources),
      LC_TEST(test_cli_timeout_messages),
      LC_TEST(test_cli_help_states_limits),
      LC_TEST(test_sigkill_of_start),
      LC_TEST(test_master_moves_with_early_workers),
      LC_TEST(test_workers_move_when_port_taken),
      LC_TEST(test_master_port_held_before_the_start),
      LC_TEST(test_master_moves_when_its_tunnel_port_is_taken),
      LC_TEST(test_line_hooks_and_counter),
      LC_TEST(test_down_events_each_end_once),
      LC_TEST(test_worker_stop_restart),
      LC_TEST(test_after_start),
      LC_TEST(test_early_worker_dead_before_ready),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  th_group_setup(&engine, &group, hosts, HOSTS, ctl);
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_group_free(group);
  lc_engine_free(engine);
  return r;
}
