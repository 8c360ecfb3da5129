/*
 * test_slots.c - many long-running processes on one host (issue 16, "Processes per host"): a
 * host with 8 GPUs and a few helper processes per worker needs more session channels than a
 * few connections carry (sshd's MaxSessions, 10 per connection by default).
 *  - 48 workers on lab0 (slots=48), each a real listener, with the default timeouts: through the
 *    API as root, and through `lazyclusterctl start --workers 48` as lcfish (login shell fish);
 *    every worker answers, and nothing is left on the host after the stop;
 *  - a host whose sshd allows 2 session channels per connection (MaxSessions 2): 40 workers
 *    start through the host's agent (one channel for all of them, runtimes/ssh/agent.c); with
 *    perl hidden there (no agent: a channel per process), 20 workers start (the cap learned from
 *    the host's refusals), eight times on new connections, and 40 are more than its connections
 *    can carry: the start fails at once with a message naming the host, the number of processes
 *    and MaxSessions (never "did not listen" after a silent queue), leaving nothing behind;
 *  - readiness polls without a session channel per look: while workers are not listening yet
 *    their ports are probed (direct-tcpip), and a listing of the host runs about once a second;
 *    sshd's own log counts the session channels of a start of slow workers;
 * nothing behind.
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>

static lc_engine *engine;
static char ctl[4096];
static char master_tmpl[4200];
static char remove_extra_host[8400];
static const char *worker_tmpl = "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";
/* workers that listen only after 15 s (a Python service on a busy host takes longer): readiness
 * polls a while */
static const char *slow_worker_tmpl =
    "sleep 15; exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";

/* A group of one host (user@alias) in the ssh config at config, with lazyclusterctl shipped. */
static lc_group *group_of(const char *host, const char *config) {
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  ro.ssh_config = config;
  if (lc_group_new(&g, engine, NULL) < 0 || lc_group_connect(&rep, g, &host, 1, &ro) < 0 ||
      lc_group_report_failures(rep) != 0 || th_ship_ctl(g, ctl) < 0) {
    fprintf(stderr, "  group of %s: %s %s\n", host, lc_error_last(),
            rep ? lc_group_report_message(rep, 0) : "");
    lc_group_report_free(rep);
    lc_group_free(g);
    return NULL;
  }
  lc_group_report_free(rep);
  return g;
}

/* Processes of host 0 of the test hosts in dir whose command line starts with prefix. */
static int count_on(const char *dir, const char *prefix) {
  char cmd[8400], line[64];
  FILE *p;
  int n = 0;
  snprintf(cmd, sizeof(cmd), "%s pids 0 --dir %s", th_script(), dir);
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the testhosts script */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL)
    n += th_proc_apply(strtol(line, NULL, 10), "cmdline", th_cmdline_matches, prefix);
  pclose(p);
  return n;
}

/* listening_of, asked again for up to 10 s until none listens: a worker whose start was on its
 * way to the host when the cluster's start failed ends a moment after the stop (CI once saw one
 * right after a failed start of 40, with nothing of it left in the process count just before). */
static int listening_after_stop(lc_runtime *rt, int first, int n);

/* How many of ports first..first+n-1 listen on rt. */
static int listening_of(lc_runtime *rt, int first, int n) {
  lc_ports *l = NULL;
  int k = 0;
  if (lc_ports_listening(&l, rt, 20000) < 0) {
    fprintf(stderr, "  %s: no listing: %s\n", lc_runtime_name(rt), lc_error_last());
    return -1;
  }
  for (int p = first; p < first + n; p++)
    k += lc_ports_contains(l, p);
  lc_ports_free(l);
  return k;
}

/* n workers of the command type on the one host of g (slots=n), default timeouts; returns the
 * start's code. With started, every worker must answer through its tunnel here. */
static lc_master_launcher *type_m;
static lc_worker_launcher *type_w;
static const char *expose = "expose=here"; /* the command type's tunnels */
static const char *master_host;            /* NULL: here */

static int start_workers(lc_group *g, int n, int port, lc_cluster **out) {
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char ports[64];
  int r;
  *out = NULL;
  lc_runtime_set_resources(lc_group_at(g, 0), 0, n);
  if (th_command_type_with(&type_m, &type_w,
                           master_host != NULL ? "exec ~/lcbin/lazyclusterctl serve {master_port} m"
                                               : master_tmpl,
                           worker_tmpl, expose) < 0)
    return -1;
  snprintf(ports, sizeof(ports), "%d-%d", port + 1, port + 99);
  o.master_port = port;
  o.worker_ports = ports;
  o.master_host = master_host;
  if ((r = lc_cluster_new(out, g, type_m, type_w, &o)) < 0)
    return r;
  return lc_cluster_start(*out, (size_t)n);
}

