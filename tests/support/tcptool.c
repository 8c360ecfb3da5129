/*
 * tcptool.c - a TCP end point for the forward tests, run on this machine and inside test hosts.
 *
 *   tcptool [--timeout S] [--conns K] listen ADDRESS PORT ACTION [ARGS]
 *   tcptool [--timeout S] connect ADDRESS PORT ACTION [ARGS]
 *   tcptool [--timeout S] clients ADDRESS PORTS N BYTES
 *
 * listen binds ADDRESS:PORT (PORT 0 picks one; a port still taken is retried for 10 s), prints
 * "port N", then runs ACTION on K connections (default 1; 0: until the timeout), each in its own
 * thread, and exits when they are done. connect runs ACTION on one connection.
 * clients opens N connections at once (connection i to the i-th of the comma-separated PORTS,
 * round robin), each sends BYTES of its own data and reads the echo back; all N are open together
 * before any closes. It prints "clients ok N" or "clients FAIL <how many> <first reason>".
 *
 * ACTIONs, each printing one result line (hashes are SHA-256 in hex, times in seconds):
 *   sink               read to EOF                         "received BYTES HASH SECS"
 *   source N SEED      send N bytes, shut down, drain      "sent BYTES HASH SECS"
 *   echo               echo to EOF, then shut down         "echoed BYTES"
 *   reply N SEED       read to EOF, then send N, close     "received ..." then "sent ..."
 *   halfclose N SEED   send N, shut down, read to EOF      "sent ..." then "received ..."
 *   check N SEED       send N, read the echo, compare      "check ok N" / "check FAIL reason"
 *   pingpong SEED      one message at a time, each echoed    "pingpong ok COUNT" /
 *                      before the next: sizes around 4 KiB,  "pingpong FAIL size N: reason"
 *                      32 KiB, 256 KiB, one packet's data
 *                      (32758) and 2 and 8 times that
 *   hold               send "ping", read it back ("ready"), then wait: "closed eof|reset|error"
 *   flood              write until the peer goes           "flooded BYTES"
 *   slowread C MS S    read C bytes every MS ms for S s    "slowread BYTES"
 * Data is a splitmix64 stream from SEED. Exit status 0, or 1 with "error: ..." on stderr.
 * The whole program ends (SIGALRM) after --timeout seconds, default 120.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)64 * 1024)

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------- */

typedef struct sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t fill;
} sha256;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_init(sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof(h0));
  s->len = 0;
  s->fill = 0;
}

static void sha256_block(sha256 *s, const unsigned char *p) {
  uint32_t w[64], a, b, c, d, e, f, g, h;
  for (size_t i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
  s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha256_update(sha256 *s, const void *data, size_t len) {
  const unsigned char *p = data;
  s->len += len;
  if (s->fill > 0) {
    size_t take = 64 - s->fill < len ? 64 - s->fill : len;
    memcpy(s->buf + s->fill, p, take);
    s->fill += take, p += take, len -= take;
    if (s->fill < 64)
      return;
    sha256_block(s, s->buf);
    s->fill = 0;
  }
  for (; len >= 64; p += 64, len -= 64)
    sha256_block(s, p);
  memcpy(s->buf, p, len);
  s->fill = len;
}

/* out: 64 hex digits and a NUL */
static void sha256_hex(sha256 *s, char *out) {
  uint64_t bits = s->len * 8;
  unsigned char pad[72] = {0x80};
  size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
  for (int i = 0; i < 8; i++)
    pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(s, pad, padlen + 8);
  for (size_t i = 0; i < 8; i++)
    sprintf(out + 8 * i, "%08x", s->h[i]);
}

/* ---- data, time, output --------------------------------------------------------------------- */

/* Fills buf with the next len bytes of the stream; len a multiple of 8 except at the end. */
static void gen(uint64_t *state, unsigned char *buf, size_t len) {
  while (len > 0) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    size_t n = len < 8 ? len : 8;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    memcpy(buf, &z, n);
    buf += n;
    len -= n;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* One whole line on stdout, flushed (the test reads it through a pipe). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&out_mu);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

static int failed;

/* A decimal int argument (0 when it is not one). */
static int num(const char *s) { return (int)strtol(s, NULL, 10); }

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&out_mu);
  fputs("error: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  failed = 1;
  pthread_mutex_unlock(&out_mu);
}

/* ---- actions -------------------------------------------------------------------------------- */

static int send_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads to EOF, hashing; prints "received". Returns 0 or -errno. */
static int do_sink(int fd) {
  static __thread unsigned char buf[CHUNK];
  sha256 s;
  char hex[65];
  double t0 = now_s();
  uint64_t total = 0;
  ssize_t n;
  sha256_init(&s);
  while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      fail("sink: after %llu bytes: %s", (unsigned long long)total, strerror(e));
      return -e;
    }
    sha256_update(&s, buf, (size_t)n);
    total += (uint64_t)n;
  }
  sha256_hex(&s, hex);
  say("received %llu %s %.3f", (unsigned long long)total, hex, now_s() - t0);
  return 0;
}

