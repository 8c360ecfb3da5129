/*
 * test_meshrelay.c - a host's mesh listens through its mesh relay (src/meshrelay.c), on real test
 * hosts:
 *
 * - carried: ports listened on lab5 through the relay reach this machine's 127.0.0.1:PORT (a
 *   server here says which port it is), a perl process holds them on the host and sshd does
 *   not; dropped ports stop listening there;
 * - the carrier: a connection to it that names a port the relay does not have (from 127.1.HI.LO)
 *   or none (from 127.0.0.1) is closed unrelayed, one that names a port it has is carried;
 * - in use: a line with a port taken on the host fails naming the host and the port, and none of
 *   that call's ports is left listening (nor kept in the relay's set);
 * - ended: the helper killed on the host is seen ended, with its ports, and a new relay takes
 *   them again;
 * - no perl (hidden on lab6 by a bind mount in its mount namespace): not relayed, no error, the
 *   caller's sshd listens serve (relayed 0); a plain user whose login shell is fish is relayed;
 * - streams: 16 connections at once through one relayed port, each 1 MiB each way to an echo
 *   server here, arrive whole while ONE perl process carries them all (no process per
 *   connection); a client that resets mid-stream does not stop the others; afterwards the relay
 *   holds no connection on the host; as root and as a plain user whose login shell is fish;
 * - after each runtime's free nothing of the relay is left on the host.
 */
#include "lc_test.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_internal.h"

#define NSERVE 4

static int serve_fd[NSERVE], serve_port[NSERVE];
static pthread_t serve_thread;
static volatile int serving = 1;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Here: NSERVE servers on 127.0.0.1, each writes "hello PORT\n" to whoever connects. */
static void *serve(void *arg) {
  (void)arg;
  while (serving) {
    struct pollfd pf[NSERVE];
    for (int i = 0; i < NSERVE; i++)
      pf[i] = (struct pollfd){.fd = serve_fd[i], .events = POLLIN};
    if (poll(pf, NSERVE, 100) <= 0)
      continue;
    for (int i = 0; i < NSERVE; i++) {
      char msg[32];
      int c;
      if (!(pf[i].revents & POLLIN) || (c = accept(serve_fd[i], NULL, NULL)) < 0)
        continue;
      snprintf(msg, sizeof(msg), "hello %d\n", serve_port[i]);
      if (write(c, msg, strlen(msg)) < 0)
        perror("write");
      close(c);
    }
  }
  return NULL;
}

