/*
 * test_forward.c - port forwards (-L and -R) through real SSH test hosts: SHA-256 integrity of
 * 1 GiB each way through each kind, 200 concurrent connections through one forward, 50 forwards
 * on one host, a slow reader against a flooding writer (resident memory of this process stays
 * bounded, and the writer is held back), half-close, request and reply at the relay's size
 * boundaries, a target nobody listens on, an sshd with forwarding disabled, ports in use here and
 * on the host, bad input, an sshd killed and started again (the forwards come back), forwards on
 * the local runtime, lc_forward_free with connections open, and listeners on loopback only
 * (127.0.0.1, or ::1 when asked).
 *
 * The end points are tests/support/tcptool, run through lc_runtime_spawn: on a host (copied into
 * the runtime's working directory, since a build under /tmp is not visible there) and on this
 * machine (through a local runtime). They print one result line each; the data they send and
 * receive is hashed at both ends. LC_FWD_BYTES overrides the 1 GiB of the integrity test (128 MiB
 * under AddressSanitizer).
 */
#include "lc_test.h"
#include "lines.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#ifndef LC_TCPTOOL
#error "LC_TCPTOOL: the path of tests/support/tcptool, set by tests/integration.forward.cmake"
#endif

#define MiB (1024ull * 1024ull)
#define AHEAD_MAX (64 * MiB) /* how far a flooding writer may get ahead of a slow reader */

/*
 * The slow-reader bound on this process's resident memory: baseline + 64 MiB. Under
 * AddressSanitizer freed blocks stay resident in its quarantine (up to 256 MiB), so there the
 * growth follows what was allocated, not what is held: baseline + 160 MiB. Without back-pressure
 * a 4 s flood moves hundreds of MB, well past either bound.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifdef ASAN
#include <sanitizer/common_interface_defs.h>
#define RSS_SLACK_KB (160L * 1024)
#else
#define RSS_SLACK_KB (64L * 1024)
#endif

static lc_engine *engine;

/* A runtime and the path of tcptool as its commands see it. */
typedef struct host {
  lc_runtime *rt;
  char tool[1024];
} host;

static host local;

/*
 * What puts the test hosts back when this process dies between taking them apart and restoring
 * them: lab6's sshd stopped, the extra instance with forwarding disabled. Run by the tests on
 * their way out, and by the sanitizers' death callback when an error report ends the process.
 */
static char restore_sshd[4096], remove_nofwd[4096];

static void restore_hosts(void) {
  if (restore_sshd[0] != '\0' && system(restore_sshd) != 0) /* NOLINT(cert-env33-c) */
    fprintf(stderr, "  %s: failed\n", restore_sshd);
  if (remove_nofwd[0] != '\0' && system(remove_nofwd) != 0) /* NOLINT(cert-env33-c) */
    fprintf(stderr, "  %s: failed\n", remove_nofwd);
  restore_sshd[0] = remove_nofwd[0] = '\0';
}

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds until deadline, at least 1. */
static int ms_left(uint64_t deadline) {
  uint64_t now = now_ms();
  return deadline > now ? (int)(deadline - now) : 1;
}

/* Connects to alias through config and copies tcptool into the runtime's working directory. */
static int host_open(host *h, const char *alias, const char *config, int keepalive_ms) {
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  const char *wd;
  int r;
  memset(h, 0, sizeof(*h));
  o.ssh_config = config ? config : th_config();
  o.keepalive_timeout_ms = keepalive_ms;
  if ((r = lc_runtime_new_ssh(&h->rt, engine, alias, &o)) < 0) {
    fprintf(stderr, "  connect %s: %s: %s\n", alias, lc_err_name(r), lc_error_last());
    return r;
  }
  if ((r = lc_runtime_workdir(&wd, h->rt)) < 0) {
    fprintf(stderr, "  %s: workdir: %s\n", alias, lc_error_last());
    return r;
  }
  snprintf(h->tool, sizeof(h->tool), "%s/tcptool", wd);
  if ((r = lc_runtime_send_file(h->rt, LC_TCPTOOL, h->tool, 30000)) < 0)
    fprintf(stderr, "  %s: send tcptool: %s\n", alias, lc_error_last());
  return r;
}

static void host_close(host *h) {
  lc_runtime_free(h->rt);
  h->rt = NULL;
}

static host *host_lab(host *h, int i) {
  char alias[16];
  snprintf(alias, sizeof(alias), "lab%d", i);
  return host_open(h, alias, NULL, 0) == 0 ? h : NULL;
}

/* Resident memory of this process in kB. */
static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kb = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