/* Sends n bytes from seed; prints "sent". */
static int do_send(int fd, uint64_t n, uint64_t seed) {
  static __thread unsigned char buf[CHUNK];
  sha256 s;
  char hex[65];
  double t0 = now_s();
  uint64_t left = n;
  int r;
  sha256_init(&s);
  while (left > 0) {
    size_t len = left < CHUNK ? (size_t)left : CHUNK;
    gen(&seed, buf, len);
    sha256_update(&s, buf, len);
    if ((r = send_all(fd, buf, len)) < 0) {
      fail("send: after %llu of %llu bytes: %s", (unsigned long long)(n - left),
           (unsigned long long)n, strerror(-r));
      return r;
    }
    left -= len;
  }
  sha256_hex(&s, hex);
  say("sent %llu %s %.3f", (unsigned long long)n, hex, now_s() - t0);
  return 0;
}

static void drain(int fd) {
  char buf[4096];
  while (recv(fd, buf, sizeof(buf), 0) > 0)
    ;
}

static int do_echo(int fd) {
  static __thread char buf[CHUNK];
  uint64_t total = 0;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      say("echoed %llu reset", (unsigned long long)total);
      return 0;
    }
    if (send_all(fd, buf, (size_t)n) < 0) {
      say("echoed %llu reset", (unsigned long long)total);
      return 0;
    }
    total += (uint64_t)n;
  }
  shutdown(fd, SHUT_WR);
  say("echoed %llu", (unsigned long long)total);
  return 0;
}

/* Sends n bytes while reading the echo back; 0 when it all came back unchanged. */
static int echo_check(int fd, uint64_t n, uint64_t seed, char *why, size_t whysize) {
  unsigned char *data = malloc(n ? n : 1), *back = malloc(n ? n : 1);
  size_t sent = 0, got = 0;
  int r = -1;
  if (data == NULL || back == NULL) {
    snprintf(why, whysize, "out of memory");
    goto out;
  }
  gen(&seed, data, n);
  while (got < n) {
    struct pollfd p = {.fd = fd, .events = POLLIN | (sent < n ? POLLOUT : 0)};
    ssize_t k;
    if (poll(&p, 1, -1) < 0 && errno != EINTR) {
      snprintf(why, whysize, "poll: %s", strerror(errno));
      goto out;
    }
    if ((p.revents & POLLOUT) && sent < n) {
      k = send(fd, data + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && errno != EAGAIN && errno != EINTR) {
        snprintf(why, whysize, "send after %zu bytes: %s", sent, strerror(errno));
        goto out;
      }
      sent += k > 0 ? (size_t)k : 0;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      k = recv(fd, back + got, n - got, MSG_DONTWAIT);
      if (k == 0) {
        snprintf(why, whysize, "EOF after %zu of %llu bytes", got, (unsigned long long)n);
        goto out;
      }
      if (k < 0 && errno != EAGAIN && errno != EINTR) {
        snprintf(why, whysize, "recv after %zu bytes: %s", got, strerror(errno));
        goto out;
      }
      got += k > 0 ? (size_t)k : 0;
    }
  }
  if (memcmp(data, back, n) != 0) {
    size_t i = 0;
    while (data[i] == back[i])
      i++;
    snprintf(why, whysize, "echo differs at byte %zu", i);
    goto out;
  }
  r = 0;
out:
  free(data);
  free(back);
  return r;
}

