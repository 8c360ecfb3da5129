/*
 * portprobe.c - waits until every given port on 127.0.0.1 answers: connects to all of them at
 * once and reads one line from each (a whole line: the port's server really answered, not only a
 * listener that took the connection). A connection that is refused or closes before its line is
 * tried again 10 ms later. For the cluster-start benchmarks, in place of one shell probe after
 * another.
 *   portprobe [--timeout SECONDS] PORT...
 * Exit 0 when all answered (prints "N ports answered"), 1 on timeout (names the ports left),
 * 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RETRY_MS 10

typedef struct probe {
  int port;
  int fd;         /* -1: not connected now */
  int done;       /* a whole line arrived */
  int connecting; /* connect() in progress */
  double retry_at;
} probe;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drop(probe *p, double t) {
  if (p->fd >= 0)
    close(p->fd);
  p->fd = -1;
  p->connecting = 0;
  p->retry_at = t + RETRY_MS / 1000.0;
}

static void start(probe *p) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)p->port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
    drop(p, now_s());
    return;
  }
  if (connect(p->fd, (struct sockaddr *)&a, sizeof(a)) == 0)
    p->connecting = 0;
  else if (errno == EINPROGRESS)
    p->connecting = 1;
  else
    drop(p, now_s());
}

/* p's socket is ready: finish the connect, or read toward the line. */
static void step(probe *p) {
  char buf[512];
  ssize_t n;
  if (p->connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
      drop(p, now_s());
      return;
    }
    p->connecting = 0;
    return;
  }
  n = read(p->fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) { /* closed before its line: not ready yet */
    drop(p, now_s());
    return;
  }
  if (memchr(buf, '\n', (size_t)n) != NULL) {
    p->done = 1;
    close(p->fd);
    p->fd = -1;
  }
}

int main(int argc, char **argv) {
  double timeout = 60, deadline;
  probe *v;
  struct pollfd *pf;
  size_t n = 0, left;
  int first = 1;

  if (argc > 2 && strcmp(argv[1], "--timeout") == 0) {
    timeout = atof(argv[2]);
    first = 3;
  }
  if (first >= argc || timeout <= 0) {
    fprintf(stderr, "usage: portprobe [--timeout SECONDS] PORT...\n");
    return 2;
  }
  v = calloc((size_t)(argc - first), sizeof(*v));
  pf = calloc((size_t)(argc - first), sizeof(*pf));
  if (v == NULL || pf == NULL)
    return 2;
  for (int i = first; i < argc; i++) {
    char *end;
    long port = strtol(argv[i], &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      fprintf(stderr, "portprobe: %s: not a port\n", argv[i]);
      return 2;
    }
    v[n].port = (int)port;
    v[n].fd = -1;
    n++;
  }
  deadline = now_s() + timeout;
  for (left = n; left > 0;) {
    double t = now_s(), wake = deadline;
    size_t np = 0;
    int ms;
    if (t >= deadline)
      break;
    for (size_t i = 0; i < n; i++) {
      if (v[i].done)
        continue;
      if (v[i].fd < 0 && v[i].retry_at <= t)
        start(&v[i]);
      if (v[i].fd < 0) {
        wake = v[i].retry_at < wake ? v[i].retry_at : wake;
        continue;
      }
      pf[np].fd = v[i].fd;
      pf[np].events = v[i].connecting ? POLLOUT : POLLIN;
      pf[np].revents = 0;
      np++;
    }
    ms = (int)((wake - t) * 1000) + 1;
    if (poll(pf, np, ms) < 0 && errno != EINTR)
      break;
    np = 0;
    for (size_t i = 0; i < n; i++) {
      if (v[i].done || v[i].fd < 0)
        continue;
      if (pf[np++].revents != 0)
        step(&v[i]);
    }
    left = 0;
    for (size_t i = 0; i < n; i++)
      left += !v[i].done;
  }
  if (left > 0) {
    fprintf(stderr, "portprobe: no answer within %.1f s from", timeout);
    for (size_t i = 0; i < n; i++)
      if (!v[i].done)
        fprintf(stderr, " %d", v[i].port);
    fprintf(stderr, "\n");
    return 1;
  }
  printf("%zu ports answered\n", n);
  return 0;
}
