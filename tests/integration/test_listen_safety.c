/*
 * test_listen_safety.c - what sshd really bound for our -R forwards, and readiness that a
 * stranger's listener cannot pass, on real test hosts:
 *
 * - GatewayPorts: a separate instance (DIR-gw beside the fixture's) whose sshd has GatewayPorts
 *   yes for lcbash and clientspecified for lcsh (root keeps the default, no). A -R forward and a
 *   cluster (whose master's port goes to the host by -R) as lcbash fail naming the host, the
 *   addresses and the setting, and afterwards nothing listens on the port there (the host's
 *   /proc/net/tcp{,6}); as root and as lcsh the forward comes up on loopback alone and carries a
 *   connection made on the host. Nothing of ours is left on the host.
 * - Originators: a -R forward as root on lab0 carries a connection made there to 127.0.0.1, but
 *   one made from lab0's own network address (sshd reports that originator) is closed unrelayed,
 *   and the engine's on_notice names the host, the port and the originator.
 * - Squatting: a worker that never listens, and uid 65534 (nobody) listening on its port on its
 *   host once the worker runs there (the port is known: a single worker port): the start must
 *   not report ready, and its error names uid 65534. Nothing is left on any host.
 * - Refused after a reconnect: a -R forward's listen refused (uid 65534 on [::1] at its port) when
 *   it comes back after a lost connection: its on_state hears why (a second DOWN).
 */
#include "clusterenv.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static char ctl[4096];
static char master_tmpl[4200];
static char fixture_dir[4096];
static char gw_dir[4200];
static char remove_gw[8192];

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Listeners on port in host i's /proc/net/tcp and tcp6 (state 0A): how many, and how many of
 * them on an address other than loopback (127.0.0.1, ::1). -1 when the host could not be read. */
static int host_listeners(int i, int port, int *wide) {
  char cmd[8192], line[512], want[8];
  FILE *p;
  int n = 0;
  *wide = 0;
  snprintf(want, sizeof(want), ":%04X", (unsigned)port);
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- cat /proc/net/tcp /proc/net/tcp6", th_script(),
           i, th_dir());
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the testhosts script */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL) {
    char local[64], remote[64], st[8];
    const char *colon;
    if (sscanf(line, " %*[^:]: %63s %63s %7s", local, remote, st) != 3 || strcmp(st, "0A") != 0)
      continue;
    if ((colon = strchr(local, ':')) == NULL || strcmp(colon, want) != 0)
      continue;
    n++;
    if (strncmp(local, "0100007F:", 9) != 0 &&
        strncmp(local, "00000000000000000000000001000000:", 33) != 0)
      (*wide)++;
  }
  return pclose(p) == 0 ? n : -1;
}

static int print_proc(long pid, const char *text, const void *arg) {
  (void)arg;
  fprintf(stderr, "  left: %ld %s\n", pid, text);
  return 1;
}

/* Our master here ("CTL serve PORT master"): how many run. */
static int masters_here(int port) {
  char pattern[64];
  snprintf(pattern, sizeof(pattern), " serve %d master", port);
  return th_each_local_proc("cmdline", th_cmdline_matches, pattern);
}

/* host_listeners, once the sessions of closed connections had up to 10 s to end (a freed runtime
 * does not wait for its host's side to close). */
static int host_listeners_settled(int i, int port, int *wide) {
  int n = host_listeners(i, port, wide);
  for (int tries = 0; tries < 100 && n != 0; tries++) {
    sleep_ms(100);
    n = host_listeners(i, port, wide);
  }
  return n;
}

/* Processes in host i's namespaces other than its listening sshd, after a wait of up to 15 s for
 * the sessions of closed connections to end. */
static int host_leftovers(int i) {
  int n = 0;
  for (int tries = 0; tries < 150; tries++) {
    int all = th_count_procs(i, ""), sshd = th_count_procs(i, "/usr/sbin/sshd -D -e -f ");
    n = all - sshd;
    if (n == 0)
      break;
    sleep_ms(100);
  }
  if (n != 0)
    th_each_proc(i, "cmdline", print_proc, NULL);
  return n;
}

/* A listener on 127.0.0.1 of this machine, the target of the -R forwards; its port in *port. */
static int listen_here(int *port) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* Whether a connection to 127.0.0.1:port made in host i reaches the listener fd here. */
static int carried(int i, int port, int fd) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  int c = th_socket_in(i), got = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0 && poll(&pf, 1, 15000) == 1) {
    int s = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    got = s >= 0;
    if (s >= 0)
      close(s);
  }
  if (c >= 0)
    close(c);
  return got;
}

