/*
 * test_dask.c - the `dask` cluster type with a real Dask (Debian's python3-distributed) on real
 * sshd test hosts:
 *
 *   - through the library: 8 workers on 4 hosts (lab0..lab3), the scheduler on this machine; a
 *     Dask client here, connected to tcp://127.0.0.1:MASTER_PORT, runs a function on every worker
 *     (each reports its host), and a sum whose inputs live on 8 workers of 4 hosts (so workers
 *     fetch data from each other through the mesh of tunnels); the result is checked exactly;
 *   - every Dask process listens on 127.0.0.1 only (nothing on 0.0.0.0 / [::]);
 *   - after lc_cluster_free: no Dask process and no listener in the cluster's port ranges on any
 *     host or here; after lc_group_free: no working directory left on any host;
 *   - through the CLI: `lazyclusterctl start --type dask` in the background until "ready:", a
 *     client computation, then SIGINT (exit 0, nothing left), and SIGKILL (with --heartbeat 3:
 *     nothing left once the lifelines notice);
 *   - a worker start that times out says why (the launcher's message, not a stray one) and which
 *     limit ran out; a scheduler that never listens, started with the type's defaults, fails
 *     after the dask type's master timeout, which the message names with --master-timeout;
 *   - a `python3` without Dask first in PATH (a virtualenv, pyenv) while Dask is installed for
 *     the interpreter the scheduler runs under: the cluster still starts;
 *   - the defaults a user gets: every start here but those about a limit gives none, and
 *     `start --type dask --workers 16` on 4 hosts with no limit given starts, computes, and
 *     leaves nothing on any host after SIGINT;
 *   - `dask scheduler` / `dask worker` where a `dask` command exists, dask-scheduler /
 *     dask-worker otherwise (the launcher's commands run under sh with stand-in programs), and no
 *     deprecation warning in a start's --debug output with the installed Dask.
 *
 * Every check that waits polls with a deadline; none sleeps a fixed time to let things settle.
 */
#include "lc_test.h"
#include "testenv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#define HOSTS 4
#define WORKERS 8

/* Port ranges of each part, apart from each other and from the other tests' defaults. */
#define LIB_MASTER 62100
#define LIB_PORTS "62101-62199"
#define LIB_LO 62100
#define LIB_HI 62199
#define CLI_MASTER 62200
#define CLI_LO 62200
#define CLI_HI 62299

static lc_engine *engine;
static lc_group *group;
static lc_cluster *cluster;
static const lc_cluster_type *dask;
static lc_master_launcher *dask_master;
static lc_worker_launcher *dask_worker;
static char python[4096] = "python3"; /* the interpreter Dask is installed for */
/* sh text run before a client: what points it at the cluster (the cluster's client env, or
 * `eval "$(lazyclusterctl env NAME)"`): TLS files and the scheduler's tls:// address */
static char client_setup[16384];
static char client_py[4096]; /* the client script, written at start */
static char hostname_here[256];

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleeps ms between polls of a condition (the condition itself is what the tests wait for). */
static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the Dask client ------------------------------------------------------------------------ */

/*
 * Connects to the scheduler on this machine, waits for N workers, and prints:
 *   workers N
 *   host PORT HOSTNAME         for every worker (from a function run on each: client.run)
 *   sum S                      parts made on every worker, summed on the first: S = sum(0..N*1000)
 *   fetched_from K             how many other workers the first one fetched parts from
 *   squares S                  a map over 1000 numbers, then a sum on one worker
 */
static const char client_source[] =
    "import os, socket, sys, distributed\n"
    "port, n = int(sys.argv[1]), int(sys.argv[2])\n"
    "addr = os.environ.get('DASK_SCHEDULER_ADDRESS', 'tcp://127.0.0.1:%d' % port)\n"
    "assert addr.endswith(':%d' % port), addr\n"
    "print('address', addr, flush=True)\n"
    "c = distributed.Client(addr, timeout=60)\n"
    "c.wait_for_workers(n, timeout=60)\n"
    "ws = sorted(c.scheduler_info()['workers'])\n"
    "print('workers', len(ws), flush=True)\n"
    "for addr, h in sorted(c.run(socket.gethostname).items()):\n"
    "    print('host', addr.rsplit(':', 1)[1], h, flush=True)\n"
    "def part(i):\n"
    "    return list(range(i * 1000, (i + 1) * 1000))\n"
    "def total(parts):\n"
    "    return sum(sum(p) for p in parts)\n"
    "parts = [c.submit(part, i, workers=[a], allow_other_workers=False, pure=False)\n"
    "         for i, a in enumerate(ws)]\n"
    "s = c.submit(total, parts, workers=[ws[0]], allow_other_workers=False, pure=False)\n"
    "print('sum', s.result(timeout=120), flush=True)\n"
    "def peers(dask_worker):\n"
    "    return sorted({d['who'] for d in dask_worker.transfer_incoming_log})\n"
    "print('fetched_from', len(c.run(peers, workers=[ws[0]])[ws[0]]), flush=True)\n"
    "sq = c.map(lambda x: x * x, range(1000), pure=False)\n"
    "print('squares', c.submit(sum, sq, pure=False).result(timeout=120), flush=True)\n"
    "c.close()\n";

typedef struct client_out {
  int status;
  int workers;
  long long sum, squares;
  int fetched_from;
  int nhosts;
  int port[64];
  char host[64][64];
  char scheme[16]; /* of the address it used: "tls" or "tcp" */
  char text[16384];
} client_out;

/* The client setup from a cluster of the library: its client env, exported. */
static void client_setup_from(lc_cluster *c) {
  size_t used = 0;
  client_setup[0] = '\0';
  for (const char *const *e = lc_cluster_client_env(c); *e != NULL; e++) {
    const char *eq = strchr(*e, '=');
    char *q = NULL;
    if (eq == NULL || lc_shell_quote(&q, eq + 1) < 0)
      continue;
    used += (size_t)snprintf(client_setup + used, sizeof(client_setup) - used, "export %.*s=%s; ",
                             (int)(eq - *e), *e, q);
    lc_free(q);
  }
}

/* The client setup of a cluster of the CLI: what a user does. */
static void client_setup_cli(const char *name) {
  snprintf(client_setup, sizeof(client_setup), "eval \"$('%s' env '%s')\" &&", getenv("LC_CTL"),
           name);
}

/* Runs the client against localhost:port expecting n workers; parses what it printed. */
static void run_client(client_out *o, int port, int n) {
  char cmd[24576], line[1024];
  FILE *p;
  size_t used = 0;
  memset(o, 0, sizeof(*o));
  snprintf(cmd, sizeof(cmd), "%s timeout 300 %s %s %d %d 2>&1", client_setup, python, client_py,
           port, n);
  if ((p = popen(cmd, "r")) == NULL) {
    o->status = -1;
    return;
  }
  while (fgets(line, sizeof(line), p) != NULL) {
    char h[64];
    int wp;
    if (used + strlen(line) < sizeof(o->text)) {
      memcpy(o->text + used, line, strlen(line) + 1);
      used += strlen(line);
    }
    if (sscanf(line, "address %15[a-z]:", o->scheme) == 1)
      continue;
    if (sscanf(line, "workers %d", &o->workers) == 1 || sscanf(line, "sum %lld", &o->sum) == 1 ||
        sscanf(line, "squares %lld", &o->squares) == 1 ||
        sscanf(line, "fetched_from %d", &o->fetched_from) == 1)
      continue;
    if (sscanf(line, "host %d %63s", &wp, h) == 2 && o->nhosts < 64) {
      o->port[o->nhosts] = wp;
      snprintf(o->host[o->nhosts], sizeof(o->host[0]), "%s", h);
      o->nhosts++;
    }
  }
  o->status = pclose(p);
  if (o->status != 0)
    fprintf(stderr, "  the client failed (status %d):\n%s\n", o->status, o->text);
}

/* The host the client saw the worker on port run on, or "". */
static const char *client_host_of(const client_out *o, int port) {
  for (int i = 0; i < o->nhosts; i++)
    if (o->port[i] == port)
      return o->host[i];
  return "";
}

/* The checks on a client run against n workers made of parts 0..n-1. */
static void check_client(const client_out *o, int n) {
  long long want = (long long)n * 1000 * ((long long)n * 1000 - 1) / 2;
  LC_CHECK(o->status == 0);
  LC_CHECK(o->workers == n);
  LC_CHECK(o->nhosts == n);
  LC_CHECK(o->sum == want);
  LC_CHECK(o->squares == 332833500LL); /* sum of x*x for x < 1000 */
  /* the first worker fetched the other n-1 parts from their workers */
  LC_CHECK(o->fetched_from == n - 1);
  fprintf(stderr, "  client: %d workers, sum %lld (want %lld), fetched from %d, squares %lld\n",
          o->workers, o->sum, want, o->fetched_from, o->squares);
}

/* ---- what is left on the hosts and here ----------------------------------------------------- */

typedef struct sched_match {
  int lo, hi; /* a --port in [lo, hi] */
  long *pid;  /* when not NULL: set to the (last) match's pid */
} sched_match;

/* A Dask scheduler's command line ("... dask scheduler --host ..." or the older spelling), not
 * a shell whose script mentions one. */
static int is_scheduler(long pid, const char *cmdline, const void *arg) {
  const sched_match *m = arg;
  const char *port = strstr(cmdline, "--port ");
  if ((strstr(cmdline, "dask scheduler --host ") == NULL &&
       strstr(cmdline, "dask-scheduler --host ") == NULL) ||
      port == NULL || atoi(port + 7) < m->lo || atoi(port + 7) > m->hi)
    return 0;
  if (m->pid != NULL)
    *m->pid = pid;
  return 1;
}

/* Dask schedulers on this machine started with a --port in [lo, hi]. */
static int count_local_schedulers(int lo, int hi) {
  sched_match m = {lo, hi, NULL};
  return th_each_local_proc("cmdline", is_scheduler, &m);
}

/* Working directories of process pid ("HOSTNAME-PID.XXXXXX", HOSTNAME this machine's) in host
 * i's ~/.cache/lazycluster (its home is DIR/hosts/I/home here); their names into names. */
