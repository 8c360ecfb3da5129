/*
 * test_embed.c - the library inside a program that did not prepare for it: SIGPIPE left at its
 * default (clients of our forwards that reset their connections must not kill us, through -L and
 * -R forwards of an SSH host and a forward of the local runtime), lc_engine_free with a runtime,
 * a process and a forward still open (it returns, and nothing is left on the host), and
 * lc_engine_free with nothing open.
 *
 * The services on the hosts are small python3 scripts written into the runtime's working
 * directory. SIGPIPE is deliberately NOT ignored in this program: a SIGPIPE ends the test with
 * status 141, which ctest reports as a failure.
 */
#include "lc_test.h"
#include "lines.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static lc_engine *engine;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- a process on a host and its output --------------------------------------------------- */

typedef struct svc {
  lc_process *proc;
  lines out;
} svc;

/* Writes script into the runtime's working directory as NAME and starts "python3 NAME ARGS". */
static svc *svc_start(lc_runtime *rt, const char *name, const char *script, const char *args) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const char *wd;
  char path[1024], cmd[2048];
  svc *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  lines_init(&s->out, "service");
  if (lc_runtime_workdir(&wd, rt) < 0 ||
      (snprintf(path, sizeof(path), "%s/%s", wd, name),
       lc_runtime_write_file(rt, path, script, strlen(script), 0600, 30000) < 0)) {
    fprintf(stderr, "  %s: cannot write %s: %s\n", lc_runtime_name(rt), name, lc_error_last());
    lines_destroy(&s->out);
    free(s);
    return NULL;
  }
  snprintf(cmd, sizeof(cmd), "exec python3 '%s' %s", path, args);
  eo.on_line = lines_line;
  eo.payload = &s->out;
  if (lc_runtime_spawn(&s->proc, rt, cmd, &eo) < 0) {
    fprintf(stderr, "  %s: spawn: %s\n", lc_runtime_name(rt), lc_error_last());
    lines_destroy(&s->out);
    free(s);
    return NULL;
  }
  return s;
}

/* Waits until the service printed a line containing what; 0 or -1. */
static int svc_wait(svc *s, const char *what, int ms) {
  return lines_wait(&s->out, what, 0, NULL, 0, ms);
}

static void svc_free(svc *s) {
  if (s == NULL)
    return;
  lc_process_free(s->proc);
  lines_destroy(&s->out);
  free(s);
}

/* A server on the host's loopback that writes to each client until the client goes. */
static const char flood_py[] = "import socket, sys\n"
                               "s = socket.socket()\n"
                               "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                               "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
                               "s.listen(128)\n"
                               "print('listening', flush=True)\n"
                               "data = b'x' * 65536\n"
                               "while True:\n"
                               "    c, _ = s.accept()\n"
                               "    try:\n"
                               "        while True:\n"
                               "            c.sendall(data)\n"
                               "    except OSError:\n"
                               "        pass\n"
                               "    c.close()\n";

/* A client on the host that connects N times to 127.0.0.1:PORT and writes until the peer goes. */
static const char pusher_py[] = "import socket, sys\n"
                                "port, n = int(sys.argv[1]), int(sys.argv[2])\n"
                                "data = b'y' * 65536\n"
                                "for i in range(n):\n"
                                "    c = socket.create_connection(('127.0.0.1', port))\n"
                                "    try:\n"
                                "        while True:\n"
                                "            c.sendall(data)\n"
                                "    except OSError:\n"
                                "        pass\n"
                                "    c.close()\n"
                                "print('pushed', n, flush=True)\n";

/* ---- this machine's end ---------------------------------------------------------------------- */