static lc_runtime *connect_as(lc_engine *engine, const char *host) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  if (lc_runtime_new_ssh(&rt, engine, host, &o) < 0)
    fprintf(stderr, "  cannot connect to %s: %s\n", host, lc_error_last());
  return rt;
}

/* ---- GatewayPorts ------------------------------------------------------------------------ */

static void gatewayports_on(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  int target = 0, fd = listen_here(&target), wide = 0, r;
  char want[128];
  const int port = 64421;

  LC_REQUIRE(fd >= 0);
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));

  /* GatewayPorts yes: refused, closed, and the error says why */
  LC_REQUIRE((rt = connect_as(engine, "lcbash@lab0")) != NULL);
  r = lc_forward_new(&f, rt, LC_FORWARD_REMOTE, port, "127.0.0.1", target, NULL);
  fprintf(stderr, "  -R as lcbash (GatewayPorts yes): %s: %s\n", lc_err_name(r), lc_error_last());
  LC_CHECK(r == LC_EFORWARD);
  LC_CHECK(f == NULL);
  snprintf(want, sizeof(want), "lab0: sshd listens on 0.0.0.0:%d and [::]:%d for our -R forward",
           port, port);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), "not on loopback alone: its GatewayPorts is yes; set "
                                     "GatewayPorts no (the default) or clientspecified");
  LC_CHECK(host_listeners(0, port, &wide) == 0); /* cancelled before the error came back */
  LC_CHECK(wide == 0);
  lc_forward_free(f);
  f = NULL;
  /* the runtime still works: a listen refused is no broken connection */
  LC_CHECK(lc_runtime_is_connected(rt));
  lc_runtime_free(rt);
  rt = NULL;

  /* the default (no) and clientspecified: up on loopback alone, and carrying connections */
  for (int k = 0; k < 2; k++) {
    const char *who = k == 0 ? "lab0" : "lcsh@lab0";
    LC_REQUIRE((rt = connect_as(engine, who)) != NULL);
    r = lc_forward_new(&f, rt, LC_FORWARD_REMOTE, port, "127.0.0.1", target, NULL);
    fprintf(stderr, "  -R as %s: %s: %s\n", who, lc_err_name(r), r < 0 ? lc_error_last() : "up");
    LC_CHECK(r == 0);
    LC_CHECK(f != NULL && lc_forward_is_up(f));
    LC_CHECK(host_listeners(0, port, &wide) >= 1);
    LC_CHECK(wide == 0);
    LC_CHECK(carried(0, port, fd));
    lc_forward_free(f);
    f = NULL;
    lc_runtime_free(rt);
    rt = NULL;
  }
  LC_CHECK(host_listeners_settled(0, port, &wide) == 0);
  lc_engine_free(engine);
  close(fd);
  LC_CHECK(host_leftovers(0) == 0);
}

/* A cluster whose master (here) reaches the host by -R: the start fails with the same words. */
static void gatewayports_cluster(void) {
  lc_engine *engine = NULL;
  lc_group *group = NULL;
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  const char *hosts[] = {"lcbash@lab0"};
  int r, wide = 0;
  char want[160];

  th_group_setup(&engine, &group, hosts, 1, NULL);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, "exec sleep 86398"));
  o.master_port = 64422;
  o.master_port_fixed = 1;
  o.worker_ports = "64423-64423";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  r = lc_cluster_start(c, 1);
  fprintf(stderr, "  cluster on lcbash@lab0 (GatewayPorts yes): %s: %s\n", lc_err_name(r),
          lc_error_last());
  LC_CHECK(r == LC_EFORWARD);
  snprintf(want, sizeof(want), "lab0: sshd listens on 0.0.0.0:%d and [::]:%d for our -R forward",
           o.master_port, o.master_port);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), "GatewayPorts is yes");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  LC_CHECK(host_listeners_settled(0, o.master_port, &wide) == 0);
  lc_group_free(group);
  lc_engine_free(engine);
  LC_CHECK(th_count_everywhere(1, "^sleep 86398") == 0);
  LC_CHECK(masters_here(o.master_port) == 0);
  LC_CHECK(host_leftovers(0) == 0);
}