static int host_workdirs(int i, long pid, char *names, size_t size) {
  char path[4200], prefix[320];
  DIR *d;
  struct dirent *e;
  int count = 0;
  snprintf(path, sizeof(path), "%s/hosts/%d/home/.cache/lazycluster", th_dir(), i);
  snprintf(prefix, sizeof(prefix), "%s-%ld.", hostname_here, pid);
  names[0] = '\0';
  if ((d = opendir(path)) == NULL)
    return 0;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
      continue;
    count++;
    if (strlen(names) + strlen(e->d_name) + 2 < size) {
      strcat(names, " ");
      strcat(names, e->d_name);
    }
  }
  closedir(d);
  return count;
}

/* Working directories on this machine made by process pid ("HOSTNAME-PID.XXXXXX"). */
static int local_workdirs(long pid) {
  char root[4096], prefix[320];
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  DIR *d;
  struct dirent *e;
  int count = 0;
  if (xdg != NULL && xdg[0] != '\0')
    snprintf(root, sizeof(root), "%s/lazycluster", xdg);
  else
    snprintf(root, sizeof(root), "%s/.cache/lazycluster", home ? home : "/root");
  snprintf(prefix, sizeof(prefix), "%s-%ld.", hostname_here, pid);
  if ((d = opendir(root)) == NULL)
    return 0;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
      count++;
  closedir(d);
  return count;
}

/* Listening TCP ports of host i in [lo, hi], through a fresh connection; -1 when unreadable. */
static int host_listeners(int i, int lo, int hi, char *which, size_t size) {
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  lc_ports *l = NULL;
  char name[16];
  int count = 0;
  which[0] = '\0';
  snprintf(name, sizeof(name), "lab%d", i);
  if (lc_runtime_new_ssh(&rt, engine, name, &o) < 0 || lc_ports_listening(&l, rt, 20000) < 0) {
    fprintf(stderr, "  cannot read lab%d's listeners: %s\n", i, lc_error_last());
    lc_runtime_free(rt);
    return -1;
  }
  for (size_t k = 0; k < lc_ports_count(l); k++) {
    int p = lc_ports_at(l, k);
    if (p >= lo && p <= hi) {
      count++;
      if (strlen(which) + 8 < size)
        snprintf(which + strlen(which), size - strlen(which), " %d", p);
    }
  }
  lc_ports_free(l);
  lc_runtime_free(rt);
  return count;
}

/* Ports in [lo, hi] listening on this machine (from /proc/net/tcp and tcp6: a port only held by
 * connections in TIME_WAIT is not a leftover). */
static int local_listeners(int lo, int hi, char *which, size_t size) {
  int count = 0;
  which[0] = '\0';
  for (int v = 0; v < 2; v++) {
    FILE *f = fopen(v ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
    char line[512], st[8];
    unsigned port;
    if (f == NULL)
      continue;
    while (fgets(line, sizeof(line), f) != NULL)
      if (sscanf(line, "%*d: %*[0-9A-Fa-f]:%x %*s %7s", &port, st) == 2 && strcmp(st, "0A") == 0 &&
          (int)port >= lo && (int)port <= hi) {
        count++;
        if (strlen(which) + 8 < size)
          snprintf(which + strlen(which), size - strlen(which), " %u", port);
      }
    fclose(f);
  }
  return count;
}

typedef struct leftovers {
  int procs[HOSTS];     /* python or dask processes on host i */
  int listeners[HOSTS]; /* listeners in the port range on host i */
  int workdirs[HOSTS];  /* entries in host i's ~/.cache/lazycluster */
  int local_sched;      /* our scheduler here */
  int local_ports;      /* ports of the range listening here */
  int local_dirs;       /* our working directories here */
  char detail[4096];
} leftovers;

/* Looks at hosts [0, nhosts) and here; returns how many things are left. what: 'p'rocesses,
 * 'l'isteners, 'w'orkdirs (a string of these letters). */
static int look(leftovers *lo, int nhosts, const char *what, int port_lo, int port_hi,
                long owner_pid) {
  char buf[1024];
  int total = 0;
  memset(lo, 0, sizeof(*lo));
  for (int i = 0; i < nhosts; i++) {
    if (strchr(what, 'p')) {
      lo->procs[i] = th_count_procs(i, "python"); /* dask-* and their children are all python */
      total += lo->procs[i];
    }
    if (strchr(what, 'l')) {
      lo->listeners[i] = host_listeners(i, port_lo, port_hi, buf, sizeof(buf));
      if (lo->listeners[i] != 0)
        snprintf(lo->detail + strlen(lo->detail), sizeof(lo->detail) - strlen(lo->detail),
                 " lab%d listens on%s;", i, buf);
      total += lo->listeners[i] != 0;
    }
    if (strchr(what, 'w')) {
      lo->workdirs[i] = host_workdirs(i, owner_pid, buf, sizeof(buf));
      if (lo->workdirs[i] > 0)
        snprintf(lo->detail + strlen(lo->detail), sizeof(lo->detail) - strlen(lo->detail),
                 " lab%d keeps%s;", i, buf);
      total += lo->workdirs[i];
    }
  }
  if (strchr(what, 'p')) {
    lo->local_sched = count_local_schedulers(port_lo, port_hi);
    total += lo->local_sched;
  }
  if (strchr(what, 'l')) {
    lo->local_ports = local_listeners(port_lo, port_hi, buf, sizeof(buf));
    if (lo->local_ports > 0)
      snprintf(lo->detail + strlen(lo->detail), sizeof(lo->detail) - strlen(lo->detail),
               " here:%s;", buf);
    total += lo->local_ports;
  }
  if (strchr(what, 'w')) {
    lo->local_dirs = local_workdirs(owner_pid);
    if (lo->local_dirs > 0)
      snprintf(lo->detail + strlen(lo->detail), sizeof(lo->detail) - strlen(lo->detail),
               " here: %d working directories of pid %ld;", lo->local_dirs, owner_pid);
    total += lo->local_dirs;
  }
  return total;
}

/* Waits up to limit_ms until nothing of what is left; checks it, says how long it took. */
static void check_nothing_left(const char *when, int nhosts, const char *what, int port_lo,
                               int port_hi, long owner_pid, int limit_ms) {
  uint64_t t0 = now_ms(), deadline = t0 + (uint64_t)limit_ms;
  leftovers lo;
  int left;
  while ((left = look(&lo, nhosts, what, port_lo, port_hi, owner_pid)) != 0 && now_ms() < deadline)
    pause_ms(250);
  fprintf(stderr, "  %s: %s after %.1f s\n", when, left ? "things LEFT" : "nothing left",
          (double)(now_ms() - t0) / 1000.0);
  for (int i = 0; i < nhosts; i++) {
    if (lo.procs[i] != 0)
      fprintf(stderr, "  %s: lab%d still runs %d Dask/python processes\n", when, i, lo.procs[i]);
    LC_CHECK(lo.procs[i] == 0);
    LC_CHECK(lo.listeners[i] == 0);
    LC_CHECK(lo.workdirs[i] == 0);
  }
  if (lo.local_sched != 0)
    fprintf(stderr, "  %s: the scheduler still runs here\n", when);
  if (lo.detail[0] != '\0')
    fprintf(stderr, "  %s:%s\n", when, lo.detail);
  LC_CHECK(lo.local_sched == 0);
  LC_CHECK(lo.local_ports == 0);
  LC_CHECK(lo.local_dirs == 0);
}

/* ---- listening addresses -------------------------------------------------------------------- */

/* Appends to out the listeners in a /proc/net/tcp{,6} text that are not on a loopback address
 * (IPv4 127.x or IPv6 ::1) nor sshd's port 22, as "ADDR:PORT". Returns how many. */
static int wide_listeners(const char *proc_net_text, char *out, size_t size) {
  const char *p = proc_net_text;
  int count = 0;
  while (p != NULL && *p != '\0') {
    char local[64], st[8];
    unsigned port;
    const char *nl = strchr(p, '\n');
    if (sscanf(p, "%*d: %63[0-9A-Fa-f]:%x %*s %7s", local, &port, st) == 3 &&
        strcmp(st, "0A") == 0 && port != 22) {
      int loopback = (strlen(local) == 8 && strcmp(local + 6, "7F") == 0) ||
                     strcmp(local, "00000000000000000000000001000000") == 0;
      if (!loopback) {
        count++;
        if (strlen(out) + 80 < size)
          snprintf(out + strlen(out), size - strlen(out), " %s:%u", local, port);
      }
    }
    p = nl ? nl + 1 : NULL;
  }
  return count;
}

typedef struct text_acc {
  char buf[1 << 16];
  size_t used;
} text_acc;

static void acc_line(const char *line, size_t len, lc_stream stream, void *payload) {
  text_acc *t = payload;
  (void)stream;
  if (t->used + len + 2 < sizeof(t->buf)) {
    memcpy(t->buf + t->used, line, len);
    t->used += len;
    t->buf[t->used++] = '\n';
    t->buf[t->used] = '\0';
  }
}

/* Listeners of process pid (its sockets, matched by inode in /proc/net/tcp{,6}) that are not on
 * a loopback address. */
static int local_wide_listeners(long pid, char *out, size_t size) {
  char path[128], link[128], inodes[256][24];
  int ninodes = 0, count = 0;
  DIR *d;
  struct dirent *e;
  snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
  if ((d = opendir(path)) == NULL)
    return -1;
  while ((e = readdir(d)) != NULL && ninodes < 256) {
    char fdp[300];
    ssize_t n;
    snprintf(fdp, sizeof(fdp), "%s/%s", path, e->d_name);
    if ((n = readlink(fdp, link, sizeof(link) - 1)) <= 0)
      continue;
    link[n] = '\0';
    if (sscanf(link, "socket:[%23[0-9]]", inodes[ninodes]) == 1)
      ninodes++;
  }
  closedir(d);
  for (int v = 0; v < 2; v++) {
    FILE *f = fopen(v ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
    char line[512];
    if (f == NULL)
      continue;
    while (fgets(line, sizeof(line), f) != NULL) {
      char local[64], st[8], inode[24];
      unsigned port;
      if (sscanf(line, "%*d: %63[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %23s", local, &port, st,
                 inode) != 4 ||
          strcmp(st, "0A") != 0)
        continue;
      for (int k = 0; k < ninodes; k++)
        if (strcmp(inodes[k], inode) == 0) {
          int loopback = (strlen(local) == 8 && strcmp(local + 6, "7F") == 0) ||
                         strcmp(local, "00000000000000000000000001000000") == 0;
          if (!loopback) {
            count++;
            if (strlen(out) + 80 < size)
              snprintf(out + strlen(out), size - strlen(out), " %s:%u", local, port);
          }
        }
    }
    fclose(f);
  }
  return count;
}

/* The pid of the scheduler on this machine started on port, or 0. */
static long local_scheduler_pid(int port) {
  long pid = 0;
  sched_match m = {port, port, &pid};
  th_each_local_proc("cmdline", is_scheduler, &m);
  return pid;
}

/* ---- which Dask programs -------------------------------------------------------------------- */

/* Writes an executable stand-in for a Dask program: it prints its name, its arguments and the
 * connect timeout it was given, on one line. */
static int write_standin(const char *dir, const char *name) {
  char path[4400];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  if ((f = fopen(path, "w")) == NULL)
    return -1;
  fprintf(f,
          "#!/bin/sh\nprintf %%s %s; printf ' %%s' \"$@\"; "
          "printf ' connect=%%s\\n' \"$DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT\"\n",
          name);
  fclose(f);
  return chmod(path, 0755);
}

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Runs cmd under /bin/sh with PATH=dir and nothing else in the environment; its first line. */
static void run_in_path(char *out, size_t size, const char *dir, const char *cmd) {
  char *q = NULL, *full = NULL;
  FILE *p;
  out[0] = '\0';
  if (lc_shell_quote(&q, cmd) < 0 || (full = malloc(strlen(q) + strlen(dir) + 64)) == NULL) {
    lc_free(q);
    return;
  }
  sprintf(full, "env -i PATH=%s /bin/sh -c %s 2>&1", dir, q);
  if ((p = popen(full, "r")) != NULL) {
    if (fgets(out, (int)size, p) == NULL)
      out[0] = '\0';
    pclose(p);
  }
  out[strcspn(out, "\n")] = '\0';
  fprintf(stderr, "  PATH=%s: %s\n", strrchr(dir, '/') + 1, out);
  free(full);
  lc_free(q);
}

/*
 * The dask launchers' commands, run by sh with stand-ins for Dask's programs in an otherwise empty
 * PATH: where there is a `dask` command they run `dask scheduler` and `dask worker`, where there is
 * none dask-scheduler and dask-worker, with the same options. The type states its own limits (and
 * the workers' connect timeout follows the master's).
 */
static void test_dask_programs(void) {
  const lc_cluster_type *t = lc_cluster_type_find("dask");
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_worker_info wi = {.index = 3,
                       .count = 4,
                       .host = "lab0",
                       .port = 62151,
                       .gpu = -1,
                       .master_port = 62150,
                       .workdir = "/tmp",
                       .aux_port = 62152};
  char *mcmd = NULL, *wcmd = NULL, old_bin[4200], new_bin[4200], got[4096];
  /* insecure: the spelling of the commands alone (with TLS the master's command writes its
   * files on the master's host, which a cluster that never started has not got) */
  lc_cluster_options co = LC_CLUSTER_OPTIONS_INIT;
  co.insecure = 1;
  LC_REQUIRE(t != NULL);
  LC_REQUIRE_OK(t->make(&m, &w, NULL));
  LC_CHECK(m->version == LC_MASTER_LAUNCHER_VERSION && w->version == LC_WORKER_LAUNCHER_VERSION);
  LC_CHECK(m->timeout_ms == 30000 && w->timeout_ms == 60000);
  LC_CHECK_STR(m->type_name, "dask");
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &co));
  LC_REQUIRE_OK(m->command(m, c, 62150, &mcmd));
  LC_REQUIRE_OK(w->command(w, c, &wi, &wcmd));
  snprintf(old_bin, sizeof(old_bin), "%s/dask-old-bin", th_dir());
  snprintf(new_bin, sizeof(new_bin), "%s/dask-new-bin", th_dir());
  mkdir(old_bin, 0755);
  mkdir(new_bin, 0755);
  LC_REQUIRE(write_standin(old_bin, "dask-scheduler") == 0 &&
             write_standin(old_bin, "dask-worker") == 0);
  LC_REQUIRE(write_standin(new_bin, "dask-scheduler") == 0 &&
             write_standin(new_bin, "dask-worker") == 0 && write_standin(new_bin, "dask") == 0);
  run_in_path(got, sizeof(got), new_bin, mcmd);
  LC_CHECK(starts_with(got, "dask scheduler --host 127.0.0.1 --port 62150 --no-dashboard "
                            "--dashboard-address 127.0.0.1:0"));
  run_in_path(got, sizeof(got), old_bin, mcmd);
  LC_CHECK(starts_with(got, "dask-scheduler --host 127.0.0.1 --port 62150 --no-dashboard "
                            "--dashboard-address 127.0.0.1:0"));
  run_in_path(got, sizeof(got), new_bin, wcmd);
  LC_CHECK(starts_with(got,
                       "dask worker tcp://127.0.0.1:62150 --host 127.0.0.1 --worker-port 62151 "
                       "--nanny-port 62152 "));
  LC_CHECK_CONTAINS(got, " --name worker-3");
  LC_CHECK_CONTAINS(got, " connect=60s"); /* the type's master timeout (30 s) + Dask's 30 s */
  run_in_path(got, sizeof(got), old_bin, wcmd);
  LC_CHECK(starts_with(got,
                       "dask-worker tcp://127.0.0.1:62150 --host 127.0.0.1 --worker-port 62151 "
                       "--nanny-port 62152 "));
  LC_CHECK_CONTAINS(got, " connect=60s");
  lc_free(mcmd);
  lc_free(wcmd);
  lc_cluster_free(c);
  t->release(m, w);
}

