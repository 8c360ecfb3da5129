/*
 * tunnel.c - the tunnel benchmark: our -L and -R against OpenSSH's `ssh -N -L`/`-R` to the same
 * test host, with direct TCP as the ceiling. Prints one Markdown table (docs/benchmarks.md).
 *
 *   tunnel --dir DIR --testhosts PATH --tcpbench PATH --ctl PATH [--host N] [--mib M]
 *          [--runs R] [--conns C] [--idle I] [--busy K] [--busy-seconds S] [--ssh PATH]
 *          [--cipher NAME]
 *
 * DIR holds test hosts made by tests/support/testhosts (tests/bench/run_tunnel.sh makes them).
 * What is measured:
 *  - throughput: M MiB through one connection, each way, through -L and -R; ours and OpenSSH's
 *    in the same run, alternating which goes first, R runs, median (min-max);
 *  - connections per second through one forward: C times open, send a byte, read a byte, close;
 *  - resident memory per idle forward: RSS of a process holding 1 + I forwards minus one holding
 *    1 (medians of 3 each), divided by I;
 *  - resident memory per busy connection: K connections streaming through one forward (half
 *    each way), peak RSS minus RSS before, divided by K; a fresh process each time.
 * Ours is `lazyclusterctl forward` (--ctl), theirs `ssh -N`: two processes doing the same job, so
 * their RSS compare directly. The data's other end is tests/bench/tcpbench (on this machine, or
 * in the host through `testhosts exec`), and every client is a process of its own.
 * Both read one ssh config: DIR/ssh_config after a line "Ciphers NAME" (default
 * aes128-gcm@openssh.com, the cipher our SSH backend puts first), written to DIR/bench_config; the
 * driver script checks in sshd's log that both sides negotiated it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 2600
#define MAX_RUNS 64

typedef enum impl { OURS = 0, THEIRS = 1, DIRECT = 2 } impl;

static const char *const who_name[] = {"ours", "OpenSSH", "direct"};

/* A process holding forwards: lazyclusterctl forward, or ssh -N. Its output stays open. */
typedef struct fwd_proc {
  pid_t pid;
  int fd;
} fwd_proc;

typedef struct bench {
  const char *dir, *testhosts, *tcpbench, *ctl, *ssh, *cipher;
  char config[4096];
  int host;
  char alias[16], addr[64];
  unsigned long long bytes;
  int runs, idle, busy;
  long conns;
  double busy_seconds;

  int port_host, port_here; /* tcpbench serve: in the host (all addresses) and here (127.0.0.1) */
  int port_l[2], port_r[2]; /* the forwards measured: [OURS], [THEIRS] */
  fwd_proc proc[2];
} bench;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static pid_t children[64];

static void kill_children(void) {
  for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++)
    if (children[i] > 0) {
      kill(children[i], SIGTERM);
      waitpid(children[i], NULL, 0);
      children[i] = 0;
    }
}

static void die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "tunnel: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  kill_children();
  exit(1);
}

static void keep_child(pid_t pid) {
  for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++)
    if (children[i] == 0) {
      children[i] = pid;
      return;
    }
  die("too many children");
}

static void stop_child(pid_t pid) {
  for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++)
    if (children[i] == pid)
      children[i] = 0;
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- processes ------------------------------------------------------------------------------ */

/* Starts argv with stdin /dev/null and stdout (and stderr when merge) into *out_fd (if given). */
static pid_t spawn(char *const *argv, int *out_fd, int merge) {
  int fds[2] = {-1, -1};
  pid_t pid;
  if (out_fd != NULL && pipe2(fds, O_CLOEXEC) < 0)
    die("pipe: %s", strerror(errno));
  if ((pid = fork()) < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    dup2(devnull, 0);
    if (out_fd != NULL) {
      dup2(fds[1], 1);
      if (merge)
        dup2(fds[1], 2);
    } else {
      dup2(devnull, 1);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "tunnel: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  if (out_fd != NULL) {
    close(fds[1]);
    *out_fd = fds[0];
  }
  return pid;
}

/* Reads from fd until buf holds needle, EOF or timeout (buf keeps the latest output); returns
 * whether needle came. */
static int read_until(int fd, char *buf, size_t size, const char *needle, double timeout_s) {
  size_t len = strlen(buf);
  double end = now_s() + timeout_s;
  while (strstr(buf, needle) == NULL) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;
    double left = end - now_s();
    if (left <= 0)
      return 0;
    if (len + 1 >= size) { /* keep the later half: the needle comes last */
      memmove(buf, buf + len - size / 2, size / 2);
      len = size / 2;
      buf[len] = '\0';
    }
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
      continue;
    if ((n = read(fd, buf + len, size - 1 - len)) <= 0)
      return strstr(buf, needle) != NULL;
    len += (size_t)n;
    buf[len] = '\0';
  }
  return 1;
}

