/*
 * cluster.c - a master and workers over a group. The launchers say what to run; this file does
 * what every cluster type needs: ports, placement, each worker's context, readiness (polled by
 * waiting on the process with a short limit, then reading the host's listening ports: never a
 * fixed sleep), tunnels, and undoing a start that failed.
 */
#include "ports_internal.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLL_MS 50
#define TAIL_LINES 8

/* The last lines a process wrote to stderr, for error messages. */
typedef struct tail {
  char *line[TAIL_LINES];
  size_t next;
} tail;

typedef struct proc_tag {
  lc_cluster *c;
  char tag[160];
  tail err;
} proc_tag;

typedef struct cworker {
  lc_worker_info info;
  char *host;
  char *workdir;
  lc_runtime *rt;
  lc_process *proc;
  proc_tag *tag;
  int ready;
} cworker;

struct lc_cluster {
  lc_group *group;
  lc_master_launcher *m;
  lc_worker_launcher *w;
  lc_cluster_options opts;
  char *master_host_opt;
  char **env;
  size_t nenv;
  lc_ports *worker_ports;
  lc_runtime *local; /* our own local runtime for a master on this machine */
  lc_runtime *master_rt;
  lc_process *master_proc;
  proc_tag *master_tag;
  int master_port;
  lc__fwdlist fwds;
  cworker *workers;
  size_t nworkers, capworkers;
  int *ports; /* reserved by this cluster */
  size_t nports, capports;
  lc__buf log;
  pthread_mutex_t mu; /* tails: written on the engine thread, read here */
};

void lc_cluster_options_init(lc_cluster_options *opts) {
  lc_cluster_options init = LC_CLUSTER_OPTIONS_INIT;
  *opts = init;
}