/* The command type's launchers of a cluster: freed after it. */
static void cluster_done(lc_cluster *c) {
  lc_cluster_free(c);
  if (type_m != NULL)
    th_command_type_free(type_m, type_w);
  type_m = NULL;
  type_w = NULL;
}

static int listening_after_stop(lc_runtime *rt, int first, int n) {
  int k = listening_of(rt, first, n);
  for (int t = 0; t < 20 && k != 0; t++) {
    fprintf(stderr, "  %s: %d of ports %d-%d listen after the stop\n", lc_runtime_name(rt), k,
            first, first + n - 1);
    usleep(500 * 1000);
    k = listening_of(rt, first, n);
  }
  return k;
}

/* Every worker of c answers as itself here. */
static void check_answers(lc_cluster *c, size_t n) {
  char text[256], want[32];
  LC_CHECK(lc_cluster_worker_count(c) == n);
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    snprintf(want, sizeof(want), "w%zu\n", i);
    th_answer_here(text, sizeof(text), wi->port);
    LC_CHECK_STR(text, want);
  }
}

/* 48 workers on one host as root through the API: all up, all answer, nothing left after. */
static void test_48_workers_api(void) {
  lc_group *g = group_of("lab0", th_config());
  lc_cluster *c = NULL;
  char dir[4096] = "";
  LC_REQUIRE(g != NULL);
  LC_CHECK_OK(start_workers(g, 48, 62700, &c));
  if (c != NULL && lc_cluster_worker_count(c) == 48) {
    check_answers(c, 48);
    int n = th_count_procs(0, "serve 627");
    fprintf(stderr, "  serve processes on lab0: %d\n", n);
    LC_CHECK(n == 48);
    snprintf(dir, sizeof(dir), "%s", lc_cluster_worker(c, 47)->workdir);
  }
  cluster_done(c);
  LC_CHECK(th_count_everywhere(1, "^serve 627") == 0);
  LC_CHECK(listening_of(lc_group_at(g, 0), 62700, 100) == 0);
  lc_group_free(g);
  if (dir[0] != '\0') { /* the working directories go with the runtime */
    char cmd[8400];
    snprintf(cmd, sizeof(cmd), "%s exec 0 --dir %s -- test -e '%s'", th_script(), th_dir(), dir);
    LC_CHECK(system(cmd) != 0); /* NOLINT(cert-env33-c): the testhosts script */
  }
}

/* `lazyclusterctl start --workers 48` on an inventory "lcfish@lab0 slots=48": ready, and after
 * its Ctrl-C nothing of it is left on the host. */
static void test_48_workers_cli_fish(void) {
  lc_group *g = group_of("lcfish@lab0", th_config());
  char inv[4200], out[65536];
  FILE *f;
  LC_REQUIRE(g != NULL);
  snprintf(inv, sizeof(inv), "%s/slots-inventory", th_dir());
  LC_REQUIRE((f = fopen(inv, "w")) != NULL);
  fprintf(f, "lcfish@lab0 slots=48\n");
  fclose(f);
  {
    const char *args[] = {"start",     "-F",           th_config(),   "--inventory",
                          inv,         "--workers",    "48",          "--master-port",
                          "62800",     "--ports",      "62801-62899", "--master-cmd",
                          master_tmpl, "--worker-cmd", worker_tmpl,   NULL};
    LC_CHECK(th_run_ctl(ctl, args, 1, out, sizeof(out)) == 0);
  }
  LC_CHECK_CONTAINS(out, "worker-47 ");
  LC_CHECK_CONTAINS(out, "ready: ");
  LC_CHECK(strstr(out, "did not listen") == NULL);
  LC_CHECK(th_count_everywhere(1, "^serve 628") == 0);
  LC_CHECK(listening_of(lc_group_at(g, 0), 62800, 100) == 0);
  lc_group_free(g);
}

/* sh text as root on the extra host of dir (its mount namespace). */
static int extra_host_sh(const char *dir, const char *text) {
  char cmd[8400];
  snprintf(cmd, sizeof(cmd), "%s exec 0 --dir %s -- sh -c '%s' >/dev/null", th_script(), dir, text);
  return system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
}

/* What the extra host's sshd (LogLevel DEBUG1) saw: its connections and session channels in
 * all, the sessions it refused, and its last lines; for a failure that CI saw and this machine
 * did not (the runtime's listings got no answer after the failed start of 40). */