/* ---- what `ps` shows during a start ---------------------------------------------------------- */

/* Every distinct command line seen on this machine while the watch ran (the test hosts share
 * its process table: they are network, mount and UTS namespaces), for the checks that no key or
 * certificate ever stood in one. */
static struct {
  pthread_t thread;
  volatile int stop;
  char *seen; /* "cmdline\n" each */
  size_t used, cap;
  long scans;
} ps_watch;

static void *ps_watch_run(void *arg) {
  (void)arg;
  while (!ps_watch.stop) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
      char path[300], line[8192];
      size_t n = 0;
      FILE *f;
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
      if ((f = fopen(path, "r")) == NULL)
        continue;
      n = fread(line, 1, sizeof(line) - 2, f);
      fclose(f);
      for (size_t i = 0; i < n; i++)
        if (line[i] == '\0' || line[i] == '\n')
          line[i] = ' ';
      line[n] = '\n';
      line[n + 1] = '\0';
      if (n == 0 || (ps_watch.seen != NULL && strstr(ps_watch.seen, line) != NULL))
        continue;
      if (ps_watch.used + n + 2 > ps_watch.cap) {
        char *more = realloc(ps_watch.seen, ps_watch.cap = ps_watch.cap * 2 + n + 65536);
        if (more == NULL)
          break;
        ps_watch.seen = more;
      }
      memcpy(ps_watch.seen + ps_watch.used, line, n + 2);
      ps_watch.used += n + 1;
    }
    if (d != NULL)
      closedir(d);
    ps_watch.scans++;
    pause_ms(5);
  }
  return NULL;
}

static void ps_watch_begin(void) {
  ps_watch.stop = 0;
  if (pthread_create(&ps_watch.thread, NULL, ps_watch_run, NULL) != 0)
    fprintf(stderr, "  cannot watch the command lines\n");
}

static void ps_watch_end(void) {
  ps_watch.stop = 1;
  pthread_join(ps_watch.thread, NULL);
  fprintf(stderr, "  %ld looks at every command line during the start, %zu bytes of them\n",
          ps_watch.scans, ps_watch.used);
}

/* ---- the library path ----------------------------------------------------------------------- */

static void test_library_cluster(void) {
  lc_group_report *rep = NULL;
  lc_runtime_options o = th_options();
  lc_cluster_options co = LC_CLUSTER_OPTIONS_INIT;
  const char *hosts[HOSTS];
  char names[HOSTS][16];
  const char *args[] = {"nthreads=1", NULL};
  int per_host[HOSTS] = {0};
  client_out out;
  uint64_t t0;
  int r;

  for (int i = 0; i < HOSTS; i++) {
    snprintf(names[i], sizeof(names[i]), "lab%d", i);
    hosts[i] = names[i];
  }
  LC_REQUIRE_OK(lc_group_connect(&rep, group, hosts, HOSTS, &o));
  LC_CHECK(lc_group_report_failures(rep) == 0);
  lc_group_report_free(rep);
  LC_REQUIRE(lc_group_count(group) == HOSTS);

  LC_REQUIRE((dask = lc_cluster_type_find("dask")) != NULL);
  LC_CHECK_STR(dask->name, "dask");
  LC_REQUIRE_OK(dask->make(&dask_master, &dask_worker, args));
  co.master_port = LIB_MASTER;
  co.worker_ports = LIB_PORTS;
  /* no start limits: the dask type's own must do for 8 workers on a loaded 2-core machine */
  LC_REQUIRE_OK(lc_cluster_new(&cluster, group, dask_master, dask_worker, &co));
  t0 = now_ms();
  ps_watch_begin(); /* every command line on this machine and the hosts during the start */
  r = lc_cluster_start(cluster, WORKERS);
  ps_watch_end();
  if (r < 0)
    fprintf(stderr, "  start failed: %s\n  log:\n%s\n", lc_error_last(), lc_cluster_log(cluster));
  LC_REQUIRE_OK(r);
  fprintf(stderr, "  %d Dask workers on %d hosts ready after %.1f s\n", WORKERS, HOSTS,
          (double)(now_ms() - t0) / 1000.0);
  /* the asked port, or (when a recent run's connections still linger on it in TIME_WAIT)
   * another of the ranges */
  LC_CHECK(lc_cluster_master_port(cluster) >= LIB_LO && lc_cluster_master_port(cluster) <= LIB_HI);
  if (lc_cluster_master_port(cluster) != LIB_MASTER)
    fprintf(stderr, "  note: the master runs on port %d, not %d\n", lc_cluster_master_port(cluster),
            LIB_MASTER);
  LC_CHECK_STR(lc_cluster_master_host(cluster), "localhost");
  LC_REQUIRE(lc_cluster_worker_count(cluster) == WORKERS);
  for (size_t i = 0; i < WORKERS; i++) {
    const lc_worker_info *w = lc_cluster_worker(cluster, i);
    int h = atoi(w->host + 3);
    LC_CHECK(w->index == (int)i);
    LC_CHECK(w->port >= LIB_LO && w->port <= LIB_HI);
    LC_CHECK(w->aux_port >= LIB_LO && w->aux_port <= LIB_HI && w->aux_port != w->port);
    LC_CHECK(strncmp(w->host, "lab", 3) == 0 && h >= 0 && h < HOSTS);
    if (h >= 0 && h < HOSTS)
      per_host[h]++;
  }
  for (int h = 0; h < HOSTS; h++)
    LC_CHECK(per_host[h] == WORKERS / HOSTS); /* round-robin: 2 a host */

  /* the client, here, through the tunnels, with the cluster's client env (TLS) */
  client_setup_from(cluster);
  t0 = now_ms();
  run_client(&out, lc_cluster_master_port(cluster), WORKERS);
  fprintf(stderr, "  client run took %.1f s\n", (double)(now_ms() - t0) / 1000.0);
  check_client(&out, WORKERS);
  LC_CHECK_STR(out.scheme, "tls");
  /* every worker ran the function on the host the library put it on */
  for (size_t i = 0; i < WORKERS; i++) {
    const lc_worker_info *w = lc_cluster_worker(cluster, i);
    LC_CHECK_STR(client_host_of(&out, w->port), w->host);
  }
}