static void logf_(lc_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logf_(lc_cluster *c, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  lc__buf_puts(&c->log, line);
  lc__buf_puts(&c->log, "\n");
}

/* ---- output --------------------------------------------------------------------------------- */

static void on_line(const char *line, size_t len, lc_stream stream, void *payload) {
  proc_tag *t = payload;
  lc_cluster *c = t->c;
  if (stream == LC_STDERR) {
    pthread_mutex_lock(&c->mu);
    free(t->err.line[t->err.next % TAIL_LINES]);
    t->err.line[t->err.next % TAIL_LINES] = lc__strndup(line, len < 400 ? len : 400);
    t->err.next++;
    pthread_mutex_unlock(&c->mu);
  }
  if (c->opts.on_line != NULL)
    c->opts.on_line(t->tag, line, len, stream, c->opts.payload);
}

/* "exit status 1; last stderr: ... | ..." for a message. */
static void describe(lc_cluster *c, proc_tag *t, lc_process *p, char *out, size_t size) {
  lc_exec_result res = {.exit_status = -1};
  size_t used = 0;
  int finished = lc_process_wait(&res, p, 0) == 0;
  if (finished && res.signal)
    used = (size_t)snprintf(out, size, "it was ended by signal %d", res.signal);
  else if (finished)
    used = (size_t)snprintf(out, size, "it exited with status %d", res.exit_status);
  else
    used = (size_t)snprintf(out, size, "it still runs");
  pthread_mutex_lock(&c->mu);
  if (t->err.next > 0 && used < size)
    used += (size_t)snprintf(out + used, size - used, "; its last stderr lines:");
  for (size_t i = t->err.next > TAIL_LINES ? t->err.next - TAIL_LINES : 0; i < t->err.next; i++)
    if (used < size)
      used += (size_t)snprintf(out + used, size - used, "\n    %s", t->err.line[i % TAIL_LINES]);
  pthread_mutex_unlock(&c->mu);
}

static proc_tag *tag_new(lc_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static proc_tag *tag_new(lc_cluster *c, const char *fmt, ...) {
  proc_tag *t = lc__calloc(1, sizeof(*t));
  va_list ap;
  if (t == NULL)
    return NULL;
  t->c = c;
  va_start(ap, fmt);
  vsnprintf(t->tag, sizeof(t->tag), fmt, ap);
  va_end(ap);
  return t;
}

static void tag_free(proc_tag *t) {
  if (t == NULL)
    return;
  for (size_t i = 0; i < TAIL_LINES; i++)
    free(t->err.line[i]);
  free(t);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int lc_cluster_new(lc_cluster **out, lc_group *group, lc_master_launcher *master,
                   lc_worker_launcher *worker, const lc_cluster_options *opts) {
  lc_cluster *c = NULL;
  int r = 0;

  *out = NULL;
  if (group == NULL || master == NULL || worker == NULL || master->command == NULL ||
      worker->command == NULL)
    return lc__error_set(-EINVAL, "cluster: a group and two launchers with a command are needed");
  if (master->version < 1 || worker->version < 1)
    return lc__error_set(-EINVAL, "cluster: launcher version %u/%u is unknown (want >= 1)",
                         master->version, worker->version);
  if ((c = lc__calloc(1, sizeof(*c))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  pthread_mutex_init(&c->mu, NULL);
  c->group = group;
  c->m = master;
  c->w = worker;
  if (opts != NULL)
    c->opts = *opts;
  if (c->opts.master_port <= 0)
    c->opts.master_port = 60000;
  if (c->opts.master_timeout_ms <= 0)
    c->opts.master_timeout_ms = 3000;
  if (c->opts.worker_timeout_ms <= 0)
    c->opts.worker_timeout_ms = 30000;
  if (c->opts.master_port > 65535) {
    r = lc__error_set(-EINVAL, "cluster: master port %d is out of range", c->opts.master_port);
    goto out;
  }
  if ((r = lc_ports_parse(&c->worker_ports,
                          c->opts.worker_ports ? c->opts.worker_ports : "60001-60199")) < 0)
    goto out;
  c->opts.worker_ports = NULL;
  if (c->opts.master_host != NULL && (c->master_host_opt = lc__strdup(c->opts.master_host)) == NULL)
    r = lc__error_set(-ENOMEM, "out of memory");
  c->opts.master_host = c->master_host_opt;
  for (const char *const *e = c->opts.env; r == 0 && e != NULL && *e != NULL; e++) {
    char **v = lc__realloc(c->env, (c->nenv + 2) * sizeof(*v));
    if (v == NULL || (v[c->nenv] = lc__strdup(*e)) == NULL) {
      if (v != NULL)
        c->env = v;
      r = lc__error_set(-ENOMEM, "out of memory");
      break;
    }
    c->env = v;
    c->env[++c->nenv] = NULL;
  }
  c->opts.env = NULL;
out:
  if (r < 0) {
    lc_cluster_free(c);
    return r;
  }
  *out = c;
  return 0;
}

static void release_ports(lc_cluster *c, size_t from) {
  for (size_t i = from; i < c->nports; i++)
    lc_port_release(c->ports[i]);
  c->nports = from;
}

static int keep_port(lc_cluster *c, int port) {
  if (c->nports == c->capports) {
    size_t cap = c->capports ? c->capports * 2 : 64;
    int *v = lc__realloc(c->ports, cap * sizeof(*v));
    if (v == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    c->ports = v;
    c->capports = cap;
  }
  c->ports[c->nports++] = port;
  return 0;
}

static void worker_clear(cworker *w) {
  lc_process_free(w->proc);
  tag_free(w->tag);
  free(w->host);
  free(w->workdir);
  memset(w, 0, sizeof(*w));
}

void lc_cluster_free(lc_cluster *c) {
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->nworkers; i++)
    worker_clear(&c->workers[i]);
  lc_process_free(c->master_proc);
  tag_free(c->master_tag);
  lc__fwdlist_free(&c->fwds);
  release_ports(c, 0);
  lc_runtime_free(c->local);
  lc_ports_free(c->worker_ports);
  for (size_t i = 0; i < c->nenv; i++)
    free(c->env[i]);
  free(c->env);
  free(c->workers);
  free(c->ports);
  free(c->master_host_opt);
  lc__buf_free(&c->log);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

int lc_cluster_master_port(const lc_cluster *c) { return c->master_port; }
const char *lc_cluster_master_host(const lc_cluster *c) {
  return c->master_rt ? lc_runtime_name(c->master_rt) : NULL;
}
lc_group *lc_cluster_group(const lc_cluster *c) { return c->group; }
lc_runtime *lc__cluster_master_runtime(const lc_cluster *c) { return c->master_rt; }
size_t lc_cluster_worker_count(const lc_cluster *c) { return c->nworkers; }
const lc_worker_info *lc_cluster_worker(const lc_cluster *c, size_t i) {
  return i < c->nworkers ? &c->workers[i].info : NULL;
}
const char *lc_cluster_log(const lc_cluster *c) { return c->log.data ? c->log.data : ""; }

/* ---- ports ---------------------------------------------------------------------------------- */

/* Every runtime the cluster uses: the group's, and our own local one. */
static size_t cluster_runtimes(lc_cluster *c, lc_runtime **v, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < lc_group_count(c->group) && n < max; i++)
    v[n++] = lc_group_at(c->group, i);
  if (c->local != NULL && n < max)
    v[n++] = c->local;
  return n;
}

/* Where port is taken: "this machine" or a host's name; NULL when nowhere. */
static const char *port_taken_where(lc_cluster *c, int port) {
  lc_runtime *rts[1024];
  size_t n = cluster_runtimes(c, rts, 1024);
  if (lc_port_is_free_local(port) == 0 || lc_port_is_reserved(port))
    return "this machine";
  for (size_t i = 0; i < n; i++) {
    lc_ports *l = NULL;
    int taken = lc_ports_listening(&l, rts[i], 10000) == 0 && lc_ports_contains(l, port);
    lc_ports_free(l);
    if (taken)
      return lc_runtime_name(rts[i]);
  }
  return NULL;
}

/* A port free on every host and here, from ranges; reserved for the cluster. */
static int pick_port(lc_cluster *c, int *out, const lc_ports *ranges) {
  lc_runtime *rts[1024];
  size_t n = cluster_runtimes(c, rts, 1024);
  int r;
  if ((r = lc_ports_common_free(out, rts, n, ranges)) < 0)
    return r;
  if ((r = keep_port(c, *out)) < 0)
    lc_port_release(*out);
  return r;
}

/* Every group runtime's listening ports, one listing each and all at once. */
typedef struct scan {
  lc_group *g;
  lc__portscan *per; /* one per group runtime, in group order */
} scan;

static void scan_line(const char *host, const char *line, size_t len, lc_stream stream,
                      void *payload) {
  scan *sc = payload;
  if (stream != LC_STDOUT)
    return;
  for (size_t i = 0; i < lc_group_count(sc->g); i++)
    if (strcmp(lc_runtime_name(lc_group_at(sc->g, i)), host) == 0) {
      lc__portscan_line(&sc->per[i], line, len);
      return;
    }
}

static int scan_group(lc_cluster *c, scan *sc) {
  lc_group_report *rep = NULL;
  int r;
  sc->g = c->group;
  if ((sc->per = lc__calloc(lc_group_count(c->group), sizeof(*sc->per))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  if ((r = lc_group_exec(&rep, c->group, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; exit 0", NULL,
                         scan_line, sc)) < 0)
    return r;
  for (size_t i = 0; i < lc_group_report_count(rep); i++)
    if (lc_group_report_error(rep, i) != 0 || sc->per[i].headers == 0) {
      r = lc__error_set(LC_EREMOTE, "%s: cannot read its listening ports: %s",
                        lc_group_report_host(rep, i), lc_group_report_message(rep, i));
      break;
    }
  lc_group_report_free(rep);
  return r;
}

static int scan_has(const scan *sc, size_t i, int port) {
  return (sc->per[i].listening[port / 8] >> (port % 8)) & 1;
}

static size_t group_index(lc_cluster *c, lc_runtime *rt) {
  for (size_t i = 0; i < lc_group_count(c->group); i++)
    if (lc_group_at(c->group, i) == rt)
      return i;
  return (size_t)-1;
}

/* n ports from the worker ranges, free on every host (one scan) and here, reserved. */
static int pick_ports(lc_cluster *c, int *out, size_t n) {
  scan sc = {0};
  size_t got = 0;
  int r;
  if ((r = scan_group(c, &sc)) < 0)
    goto out;
  for (size_t k = 0; k < lc_ports_count(c->worker_ports) && got < n; k++) {
    int port = lc_ports_at(c->worker_ports, k), taken = 0;
    for (size_t i = 0; i < lc_group_count(c->group) && !taken; i++)
      taken = scan_has(&sc, i, port);
    if (taken || lc_port_reserve(port) < 0)
      continue;
    if (lc_port_is_free_local(port) != 1 || keep_port(c, port) < 0) {
      lc_port_release(port);
      continue;
    }
    out[got++] = port;
  }
  if (got < n) {
    char *ranges = NULL;
    lc_ports_format(&ranges, c->worker_ports);
    r = lc__error_set(LC_ENOPORTS, "no free port left in %s: %zu needed, %zu free on all %zu "
                                   "hosts and this machine",
                      ranges ? ranges : "the worker ranges", n, got, lc_group_count(c->group));
    lc_free(ranges);
  }
out:
  free(sc.per);
  return r;
}

/* ---- readiness ------------------------------------------------------------------------------ */

/* Waits for port to listen on rt while p lives; -ETIMEDOUT or LC_EREMOTE (p ended). */
static int wait_listening(lc_runtime *rt, lc_process *p, int port, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    lc_ports *l = NULL;
    int up;
    if (lc_process_wait(NULL, p, 0) != -ETIMEDOUT)
      return LC_EREMOTE;
    up = lc_ports_listening(&l, rt, 10000) == 0 && lc_ports_contains(l, port);
    lc_ports_free(l);
    /* listening, and still alive: a process that died of "address in use" is not ready */
    if (up && lc_process_wait(NULL, p, 0) == -ETIMEDOUT)
      return 0;
    if (up)
      return LC_EREMOTE;
    if (lc__now_ms() >= deadline)
      return -ETIMEDOUT;
    /* the poll interval is a wait on the process: an exit ends it at once */
    if (lc_process_wait(NULL, p, POLL_MS) != -ETIMEDOUT)
      return LC_EREMOTE;
  }
}

/* ---- the master ----------------------------------------------------------------------------- */

static char **env_with(lc_cluster *c, const char *const *more, size_t nmore) {
  char **v = lc__calloc(c->nenv + nmore + 1, sizeof(*v));
  if (v == NULL)
    return NULL;
  for (size_t i = 0; i < c->nenv; i++)
    v[i] = c->env[i];
  for (size_t i = 0; i < nmore; i++)
    v[c->nenv + i] = (char *)more[i];
  return v;
}

static int master_try(lc_cluster *c, int port, int *retry) {
  char *cmd = NULL, penv[64], msg[4096];
  const char *more[2] = {penv, "LAZYCLUSTER_MASTER_ADDR=localhost"};
  char **env = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const char *wd = NULL;
  int r;

  *retry = 0;
  snprintf(penv, sizeof(penv), "LAZYCLUSTER_MASTER_PORT=%d", port);
  if ((r = c->m->command(c->m, c, port, &cmd)) < 0)
    return r;
  if ((env = env_with(c, more, 2)) == NULL ||
      (c->master_tag = tag_new(c, "%s master", lc_runtime_name(c->master_rt))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((r = lc_runtime_workdir(&wd, c->master_rt)) < 0)
    goto out;
  eo.env = (const char *const *)env;
  eo.cwd = wd;
  eo.on_line = on_line;
  eo.payload = c->master_tag;
  if ((r = lc_runtime_spawn(&c->master_proc, c->master_rt, cmd, &eo)) < 0)
    goto out;
  logf_(c, "%s master starting on port %d: %s", lc_runtime_name(c->master_rt), port, cmd);
  if (c->m->wait_ready != NULL)
    r = c->m->wait_ready(c->m, c, port, c->opts.master_timeout_ms);
  else
    r = wait_listening(c->master_rt, c->master_proc, port, c->opts.master_timeout_ms);
  if (r < 0) {
    describe(c, c->master_tag, c->master_proc, msg, sizeof(msg));
    *retry = r == LC_EREMOTE && !c->opts.master_port_fixed &&
             (strstr(msg, "in use") != NULL || strstr(msg, "EADDRINUSE") != NULL);
    r = lc__error_set(r == LC_EREMOTE ? LC_EREMOTE : -ETIMEDOUT,
                      "%s: the master did not start on port %d %s: %s",
                      lc_runtime_name(c->master_rt), port,
                      r == LC_EREMOTE ? "(it died)"
                                      : "within the master timeout",
                      msg);
    lc_process_free(c->master_proc);
    c->master_proc = NULL;
    tag_free(c->master_tag);
    c->master_tag = NULL;
  }
out:
  lc_free(cmd);
  free(env);
  return r;
}

int lc_cluster_start_master(lc_cluster *c) {
  lc_ports *ranges = NULL;
  size_t mark = c->nports;
  int port = 0, r, retry = 0;

  if (c->master_proc != NULL)
    return lc__error_set(-EINVAL, "cluster: the master already runs on port %d", c->master_port);
  if (c->opts.master_host != NULL) {
    if ((c->master_rt = lc_group_find(c->group, c->opts.master_host)) == NULL)
      return lc__error_set(-ENOENT, "cluster: the master's host %s is not in the group",
                           c->opts.master_host);
  } else if ((c->master_rt = lc_group_find(c->group, "localhost")) == NULL) {
    if (c->local == NULL && (r = lc_runtime_new_local(&c->local, lc__group_engine(c->group),
                                                      NULL)) < 0)
      return r;
    c->master_rt = c->local;
  }
  /* the asked port first; unless it is fixed, then the worker ranges */
  for (int attempt = 0; attempt < 5; attempt++) {
    if (attempt == 0) {
      if ((r = lc_ports_new(&ranges)) < 0 || (r = lc_ports_add(ranges, c->opts.master_port,
                                                               c->opts.master_port)) < 0)
        goto out;
      r = pick_port(c, &port, ranges);
      lc_ports_free(ranges);
      ranges = NULL;
      if (r == LC_ENOPORTS && c->opts.master_port_fixed) {
        const char *where = port_taken_where(c, c->opts.master_port);
        r = lc__error_set(-EADDRINUSE, "port %d is in use on %s", c->opts.master_port,
                          where ? where : "a host");
        goto out;
      }
    } else {
      r = LC_ENOPORTS;
    }
    if (r == LC_ENOPORTS && !c->opts.master_port_fixed)
      r = pick_port(c, &port, c->worker_ports);
    if (r < 0)
      goto out;
    if ((r = master_try(c, port, &retry)) == 0 || !retry)
      break;
    logf_(c, "port %d was taken after all: trying another", port);
  }
  if (r < 0)
    goto out;
  c->master_port = port;
  if ((r = lc__group_expose(c->group, c->master_rt == c->local ? NULL : c->master_rt, port,
                            &c->fwds)) < 0)
    goto out;
  logf_(c, "%s master ready on port %d", lc_runtime_name(c->master_rt), port);
out:
  if (r < 0) {
    lc_process_free(c->master_proc);
    c->master_proc = NULL;
    c->master_port = 0;
    release_ports(c, mark);
  }
  return r;
}

/* ---- workers -------------------------------------------------------------------------------- */

typedef struct slot {
  lc_runtime *rt;
  int gpu;
} slot;

/* One slot per GPU on hosts with GPUs, else the declared slots, else one per host. */
static slot *placement(lc_cluster *c, size_t *count) {
  size_t n = 0, cap = 16;
  slot *s = lc__calloc(cap, sizeof(*s));
  for (size_t i = 0; s != NULL && i < lc_group_count(c->group); i++) {
    lc_runtime *rt = lc_group_at(c->group, i);
    int gpus = lc_runtime_gpus(rt), slots = lc_runtime_slots(rt);
    int k = gpus > 0 ? gpus : slots > 0 ? slots : 1;
    for (int j = 0; j < k; j++) {
      if (n == cap) {
        slot *v = lc__realloc(s, (cap *= 2) * sizeof(*s));
        if (v == NULL) {
          free(s);
          return NULL;
        }
        s = v;
      }
      s[n].rt = rt;
      s[n].gpu = gpus > 0 ? j : -1;
      n++;
    }
  }
  *count = n;
  return s;
}

/* TF_CONFIG-style spec of the whole cluster, and this worker's task in it. */
static int cluster_spec(lc_cluster *c, lc__buf *b, int index) {
  lc__buf_printf(b, "{\"cluster\":{\"master\":[\"localhost:%d\"],\"worker\":[", c->master_port);
  for (size_t i = 0; i < c->nworkers; i++)
    lc__buf_printf(b, "%s\"localhost:%d\"", i ? "," : "", c->workers[i].info.port);
  return lc__buf_printf(b, "]},\"task\":{\"type\":\"worker\",\"index\":%d}}", index);
}

static int cluster_json(lc_cluster *c, lc__buf *b, const cworker *w) {
  lc__buf_printf(b, "{\"master\":{\"addr\":\"localhost\",\"port\":%d,\"host\":\"%s\"},",
                 c->master_port, lc_runtime_name(c->master_rt));
  lc__buf_printf(b, "\"worker_index\":%d,\"worker_count\":%d,\"host\":\"%s\",\"port\":%d,"
                    "\"gpu\":%d,\"workdir\":\"%s\",\"workers\":[",
                 w->info.index, w->info.count, w->host, w->info.port, w->info.gpu, w->workdir);
  for (size_t i = 0; i < c->nworkers; i++)
    lc__buf_printf(b, "%s{\"index\":%d,\"host\":\"%s\",\"port\":%d,\"gpu\":%d}", i ? "," : "",
                   c->workers[i].info.index, c->workers[i].host, c->workers[i].info.port,
                   c->workers[i].info.gpu);
  lc__buf_puts(b, "],\"tf_config\":");
  cluster_spec(c, b, w->info.index);
  return lc__buf_puts(b, "}\n");
}

/* Starts worker w: its directory and cluster.json are made by the same command that runs it. */
static int worker_spawn(lc_cluster *c, cworker *w) {
  lc__buf spec = {0}, js = {0}, full = {0};
  char *cmd = NULL, *q_dir = NULL, *q_json = NULL, *host_env = NULL, *dir_env = NULL;
  char *tf_env = NULL, e[5][64];
  const char *more[10];
  char **env = NULL;
  size_t nmore = 0;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;

  if ((r = c->w->command(c->w, c, &w->info, &cmd)) < 0)
    return r;
  snprintf(e[0], sizeof(e[0]), "LAZYCLUSTER_MASTER_PORT=%d", c->master_port);
  snprintf(e[1], sizeof(e[1]), "LAZYCLUSTER_WORKER_INDEX=%d", w->info.index);
  snprintf(e[2], sizeof(e[2]), "LAZYCLUSTER_WORKER_COUNT=%d", w->info.count);
  snprintf(e[3], sizeof(e[3]), "LAZYCLUSTER_WORKER_PORT=%d", w->info.port);
  snprintf(e[4], sizeof(e[4]), "CUDA_VISIBLE_DEVICES=%d", w->info.gpu);
  for (int i = 0; i < 4; i++)
    more[nmore++] = e[i];
  more[nmore++] = "LAZYCLUSTER_MASTER_ADDR=localhost";
  cluster_spec(c, &spec, w->info.index);
  host_env = lc__sprintf("LAZYCLUSTER_HOST=%s", w->host);
  dir_env = lc__sprintf("LAZYCLUSTER_WORKDIR=%s", w->workdir);
  tf_env = lc__sprintf("TF_CONFIG=%s", spec.data ? spec.data : "{}");
  more[nmore++] = host_env;
  more[nmore++] = dir_env;
  more[nmore++] = tf_env;
  if (w->info.gpu >= 0) {
    more[nmore++] = e[4];
    more[nmore++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
  }
  cluster_json(c, &js, w);
  if (host_env == NULL || dir_env == NULL || tf_env == NULL ||
      (env = env_with(c, more, nmore)) == NULL || lc_shell_quote(&q_dir, w->workdir) < 0 ||
      lc_shell_quote(&q_json, js.data) < 0 ||
      lc__buf_printf(&full, "mkdir -p %s && cd %s && printf '%%s' %s > cluster.json || exit 125\n%s",
                     q_dir, q_dir, q_json, cmd) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  eo.env = (const char *const *)env;
  eo.on_line = on_line;
  eo.payload = w->tag;
  if ((r = lc_runtime_spawn(&w->proc, w->rt, full.data, &eo)) == 0)
    logf_(c, "%s starting on port %d%s: %s", w->tag->tag, w->info.port,
          w->info.gpu >= 0 ? " with its GPU" : "", cmd);
out:
  lc_free(q_dir);
  lc_free(q_json);
  free(host_env);
  free(dir_env);
  free(tf_env);
  free(env);
  lc__buf_free(&spec);
  lc__buf_free(&js);
  lc__buf_free(&full);
  lc_free(cmd);
  return r;
}

int lc_cluster_start_workers(lc_cluster *c, int n) {
  size_t first = c->nworkers, mark = c->nports, nslots = 0, fwd_mark = c->fwds.n;
  slot *slots = NULL;
  int *ports = NULL;
  char msg[4096];
  uint64_t deadline;
  int r = 0;

  if (n < 1)
    return lc__error_set(-EINVAL, "cluster: %d workers asked for", n);
  if (c->master_proc == NULL)
    return lc__error_set(-EINVAL, "cluster: start the master first");
  if ((slots = placement(c, &nslots)) == NULL || nslots == 0) {
    free(slots);
    return lc__error_set(nslots == 0 ? -EINVAL : -ENOMEM, "cluster: no host to place workers on");
  }
  if (c->nworkers + (size_t)n > c->capworkers) {
    size_t cap = c->nworkers + (size_t)n + 16;
    cworker *v = lc__realloc(c->workers, cap * sizeof(*v));
    if (v == NULL) {
      free(slots);
      return lc__error_set(-ENOMEM, "out of memory");
    }
    c->workers = v;
    c->capworkers = cap;
  }
  /* every new worker gets its place and port before any starts: each sees the whole cluster */
  if (!c->w->portless) {
    size_t per = c->w->aux_port ? 2 : 1;
    if ((ports = lc__calloc((size_t)n * per, sizeof(*ports))) == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    if ((r = pick_ports(c, ports, (size_t)n * per)) < 0)
      goto out;
  }
  for (int k = 0; k < n; k++) {
    cworker *w = &c->workers[c->nworkers];
    size_t idx = c->nworkers;
    const char *wd = NULL;
    memset(w, 0, sizeof(*w));
    w->rt = slots[idx % nslots].rt;
    w->info.gpu = slots[idx % nslots].gpu;
    w->info.index = (int)idx;
    w->info.master_port = c->master_port;
    if (!c->w->portless) {
      w->info.port = ports[k * (c->w->aux_port ? 2 : 1)];
      if (c->w->aux_port)
        w->info.aux_port = ports[k * 2 + 1];
    }
    if ((r = lc_runtime_workdir(&wd, w->rt)) < 0)
      goto out;
    w->host = lc__strdup(lc_runtime_name(w->rt));
    w->workdir = lc__sprintf("%s/worker-%d", wd, w->info.index);
    w->tag = tag_new(c, "%s worker-%d", lc_runtime_name(w->rt), w->info.index);
    if (w->host == NULL || w->workdir == NULL || w->tag == NULL) {
      c->nworkers++;
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    w->info.host = w->host;
    w->info.workdir = w->workdir;
    c->nworkers++;
  }
  for (size_t i = 0; i < c->nworkers; i++)
    c->workers[i].info.count = (int)c->nworkers;
  for (size_t i = first; i < c->nworkers; i++) {
    if ((r = worker_spawn(c, &c->workers[i])) < 0)
      goto out;
    if (c->w->mesh == LC_WORKER_MESH && !c->w->portless &&
        (r = lc__group_expose(c->group, c->workers[i].rt, c->workers[i].info.port, &c->fwds)) <
            0)
      goto out;
    if (c->w->mesh == LC_WORKER_HERE && !c->w->portless &&
        c->workers[i].rt->ops != &lc__local_ops) {
      lc_forward *f = NULL;
      if ((r = lc_forward_new(&f, c->workers[i].rt, LC_FORWARD_LOCAL, c->workers[i].info.port,
                              "127.0.0.1", c->workers[i].info.port, NULL)) < 0 ||
          (r = lc__fwdlist_add(&c->fwds, f)) < 0)
        goto out;
    }
  }
  /* readiness: every port listens (or the launcher says so), every process lives */
  deadline = lc__now_ms() + (uint64_t)c->opts.worker_timeout_ms;
  if (c->w->wait_ready != NULL) {
    char why[LC_ERRMSG_MAX];
    r = c->w->wait_ready(c->w, c, n, c->opts.worker_timeout_ms);
    snprintf(why, sizeof(why), "%s", lc_error_last());
    for (size_t i = first; r < 0 && i < c->nworkers; i++) {
      cworker *w = &c->workers[i];
      if (lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT) {
        lc__error_set(r, "%s", why); /* a worker still running: the launcher's reason stands */
        continue;
      }
      describe(c, w->tag, w->proc, msg, sizeof(msg));
      r = lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->tag->tag, msg);
    }
    goto out;
  }
  for (;;) {
    size_t pending = 0;
    lc_process *some = NULL;
    for (size_t i = first; i < c->nworkers; i++) {
      cworker *w = &c->workers[i];
      if (w->ready)
        continue;
      if (lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT) {
        describe(c, w->tag, w->proc, msg, sizeof(msg));
        r = lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->tag->tag, msg);
        goto out;
      }
      if (c->w->portless) {
        w->ready = 1;
        continue;
      }
      pending++;
      some = w->proc;
    }
    /* one listing of every host per round, all at once */
    if (pending > 0) {
      scan sc = {0};
      if ((r = scan_group(c, &sc)) < 0) {
        free(sc.per);
        goto out;
      }
      for (size_t i = first; i < c->nworkers; i++) {
        cworker *w = &c->workers[i];
        size_t gi = group_index(c, w->rt);
        if (w->ready || gi == (size_t)-1 || !scan_has(&sc, gi, w->info.port))
          continue;
        w->ready = 1;
        pending--;
        logf_(c, "%s ready on port %d", w->tag->tag, w->info.port);
      }
      free(sc.per);
    }
    if (pending == 0)
      break;
    if (lc__now_ms() >= deadline) {
      for (size_t i = first; i < c->nworkers; i++) {
        cworker *w = &c->workers[i];
        if (w->ready)
          continue;
        describe(c, w->tag, w->proc, msg, sizeof(msg));
        r = lc__error_set(-ETIMEDOUT, "%s did not listen on port %d within %.1f s: %s",
                          w->tag->tag, w->info.port, c->opts.worker_timeout_ms / 1000.0, msg);
        goto out;
      }
    }
    lc_process_wait(NULL, some, POLL_MS); /* the pause is a wait: an exit cuts it short */
  }
out:
  free(slots);
  free(ports);
  if (r < 0) { /* undo this start: its workers, tunnels and ports */
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    for (size_t i = first; i < c->nworkers; i++)
      worker_clear(&c->workers[i]);
    c->nworkers = first;
    for (size_t i = fwd_mark; i < c->fwds.n; i++)
      lc_forward_free(c->fwds.v[i]);
    c->fwds.n = fwd_mark;
    release_ports(c, mark);
    logf_(c, "start of %d workers failed: %s", n, saved);
    return lc__error_set(r, "%s", saved);
  }
  return 0;
}

int lc_cluster_start(lc_cluster *c, int n) {
  int r;
  if (c->master_proc == NULL && (r = lc_cluster_start_master(c)) < 0)
    return r;
  return n > 0 ? lc_cluster_start_workers(c, n) : 0;
}

int lc_cluster_wait(lc_cluster *c, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  char msg[4096];
  for (;;) {
    lc_process *some = c->master_proc;
    if (c->master_proc != NULL && lc_process_wait(NULL, c->master_proc, 0) != -ETIMEDOUT) {
      describe(c, c->master_tag, c->master_proc, msg, sizeof(msg));
      return lc__error_set(LC_EREMOTE, "%s ended: %s", c->master_tag->tag, msg);
    }
    for (size_t i = 0; i < c->nworkers; i++) {
      cworker *w = &c->workers[i];
      if (lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT) {
        describe(c, w->tag, w->proc, msg, sizeof(msg));
        return lc__error_set(LC_EREMOTE, "%s ended: %s", w->tag->tag, msg);
      }
      some = some ? some : w->proc;
    }
    if (some == NULL)
      return lc__error_set(-EINVAL, "cluster: nothing runs");
    if (timeout_ms >= 0 && lc__now_ms() >= deadline)
      return -ETIMEDOUT;
    lc_process_wait(NULL, some, POLL_MS * 4);
  }
}