static void sshd_said(const char *dir) {
  char log[4200], cmd[8400];
  snprintf(log, sizeof(log), "%s/hosts/0/sshd.log", dir);
  fprintf(stderr, "  sshd of %s: %d connections, %d session channels, %d refused\n", dir,
          th_lines_with(log, "Connection from"), th_lines_with(log, "ctype session"),
          th_lines_with(log, "no more sessions"));
  snprintf(cmd, sizeof(cmd), "tail -n 40 %s | sed 's/^/    sshd: /' >&2", log);
  if (system(cmd) != 0) /* NOLINT(cert-env33-c): tail of a test host's log */
    fprintf(stderr, "  (no sshd log at %s)\n", log);
}

/* A host with MaxSessions 2: 40 workers start through its agent; without perl there, 20 start
 * and 40 fail at once with a clear message. */
static void test_low_max_sessions(void) {
  char dir[4096], cmd[8400], config[4200];
  lc_group *g = NULL;
  lc_cluster *c = NULL;
  int st, r;
  snprintf(dir, sizeof(dir), "%s-maxsessions", th_dir());
  snprintf(cmd, sizeof(cmd),
           "%s up 1 --dir %s --sshd-option 'MaxSessions 2' --sshd-option 'LogLevel DEBUG1' "
           ">/dev/null",
           th_script(), dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  LC_REQUIRE(st == 0);
  snprintf(config, sizeof(config), "%s/ssh_config", dir);
  if ((g = group_of("lab0", config)) != NULL) {
    LC_CHECK_OK(start_workers(g, 40, 62900, &c));
    if (c != NULL && lc_cluster_worker_count(c) == 40) {
      check_answers(c, 40);
      LC_CHECK(count_on(dir, "serve 629") == 40);
    }
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 629") == 0);
    LC_CHECK(listening_of(lc_group_at(g, 0), 62900, 100) == 0);
    lc_group_free(g);
    g = NULL;
  }
  for (int t = 0; t < 50 && count_on(dir, "lc-agent") != 0; t++)
    usleep(100 * 1000);
  LC_CHECK(count_on(dir, "lc-agent") == 0);
  /* without perl, a channel per process */
  LC_REQUIRE(extra_host_sh(dir, "mount --bind /dev/null /usr/bin/perl") == 0);
  /* each round a new connection that learns the cap afresh: a refusal that only meant sshd had
   * not reaped a session closed just before (the cluster-context write's) once taught it 1 */
  for (int round = 0; round < 8; round++) {
    g = group_of("lab0", config);
    LC_CHECK(g != NULL);
    if (g == NULL)
      break;
    LC_CHECK_OK(start_workers(g, 20, 62900, &c));
    if (c != NULL && lc_cluster_worker_count(c) == 20) {
      check_answers(c, 20);
      LC_CHECK(count_on(dir, "serve 629") == 20);
    }
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 629") == 0);
    LC_CHECK(listening_of(lc_group_at(g, 0), 62900, 100) == 0);
    if (round < 7)
      lc_group_free(g);
  }
  if (g != NULL) {

    /* 40 long-running processes at 2 a connection: more than the connections a host gets */
    r = start_workers(g, 40, 62900, &c);
    LC_CHECK(r < 0);
    LC_CHECK_CONTAINS(lc_error_last(), "lab0");
    LC_CHECK_CONTAINS(lc_error_last(), "MaxSessions");
    LC_CHECK(strstr(lc_error_last(), "did not listen") == NULL);
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 629") == 0);
    if (listening_after_stop(lc_group_at(g, 0), 62900, 100) != 0) {
      sshd_said(dir); /* (CI, twice: every listing "no answer within 20.0 s" here) */
      LC_CHECK(0);
    }
    lc_group_free(g);
  }
  LC_CHECK(extra_host_sh(dir, "umount /usr/bin/perl") == 0);
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
}

/*
 * Session channels and probes of a start whose 8 workers listen only after 15 s (sshd LogLevel
 * DEBUG1 counts them): the host's agent's one channel, which carries the workers, the context
 * file and the readiness listings while the probes of the ports fail (after 1 s, then further
 * apart, 1 s more each time up to 5 s: 5 in 15 s); before the agent one session per worker plus
 * a few. Polling readiness with a listing at each look (every 10-250
 * ms) cost 59 session channels for workers that listened after 3 s; probes with a listing once a
 * second about 27 for 15 s. The probes (direct-tcpip channels, no process on the host) slow
 * down to one a second per port: under 100 rounds of 8 in 15 s, not 120. Nothing is left after
 * the stop.
 */
static void test_readiness_sessions(void) {
  char dir[4096], cmd[8400], config[4200], log[4200];
  lc_group *g = NULL;
  lc_cluster *c = NULL;
  int st, before, after, probes;
  snprintf(dir, sizeof(dir), "%s-debuglog", th_dir());
  snprintf(cmd, sizeof(cmd), "%s up 1 --dir %s --sshd-option 'LogLevel DEBUG1' >/dev/null",
           th_script(), dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  LC_REQUIRE(st == 0);
  snprintf(config, sizeof(config), "%s/ssh_config", dir);
  snprintf(log, sizeof(log), "%s/hosts/0/sshd.log", dir);
  g = group_of("lab0", config);
  LC_CHECK(g != NULL);
  if (g != NULL) {
    const char *fast = worker_tmpl;
    worker_tmpl = slow_worker_tmpl;
    before = th_lines_with(log, "ctype session");
    LC_CHECK_OK(start_workers(g, 8, 63100, &c));
    after = th_lines_with(log, "ctype session");
    worker_tmpl = fast;
    probes = th_lines_with(log, "ctype direct-tcpip");
    fprintf(stderr, "  session channels of the start: %d, direct-tcpip: %d\n", after - before,
            probes);
    LC_CHECK(before >= 0);
    /* the host's agent: its one channel carries the keeper, the context file, the workers and
     * the listings (before it, one session channel per worker plus 5 to 12) */
    LC_CHECK(after - before >= 1);
    LC_CHECK(after - before <= 3);
    LC_CHECK(probes <= 8 * 100);
    if (c != NULL && lc_cluster_worker_count(c) == 8) {
      check_answers(c, 8);
      LC_CHECK(count_on(dir, "serve 631") == 8);
    }
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 631") == 0);
    LC_CHECK(count_on(dir, "sleep 15") == 0);
    LC_CHECK(listening_of(lc_group_at(g, 0), 63100, 100) == 0);
    lc_group_free(g);
  }
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
}

/*
 * A host whose sshd refuses TCP forwarding (AllowTcpForwarding no): readiness cannot probe its
 * ports and reads listings instead: a master there and 6 workers without tunnels start; with the
 * master here (its port forwarded to the host) the start fails naming the host and the refused
 * forwarding. Nothing is left.
 */
static void test_forwarding_refused(void) {
  char dir[4096], cmd[8400], config[4200];
  lc_group *g = NULL;
  lc_cluster *c = NULL;
  int st, r;
  snprintf(dir, sizeof(dir), "%s-nofwd", th_dir());
  snprintf(cmd, sizeof(cmd), "%s up 1 --dir %s --sshd-option 'AllowTcpForwarding no' >/dev/null",
           th_script(), dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  LC_REQUIRE(st == 0);
  snprintf(config, sizeof(config), "%s/ssh_config", dir);
  g = group_of("lab0", config);
  LC_CHECK(g != NULL);
  if (g != NULL) {
    expose = "expose=none";
    master_host = "lab0";
    r = start_workers(g, 6, 63000, &c);
    LC_CHECK_OK(r);
    if (c != NULL && r == 0) {
      LC_CHECK(lc_cluster_worker_count(c) == 6);
      LC_CHECK(listening_of(lc_group_at(g, 0), 63000, 100) == 7);
      LC_CHECK(count_on(dir, "serve 630") == 7);
    }
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 630") == 0);
    LC_CHECK(listening_of(lc_group_at(g, 0), 63000, 100) == 0);

    /* the master here: its port cannot be forwarded to the host */
    expose = "expose=none";
    master_host = NULL;
    r = start_workers(g, 6, 63000, &c);
    fprintf(stderr, "  master here: %s\n", r < 0 ? lc_error_last() : "started");
    LC_CHECK(r < 0);
    LC_CHECK_CONTAINS(lc_error_last(), "lab0");
    LC_CHECK_CONTAINS(lc_error_last(), "forwarding");
    cluster_done(c);
    LC_CHECK(count_on(dir, "serve 630") == 0);
    LC_CHECK(listening_of(lc_group_at(g, 0), 63000, 100) == 0);
    expose = "expose=here";
    lc_group_free(g);
  }
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_48_workers_api),     LC_TEST(test_48_workers_cli_fish),
      LC_TEST(test_low_max_sessions),   LC_TEST(test_forwarding_refused),
      LC_TEST(test_readiness_sessions),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: engine: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  if (remove_extra_host[0] != '\0' && system(remove_extra_host) != 0) /* NOLINT(cert-env33-c) */
    r = 1;
  lc_engine_free(engine);
  return r;
}