/* Every listener of the cluster is on 127.0.0.1: Dask's HTTP servers too (Dask binds them to all
 * interfaces unless told otherwise, even with --no-dashboard). */
static void test_listens_on_localhost_only(void) {
  char wide[2048] = "";
  long sched;
  int n;
  LC_REQUIRE(cluster != NULL && lc_cluster_worker_count(cluster) == WORKERS);
  for (int i = 0; i < HOSTS; i++) {
    text_acc *t = calloc(1, sizeof(*t));
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    lc_exec_result res;
    char one[1024] = "";
    LC_REQUIRE(t != NULL);
    eo.on_line = acc_line;
    eo.payload = t;
    eo.timeout_ms = 20000;
    LC_CHECK_OK(lc_runtime_exec(&res, lc_group_at(group, (size_t)i),
                                "cat /proc/net/tcp /proc/net/tcp6", &eo));
    n = wide_listeners(t->buf, one, sizeof(one));
    if (n > 0)
      fprintf(stderr, "  %s: listeners on all interfaces:%s\n",
              lc_runtime_name(lc_group_at(group, (size_t)i)), one);
    LC_CHECK(n == 0);
    free(t);
  }
  sched = local_scheduler_pid(lc_cluster_master_port(cluster));
  LC_CHECK(sched > 0);
  n = sched > 0 ? local_wide_listeners(sched, wide, sizeof(wide)) : -1;
  if (n > 0)
    fprintf(stderr, "  the scheduler here listens on all interfaces:%s\n", wide);
  LC_CHECK(n == 0);
}

/* ---- TLS: the files, what `ps` showed, and strangers ------------------------------------ */

/* The path on this machine of path on host i (its /root is DIR/hosts/I/home here). */
static void host_path(char *out, size_t size, int i, const char *path) {
  if (strncmp(path, "/root/", 6) == 0)
    snprintf(out, size, "%s/hosts/%d/home/%s", th_dir(), i, path + 6);
  else
    snprintf(out, size, "%s", path);
}

/* The first base64 line of a PEM file (what would show if it were in a command line), or "". */
static void pem_body_line(const char *path, char *out, size_t size) {
  char line[256];
  FILE *f = fopen(path, "r");
  out[0] = '\0';
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "-----", 5) != 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, size, "%s", line);
      break;
    }
  if (f != NULL)
    fclose(f);
}

/* The files matching pattern (glob) are n, each a regular file of mode 0600 whose text never
 * stood in a command line seen during the start nor in the cluster's log. */
static void check_tls_files(const char *where, const char *pattern, size_t n) {
  glob_t g;
  memset(&g, 0, sizeof(g));
  glob(pattern, 0, NULL, &g);
  if (g.gl_pathc != n)
    fprintf(stderr, "  %s: %zu files match %s, want %zu\n", where, (size_t)g.gl_pathc, pattern, n);
  LC_CHECK(g.gl_pathc == n);
  for (size_t k = 0; k < g.gl_pathc; k++) {
    struct stat st;
    char body[128];
    LC_CHECK(lstat(g.gl_pathv[k], &st) == 0 && S_ISREG(st.st_mode));
    if ((st.st_mode & 0777) != 0600)
      fprintf(stderr, "  %s: %s has mode %03o\n", where, g.gl_pathv[k], st.st_mode & 0777);
    LC_CHECK((st.st_mode & 0777) == 0600);
    pem_body_line(g.gl_pathv[k], body, sizeof(body));
    LC_CHECK(strlen(body) >= 60);
    LC_CHECK(ps_watch.seen == NULL || strstr(ps_watch.seen, body) == NULL);
    LC_CHECK(strstr(lc_cluster_log(cluster), body) == NULL);
  }
  globfree(&g);
}

/*
 * The TLS files: on every worker host the CA and the workers' certificate and key, on the
 * master's host the scheduler's, here the client's in a 0700 client directory; all 0600. None of
 * them, no PEM at all and not the cluster's secret appeared in a command line on any host or here
 * during the start (looked at every few ms), nor in the cluster's log.
 */
static void test_tls_files_and_ps(void) {
  char pattern[4400], local[4400];
  const char *wd = NULL, *cdir;
  struct stat st;
  LC_REQUIRE(cluster != NULL);
  for (int i = 0; i < HOSTS; i++) {
    char where[16];
    snprintf(where, sizeof(where), "lab%d", i);
    LC_REQUIRE_OK(lc_runtime_workdir(&wd, lc_group_at(group, (size_t)i)));
    host_path(local, sizeof(local), i, wd);
    snprintf(pattern, sizeof(pattern), "%s/dask-*-*.pem", local);
    check_tls_files(where, pattern, 3);
    snprintf(pattern, sizeof(pattern), "%s/dask-*-worker-key.pem", local);
    check_tls_files(where, pattern, 1);
  }
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, lc_cluster_master_runtime(cluster)));
  snprintf(pattern, sizeof(pattern), "%s/dask-*-scheduler-key.pem", wd);
  check_tls_files("the master's host", pattern, 1);
  snprintf(pattern, sizeof(pattern), "%s/dask-*.pem", wd);
  check_tls_files("the master's host", pattern, 3);
  cdir = lc_cluster_client_dir(cluster);
  LC_REQUIRE(cdir != NULL && stat(cdir, &st) == 0);
  LC_CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == geteuid());
  snprintf(pattern, sizeof(pattern), "%s/dask-client-key.pem", cdir);
  check_tls_files("the client directory", pattern, 1);
  snprintf(pattern, sizeof(pattern), "%s/*", cdir);
  check_tls_files("the client directory", pattern, 3);
  /* the watch saw the Dask processes' command lines (so it looked while they started) */
  LC_REQUIRE(ps_watch.seen != NULL);
  LC_CHECK(strstr(ps_watch.seen, "--tls-key ") != NULL);
  LC_CHECK(strstr(ps_watch.seen, "worker tls://127.0.0.1:") != NULL);
  LC_CHECK(strstr(ps_watch.seen, "-----BEGIN") == NULL);
  LC_CHECK(strstr(ps_watch.seen, "PRIVATE KEY") == NULL);
  LC_CHECK(strstr(lc_cluster_log(cluster), "PRIVATE KEY") == NULL);
  /* nor the cluster's secret (which every process has in its LAZYCLUSTER_SECRET_FILE) */
  LC_CHECK(strlen(lc_cluster_secret(cluster)) == LC_SECRET_LEN);
  LC_CHECK(strstr(ps_watch.seen, lc_cluster_secret(cluster)) == NULL);
  LC_CHECK(strstr(lc_cluster_log(cluster), lc_cluster_secret(cluster)) == NULL);
}

/*
 * Connects to each port: "reachable P" when TCP connects; then, with TLS without a certificate
 * and with the given one (glob patterns; "-": none), and not checking the server's (a stranger
 * would not care): "nocert P accepted|refused", "withcert P accepted|refused". Accepted means the
 * Dask server sent its first message, which it does only after a handshake it accepted. Then a
 * Dask client over plain tcp:// to the first port: "dask-tcp P accepted|refused".
 */
static const char probe_source[] =
    "import glob, os, socket, ssl, sys\n"
    "cert, key, ports = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]\n"
    "if cert != '-':\n"
    "    cert, key = glob.glob(cert)[0], glob.glob(key)[0]\n"
    "def attempt(port, with_cert):\n"
    "    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
    "    ctx.check_hostname = False\n"
    "    ctx.verify_mode = ssl.CERT_NONE\n"
    "    if with_cert:\n"
    "        ctx.load_cert_chain(cert, key)\n"
    "    try:\n"
    "        t = ctx.wrap_socket(socket.create_connection(('127.0.0.1', port), 10))\n"
    "        t.settimeout(30)\n"
    "        return 'accepted' if t.recv(4096) else 'refused (closed)'\n"
    "    except Exception as e:\n"
    "        return 'refused (%s: %s)' % (type(e).__name__, e)\n"
    "for port in ports:\n"
    "    socket.create_connection(('127.0.0.1', port), 10).close()\n"
    "    print('reachable', port, flush=True)\n"
    "    print('nocert', port, attempt(port, False), flush=True)\n"
    "    if cert != '-':\n"
    "        print('withcert', port, attempt(port, True), flush=True)\n"
    "import distributed\n"
    "try:\n"
    "    distributed.Client('tcp://127.0.0.1:%d' % ports[0], timeout=10)\n"
    "    print('dask-tcp', ports[0], 'accepted', flush=True)\n"
    "except Exception as e:\n"
    "    print('dask-tcp', ports[0], 'refused (%s)' % type(e).__name__, flush=True)\n";

/* Runs the probe (as nobody when stranger) on host i (-1: here); its output into out. */
static int run_probe(char *out, size_t size, int i, int stranger, const char *cert, const char *key,
                     const char *script, const int *ports, size_t nports) {
  char cmd[16384], where[4400] = "", who[128] = "";
  size_t used = 0;
  FILE *p;
  if (i >= 0)
    snprintf(where, sizeof(where), "%s exec %d --dir %s --", th_script(), i, th_dir());
  if (stranger)
    snprintf(who, sizeof(who), "setpriv --reuid=65534 --regid=65534 --clear-groups");
  used = (size_t)snprintf(cmd, sizeof(cmd), "%s %s env HOME=/tmp %s %s '%s' '%s'", where, who,
                          python, script, cert, key);
  for (size_t k = 0; k < nports; k++)
    used += (size_t)snprintf(cmd + used, sizeof(cmd) - used, " %d", ports[k]);
  snprintf(cmd + used, sizeof(cmd) - used, " 2>&1");
  out[0] = '\0';
  if ((p = popen(cmd, "r")) == NULL)
    return -1;
  used = 0;
  while (used + 1 < size && fgets(out + used, (int)(size - used), p) != NULL)
    used += strlen(out + used);
  return pclose(p);
}