/* Request and reply: each message must come back whole before the next is sent, so data that a
 * forward held back and never delivered shows as a missing reply (a hang, ended by --timeout). */
static void do_pingpong(int fd, uint64_t seed) {
  static const uint64_t sizes[] = {1,       2,      4095,   4096,   4097,    32757,  32758,  32759,
                                   32767,   32768,  32769,  65515,  65516,   65517,  65536,  131072,
                                   262063,  262064, 262065, 262143, 262144,  262145, 266240, 524288,
                                   1048583, 3,      262144, 17,     1000000, 4096,   1};
  char why[256];
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    if (echo_check(fd, sizes[i], seed + i, why, sizeof(why)) < 0) {
      say("pingpong FAIL size %llu: %s", (unsigned long long)sizes[i], why);
      return;
    }
  }
  say("pingpong ok %zu", sizeof(sizes) / sizeof(sizes[0]));
}

static int do_hold(int fd) {
  char buf[4096];
  size_t got = 0;
  ssize_t n = 0;
  if (send_all(fd, "ping", 4) < 0) {
    say("closed error %s before ready", strerror(errno));
    return 0;
  }
  while (got < 4 && (n = recv(fd, buf, sizeof(buf), 0)) > 0)
    got += (size_t)n;
  if (got < 4) {
    say("closed %s before ready", n == 0 ? "eof" : errno == ECONNRESET ? "reset" : strerror(errno));
    return 0;
  }
  say("ready");
  for (;;) {
    n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      say("closed eof");
    else if (n < 0)
      say("closed %s", errno == ECONNRESET ? "reset" : strerror(errno));
    if (n <= 0)
      return 0;
  }
}

static int do_flood(int fd) {
  static __thread unsigned char buf[CHUNK];
  uint64_t total = 0, seed = 99;
  gen(&seed, buf, sizeof(buf));
  for (;;) {
    ssize_t n = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    total += (uint64_t)n;
  }
  say("flooded %llu", (unsigned long long)total);
  return 0;
}

static int do_slowread(int fd, size_t chunk, int ms, double seconds) {
  char *buf = malloc(chunk);
  double end = now_s() + seconds;
  unsigned long long total = 0;
  if (buf == NULL)
    return -ENOMEM;
  while (now_s() < end) {
    size_t got = 0;
    while (got < chunk) {
      ssize_t n = recv(fd, buf + got, chunk - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        say("slowread %llu ended", total + got);
        free(buf);
        return 0;
      }
      got += (size_t)n;
    }
    total += got;
    usleep((useconds_t)ms * 1000);
  }
  say("slowread %llu", total);
  free(buf);
  return 0;
}

typedef struct action {
  char **argv;
  int argc;
} action;