static void test_gatewayports(void) {
  char cmd[8800];
  int st;
  snprintf(gw_dir, sizeof(gw_dir), "%s-gw", fixture_dir);
  snprintf(cmd, sizeof(cmd),
           "%s up 1 --dir %s --sshd-option 'Match User lcbash' --sshd-option 'GatewayPorts yes' "
           "--sshd-option 'Match User lcsh' --sshd-option 'GatewayPorts clientspecified' "
           ">/dev/null",
           th_script(), gw_dir);
  snprintf(remove_gw, sizeof(remove_gw), "%s down --dir %s", th_script(), gw_dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  if (st != 0)
    fprintf(stderr, "  %s: failed (%d)\n", cmd, st);
  LC_REQUIRE(st == 0);
  setenv("LC_TESTHOSTS_DIR", gw_dir, 1);
  gatewayports_on();
  gatewayports_cluster();
  setenv("LC_TESTHOSTS_DIR", fixture_dir, 1);
  LC_CHECK(system(remove_gw) == 0); /* NOLINT(cert-env33-c) */
  remove_gw[0] = '\0';
}

/* ---- originators ---------------------------------------------------------------------------- */

typedef struct notices {
  pthread_mutex_t mu;
  int n;
  char last[1024];
} notices;

static void on_notice(const char *message, void *payload) {
  notices *nt = payload;
  pthread_mutex_lock(&nt->mu);
  nt->n++;
  snprintf(nt->last, sizeof(nt->last), "%s", message);
  pthread_mutex_unlock(&nt->mu);
}

/* Waits up to 30 s until want notices came; how many came, the last one in last. */
static int notices_wait(notices *nt, int want, char *last, size_t size) {
  int n = 0;
  for (int tries = 0; tries < 300; tries++) {
    pthread_mutex_lock(&nt->mu);
    n = nt->n;
    snprintf(last, size, "%s", nt->last);
    pthread_mutex_unlock(&nt->mu);
    if (n >= want)
      break;
    sleep_ms(100);
  }
  return n;
}

/* A connection made in host i to 127.0.0.1:port from the host's own network address: whether it
 * was closed (EOF or reset) without a byte, within 15 s. */
static int closed_from_host_address(int i, int port) {
  struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
  struct pollfd pf = {.events = POLLIN};
  char b;
  int c = th_socket_in(i), closed = 0;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons((uint16_t)port);
  pf.fd = c;
  if (c >= 0 && inet_pton(AF_INET, th_addr(i), &from.sin_addr) == 1 &&
      bind(c, (struct sockaddr *)&from, sizeof(from)) == 0 &&
      connect(c, (struct sockaddr *)&to, sizeof(to)) == 0 && poll(&pf, 1, 15000) == 1)
    closed = recv(c, &b, 1, 0) <= 0;
  if (c >= 0)
    close(c);
  return closed;
}

static void test_foreign_originator(void) {
  notices nt = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  struct pollfd pf = {.events = POLLIN};
  int target = 0, fd = listen_here(&target), wide = 0;
  char last[1024], want[160];
  const int port = 64441;

  LC_REQUIRE(fd >= 0);
  pf.fd = fd;
  eo.on_notice = on_notice;
  eo.payload = &nt;
  LC_REQUIRE_OK(lc_engine_new(&engine, &eo));
  LC_REQUIRE((rt = connect_as(engine, "lab0")) != NULL);
  LC_REQUIRE_OK(lc_forward_new(&f, rt, LC_FORWARD_REMOTE, port, "127.0.0.1", target, NULL));
  LC_CHECK(carried(0, port, fd)); /* from loopback: carried */
  LC_CHECK(closed_from_host_address(0, port));
  LC_CHECK(poll(&pf, 1, 0) == 0); /* nothing reached the target */
  LC_CHECK(notices_wait(&nt, 1, last, sizeof(last)) == 1);
  fprintf(stderr, "  notice: %s\n", last);
  snprintf(want, sizeof(want),
           "lab0: refused a connection to our -R forward of port %d from %s:", port, th_addr(0));
  LC_CHECK_CONTAINS(last, want);
  LC_CHECK(lc_forward_is_up(f)); /* one refused connection leaves the forward up */
  lc_forward_free(f);
  lc_runtime_free(rt);
  lc_engine_free(engine);
  close(fd);
  LC_CHECK(host_listeners_settled(0, port, &wide) == 0);
  LC_CHECK(host_leftovers(0) == 0);
}

/* ---- squatting ------------------------------------------------------------------------------ */

typedef struct start_arg {
  lc_cluster *c;
  int r;
  char msg[2048];
} start_arg;

static void *start_thread(void *arg) {
  start_arg *a = arg;
  a->r = lc_cluster_start(a->c, 1);
  snprintf(a->msg, sizeof(a->msg), "%s", lc_error_last());
  return NULL;
}

/* Starts uid 65534's listener on addr:port in host i (through testhosts exec, child *via here);
 * its pid as this machine counts (th_pid_here: the host has its own PID namespace) once it
 * listens, else -1. */
static long stranger_listen(int i, const char *addr, int port, pid_t *via) {
  char cmd[8192], line[128] = "";
  FILE *in;
  long pid = -1;
  int fds[2];
  snprintf(
      cmd, sizeof(cmd),
      "exec %s exec %d --dir %s -- env -C / setpriv --reuid=65534 --regid=65534 --clear-groups "
      "/usr/bin/python3 -c 'import os, socket, time\n"
      "a = \"%s\"\n"
      "s = socket.socket(socket.AF_INET6 if \":\" in a else socket.AF_INET)\n"
      "s.bind((a, %d))\n"
      "s.listen(8)\n"
      "print(\"listening\", os.getpid(), flush=True)\n"
      "time.sleep(300)'",
      th_script(), i, th_dir(), addr, port);
  *via = -1;
  if (pipe(fds) < 0)
    return -1;
  if ((*via = fork()) == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  if ((in = fdopen(fds[0], "r")) == NULL) {
    close(fds[0]);
    return -1;
  }
  if (*via > 0 && fgets(line, sizeof(line), in) != NULL && strncmp(line, "listening ", 10) == 0) {
    /* a few tries: seen once in CI (four lanes on two CPUs) to find nothing at the first */
    for (int tries = 0; tries < 20 && (pid = th_pid_here(i, atol(line + 10))) <= 0; tries++)
      sleep_ms(100);
    if (pid <= 0) { /* what testhosts says, for the log */
      snprintf(cmd, sizeof(cmd), "%s pid-here %d %ld --dir %s >&2; %s pids %d --dir %s >&2",
               th_script(), i, atol(line + 10), th_dir(), th_script(), i, th_dir());
      fprintf(stderr, "  the stranger said \"%.*s\"; testhosts:\n", (int)strcspn(line, "\n"), line);
      if (system(cmd) != 0) /* NOLINT(cert-env33-c): the testhosts script */
        fprintf(stderr, "  (testhosts failed)\n");
    }
  } else {
    fprintf(stderr, "  the stranger said \"%.*s\"\n", (int)strcspn(line, "\n"), line);
  }
  fclose(in);
  return pid > 0 ? pid : -1;
}

static void test_squatted_worker_port(void) {
  lc_engine *engine = NULL;
  lc_group *group = NULL;
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  const char *hosts[] = {"lab0"};
  start_arg a = {0};
  pthread_t t;
  long stranger = -1;
  pid_t via = -1;
  int wide = 0, seen = 0;

  th_group_setup(&engine, &group, hosts, 1, NULL);
  /* the worker never listens: only the stranger does, on its port */
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, "exec sleep 86397"));
  o.master_port = 64431;
  o.worker_ports = "64432-64432";
  o.worker_timeout_ms = 120000; /* the start ends by the stranger, long before */
  LC_REQUIRE_OK(lc_cluster_new(&a.c, group, m, w, &o));
  LC_REQUIRE(pthread_create(&t, NULL, start_thread, &a) == 0);
  /* the port was picked once the worker runs on the host: then the stranger takes it */
  for (int tries = 0; tries < 600 && !seen; tries++) {
    seen = th_count_procs(0, "^sleep 86397") > 0;
    if (!seen)
      sleep_ms(50);
  }
  LC_CHECK(seen);
  if (seen) {
    stranger = stranger_listen(0, "127.0.0.1", 64432, &via);
    fprintf(stderr, "  nobody listens on lab0's 127.0.0.1:64432: pid %ld\n", stranger);
  }
  LC_CHECK(stranger > 0); /* without one the start waits its whole limit */
  pthread_join(t, NULL);
  fprintf(stderr, "  start: %s: %s\n", lc_err_name(a.r), a.msg);
  /* the squatted port is given up as one taken after all; with no other port left the error
   * still names the stranger */
  LC_CHECK(a.r == LC_ENOPORTS);
  LC_CHECK_CONTAINS(a.msg, "other ports were tried because lab0: port 64432 is listened on by "
                           "uid 65534, not by lab0's worker-0");
  LC_CHECK_CONTAINS(a.msg, "another user took the port");
  lc_cluster_free(a.c);
  th_command_type_free(m, w);
  if (stranger > 0)
    kill((pid_t)stranger, SIGKILL);
  else if (via > 0)
    kill(via, SIGTERM); /* testhosts exec passes it on to the stranger */
  if (via > 0)
    waitpid(via, NULL, 0);
  LC_CHECK(host_listeners_settled(0, 64432, &wide) == 0);
  LC_CHECK(host_listeners_settled(0, 64431, &wide) == 0); /* the master's -R forward */
  lc_group_free(group);
  lc_engine_free(engine);
  LC_CHECK(th_count_everywhere(1, "^sleep 86397") == 0);
  LC_CHECK(masters_here(o.master_port) == 0);
}

