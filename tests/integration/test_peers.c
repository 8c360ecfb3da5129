/*
 * test_peers.c - who may connect to our listeners on this machine (issue 14). Another user of
 * this machine (nobody, uid 65534) connects to them while they are up:
 *   - a -L forward of a cluster whose master runs on a test host (lab0): the master, a small
 *     Python service that prints the first line of every connection it gets, never sees nobody's
 *     connection; nobody gets no byte; the refusal is told (uid 65534, the port); root, who runs
 *     the test and owns the engine, still reaches the master;
 *   - a local forward and a remote forward on the local runtime (whose "remote" listener is here,
 *     as the mesh's is): the same, with a target of the test's own that records every connection.
 * Then the policy, from the other side: peers_helper, run as nobody, owns a forward, and root,
 * nobody and uid 4242 connect: only nobody by default (also for NULL and version-1 options), root
 * too with LC_PEERS_OWNER_AND_ROOT, anyone with LC_PEERS_ANY, and a forward's own peers over
 * the engine's. After each part, nothing of ours is left running on the host or here.
 */
#include "clusterenv.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static lc_engine *engine;
static lc_group *group;
static lc_runtime *local;
static char tmpdir[] = "/var/tmp/lc_test_peers.XXXXXX";

/* ---- notices and lines, gathered on the engine thread ------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char notices[65536];
static char master_out[65536];

static void append(char *buf, size_t size, const char *line, size_t len) {
  size_t used;
  pthread_mutex_lock(&mu);
  used = strlen(buf);
  if (used + len + 2 < size) {
    memcpy(buf + used, line, len);
    buf[used + len] = '\n';
    buf[used + len + 1] = '\0';
  }
  pthread_mutex_unlock(&mu);
}

static void on_notice(const char *message, void *payload) {
  (void)payload;
  fprintf(stderr, "  notice: %s\n", message);
  append(notices, sizeof(notices), message, strlen(message));
}

static void on_output(lc_cluster *c, int index, const char *host, const char *line, size_t len,
                      lc_stream stream, void *payload) {
  (void)c;
  (void)host;
  (void)payload;
  if (index < 0 && stream == LC_STDOUT)
    append(master_out, sizeof(master_out), line, len);
}

/* Whether buf holds needle (under the lock). */
static int holds(const char *buf, const char *needle) {
  int r;
  pthread_mutex_lock(&mu);
  r = strstr(buf, needle) != NULL;
  pthread_mutex_unlock(&mu);
  return r;
}

/* Waits until buf holds needle; the limit only keeps a broken run from hanging. */
static int wait_for(const char *buf, const char *needle) {
  for (int i = 0; i < 600 && !holds(buf, needle); i++)
    poll(NULL, 0, 50);
  return holds(buf, needle);
}

static void clear(char *buf) {
  pthread_mutex_lock(&mu);
  buf[0] = '\0';
  pthread_mutex_unlock(&mu);
}

/* ---- clients ------------------------------------------------------------------------------ */

/*
 * As uid (-1: as we are), connects to 127.0.0.1:port, sends "NAME\n" and reads until the other
 * side closes. Returns what came back in out ("" when nothing did), or "connect failed".
 */
static void client_as(int uid, int port, const char *name, char *out, size_t size) {
  int p[2], st;
  pid_t pid;
  ssize_t n, got = 0;
  out[0] = '\0';
  if (pipe(p) < 0)
    return;
  if ((pid = fork()) == 0) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    char buf[256], line[128];
    size_t have = 0;
    int fd;
    close(p[0]);
    if (uid >= 0 &&
        (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0))
      _exit(1);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
      if (write(p[1], "connect failed", 14) < 0)
        _exit(1);
      _exit(0);
    }
    snprintf(line, sizeof(line), "%s\n", name);
    (void)send(fd, line, strlen(line), MSG_NOSIGNAL);
    while (have < sizeof(buf) && (n = read(fd, buf + have, sizeof(buf) - have)) > 0)
      have += (size_t)n;
    if (have > 0 && write(p[1], buf, have) < 0)
      _exit(1);
    _exit(0);
  }
  close(p[1]);
  while ((size_t)got + 1 < size && (n = read(p[0], out + got, size - (size_t)got - 1)) > 0)
    got += n;
  out[got > 0 ? got : 0] = '\0';
  close(p[0]);
  waitpid(pid, &st, 0);
}