/* Every port was reachable, and a handshake without a certificate refused at each; with the
 * certificate: accepted when want_cert, else refused; plain tcp:// refused. */
static void check_probe(const char *who, const char *out, const int *ports, size_t nports,
                        int has_cert, int want_cert) {
  char line[128];
  int bad = 0;
  for (size_t k = 0; k < nports; k++) {
    snprintf(line, sizeof(line), "reachable %d\n", ports[k]);
    bad |= strstr(out, line) == NULL;
    snprintf(line, sizeof(line), "nocert %d refused", ports[k]);
    bad |= strstr(out, line) == NULL;
    if (has_cert) {
      snprintf(line, sizeof(line), "withcert %d %s", ports[k], want_cert ? "accepted" : "refused");
      bad |= strstr(out, line) == NULL;
    }
  }
  snprintf(line, sizeof(line), "dask-tcp %d refused", ports[0]);
  bad |= strstr(out, line) == NULL;
  if (bad)
    fprintf(stderr, "  %s: the probe said:\n%s\n", who, out);
  LC_CHECK(!bad);
}

/*
 * Another user (nobody) on a worker host reaches the scheduler's port and workers' ports (TCP
 * connects: sshd's -R listeners there are open to every local user), yet the scheduler and the
 * workers refuse it: no certificate, a certificate of its own CA, plain tcp://. Here it reaches
 * the scheduler, which refuses it the same way, while our tunnels' listeners close its
 * connections at once (the peer check). The owner, with the cluster's files, is accepted at the
 * same ports, on that host and here.
 */
static void test_tls_refuses_strangers(void) {
  char dir[] = "/var/tmp/lc_test_dask_XXXXXX", script[64], cert[64], key[64], out[16384];
  char wcert[4400], wkey[4400], ccert[4400], ckey[4400];
  lc_tls_ca *sca = NULL;
  lc_tls_cert *sc = NULL;
  const char *wd = NULL;
  int on_lab1 = 0, on_lab0 = 0, ports[3], st;
  FILE *f;
  LC_REQUIRE(cluster != NULL);
  for (size_t i = 0; i < lc_cluster_worker_count(cluster); i++) {
    const lc_worker_info *w = lc_cluster_worker(cluster, i);
    if (strcmp(w->host, "lab1") == 0 && on_lab1 == 0)
      on_lab1 = w->port;
    if (strcmp(w->host, "lab0") == 0 && on_lab0 == 0)
      on_lab0 = w->port;
  }
  LC_REQUIRE(on_lab1 > 0 && on_lab0 > 0);
  ports[0] = lc_cluster_master_port(cluster);
  ports[1] = on_lab1; /* the worker itself listens there */
  ports[2] = on_lab0; /* the mesh's tunnel to lab0's worker */

  /* the stranger's own CA and certificate, and the probe, where nobody (and every host) reads */
  LC_REQUIRE(mkdtemp(dir) != NULL && chmod(dir, 0755) == 0);
  snprintf(script, sizeof(script), "%s/probe.py", dir);
  snprintf(cert, sizeof(cert), "%s/stranger.pem", dir);
  snprintf(key, sizeof(key), "%s/stranger-key.pem", dir);
  LC_REQUIRE_OK(lc_tls_ca_new(&sca, "stranger"));
  LC_REQUIRE_OK(lc_tls_cert_new(&sc, sca, "dask-worker"));
  LC_REQUIRE((f = fopen(script, "w")) != NULL && fputs(probe_source, f) >= 0 && fclose(f) == 0);
  LC_REQUIRE((f = fopen(cert, "w")) != NULL && fputs(lc_tls_cert_pem(sc), f) >= 0 &&
             fclose(f) == 0);
  LC_REQUIRE((f = fopen(key, "w")) != NULL && fputs(lc_tls_cert_key_pem(sc), f) >= 0 &&
             fclose(f) == 0);
  chmod(script, 0644);
  chmod(cert, 0644);
  chmod(key, 0644);

  /* nobody on lab1: the scheduler (through its tunnel), lab1's worker, lab0's worker (mesh) */
  st = run_probe(out, sizeof(out), 1, 1, cert, key, script, ports, 3);
  LC_CHECK(st == 0);
  check_probe("nobody on lab1", out, ports, 3, 1, 0);
  /* the owner on lab1, with the workers' files there: accepted at the same ports */
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, lc_group_find(group, "lab1")));
  snprintf(wcert, sizeof(wcert), "%s/dask-*-worker.pem", wd);
  snprintf(wkey, sizeof(wkey), "%s/dask-*-worker-key.pem", wd);
  st = run_probe(out, sizeof(out), 1, 0, wcert, wkey, script, ports, 3);
  LC_CHECK(st == 0);
  check_probe("the owner on lab1", out, ports, 3, 1, 1);

  /* nobody here: the scheduler itself refuses it at the TLS handshake; lab0's worker through
   * our tunnel is not even reached: the tunnel's listener (ours) closes a stranger's connection
   * as it accepts it (the peer check, lc_engine_options.peers; test_peers), before any TLS */
  ports[1] = on_lab0;
  st = run_probe(out, sizeof(out), -1, 1, cert, key, script, ports, 1);
  LC_CHECK(st == 0);
  check_probe("nobody here", out, ports, 1, 1, 0);
  /* TCP connects (the kernel completes it before our accept resets it), but no TLS handshake
   * reached lab0's worker: no attempt was accepted, none got the worker's TLS alert */
  st = run_probe(out, sizeof(out), -1, 1, cert, key, script, &on_lab0, 1);
  if (strstr(out, "accepted") != NULL || strstr(out, "alert") != NULL)
    fprintf(stderr, "  nobody here, through our tunnel: the probe said:\n%s\n", out);
  LC_CHECK(strstr(out, "accepted") == NULL && strstr(out, "alert") == NULL);
  /* the owner here, with the client's files */
  snprintf(ccert, sizeof(ccert), "%s/dask-client.pem", lc_cluster_client_dir(cluster));
  snprintf(ckey, sizeof(ckey), "%s/dask-client-key.pem", lc_cluster_client_dir(cluster));
  st = run_probe(out, sizeof(out), -1, 0, ccert, ckey, script, ports, 2);
  LC_CHECK(st == 0);
  check_probe("the owner here", out, ports, 2, 1, 1);

  unlink(script);
  unlink(cert);
  unlink(key);
  rmdir(dir);
  lc_tls_cert_free(sc);
  lc_tls_ca_free(sca);
}

/* Runs python's script (text) with the port; its output in out. Returns its exit status. */
static int run_py(char *out, size_t size, const char *name, const char *text, int port) {
  char path[4200], cmd[24576];
  size_t used = 0;
  FILE *f, *p;
  snprintf(path, sizeof(path), "%s/%s", th_dir(), name);
  if ((f = fopen(path, "w")) == NULL)
    return -1;
  fputs(text, f);
  fclose(f);
  snprintf(cmd, sizeof(cmd), "%s timeout 120 %s %s %d 2>&1", client_setup, python, path, port);
  out[0] = '\0';
  if ((p = popen(cmd, "r")) == NULL)
    return -1;
  while (used + 1 < size && fgets(out + used, (int)(size - used), p) != NULL)
    used += strlen(out + used);
  return pclose(p);
}

/* Scale down with the dask type's retire: data that lived only on the workers that go survives
 * (the scheduler moved it first); without the retire those workers' data would be lost. */
static void test_scale_down_keeps_data(void) {
  static const char *publish =
      "import os, sys, distributed\n"
      "c = distributed.Client(os.environ['DASK_SCHEDULER_ADDRESS'], timeout=60)\n"
      "info = c.scheduler_info()['workers']\n"
      "gone = [a for a, w in info.items() if w['name'] in ('worker-6', 'worker-7')]\n"
      "fs = c.scatter([list(range(1000 * i, 1000 * (i + 1))) for i in range(4)], workers=gone)\n"
      "distributed.wait(fs, timeout=60)\n"
      "held = c.who_has(fs)\n"
      "print('only_on_gone', sum(1 for f in fs if set(held[f.key]) <= set(gone)))\n"
      "c.publish_dataset(kept=fs)\n";
  static const char *fetch =
      "import os, sys, distributed\n"
      "c = distributed.Client(os.environ['DASK_SCHEDULER_ADDRESS'], timeout=60)\n"
      "fs = c.get_dataset('kept')\n"
      "distributed.wait(fs, timeout=60)\n"
      "print('sum', sum(sum(v) for v in c.gather(fs)))\n"
      "print('workers', len(c.scheduler_info()['workers']))\n"
      "c.unpublish_dataset('kept')\n";
  char out[8192];
  uint64_t t0;
  LC_REQUIRE(cluster != NULL && lc_cluster_worker_count(cluster) == WORKERS);
  LC_CHECK(run_py(out, sizeof(out), "publish.py", publish, lc_cluster_master_port(cluster)) == 0);
  LC_CHECK_CONTAINS(out, "only_on_gone 4\n");
  t0 = now_ms();
  LC_CHECK_OK(lc_cluster_scale(cluster, WORKERS - 2));
  fprintf(stderr, "  scale from %d to %d workers took %.1f s\n", WORKERS, WORKERS - 2,
          (double)(now_ms() - t0) / 1000.0);
  LC_CHECK(lc_cluster_worker_count(cluster) == WORKERS - 2);
  LC_CHECK_CONTAINS(lc_cluster_log(cluster), "workers 6-7 retired by the worker launcher");
  LC_CHECK(run_py(out, sizeof(out), "fetch.py", fetch, lc_cluster_master_port(cluster)) == 0);
  LC_CHECK_CONTAINS(out, "sum 7998000\n");
  LC_CHECK_CONTAINS(out, "workers 6\n");
  if (strstr(out, "sum 7998000") == NULL)
    fprintf(stderr, "  the client said:\n%s\n  log:\n%s\n", out, lc_cluster_log(cluster));
}