static int connect_here(int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct timeval tv = {.tv_sec = 20};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Ends fd the rude way: a reset (SO_LINGER 0), or a close with unread data (also a reset). */
static void rude_close(int fd, int linger0) {
  if (linger0) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  close(fd);
}

/* Reads at least n bytes from fd; returns how many came (less: EOF, error or timeout). */
static size_t read_some(int fd, size_t n) {
  char buf[65536];
  size_t got = 0;
  while (got < n) {
    ssize_t k = recv(fd, buf, sizeof(buf), 0);
    if (k <= 0)
      break;
    got += (size_t)k;
  }
  return got;
}

/* rounds connections to port: each reads a little of the flood and then resets. */
static int reset_clients(int port, int rounds) {
  int ok = 0;
  for (int i = 0; i < rounds; i++) {
    int fd = connect_here(port);
    if (fd < 0)
      continue;
    if (read_some(fd, 1 + (size_t)(i % 4) * 40000) > 0)
      ok++;
    rude_close(fd, i % 2);
    usleep(20 * 1000);
  }
  return ok;
}

/* A listener here; port gets its port. */
static int listen_here(int *port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

/* A service here: each accepted connection is read a little (or written to) and then reset. */
typedef struct here_svc {
  int fd;
  int flood;         /* write to each client until it goes, instead of reading and resetting */
  atomic_int served; /* written by its thread, read by the test */
  pthread_t thread;
} here_svc;

static void *here_main(void *arg) {
  here_svc *h = arg;
  for (;;) {
    int c = accept4(h->fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
      break;
    if (h->flood) {
      static const char data[65536];
      while (send(c, data, sizeof(data), MSG_NOSIGNAL) > 0)
        ;
      close(c);
    } else {
      read_some(c, 1 + (size_t)(h->served % 3) * 100000);
      rude_close(c, h->served % 2);
    }
    h->served++;
  }
  return NULL;
}

static int here_start(here_svc *h, int flood, int *port) {
  memset(h, 0, sizeof(*h));
  h->flood = flood;
  if ((h->fd = listen_here(port)) < 0)
    return -1;
  return pthread_create(&h->thread, NULL, here_main, h) == 0 ? 0 : -1;
}

static void here_stop(here_svc *h) {
  shutdown(h->fd, SHUT_RDWR);
  pthread_join(h->thread, NULL);
  close(h->fd);
}

static lc_runtime *open_host(lc_engine *e, const char *alias) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  if (lc_runtime_new_ssh(&rt, e, alias, &o) < 0)
    fprintf(stderr, "  connect %s: %s\n", alias, lc_error_last());
  return rt;
}

/* ---- SIGPIPE -----------------------------------------------------------------------------------
 */

/* The handler is the default one: a SIGPIPE anywhere in this process ends it. */
static void require_default_sigpipe(void) {
  struct sigaction sa;
  sigaction(SIGPIPE, NULL, &sa);
  if (sa.sa_handler != SIG_DFL) {
    fprintf(stderr, "FATAL: SIGPIPE is not at its default action\n");
    exit(2);
  }
}

/* -L: the host floods our client, which resets; the relay writes into the reset socket. */
static void test_sigpipe_local_forward(void) {
  lc_runtime *rt = open_host(engine, "lab1");
  lc_forward *f = NULL;
  svc *s = NULL;
  int port = 41000 + getpid() % 1000;
  char args[64];
  LC_REQUIRE(rt != NULL);
  require_default_sigpipe();
  snprintf(args, sizeof(args), "%d", port);
  s = svc_start(rt, "flood.py", flood_py, args);
  LC_CHECK(s != NULL);
  if (s != NULL && svc_wait(s, "listening", 30000) == 0) {
    LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", port, NULL));
    if (f != NULL) {
      int fd;
      LC_CHECK(reset_clients(lc_forward_port(f), 40) >= 30);
      usleep(300 * 1000);
      /* still alive, and the forward still carries a whole connection */
      fd = connect_here(lc_forward_port(f));
      LC_CHECK(fd >= 0 && read_some(fd, 4u << 20) >= (4u << 20));
      if (fd >= 0)
        close(fd);
    }
  } else {
    LC_CHECK(0);
  }
  lc_forward_free(f);
  svc_free(s);
  lc_runtime_free(rt);
  LC_CHECK(th_count_procs(1, "flood.py") == 0);
}

/* -R: the host pushes into a service of ours that resets each connection. */
static void test_sigpipe_remote_forward(void) {
  lc_runtime *rt = open_host(engine, "lab1");
  lc_forward *f = NULL;
  here_svc h;
  svc *s = NULL;
  int here_port = 0, rport = 42000 + getpid() % 1000;
  char args[64];
  LC_REQUIRE(rt != NULL);
  require_default_sigpipe();
  LC_REQUIRE(here_start(&h, 0, &here_port) == 0);
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_REMOTE, rport, "127.0.0.1", here_port, NULL));
  if (f != NULL) {
    snprintf(args, sizeof(args), "%d 30", rport);
    s = svc_start(rt, "pusher.py", pusher_py, args);
    LC_CHECK(s != NULL && svc_wait(s, "pushed 30", 120000) == 0);
    LC_CHECK(h.served >= 30);
  }
  lc_forward_free(f);
  svc_free(s);
  here_stop(&h);
  lc_runtime_free(rt);
  LC_CHECK(th_count_procs(1, "pusher.py") == 0);
}