static int serve_start(void) {
  for (int i = 0; i < NSERVE; i++) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if ((serve_fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(serve_fd[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(serve_fd[i], 16) < 0 ||
        getsockname(serve_fd[i], (struct sockaddr *)&sa, &len) < 0)
      return -1;
    serve_port[i] = ntohs(sa.sin_port);
  }
  return pthread_create(&serve_thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

/* The servers, started by the first test that runs. */
static int serving_here(void) {
  static int started = 0, ok = 0;
  if (!started) {
    started = 1;
    ok = serve_start() == 0;
  }
  return ok;
}

/*
 * On host i: connects to 127.0.0.1:port from source (NULL: any) and reads a line into out.
 * Returns 1 with a line, 0 when the connection was closed without one, -1 when it was refused
 * (nothing listens) or failed.
 */
static int host_connect(int i, const char *source, int port, char *out, size_t n) {
  struct sockaddr_in to = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = th_socket_in(i), got = 0;
  size_t len = 0;
  out[0] = '\0';
  if (fd < 0)
    return -1;
  if (source != NULL) {
    struct sockaddr_in from = {.sin_family = AF_INET};
    inet_pton(AF_INET, source, &from.sin_addr);
    if (bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) {
      close(fd);
      return -1;
    }
  }
  if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
    close(fd);
    return -1;
  }
  while (len + 1 < n) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t r;
    if (poll(&pf, 1, 10000) <= 0 || (r = read(fd, out + len, n - 1 - len)) <= 0)
      break;
    len += (size_t)r;
    out[len] = '\0';
    if (strchr(out, '\n') != NULL) {
      got = 1;
      break;
    }
  }
  close(fd);
  return got;
}

/* Whether host i reaches this machine's server k on its port through the relay. */
static int carried(int i, int k) {
  char line[64], want[32];
  snprintf(want, sizeof(want), "hello %d\n", serve_port[k]);
  return host_connect(i, NULL, serve_port[k], line, sizeof(line)) == 1 && strcmp(line, want) == 0;
}

/* Waits up to 10 s until nothing listens on port on host i (a connection is refused). */
static int gone_on_host(int i, int port) {
  char line[64];
  for (int t = 0; t < 100; t++) {
    if (host_connect(i, NULL, port, line, sizeof(line)) < 0)
      return 1;
    sleep_ms(100);
  }
  return 0;
}

/* Waits up to 10 s until no process of the relay runs on host i. */
static int no_relay_on(int i) {
  for (int t = 0; t < 100; t++) {
    if (th_count_procs(i, "perl /dev/fd/3") == 0)
      return 1;
    sleep_ms(100);
  }
  return 0;
}

/* How many lines of `ss ARGS` on host i hold both a and b (b NULL: a alone); -1 on failure. */
static int ss_lines(int i, const char *args, const char *a, const char *b) {
  char cmd[4096], line[512];
  FILE *p;
  int n = 0;
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- ss %s", th_script(), i, th_dir(), args);
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the testhosts script */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL)
    n += strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
  pclose(p);
  return n;
}

/* Who listens on port on host i, by process name ("perl", "sshd"), from `ss -ltnpH`. */
static int listener_is(int i, int port, const char *name) {
  char addr[64], want[96];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d ", port);
  snprintf(want, sizeof(want), "((\"%s\"", name);
  return ss_lines(i, "-ltnpH", addr, want) > 0;
}

/* Runs sh text as root in host i's namespaces; its exit status. */
static int host_sh(int i, const char *text) {
  char cmd[4096];
  int st;
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- sh -c '%s'", th_script(), i, th_dir(), text);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static lc_runtime *connect_to(lc_engine *engine, const char *host) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  if (lc_runtime_new_ssh(&rt, engine, host, &o) < 0)
    fprintf(stderr, "  cannot connect to %s: %s\n", host, lc_error_last());
  return rt;
}

/* Listens on host rt for ports through its relay: the call's result, relayed into *relayed. */
static int relay_listen(lc_runtime *rt, const int *ports, size_t n, unsigned char *relayed,
                        lc__relaylog *log) {
  int *p = (int *)ports;
  return lc__meshrelay_listen_many(&rt, 1, &p, &n, relayed, log);
}

static void test_carried(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc__relaylog log = {0};
  unsigned char relayed = 0;
  int ports[2], carrier;
  char line[64], src[32];

  LC_REQUIRE(serving_here());
  ports[0] = serve_port[0];
  ports[1] = serve_port[1];
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = connect_to(engine, "lab5")) != NULL);
  LC_CHECK_OK(relay_listen(rt, ports, 2, &relayed, &log));
  LC_CHECK(relayed == 1);
  LC_CHECK(log.n == 2);
  LC_CHECK(lc__meshrelay_has(rt, ports[0]) && lc__meshrelay_has(rt, ports[1]));
  LC_CHECK(!lc__meshrelay_has(rt, serve_port[2]));
  LC_CHECK(carried(5, 0));
  LC_CHECK(carried(5, 1));
  LC_CHECK(listener_is(5, ports[0], "perl"));
  LC_CHECK(!listener_is(5, ports[0], "sshd"));
  LC_CHECK(th_count_procs(5, "perl /dev/fd/3") == 1);
  /* the carrier: sshd's one listen; only the relay's ports, named by the source address */
  carrier = lc__meshrelay_carrier_port(rt);
  LC_CHECK(carrier > 0);
  LC_CHECK(listener_is(5, carrier, "sshd"));
  snprintf(src, sizeof(src), "127.1.%d.%d", serve_port[0] >> 8, serve_port[0] & 255);
  LC_CHECK(host_connect(5, src, carrier, line, sizeof(line)) == 1);
  snprintf(src, sizeof(src), "127.1.%d.%d", serve_port[2] >> 8, serve_port[2] & 255);
  LC_CHECK(host_connect(5, src, carrier, line, sizeof(line)) == 0); /* served here, not relayed */
  LC_CHECK(host_connect(5, "127.0.0.1", carrier, line, sizeof(line)) == 0);
  /* the same ports again: nothing new, nothing logged */
  LC_CHECK_OK(relay_listen(rt, ports, 2, &relayed, &log));
  LC_CHECK(relayed == 1 && log.n == 2);
  /* the second dropped: it stops listening there, the first still carries */
  lc__relaylog_drop(&log, 1);
  LC_CHECK(log.n == 1);
  LC_CHECK(!lc__meshrelay_has(rt, ports[1]));
  LC_CHECK(gone_on_host(5, ports[1]));
  LC_CHECK(carried(5, 0));
  lc__relaylog_free(&log);
  LC_CHECK(gone_on_host(5, ports[0]));
  lc_runtime_free(rt);
  LC_CHECK(no_relay_on(5));
  lc_engine_free(engine);
}