/* ---- a target here: records the first line of every connection, answers "target" ----------- */

typedef struct target {
  int fd, port;
  pthread_t thread;
  char seen[4096]; /* "NAME\n" per connection, under mu */
} target;

static void *target_main(void *arg) {
  target *t = arg;
  for (;;) {
    char line[128];
    ssize_t n, have = 0;
    int c = accept(t->fd, NULL, NULL);
    if (c < 0)
      return NULL;
    while (have < (ssize_t)sizeof(line) - 1 && (n = read(c, line + have, 1)) == 1 &&
           line[have] != '\n')
      have++;
    line[have] = '\0';
    append(t->seen, sizeof(t->seen), line, (size_t)have);
    (void)send(c, "target\n", 7, MSG_NOSIGNAL);
    close(c);
  }
}

static int target_start(target *t) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  memset(t, 0, sizeof(*t));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      bind(t->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(t->fd, 64) < 0 ||
      getsockname(t->fd, (struct sockaddr *)&a, &len) < 0)
    return -1;
  t->port = ntohs(a.sin_port);
  return pthread_create(&t->thread, NULL, target_main, t) == 0 ? 0 : -1;
}

static void target_stop(target *t) {
  shutdown(t->fd, SHUT_RDWR);
  pthread_join(t->thread, NULL);
  close(t->fd);
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* A port free here now (a remote forward needs one given). */
static int free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* nobody is refused and told of, root gets through, the target saw only root. */
static void refused_then_owner(lc_forward_kind kind) {
  lc_forward *f = NULL;
  target t;
  char got[256], want[128];
  int port;
  LC_REQUIRE(target_start(&t) == 0);
  clear(notices);
  LC_REQUIRE_OK(lc_forward_new(&f, local, kind, kind == LC_FORWARD_REMOTE ? free_port() : 0,
                               "127.0.0.1", t.port, NULL));
  port = lc_forward_port(f);
  client_as(65534, port, "nobody", got, sizeof(got));
  LC_CHECK_STR(got, ""); /* not a byte: closed at once */
  snprintf(want, sizeof(want), "127.0.0.1:%d: refused a connection from uid 65534 (nobody)", port);
  LC_CHECK(wait_for(notices, want));
  LC_CHECK_CONTAINS(notices, "only uid 0 (root) may connect");
  client_as(-1, port, "root", got, sizeof(got));
  LC_CHECK_STR(got, "target\n");
  /* the target saw root's connection, and nobody's never (it came first, had it come) */
  LC_CHECK(wait_for(t.seen, "root\n"));
  LC_CHECK_STR(t.seen, "root\n");
  lc_forward_free(f);
  target_stop(&t);
}

static void test_local_forward(void) { refused_then_owner(LC_FORWARD_LOCAL); }

/* A remote forward on the local runtime listens here: the mesh's listeners on this machine. */
static void test_remote_forward_on_local_runtime(void) { refused_then_owner(LC_FORWARD_REMOTE); }

/* The master on lab0 prints "conn NAME" for each connection's first line, and answers. */
static const char master_py[] =
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen(64)\n"
    "print('listening', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    line = c.makefile('rb').readline().decode(errors='replace').strip()\n"
    "    print('conn ' + line, flush=True)\n"
    "    try:\n"
    "        c.sendall(b'master\\n')\n"
    "    except OSError:\n"
    "        pass\n"
    "    c.close()\n";

static void test_cluster_master_forward(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  char script[256], mt[512], wt[256], wtag[64], wline[80], got[256], want[160];
  FILE *fp;
  int port;
  snprintf(script, sizeof(script), "%s/master.py", tmpdir);
  LC_REQUIRE((fp = fopen(script, "w")) != NULL);
  fputs(master_py, fp);
  fclose(fp);
  chmod(script, 0644);
  snprintf(mt, sizeof(mt), "exec python3 -u %s {master_port}", script);
  snprintf(wtag, sizeof(wtag), "peers-w-%ld", (long)getpid());
  snprintf(wline, sizeof(wline), "%s\n", wtag);
  snprintf(wt, sizeof(wt), "exec ~/lcbin/lazyclusterctl serve {worker_port} %s", wtag);
  LC_REQUIRE_OK(th_command_type_with(&m, &w, mt, wt, "expose=here"));
  o.master_host = "lab0";
  o.master_port = 62400;
  o.worker_ports = "62401-62420";
  o.on_output = on_output;
  clear(master_out);
  clear(notices);
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  if (lc_cluster_start(c, 1) < 0) {
    fprintf(stderr, "  start: %s\n", lc_error_last());
    LC_CHECK(!"the cluster starts");
    goto out;
  }
  port = lc_cluster_master_port(c);
  LC_CHECK(wait_for(master_out, "listening"));
  client_as(65534, port, "nobody", got, sizeof(got));
  LC_CHECK_STR(got, "");
  snprintf(want, sizeof(want), "127.0.0.1:%d: refused a connection from uid 65534 (nobody)", port);
  LC_CHECK(wait_for(notices, want));
  client_as(-1, port, "root", got, sizeof(got));
  LC_CHECK_STR(got, "master\n");
  /* the master takes one connection after the other: had nobody's reached it, its line would
   * stand before root's */
  LC_CHECK(wait_for(master_out, "conn root"));
  LC_CHECK(!holds(master_out, "conn nobody"));
  /* a worker's port exposed here (expose=here) is a listener of ours too */
  if (lc_cluster_worker(c, 0) != NULL) {
    int wport = lc_cluster_worker(c, 0)->port;
    client_as(65534, wport, "nobody", got, sizeof(got));
    LC_CHECK_STR(got, "");
    snprintf(want, sizeof(want), "127.0.0.1:%d: refused a connection from uid 65534", wport);
    LC_CHECK(wait_for(notices, want));
    client_as(-1, wport, "root", got, sizeof(got));
    LC_CHECK_STR(got, wline);
  }
out:
  lc_cluster_free(c);
  th_command_type_free(m, w);
  /* nothing of it anywhere (the hosts share this machine's pid namespace): its processes and
   * their lifelines carry the script's path (unique to this run) or the worker's tag */
  LC_CHECK(th_each_local_proc("cmdline", th_cmdline_matches, script) == 0);
  LC_CHECK(th_each_local_proc("cmdline", th_cmdline_matches, wtag) == 0);
}

/* ---- the policy, with the forward owned by nobody ------------------------------------------ */

typedef struct helper {
  pid_t pid;
  int in, out; /* its stdin (we close it to end it), its stdout */
  int port;
  char text[8192];
} helper;

static char helper_path[4200];

/* Reads the helper's stdout until it holds needle (or it ends). */
static int helper_wait(helper *h, const char *needle) {
  size_t used = strlen(h->text);
  while (strstr(h->text, needle) == NULL) {
    struct pollfd p = {.fd = h->out, .events = POLLIN};
    ssize_t n;
    if (poll(&p, 1, 30000) <= 0)
      return 0;
    if ((n = read(h->out, h->text + used, sizeof(h->text) - used - 1)) <= 0)
      return 0;
    used += (size_t)n;
    h->text[used] = '\0';
  }
  return 1;
}

static int helper_start(helper *h, const char *mode, int tport) {
  int in[2], out[2];
  char tp[16];
  memset(h, 0, sizeof(*h));
  snprintf(tp, sizeof(tp), "%d", tport);
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
    return -1;
  if ((h->pid = fork()) == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
      _exit(1);
    setenv("HOME", tmpdir, 1);
    execl(helper_path, helper_path, mode, tp, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  h->in = in[1];
  h->out = out[0];
  if (!helper_wait(h, "\n"))
    return -1;
  return sscanf(h->text, "port %d", &h->port) == 1 ? 0 : -1;
}

static void helper_stop(helper *h) {
  close(h->in);
  waitpid(h->pid, NULL, 0);
  close(h->out);
}

/* Who gets through a forward nobody owns under mode: root, nobody itself, uid 4242. */
static void policy(const char *mode, int root_in, int other_in) {
  helper h;
  target t;
  char got[256], want[160];
  /* NULL options and version-1 ones have no on_notice: refusals are not told there */
  int told = strcmp(mode, "null") != 0 && strcmp(mode, "v1") != 0;
  fprintf(stderr, "  mode %s\n", mode);
  LC_REQUIRE(target_start(&t) == 0);
  if (helper_start(&h, mode, t.port) < 0) {
    fprintf(stderr, "  helper: %s\n", h.text);
    LC_CHECK(!"peers_helper starts as nobody");
    target_stop(&t);
    return;
  }
  client_as(-1, h.port, "root", got, sizeof(got));
  LC_CHECK_STR(got, root_in ? "target\n" : "");
  if (!root_in && told) {
    snprintf(want, sizeof(want),
             "127.0.0.1:%d: refused a connection from uid 0 (root): only "
             "uid 65534 (nobody) may connect",
             h.port);
    LC_CHECK(helper_wait(&h, want));
  }
  client_as(4242, h.port, "other", got, sizeof(got));
  LC_CHECK_STR(got, other_in ? "target\n" : "");
  if (!other_in && told) {
    snprintf(want, sizeof(want), "127.0.0.1:%d: refused a connection from uid 4242:", h.port);
    LC_CHECK(helper_wait(&h, want));
  }
  client_as(65534, h.port, "nobody", got, sizeof(got));
  LC_CHECK_STR(got, "target\n"); /* the owner, always */
  LC_CHECK(wait_for(t.seen, "nobody\n"));
  snprintf(want, sizeof(want), "%s%snobody\n", root_in ? "root\n" : "", other_in ? "other\n" : "");
  LC_CHECK_STR(t.seen, want);
  helper_stop(&h);
  target_stop(&t);
}

static void test_policy_default_owner(void) {
  policy("null", 0, 0);
  policy("v1", 0, 0);
  policy("owner", 0, 0);
}

static void test_policy_owner_and_root(void) { policy("owner+root", 1, 0); }
static void test_policy_any(void) { policy("any", 1, 1); }

/* A forward's own peers override the engine's, both ways. */
static void test_policy_per_forward(void) {
  policy("fwd-any", 1, 1);
  policy("fwd-owner", 0, 0);
}

/* ---- setup -------------------------------------------------------------------------------- */

static int copy_file(const char *from, const char *to, mode_t mode) {
  char buf[65536];
  ssize_t n;
  int in = open(from, O_RDONLY | O_CLOEXEC), out;
  if (in < 0)
    return -1;
  if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) < 0) {
    close(in);
    return -1;
  }
  while ((n = read(in, buf, sizeof(buf))) > 0)
    if (write(out, buf, (size_t)n) != n)
      n = -1;
  close(in);
  close(out);
  return n < 0 ? -1 : chmod(to, mode);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_local_forward),          LC_TEST(test_remote_forward_on_local_runtime),
      LC_TEST(test_cluster_master_forward), LC_TEST(test_policy_default_owner),
      LC_TEST(test_policy_owner_and_root),  LC_TEST(test_policy_any),
      LC_TEST(test_policy_per_forward),
  };
  static const char *hosts[] = {"lab0"};
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  lc_runtime_options ro;
  lc_group_report *rep = NULL;
  char ctl[4096];
  int r;
  if (geteuid() != 0) {
    fprintf(stderr, "FATAL: test_peers runs as root (it becomes nobody and uid 4242)\n");
    return 2;
  }
  th_ctl_setup(ctl, NULL, 0);
  ro = th_options();
  /* the helper, where nobody can run it (the build tree may be closed to it) */
  if (mkdtemp(tmpdir) == NULL || chmod(tmpdir, 0755) < 0 ||
      snprintf(helper_path, sizeof(helper_path), "%s/peers_helper", tmpdir) < 0 ||
      copy_file(LC_PEERS_HELPER, helper_path, 0755) < 0) {
    fprintf(stderr, "FATAL: cannot copy %s to %s\n", LC_PEERS_HELPER, tmpdir);
    return 2;
  }
  eo.on_notice = on_notice;
  if (lc_engine_new(&engine, &eo) < 0 || lc_runtime_new_local(&local, engine, NULL) < 0 ||
      lc_group_new(&group, engine, NULL) < 0 || lc_group_connect(&rep, group, hosts, 1, &ro) < 0 ||
      lc_group_report_failures(rep) != 0 || th_ship_ctl(group, ctl) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s %s\n", lc_error_last(),
            rep ? lc_group_report_message(rep, 0) : "");
    return 2;
  }
  lc_group_report_free(rep);
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_group_free(group);
  lc_runtime_free(local);
  lc_engine_free(engine);
  unlink(helper_path);
  {
    char script[256];
    snprintf(script, sizeof(script), "%s/master.py", tmpdir);
    unlink(script);
  }
  rmdir(tmpdir);
  return r;
}
