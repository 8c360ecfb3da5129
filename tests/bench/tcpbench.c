/*
 * tcpbench.c - the data source, sink and ping server of the tunnel benchmark (tests/bench/tunnel),
 * run on this machine or inside a test host (`testhosts exec I -- tcpbench ...`).
 *
 *   tcpbench serve ADDRESS PORT            serve until killed; prints "listening PORT" when ready
 *   tcpbench up HOST PORT BYTES [SECONDS]  send BYTES (or for SECONDS), wait for the server's count
 *   tcpbench down HOST PORT BYTES [SECONDS] receive BYTES (or for SECONDS)
 *   tcpbench ping HOST PORT N              N times: connect, send a byte, read a byte, close
 *   tcpbench wait HOST PORT SECONDS        retry connecting until it works (exit 0) or time is up
 *
 * A client prints "COUNT SECONDS" on stdout (bytes moved, or connections answered; ping adds the
 * number of connections that got no answer) and exits 0 when everything arrived. The first byte of
 * a connection says what the server does: 'U' and a 64-bit count (network order): read up to count
 * bytes or EOF, answer the count read; 'D' and a count: send count bytes, then wait for the client
 * to close; 'P': answer one byte and close. A connection that sends nothing (wait) is closed. One
 * thread per connection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE ((size_t)256 * 1024)

static char zeros[BUF_SIZE];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8)
    b[i] = (unsigned char)v;
}

static uint64_t get64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | b[i];
  return v;
}

/* ---- server --------------------------------------------------------------------------------- */

static void *serve_one(void *arg) {
  int fd = *(int *)arg;
  unsigned char head[9], ack[8];
  char *buf = NULL;
  ssize_t n;
  free(arg);
  if (read(fd, head, 1) != 1)
    goto out;
  if (head[0] == 'P') {
    (void)write_all(fd, "p", 1);
    goto out;
  }
  if ((head[0] != 'U' && head[0] != 'D') || read_all(fd, head + 1, 8) < 0)
    goto out;
  if (head[0] == 'U') {
    uint64_t want = get64(head + 1), got = 0;
    if ((buf = malloc(BUF_SIZE)) == NULL)
      goto out;
    while (got < want) {
      size_t len = want - got < BUF_SIZE ? (size_t)(want - got) : BUF_SIZE;
      if ((n = read(fd, buf, len)) < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += (uint64_t)n;
    }
    put64(ack, got);
    (void)write_all(fd, ack, sizeof(ack));
  } else {
    uint64_t left = get64(head + 1);
    while (left > 0) {
      size_t len = left < BUF_SIZE ? (size_t)left : BUF_SIZE;
      if (write_all(fd, zeros, len) < 0)
        goto out;
      left -= len;
    }
    shutdown(fd, SHUT_WR);
    while (read(fd, head, sizeof(head)) > 0) /* until the client closes */
      ;
  }
out:
  free(buf);
  close(fd);
  return NULL;
}

static int serve(const char *addr, const char *port) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV},
                  *ai = NULL;
  int lfd, one = 1, r;
  pthread_attr_t attr;
  if ((r = getaddrinfo(addr, port, &hints, &ai)) != 0) {
    fprintf(stderr, "tcpbench: %s %s: %s\n", addr, port, gai_strerror(r));
    return 1;
  }
  if ((lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 1024) < 0) {
    fprintf(stderr, "tcpbench: cannot listen on %s port %s: %s\n", addr, port, strerror(errno));
    return 1;
  }
  freeaddrinfo(ai);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)64 * 1024);
  printf("listening %s\n", port);
  fflush(stdout);
  for (;;) {
    pthread_t t;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
        continue;
      fprintf(stderr, "tcpbench: accept: %s\n", strerror(errno));
      return 1;
    }
    int *arg = malloc(sizeof(int));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (arg != NULL)
      *arg = fd;
    if (arg == NULL || pthread_create(&t, &attr, serve_one, arg) != 0) {
      free(arg);
      close(fd);
    }
  }
}

/* ---- clients -------------------------------------------------------------------------------- */