static int run_action(const action *a, int fd) {
  const char *name = a->argv[0];
  char why[256];
  uint64_t n = a->argc > 1 ? strtoull(a->argv[1], NULL, 0) : 0;
  uint64_t seed = a->argc > 2 ? strtoull(a->argv[2], NULL, 0) : 1;
  int one = 1, r = 0;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (strcmp(name, "sink") == 0) {
    r = do_sink(fd);
  } else if (strcmp(name, "source") == 0) {
    if ((r = do_send(fd, n, seed)) == 0) {
      shutdown(fd, SHUT_WR);
      drain(fd);
    }
  } else if (strcmp(name, "echo") == 0) {
    r = do_echo(fd);
  } else if (strcmp(name, "reply") == 0) {
    if ((r = do_sink(fd)) == 0)
      r = do_send(fd, n, seed);
  } else if (strcmp(name, "halfclose") == 0) {
    if ((r = do_send(fd, n, seed)) == 0) {
      shutdown(fd, SHUT_WR);
      r = do_sink(fd);
    }
  } else if (strcmp(name, "check") == 0) {
    if (echo_check(fd, n, seed, why, sizeof(why)) == 0)
      say("check ok %llu", (unsigned long long)n);
    else
      say("check FAIL %s", why);
  } else if (strcmp(name, "pingpong") == 0) {
    do_pingpong(fd, n);
  } else if (strcmp(name, "hold") == 0) {
    r = do_hold(fd);
  } else if (strcmp(name, "flood") == 0) {
    r = do_flood(fd);
  } else if (strcmp(name, "slowread") == 0 && a->argc >= 4) {
    r = do_slowread(fd, (size_t)n, num(a->argv[2]), strtod(a->argv[3], NULL));
  } else {
    fail("unknown action %s", name);
    r = -EINVAL;
  }
  close(fd);
  return r;
}

/* ---- listen, connect, clients --------------------------------------------------------------- */

static int resolve(struct sockaddr_storage *out, socklen_t *len, const char *addr, int port) {
  struct addrinfo hints, *ai = NULL;
  char ps[16];
  int r;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  snprintf(ps, sizeof(ps), "%d", port);
  if ((r = getaddrinfo(addr, ps, &hints, &ai)) != 0) {
    fail("%s: %s", addr, gai_strerror(r));
    return -1;
  }
  memcpy(out, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return 0;
}

static int connect_to(const char *addr, int port) {
  struct sockaddr_storage sa;
  socklen_t len;
  int fd;
  if (resolve(&sa, &len, addr, port) < 0)
    return -1;
  if ((fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
    return -1;
  while (connect(fd, (struct sockaddr *)&sa, len) < 0) {
    if (errno == EINTR)
      continue;
    close(fd);
    return -1;
  }
  return fd;
}

typedef struct conn_job {
  const action *a;
  int fd;
} conn_job;

static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_cv = PTHREAD_COND_INITIALIZER;
static int jobs_running;

static void *conn_main(void *arg) {
  conn_job *j = arg;
  run_action(j->a, j->fd);
  free(j);
  pthread_mutex_lock(&jobs_mu);
  jobs_running--;
  pthread_cond_broadcast(&jobs_cv);
  pthread_mutex_unlock(&jobs_mu);
  return NULL;
}

static int cmd_listen(const char *addr, int port, int conns, const action *a) {
  struct sockaddr_storage sa;
  socklen_t len;
  int fd, one = 1;
  double give_up = now_s() + 10;
  if (resolve(&sa, &len, addr, port) < 0)
    return 1;
  if ((fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
    fail("socket: %s", strerror(errno));
    return 1;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  while (bind(fd, (struct sockaddr *)&sa, len) < 0) {
    if (errno != EADDRINUSE || now_s() > give_up) {
      fail("bind %s port %d: %s", addr, port, strerror(errno));
      return 1;
    }
    usleep(100 * 1000);
  }
  if (listen(fd, 512) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
    fail("listen: %s", strerror(errno));
    return 1;
  }
  say("port %d", ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                : ((struct sockaddr_in *)&sa)->sin_port));
  for (int i = 0; conns == 0 || i < conns; i++) {
    conn_job *j;
    pthread_t th;
    int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0 && errno == EINTR) {
      i--;
      continue;
    }
    if (c < 0) {
      fail("accept: %s", strerror(errno));
      break;
    }
    if ((j = malloc(sizeof(*j))) == NULL) {
      close(c);
      continue;
    }
    j->a = a;
    j->fd = c;
    pthread_mutex_lock(&jobs_mu);
    jobs_running++;
    pthread_mutex_unlock(&jobs_mu);
    if (pthread_create(&th, NULL, conn_main, j) != 0) {
      conn_main(j);
      continue;
    }
    pthread_detach(th);
  }
  close(fd);
  pthread_mutex_lock(&jobs_mu);
  while (jobs_running > 0)
    pthread_cond_wait(&jobs_cv, &jobs_mu);
  pthread_mutex_unlock(&jobs_mu);
  return failed;
}

/* clients: every connection checks its echo, then waits for all the others before closing. */
typedef struct client {
  pthread_t th;
  const char *addr;
  int port;
  uint64_t bytes, seed;
  int ok;
  char why[256];
} client;

static int clients_total, clients_done;
static double clients_deadline;

static void *client_main(void *arg) {
  client *c = arg;
  int fd = connect_to(c->addr, c->port);
  if (fd < 0)
    snprintf(c->why, sizeof(c->why), "connect to port %d: %s", c->port, strerror(errno));
  else if (echo_check(fd, c->bytes, c->seed, c->why, sizeof(c->why)) == 0)
    c->ok = 1;
  pthread_mutex_lock(&jobs_mu);
  clients_done++;
  pthread_cond_broadcast(&jobs_cv);
  while (clients_done < clients_total && now_s() < clients_deadline) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&jobs_cv, &jobs_mu, &ts);
  }
  pthread_mutex_unlock(&jobs_mu);
  if (fd >= 0)
    close(fd);
  return NULL;
}

static int cmd_clients(const char *addr, const char *ports, int n, uint64_t bytes) {
  int plist[1024], np = 0, bad = 0;
  const char *first = NULL;
  client *cs = calloc((size_t)n, sizeof(*cs));
  for (const char *p = ports; *p != '\0' && np < 1024;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p)
      break;
    plist[np++] = (int)v;
    p = *end == ',' ? end + 1 : end;
  }
  if (cs == NULL || np == 0 || n <= 0) {
    fail("clients: bad arguments");
    free(cs);
    return 1;
  }
  clients_total = n;
  clients_deadline = now_s() + 60;
  for (int i = 0; i < n; i++) {
    cs[i].addr = addr;
    cs[i].port = plist[i % np];
    cs[i].bytes = bytes + (uint64_t)(i % 7) * 111; /* not all the same length */
    cs[i].seed = 1000 + (uint64_t)i;
    if (pthread_create(&cs[i].th, NULL, client_main, &cs[i]) != 0) {
      fail("pthread_create: %s", strerror(errno));
      n = i;
      break;
    }
  }
  for (int i = 0; i < n; i++) {
    pthread_join(cs[i].th, NULL);
    if (!cs[i].ok && bad++ == 0)
      first = cs[i].why;
  }
  if (bad == 0)
    say("clients ok %d", n);
  else
    say("clients FAIL %d %s", bad, first);
  free(cs);
  return 0;
}

