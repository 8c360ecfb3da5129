/*
 * test_cli_forward.c - `lazyclusterctl forward` (LC_CTL) against a real test host: one -L and one
 * -R each carry a connection, SIGTERM ends it with exit 0 and both ports closed; bad arguments
 * exit 2 with a message quoting them; a host that refuses exits 1 with the library's detail; the
 * first connection to a -R forward, made the moment the host listens, is carried.
 *
 * The -L target is a listener of this test on the bridge address (A.1, what the host sees of this
 * machine); the -R target a listener on 127.0.0.1 here. The -R side is reached from inside the
 * host with a socket made in the host's network namespace (setns, then back).
 */
#include "lc_test.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define HOST 0

static const char *ctl_path(void) {
  const char *p = getenv("LC_CTL");
  if (p == NULL || access(p, X_OK) != 0) {
    fprintf(stderr, "FATAL: LC_CTL does not name the lazyclusterctl binary (run through ctest)\n");
    exit(2);
  }
  return p;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the command ---------------------------------------------------------------------------- */

typedef struct ctl {
  pid_t pid;
  int err_fd;     /* its stderr */
  char err[8192]; /* what it wrote so far */
  size_t len;
} ctl;

/* Starts lazyclusterctl with argv (after the program name), stderr into a pipe. */
static int ctl_start(ctl *c, char *const *args) {
  char *argv[32];
  int fds[2], n = 0;
  memset(c, 0, sizeof(*c));
  argv[n++] = (char *)ctl_path();
  while (args[n - 1] != NULL && n < 31) {
    argv[n] = args[n - 1];
    n++;
  }
  argv[n] = NULL;
  if (pipe2(fds, O_CLOEXEC) < 0)
    return -errno;
  if ((c->pid = fork()) < 0)
    return -errno;
  if (c->pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(fds[1], 2);
    execv(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  c->err_fd = fds[0];
  return 0;
}

/* Reads its stderr until it contains needle or the pipe closes or timeout_ms pass. */
static int ctl_wait_for(ctl *c, const char *needle, int timeout_ms) {
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  while (strstr(c->err, needle) == NULL) {
    struct pollfd p = {.fd = c->err_fd, .events = POLLIN};
    uint64_t now = now_ms();
    ssize_t n;
    if (now >= end || c->len + 1 >= sizeof(c->err))
      return 0;
    if (poll(&p, 1, (int)(end - now)) <= 0)
      continue;
    if ((n = read(c->err_fd, c->err + c->len, sizeof(c->err) - 1 - c->len)) <= 0)
      return strstr(c->err, needle) != NULL;
    c->len += (size_t)n;
    c->err[c->len] = '\0';
  }
  return 1;
}

/* Waits up to timeout_ms for it to exit; returns its exit status, 128+signal, or -1 (killed). */
static int ctl_wait_exit(ctl *c, int timeout_ms) {
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  int st;
  for (;;) {
    pid_t r = waitpid(c->pid, &st, WNOHANG);
    if (r == c->pid)
      break;
    if (now_ms() >= end) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &st, 0);
      ctl_wait_for(c, "\x01", 100);
      close(c->err_fd);
      return -1;
    }
    usleep(20000);
  }
  ctl_wait_for(c, "\x01", 200); /* the rest of stderr */
  close(c->err_fd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- sockets -------------------------------------------------------------------------------- */

/* A listener on addr, port 0 (picked by the kernel); *port gets it. */
static int listen_on(const char *addr, int *port) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t len = sizeof(sa);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0)
    return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  inet_pton(AF_INET, addr, &sa.sin_addr);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

/* A port free on this machine's loopback right now. */
static int free_port(void) {
  int port = 0, fd = listen_on("127.0.0.1", &port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* Connects to 127.0.0.1:port in host i (here when i < 0); the socket, or -errno. */
static int connect_lo(int i, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int fd = th_socket_in(i);
  struct timeval tv = {10, 0};
  if (fd < 0)
    return -EIO;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* Accepts one connection within timeout_ms; -1 if none came. */
static int accept_within(int lfd, int timeout_ms) {
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  struct timeval tv = {10, 0};
  int fd;
  if (poll(&p, 1, timeout_ms) <= 0)
    return -1;
  if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

/* Reads exactly len bytes (or fails) within the socket's receive timeout. */
static int read_exact(int fd, char *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, buf + got, len - got);
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  return 0;
}

/*
 * One round trip through a forward: the client (already connected) says ping, the target's
 * listener accepts and answers pong, the client reads it, both see EOF in turn.
 */
static int carries(int client, int lfd, const char *tag) {
  char ping[64], pong[64], buf[64];
  int conn, ok = 0;
  snprintf(ping, sizeof(ping), "ping %s\n", tag);
  snprintf(pong, sizeof(pong), "pong %s\n", tag);
  if (client < 0 || write(client, ping, strlen(ping)) != (ssize_t)strlen(ping))
    return 0;
  if ((conn = accept_within(lfd, 10000)) < 0)
    return 0;
  if (read_exact(conn, buf, strlen(ping)) == 0 && memcmp(buf, ping, strlen(ping)) == 0 &&
      write(conn, pong, strlen(pong)) == (ssize_t)strlen(pong) &&
      read_exact(client, buf, strlen(pong)) == 0 && memcmp(buf, pong, strlen(pong)) == 0)
    ok = 1;
  shutdown(client, SHUT_WR);
  if (ok && read(conn, buf, 1) != 0) /* the client's EOF came through */
    ok = 0;
  close(conn);
  return ok;
}

/* Whether 127.0.0.1:port refuses connections in host i (here when i < 0) within timeout_ms. */
static int refused_within(int i, int port, int timeout_ms) {
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int fd = connect_lo(i, port);
    if (fd == -ECONNREFUSED)
      return 1;
    if (fd >= 0)
      close(fd);
    if (now_ms() >= end)
      return 0;
    usleep(50000);
  }
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_forward_both_ways_then_sigterm(void) {
  char bridge[64], lspec[128], rspec[128], *dot;
  int ltarget_port = 0, rtarget_port = 0, lport = free_port(), rport = free_port(), lt, rt, fd;
  ctl c;

  /* the bridge address, A.1, is where the host reaches this machine */
  snprintf(bridge, sizeof(bridge), "%s", th_addr(HOST));
  LC_REQUIRE((dot = strrchr(bridge, '.')) != NULL);
  snprintf(dot, sizeof(bridge) - (size_t)(dot - bridge), ".1");
  LC_REQUIRE((lt = listen_on(bridge, &ltarget_port)) >= 0);
  LC_REQUIRE((rt = listen_on("127.0.0.1", &rtarget_port)) >= 0);
  LC_REQUIRE(lport > 0 && rport > 0 && lport != rport);
  snprintf(lspec, sizeof(lspec), "%d:%s:%d", lport, bridge, ltarget_port);
  snprintf(rspec, sizeof(rspec), "127.0.0.1:%d:localhost:%d", rport, rtarget_port);
  {
    char *args[] = {"forward", "lab0", "-F", (char *)th_config(), "-L", lspec, "-R", rspec, NULL};
    LC_REQUIRE(ctl_start(&c, args) == 0);
  }
  if (!ctl_wait_for(&c, "Ctrl-C or SIGTERM stops", 20000)) {
    fprintf(stderr, "  lazyclusterctl said:\n%s", c.err);
    kill(c.pid, SIGKILL);
    ctl_wait_exit(&c, 5000);
    LC_REQUIRE(!"the forwards came up");
  }
  LC_CHECK_CONTAINS(c.err, "-L 127.0.0.1:");
  LC_CHECK_CONTAINS(c.err, " up: listening on this machine");
  LC_CHECK_CONTAINS(c.err, " up: listening on lab0");

  LC_CHECK(carries(connect_lo(-1, lport), lt, "through -L"));
  LC_CHECK(carries(connect_lo(HOST, rport), rt, "through -R"));
  /* a second connection on each: the forwards stay after a connection ends */
  LC_CHECK(carries(connect_lo(-1, lport), lt, "through -L again"));
  LC_CHECK(carries(connect_lo(HOST, rport), rt, "through -R again"));

  /* a connection still open when the signal comes must not hold the exit back */
  fd = connect_lo(-1, lport);
  LC_CHECK(fd >= 0);
  LC_CHECK(kill(c.pid, SIGTERM) == 0);
  LC_CHECK(ctl_wait_exit(&c, 15000) == 0);
  LC_CHECK_CONTAINS(c.err, "closing the forwards");
  if (fd >= 0)
    close(fd);
  LC_CHECK(refused_within(-1, lport, 5000));
  LC_CHECK(refused_within(HOST, rport, 10000));
  if (lc_test_failed_now)
    fprintf(stderr, "  lazyclusterctl said:\n%s", c.err);
  close(lt);
  close(rt);
}

/*
 * The first connection to a -R forward, made the moment the host listens by a client that retries
 * from before the forward starts: sshd can open its channel in the same read as its answer to the
 * listen request, and that connection must be carried, not closed as belonging to no forward.
 */
static void test_remote_first_connection(void) {
  int tport = 0, rt, rport = free_port();
  LC_REQUIRE((rt = listen_on("127.0.0.1", &tport)) >= 0);
  LC_REQUIRE(rport > 0);
  for (int round = 0; round < 3; round++) {
    char rspec[128], tag[32];
    uint64_t end;
    int fd;
    ctl c;
    snprintf(rspec, sizeof(rspec), "127.0.0.1:%d:localhost:%d", rport, tport);
    snprintf(tag, sizeof(tag), "first of round %d", round);
    {
      char *args[] = {"forward", "lab0", "-F", (char *)th_config(), "-R", rspec, NULL};
      LC_REQUIRE(ctl_start(&c, args) == 0);
    }
    end = now_ms() + 20000;
    while ((fd = connect_lo(HOST, rport)) == -ECONNREFUSED && now_ms() < end)
      ;
    LC_CHECK(fd >= 0);
    LC_CHECK(carries(fd, rt, tag));
    if (fd >= 0)
      close(fd);
    LC_CHECK(kill(c.pid, SIGTERM) == 0);
    LC_CHECK(ctl_wait_exit(&c, 15000) == 0);
    LC_CHECK(refused_within(HOST, rport, 10000));
    if (lc_test_failed_now) {
      fprintf(stderr, "  lazyclusterctl said:\n%s", c.err);
      break;
    }
  }
  close(rt);
}

/* Runs ctl with args to its end; returns the exit status, stderr in c->err. */
static int ctl_run(ctl *c, char *const *args) {
  if (ctl_start(c, args) != 0)
    return -1;
  ctl_wait_for(c, "\x01", 20000); /* until the pipe closes */
  return ctl_wait_exit(c, 20000);
}

static void test_bad_arguments(void) {
  static const char *const bad[][2] = {
      {"-L", "70000:localhost:22"},        {"-L", "0:localhost:22"},
      {"-R", "0.0.0.0:8080:localhost:22"}, {"-L", "8080:localhost"},
      {"-L", "8080:localhost:0"},          {"-R", "*:8080:localhost:22"},
      {"-L", "8080:localhost:22:9:9"},     {"-L", "[::1:8080:localhost:22"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *args[] = {"forward",         "lab0", "-F", (char *)th_config(), (char *)bad[i][0],
                    (char *)bad[i][1], NULL};
    char quoted[128];
    ctl c;
    int st = ctl_run(&c, args);
    snprintf(quoted, sizeof(quoted), "'%s'", bad[i][1]);
    if (st != 2 || strstr(c.err, quoted) == NULL)
      fprintf(stderr, "  %s %s: exit %d, said: %s", bad[i][0], bad[i][1], st, c.err);
    LC_CHECK(st == 2);
    LC_CHECK_CONTAINS(c.err, quoted);
  }
  {
    char *args[] = {"forward", "lab0", "-F", (char *)th_config(), NULL};
    ctl c;
    LC_CHECK(ctl_run(&c, args) == 2);
    LC_CHECK_CONTAINS(c.err, "no forward given");
  }
  {
    char *args[] = {"forward", "-L", "8080:localhost:22", NULL};
    ctl c;
    LC_CHECK(ctl_run(&c, args) == 2);
    LC_CHECK_CONTAINS(c.err, "no host given");
  }
  {
    char *args[] = {"forward", "lab0", "--bogus", "-L", "8080:localhost:22", NULL};
    ctl c;
    LC_CHECK(ctl_run(&c, args) == 2);
    LC_CHECK_CONTAINS(c.err, "'--bogus'");
  }
  {
    char *args[] = {"forward", "--help", NULL};
    ctl c;
    LC_CHECK(ctl_run(&c, args) == 0);
  }
}

/* A host whose port refuses: exit 1, the library's detail names it. */
static void test_connection_refused(void) {
  char host[64], lspec[64], where[64];
  int port = free_port();
  char *args[] = {"forward", host, "-F", (char *)th_config(), "-L", lspec, NULL};
  ctl c;
  int st;
  snprintf(host, sizeof(host), "root@127.0.0.1:%d", port);
  snprintf(lspec, sizeof(lspec), "%d:localhost:22", free_port());
  snprintf(where, sizeof(where), "127.0.0.1:%d", port);
  st = ctl_run(&c, args);
  LC_CHECK(st == 1);
  LC_CHECK_CONTAINS(c.err, "cannot connect");
  LC_CHECK_CONTAINS(c.err, where);
  if (st != 1)
    fprintf(stderr, "  exit %d, said: %s", st, c.err);
}

LC_TEST_MAIN(LC_TEST(test_forward_both_ways_then_sigterm), LC_TEST(test_bad_arguments),
             LC_TEST(test_connection_refused), LC_TEST(test_remote_first_connection))