/* A port on this machine's 127.0.0.1 that was free a moment ago. */
static int free_local_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* A listening socket on 127.0.0.1 (port 0: any); *port gets its port. */
static int listen_here(int *port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  a.sin_port = htons((uint16_t)*port);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* ---- end points: tcptool on a runtime ------------------------------------------------------- */

typedef struct ep {
  lc_process *proc;
  const char *where;
  char who[64]; /* "tcptool on HOST" */
  lines out;
} ep;

/* Starts "tcptool ARGS" on h; NULL (with the reason printed) when it cannot start. */
static ep *ep_start(host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ep *ep_start(host *h, const char *fmt, ...) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  char args[2048], cmd[4096];
  va_list ap;
  ep *e = calloc(1, sizeof(*e));
  int r;
  if (e == NULL)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  e->where = lc_runtime_name(h->rt);
  snprintf(e->who, sizeof(e->who), "tcptool on %s", e->where);
  lines_init(&e->out, e->who);
  eo.on_line = lines_line;
  eo.payload = &e->out;
  snprintf(cmd, sizeof(cmd), "exec '%s' %s", h->tool, args);
  if ((r = lc_runtime_spawn(&e->proc, h->rt, cmd, &eo)) < 0) {
    fprintf(stderr, "  spawn on %s: %s: %s\n", e->where, lc_err_name(r), lc_error_last());
    lines_destroy(&e->out);
    free(e);
    return NULL;
  }
  return e;
}

/* Waits up to ms for a line starting with prefix; copies it (without \n) to out. 0 or -1. */
static int ep_wait_line(ep *e, const char *prefix, char *out, size_t size, int ms) {
  return e != NULL ? lines_wait(&e->out, prefix, 1, out, size, ms) : -1;
}

/* How many lines start with prefix. */
static int ep_count(ep *e, const char *prefix) { return lines_count(&e->out, prefix); }

/* The port a listening tcptool printed, or -1. */
static int ep_port(ep *e) {
  char line[64];
  if (ep_wait_line(e, "port ", line, sizeof(line), 20000) < 0)
    return -1;
  return (int)strtol(line + 5, NULL, 10);
}

/* Waits up to ms for the tool to exit; its exit status, or -1. */
static int ep_end(ep *e, int ms) {
  lc_exec_result res = {.exit_status = -1};
  int r;
  if (e == NULL)
    return -1;
  if ((r = lc_process_wait(&res, e->proc, ms)) < 0) {
    fprintf(stderr, "  tcptool on %s did not end within %d ms: %s\n", e->where, ms, lc_err_name(r));
    return -1;
  }
  return res.exit_status;
}

static void ep_free(ep *e) {
  if (e == NULL)
    return;
  lc_process_free(e->proc);
  lines_destroy(&e->out);
  free(e);
}

/* A forward, or NULL with the error printed. */
static lc_forward *fwd_new(host *h, lc_forward_kind kind, int port, int target_port,
                           const lc_forward_options *o) {
  lc_forward *f = NULL;
  int r = lc_forward_new(&f, h->rt, kind, port, "127.0.0.1", target_port, o);
  if (r < 0)
    fprintf(stderr, "  %s forward %d -> %d on %s: %s: %s\n", kind == LC_FORWARD_LOCAL ? "-L" : "-R",
            port, target_port, lc_runtime_name(h->rt), lc_err_name(r), lc_error_last());
  return f;
}

/* Parses "WORD BYTES HASH [SECS]". */
static int parse_result(const char *line, unsigned long long *bytes, char *hash, double *secs) {
  const char *p = strchr(line, ' ');
  char *end;
  size_t n;
  *secs = 0;
  if (p == NULL)
    return -1;
  *bytes = strtoull(p + 1, &end, 10);
  if (end == p + 1 || *end != ' ')
    return -1;
  n = strcspn(end + 1, " ");
  if (n != 64)
    return -1;
  memcpy(hash, end + 1, 64);
  hash[64] = '\0';
  if (end[65] == ' ')
    *secs = strtod(end + 66, NULL);
  return 0;
}

/* ---- 1: integrity of 1 GiB each way --------------------------------------------------------- */

/*
 * One transfer of n bytes through a forward of h. The listening end is the target (on the host
 * for -L, here for -R), the connecting end talks to the forward's port (here for -L, on the host
 * for -R). to_listener: the connecting end sends.
 */
static int transfer(host *h, lc_forward_kind kind, int rport, int to_listener,
                    unsigned long long n) {
  host *lhost = kind == LC_FORWARD_LOCAL ? h : &local,
       *chost = kind == LC_FORWARD_LOCAL ? &local : h;
  ep *srv = NULL, *cli = NULL;
  lc_forward *f = NULL;
  char sline[256] = "", cline[256] = "", shash[65] = "", chash[65] = "";
  unsigned long long sbytes = 0, cbytes = 0;
  double ssecs = 0, csecs = 0, secs;
  int tport, fport, failed_before = lc_test_failed_now;
  int guard = 30000 + (int)(n / (8 * MiB)) * 1000; /* a hang guard: 8 MiB/s, 164 s for 1 GiB */
  uint64_t t0;

  if (to_listener)
    srv = ep_start(lhost, "--timeout %d listen 127.0.0.1 0 sink", guard / 1000 + 30);
  else
    srv = ep_start(lhost, "--timeout %d listen 127.0.0.1 0 source %llu 11", guard / 1000 + 30, n);
  if (srv == NULL || (tport = ep_port(srv)) < 0 ||
      (f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  fport = lc_forward_port(f);
  t0 = now_ms();
  if (to_listener)
    cli = ep_start(chost, "--timeout %d connect 127.0.0.1 %d source %llu 12", guard / 1000 + 30,
                   fport, n);
  else
    cli = ep_start(chost, "--timeout %d connect 127.0.0.1 %d sink", guard / 1000 + 30, fport);
  LC_CHECK(cli != NULL);
  /* one guard for both ends: the second wait gets what the first left */
  LC_CHECK(ep_wait_line(srv, to_listener ? "received " : "sent ", sline, sizeof(sline), guard) ==
           0);
  LC_CHECK(ep_wait_line(cli, to_listener ? "sent " : "received ", cline, sizeof(cline),
                        ms_left(t0 + (uint64_t)guard)) == 0);
  secs = (double)(now_ms() - t0) / 1000.0;
  if (lc_test_failed_now && !failed_before) {
    fprintf(stderr, "  %s %s: %llu bytes did not arrive within %d s\n",
            kind == LC_FORWARD_LOCAL ? "-L" : "-R",
            (kind == LC_FORWARD_LOCAL) == !to_listener ? "host -> here" : "here -> host", n,
            guard / 1000);
    goto out;
  }
  LC_CHECK(parse_result(sline, &sbytes, shash, &ssecs) == 0);
  LC_CHECK(parse_result(cline, &cbytes, chash, &csecs) == 0);
  LC_CHECK(sbytes == n);
  LC_CHECK(cbytes == n);
  LC_CHECK_STR(shash, chash);
  LC_CHECK(ep_end(srv, 30000) == 0);
  LC_CHECK(ep_end(cli, 30000) == 0);
  fprintf(stderr, "  %s %s: %llu bytes in %.1f s (receiver %.1f s): %.0f MB/s; sha256 %.16s...\n",
          kind == LC_FORWARD_LOCAL ? "-L" : "-R",
          (kind == LC_FORWARD_LOCAL) == !to_listener ? "host -> here" : "here -> host", n, secs,
          to_listener ? ssecs : csecs, secs > 0 ? (double)n / 1e6 / secs : 0.0, shash);
out:
  ep_free(cli);
  ep_free(srv);
  lc_forward_free(f);
  return lc_test_failed_now && !failed_before ? -1 : 0;
}

/* The bytes of each transfer: LC_TEST_BULK_BYTES in binary units, 1 GiB, and an eighth of it
 * (128 MiB) under AddressSanitizer (the relays' code is the same for every megabyte; hashing 8 GiB
 * at both ends was the largest CPU load of CI's sanitizer lanes). ThreadSanitizer's build leaves
 * the case out (.cmake). */
#define FWD_BYTES (LC_TEST_BULK_BYTES * 1024 * MiB / 1000000000ull)

/* Stops at the first failed transfer: a stalled one takes its whole hang guard. */
static void test_integrity_1gib(void) {
  const char *env = getenv("LC_FWD_BYTES");
  unsigned long long n = env ? strtoull(env, NULL, 0) : FWD_BYTES;
  host h;
  LC_REQUIRE(host_lab(&h, 0) != NULL);
  if (transfer(&h, LC_FORWARD_LOCAL, 0, 0, n) == 0 &&
      transfer(&h, LC_FORWARD_LOCAL, 0, 1, n) == 0 &&
      transfer(&h, LC_FORWARD_REMOTE, 30001, 1, n) == 0)
    transfer(&h, LC_FORWARD_REMOTE, 30002, 0, n);
  host_close(&h);
}

/* ---- 2 and 3: many connections, many forwards ----------------------------------------------- */

/* count connections of a few KB each through the forwards on ports[], echoed by srv. */
static void run_clients(host *from, ep *srv, const int *ports, int nports, int count) {
  char list[4096] = "", line[512];
  size_t off = 0;
  ep *cli;
  for (int i = 0; i < nports; i++)
    off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d", i ? "," : "", ports[i]);
  LC_REQUIRE((cli = ep_start(from, "--timeout 150 clients 127.0.0.1 %s %d 8192", list, count)) !=
             NULL);
  if (ep_wait_line(cli, "clients ", line, sizeof(line), 120000) == 0) {
    char want[64];
    snprintf(want, sizeof(want), "clients ok %d", count);
    LC_CHECK_STR(line, want);
  } else {
    lc_test_failed_now = 1;
  }
  LC_CHECK(ep_end(cli, 30000) == 0);
  LC_CHECK(ep_end(srv, 30000) == 0); /* served its count of connections */
  LC_CHECK(ep_count(srv, "echoed ") == count);
  LC_CHECK(ep_count(srv, "echoed ") > 0 && strstr(srv->out.text, "reset") == NULL);
  ep_free(cli);
}

static void test_200_connections(void) {
  host h;
  ep *srv;
  lc_forward *f;
  int tport, port;
  LC_REQUIRE(host_lab(&h, 1) != NULL);
  /* -L: 200 clients here, the echo server on the host */
  srv = ep_start(&h, "--timeout 150 --conns 200 listen 127.0.0.1 0 echo");
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  LC_REQUIRE((f = fwd_new(&h, LC_FORWARD_LOCAL, 0, tport, NULL)) != NULL);
  port = lc_forward_port(f);
  run_clients(&local, srv, &port, 1, 200);
  lc_forward_free(f);
  ep_free(srv);
  /* -R: 200 clients on the host, the echo server here */
  srv = ep_start(&local, "--timeout 150 --conns 200 listen 127.0.0.1 0 echo");
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  port = 31001;
  LC_REQUIRE((f = fwd_new(&h, LC_FORWARD_REMOTE, port, tport, NULL)) != NULL);
  run_clients(&h, srv, &port, 1, 200);
  lc_forward_free(f);
  ep_free(srv);
  host_close(&h);
}

#define NFWD 25

static void test_50_forwards(void) {
  host h;
  ep *lsrv = NULL, *rsrv = NULL;
  lc_forward *fl[NFWD] = {0}, *fr[NFWD] = {0};
  int lports[NFWD], rports[NFWD], ltarget, rtarget, up = 0;
  LC_REQUIRE(host_lab(&h, 2) != NULL);
  lsrv = ep_start(&h, "--timeout 150 --conns %d listen 127.0.0.1 0 echo", NFWD);
  rsrv = ep_start(&local, "--timeout 150 --conns %d listen 127.0.0.1 0 echo", NFWD);
  if (lsrv == NULL || rsrv == NULL || (ltarget = ep_port(lsrv)) < 0 ||
      (rtarget = ep_port(rsrv)) < 0) {
    lc_test_failed_now = 1;
    goto out;
  }
  for (int i = 0; i < NFWD; i++) { /* interleaved: -L, -R, -L, ... */
    fl[i] = fwd_new(&h, LC_FORWARD_LOCAL, 0, ltarget, NULL);
    fr[i] = fwd_new(&h, LC_FORWARD_REMOTE, 32001 + i, rtarget, NULL);
    if (fl[i] == NULL || fr[i] == NULL) {
      lc_test_failed_now = 1;
      goto out;
    }
    lports[i] = lc_forward_port(fl[i]);
    rports[i] = 32001 + i;
  }
  for (int i = 0; i < NFWD; i++)
    up += lc_forward_is_up(fl[i]) != 0 && lc_forward_is_up(fr[i]) != 0;
  LC_CHECK(up == NFWD);
  run_clients(&local, lsrv, lports, NFWD, NFWD); /* one connection through each -L */
  run_clients(&h, rsrv, rports, NFWD, NFWD);     /* one connection through each -R */
out:
  for (int i = 0; i < NFWD; i++) {
    lc_forward_free(fl[i]);
    lc_forward_free(fr[i]);
  }
  ep_free(lsrv);
  ep_free(rsrv);
  host_close(&h);
}

/* ---- 4: slow reader, flooding writer -------------------------------------------------------- */

static void slow_reader(host *h, lc_forward_kind kind, int rport) {
  host *whost = kind == LC_FORWARD_LOCAL ? h : &local,
       *rhost = kind == LC_FORWARD_LOCAL ? &local : h;
  ep *writer = NULL, *reader = NULL;
  lc_forward *f = NULL;
  char line[128];
  unsigned long long flooded = 0, read = 0;
  long base, peak, kb;
  int tport;

  writer = ep_start(whost, "--timeout 60 listen 127.0.0.1 0 flood");
  LC_REQUIRE(writer != NULL && (tport = ep_port(writer)) > 0);
  if ((f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  base = peak = rss_kb();
  /* 64 KiB every 50 ms for 4 s: about 1.3 MB/s */
  reader =
      ep_start(rhost, "--timeout 60 connect 127.0.0.1 %d slowread 65536 50 4", lc_forward_port(f));
  LC_CHECK(reader != NULL);
  for (uint64_t end = now_ms() + 30000; reader != NULL && now_ms() < end;) {
    if ((kb = rss_kb()) > peak)
      peak = kb;
    if (ep_count(reader, "slowread ") > 0)
      break;
    usleep(100 * 1000);
  }
  LC_CHECK(ep_wait_line(reader, "slowread ", line, sizeof(line), 1000) == 0);
  read = strtoull(line + 9, NULL, 10);
  /* the reader has gone: the writer's connection must end too */
  LC_CHECK(ep_wait_line(writer, "flooded ", line, sizeof(line), 30000) == 0);
  flooded = strtoull(line + 8, NULL, 10);
  if ((kb = rss_kb()) > peak)
    peak = kb;
  fprintf(stderr,
          "  %s slow reader: read %llu bytes in 4 s, the writer wrote %llu; resident memory %ld "
          "kB before, %ld kB at most (+%ld kB; bound +%ld kB)\n",
          kind == LC_FORWARD_LOCAL ? "-L" : "-R", read, flooded, base, peak, peak - base,
          RSS_SLACK_KB);
  LC_CHECK(read >= 40ull * 65536);      /* data flowed all along */
  LC_CHECK(peak - base < RSS_SLACK_KB); /* memory stays bounded */
  LC_CHECK(flooded >= read);            /* the writer sent what was read... */
  LC_CHECK(flooded - read < AHEAD_MAX); /* ...and was held back */
  LC_CHECK(ep_end(reader, 20000) == 0);
  LC_CHECK(ep_end(writer, 20000) == 0);
out:
  ep_free(reader);
  ep_free(writer);
  lc_forward_free(f);
}

static void test_slow_reader(void) {
  host h;
  LC_REQUIRE(host_lab(&h, 3) != NULL);
  slow_reader(&h, LC_FORWARD_LOCAL, 0);
  slow_reader(&h, LC_FORWARD_REMOTE, 33001);
  host_close(&h);
}

/* ---- 5: half-close -------------------------------------------------------------------------- */

/*
 * The client sends n bytes and shuts down its write side; the server reads to EOF, then replies
 * with m bytes and closes; the client gets all m after its own EOF.
 */
static void half_close(host *h, lc_forward_kind kind, int rport, unsigned long long n,
                       unsigned long long m) {
  host *shost = kind == LC_FORWARD_LOCAL ? h : &local,
       *chost = kind == LC_FORWARD_LOCAL ? &local : h;
  ep *srv = NULL, *cli = NULL;
  lc_forward *f = NULL;
  char l[4][256] = {"", "", "", ""}, hash[4][65] = {"", "", "", ""};
  unsigned long long bytes[4] = {0};
  double secs;
  uint64_t deadline;
  int tport;

  srv = ep_start(shost, "--timeout 60 listen 127.0.0.1 0 reply %llu 21", m);
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  if ((f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  cli =
      ep_start(chost, "--timeout 60 connect 127.0.0.1 %d halfclose %llu 22", lc_forward_port(f), n);
  deadline = now_ms() + 30000; /* a hang guard for the whole exchange */
  LC_CHECK(ep_wait_line(cli, "sent ", l[0], sizeof(l[0]), ms_left(deadline)) == 0);
  LC_CHECK(ep_wait_line(srv, "received ", l[1], sizeof(l[1]), ms_left(deadline)) == 0);
  LC_CHECK(ep_wait_line(srv, "sent ", l[2], sizeof(l[2]), ms_left(deadline)) == 0);
  LC_CHECK(ep_wait_line(cli, "received ", l[3], sizeof(l[3]), ms_left(deadline)) == 0);
  for (int i = 0; i < 4; i++)
    parse_result(l[i], &bytes[i], hash[i], &secs);
  fprintf(stderr,
          "  %s half-close: client sent %llu then EOF, server got %llu; server replied "
          "%llu, client got %llu\n",
          kind == LC_FORWARD_LOCAL ? "-L" : "-R", bytes[0], bytes[1], bytes[2], bytes[3]);
  LC_CHECK(bytes[0] == n && bytes[1] == n);
  LC_CHECK_STR(hash[0], hash[1]);
  LC_CHECK(bytes[2] == m && bytes[3] == m);
  LC_CHECK_STR(hash[2], hash[3]);
  LC_CHECK(ep_end(cli, ms_left(deadline + 20000)) == 0);
  LC_CHECK(ep_end(srv, ms_left(deadline + 20000)) == 0);
out:
  ep_free(cli);
  ep_free(srv);
  lc_forward_free(f);
}

static void test_half_close(void) {
  host h;
  LC_REQUIRE(host_lab(&h, 4) != NULL);
  half_close(&h, LC_FORWARD_LOCAL, 0, 100000, 1000);
  half_close(&h, LC_FORWARD_LOCAL, 0, 1 * MiB, 16 * MiB);
  half_close(&h, LC_FORWARD_REMOTE, 34001, 100000, 1000);
  half_close(&h, LC_FORWARD_REMOTE, 34002, 1 * MiB, 16 * MiB);
  host_close(&h);
}

/*
 * Request and reply: the client sends one message at a time and waits for its echo, with sizes at
 * the relay's boundaries (libssh's 4 KiB reads, 32 KiB packets, the 256 KiB it holds back for one
 * write, one packet's data and the relay's reads and writes of 2 and 8 packets). Data held back
 * and never written would leave a reply missing: the client hangs.
 */
static void request_reply(host *h, lc_forward_kind kind, int rport) {
  host *shost = kind == LC_FORWARD_LOCAL ? h : &local,
       *chost = kind == LC_FORWARD_LOCAL ? &local : h;
  ep *srv = NULL, *cli = NULL;
  lc_forward *f = NULL;
  char line[256];
  int tport;

  srv = ep_start(shost, "--timeout 60 listen 127.0.0.1 0 echo");
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  if ((f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  cli = ep_start(chost, "--timeout 60 connect 127.0.0.1 %d pingpong 7", lc_forward_port(f));
  if (ep_wait_line(cli, "pingpong ", line, sizeof(line), 50000) == 0) {
    fprintf(stderr, "  %s request and reply: %s\n", kind == LC_FORWARD_LOCAL ? "-L" : "-R", line);
    LC_CHECK_STR(line, "pingpong ok 31");
  } else {
    lc_test_failed_now = 1;
  }
  LC_CHECK(ep_end(cli, 20000) == 0);
  LC_CHECK(ep_end(srv, 20000) == 0);
out:
  ep_free(cli);
  ep_free(srv);
  lc_forward_free(f);
}

static void test_request_reply(void) {
  host h;
  LC_REQUIRE(host_lab(&h, 4) != NULL);
  request_reply(&h, LC_FORWARD_LOCAL, 0);
  request_reply(&h, LC_FORWARD_REMOTE, 34003);
  host_close(&h);
}

/* ---- 6: nobody listens at the target -------------------------------------------------------- */

/* A connection through f to nothing is closed promptly; once tport listens, one gets through. */
static void closed_target(host *h, lc_forward_kind kind, int rport, int tport) {
  host *shost = kind == LC_FORWARD_LOCAL ? h : &local,
       *chost = kind == LC_FORWARD_LOCAL ? &local : h;
  ep *cli = NULL, *srv = NULL;
  lc_forward *f = NULL;
  char line[256];
  uint64_t t0;
  LC_REQUIRE((f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) != NULL);
  t0 = now_ms();
  cli = ep_start(chost, "--timeout 30 connect 127.0.0.1 %d hold", lc_forward_port(f));
  if (ep_wait_line(cli, "closed ", line, sizeof(line), 15000) == 0) {
    fprintf(stderr, "  %s to a closed port: the client saw \"%s\" after %d ms\n",
            kind == LC_FORWARD_LOCAL ? "-L" : "-R", line, (int)(now_ms() - t0));
    LC_CHECK(strstr(line, "before ready") != NULL);
    LC_CHECK(strncmp(line, "closed eof", 10) == 0 || strncmp(line, "closed reset", 12) == 0);
  } else {
    lc_test_failed_now = 1;
  }
  LC_CHECK(ep_end(cli, 10000) == 0);
  ep_free(cli);
  cli = NULL;
  LC_CHECK(lc_forward_is_up(f));
  /* now something listens there: the same forward carries a connection */
  srv = ep_start(shost, "--timeout 30 listen 127.0.0.1 %d echo", tport);
  LC_CHECK(srv != NULL && ep_port(srv) == tport);
  cli = ep_start(chost, "--timeout 30 connect 127.0.0.1 %d check 65536 5", lc_forward_port(f));
  if (ep_wait_line(cli, "check ", line, sizeof(line), 20000) == 0)
    LC_CHECK_STR(line, "check ok 65536");
  else
    lc_test_failed_now = 1;
  LC_CHECK(ep_end(srv, 10000) == 0);
  ep_free(cli);
  ep_free(srv);
  lc_forward_free(f);
}

static void test_closed_port(void) {
  host h;
  int q;
  LC_REQUIRE(host_lab(&h, 5) != NULL);
  closed_target(&h, LC_FORWARD_LOCAL, 0, 35001); /* nothing listens in the host's namespace */
  LC_CHECK((q = free_local_port()) > 0);
  closed_target(&h, LC_FORWARD_REMOTE, 35002, q);
  host_close(&h);
}

/* ---- 7: sshd with AllowTcpForwarding no ----------------------------------------------------- */

static void forwarding_disabled_on(const char *config) {
  host h;
  ep *srv = NULL, *cli = NULL;
  lc_forward *f = NULL;
  char line[256];
  int r, tport;
  LC_REQUIRE(host_open(&h, "lab0", config, 0) == 0);
  srv = ep_start(&h, "--timeout 60 --conns 0 listen 127.0.0.1 0 echo");
  if (srv == NULL || (tport = ep_port(srv)) < 0) {
    lc_test_failed_now = 1;
    goto out;
  }
  /* -R: the host refuses to listen */
  r = lc_forward_new(&f, h.rt, LC_FORWARD_REMOTE, 36001, "127.0.0.1", tport, NULL);
  fprintf(stderr, "  -R with forwarding disabled: %s: %s\n", lc_err_name(r), lc_error_last());
  LC_CHECK(r == LC_EFORWARD);
  LC_CHECK(f == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab0");
  LC_CHECK_CONTAINS(lc_error_last(), "36001");
  LC_CHECK_CONTAINS(lc_error_last(), "forwarding is probably disabled");
  lc_forward_free(f);
  f = NULL;
  /* -L: listens here, and the host refuses each connection's channel */
  if ((f = fwd_new(&h, LC_FORWARD_LOCAL, 0, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  for (int i = 0; i < 2; i++) {
    cli = ep_start(&local, "--timeout 30 connect 127.0.0.1 %d hold", lc_forward_port(f));
    if (ep_wait_line(cli, "closed ", line, sizeof(line), 15000) == 0) {
      fprintf(stderr, "  -L with forwarding disabled: connection %d: \"%s\"\n", i + 1, line);
      LC_CHECK(strstr(line, "before ready") != NULL);
    } else {
      lc_test_failed_now = 1;
    }
    ep_free(cli);
    cli = NULL;
  }
  LC_CHECK(ep_count(srv, "echoed ") == 0); /* nothing got through */
  LC_CHECK(lc_forward_is_up(f));
out:
  lc_forward_free(f);
  ep_free(cli);
  ep_free(srv);
  host_close(&h);
}

/* A separate instance, DIR-nofwd beside the fixture's (its "up" removes what a crashed run left).
 */
static void test_forwarding_disabled(void) {
  char dir[4096], cmd[8192], config[4200];
  int st;
  snprintf(dir, sizeof(dir), "%s-nofwd", th_dir());
  snprintf(config, sizeof(config), "%s/ssh_config", dir);
  snprintf(cmd, sizeof(cmd), "%s up 1 --dir %s --sshd-option 'AllowTcpForwarding no' >/dev/null",
           th_script(), dir);
  snprintf(remove_nofwd, sizeof(remove_nofwd), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  if (st == 0)
    forwarding_disabled_on(config);
  else
    fprintf(stderr, "  %s: failed (%d)\n", cmd, st);
  LC_CHECK(st == 0);
  LC_CHECK(system(remove_nofwd) == 0); /* NOLINT(cert-env33-c) */
  remove_nofwd[0] = '\0';
}

/* ---- 8 and 9: port in use, bad input -------------------------------------------------------- */

static void test_port_in_use(void) {
  host h;
  lc_forward *f = NULL;
  ep *l1 = NULL, *l2 = NULL;
  char want[64];
  int port = 0, fd, r, held[2] = {-1, -1};
  LC_REQUIRE(host_lab(&h, 7) != NULL);
  /* -L on a port this process already listens on */
  LC_CHECK((fd = listen_here(&port)) >= 0);
  r = lc_forward_new(&f, h.rt, LC_FORWARD_LOCAL, port, "127.0.0.1", 22, NULL);
  fprintf(stderr, "  -L on a used port: %s: %s\n", lc_err_name(r), lc_error_last());
  LC_CHECK(r == -EADDRINUSE);
  LC_CHECK(f == NULL);
  snprintf(want, sizeof(want), "port %d", port);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), "this machine");
  if (fd >= 0)
    close(fd);
  /* -R on ports that listeners on the host's 127.0.0.1 and 0.0.0.0 hold */
  l1 = ep_start(&h, "--timeout 60 listen 127.0.0.1 37001 sink");
  l2 = ep_start(&h, "--timeout 60 listen 0.0.0.0 37002 sink");
  LC_CHECK(ep_port(l1) == 37001);
  LC_CHECK(ep_port(l2) == 37002);
  for (int p = 37001; p <= 37002; p++) {
    r = lc_forward_new(&f, h.rt, LC_FORWARD_REMOTE, p, "127.0.0.1", 22, NULL);
    fprintf(stderr, "  -R on a used port: %s: %s\n", lc_err_name(r), lc_error_last());
    LC_CHECK(r == -EADDRINUSE);
    LC_CHECK(f == NULL);
    snprintf(want, sizeof(want), "port %d", p);
    LC_CHECK_CONTAINS(lc_error_last(), want);
    LC_CHECK_CONTAINS(lc_error_last(), "lab7");
    lc_forward_free(f);
    f = NULL;
  }
  /* -R on a port that a connection's local port holds on the host: nothing listens there, yet
   * sshd cannot listen, and the error must say the port is in use, not blame the sshd config */
  LC_CHECK(th_hold_port_by_connection(7, 37004, held) == 0);
  r = lc_forward_new(&f, h.rt, LC_FORWARD_REMOTE, 37004, "127.0.0.1", 22, NULL);
  fprintf(stderr, "  -R on a port a connection holds: %s: %s\n", lc_err_name(r), lc_error_last());
  LC_CHECK(r == -EADDRINUSE);
  LC_CHECK(f == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "port 37004 is in use on lab7");
  LC_CHECK_CONTAINS(lc_error_last(), "a connection's local port");
  lc_forward_free(f);
  f = NULL;
  if (held[1] >= 0)
    close(held[1]);
  if (held[0] >= 0)
    close(held[0]);
  /* the refusals leave the connection usable: a free port works */
  LC_CHECK((f = fwd_new(&h, LC_FORWARD_REMOTE, 37003, 22, NULL)) != NULL);
  LC_CHECK(f != NULL && lc_forward_is_up(f));
  lc_forward_free(f);
  ep_free(l1);
  ep_free(l2);
  host_close(&h);
}

static void bad_input(host *h, lc_forward_kind kind, int port, const char *target, int tport,
                      const char *bind, const char *needle) {
  lc_forward_options o = LC_FORWARD_OPTIONS_INIT;
  lc_forward *f = (lc_forward *)&o; /* must come back NULL */
  int r;
  o.bind_address = bind;
  r = lc_forward_new(&f, h->rt, kind, port, target, tport, &o);
  fprintf(stderr, "  kind %d port %d target %s:%d bind %s: %s: %s\n", (int)kind, port,
          target ? target : "(null)", tport, bind ? bind : "(default)", lc_err_name(r),
          lc_error_last());
  LC_CHECK(r == -EINVAL);
  LC_CHECK(f == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), needle);
}

static void test_bad_input(void) {
  host h;
  LC_REQUIRE(host_lab(&h, 7) != NULL);
  bad_input(&h, LC_FORWARD_REMOTE, 0, "127.0.0.1", 22, NULL, "port 0");
  bad_input(&h, LC_FORWARD_REMOTE, 70000, "127.0.0.1", 22, NULL, "70000");
  bad_input(&h, LC_FORWARD_LOCAL, 70000, "127.0.0.1", 22, NULL, "70000");
  bad_input(&h, LC_FORWARD_LOCAL, -1, "127.0.0.1", 22, NULL, "-1");
  bad_input(&h, LC_FORWARD_LOCAL, 0, "127.0.0.1", 0, NULL, "target port 0");
  bad_input(&h, LC_FORWARD_REMOTE, 37010, "127.0.0.1", 0, NULL, "target port 0");
  bad_input(&h, LC_FORWARD_LOCAL, 0, "127.0.0.1", 65536, NULL, "65536");
  bad_input(&h, LC_FORWARD_LOCAL, 0, "127.0.0.1", 22, "0.0.0.0", "0.0.0.0");
  bad_input(&h, LC_FORWARD_REMOTE, 37011, "127.0.0.1", 22, "0.0.0.0", "0.0.0.0");
  bad_input(&h, LC_FORWARD_LOCAL, 0, "127.0.0.1", 22, "::", "loopback");
  bad_input(&h, LC_FORWARD_LOCAL, 0, "", 22, NULL, "target");
  bad_input(&h, LC_FORWARD_LOCAL, 0, NULL, 22, NULL, "target");
  bad_input(&h, (lc_forward_kind)3, 0, "127.0.0.1", 22, NULL, "kind");
  host_close(&h);
}

/* ---- 10: the host's sshd killed, then started again ----------------------------------------- */

typedef struct states {
  atomic_int up, down;
  pthread_mutex_t mu;
  char last[512];
} states;

static void on_state(lc_forward *f, lc_forward_state state, const char *detail, void *payload) {
  states *s = payload;
  (void)f;
  atomic_fetch_add(state == LC_FORWARD_UP ? &s->up : &s->down, 1);
  pthread_mutex_lock(&s->mu);
  snprintf(s->last, sizeof(s->last), "%s: %s", state == LC_FORWARD_UP ? "UP" : "DOWN", detail);
  pthread_mutex_unlock(&s->mu);
}

/* s's last state text, copied under its lock (the engine thread may be writing it). */
static void state_last(states *s, char *out, size_t n) {
  pthread_mutex_lock(&s->mu);
  snprintf(out, n, "%s", s->last);
  pthread_mutex_unlock(&s->mu);
}

/* Waits up to ms until both forwards are (up) or are not (!up) up and have said so. */
static int wait_state(lc_forward *a, states *sa, lc_forward *b, states *sb, int up, int ms) {
  uint64_t end = now_ms() + (uint64_t)ms, t0 = now_ms();
  while (now_ms() < end) {
    int ok = (lc_forward_is_up(a) != 0) == up && (lc_forward_is_up(b) != 0) == up &&
             atomic_load(up ? &sa->up : &sa->down) > 0 && atomic_load(up ? &sb->up : &sb->down) > 0;
    if (ok)
      return (int)(now_ms() - t0);
    usleep(50 * 1000);
  }
  return -1;
}

/* One echoed connection from h to address:port; 0 when it came back whole. */
static int one_check_at(host *h, const char *address, int port, int seed) {
  ep *cli = ep_start(h, "--timeout 30 connect %s %d check 100000 %d", address, port, seed);
  char line[256] = "";
  int r = ep_wait_line(cli, "check ", line, sizeof(line), 20000);
  ep_free(cli);
  if (r == 0 && strcmp(line, "check ok 100000") != 0) {
    fprintf(stderr, "  through %s port %d: %s\n", address, port, line);
    r = -1;
  }
  return r;
}

static int one_check(host *h, int port, int seed) {
  return one_check_at(h, "127.0.0.1", port, seed);
}

/* lab6's sshd killed (listener and sessions) with a -L and a -R forward up; started again. */
static void test_sshd_restart(void) {
  static states sl = {.mu = PTHREAD_MUTEX_INITIALIZER}, sr = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lc_forward_options ol = LC_FORWARD_OPTIONS_INIT, orr = LC_FORWARD_OPTIONS_INIT;
  host h = {0};
  ep *lsrv = NULL, *cli = NULL;
  lc_forward *fl = NULL, *fr = NULL;
  char cmd[8192], out[256], line[256] = "", last_l[512], last_r[512];
  int hport = 38001, rport = 38002, ltarget, killed, ms;
  FILE *f;

  snprintf(restore_sshd, sizeof(restore_sshd), "%s start-sshd 6 --dir %s", th_script(), th_dir());
  restore_hosts();                      /* a run that died midway may have left it stopped... */
  th_kill_procs(6, "tcptool", SIGKILL); /* ...and its echo server running */
  LC_REQUIRE(host_open(&h, "lab6", NULL, 3000) == 0);
  /* the -L target on the host, outside any SSH session so that it outlives them */
  snprintf(out, sizeof(out), "/tmp/lc-test-forward-echo6-%d.txt", (int)getpid());
  snprintf(cmd, sizeof(cmd),
           "%s exec 6 --dir %s -- '%s' --timeout 90 --conns 0 listen 127.0.0.1 %d echo >%s "
           "2>&1 </dev/null &",
           th_script(), th_dir(), h.tool, hport, out);
  if (system(cmd) != 0) { /* NOLINT(cert-env33-c): the testhosts script */
    lc_test_failed_now = 1;
    goto out;
  }
  for (int i = 0; i < 200 && strncmp(line, "port ", 5) != 0; i++) {
    usleep(100 * 1000);
    if ((f = fopen(out, "r")) != NULL) {
      if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
      fclose(f);
    }
  }
  unlink(out);
  LC_CHECK(strncmp(line, "port ", 5) == 0 && strtol(line + 5, NULL, 10) == hport);
  /* the -R target here */
  lsrv = ep_start(&local, "--timeout 90 --conns 0 listen 127.0.0.1 0 echo");
  ol.on_state = on_state;
  ol.payload = &sl;
  orr.on_state = on_state;
  orr.payload = &sr;
  if (lc_test_failed_now || lsrv == NULL || (ltarget = ep_port(lsrv)) < 0 ||
      (fl = fwd_new(&h, LC_FORWARD_LOCAL, 0, hport, &ol)) == NULL ||
      (fr = fwd_new(&h, LC_FORWARD_REMOTE, rport, ltarget, &orr)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  LC_CHECK(one_check(&local, lc_forward_port(fl), 1) == 0);
  LC_CHECK(one_check(&h, rport, 2) == 0);

  /* sshd goes: the listener, then the session processes (our connection's among them) */
  snprintf(restore_sshd, sizeof(restore_sshd), "%s start-sshd 6 --dir %s", th_script(), th_dir());
  LC_CHECK(th_run("stop-sshd 6") == 0);
  killed = th_kill_procs(6, "sshd", SIGKILL);
  fprintf(stderr, "  stopped lab6's sshd and killed %d sshd session processes\n", killed);
  LC_CHECK(killed > 0);
  ms = wait_state(fl, &sl, fr, &sr, 0, 20000);
  state_last(&sl, last_l, sizeof(last_l));
  state_last(&sr, last_r, sizeof(last_r));
  fprintf(stderr, "  down after %d ms: -L \"%s\"; -R \"%s\"\n", ms, last_l, last_r);
  LC_CHECK(ms >= 0);
  LC_CHECK(!lc_forward_is_up(fl) && !lc_forward_is_up(fr));
  LC_CHECK(strncmp(last_l, "DOWN", 4) == 0 && strncmp(last_r, "DOWN", 4) == 0);
  LC_CHECK_CONTAINS(last_l, "lab6");
  LC_CHECK_CONTAINS(last_r, "lab6");
  /* while down, the -L port still listens here and closes what comes in */
  cli = ep_start(&local, "--timeout 30 connect 127.0.0.1 %d hold", lc_forward_port(fl));
  LC_CHECK(ep_wait_line(cli, "closed ", line, sizeof(line), 15000) == 0);
  ep_free(cli);

  /* sshd comes back: so do the forwards, within the reconnect backoff */
  LC_CHECK(th_run("start-sshd 6") == 0);
  restore_sshd[0] = '\0';
  ms = wait_state(fl, &sl, fr, &sr, 1, 40000);
  state_last(&sl, last_l, sizeof(last_l));
  state_last(&sr, last_r, sizeof(last_r));
  fprintf(stderr, "  up again %d ms after sshd started: -L \"%s\"; -R \"%s\"\n", ms, last_l,
          last_r);
  LC_CHECK(ms >= 0);
  LC_CHECK(lc_forward_is_up(fl) && lc_forward_is_up(fr));
  LC_CHECK(one_check(&local, lc_forward_port(fl), 3) == 0);
  /* the working directory went with the lost connection (its keeper's lifeline removed it at
   * once): the tool goes there again before it serves the -R side */
  {
    char mk[4200];
    lc_exec_result res;
    snprintf(mk, sizeof(mk), "mkdir -p \"$(dirname '%s')\"", h.tool);
    LC_CHECK(lc_runtime_exec(&res, h.rt, mk, NULL) == 0 && res.exit_status == 0);
    LC_CHECK(lc_runtime_send_file(h.rt, LC_TCPTOOL, h.tool, 30000) == 0);
  }
  LC_CHECK(one_check(&h, rport, 4) == 0);
out:
  restore_hosts();
  lc_forward_free(fl);
  lc_forward_free(fr);
  ep_free(lsrv);
  host_close(&h);
  th_kill_procs(6, "tcptool", SIGKILL);
}

/* ---- 11: the local runtime ------------------------------------------------------------------ */

static void test_local_runtime(void) {
  ep *srv;
  lc_forward *f;
  int tport, q;
  /* -L */
  srv = ep_start(&local, "--timeout 60 --conns 0 listen 127.0.0.1 0 echo");
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  LC_REQUIRE((f = fwd_new(&local, LC_FORWARD_LOCAL, 0, tport, NULL)) != NULL);
  LC_CHECK(lc_forward_is_up(f));
  LC_CHECK(lc_forward_port(f) > 0 && lc_forward_port(f) != tport);
  LC_CHECK(one_check(&local, lc_forward_port(f), 7) == 0);
  lc_forward_free(f);
  /* -R: also a relay on this machine, on the port asked for */
  LC_REQUIRE((q = free_local_port()) > 0);
  LC_REQUIRE((f = fwd_new(&local, LC_FORWARD_REMOTE, q, tport, NULL)) != NULL);
  LC_CHECK(lc_forward_is_up(f));
  LC_CHECK(lc_forward_port(f) == q);
  LC_CHECK(one_check(&local, q, 8) == 0);
  lc_forward_free(f);
  ep_free(srv);
}

/* ---- listeners on loopback only, and on ::1 when asked ------------------------------------- */

/* A connection from h to address:port is refused. */
static int refused(host *h, const char *address, int port) {
  ep *cli = ep_start(h, "--timeout 30 connect %s %d hold", address, port);
  char line[256] = "";
  int r = ep_wait_line(cli, "connect-error ", line, sizeof(line), 15000);
  if (r == 0)
    fprintf(stderr, "  %s to %s port %d: %s\n", lc_runtime_name(h->rt), address, port, line);
  ep_free(cli);
  return r;
}

static void test_loopback_only(void) {
  lc_forward_options o6 = LC_FORWARD_OPTIONS_INIT;
  host h, other;
  ep *lsrv = NULL, *rsrv = NULL;
  lc_forward *fl = NULL, *fr = NULL, *fl6 = NULL, *fr6 = NULL;
  char bridge[64], *dot;
  int ltarget, rtarget;
  LC_REQUIRE(host_lab(&h, 1) != NULL);
  LC_REQUIRE(host_lab(&other, 2) != NULL);
  snprintf(bridge, sizeof(bridge), "%s", th_addr(1)); /* A.11: this machine is A.1 */
  LC_REQUIRE((dot = strrchr(bridge, '.')) != NULL);
  snprintf(dot, sizeof(bridge) - (size_t)(dot - bridge), ".1");
  lsrv = ep_start(&h, "--timeout 60 --conns 0 listen 127.0.0.1 0 echo");
  rsrv = ep_start(&local, "--timeout 60 --conns 0 listen 127.0.0.1 0 echo");
  o6.bind_address = "::1";
  if (lsrv == NULL || rsrv == NULL || (ltarget = ep_port(lsrv)) < 0 ||
      (rtarget = ep_port(rsrv)) < 0 ||
      (fl = fwd_new(&h, LC_FORWARD_LOCAL, 0, ltarget, NULL)) == NULL ||
      (fr = fwd_new(&h, LC_FORWARD_REMOTE, 40001, rtarget, NULL)) == NULL ||
      (fl6 = fwd_new(&h, LC_FORWARD_LOCAL, 0, ltarget, &o6)) == NULL ||
      (fr6 = fwd_new(&h, LC_FORWARD_REMOTE, 40002, rtarget, &o6)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  /* the -L port: not on this machine's bridge address (lab1 reaches it), but on 127.0.0.1 */
  LC_CHECK(refused(&h, bridge, lc_forward_port(fl)) == 0);
  LC_CHECK(one_check(&local, lc_forward_port(fl), 1) == 0);
  /* the -R port: not on lab1's own address (lab2 reaches it), but on lab1's 127.0.0.1 */
  LC_CHECK(refused(&other, th_addr(1), 40001) == 0);
  LC_CHECK(one_check(&h, 40001, 2) == 0);
  /* bound to ::1: reached there, not on 127.0.0.1 */
  LC_CHECK(one_check_at(&local, "::1", lc_forward_port(fl6), 3) == 0);
  LC_CHECK(refused(&local, "127.0.0.1", lc_forward_port(fl6)) == 0);
  LC_CHECK(one_check_at(&h, "::1", 40002, 4) == 0);
  LC_CHECK(refused(&h, "127.0.0.1", 40002) == 0);
out:
  lc_forward_free(fl);
  lc_forward_free(fr);
  lc_forward_free(fl6);
  lc_forward_free(fr6);
  ep_free(lsrv);
  ep_free(rsrv);
  host_close(&other);
  host_close(&h);
}

/* ---- 12: lc_forward_free with connections open ---------------------------------------------- */

/* A connection held open through f; after lc_forward_free both its ends see it close. */
static void free_with_open(host *h, lc_forward_kind kind, int rport) {
  int ssh = h != &local;
  host *shost = kind == LC_FORWARD_LOCAL ? h : &local,
       *chost = kind == LC_FORWARD_LOCAL || !ssh ? &local : h;
  ep *srv = NULL, *cli = NULL;
  lc_forward *f = NULL;
  char line[256];
  int tport, port;
  srv = ep_start(shost, "--timeout 60 listen 127.0.0.1 0 echo");
  LC_REQUIRE(srv != NULL && (tport = ep_port(srv)) > 0);
  if ((f = fwd_new(h, kind, kind == LC_FORWARD_LOCAL ? 0 : rport, tport, NULL)) == NULL) {
    lc_test_failed_now = 1;
    goto out;
  }
  port = lc_forward_port(f);
  cli = ep_start(chost, "--timeout 60 connect 127.0.0.1 %d hold", port);
  if (ep_wait_line(cli, "ready", NULL, 0, 20000) < 0) {
    lc_test_failed_now = 1;
    goto out;
  }
  lc_forward_free(f);
  f = NULL;
  if (ep_wait_line(cli, "closed ", line, sizeof(line), 10000) == 0)
    fprintf(stderr, "  %s on %s, freed: the client saw \"%s\"\n",
            kind == LC_FORWARD_LOCAL ? "-L" : "-R", lc_runtime_name(h->rt), line);
  else
    lc_test_failed_now = 1;
  /* the target's side of the connection ended too */
  LC_CHECK(ep_wait_line(srv, "echoed ", line, sizeof(line), 10000) == 0);
  LC_CHECK(ep_end(cli, 10000) == 0);
  LC_CHECK(ep_end(srv, 10000) == 0);
  /* and nothing listens on the forward's port any more */
  ep_free(cli);
  cli = ep_start(chost, "--timeout 30 connect 127.0.0.1 %d hold", port);
  LC_CHECK(ep_wait_line(cli, "connect-error ", line, sizeof(line), 10000) == 0);
out:
  ep_free(cli);
  ep_free(srv);
  lc_forward_free(f);
}

static void test_free_closes_connections(void) {
  host h;
  LC_REQUIRE(host_lab(&h, 5) != NULL);
  free_with_open(&h, LC_FORWARD_LOCAL, 0);
  free_with_open(&h, LC_FORWARD_REMOTE, 39001);
  host_close(&h);
  free_with_open(&local, LC_FORWARD_LOCAL, 0);
  free_with_open(&local, LC_FORWARD_REMOTE, free_local_port());
}

/* ---- setup ---------------------------------------------------------------------------------- */

static void setup(void) {
  signal(SIGPIPE, SIG_IGN);
  th_dir(); /* exits when there are no test hosts */
  if (lc_engine_new(&engine, NULL) < 0 || lc_runtime_new_local(&local.rt, engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    exit(2);
  }
  snprintf(local.tool, sizeof(local.tool), "%s", LC_TCPTOOL);
#ifdef ASAN
  __sanitizer_set_death_callback(restore_hosts);
#endif
}

static void teardown(void) {
  lc_runtime_free(local.rt);
  lc_engine_free(engine);
}

static const lc_test_case tests[] = {
    LC_TEST(test_bad_input),
    LC_TEST(test_port_in_use),
    LC_TEST(test_local_runtime),
    LC_TEST(test_closed_port),
    LC_TEST(test_half_close),
    LC_TEST(test_request_reply),
    LC_TEST(test_200_connections),
    LC_TEST(test_50_forwards),
    LC_TEST(test_slow_reader),
    LC_TEST(test_loopback_only),
    LC_TEST(test_free_closes_connections),
    LC_TEST(test_forwarding_disabled),
    LC_TEST(test_sshd_restart),
    LC_TEST(test_integrity_1gib),
};

int main(int argc, char **argv) {
  int r;
  setup();
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  teardown();
  return r;
}