int main(int argc, char **argv) {
  int timeout = 120, conns = 1, i = 1;
  action a;
  signal(SIGPIPE, SIG_IGN);
  for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
    if (strcmp(argv[i], "--timeout") == 0)
      timeout = num(argv[i + 1]);
    else if (strcmp(argv[i], "--conns") == 0)
      conns = num(argv[i + 1]);
  }
  alarm((unsigned int)timeout);
  if (argc - i >= 5 && strcmp(argv[i], "clients") == 0)
    return cmd_clients(argv[i + 1], argv[i + 2], num(argv[i + 3]), strtoull(argv[i + 4], NULL, 0));
  if (argc - i < 4 || (strcmp(argv[i], "listen") != 0 && strcmp(argv[i], "connect") != 0)) {
    fprintf(stderr, "usage: tcptool [--timeout S] [--conns K] listen|connect ADDRESS PORT ACTION "
                    "[ARGS]\n       tcptool [--timeout S] clients ADDRESS PORTS N BYTES\n");
    return 2;
  }
  a.argv = argv + i + 3;
  a.argc = argc - i - 3;
  if (strcmp(argv[i], "listen") == 0)
    return cmd_listen(argv[i + 1], num(argv[i + 2]), conns, &a);
  {
    int fd = connect_to(argv[i + 1], num(argv[i + 2]));
    if (fd < 0) {
      say("connect-error %s", strerror(errno));
      return 1;
    }
    return run_action(&a, fd) < 0 || failed;
  }
}