static int dial(const char *host, const char *port, int quiet) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
  int fd, one = 1, r;
  if ((r = getaddrinfo(host, port, &hints, &ai)) != 0) {
    fprintf(stderr, "tcpbench: %s %s: %s\n", host, port, gai_strerror(r));
    return -1;
  }
  if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
      connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    if (!quiet)
      fprintf(stderr, "tcpbench: connect %s port %s: %s\n", host, port, strerror(errno));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  if (fd >= 0)
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static int up(const char *host, const char *port, uint64_t bytes, double seconds) {
  unsigned char head[9], ack[8];
  double t0 = now_s();
  uint64_t sent = 0;
  int fd = dial(host, port, 0);
  if (fd < 0)
    return 1;
  head[0] = 'U';
  put64(head + 1, bytes);
  if (write_all(fd, head, sizeof(head)) < 0)
    goto fail;
  while (sent < bytes && (seconds <= 0 || now_s() - t0 < seconds)) {
    size_t len = bytes - sent < BUF_SIZE ? (size_t)(bytes - sent) : BUF_SIZE;
    if (write_all(fd, zeros, len) < 0)
      goto fail;
    sent += len;
  }
  shutdown(fd, SHUT_WR);
  if (read_all(fd, ack, sizeof(ack)) < 0 || get64(ack) != sent) {
    fprintf(stderr, "tcpbench: %s port %s: the server did not confirm %llu bytes\n", host, port,
            (unsigned long long)sent);
    goto fail;
  }
  printf("%llu %.6f\n", (unsigned long long)sent, now_s() - t0);
  close(fd);
  return 0;
fail:
  close(fd);
  return 1;
}

static int down(const char *host, const char *port, uint64_t bytes, double seconds) {
  unsigned char head[9];
  char *buf = malloc(BUF_SIZE);
  double t0 = now_s();
  uint64_t got = 0;
  int fd = buf ? dial(host, port, 0) : -1;
  if (fd < 0) {
    free(buf);
    return 1;
  }
  head[0] = 'D';
  put64(head + 1, bytes);
  if (write_all(fd, head, sizeof(head)) < 0)
    goto fail;
  while (got < bytes && (seconds <= 0 || now_s() - t0 < seconds)) {
    ssize_t n = read(fd, buf, BUF_SIZE);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (uint64_t)n;
  }
  if (seconds <= 0 && got != bytes) {
    fprintf(stderr, "tcpbench: %s port %s: %llu of %llu bytes arrived\n", host, port,
            (unsigned long long)got, (unsigned long long)bytes);
    goto fail;
  }
  printf("%llu %.6f\n", (unsigned long long)got, now_s() - t0);
  close(fd);
  free(buf);
  return 0;
fail:
  close(fd);
  free(buf);
  return 1;
}

/* A connection that gets no answer is counted, not fatal: the tunnel may drop one. */
static int ping(const char *host, const char *port, long n) {
  double t0 = now_s();
  long failed = 0;
  for (long i = 0; i < n; i++) {
    char c;
    int fd = dial(host, port, 0);
    if (fd < 0)
      return 1;
    if (write_all(fd, "P", 1) < 0 || read_all(fd, &c, 1) < 0) {
      if (failed++ == 0)
        fprintf(stderr, "tcpbench: %s port %s: no answer on connection %ld\n", host, port, i + 1);
    }
    close(fd);
  }
  printf("%ld %.6f %ld\n", n - failed, now_s() - t0, failed);
  return 0;
}

static int wait_for(const char *host, const char *port, double seconds) {
  double end = now_s() + seconds;
  for (;;) {
    int fd = dial(host, port, 1);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    if (now_s() >= end) {
      fprintf(stderr, "tcpbench: %s port %s: nothing listens after %.0f s\n", host, port, seconds);
      return 1;
    }
    usleep(20000);
  }
}

static void usage(void) {
  fprintf(stderr, "usage: tcpbench serve ADDRESS PORT\n"
                  "       tcpbench up|down HOST PORT BYTES [SECONDS]\n"
                  "       tcpbench ping HOST PORT N\n"
                  "       tcpbench wait HOST PORT SECONDS\n");
}

/* A number from the command line; exits 2 on anything else. */
static double number(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || v < 0) {
    fprintf(stderr, "tcpbench: '%s' is not a number\n", s);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 4 && strcmp(argv[1], "serve") == 0)
    return serve(argv[2], argv[3]);
  if ((argc == 5 || argc == 6) && strcmp(argv[1], "up") == 0)
    return up(argv[2], argv[3], (uint64_t)number(argv[4]), argc == 6 ? number(argv[5]) : 0);
  if ((argc == 5 || argc == 6) && strcmp(argv[1], "down") == 0)
    return down(argv[2], argv[3], (uint64_t)number(argv[4]), argc == 6 ? number(argv[5]) : 0);
  if (argc == 5 && strcmp(argv[1], "ping") == 0)
    return ping(argv[2], argv[3], (long)number(argv[4]));
  if (argc == 5 && strcmp(argv[1], "wait") == 0)
    return wait_for(argv[2], argv[3], number(argv[4]));
  usage();
  return 2;
}