/* The local runtime's relay: a flood here, through a forward, into clients that reset. */
static void test_sigpipe_local_runtime(void) {
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  here_svc h;
  int port = 0;
  require_default_sigpipe();
  LC_REQUIRE_OK(lc_runtime_new_local(&rt, engine, NULL));
  LC_REQUIRE(here_start(&h, 1, &port) == 0);
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", port, NULL));
  if (f != NULL)
    LC_CHECK(reset_clients(lc_forward_port(f), 40) >= 30);
  usleep(300 * 1000);
  lc_forward_free(f);
  here_stop(&h);
  lc_runtime_free(rt);
}

/* The engine thread's mask does not leak into what it starts: a local child sees no blocked
 * signals (libuv resets the mask in the child), and the caller's own mask is as it was. */
static void test_masks(void) {
  lc_runtime *rt = NULL;
  sigset_t mine;
  lines out;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res;
  lines_init(&out, "grep");
  LC_REQUIRE_OK(lc_runtime_new_local(&rt, engine, NULL));
  eo.on_line = lines_line;
  eo.payload = &out;
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "grep SigBlk /proc/self/status", &eo));
  LC_CHECK_CONTAINS(out.text, "SigBlk:\t0000000000000000");
  lines_destroy(&out);
  lc_runtime_free(rt);
  pthread_sigmask(SIG_BLOCK, NULL, &mine);
  LC_CHECK(!sigismember(&mine, SIGPIPE));
}

/* ---- the connection cap of a forward -------------------------------------------------------- */

typedef struct notices {
  pthread_mutex_t mu;
  char want[64];
  int count;
} notices;

static void on_notice(const char *message, void *payload) {
  notices *n = payload;
  pthread_mutex_lock(&n->mu);
  if (strstr(message, n->want) != NULL && strstr(message, "max_connections") != NULL) {
    n->count++;
    fprintf(stderr, "  notice: %s\n", message);
  }
  pthread_mutex_unlock(&n->mu);
}