/* Runs argv to its end with stdout (and stderr when merge) in out; returns its exit status. */
static int run_capture(char *const *argv, char *out, size_t size, int merge) {
  int fd, st;
  pid_t pid;
  out[0] = '\0';
  pid = spawn(argv, &fd, merge);
  read_until(fd, out, size, "\x01\x02", 1e9);
  close(fd);
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* argv for tcpbench ARGS..., here or inside the test host. */
static int tool_argv(const bench *b, char **argv, int in_host, char *const *args) {
  static char host_index[16];
  int n = 0;
  if (in_host) {
    snprintf(host_index, sizeof(host_index), "%d", b->host);
    argv[n++] = (char *)b->testhosts;
    argv[n++] = "exec";
    argv[n++] = host_index;
    argv[n++] = "--dir";
    argv[n++] = (char *)b->dir;
    argv[n++] = "--";
  }
  argv[n++] = (char *)b->tcpbench;
  for (int i = 0; args[i] != NULL; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  return n;
}

/*
 * Runs a tcpbench client; returns its "COUNT SECONDS" as a rate (count per second), or -1 when it
 * failed. *failed (if given) adds the connections that got no answer.
 */
static double tool_rate(const bench *b, const char *what, int in_host, char *const *args,
                        long *failed) {
  char *argv[32], out[4096], *line;
  unsigned long long count = 0;
  double secs = 0;
  long nfailed = 0;
  int st;
  tool_argv(b, argv, in_host, args);
  st = run_capture(argv, out, sizeof(out), 1);
  /* stdout's line is the last one; a warning on stderr may come before it */
  line = out + strlen(out);
  while (line > out && (line[-1] == '\n'))
    line--;
  while (line > out && line[-1] != '\n')
    line--;
  if (st != 0 || sscanf(line, "%llu %lf %ld", &count, &secs, &nfailed) < 2 || secs <= 0) {
    fprintf(stderr, "tunnel: %s: tcpbench %s %s %s %s%s failed (exit %d): %s", what, args[0],
            args[1], args[2], args[3], in_host ? " (in the host)" : "", st, out);
    return -1;
  }
  if (failed != NULL)
    *failed += nfailed;
  return (double)count / secs;
}

/* Waits until HOST:PORT accepts connections, here or in the host. */
static void tool_wait(const bench *b, int in_host, const char *host, int port) {
  char p[16], *args[] = {"wait", (char *)host, p, "20", NULL}, *argv[32], out[4096];
  snprintf(p, sizeof(p), "%d", port);
  tool_argv(b, argv, in_host, args);
  if (run_capture(argv, out, sizeof(out), 1) != 0)
    die("%s port %d never listened%s: %s", host, port, in_host ? " in the host" : "", out);
}

/* Starts `tcpbench serve ADDRESS PORT` and waits until it listens. */
static pid_t tool_serve(const bench *b, int in_host, const char *addr, int port) {
  char p[16], *args[] = {"serve", (char *)addr, p, NULL}, *argv[32], out[4096] = "";
  int fd;
  pid_t pid;
  snprintf(p, sizeof(p), "%d", port);
  tool_argv(b, argv, in_host, args);
  pid = spawn(argv, &fd, 1);
  keep_child(pid);
  if (!read_until(fd, out, sizeof(out), "listening", 20))
    die("tcpbench serve %s %d%s did not start: %s", addr, port, in_host ? " (in the host)" : "",
        out);
  close(fd);
  return pid;
}

/* ---- measurements --------------------------------------------------------------------------- */

/* Resident memory of a process in KiB (VmRSS). */
static long rss_kib(pid_t pid) {
  char path[64], line[256];
  long kib = -1;
  FILE *f;
  if (pid > 0)
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  else
    snprintf(path, sizeof(path), "/proc/self/status");
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  fclose(f);
  return kib;
}

/* A port free on this machine's loopback, never handed out twice by this process. */
static int next_port(void) {
  static int used[4096], nused;
  for (int tries = 0; tries < 100; tries++) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0, dup = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
      port = ntohs(sa.sin_port);
    if (fd >= 0)
      close(fd);
    for (int i = 0; i < nused; i++)
      dup |= used[i] == port;
    if (port > 0 && !dup && nused < 4096) {
      used[nused++] = port;
      return port;
    }
  }
  die("no free port");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct stat3 {
  double med, min, max;
} stat3;

static stat3 summarize(const double *v, int n) {
  double s[MAX_RUNS];
  stat3 r = {0, 0, 0};
  if (n <= 0)
    return r;
  memcpy(s, v, (size_t)n * sizeof(double));
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  r.min = s[0];
  r.max = s[n - 1];
  r.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return r;
}

/* ---- the processes holding forwards --------------------------------------------------------- */

/*
 * Starts ours (`lazyclusterctl forward`) or theirs (`ssh -N`) to the host with the given forward
 * options ("-L", "SPEC", ...) and waits until every forward listens.
 */
static fwd_proc fwd_start(const bench *b, impl who, char *const *fwd_args, int nfwd_args) {
  char **argv = calloc(MAX_ARGS, sizeof(char *)), out[8192] = "";
  const char *ready;
  int n = 0;
  fwd_proc p;
  if (argv == NULL || nfwd_args > MAX_ARGS - 20)
    die("too many forwards");
  if (who == OURS) {
    argv[n++] = (char *)b->ctl;
    argv[n++] = "forward";
    argv[n++] = (char *)b->alias;
    argv[n++] = "-F";
    argv[n++] = (char *)b->config;
    ready = "Ctrl-C or SIGTERM stops";
  } else {
    argv[n++] = (char *)b->ssh;
    argv[n++] = "-F";
    argv[n++] = (char *)b->config;
    argv[n++] = "-N";
    argv[n++] = "-o";
    argv[n++] = "ExitOnForwardFailure=yes";
    argv[n++] = "-o";
    argv[n++] = "BatchMode=yes";
    argv[n++] = "-o";
    argv[n++] = "PermitLocalCommand=yes";
    argv[n++] = "-o";
    argv[n++] = "LocalCommand=echo lc-bench-ready"; /* runs once logged in */
    ready = "lc-bench-ready";
  }
  for (int i = 0; i < nfwd_args; i++)
    argv[n++] = fwd_args[i];
  if (who == THEIRS)
    argv[n++] = (char *)b->alias;
  argv[n] = NULL;
  p.pid = spawn(argv, &p.fd, 1);
  keep_child(p.pid);
  free(argv);
  if (!read_until(p.fd, out, sizeof(out), ready, 30))
    die("%s to %s did not come up: %s", who == OURS ? "lazyclusterctl forward" : "ssh -N", b->alias,
        out);
  /* ssh answers before its forwards listen; the last of each kind listening means all do */
  for (int kind = 0; who == THEIRS && kind < 2; kind++)
    for (int i = nfwd_args - 2; i >= 0; i -= 2)
      if (strcmp(fwd_args[i], kind ? "-R" : "-L") == 0) {
        tool_wait(b, kind, "127.0.0.1",
                  (int)strtol(fwd_args[i + 1] + strlen("127.0.0.1:"), NULL, 10));
        break;
      }
  usleep(300000); /* settled before anyone reads its RSS */
  return p;
}

static void fwd_stop(fwd_proc *p) {
  if (p->pid > 0)
    stop_child(p->pid);
  if (p->fd >= 0)
    close(p->fd);
  p->pid = 0;
  p->fd = -1;
}

/* "-L" "127.0.0.1:PORT:127.0.0.1:TPORT" into args[0..1] (spec holds the text). */
static void fwd_arg(char **args, char (*spec)[64], const char *flag, int port, int tport) {
  snprintf(*spec, sizeof(*spec), "127.0.0.1:%d:127.0.0.1:%d", port, tport);
  args[0] = (char *)flag;
  args[1] = *spec;
}

/* ---- the phases ----------------------------------------------------------------------------- */

typedef struct mem_result {
  double idle[2][2]; /* KiB per idle forward, [remote][OURS or THEIRS] */
  double busy[2][2]; /* KiB per busy connection */
} mem_result;

/* RSS per idle forward: a process with 1 + idle forwards against one with 1. */
static double measure_idle(bench *b, impl who, int remote) {
  char **args = calloc((size_t)b->idle * 2 + 2, sizeof(char *));
  char(*specs)[64] = calloc((size_t)b->idle + 1, sizeof(*specs));
  const char *flag = remote ? "-R" : "-L";
  int tport = remote ? b->port_here : b->port_host;
  double base[3], full[3];
  fwd_proc p;
  if (args == NULL || specs == NULL)
    die("out of memory");
  for (int i = 0; i <= b->idle; i++)
    fwd_arg(&args[2 * (size_t)i], &specs[i], flag, next_port(), tport);
  for (int rep = 0; rep < 3; rep++) { /* a process's RSS varies by a few pages: median of 3 */
    p = fwd_start(b, who, args, 2);
    base[rep] = (double)rss_kib(p.pid);
    fwd_stop(&p);
    p = fwd_start(b, who, args, 2 * (b->idle + 1));
    full[rep] = (double)rss_kib(p.pid);
    fwd_stop(&p);
  }
  free(args);
  free(specs);
  return (summarize(full, 3).med - summarize(base, 3).med) / b->idle;
}

/*
 * busy clients streaming through one forward of a fresh process for busy_seconds, half each way;
 * the peak RSS above the level before, per connection.
 */
static double measure_busy(bench *b, impl who, int remote) {
  pid_t *cl = calloc((size_t)b->busy, sizeof(pid_t));
  char p[16], secs[32], spec[64], *args[2];
  int port = next_port();
  long base, peak = 0;
  fwd_proc fp;
  double t0;
  if (cl == NULL)
    die("out of memory");
  fwd_arg(args, &spec, remote ? "-R" : "-L", port, remote ? b->port_here : b->port_host);
  fp = fwd_start(b, who, args, 2);
  snprintf(p, sizeof(p), "%d", port);
  snprintf(secs, sizeof(secs), "%.1f", b->busy_seconds);
  base = rss_kib(fp.pid);
  for (int i = 0; i < b->busy; i++) {
    char *targs[] = {i % 2 ? "down" : "up", "127.0.0.1", p, "1000000000000000", secs, NULL};
    char *argv[32];
    tool_argv(b, argv, remote, targs);
    cl[i] = spawn(argv, NULL, 0);
  }
  t0 = now_s();
  while (now_s() - t0 < b->busy_seconds - 0.3) {
    long r = rss_kib(fp.pid);
    if (r > peak)
      peak = r;
    usleep(50000);
  }
  for (int i = 0; i < b->busy; i++) {
    int st;
    waitpid(cl[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      die("a busy client through port %d failed", port);
  }
  fwd_stop(&fp);
  free(cl);
  return (double)(peak - base) / b->busy;
}

/* The servers, then ours and theirs, each with one -L and one -R, for the rate measurements. */
static void setup(bench *b) {
  b->port_host = next_port();
  b->port_here = next_port();
  tool_serve(b, 1, "0.0.0.0", b->port_host);
  tool_serve(b, 0, "127.0.0.1", b->port_here);
}

static void start_forwards(bench *b) {
  char *args[4], specs[2][64];
  for (int who = OURS; who <= THEIRS; who++) {
    b->port_l[who] = next_port();
    b->port_r[who] = next_port();
    fwd_arg(args, &specs[0], "-L", b->port_l[who], b->port_host);
    fwd_arg(args + 2, &specs[1], "-R", b->port_r[who], b->port_here);
    b->proc[who] = fwd_start(b, (impl)who, args, 4);
  }
}

typedef struct tp_case {
  const char *label;
  int remote;  /* through -R (clients in the host) */
  int to_host; /* data flows from this machine to the host */
} tp_case;

static const tp_case tp_cases[] = {
    {"-L, this machine → host", 0, 1},
    {"-L, host → this machine", 0, 0},
    {"-R, host → this machine", 1, 0},
    {"-R, this machine → host", 1, 1},
};
#define NCASES (int)(sizeof(tp_cases) / sizeof(tp_cases[0]))

static long failed_transfers[3]; /* transfers that failed and were tried again */

/* CPU time (user + system) a process has used so far, in seconds; -1 if unknown. */
static double cpu_s(pid_t pid) {
  char path[64], text[1024], *p;
  unsigned long utime = 0, stime = 0;
  FILE *f;
  size_t n;
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  /* after "pid (comm) ": state is field 3, utime and stime fields 14 and 15 */
  if ((p = strrchr(text, ')')) == NULL ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
    return -1;
  return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/*
 * One transfer, tried up to 3 times; MB/s (10^6 bytes). *cpu_per_gib gets the CPU seconds the
 * forwarding process spent per GiB moved.
 */
static double transfer(bench *b, const tp_case *c, impl who, double *cpu_per_gib) {
  char p[16], n[32], *host = "127.0.0.1";
  /* the client writes for up, reads for down; seen from the client */
  int client_sends = c->remote ? !c->to_host : c->to_host;
  int in_host = who != DIRECT && c->remote;
  if (who == DIRECT) {
    host = b->addr;
    snprintf(p, sizeof(p), "%d", b->port_host);
  } else {
    snprintf(p, sizeof(p), "%d", c->remote ? b->port_r[who] : b->port_l[who]);
  }
  snprintf(n, sizeof(n), "%llu", b->bytes);
  for (int attempt = 0; attempt < 3; attempt++) {
    char *args[] = {client_sends ? "up" : "down", host, p, n, NULL};
    double c0 = who != DIRECT ? cpu_s(b->proc[who].pid) : 0;
    double rate = tool_rate(b, who_name[who], in_host, args, NULL);
    if (rate > 0) {
      if (cpu_per_gib != NULL)
        *cpu_per_gib = (cpu_s(b->proc[who].pid) - c0) / ((double)b->bytes / (1 << 30));
      return rate / 1e6;
    }
    failed_transfers[who]++;
  }
  die("%s: %s failed 3 times", who_name[who], c->label);
}

/*
 * C connections through a forward (or straight to the host); connections answered per second.
 * failed[who] counts those that got no answer.
 */
static double conn_rate(bench *b, int remote, impl who, long *failed) {
  char p[16], n[32], *host = "127.0.0.1";
  if (who == DIRECT) {
    host = b->addr;
    snprintf(p, sizeof(p), "%d", b->port_host);
  } else {
    snprintf(p, sizeof(p), "%d", remote ? b->port_r[who] : b->port_l[who]);
  }
  snprintf(n, sizeof(n), "%ld", b->conns);
  {
    char *args[] = {"ping", host, p, n, NULL};
    double rate = tool_rate(b, who_name[who], who != DIRECT && remote, args, &failed[who]);
    if (rate < 0)
      die("%s: connections through %s failed", who_name[who], remote ? "-R" : "-L");
    return rate;
  }
}

/* ---- report --------------------------------------------------------------------------------- */

static void cpu_model(char *out, size_t size) {
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  snprintf(out, size, "unknown");
  if (f == NULL)
    return;
  while (fgets(line, sizeof(line), f) != NULL) {
    char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
      snprintf(out, size, "%s", colon + 2);
      out[strcspn(out, "\n")] = '\0';
      break;
    }
  }
  fclose(f);
}

/* The 1-minute load average, as /proc/loadavg writes it. */
static void loadavg(char *out, size_t size) {
  FILE *f = fopen("/proc/loadavg", "r");
  if (f == NULL || fgets(out, (int)size, f) == NULL)
    snprintf(out, size, "?");
  if (f != NULL)
    fclose(f);
  out[strcspn(out, " \n")] = '\0';
}

static const char *fmt_stat(char *buf, size_t size, stat3 s, int digits) {
  snprintf(buf, size, "%.*f (%.*f–%.*f)", digits, s.med, digits, s.min, digits, s.max);
  return buf;
}

static void print_machine(const bench *b, const char *load_before) {
  char cpu[256], sshv[256], ctlv[256], load[64], date[64];
  char *sshargv[] = {(char *)b->ssh, "-V", NULL}, *ctlargv[] = {(char *)b->ctl, "--version", NULL};
  struct utsname u;
  time_t t = time(NULL);
  cpu_model(cpu, sizeof(cpu));
  run_capture(sshargv, sshv, sizeof(sshv), 1);
  sshv[strcspn(sshv, ",\n")] = '\0';
  run_capture(ctlargv, ctlv, sizeof(ctlv), 1);
  ctlv[strcspn(ctlv, "\n")] = '\0';
  uname(&u);
  loadavg(load, sizeof(load));
  strftime(date, sizeof(date), "%Y-%m-%d %H:%M %Z", localtime(&t));
  printf("- date: %s\n", date);
  printf("- machine: %ld CPUs (nproc), %s, Linux %s (%s)\n", sysconf(_SC_NPROCESSORS_ONLN), cpu,
         u.release, u.machine);
  printf("- ours: `%s forward`, %s; theirs: `ssh -N` and sshd, %s\n", "lazyclusterctl", ctlv, sshv);
  printf("- cipher %s both ways in both; host %s (%s) is a network namespace on this machine "
         "behind a veth pair and a bridge, so all processes share the CPUs above\n",
         b->cipher, b->alias, b->addr);
  printf("- load average (1 min) before / after: %s / %s\n", load_before, load);
  printf("- %llu MiB per transfer, %d runs (median, min–max), %ld connections per rate run, "
         "%d idle forwards, %d busy connections for %.1f s\n\n",
         b->bytes >> 20, b->runs, b->conns, b->idle, b->busy, b->busy_seconds);
}

/* b->config: DIR/ssh_config after "Ciphers NAME", so that ours and ssh read the same cipher. */
static void write_config(bench *b) {
  char base[4200], chunk[4096];
  FILE *in, *out;
  size_t n;
  snprintf(base, sizeof(base), "%s/ssh_config", b->dir);
  snprintf(b->config, sizeof(b->config), "%s/bench_config", b->dir);
  if ((in = fopen(base, "r")) == NULL || (out = fopen(b->config, "w")) == NULL)
    die("cannot copy %s to %s", base, b->config);
  fprintf(out, "Ciphers %s\n", b->cipher);
  while ((n = fread(chunk, 1, sizeof(chunk), in)) > 0)
    if (fwrite(chunk, 1, n, out) != n)
      die("cannot write %s", b->config);
  fclose(in);
  if (fclose(out) != 0)
    die("cannot write %s", b->config);
}

static void usage(void) {
  fprintf(stderr, "usage: tunnel --dir DIR --testhosts PATH --tcpbench PATH --ctl PATH [--host N]\n"
                  "              [--mib M] [--runs R] [--conns C] [--idle I] [--busy K]\n"
                  "              [--busy-seconds S] [--ssh PATH] [--cipher NAME]\n");
  exit(2);
}

static double number(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || v < 0)
    usage();
  return v;
}

int main(int argc, char **argv) {
  bench b = {.host = 0,
             .bytes = 512ull << 20,
             .runs = 5,
             .conns = 1000,
             .idle = 100,
             .busy = 16,
             .busy_seconds = 4,
             .ssh = "ssh",
             .cipher = "aes128-gcm@openssh.com"};
  static double tp[NCASES][2][MAX_RUNS], cpu[NCASES][2][MAX_RUNS], direct[2][MAX_RUNS],
      cps[2][2][MAX_RUNS], cps_direct[MAX_RUNS];
  mem_result mem;
  long failed[2][3] = {{0}}; /* [remote][who]: connections without an answer */
  char load_before[64], buf[3][96];
  FILE *f;
  char name[64], addr[64], ns[128], path[4200];

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--dir") == 0)
      b.dir = v;
    else if (strcmp(a, "--testhosts") == 0)
      b.testhosts = v;
    else if (strcmp(a, "--tcpbench") == 0)
      b.tcpbench = v;
    else if (strcmp(a, "--ctl") == 0)
      b.ctl = v;
    else if (strcmp(a, "--ssh") == 0)
      b.ssh = v;
    else if (strcmp(a, "--cipher") == 0)
      b.cipher = v;
    else if (strcmp(a, "--host") == 0)
      b.host = (int)number(v);
    else if (strcmp(a, "--mib") == 0)
      b.bytes = (unsigned long long)number(v) << 20;
    else if (strcmp(a, "--runs") == 0)
      b.runs = (int)number(v);
    else if (strcmp(a, "--conns") == 0)
      b.conns = (long)number(v);
    else if (strcmp(a, "--idle") == 0)
      b.idle = (int)number(v);
    else if (strcmp(a, "--busy") == 0)
      b.busy = (int)number(v);
    else if (strcmp(a, "--busy-seconds") == 0)
      b.busy_seconds = number(v);
    else
      usage();
  }
  if (b.dir == NULL || b.testhosts == NULL || b.tcpbench == NULL || b.ctl == NULL || b.runs < 1 ||
      b.runs > MAX_RUNS || b.bytes == 0 || b.conns < 1 || b.idle < 1 || b.idle > 1000 ||
      b.busy < 2 || b.busy_seconds < 1)
    usage();
  signal(SIGPIPE, SIG_IGN);
  write_config(&b);
  snprintf(b.alias, sizeof(b.alias), "lab%d", b.host);
  snprintf(path, sizeof(path), "%s/hosts.txt", b.dir);
  if ((f = fopen(path, "r")) == NULL)
    die("no test hosts in %s (run tests/support/testhosts up 2 --dir %s)", b.dir, b.dir);
  while (fscanf(f, "%63s %63s %127s", name, addr, ns) == 3)
    if (strcmp(name, b.alias) == 0)
      snprintf(b.addr, sizeof(b.addr), "%s", addr);
  fclose(f);
  if (b.addr[0] == '\0')
    die("%s is not in %s", b.alias, path);
  loadavg(load_before, sizeof(load_before));

  setup(&b);
  fprintf(stderr, "tunnel: memory per idle forward (%d of each kind)\n", b.idle);
  for (int remote = 0; remote < 2; remote++)
    for (int who = OURS; who <= THEIRS; who++)
      mem.idle[remote][who] = measure_idle(&b, (impl)who, remote);
  fprintf(stderr, "tunnel: memory per busy connection (%d)\n", b.busy);
  for (int remote = 0; remote < 2; remote++)
    for (int who = OURS; who <= THEIRS; who++)
      mem.busy[remote][who] = measure_busy(&b, (impl)who, remote);

  start_forwards(&b);
  for (int run = 0; run < b.runs; run++) {
    impl first = run % 2 ? THEIRS : OURS, second = run % 2 ? OURS : THEIRS;
    fprintf(stderr, "tunnel: throughput run %d of %d\n", run + 1, b.runs);
    direct[0][run] = transfer(&b, &tp_cases[0], DIRECT, NULL);
    direct[1][run] = transfer(&b, &tp_cases[1], DIRECT, NULL);
    for (int c = 0; c < NCASES; c++) {
      tp[c][first][run] = transfer(&b, &tp_cases[c], first, &cpu[c][first][run]);
      tp[c][second][run] = transfer(&b, &tp_cases[c], second, &cpu[c][second][run]);
      fprintf(stderr, "  %-26s ours %6.0f  OpenSSH %6.0f MB/s\n", tp_cases[c].label,
              tp[c][OURS][run], tp[c][THEIRS][run]);
    }
  }
  for (int run = 0; run < b.runs; run++) {
    impl first = run % 2 ? THEIRS : OURS, second = run % 2 ? OURS : THEIRS;
    fprintf(stderr, "tunnel: connection rate run %d of %d\n", run + 1, b.runs);
    cps_direct[run] = conn_rate(&b, 0, DIRECT, failed[0]);
    for (int remote = 0; remote < 2; remote++) {
      cps[remote][first][run] = conn_rate(&b, remote, first, failed[remote]);
      cps[remote][second][run] = conn_rate(&b, remote, second, failed[remote]);
      fprintf(stderr, "  through %s ours %6.0f  OpenSSH %6.0f connections/s\n",
              remote ? "-R" : "-L", cps[remote][OURS][run], cps[remote][THEIRS][run]);
    }
  }
  fwd_stop(&b.proc[OURS]);
  fwd_stop(&b.proc[THEIRS]);

  print_machine(&b, load_before);
  printf("| | ours (lazycluster) | OpenSSH `ssh -N` | direct TCP | ours / OpenSSH |\n");
  printf("|---|---|---|---|---|\n");
  for (int c = 0; c < NCASES; c++) {
    stat3 o = summarize(tp[c][OURS], b.runs), t = summarize(tp[c][THEIRS], b.runs),
          d = summarize(direct[tp_cases[c].to_host ? 0 : 1], b.runs);
    printf("| throughput %s, MB/s | %s | %s | %s | %.2f |\n", tp_cases[c].label,
           fmt_stat(buf[0], sizeof(buf[0]), o, 0), fmt_stat(buf[1], sizeof(buf[1]), t, 0),
           fmt_stat(buf[2], sizeof(buf[2]), d, 0), t.med > 0 ? o.med / t.med : 0);
  }
  for (int c = 0; c < NCASES; c++) {
    stat3 o = summarize(cpu[c][OURS], b.runs), t = summarize(cpu[c][THEIRS], b.runs);
    printf("| CPU s per GiB of the forwarding process, %s | %s | %s | – | %.2f |\n",
           tp_cases[c].label, fmt_stat(buf[0], sizeof(buf[0]), o, 2),
           fmt_stat(buf[1], sizeof(buf[1]), t, 2), t.med > 0 ? o.med / t.med : 0);
  }
  for (int remote = 0; remote < 2; remote++) {
    stat3 o = summarize(cps[remote][OURS], b.runs), t = summarize(cps[remote][THEIRS], b.runs),
          d = summarize(cps_direct, b.runs);
    printf("| connections/s through %s | %s | %s | %s | %.2f |\n", remote ? "-R" : "-L",
           fmt_stat(buf[0], sizeof(buf[0]), o, 0), fmt_stat(buf[1], sizeof(buf[1]), t, 0),
           fmt_stat(buf[2], sizeof(buf[2]), d, 0), t.med > 0 ? o.med / t.med : 0);
  }
  for (int remote = 0; remote < 2; remote++)
    printf("| connections through %s that got no answer, of %ld | %ld | %ld | %s | |\n",
           remote ? "-R" : "-L", b.conns * b.runs, failed[remote][OURS], failed[remote][THEIRS],
           remote ? "–" : (snprintf(buf[0], sizeof(buf[0]), "%ld", failed[0][DIRECT]), buf[0]));
  printf("| transfers that failed and were repeated, of %d | %ld | %ld | %ld | |\n",
         b.runs * NCASES, failed_transfers[OURS], failed_transfers[THEIRS],
         failed_transfers[DIRECT]);
  for (int remote = 0; remote < 2; remote++)
    printf("| memory per idle %s forward, KiB | %.1f | %.1f | – | |\n", remote ? "-R" : "-L",
           mem.idle[remote][OURS], mem.idle[remote][THEIRS]);
  for (int remote = 0; remote < 2; remote++)
    printf("| memory per busy connection through %s, KiB | %.0f | %.0f | – | |\n",
           remote ? "-R" : "-L", mem.busy[remote][OURS], mem.busy[remote][THEIRS]);
  fflush(stdout);
  kill_children();
  return 0;
}
