/*
 * peercheck.c - what the peer check of our listeners costs (issue 14). Prints a table:
 *
 *   - the bare lookup: lc__peer_lookup (one NETLINK_SOCK_DIAG request and its answer) on an
 *     accepted loopback connection, µs per lookup;
 *   - connections through a local forward on the local runtime, one after the other (connect,
 *     read the target's one byte, see it close): with the check (LC_PEERS_OWNER) and without it
 *     (LC_PEERS_ANY), and straight to the target for reference; connections per second and µs
 *     per connection.
 *
 *   peercheck [CONNECTIONS [LOOKUPS]]    (defaults 3000 and 100000)
 *
 * Built from the library's objects (it calls the internal lookup). Not a test: it prints numbers.
 */
#include "peer.h"

#include "lazycluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int listen_any(int *port) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) < 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_to(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The target: answers each connection with one byte and closes it. */
static void *target_main(void *arg) {
  int l = *(int *)arg;
  for (;;) {
    int c = accept(l, NULL, NULL);
    if (c < 0)
      return NULL;
    if (write(c, "x", 1) < 0)
      perror("write");
    close(c);
  }
}

/* n connections to port, one after the other; seconds taken, or -1 when one failed. */
static double run_connections(int port, int n) {
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    char b[8];
    ssize_t k, got = 0;
    int fd = connect_to(port);
    if (fd < 0)
      return -1;
    while ((k = read(fd, b, sizeof(b))) > 0)
      got += k;
    close(fd);
    if (got != 1)
      return -1;
  }
  return now_s() - t0;
}

static double through_forward(lc_runtime *rt, int tport, int peers, int n) {
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_forward *f = NULL;
  double s;
  fo.peers = peers + 1;
  if (lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", tport, &fo) < 0) {
    fprintf(stderr, "peercheck: forward: %s\n", lc_error_last());
    return -1;
  }
  run_connections(lc_forward_port(f), n / 10 + 1); /* warm up */
  s = run_connections(lc_forward_port(f), n);
  lc_forward_free(f);
  return s;
}

static void row(const char *what, int n, double s) {
  if (s < 0)
    printf("| %-44s | %8s | %10s | %8s |\n", what, "failed", "", "");
  else
    printf("| %-44s | %8d | %10.0f | %8.1f |\n", what, n, n / s, s / n * 1e6);
}

int main(int argc, char **argv) {
  int conns = argc > 1 ? atoi(argv[1]) : 3000, lookups = argc > 2 ? atoi(argv[2]) : 100000;
  int tport = 0, lport = 0, l, c, a, nl = -1;
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  pthread_t th;
  lc__peer p;
  lc__err err = {0};
  double t0, s_lookup, s_direct, s_owner, s_any, s_owner2, s_any2;

  /* the bare lookup */
  if ((l = listen_any(&lport)) < 0 || (c = connect_to(lport)) < 0 ||
      (a = accept(l, NULL, NULL)) < 0) {
    perror("peercheck: loopback");
    return 1;
  }
  lc__peer_lookup(&p, &nl, a, &err); /* opens the netlink socket */
  t0 = now_s();
  for (int i = 0; i < lookups; i++)
    if (lc__peer_lookup(&p, &nl, a, &err) < 0) {
      fprintf(stderr, "peercheck: lookup: %s\n", err.msg);
      return 1;
    }
  s_lookup = now_s() - t0;
  lc__peer_close(&nl);
  close(a);
  close(c);
  close(l);

  /* connections */
  if ((l = listen_any(&tport)) < 0 || pthread_create(&th, NULL, target_main, &l) != 0) {
    perror("peercheck: target");
    return 1;
  }
  if (lc_engine_new(&engine, NULL) < 0 || lc_runtime_new_local(&rt, engine, NULL) < 0) {
    fprintf(stderr, "peercheck: %s\n", lc_error_last());
    return 1;
  }
  run_connections(tport, conns / 10 + 1);
  s_direct = run_connections(tport, conns);
  /* twice each, alternating, so that a drift of the machine shows as a spread */
  s_owner = through_forward(rt, tport, LC_PEERS_OWNER, conns);
  s_any = through_forward(rt, tport, LC_PEERS_ANY, conns);
  s_owner2 = through_forward(rt, tport, LC_PEERS_OWNER, conns);
  s_any2 = through_forward(rt, tport, LC_PEERS_ANY, conns);

  printf("| %-44s | %8s | %10s | %8s |\n", "what", "count", "per second", "µs each");
  printf("|%s|%s|%s|%s|\n", "----------------------------------------------", "----------",
         "------------", "----------");
  row("NETLINK_SOCK_DIAG lookup alone", lookups, s_lookup);
  row("connection straight to the target", conns, s_direct);
  row("through a forward, check on (owner)", conns, s_owner);
  row("through a forward, no check (any)", conns, s_any);
  row("through a forward, check on (owner), again", conns, s_owner2);
  row("through a forward, no check (any), again", conns, s_any2);
  if (s_owner > 0 && s_any > 0 && s_owner2 > 0 && s_any2 > 0)
    printf("\ncheck's cost per connection: %.1f µs (mean of the two pairs)\n",
           ((s_owner - s_any) + (s_owner2 - s_any2)) / 2 / conns * 1e6);
  lc_runtime_free(rt);
  lc_engine_free(engine);
  shutdown(l, SHUT_RDWR);
  pthread_join(th, NULL);
  close(l);
  return 0;
}