/* Whether fd was closed by the other end (EOF or reset) within ms, with no byte first. */
static int closed_soon(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  char c;
  if (poll(&p, 1, ms) != 1)
    return 0;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* -L with a cap of 16: 16 connections get the flood, 16 more are closed at once, with one notice
 * naming the port; the 16 carry on, and once some end, new ones are taken again. */
static void test_cap_local_forward(void) {
  enum { CAP = 16, EXTRA = 16 };
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  notices n = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lc_engine *e = NULL;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  svc *s = NULL;
  int fds[CAP + EXTRA], port = 43000 + getpid() % 1000, got = 0, refused = 0;
  char args[64];
  eo.on_notice = on_notice;
  eo.payload = &n;
  LC_REQUIRE_OK(lc_engine_new(&e, &eo));
  rt = open_host(e, "lab3");
  LC_CHECK(rt != NULL);
  snprintf(args, sizeof(args), "%d", port);
  if (rt != NULL && (s = svc_start(rt, "flood.py", flood_py, args)) != NULL &&
      svc_wait(s, "listening", 30000) == 0) {
    fo.max_connections = CAP;
    LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", port, &fo));
  }
  if (f != NULL) {
    snprintf(n.want, sizeof(n.want), "port %d ", lc_forward_port(f));
    /* the flood server serves one client at a time: the first one gets data, the others wait
     * in its backlog, open and silent, which is what "carried" needs */
    for (int i = 0; i < CAP; i++)
      fds[i] = connect_here(lc_forward_port(f));
    LC_CHECK(fds[0] >= 0 && read_some(fds[0], 1u << 20) >= (1u << 20));
    for (int i = 1; i < CAP; i++)
      LC_CHECK(fds[i] >= 0 && !closed_soon(fds[i], 50));
    for (int i = CAP; i < CAP + EXTRA; i++) {
      fds[i] = connect_here(lc_forward_port(f));
      refused += fds[i] < 0 || closed_soon(fds[i], 10000);
    }
    LC_CHECK(refused == EXTRA);
    /* the carried ones are still open, the first still flowing */
    for (int i = 1; i < CAP; i++)
      got += !closed_soon(fds[i], 10);
    LC_CHECK(got == CAP - 1);
    LC_CHECK(read_some(fds[0], 1u << 20) >= (1u << 20));
    pthread_mutex_lock(&n.mu);
    LC_CHECK(n.count == 1);
    pthread_mutex_unlock(&n.mu);
    /* eight end; eight new ones are taken again (the first of them gets the flood). Until the
     * engine has seen the ends, a new one is still over the cap and closed: try each again, for
     * up to 20 s in all (a loaded machine may take a while) */
    for (int i = 0; i < 8; i++)
      close(fds[i]);
    for (int i = 0, tries = 0; i < 8; i++) {
      while ((fds[i] = connect_here(lc_forward_port(f))) >= 0 && closed_soon(fds[i], 200) &&
             ++tries < 80) {
        close(fds[i]);
        usleep(50 * 1000);
      }
      LC_CHECK(fds[i] >= 0 && tries < 80);
    }
    for (int i = 0; i < CAP + EXTRA; i++)
      if (fds[i] >= 0)
        close(fds[i]);
  }
  lc_forward_free(f);
  svc_free(s);
  lc_runtime_free(rt);
  lc_engine_free(e);
  LC_CHECK(th_count_procs(3, "flood.py") == 0);
}

/* A service here that says "hi" to each connection and keeps it open until stopped. */
typedef struct hi_svc {
  int fd, n;
  int conns[256];
  pthread_t thread;
} hi_svc;

static void *hi_main(void *arg) {
  hi_svc *h = arg;
  for (;;) {
    int c = accept4(h->fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
      break;
    (void)send(c, "hi\n", 3, MSG_NOSIGNAL);
    if (h->n < 256)
      h->conns[h->n++] = c;
    else
      close(c);
  }
  return NULL;
}

/* The host opens six connections at once to its side of a -R forward whose cap is 4. */
static const char six_py[] = "import socket, sys\n"
                             "port, n = int(sys.argv[1]), int(sys.argv[2])\n"
                             "ok = closed = 0\n"
                             "cs = []\n"
                             "for i in range(n):\n"
                             "    c = socket.create_connection(('127.0.0.1', port))\n"
                             "    c.settimeout(20)\n"
                             "    try:\n"
                             "        d = c.recv(3)\n"
                             "    except OSError:\n"
                             "        d = b''\n"
                             "    if d == b'hi\\n':\n"
                             "        ok += 1\n"
                             "    else:\n"
                             "        closed += 1\n"
                             "    cs.append(c)\n"
                             "print('ok', ok, 'closed', closed, flush=True)\n";

static void test_cap_remote_forward(void) {
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_runtime *rt = open_host(engine, "lab3");
  lc_forward *f = NULL;
  hi_svc h = {0};
  svc *s = NULL;
  int here_port = 0, rport = 44000 + getpid() % 1000;
  char args[64];
  LC_REQUIRE(rt != NULL);
  LC_REQUIRE((h.fd = listen_here(&here_port)) >= 0);
  pthread_create(&h.thread, NULL, hi_main, &h);
  fo.max_connections = 4;
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_REMOTE, rport, "127.0.0.1", here_port, &fo));
  if (f != NULL) {
    snprintf(args, sizeof(args), "%d 6", rport);
    s = svc_start(rt, "six.py", six_py, args);
    LC_CHECK(s != NULL && svc_wait(s, "ok 4 closed 2", 60000) == 0);
  }
  lc_forward_free(f);
  svc_free(s);
  shutdown(h.fd, SHUT_RDWR);
  pthread_join(h.thread, NULL);
  close(h.fd);
  LC_CHECK(h.n == 4);
  for (int i = 0; i < h.n; i++)
    close(h.conns[i]);
  lc_runtime_free(rt);
}

/* The local runtime's relay under a cap of 4: the fifth is closed; when two end, two new ones
 * are carried. */