/* Here: an echo server; each connection in a thread of its own, its write side shut at EOF. */
static int echo_fd = -1, echo_port;

static void *echo_conn(void *arg) {
  int c = (int)(intptr_t)arg;
  char buf[16384];
  ssize_t r;
  while ((r = read(c, buf, sizeof(buf))) > 0)
    for (ssize_t o = 0; o < r;) {
      ssize_t w = write(c, buf + o, (size_t)(r - o));
      if (w <= 0)
        goto out;
      o += w;
    }
out:
  shutdown(c, SHUT_WR);
  close(c);
  return NULL;
}

static void *echo_accept(void *arg) {
  (void)arg;
  for (;;) {
    pthread_t t;
    int c = accept(echo_fd, NULL, NULL);
    if (c < 0)
      return NULL;
    if (pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)c) == 0)
      pthread_detach(t);
    else
      close(c);
  }
}

static int echo_start(void) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  pthread_t t;
  if ((echo_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      bind(echo_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(echo_fd, 64) < 0 ||
      getsockname(echo_fd, (struct sockaddr *)&sa, &len) < 0 ||
      pthread_create(&t, NULL, echo_accept, NULL) != 0)
    return -1;
  pthread_detach(t);
  echo_port = ntohs(sa.sin_port);
  return 0;
}

/* How many TCP connections the relay's perl holds on host i, from `ss -tnpH`. */
static int perl_conns(int i) { return ss_lines(i, "-tnpH", "((\"perl\"", NULL); }

#define NSTREAM 16
#define STREAM_BYTES (1 << 20)

static unsigned char stream_byte(int k, size_t o) {
  return (unsigned char)((o * 31 + (size_t)k * 7 + (o >> 12)) & 0xff);
}

/*
 * NSTREAM clients on host i to port, all at once: each sends STREAM_BYTES and shuts its write
 * side, and reads the echo to EOF. Returns how many got back exactly what they sent; *procs: the
 * relay's processes on host i once every one of them has been carried (none is shut before).
 */
static int streams(int i, int port, int *procs) {
  int fd[NSTREAM], ok = 0, left = NSTREAM, looked = 0;
  size_t sent[NSTREAM] = {0}, got[NSTREAM] = {0};
  int bad[NSTREAM] = {0}, done[NSTREAM] = {0};
  unsigned char buf[16384];
  struct sockaddr_in to = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  uint64_t until = lc__now_ms() + 60000;
  *procs = -1;
  for (int k = 0; k < NSTREAM; k++)
    if ((fd[k] = th_socket_in(i)) < 0 || connect(fd[k], (struct sockaddr *)&to, sizeof(to)) < 0)
      return -1;
  while (left > 0 && lc__now_ms() < until) {
    struct pollfd pf[NSTREAM];
    for (int k = 0; k < NSTREAM; k++)
      pf[k] = (struct pollfd){.fd = done[k] ? -1 : fd[k],
                              .events = (short)(POLLIN | (sent[k] < STREAM_BYTES ? POLLOUT : 0))};
    if (poll(pf, NSTREAM, 1000) < 0)
      break;
    if (!looked) { /* once every one has been carried, while all of them are open */
      int all = 1;
      for (int k = 0; k < NSTREAM; k++)
        all &= got[k] > 0;
      if (all) {
        *procs = th_count_procs(i, "perl /dev/fd/3");
        looked = 1;
        for (int k = 0; k < NSTREAM; k++)
          if (sent[k] == STREAM_BYTES)
            shutdown(fd[k], SHUT_WR);
      }
    }
    for (int k = 0; k < NSTREAM; k++) {
      if (done[k])
        continue;
      if ((pf[k].revents & POLLOUT) && sent[k] < STREAM_BYTES) {
        size_t n = STREAM_BYTES - sent[k] < sizeof(buf) ? STREAM_BYTES - sent[k] : sizeof(buf);
        ssize_t w;
        for (size_t o = 0; o < n; o++)
          buf[o] = stream_byte(k, sent[k] + o);
        if ((w = send(fd[k], buf, n, MSG_DONTWAIT | MSG_NOSIGNAL)) > 0 &&
            (sent[k] += (size_t)w) == STREAM_BYTES && looked)
          shutdown(fd[k], SHUT_WR);
      }
      if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = recv(fd[k], buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN)
          continue;
        for (ssize_t o = 0; o < r; o++)
          bad[k] |= buf[o] != stream_byte(k, got[k] + (size_t)o);
        if (r > 0)
          got[k] += (size_t)r;
        else {
          done[k] = 1;
          left--;
          ok += !bad[k] && got[k] == STREAM_BYTES && sent[k] == STREAM_BYTES;
        }
      }
    }
  }
  for (int k = 0; k < NSTREAM; k++)
    close(fd[k]);
  return ok;
}