/* ---- refused after a reconnect ---------------------------------------------------------- */

static void on_state(lc_forward *f, lc_forward_state state, const char *detail, void *payload) {
  (void)f;
  on_notice(detail, state == LC_FORWARD_DOWN ? payload : NULL);
}

/* Kills root's sshd sessions ("sshd: root@notty"); not the listener ("sshd: /usr/sbin/sshd ...").
 */
static int kill_session(long pid, const char *text, const void *arg) {
  (void)arg;
  return strncmp(text, "sshd: root", 10) == 0 && kill((pid_t)pid, SIGKILL) == 0;
}

/* A -R forward up on lab0 whose connection is lost while uid 65534 listens on [::1] at its port
 * (an address sshd, asked for 127.0.0.1, does not take): back after the reconnect its listen is
 * refused, and on_state hears why with a second DOWN, after the one of the lost connection. */
static void test_refused_after_reconnect(void) {
  notices downs = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  long stranger = -1;
  pid_t via = -1;
  int target = 0, fd = listen_here(&target), wide = 0, n = 0;
  char last[1024] = "", want[160];
  const int port = 64451;

  LC_REQUIRE(fd >= 0);
  fo.on_state = on_state;
  fo.payload = &downs;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = connect_as(engine, "lab0")) != NULL);
  LC_REQUIRE_OK(lc_forward_new(&f, rt, LC_FORWARD_REMOTE, port, "127.0.0.1", target, &fo));
  stranger = stranger_listen(0, "::1", port, &via);
  fprintf(stderr, "  nobody listens on lab0's [::1]:%d: pid %ld\n", port, stranger);
  LC_CHECK(stranger > 0);
  LC_CHECK(th_each_proc(0, "cmdline", kill_session, NULL) > 0); /* our connection's session */
  /* the DOWN of the lost connection, then the refusal's */
  n = notices_wait(&downs, 2, last, sizeof(last));
  fprintf(stderr, "  %d DOWN states, the last: %s\n", n, last);
  LC_CHECK(n == 2);
  snprintf(want, sizeof(want), "lab0: port %d is also listened on by uid 65534 ([::1]:%d)", port,
           port);
  LC_CHECK_CONTAINS(last, want);
  LC_CHECK(!lc_forward_is_up(f));
  lc_forward_free(f);
  lc_runtime_free(rt);
  lc_engine_free(engine);
  close(fd);
  if (stranger > 0)
    kill((pid_t)stranger, SIGKILL);
  if (via > 0)
    waitpid(via, NULL, 0);
  LC_CHECK(host_listeners_settled(0, port, &wide) == 0);
  LC_CHECK(host_leftovers(0) == 0);
}

static void setup(void) {
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  snprintf(fixture_dir, sizeof(fixture_dir), "%s", th_dir());
}

static void test_setup(void) { setup(); }

static void cleanup_gw(void) {
  if (remove_gw[0] != '\0' && system(remove_gw) != 0) /* NOLINT(cert-env33-c) */
    fprintf(stderr, "  %s failed\n", remove_gw);
}

static void test_cleanup(void) { cleanup_gw(); }

LC_TEST_MAIN(LC_TEST(test_setup), LC_TEST(test_gatewayports), LC_TEST(test_foreign_originator),
             LC_TEST(test_squatted_worker_port), LC_TEST(test_refused_after_reconnect),
             LC_TEST(test_cleanup))