static void test_cap_local_runtime(void) {
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  hi_svc h = {0};
  int port = 0, fds[5];
  char buf[3];
  LC_REQUIRE_OK(lc_runtime_new_local(&rt, engine, NULL));
  LC_REQUIRE((h.fd = listen_here(&port)) >= 0);
  pthread_create(&h.thread, NULL, hi_main, &h);
  fo.max_connections = 4;
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", port, &fo));
  for (int round = 0; f != NULL && round < 2; round++) {
    for (int i = 0; i < (round ? 2 : 4); i++) {
      fds[i] = connect_here(lc_forward_port(f));
      LC_CHECK(fds[i] >= 0 && recv(fds[i], buf, 3, MSG_WAITALL) == 3);
    }
    fds[4] = connect_here(lc_forward_port(f));
    LC_CHECK(fds[4] < 0 || closed_soon(fds[4], 10000));
    if (fds[4] >= 0)
      close(fds[4]);
    /* both ends of two go: a half-closed connection is still carried (and counted) */
    close(fds[0]);
    close(fds[1]);
    usleep(200 * 1000);
    for (int i = 0; i < 2; i++) {
      close(h.conns[round * 2 + i]);
      h.conns[round * 2 + i] = -1;
    }
    usleep(300 * 1000);
  }
  for (int i = 2; i < 4; i++)
    close(fds[i]);
  lc_forward_free(f);
  shutdown(h.fd, SHUT_RDWR);
  pthread_join(h.thread, NULL);
  close(h.fd);
  LC_CHECK(h.n == 6);
  for (int i = 0; i < h.n; i++)
    if (h.conns[i] >= 0)
      close(h.conns[i]);
  lc_runtime_free(rt);
}

/* A bad cap is refused with a message. */
static void test_cap_bad(void) {
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  LC_REQUIRE_OK(lc_runtime_new_local(&rt, engine, NULL));
  fo.max_connections = -1;
  LC_CHECK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, &fo) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "max_connections -1");
  lc_forward_free(f);
  lc_runtime_free(rt);
}

/* ---- a gigabyte of output ------------------------------------------------------------------- */

/*
 * The bound on our peak resident memory's growth while 1 GB of output goes by: 64 MiB. Not checked
 * under AddressSanitizer: its allocator keeps what was allocated and freed resident (the peak
 * grew by 350-480 MB there, also with a 16 MiB quarantine), while the normal build grows by
 * 0.2 MB, also with an on_line that sleeps 1 ms every 1000 lines (13 s instead of 3 s: the host
 * is held back, nothing piles up here).
 */
#define PEAK_SLACK_KB (64L * 1024)

/* VmHWM or VmRSS of this process in kB. */
static long status_kb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, field, strlen(field)) == 0) {
      kb = strtol(line + strlen(field), NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

/* Resets the peak (VmHWM) to the current resident size, so that what earlier tests touched does
 * not hide this test's growth. */
static int reset_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  int r = f != NULL && fputs("5", f) >= 0 ? 0 : -1;
  if (f != NULL && fclose(f) != 0)
    r = -1;
  return r;
}

typedef struct counter {
  unsigned long long lines, bytes;
} counter;

static void count_line(const char *line, size_t len, lc_stream stream, void *payload) {
  counter *c = payload;
  (void)line;
  if (stream == LC_STDOUT) {
    c->lines++;
    c->bytes += len + 1;
  }
}

/* 1 GB (LC_TEST_BULK_BYTES) of 100-byte lines from one command on lab4: counted by on_line, then
 * dropped (no callback); our peak resident memory grows by less than 64 MiB either way. */
static void test_gigabyte_output(void) {
  lc_runtime *rt = open_host(engine, "lab4");
  char cmd[256];
  /* 99 characters and the newline; head cuts at a line's end: bytes / 100 lines */
  snprintf(cmd, sizeof(cmd),
           "yes 0123456789012345678901234567890123456789012345678901234567890123456789"
           "0123456789012345678901234567a | head -c %llu",
           LC_TEST_BULK_BYTES);
  LC_REQUIRE(rt != NULL);
  for (int pass = 0; pass < 2; pass++) {
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    lc_exec_result res = {0};
    counter c = {0};
    long before, peak;
    uint64_t t0;
    LC_REQUIRE(reset_peak() == 0);
    before = status_kb("VmRSS:");
    if (pass == 0) {
      eo.on_line = count_line;
      eo.payload = &c;
    }
    t0 = now_ms();
    LC_CHECK_OK(lc_runtime_exec(&res, rt, cmd, &eo));
    peak = status_kb("VmHWM:");
    fprintf(stderr, "  %s: %.1f s, %llu lines, peak resident %ld kB over %ld kB\n",
            pass == 0 ? "on_line" : "no callback", (double)(now_ms() - t0) / 1000.0, c.lines,
            peak - before, before);
    LC_CHECK(res.exit_status == 0);
    if (pass == 0) {
      LC_CHECK(c.lines == LC_TEST_BULK_BYTES / 100);
      LC_CHECK(c.bytes == LC_TEST_BULK_BYTES);
    }
#ifndef LC_TEST_ASAN
    LC_CHECK(before > 0 && peak > 0 && peak - before < PEAK_SLACK_KB);
#else
    fprintf(stderr, "  (AddressSanitizer: the peak is its allocator's, not checked)\n");
#endif
  }
  lc_runtime_free(rt);
  LC_CHECK(th_count_procs(4, "yes 0123") == 0);
}

/* ---- ProxyJump: one bastion connection for every host behind it ------------------------------ */

#define BEHIND 6

/* Established TCP connections from this machine to lab0's sshd. */
static int bastion_connections(void) {
  char cmd[512], line[256];
  FILE *p;
  int n = 0;
  snprintf(cmd, sizeof(cmd), "ss -Htn state established dst %s 'dport = :22' 2>/dev/null",
           th_addr(0));
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c) */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL)
    n++;
  pclose(p);
  return n;
}