/* A client on host i that sends to port and resets its connection (SO_LINGER 0) unread. */
static void reset_client(int i, int port) {
  struct sockaddr_in to = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct linger lg = {1, 0};
  static unsigned char junk[200000];
  int fd = th_socket_in(i);
  if (fd < 0)
    return;
  if (connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0) {
    if (send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
      perror("send");
    sleep_ms(200);
  }
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  close(fd);
}

/* The streams through lab5's relay, as spec (root, or a plain user whose login shell is fish). */
static void streams_as(const char *spec) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  unsigned char relayed = 0;
  int procs = -1, conns = -1;

  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = connect_to(engine, spec)) != NULL);
  LC_CHECK_OK(relay_listen(rt, &echo_port, 1, &relayed, NULL));
  LC_CHECK_OK(relay_listen(rt, &serve_port[0], 1, &relayed, NULL));
  LC_CHECK(relayed == 1);
  reset_client(5, echo_port);
  LC_CHECK(streams(5, echo_port, &procs) == NSTREAM);
  LC_CHECK(procs == 1);
  reset_client(5, echo_port);
  LC_CHECK(carried(5, 0));
  LC_CHECK(streams(5, echo_port, &procs) == NSTREAM);
  /* nothing held: every carried connection closed on the host */
  for (int t = 0; t < 100 && (conns = perl_conns(5)) != 0; t++)
    sleep_ms(100);
  LC_CHECK(conns == 0);
  LC_CHECK(th_count_procs(5, "perl /dev/fd/3") == 1);
  lc_runtime_free(rt);
  LC_CHECK(no_relay_on(5));
  lc_engine_free(engine);
}

static void test_streams(void) {
  LC_REQUIRE(serving_here());
  LC_REQUIRE(echo_start() == 0);
  streams_as("lab5");
  streams_as("lcfish@lab5");
}