static void test_library_cleanup(void) {
  uint64_t t0 = now_ms();
  LC_REQUIRE(cluster != NULL);
  lc_cluster_free(cluster);
  cluster = NULL;
  fprintf(stderr, "  lc_cluster_free took %.1f s\n", (double)(now_ms() - t0) / 1000.0);
  /* processes and listeners go with the cluster; working directories with the group */
  check_nothing_left("after lc_cluster_free", HOSTS, "pl", LIB_LO, LIB_HI, (long)getpid(), 15000);
  lc_group_free(group);
  group = NULL;
  check_nothing_left("after lc_group_free", HOSTS, "w", LIB_LO, LIB_HI, (long)getpid(), 15000);
}

/* ---- the CLI -------------------------------------------------------------------------------- */

typedef struct cli {
  char name[80]; /* the cluster's, from its table */
  pid_t pid;
  int out; /* its stdout */
  char err_path[4200];
  int master_port;
  int nworkers;
  int wport[64];
  char whost[64][64];
  int ready;
  char stdout_text[16384];
} cli;

/* Starts lazyclusterctl with the args (NULL-terminated) and env_path as PATH (NULL: ours). */
static int cli_start(cli *k, const char *const *args, const char *env_path, const char *tag) {
  int fds[2];
  const char *ctl = getenv("LC_CTL");
  memset(k, 0, sizeof(*k));
  if (ctl == NULL) {
    fprintf(stderr, "FATAL: LC_CTL (the lazyclusterctl binary) is not set\n");
    return -1;
  }
  snprintf(k->err_path, sizeof(k->err_path), "%s/dask-%s.err", th_dir(), tag);
  if (pipe(fds) < 0)
    return -1;
  fflush(NULL);
  if ((k->pid = fork()) == 0) {
    const char *argv[64];
    int n = 0, e = open(k->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    argv[n++] = ctl;
    for (const char *const *a = args; *a != NULL && n < 62; a++)
      argv[n++] = *a;
    argv[n] = NULL;
    dup2(fds[1], 1);
    if (e >= 0)
      dup2(e, 2);
    close(fds[0]);
    close(fds[1]);
    if (env_path != NULL)
      setenv("PATH", env_path, 1);
    execv(ctl, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  k->out = fds[0];
  return k->pid > 0 ? 0 : -1;
}

/* Reads its stdout until "ready:" (1), EOF (0) or the deadline (-1). */
static int cli_wait_ready(cli *k, int limit_ms) {
  uint64_t deadline = now_ms() + (uint64_t)limit_ms;
  size_t used = strlen(k->stdout_text);
  for (;;) {
    struct pollfd p = {.fd = k->out, .events = POLLIN};
    int left = (int)(deadline - now_ms());
    ssize_t n;
    char *line;
    if (now_ms() >= deadline)
      return -1;
    if (poll(&p, 1, left) <= 0)
      continue;
    if ((n = read(k->out, k->stdout_text + used, sizeof(k->stdout_text) - used - 1)) <= 0)
      return 0;
    used += (size_t)n;
    k->stdout_text[used] = '\0';
    if ((line = strstr(k->stdout_text, "\nready:")) != NULL && strchr(line + 1, '\n') != NULL) {
      /* master    localhost:P on H / worker-I   localhost:P on H gpu G */
      char *s = k->stdout_text;
      while (s != NULL && *s != '\0') {
        int idx, port;
        char h[64];
        if (sscanf(s, "name %79s", k->name) == 1) {
        } else if (sscanf(s, "master localhost:%d", &k->master_port) == 1) {
        } else if (sscanf(s, "worker-%d localhost:%d on %63s", &idx, &port, h) == 3 &&
                   k->nworkers < 64) {
          k->wport[k->nworkers] = port;
          snprintf(k->whost[k->nworkers], sizeof(k->whost[0]), "%s", h);
          k->nworkers++;
        }
        s = strchr(s, '\n');
        s = s ? s + 1 : NULL;
      }
      k->ready = 1;
      return 1;
    }
  }
}

/* Waits up to limit_ms for it to end; returns its wait status, or -1 (then it is killed). */
static int cli_reap(cli *k, int limit_ms) {
  uint64_t deadline = now_ms() + (uint64_t)limit_ms;
  int st;
  for (;;) {
    pid_t r = waitpid(k->pid, &st, WNOHANG);
    if (r == k->pid)
      break;
    if (now_ms() >= deadline) {
      kill(k->pid, SIGKILL);
      waitpid(k->pid, &st, 0);
      st = -1;
      break;
    }
    pause_ms(50);
  }
  close(k->out);
  return st;
}

static void cli_show_stderr(cli *k) {
  char cmd[4400];
  snprintf(cmd, sizeof(cmd), "sed 's/^/    | /' %s | tail -40 >&2", k->err_path);
  if (system(cmd) != 0)
    fprintf(stderr, "  (cannot show %s)\n", k->err_path);
}

/* A client as a user runs it (eval "$(lazyclusterctl env NAME)") computes on k's cluster of n
 * workers over scheme ("tls", or "tcp" with --insecure); what it saw in *out. */
static void cli_client_computes(cli *k, client_out *out, int n, const char *scheme) {
  client_setup_cli(k->name);
  run_client(out, k->master_port, n);
  check_client(out, n);
  LC_CHECK_STR(out->scheme, scheme);
}

/* SIGINT to k; it must exit 0 within reap_ms (else its stderr is shown), then nothing of it may
 * be left on nhosts hosts or here (check_nothing_left, within left_ms). */
static void cli_sigint_clean(cli *k, int reap_ms, const char *when, int nhosts, int left_ms) {
  int st;
  kill(k->pid, SIGINT);
  st = cli_reap(k, reap_ms);
  if (!(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
    cli_show_stderr(k);
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_nothing_left(when, nhosts, "plw", CLI_LO, CLI_HI, (long)k->pid, left_ms);
}

static int cli_stderr_contains(cli *k, const char *needle) {
  char buf[65536];
  FILE *f = fopen(k->err_path, "r");
  size_t n;
  if (f == NULL)
    return 0;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

/* Whether this machine (and so every test host: they share its file system) has a `dask`
 * command, and so `dask scheduler` / `dask worker`. */
static int have_dask_command(void) { return system("command -v dask >/dev/null 2>&1") == 0; }

/* The command line of process pid, NULs as spaces, or "". */
static void proc_cmdline(long pid, char *out, size_t size) {
  char path[64];
  FILE *f;
  size_t n = 0;
  snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
  if ((f = fopen(path, "r")) != NULL) {
    n = fread(out, 1, size - 1, f);
    fclose(f);
  }
  for (size_t i = 0; i < n; i++)
    if (out[i] == '\0')
      out[i] = ' ';
  out[n] = '\0';
}

/*
 * `start --type dask --workers 2 --hosts lab0,lab1 --debug` with no limits given, until ready, a
 * computation, then SIGINT. The scheduler and workers run as `dask scheduler` / `dask worker`
 * where there is a `dask` command (Debian 12's python3-distributed has one), and the start's
 * output carries no deprecation warning (the dash names print a FutureWarning at every start).
 */
/* The directory of the client's files of CLI cluster name, from `lazyclusterctl env NAME`. */
static int cli_client_dir(const char *name, char *out, size_t size) {
  char cmd[4400], line[4400];
  FILE *p;
  out[0] = '\0';
  snprintf(cmd, sizeof(cmd), "'%s' env '%s'", getenv("LC_CTL"), name);
  if ((p = popen(cmd, "r")) == NULL)
    return -1;
  while (fgets(line, sizeof(line), p) != NULL) {
    char *v = strstr(line, "export DASK_DISTRIBUTED__COMM__TLS__CA_FILE='"), *slash;
    if (v == NULL)
      continue;
    v += strlen("export DASK_DISTRIBUTED__COMM__TLS__CA_FILE='");
    v[strcspn(v, "'")] = '\0';
    if ((slash = strrchr(v, '/')) != NULL)
      *slash = '\0';
    snprintf(out, size, "%s", v);
  }
  pclose(p);
  return out[0] ? 0 : -1;
}

/* The client's directory: this user's, 0700, with the CA, certificate and key, each 0600. */
static void check_client_dir(const char *dir) {
  static const char *const names[] = {"dask-ca.pem", "dask-client.pem", "dask-client-key.pem"};
  struct stat st;
  char path[4400];
  LC_REQUIRE(dir[0] != '\0' && stat(dir, &st) == 0);
  LC_CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == geteuid());
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    LC_CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
  }
}

static void test_cli_sigint(void) {
  const char *args[] = {"start",   "--type",    "dask",        "--workers", "2",
                        "--hosts", "lab0,lab1", "-F",          th_config(), "--master-port",
                        "62200",   "--ports",   "62201-62299", "--debug",   NULL};
  client_out out;
  cli k;
  uint64_t t0 = now_ms();
  int st, ready;
  char cmdline[4096], cdir[4400] = "";
  LC_REQUIRE(cli_start(&k, args, NULL, "sigint") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1) {
    fprintf(stderr, "  no \"ready:\" (%d); stdout:\n%s\n  stderr:\n", ready, k.stdout_text);
    cli_show_stderr(&k);
    kill(k.pid, SIGINT);
    cli_reap(&k, 30000);
    LC_REQUIRE(ready == 1);
  }
  fprintf(stderr, "  lazyclusterctl ready after %.1f s\n", (double)(now_ms() - t0) / 1000.0);
  LC_CHECK(k.master_port >= CLI_LO && k.master_port <= CLI_HI);
  LC_CHECK(k.nworkers == 2);
  proc_cmdline(local_scheduler_pid(k.master_port), cmdline, sizeof(cmdline));
  fprintf(stderr, "  the scheduler: %.120s\n", cmdline);
  if (have_dask_command()) {
    LC_CHECK_CONTAINS(cmdline, "/dask scheduler --host 127.0.0.1 ");
    LC_CHECK(th_count_procs(0, "/dask worker tls://127.0.0.1:") >= 1);
    LC_CHECK(th_count_procs(0, "dask-worker tcp://") == 0);
  } else {
    LC_CHECK_CONTAINS(cmdline, "dask-scheduler --host 127.0.0.1 ");
  }
  /* a client as a user runs it: eval "$(lazyclusterctl env NAME)", then a tls:// address */
  LC_CHECK(cli_client_dir(k.name, cdir, sizeof(cdir)) == 0);
  check_client_dir(cdir);
  cli_client_computes(&k, &out, 2, "tls");
  for (int i = 0; i < k.nworkers; i++)
    LC_CHECK_STR(client_host_of(&out, k.wport[i]), k.whost[i]);
  {
    int seen0 = 0, seen1 = 0;
    for (int i = 0; i < out.nhosts; i++) {
      seen0 += strcmp(out.host[i], "lab0") == 0;
      seen1 += strcmp(out.host[i], "lab1") == 0;
    }
    LC_CHECK(seen0 == 1 && seen1 == 1);
  }
  t0 = now_ms();
  kill(k.pid, SIGINT);
  st = cli_reap(&k, 60000);
  fprintf(stderr, "  lazyclusterctl stopped %.1f s after SIGINT\n",
          (double)(now_ms() - t0) / 1000.0);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
    fprintf(stderr, "  wait status %d; stderr:\n", st);
    cli_show_stderr(&k);
  }
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  LC_CHECK(cli_stderr_contains(&k, "stopping (SIGINT)"));
  /* --debug showed the processes' output (the scheduler's registrations), with no warning */
  LC_CHECK(cli_stderr_contains(&k, "[localhost master] "));
  LC_CHECK(cli_stderr_contains(&k, "Register worker"));
  LC_CHECK(cli_stderr_contains(&k, "[lab0 worker-0] "));
  if (have_dask_command()) {
    if (cli_stderr_contains(&k, "deprecated"))
      cli_show_stderr(&k);
    LC_CHECK(!cli_stderr_contains(&k, "deprecated"));
    LC_CHECK(!cli_stderr_contains(&k, "FutureWarning"));
  }
  /* it returned after tearing down: nothing should need more than a moment */
  check_nothing_left("after SIGINT", 2, "plw", CLI_LO, CLI_HI, (long)k.pid, 10000);
  /* the client's keys went with the cluster */
  LC_CHECK(cdir[0] != '\0' && access(cdir, F_OK) != 0);
}

/*
 * --insecure: the warning says what it means, `env` gives a tcp:// address and no TLS keys, a
 * plain tcp:// client computes; nothing is left after SIGINT.
 */
static void test_cli_insecure(void) {
  const char *args[] = {"start",   "--type",    "dask",        "--workers",  "2",
                        "--hosts", "lab0,lab1", "-F",          th_config(),  "--master-port",
                        "62200",   "--ports",   "62201-62299", "--insecure", NULL};
  client_out out;
  cli k;
  char env[8192] = "", line[1024];
  int ready;
  FILE *p;
  LC_REQUIRE(cli_start(&k, args, NULL, "insecure") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1) {
    fprintf(stderr, "  no \"ready:\" (%d); stdout:\n%s\n  stderr:\n", ready, k.stdout_text);
    cli_show_stderr(&k);
    kill(k.pid, SIGINT);
    cli_reap(&k, 30000);
    LC_REQUIRE(ready == 1);
  }
  LC_CHECK(cli_stderr_contains(&k, "warning: --insecure"));
  LC_CHECK(cli_stderr_contains(&k, "any user who can reach the scheduler's port on any host runs "
                                   "code as you"));
  snprintf(line, sizeof(line), "'%s' env '%s'", getenv("LC_CTL"), k.name);
  if ((p = popen(line, "r")) != NULL) {
    while (fgets(line, sizeof(line), p) != NULL && strlen(env) + strlen(line) < sizeof(env))
      strcat(env, line);
    pclose(p);
  }
  snprintf(line, sizeof(line), "export DASK_SCHEDULER_ADDRESS='tcp://127.0.0.1:%d'", k.master_port);
  LC_CHECK_CONTAINS(env, line);
  LC_CHECK(strstr(env, "TLS") == NULL && strstr(env, "REQUIRE_ENCRYPTION") == NULL);
  LC_CHECK(th_count_procs(0, "/dask worker tcp://127.0.0.1:") +
               th_count_procs(0, "dask-worker tcp://") >=
           1);
  cli_client_computes(&k, &out, 2, "tcp");
  cli_sigint_clean(&k, 60000, "after SIGINT (--insecure)", 2, 10000);
}

/*
 * `run` hands the driver what `env` prints: a driver that calls a plain Client() (no address, no
 * security given) computes on the TLS cluster; its exit status is run's; nothing is left.
 */
static void test_cli_run_driver_plain_client(void) {
  const char *driver = "import os, sys\n"
                       "from dask.distributed import Client\n"
                       "c = Client(timeout=60)\n"
                       "print('driver address', c.scheduler.address, flush=True)\n"
                       "c.wait_for_workers(2, timeout=60)\n"
                       "print('driver sum', sum(c.gather(c.map(lambda x: x * x, range(100)))))\n"
                       "c.close()\n"
                       "sys.exit(7)\n";
  const char *args[] = {"run",     "--type",    "dask",        "--workers", "2",
                        "--hosts", "lab2,lab3", "-F",          th_config(), "--master-port",
                        "62200",   "--ports",   "62201-62299", "--",        python,
                        "-c",      driver,      NULL};
  cli k;
  char text[16384] = "";
  size_t used = 0;
  ssize_t n;
  int st;
  LC_REQUIRE(cli_start(&k, args, NULL, "run") == 0);
  while (used + 1 < sizeof(text) && (n = read(k.out, text + used, sizeof(text) - used - 1)) > 0)
    used += (size_t)n;
  text[used] = '\0';
  st = cli_reap(&k, 300000);
  if (!(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 7)) {
    fprintf(stderr, "  wait status %d; stdout:\n%s\n  stderr:\n", st, text);
    cli_show_stderr(&k);
  }
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 7);
  LC_CHECK_CONTAINS(text, "driver address tls://127.0.0.1:");
  LC_CHECK_CONTAINS(text, "driver sum 328350\n");
  check_nothing_left("after run", HOSTS, "plw", CLI_LO, CLI_HI, (long)k.pid, 10000);
}

/* SIGKILL of lazyclusterctl: the lifelines end everything within the heartbeat limit. */
static void test_cli_sigkill(void) {
  const char *args[] = {"start",       "--type",        "dask",      "--workers",
                        "2",           "--hosts",       "lab2,lab3", "-F",
                        th_config(),   "--master-port", "62200",     "--ports",
                        "62201-62299", "--heartbeat",   "3",         NULL};
  cli k;
  int ready;
  LC_REQUIRE(cli_start(&k, args, NULL, "sigkill") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1) {
    fprintf(stderr, "  no \"ready:\" (%d); stdout:\n%s\n  stderr:\n", ready, k.stdout_text);
    cli_show_stderr(&k);
  }
  LC_CHECK(ready == 1);
  kill(k.pid, SIGKILL);
  cli_reap(&k, 10000);
  /* hosts 2 and 3 are the ones used: look at all four (0 and 1 must stay clean too). First the
   * processes and listeners, then the working directories (their keepers remove them when their
   * lifelines end, here and on the hosts) */
  check_nothing_left("after SIGKILL (heartbeat 3 s)", HOSTS, "pl", CLI_LO, CLI_HI, (long)k.pid,
                     30000);
  check_nothing_left("after SIGKILL (heartbeat 3 s), working directories", HOSTS, "w", CLI_LO,
                     CLI_HI, (long)k.pid, 10000);
}

/* Workers not ready within --timeout: the error says so (the launcher's message), and the start
 * is undone. The worker is held back by a preload that sleeps (the file is on the shared file
 * system, so the host sees it), so the timeout is certain whatever the machine's speed. */
static void test_cli_worker_timeout_message(void) {
  char preload[4200], wargs[4300];
  const char *args[] = {"start",      "--type",  "dask",        "--workers", "1",
                        "--hosts",    "lab0",    "-F",          th_config(), "--master-port",
                        "62200",      "--ports", "62201-62299", "--timeout", "2",
                        "--type-arg", wargs,     NULL};
  FILE *f;
  cli k;
  int st;
  snprintf(preload, sizeof(preload), "%s/dask_slow_preload.py", th_dir());
  LC_REQUIRE((f = fopen(preload, "w")) != NULL);
  fputs("import time\ntime.sleep(60)\n", f);
  fclose(f);
  snprintf(wargs, sizeof(wargs), "worker_args=--preload %s", preload);
  LC_REQUIRE(cli_start(&k, args, NULL, "timeout") == 0);
  LC_CHECK(cli_wait_ready(&k, 300000) == 0); /* ends without "ready:" */
  st = cli_reap(&k, 60000);
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
  if (!cli_stderr_contains(&k, "did not report 1 workers")) {
    fprintf(stderr, "  the message does not give the cause:\n");
    cli_show_stderr(&k);
  }
  LC_CHECK(cli_stderr_contains(&k, "did not report 1 workers"));
  LC_CHECK(cli_stderr_contains(&k, "did not report 1 workers within 2.0 s (the worker timeout "
                                   "given; --timeout S changes it)"));
  LC_CHECK(!cli_stderr_contains(&k, "still running after 0 ms"));
  check_nothing_left("after the failed start", 1, "plw", CLI_LO, CLI_HI, (long)k.pid, 15000);
}

/*
 * A scheduler slower to come up than Dask's own connect timeout (30 s), within the master timeout:
 * the workers, started with it, wait for it instead of giving up ("Nanny failed to start"). The
 * scheduler is held back by a preload that sleeps once (Dask imports a preload twice).
 */
static void test_cli_slow_scheduler(void) {
  char preload[4200], marker[4200], sargs[4300];
  const char *args[] = {"start",       "--type",        "dask",  "--workers",
                        "1",           "--hosts",       "lab0",  "-F",
                        th_config(),   "--master-port", "62200", "--ports",
                        "62201-62299", "--timeout",     "120",   "--master-timeout",
                        "90",          "--type-arg",    sargs,   NULL};
  FILE *f;
  cli k;
  int ready;
  uint64_t t0 = now_ms();
  snprintf(preload, sizeof(preload), "%s/dask_slow_scheduler.py", th_dir());
  snprintf(marker, sizeof(marker), "%s/dask_slow_scheduler.slept", th_dir());
  unlink(marker);
  LC_REQUIRE((f = fopen(preload, "w")) != NULL);
  fprintf(f,
          "import os, time\nif not os.path.exists('%s'):\n    open('%s', 'w').close()\n"
          "    time.sleep(36)\n",
          marker, marker);
  fclose(f);
  snprintf(sargs, sizeof(sargs), "scheduler_args=--preload %s", preload);
  LC_REQUIRE(cli_start(&k, args, NULL, "slow") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1)
    cli_show_stderr(&k);
  LC_CHECK(ready == 1);
  fprintf(stderr, "  ready after %.1f s (the scheduler slept 36 s)\n",
          (double)(now_ms() - t0) / 1000.0);
  LC_CHECK(now_ms() - t0 >= 36000);
  cli_sigint_clean(&k, 60000, "after the slow start", 1, 15000);
  unlink(marker);
}

/* A Dask worker that fails at start (an option dask-worker does not know): the error names the
 * worker and its host, its exit status and its last stderr lines, and the start is undone. */
static void test_cli_worker_fails_at_start(void) {
  const char *args[] = {
      "start",   "--type",  "dask",        "--workers",  "1",
      "--hosts", "lab0",    "-F",          th_config(),  "--master-port",
      "62200",   "--ports", "62201-62299", "--type-arg", "worker_args=--no-such-option-lc",
      NULL};
  cli k;
  int st;
  LC_REQUIRE(cli_start(&k, args, NULL, "fails") == 0);
  LC_CHECK(cli_wait_ready(&k, 300000) == 0); /* ends without "ready:" */
  st = cli_reap(&k, 60000);
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
  if (!cli_stderr_contains(&k, "it exited with status 2; its last stderr lines:"))
    cli_show_stderr(&k);
  LC_CHECK(cli_stderr_contains(&k, "lab0 worker-0 "));
  LC_CHECK(cli_stderr_contains(&k, "it exited with status 2; its last stderr lines:"));
  LC_CHECK(cli_stderr_contains(&k, "no-such-option-lc"));
  check_nothing_left("after the worker failed", 1, "plw", CLI_LO, CLI_HI, (long)k.pid, 15000);
}

/*
 * The defaults a user gets, at the size the issue saw fail: `start --type dask --workers 16` on
 * the 4 hosts with no limit given. It must start (the dask type's limits hold on this 2-CPU
 * machine), compute, and after SIGINT leave nothing on any host or here.
 */
static void test_cli_defaults_16_workers(void) {
  const char *args[] = {"start",
                        "--type",
                        "dask",
                        "--workers",
                        "16",
                        "--hosts",
                        "lab0,lab1,lab2,lab3",
                        "-F",
                        th_config(),
                        "--master-port",
                        "62200",
                        "--ports",
                        "62201-62299",
                        NULL};
  int per_host[HOSTS] = {0};
  client_out out;
  cli k;
  uint64_t t0 = now_ms();
  int ready;
  LC_REQUIRE(cli_start(&k, args, NULL, "defaults16") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1) {
    fprintf(stderr, "  no \"ready:\" (%d); stdout:\n%s\n  stderr:\n", ready, k.stdout_text);
    cli_show_stderr(&k);
    kill(k.pid, SIGINT);
    cli_reap(&k, 60000);
    LC_REQUIRE(ready == 1);
  }
  fprintf(stderr, "  16 workers ready after %.1f s with the dask type's limits\n",
          (double)(now_ms() - t0) / 1000.0);
  LC_CHECK(k.nworkers == 16);
  for (int i = 0; i < k.nworkers; i++)
    if (strncmp(k.whost[i], "lab", 3) == 0 && atoi(k.whost[i] + 3) < HOSTS)
      per_host[atoi(k.whost[i] + 3)]++;
  for (int h = 0; h < HOSTS; h++)
    LC_CHECK(per_host[h] == 4);
  cli_client_computes(&k, &out, 16, "tls");
  cli_sigint_clean(&k, 120000, "after SIGINT of 16 workers", HOSTS, 15000);
}

/*
 * A scheduler that never listens (a preload that sleeps), started with no limit given: the start
 * fails after the dask type's master timeout, and the message says so and names the flag.
 */
static void test_cli_master_timeout_default(void) {
  char preload[4200], sargs[4300];
  const char *args[] = {"start",       "--type",        "dask",  "--workers",
                        "1",           "--hosts",       "lab0",  "-F",
                        th_config(),   "--master-port", "62200", "--ports",
                        "62201-62299", "--type-arg",    sargs,   NULL};
  FILE *f;
  cli k;
  int st;
  snprintf(preload, sizeof(preload), "%s/dask_never_scheduler.py", th_dir());
  LC_REQUIRE((f = fopen(preload, "w")) != NULL);
  fputs("import time\ntime.sleep(300)\n", f);
  fclose(f);
  snprintf(sargs, sizeof(sargs), "scheduler_args=--preload %s", preload);
  LC_REQUIRE(cli_start(&k, args, NULL, "never") == 0);
  LC_CHECK(cli_wait_ready(&k, 300000) == 0); /* ends without "ready:" */
  st = cli_reap(&k, 60000);
  LC_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
  if (!cli_stderr_contains(&k, "(the dask type's default master timeout;"))
    cli_show_stderr(&k);
  LC_CHECK(cli_stderr_contains(&k, "localhost: the master did not start on port "));
  LC_CHECK(cli_stderr_contains(&k, " within 30 s (the dask type's default master timeout; "
                                   "--master-timeout S changes it): it still runs"));
  check_nothing_left("after the master timed out", 1, "plw", CLI_LO, CLI_HI, (long)k.pid, 15000);
}

/* A python3 without Dask first in PATH (here: the Dask interpreter with -S, so without its
 * site-packages, like a virtualenv without system packages) must not break the readiness check:
 * the scheduler itself runs under the interpreter Dask is installed for. */
static void test_cli_python3_without_dask_in_path(void) {
  char dir[4200], script[4300], path[8192], cmd[8400];
  const char *args[] = {"start",   "--type",  "dask",        "--workers", "1",
                        "--hosts", "lab1",    "-F",          th_config(), "--master-port",
                        "62200",   "--ports", "62201-62299", NULL};
  FILE *f;
  cli k;
  int ready, st;
  snprintf(dir, sizeof(dir), "%s/venv-bin", th_dir());
  snprintf(script, sizeof(script), "%s/python3", dir);
  mkdir(dir, 0755);
  LC_REQUIRE((f = fopen(script, "w")) != NULL);
  fprintf(f, "#!/bin/sh\nexec %s -S \"$@\"\n", python);
  fclose(f);
  chmod(script, 0755);
  snprintf(cmd, sizeof(cmd), "%s -c 'import distributed' 2>/dev/null", script);
  LC_REQUIRE(system(cmd) != 0); /* the stand-in has no Dask indeed */
  snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  LC_REQUIRE(cli_start(&k, args, path, "venv") == 0);
  ready = cli_wait_ready(&k, 300000);
  if (ready != 1) {
    fprintf(stderr, "  no \"ready:\" with a python3 without Dask first in PATH; stderr:\n");
    cli_show_stderr(&k);
  }
  LC_CHECK(ready == 1);
  kill(k.pid, SIGINT);
  st = cli_reap(&k, 60000);
  LC_CHECK(st != -1 && WIFEXITED(st));
  check_nothing_left("after the python3 test", 2, "plw", CLI_LO, CLI_HI, (long)k.pid, 15000);
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* The interpreter Dask is installed for: python3 when it has distributed, else the one
 * dask's (or dask-scheduler's) #! line names. When python3 in PATH is not that one, PATH is changed
 * so that it is (the dask type's readiness check runs plain `python3` here: see the python3 test).
 */
static int find_python(void) {
  FILE *p;
  char line[4096];
  if (system("python3 -c 'import distributed' >/dev/null 2>&1") == 0) {
    if ((p = popen("python3 -c 'import sys; print(sys.executable)'", "r")) != NULL) {
      if (fgets(line, sizeof(line), p) != NULL && line[0] == '/') {
        line[strcspn(line, "\n")] = '\0';
        snprintf(python, sizeof(python), "%s", line);
      }
      pclose(p);
    }
    return 0;
  }
  if ((p = popen("head -1 \"$(command -v dask || command -v dask-scheduler)\" 2>/dev/null", "r")) ==
      NULL)
    return -1;
  line[0] = '\0';
  if (fgets(line, sizeof(line), p) == NULL)
    line[0] = '\0';
  pclose(p);
  line[strcspn(line, "\n")] = '\0';
  if (strncmp(line, "#!/", 3) != 0 || strchr(line, ' ') != NULL) {
    fprintf(stderr, "FATAL: Dask is not installed (apt-get install python3-distributed): no "
                    "python3 with distributed, no dask-scheduler\n");
    return -1;
  }
  snprintf(python, sizeof(python), "%s", line + 2);
  {
    char dir[4096], *slash, path[16384];
    snprintf(dir, sizeof(dir), "%s", python);
    if ((slash = strrchr(dir, '/')) != NULL)
      *slash = '\0';
    snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH") ? getenv("PATH") : "");
    setenv("PATH", path, 1);
    fprintf(stderr, "note: python3 in PATH has no Dask; using %s, with %s first in PATH\n", python,
            dir);
  }
  return system("python3 -c 'import distributed' >/dev/null 2>&1") == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_dask_programs),
      LC_TEST(test_library_cluster),
      LC_TEST(test_listens_on_localhost_only),
      LC_TEST(test_tls_files_and_ps),
      LC_TEST(test_tls_refuses_strangers),
      LC_TEST(test_scale_down_keeps_data),
      LC_TEST(test_library_cleanup),
      LC_TEST(test_cli_sigint),
      LC_TEST(test_cli_insecure),
      LC_TEST(test_cli_run_driver_plain_client),
      LC_TEST(test_cli_sigkill),
      LC_TEST(test_cli_worker_timeout_message),
      LC_TEST(test_cli_worker_fails_at_start),
      LC_TEST(test_cli_slow_scheduler),
      LC_TEST(test_cli_python3_without_dask_in_path),
      LC_TEST(test_cli_master_timeout_default),
      LC_TEST(test_cli_defaults_16_workers),
  };
  FILE *f;
  int r;
  signal(SIGPIPE, SIG_IGN);
  gethostname(hostname_here, sizeof(hostname_here) - 1);
  if (find_python() < 0)
    return 2;
  snprintf(client_py, sizeof(client_py), "%s/dask_client.py", th_dir());
  if ((f = fopen(client_py, "w")) == NULL || fputs(client_source, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "FATAL: cannot write %s\n", client_py);
    return 2;
  }
  if (lc_engine_new(&engine, NULL) < 0 || lc_group_new(&group, engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_cluster_free(cluster);
  lc_group_free(group);
  if (dask != NULL && dask->release != NULL)
    dask->release(dask_master, dask_worker);
  lc_engine_free(engine);
  return r;
}