/* Writes a config with behind1..behindN (lab1..labN's addresses, ProxyJump lab0), a host behind
 * a bastion nobody answers on (lab0's address, port 2) and the fixture's hosts. */
static int write_jump_config(char *path, size_t size) {
  char fixture[4096];
  FILE *f, *in;
  size_t n;
  snprintf(path, size, "%s/embed-jump.conf", th_dir());
  snprintf(fixture, sizeof(fixture), "%s", th_config());
  if ((f = fopen(path, "w")) == NULL || (in = fopen(fixture, "r")) == NULL) {
    if (f != NULL)
      fclose(f);
    return -1;
  }
  for (int i = 1; i <= BEHIND; i++)
    fprintf(f,
            "Host behind%d\n  HostName %s\n  ProxyJump lab0\n  User root\n  IdentityFile "
            "%s/id_ed25519\n  IdentitiesOnly yes\n  UserKnownHostsFile %s/known_hosts\n  "
            "GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n\n",
            i, th_addr(i), th_dir(), th_dir());
  fprintf(f,
          "Host deadbastion\n  HostName %s\n  Port 2\n  User root\n  IdentityFile "
          "%s/id_ed25519\n  IdentitiesOnly yes\n\n"
          "Host behinddead\n  HostName %s\n  ProxyJump deadbastion\n  User root\n  "
          "IdentityFile %s/id_ed25519\n  IdentitiesOnly yes\n  UserKnownHostsFile "
          "%s/known_hosts\n  StrictHostKeyChecking yes\n\n",
          th_addr(0), th_dir(), th_addr(1), th_dir(), th_dir());
  while ((n = fread(fixture, 1, sizeof(fixture), in)) > 0)
    fwrite(fixture, 1, n, f);
  fclose(in);
  return fclose(f) == 0 ? 0 : -1;
}

static int kill_if_session(long pid, const char *text, const void *arg) {
  (void)arg;
  return strncmp(text, "sshd: root", 10) == 0 && kill((pid_t)pid, SIGKILL) == 0;
}

/* Every host of g answers a command. */
static int all_answer(lc_group *g) {
  int ok = 0;
  for (size_t i = 0; i < lc_group_count(g); i++) {
    lc_exec_result res = {.exit_status = -1};
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    eo.timeout_ms = 30000;
    if (lc_runtime_exec(&res, lc_group_at(g, i), "true", &eo) == 0 && res.exit_status == 0)
      ok++;
  }
  return ok;
}

/*
 * Six hosts behind lab0, connected through one group: one connection to lab0 carries them all.
 * lab0's session sshd killed: every host behind it is lost and comes back through one new
 * bastion connection. Freed: nothing left on lab0.
 */