static void test_in_use(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc__relaylog log = {0};
  unsigned char relayed = 1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  int squat = th_socket_in(5), taken, ports[3];
  char want[64];

  LC_REQUIRE(serving_here());
  LC_REQUIRE(squat >= 0);
  LC_REQUIRE(bind(squat, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(squat, 1) == 0 &&
             getsockname(squat, (struct sockaddr *)&sa, &len) == 0);
  taken = ntohs(sa.sin_port);
  ports[0] = serve_port[0];
  ports[1] = taken;
  ports[2] = serve_port[1];
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = connect_to(engine, "lab5")) != NULL);
  LC_CHECK(relay_listen(rt, ports, 3, &relayed, &log) == -EADDRINUSE);
  snprintf(want, sizeof(want), "lab5: cannot listen on port %d there", taken);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), "in use");
  LC_CHECK(relayed == 0 && log.n == 0);
  LC_CHECK(!lc__meshrelay_has(rt, ports[0]) && !lc__meshrelay_has(rt, ports[2]));
  LC_CHECK(gone_on_host(5, ports[0]));
  LC_CHECK(gone_on_host(5, ports[2]));
  /* the relay still serves */
  LC_CHECK_OK(relay_listen(rt, ports, 1, &relayed, &log));
  LC_CHECK(relayed == 1 && carried(5, 0));
  lc__relaylog_free(&log);
  close(squat);
  lc_runtime_free(rt);
  LC_CHECK(no_relay_on(5));
  lc_engine_free(engine);
}

static void test_ended(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  unsigned char relayed = 0;
  int ports[2], *back = NULL, ended = 0;
  size_t nback = 0;

  LC_REQUIRE(serving_here());
  ports[0] = serve_port[2];
  ports[1] = serve_port[3];
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = connect_to(engine, "lab5")) != NULL);
  LC_CHECK_OK(relay_listen(rt, ports, 2, &relayed, NULL));
  LC_CHECK(relayed == 1 && carried(5, 2));
  LC_CHECK(lc__meshrelay_ended(rt, &back, &nback) == 0);
  LC_CHECK(th_kill_procs(5, "perl", SIGKILL) == 1);
  for (int t = 0; t < 100 && !ended; t++) {
    ended = lc__meshrelay_ended(rt, &back, &nback);
    if (!ended)
      sleep_ms(100);
  }
  LC_CHECK(ended);
  LC_CHECK(nback == 2);
  LC_CHECK(!lc__meshrelay_has(rt, ports[0]));
  LC_CHECK(gone_on_host(5, ports[0]));
  if (ended) { /* a new relay takes them */
    LC_CHECK_OK(relay_listen(rt, back, nback, &relayed, NULL));
    LC_CHECK(relayed == 1 && carried(5, 2) && carried(5, 3));
    LC_CHECK(th_count_procs(5, "perl /dev/fd/3") == 1);
  }
  free(back);
  lc_runtime_free(rt);
  LC_CHECK(no_relay_on(5));
  lc_engine_free(engine);
}

static void test_no_perl_and_shells(void) {
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  unsigned char relayed = 1;
  int ports[1] = {serve_port[0]};

  /* perl hidden on lab6 alone: a non-executable file over it in lab6's mount namespace */
  LC_REQUIRE(serving_here());
  LC_REQUIRE(host_sh(6, "mount --bind /dev/null /usr/bin/perl") == 0);
  LC_CHECK(access("/usr/bin/perl", X_OK) == 0); /* here it is still there */
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  if ((rt = connect_to(engine, "lab6")) != NULL) {
    LC_CHECK_OK(relay_listen(rt, ports, 1, &relayed, NULL));
    LC_CHECK(relayed == 0);
    LC_CHECK(!lc__meshrelay_has(rt, ports[0]));
    LC_CHECK(gone_on_host(6, ports[0]));
    lc_runtime_free(rt);
  }
  LC_CHECK(host_sh(6, "umount /usr/bin/perl") == 0);
  /* a plain user whose login shell is fish */
  LC_REQUIRE((rt = connect_to(engine, "lcfish@lab5")) != NULL);
  LC_CHECK_OK(relay_listen(rt, ports, 1, &relayed, NULL));
  LC_CHECK(relayed == 1 && carried(5, 0));
  LC_CHECK(listener_is(5, ports[0], "perl"));
  lc_runtime_free(rt);
  LC_CHECK(no_relay_on(5));
  LC_CHECK(no_relay_on(6));
  lc_engine_free(engine);
}

LC_TEST_MAIN(LC_TEST(test_carried), LC_TEST(test_streams), LC_TEST(test_in_use),
             LC_TEST(test_ended), LC_TEST(test_no_perl_and_shells))