static void test_proxyjump_shared(void) {
  char cfg[4096], name[BEHIND][32];
  const char *hosts[BEHIND];
  lc_runtime_options o = th_options();
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_forward *fw[BEHIND] = {0};
  int base = bastion_connections(), n = -1;
  LC_REQUIRE(base >= 0);
  LC_REQUIRE(write_jump_config(cfg, sizeof(cfg)) == 0);
  o.ssh_config = cfg;
  for (int i = 0; i < BEHIND; i++) {
    snprintf(name[i], sizeof(name[i]), "behind%d", i + 1);
    hosts[i] = name[i];
  }
  LC_REQUIRE_OK(lc_group_new(&g, engine, NULL));
  LC_CHECK_OK(lc_group_connect(&rep, g, hosts, BEHIND, &o));
  for (size_t i = 0; rep != NULL && i < lc_group_report_count(rep); i++)
    if (lc_group_report_error(rep, i) != 0)
      fprintf(stderr, "  %s: %s\n", lc_group_report_host(rep, i), lc_group_report_message(rep, i));
  LC_CHECK(rep != NULL && lc_group_report_failures(rep) == 0);
  lc_group_report_free(rep);
  LC_CHECK(lc_group_count(g) == BEHIND);
  n = bastion_connections() - base;
  fprintf(stderr, "  %d hosts behind lab0: %d connection(s) to lab0\n", BEHIND, n);
  LC_CHECK(n == 1);
  LC_CHECK(all_answer(g) == BEHIND);

  /* a forward on each keeps it coming back after a loss */
  for (int i = 0; i < BEHIND && (size_t)i < lc_group_count(g); i++)
    LC_CHECK_OK(
        lc_forward_new(&fw[i], lc_group_at(g, i), LC_FORWARD_LOCAL, 0, "127.0.0.1", 22, NULL));
  /* the bastion's session goes: all six are lost, and come back through one connection */
  LC_CHECK(th_each_proc(0, "cmdline", kill_if_session, NULL) >= 1);
  {
    int back = 0;
    for (int t = 0; t < 600 && back < BEHIND; t++) {
      usleep(100 * 1000);
      back = 0;
      for (int i = 0; i < BEHIND; i++)
        back += fw[i] != NULL && lc_forward_is_up(fw[i]) &&
                lc_runtime_is_connected(lc_group_at(g, (size_t)i));
    }
    fprintf(stderr, "  back after the bastion's loss: %d of %d\n", back, BEHIND);
    LC_CHECK(back == BEHIND);
  }
  LC_CHECK(all_answer(g) == BEHIND);
  n = bastion_connections() - base;
  fprintf(stderr, "  after the loss: %d connection(s) to lab0\n", n);
  LC_CHECK(n == 1);

  for (int i = 0; i < BEHIND; i++)
    lc_forward_free(fw[i]);
  lc_group_free(g);
  for (int t = 0; t < 100 && (n = bastion_connections() - base) != 0; t++)
    usleep(100 * 1000);
  LC_CHECK(n == 0);
  for (int t = 0; t < 100 && (n = th_count_procs(0, "sshd: root")) != 0; t++)
    usleep(100 * 1000);
  LC_CHECK(n == 0);
}

/* Sockets of this process to lab0's sshd, in any state (a leaked one sits in CLOSE-WAIT). */
static int our_sockets_to_lab0(void) {
  char cmd[512], line[512], pid[32];
  FILE *p;
  int n = 0;
  snprintf(cmd, sizeof(cmd), "ss -Htanp dst %s 'dport = :22' 2>/dev/null", th_addr(0));
  snprintf(pid, sizeof(pid), "pid=%d,", (int)getpid());
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c) */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL)
    n += strstr(line, pid) != NULL;
  pclose(p);
  return n;
}

/* A freed runtime leaves no socket open here: libssh 0.10 does not close the socket it was
 * given, so it stayed open in CLOSE-WAIT, one per runtime, also after a reconnect. */
static void test_socket_closed_after_free(void) {
  for (int pass = 0; pass < 2; pass++) {
    lc_runtime *rt = open_host(engine, "lab0");
    lc_forward *f = NULL;
    int n = -1;
    LC_REQUIRE(rt != NULL);
    if (pass == 1) { /* lost and back first */
      LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 22, NULL));
      LC_CHECK(th_each_proc(0, "cmdline", kill_if_session, NULL) >= 1);
      usleep(500 * 1000);
      for (int t = 0; t < 300 && f != NULL && !lc_forward_is_up(f); t++)
        usleep(100 * 1000);
      LC_CHECK(f != NULL && lc_forward_is_up(f));
    }
    LC_CHECK(our_sockets_to_lab0() == 1);
    lc_forward_free(f);
    lc_runtime_free(rt);
    for (int t = 0; t < 50 && (n = our_sockets_to_lab0()) != 0; t++)
      usleep(100 * 1000);
    LC_CHECK(n == 0);
  }
}

/* A bastion nobody answers on: the error names the host behind it and the bastion. */
static void test_proxyjump_dead_bastion(void) {
  char cfg[4096];
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  LC_REQUIRE(write_jump_config(cfg, sizeof(cfg)) == 0);
  o.ssh_config = cfg;
  LC_CHECK(lc_runtime_new_ssh(&rt, engine, "behinddead", &o) < 0);
  LC_CHECK(rt == NULL);
  fprintf(stderr, "  %s\n", lc_error_last());
  LC_CHECK_CONTAINS(lc_error_last(), "behinddead");
  LC_CHECK_CONTAINS(lc_error_last(), "deadbastion");
  LC_CHECK_CONTAINS(lc_error_last(), "refused");
  lc_runtime_free(rt);
}

/* ---- lc_engine_free with things still open ------------------------------------------------- */

static atomic_int free_returned; /* set by the test, read by the watchdog thread */

static void *watchdog(void *arg) {
  int limit_s = *(int *)arg;
  for (int i = 0; i < limit_s * 10 && !free_returned; i++)
    usleep(100 * 1000);
  if (!free_returned) {
    fprintf(stderr, "  FAIL: lc_engine_free did not return within %d s\n", limit_s);
    printf("0 passed, 1 failed\n");
    _exit(1);
  }
  return NULL;
}

static void test_engine_free_with_open_runtime(void) {
  lc_engine *e = NULL;
  lc_runtime *rt;
  lc_process *p = NULL;
  lc_forward *f = NULL;
  pthread_t wd;
  char marker[64], cmd[128];
  int limit = 120, fd = -1, fport = 0, n = -1;
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  rt = open_host(e, "lab2");
  LC_REQUIRE(rt != NULL);
  snprintf(marker, sizeof(marker), "sleep %d", 700000 + getpid() % 100000);
  snprintf(cmd, sizeof(cmd), "exec %s", marker);
  LC_CHECK_OK(lc_runtime_spawn(&p, rt, cmd, NULL));
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 22, NULL));
  if (f != NULL) {
    fport = lc_forward_port(f);
    fd = connect_here(fport); /* a connection open through it: sshd's banner comes back */
    LC_CHECK(fd >= 0 && read_some(fd, 4) >= 4);
  }
  for (int i = 0; i < 100 && th_count_procs(2, marker) < 1; i++)
    usleep(100 * 1000);
  LC_CHECK(th_count_procs(2, marker) == 1);

  free_returned = 0;
  pthread_create(&wd, NULL, watchdog, &limit);
  lc_engine_free(e); /* rt, p and f were never freed */
  free_returned = 1;
  pthread_join(wd, NULL);

  /* the process ended with its channel; the forward's listener and connection are gone */
  for (int i = 0; i < 300 && (n = th_count_procs(2, marker)) != 0; i++)
    usleep(100 * 1000);
  LC_CHECK(n == 0);
  if (fd >= 0) {
    char c;
    LC_CHECK(recv(fd, &c, 1, 0) <= 0);
    close(fd);
  }
  if (fport > 0) {
    int again = connect_here(fport);
    LC_CHECK(again < 0);
    if (again >= 0)
      close(again);
  }
  for (int i = 0; i < 300 && (n = th_count_procs(2, "sshd: root@")) != 0; i++)
    usleep(100 * 1000);
  LC_CHECK(n == 0); /* the connection itself */
}

static void test_engine_free_empty(void) {
  lc_engine *e = NULL;
  pthread_t wd;
  int limit = 30;
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  free_returned = 0;
  pthread_create(&wd, NULL, watchdog, &limit);
  lc_engine_free(e);
  free_returned = 1;
  pthread_join(wd, NULL);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_gigabyte_output),          LC_TEST(test_masks),
      LC_TEST(test_sigpipe_local_runtime),    LC_TEST(test_sigpipe_local_forward),
      LC_TEST(test_sigpipe_remote_forward),   LC_TEST(test_cap_bad),
      LC_TEST(test_cap_local_runtime),        LC_TEST(test_cap_local_forward),
      LC_TEST(test_cap_remote_forward),       LC_TEST(test_proxyjump_dead_bastion),
      LC_TEST(test_socket_closed_after_free), LC_TEST(test_proxyjump_shared),
      LC_TEST(test_engine_free_empty),        LC_TEST(test_engine_free_with_open_runtime),
  };
  int r;
  th_dir(); /* exits when there are no test hosts */
  signal(SIGPIPE, SIG_DFL);
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: engine: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
