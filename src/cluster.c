/*
 * cluster.c - a master and workers over a group. The launchers say what to run; this file does
 * what every cluster type needs: ports, placement, each worker's context, readiness (polled by
 * waiting on the process with a short limit, then reading the host's listening ports: never a
 * fixed sleep), tunnels, and undoing a start that failed.
 */
#include "../launchers/launchers.h"
#include "ports_internal.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 50
#define LISTING_GAP_MAX_MS 250 /* readiness listings of one host at most this far apart */
#define TAIL_LINES 8

/* Where a start limit came from, for its error message. */
typedef enum limit_source {
  LIMIT_LIBRARY, /* the library's default */
  LIMIT_TYPE,    /* the launcher's timeout_ms */
  LIMIT_ASKED,   /* lc_cluster_options */
} limit_source;

/* The last lines a process wrote to stderr, for error messages. */
typedef struct tail {
  char *line[TAIL_LINES];
  size_t next;
} tail;

typedef struct proc_tag {
  lc_cluster *c;
  char tag[160];
  tail err;
  int master;
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
  limit_source master_timeout_src, worker_timeout_src;
  char *master_timeout_opt, *worker_timeout_opt; /* how messages name what changes them */
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
  pthread_mutex_t mu; /* tails and the master's count: written on the engine thread */
  pthread_cond_t cv;  /* the master's count changed */
  const char *count_up, *count_down; /* lc__cluster_count_master_lines */
  long count;
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
  if (t->master && c->count_up != NULL) {
    int up = strstr(line, c->count_up) != NULL;
    int down = c->count_down != NULL && strstr(line, c->count_down) != NULL;
    if (up || down) {
      pthread_mutex_lock(&c->mu);
      c->count += up ? 1 : -1;
      pthread_cond_broadcast(&c->cv);
      pthread_mutex_unlock(&c->mu);
    }
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
  pthread_cond_init(&c->cv, NULL);
  c->group = group;
  c->m = master;
  c->w = worker;
  if (opts != NULL && opts->version >= 3)
    c->opts = *opts;
  else if (opts != NULL && opts->version == 2) /* version 2 ends with on_event */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, master_timeout_option));
  else if (opts != NULL) /* version 1 ends with env */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, on_event));
  if (c->opts.master_port <= 0)
    c->opts.master_port = 60000;
  /* the start limits: the options', else the type's, else the library's */
  c->master_timeout_src = LIMIT_ASKED;
  if (c->opts.master_timeout_ms <= 0) {
    int type_ms = master->version >= 2 ? master->timeout_ms : 0;
    c->master_timeout_src = type_ms > 0 ? LIMIT_TYPE : LIMIT_LIBRARY;
    c->opts.master_timeout_ms = type_ms > 0 ? type_ms : LC_CLUSTER_MASTER_TIMEOUT_MS;
  }
  c->worker_timeout_src = LIMIT_ASKED;
  if (c->opts.worker_timeout_ms <= 0) {
    int type_ms = worker->version >= 3 ? worker->timeout_ms : 0;
    c->worker_timeout_src = type_ms > 0 ? LIMIT_TYPE : LIMIT_LIBRARY;
    c->opts.worker_timeout_ms = type_ms > 0 ? type_ms : LC_CLUSTER_WORKER_TIMEOUT_MS;
  }
  c->master_timeout_opt =
      lc__strdup(c->opts.master_timeout_option ? c->opts.master_timeout_option
                                               : "lc_cluster_options.master_timeout_ms");
  c->worker_timeout_opt =
      lc__strdup(c->opts.worker_timeout_option ? c->opts.worker_timeout_option
                                               : "lc_cluster_options.worker_timeout_ms");
  c->opts.master_timeout_option = NULL;
  c->opts.worker_timeout_option = NULL;
  if (c->master_timeout_opt == NULL || c->worker_timeout_opt == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
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

static void fwds_drop(lc_cluster *c, size_t from) {
  for (size_t i = from; i < c->fwds.n; i++)
    lc_forward_free(c->fwds.v[i]);
  c->fwds.n = from;
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
  free(c->master_timeout_opt);
  free(c->worker_timeout_opt);
  lc__buf_free(&c->log);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

int lc_cluster_master_port(const lc_cluster *c) { return c->master_port; }
const char *lc_cluster_master_host(const lc_cluster *c) {
  return c->master_rt ? lc_runtime_name(c->master_rt) : NULL;
}
lc_group *lc_cluster_group(const lc_cluster *c) { return c->group; }
lc_runtime *lc__cluster_master_runtime(const lc_cluster *c) { return c->master_rt; }
int lc__cluster_master_timeout_ms(const lc_cluster *c) { return c->opts.master_timeout_ms; }
size_t lc_cluster_worker_count(const lc_cluster *c) { return c->nworkers; }
const lc_worker_info *lc_cluster_worker(const lc_cluster *c, size_t i) {
  return i < c->nworkers ? &c->workers[i].info : NULL;
}
const char *lc_cluster_log(const lc_cluster *c) { return c->log.data ? c->log.data : ""; }

/* Where the master's (master != 0) or the workers' start limit came from and what changes it,
 * for a timeout's message: "(the dask type's default master timeout; --master-timeout S changes
 * it)". */
static void limit_why(const lc_cluster *c, int master, char *out, size_t size) {
  limit_source src = master ? c->master_timeout_src : c->worker_timeout_src;
  const char *what = master ? "master timeout" : "worker timeout";
  const char *type = c->m->version >= 2 ? c->m->type_name : NULL;
  const char *opt = master ? c->master_timeout_opt : c->worker_timeout_opt;
  if (src == LIMIT_ASKED)
    snprintf(out, size, "(the %s given; %s changes it)", what, opt);
  else if (src == LIMIT_TYPE)
    snprintf(out, size, "(the %s type's default %s; %s changes it)", type ? type : "cluster", what,
             opt);
  else
    snprintf(out, size, "(the default %s; %s changes it)", what, opt);
}

/* "30 s (the dask type's default master timeout; --master-timeout S changes it)". */
static void limit_text(const lc_cluster *c, int master, char *out, size_t size) {
  char why[512];
  limit_why(c, master, why, sizeof(why));
  snprintf(out, size, "%g s %s",
           (master ? c->opts.master_timeout_ms : c->opts.worker_timeout_ms) / 1000.0, why);
}

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
  lc__portscan *per; /* one per group runtime, in group order */
} scan;

static int scan_group(lc_cluster *c, scan *sc) {
  size_t n = lc_group_count(c->group);
  lc_runtime **rts = lc__calloc(n + 1, sizeof(*rts));
  int r;
  if (rts == NULL || (sc->per = lc__calloc(n + 1, sizeof(*sc->per))) == NULL) {
    free(rts);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++)
    rts[i] = lc_group_at(c->group, i);
  r = lc__ports_scan(sc->per, rts, n, 10000);
  free(rts);
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

/* n ports from ranges, free on every host (as sc saw them) and here, reserved. */
static int pick_from_scan(lc_cluster *c, const scan *sc, const lc_ports *ranges, int *out,
                          size_t n) {
  size_t got = 0;
  int r = 0;
  for (size_t k = 0; k < lc_ports_count(ranges) && got < n; k++) {
    int port = lc_ports_at(ranges, k), taken = 0;
    for (size_t i = 0; i < lc_group_count(c->group) && !taken; i++)
      taken = scan_has(sc, i, port);
    if (taken || lc_port_reserve(port) < 0)
      continue;
    if (lc_port_is_free_local(port) != 1 || keep_port(c, port) < 0) {
      lc_port_release(port);
      continue;
    }
    out[got++] = port;
  }
  if (got < n) {
    char *text = NULL;
    lc_ports_format(&text, ranges);
    r = lc__error_set(LC_ENOPORTS,
                      "no free port left in %s: %zu needed, %zu free on all %zu "
                      "hosts and this machine",
                      text ? text : "the worker ranges", n, got, lc_group_count(c->group));
    lc_free(text);
  }
  return r;
}

/* n ports from the worker ranges, free on every host (sc, else one scan now) and here. */
static int pick_ports(lc_cluster *c, const scan *given, int *out, size_t n) {
  scan sc = {0};
  int r;
  if (given != NULL)
    return pick_from_scan(c, given, c->worker_ports, out, n);
  if ((r = scan_group(c, &sc)) == 0)
    r = pick_from_scan(c, &sc, c->worker_ports, out, n);
  free(sc.per);
  return r;
}

/* ---- readiness ------------------------------------------------------------------------------ */

/* Waits for port to listen on rt while p lives; -ETIMEDOUT or LC_EREMOTE (p ended). */
static int wait_listening(lc_runtime *rt, lc_process *p, int port, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)timeout_ms;
  int pause = POLL_MS / 5; /* most masters listen within a few ms: look again soon, then less */
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
    if (lc_process_wait(NULL, p, pause) != -ETIMEDOUT)
      return LC_EREMOTE;
    pause = pause * 2 < POLL_MS ? pause * 2 : POLL_MS;
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

static void event(lc_cluster *c, lc_cluster_event ev, int index) {
  if (c->opts.on_event != NULL)
    c->opts.on_event(c, ev, index, c->opts.payload);
}

/* Starts making the working directory of every runtime the cluster uses, all at once (each is
 * awaited where it is needed); a failure shows again there. */
static void workdirs_begin(lc_cluster *c) {
  lc_runtime *rts[1024];
  size_t n = cluster_runtimes(c, rts, 1024);
  for (size_t i = 0; i < n; i++)
    if (rts[i] == c->master_rt || lc_runtime_is_connected(rts[i]))
      lc__runtime_workdir_begin(rts[i]);
}

/* The runtime that runs the master: the named host, the group's localhost, or our own. */
static int master_runtime(lc_cluster *c) {
  int r;
  if (c->master_proc != NULL)
    return lc__error_set(-EINVAL, "cluster: the master already runs on port %d", c->master_port);
  if (c->opts.master_host != NULL) {
    if ((c->master_rt = lc_group_find(c->group, c->opts.master_host)) == NULL)
      return lc__error_set(-ENOENT, "cluster: the master's host %s is not in the group",
                           c->opts.master_host);
  } else if ((c->master_rt = lc_group_find(c->group, "localhost")) == NULL) {
    if (c->local == NULL &&
        (r = lc_runtime_new_local(&c->local, lc__group_engine(c->group), NULL)) < 0)
      return r;
    c->master_rt = c->local;
  }
  return 0;
}

/* Spawns the master on port, once its working directory is there. */
static int master_spawn(lc_cluster *c, int port) {
  char *cmd = NULL, penv[64];
  const char *more[2] = {penv, "LAZYCLUSTER_MASTER_ADDR=localhost"};
  char **env = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const char *wd = NULL;
  int r;

  snprintf(penv, sizeof(penv), "LAZYCLUSTER_MASTER_PORT=%d", port);
  if ((r = c->m->command(c->m, c, port, &cmd)) < 0)
    return r;
  if ((env = env_with(c, more, 2)) == NULL ||
      (c->master_tag = tag_new(c, "%s master", lc_runtime_name(c->master_rt))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  c->master_tag->master = 1;
  pthread_mutex_lock(&c->mu);
  c->count = 0;
  pthread_mutex_unlock(&c->mu);
  if ((r = lc_runtime_workdir(&wd, c->master_rt)) < 0)
    goto out;
  eo.env = (const char *const *)env;
  eo.cwd = wd;
  eo.on_line = on_line;
  eo.payload = c->master_tag;
  eo.label = "master";
  if ((r = lc_runtime_spawn(&c->master_proc, c->master_rt, cmd, &eo)) < 0)
    goto out;
  c->master_port = port;
  logf_(c, "%s master starting on port %d: %s", lc_runtime_name(c->master_rt), port, cmd);
out:
  if (r < 0) {
    tag_free(c->master_tag);
    c->master_tag = NULL;
  }
  lc_free(cmd);
  free(env);
  return r;
}

static void master_drop(lc_cluster *c) {
  lc_process_free(c->master_proc);
  c->master_proc = NULL;
  tag_free(c->master_tag);
  c->master_tag = NULL;
  c->master_port = 0;
}

/* Picks the port of this attempt (the asked one first; unless it is fixed, then the worker
 * ranges) and spawns the master there. */
static int master_attempt(lc_cluster *c, int attempt, const scan *sc, int *port) {
  lc_ports *ranges = NULL;
  int r = LC_ENOPORTS;
  if (attempt == 0) {
    if ((r = lc_ports_new(&ranges)) < 0 ||
        (r = lc_ports_add(ranges, c->opts.master_port, c->opts.master_port)) < 0) {
      lc_ports_free(ranges);
      return r;
    }
    r = sc != NULL ? pick_from_scan(c, sc, ranges, port, 1) : pick_port(c, port, ranges);
    lc_ports_free(ranges);
    if (r == LC_ENOPORTS && c->opts.master_port_fixed) {
      const char *where = port_taken_where(c, c->opts.master_port);
      return lc__error_set(-EADDRINUSE, "port %d is in use on %s", c->opts.master_port,
                           where ? where : "a host");
    }
  }
  if (r == LC_ENOPORTS && !c->opts.master_port_fixed)
    r = sc != NULL ? pick_from_scan(c, sc, c->worker_ports, port, 1)
                   : pick_port(c, port, c->worker_ports);
  if (r < 0)
    return r;
  return master_spawn(c, *port);
}

/* Waits until the spawned master is ready; when it is not, it is gone and *retry says whether
 * another port may do (it died of "address in use" on a port it was not held to). */
static int master_await(lc_cluster *c, int port, int *retry) {
  char msg[4096];
  int r;
  *retry = 0;
  if (c->m->wait_ready != NULL)
    r = c->m->wait_ready(c->m, c, port, c->opts.master_timeout_ms);
  else
    r = wait_listening(c->master_rt, c->master_proc, port, c->opts.master_timeout_ms);
  if (r < 0) {
    describe(c, c->master_tag, c->master_proc, msg, sizeof(msg));
    *retry = r == LC_EREMOTE && !c->opts.master_port_fixed &&
             (strstr(msg, "in use") != NULL || strstr(msg, "EADDRINUSE") != NULL);
    char limit[640] = "(it died)";
    if (r != LC_EREMOTE) {
      snprintf(limit, sizeof(limit), "within ");
      limit_text(c, 1, limit + strlen(limit), sizeof(limit) - strlen(limit));
    }
    r = lc__error_set(r == LC_EREMOTE ? LC_EREMOTE : -ETIMEDOUT,
                      "%s: the master did not start on port %d %s: %s",
                      lc_runtime_name(c->master_rt), port, limit, msg);
    master_drop(c);
    if (*retry)
      logf_(c, "port %d was taken after all: trying another", port);
  }
  return r;
}

/*
 * The master is ready: its port goes to every host. Where a host's tunnel cannot listen because
 * the port was taken there after the listing (an outgoing connection's port, which the listing of
 * listeners does not show), the master and its tunnels (those after fwd_mark) are dropped and
 * *retry says another port may do; otherwise *retry is 0.
 */
static int master_finish(lc_cluster *c, size_t fwd_mark, int *retry) {
  int r, port = c->master_port;
  *retry = 0;
  if ((r = lc__group_expose(c->group, c->master_rt == c->local ? NULL : c->master_rt,
                            c->master_port, &c->fwds)) < 0) {
    if (r == -EADDRINUSE && !c->opts.master_port_fixed) {
      char saved[LC_ERRMSG_MAX];
      snprintf(saved, sizeof(saved), "%s", lc_error_last());
      fwds_drop(c, fwd_mark);
      master_drop(c);
      *retry = 1;
      logf_(c, "port %d was taken after all (%s): trying another", port, saved);
      lc__error_set(r, "%s", saved);
    }
    return r;
  }
  logf_(c, "%s master ready on port %d", lc_runtime_name(c->master_rt), c->master_port);
  event(c, LC_CLUSTER_MASTER_UP, -1);
  return 0;
}

int lc_cluster_start_master(lc_cluster *c) {
  size_t mark = c->nports, fwd_mark = c->fwds.n;
  int port = 0, r, retry = 1;

  if ((r = master_runtime(c)) < 0)
    return r;
  workdirs_begin(c);
  for (int attempt = 0; attempt < 5 && retry; attempt++) {
    if ((r = master_attempt(c, attempt, NULL, &port)) < 0)
      break;
    if ((r = master_await(c, port, &retry)) == 0 && (r = master_finish(c, fwd_mark, &retry)) == 0)
      break;
  }
  if (r < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    master_drop(c);
    fwds_drop(c, fwd_mark);
    release_ports(c, mark);
    return lc__error_set(r, "%s", saved);
  }
  return 0;
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
  lc__buf_printf(b,
                 "\"worker_index\":%d,\"worker_count\":%d,\"host\":\"%s\",\"port\":%d,"
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
  char *tf_env = NULL, e[5][64], label[32];
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
      lc__buf_printf(&full, "mkdir -p %s && cd %s && printf '%%s' %s > cluster.json || exit 125",
                     q_dir, q_dir, q_json) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  eo.env = (const char *const *)env;
  eo.on_line = on_line;
  eo.payload = w->tag;
  snprintf(label, sizeof(label), "worker-%d", w->info.index);
  eo.label = label;
  /* the directory and cluster.json are made before the command, through the channel */
  if ((r = lc__runtime_spawn_setup(&w->proc, w->rt, cmd, &eo, full.data)) == 0)
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

/* One start of workers: what undoing it needs. */
typedef struct wstart {
  size_t first, mark, fwd_mark;
  int n;
  int prepared;
} wstart;

/* Gives the workers of st their ports (and aux ports) from the ranges: from sc, or from a new
 * listing of every host when sc is NULL. */
static int workers_ports(lc_cluster *c, const wstart *st, const scan *sc) {
  size_t per = c->w->aux_port ? 2 : 1, n = c->nworkers - st->first;
  int *ports;
  int r;
  if (c->w->portless || n == 0)
    return 0;
  if ((ports = lc__calloc(n * per, sizeof(*ports))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  if ((r = pick_ports(c, sc, ports, n * per)) == 0)
    for (size_t k = 0; k < n; k++) {
      c->workers[st->first + k].info.port = ports[k * per];
      if (c->w->aux_port)
        c->workers[st->first + k].info.aux_port = ports[k * per + 1];
    }
  free(ports);
  return r;
}

/*
 * Places n more workers and gives each its port and working directory (every host's made at
 * once), before any starts: each worker then sees the whole cluster. Needs no master.
 */
static int workers_prepare(lc_cluster *c, int n, const scan *sc, wstart *st) {
  size_t nslots = 0;
  slot *slots = NULL;
  int r = 0;

  st->first = c->nworkers;
  st->mark = c->nports;
  st->fwd_mark = c->fwds.n;
  st->n = n;
  st->prepared = 1;
  if ((slots = placement(c, &nslots)) == NULL || nslots == 0) {
    free(slots);
    return lc__error_set(nslots == 0 ? -EINVAL : -ENOMEM, "cluster: no host to place workers on");
  }
  if (c->nworkers + (size_t)n > c->capworkers) {
    size_t cap = c->nworkers + (size_t)n + 16;
    cworker *v = lc__realloc(c->workers, cap * sizeof(*v));
    if (v == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    c->workers = v;
    c->capworkers = cap;
  }
  workdirs_begin(c);
  for (int k = 0; k < n; k++) {
    cworker *w = &c->workers[c->nworkers];
    size_t idx = c->nworkers;
    const char *wd = NULL;
    memset(w, 0, sizeof(*w));
    w->rt = slots[idx % nslots].rt;
    w->info.gpu = slots[idx % nslots].gpu;
    w->info.index = (int)idx;
    if ((r = lc_runtime_workdir(&wd, w->rt)) < 0)
      goto out;
    w->host = lc__strdup(lc_runtime_name(w->rt));
    w->workdir = lc__sprintf("%s/worker-%d", wd, w->info.index);
    w->tag = tag_new(c, "%s worker-%d", lc_runtime_name(w->rt), w->info.index);
    c->nworkers++;
    if (w->host == NULL || w->workdir == NULL || w->tag == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    w->info.host = w->host;
    w->info.workdir = w->workdir;
  }
  for (size_t i = 0; i < c->nworkers; i++)
    c->workers[i].info.count = (int)c->nworkers;
  r = workers_ports(c, st, sc);
out:
  free(slots);
  return r;
}

/* Spawns every prepared worker of st (the master's port is known, if not yet ready). */
static int workers_spawn(lc_cluster *c, const wstart *st) {
  int r = 0;
  for (size_t i = st->first; i < c->nworkers && r == 0; i++) {
    c->workers[i].info.master_port = c->master_port;
    r = worker_spawn(c, &c->workers[i]);
  }
  return r;
}

/* Stops the spawned workers of st and awaits their end (their ports are taken again at once),
 * keeping their places: the master's port changed. */
static void workers_unspawn(lc_cluster *c, const wstart *st) {
  for (size_t i = st->first; i < c->nworkers; i++)
    if (c->workers[i].proc != NULL)
      lc_process_stop(c->workers[i].proc);
  for (size_t i = st->first; i < c->nworkers; i++) {
    if (c->workers[i].proc != NULL)
      lc_process_wait(NULL, c->workers[i].proc, 30000);
    lc_process_free(c->workers[i].proc);
    c->workers[i].proc = NULL;
  }
}

/* Undoes a start: its workers, tunnels and ports. */
static void workers_undo(lc_cluster *c, wstart *st) {
  char saved[LC_ERRMSG_MAX];
  if (!st->prepared)
    return;
  snprintf(saved, sizeof(saved), "%s", lc_error_last());
  for (size_t i = st->first; i < c->nworkers; i++)
    worker_clear(&c->workers[i]);
  c->nworkers = st->first;
  fwds_drop(c, st->fwd_mark);
  release_ports(c, st->mark);
  st->prepared = 0;
  logf_(c, "start of %d workers failed: %s", st->n, saved);
  lc__error_set(LC_EREMOTE, "%s", saved); /* the detail, for the caller to return */
}

static int wait_listening_all(lc_cluster *c, size_t first, uint64_t deadline);

/* The spawned workers' tunnels (all at once), then their readiness. */
static int workers_ready(lc_cluster *c, const wstart *st) {
  size_t first = st->first;
  char msg[4096];
  uint64_t deadline;
  int r = 0;

  if (!c->w->portless && c->w->mesh == LC_WORKER_MESH) {
    lc_runtime **owner = lc__calloc(c->nworkers - first + 1, sizeof(*owner));
    int *port = lc__calloc(c->nworkers - first + 1, sizeof(*port));
    for (size_t i = first; owner != NULL && port != NULL && i < c->nworkers; i++) {
      owner[i - first] = c->workers[i].rt;
      port[i - first] = c->workers[i].info.port;
    }
    r = owner == NULL || port == NULL
            ? lc__error_set(-ENOMEM, "out of memory")
            : lc__group_expose_many(c->group, owner, port, c->nworkers - first, &c->fwds);
    free(owner);
    free(port);
    if (r < 0)
      return r;
  } else if (!c->w->portless && c->w->mesh == LC_WORKER_HERE) {
    lc__fwd_spec *spec = lc__calloc(c->nworkers - first + 1, sizeof(*spec));
    size_t ns = 0;
    if (spec == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    for (size_t i = first; i < c->nworkers; i++) {
      lc__fwd_spec f = {.rt = c->workers[i].rt,
                        .kind = LC_FORWARD_LOCAL,
                        .port = c->workers[i].info.port,
                        .target = "127.0.0.1",
                        .target_port = c->workers[i].info.port};
      if (f.rt->ops != &lc__local_ops)
        spec[ns++] = f;
    }
    r = lc__forwards_new(spec, ns, &c->fwds);
    free(spec);
    if (r < 0)
      return r;
  }
  /* readiness: every port listens (or the launcher says so), every process lives */
  deadline = lc__now_ms() + (uint64_t)c->opts.worker_timeout_ms;
  if (c->w->wait_ready != NULL) {
    char why[LC_ERRMSG_MAX], src[512];
    r = c->w->wait_ready(c->w, c, st->n, c->opts.worker_timeout_ms);
    snprintf(why, sizeof(why), "%s", lc_error_last());
    if (r == -ETIMEDOUT) { /* the launcher says what it waited for; the cluster, which limit */
      limit_why(c, 0, src, sizeof(src));
      snprintf(why + strlen(why), sizeof(why) - strlen(why), " %s", src);
    }
    for (size_t i = first; r < 0 && i < c->nworkers; i++) {
      cworker *w = &c->workers[i];
      if (lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT) {
        lc__error_set(r, "%s", why); /* a worker still running: the launcher's reason stands */
        continue;
      }
      describe(c, w->tag, w->proc, msg, sizeof(msg));
      r = lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->tag->tag, msg);
    }
    for (size_t i = first; r == 0 && i < c->nworkers; i++)
      event(c, LC_CLUSTER_WORKER_UP, c->workers[i].info.index);
    return r;
  }
  return wait_listening_all(c, first, deadline);
}

/* Whether a start of workers that failed may do with other ports: a port of theirs was in use
 * after all, on some host (a forward could not listen), or a worker died saying so. The ranges'
 * ports lie in most hosts' ephemeral range (32768-60999 on Linux), where any outgoing
 * connection may take one between the listing and the worker's bind. */
static int workers_port_taken(lc_cluster *c, const wstart *st, int r) {
  char msg[4096];
  if (c->w->portless)
    return 0;
  if (r == -EADDRINUSE)
    return 1;
  for (size_t i = st->first; r == LC_EREMOTE && i < c->nworkers; i++) {
    cworker *w = &c->workers[i];
    if (w->proc == NULL || lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT)
      continue;
    describe(c, w->tag, w->proc, msg, sizeof(msg));
    if (strstr(msg, "in use") != NULL || strstr(msg, "EADDRINUSE") != NULL)
      return 1;
  }
  return 0;
}

/* Tunnels and readiness of spawned workers; when a port was taken after all, the workers of the
 * start are stopped and started again on other ports (up to 5 times). */
static int workers_finish(lc_cluster *c, const wstart *st) {
  size_t fwd_mark = c->fwds.n; /* the master's tunnels may come after st's mark: they stay */
  int r = workers_ready(c, st);
  for (int attempt = 1; r < 0 && attempt < 5; attempt++) {
    char why[LC_ERRMSG_MAX];
    snprintf(why, sizeof(why), "%s", lc_error_last());
    if (!workers_port_taken(c, st, r)) {
      lc__error_set(r, "%s", why); /* the look at the workers must not replace the detail */
      break;
    }
    logf_(c, "a worker's port was taken after all (%s): trying other ports", why);
    workers_unspawn(c, st);
    fwds_drop(c, fwd_mark);
    if ((r = workers_ports(c, st, NULL)) == 0 && (r = workers_spawn(c, st)) == 0)
      r = workers_ready(c, st);
  }
  return r;
}

/*
 * Readiness of workers first..: each host with workers not yet listening has its own listing
 * going, one after the other (10 ms apart for the first half second, then 10 ms more each time
 * up to LISTING_GAP_MAX_MS: a slow service is not hammered), so that a slow host holds up no other
 * and a host whose workers are all up is left alone. Ends at the first worker that died.
 */
static int wait_listening_all(lc_cluster *c, size_t first, uint64_t deadline) {
  uint64_t t0 = lc__now_ms();
  size_t nh = lc_group_count(c->group);
  lc__listing **ls = lc__calloc(nh + 1, sizeof(*ls));
  uint64_t *next = lc__calloc(nh + 1, sizeof(*next));
  unsigned *gap = lc__calloc(nh + 1, sizeof(*gap));
  char *needed = lc__calloc(nh + 1, 1);
  char msg[4096];
  int r = 0;

  if (ls == NULL || next == NULL || gap == NULL || needed == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (;;) {
    size_t pending = 0;
    lc__listing *busy = NULL;
    lc_process *some = NULL;
    uint64_t now = lc__now_ms();
    /* listings that ended: the workers of their host that listen are ready */
    for (size_t h = 0; h < nh; h++) {
      const lc__portscan *ps = NULL;
      if (ls[h] == NULL || !lc__listing_wait(ls[h], 0))
        continue;
      if ((r = lc__listing_finish(ls[h], &ps)) < 0)
        goto out;
      for (size_t i = first; i < c->nworkers; i++) {
        cworker *w = &c->workers[i];
        if (w->ready || group_index(c, w->rt) != h ||
            !((ps->listening[w->info.port / 8] >> (w->info.port % 8)) & 1))
          continue;
        w->ready = 1;
        logf_(c, "%s ready on port %d", w->tag->tag, w->info.port);
        event(c, LC_CLUSTER_WORKER_UP, w->info.index);
      }
      lc__listing_free(ls[h]);
      ls[h] = NULL;
      /* 10 ms apart for the first half second (most services listen by then), then slower */
      gap[h] = now - t0 < 500 ? POLL_MS / 5 : gap[h] + POLL_MS / 5;
      if (gap[h] > LISTING_GAP_MAX_MS)
        gap[h] = LISTING_GAP_MAX_MS;
      next[h] = now + gap[h];
    }
    memset(needed, 0, nh);
    for (size_t i = first; i < c->nworkers; i++) {
      cworker *w = &c->workers[i];
      size_t h = group_index(c, w->rt);
      if (w->ready)
        continue;
      if (lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT) {
        describe(c, w->tag, w->proc, msg, sizeof(msg));
        r = lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->tag->tag, msg);
        goto out;
      }
      if (c->w->portless || h == (size_t)-1) {
        w->ready = 1;
        event(c, LC_CLUSTER_WORKER_UP, w->info.index);
        continue;
      }
      needed[h] = 1;
      pending++;
      some = w->proc;
    }
    if (pending == 0)
      goto out;
    if (now >= deadline) {
      for (size_t i = first; i < c->nworkers; i++) {
        cworker *w = &c->workers[i];
        if (w->ready)
          continue;
        char limit[640];
        describe(c, w->tag, w->proc, msg, sizeof(msg));
        limit_text(c, 0, limit, sizeof(limit));
        r = lc__error_set(-ETIMEDOUT, "%s did not listen on port %d within %s: %s", w->tag->tag,
                          w->info.port, limit, msg);
        goto out;
      }
    }
    for (size_t h = 0; h < nh; h++) {
      if (needed[h] && ls[h] == NULL && now >= next[h] &&
          (r = lc__listing_start(&ls[h], lc_group_at(c->group, h))) < 0)
        goto out;
      busy = ls[h] != NULL ? ls[h] : busy;
    }
    /* the pause is a wait on a listing (or a worker): its end cuts it short */
    if (busy != NULL)
      lc__listing_wait(busy, POLL_MS / 10);
    else
      lc_process_wait(NULL, some, POLL_MS / 10);
  }
out:
  for (size_t h = 0; ls != NULL && h < nh; h++)
    lc__listing_free(ls[h]);
  free(ls);
  free(next);
  free(gap);
  free(needed);
  return r;
}

int lc_cluster_start_workers(lc_cluster *c, int n) {
  wstart st = {0};
  int r;

  if (n < 1)
    return lc__error_set(-EINVAL, "cluster: %d workers asked for", n);
  if (c->master_proc == NULL)
    return lc__error_set(-EINVAL, "cluster: start the master first");
  if ((r = workers_prepare(c, n, NULL, &st)) < 0 || (r = workers_spawn(c, &st)) < 0 ||
      (r = workers_finish(c, &st)) < 0) {
    workers_undo(c, &st); /* keeps the detail */
    return r;
  }
  return 0;
}

/*
 * The master and n workers, overlapped: the master is spawned first; while it starts, the
 * workers are placed and get their ports and directories; an `early` launcher's workers are
 * spawned before the master is ready. A master that must move to another port takes its early
 * workers down and has them started again.
 */
int lc_cluster_start(lc_cluster *c, int n) {
  size_t mark = c->nports, fwd_mark = c->fwds.n;
  wstart st = {0};
  scan sc = {0};
  int port = 0, r, retry = 0, spawned = 0;
  int early = c->w->version >= 2 && c->w->early;

  if (c->master_proc != NULL)
    return n > 0 ? lc_cluster_start_workers(c, n) : 0;
  if (n < 1)
    return n == 0 ? lc_cluster_start_master(c)
                  : lc__error_set(-EINVAL, "cluster: %d workers asked for", n);
  if ((r = master_runtime(c)) < 0)
    return r;
  workdirs_begin(c);
  /* one listing of every host picks the master's port and the workers' */
  if ((r = scan_group(c, &sc)) < 0 || (r = master_attempt(c, 0, &sc, &port)) < 0 ||
      (r = workers_prepare(c, n, &sc, &st)) < 0)
    goto out;
  if (early && (r = workers_spawn(c, &st)) < 0)
    goto out;
  spawned = early;
  if ((r = master_await(c, port, &retry)) == 0)
    r = master_finish(c, fwd_mark, &retry);
  for (int attempt = 1; r < 0 && retry && attempt < 5; attempt++) {
    if (spawned)
      workers_unspawn(c, &st);
    spawned = 0;
    if ((r = master_attempt(c, attempt, NULL, &port)) == 0 &&
        (r = master_await(c, port, &retry)) == 0)
      r = master_finish(c, fwd_mark, &retry);
  }
  if (r < 0)
    goto out;
  if (!spawned && (r = workers_spawn(c, &st)) < 0)
    goto out;
  r = workers_finish(c, &st);
out:
  free(sc.per);
  if (r < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    workers_undo(c, &st);
    master_drop(c);
    fwds_drop(c, fwd_mark);
    release_ports(c, mark);
    return lc__error_set(r, "%s", saved);
  }
  return 0;
}

/*
 * For launchers: from now on, count the master's output lines that contain up (+1) or down (-1,
 * may be NULL); lc__cluster_wait_count waits on the count. Set before the master is spawned.
 */
void lc__cluster_count_master_lines(lc_cluster *c, const char *up, const char *down) {
  pthread_mutex_lock(&c->mu);
  c->count_up = up;
  c->count_down = down;
  pthread_mutex_unlock(&c->mu);
}

/* LC_EREMOTE, naming the first process of the cluster that ended and how (describe), or 0. */
static int check_ended(lc_cluster *c) {
  char msg[4096];
  if (c->master_proc != NULL && lc_process_wait(NULL, c->master_proc, 0) != -ETIMEDOUT) {
    describe(c, c->master_tag, c->master_proc, msg, sizeof(msg));
    return lc__error_set(LC_EREMOTE, "%s ended: %s", c->master_tag->tag, msg);
  }
  for (size_t i = 0; i < c->nworkers; i++) {
    cworker *w = &c->workers[i];
    if (w->proc != NULL && lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT) {
      describe(c, w->tag, w->proc, msg, sizeof(msg));
      return lc__error_set(LC_EREMOTE, "%s ended: %s", w->tag->tag, msg);
    }
  }
  return 0;
}

/*
 * Waits until the master's count reaches n: 0; LC_EREMOTE as soon as the master or a worker ended
 * (the caller names it); -ETIMEDOUT. *seen says whether any counted line came.
 */
int lc__cluster_wait_count(lc_cluster *c, long n, int timeout_ms, int *seen) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  int r;
  *seen = 0;
  for (;;) {
    struct timespec ts;
    long count;
    pthread_mutex_lock(&c->mu);
    count = c->count;
    pthread_mutex_unlock(&c->mu);
    *seen = *seen || count != 0;
    if (count >= n)
      return 0;
    if (c->master_proc == NULL)
      return lc__error_set(LC_EREMOTE, "the master does not run");
    if ((r = check_ended(c)) < 0)
      return r;
    if (lc__now_ms() >= deadline)
      return lc__error_set(-ETIMEDOUT, "the master counted %ld of %ld within %.1f s", count, n,
                           timeout_ms / 1000.0);
    /* the pause is a wait on the count: each counted line ends it at once */
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += POLL_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    if (c->count == count)
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    pthread_mutex_unlock(&c->mu);
  }
}

int lc_cluster_wait(lc_cluster *c, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  int r;
  for (;;) {
    lc_process *some = c->master_proc;
    if ((r = check_ended(c)) < 0)
      return r;
    for (size_t i = 0; i < c->nworkers && some == NULL; i++)
      some = c->workers[i].proc;
    if (some == NULL)
      return lc__error_set(-EINVAL, "cluster: nothing runs");
    if (timeout_ms >= 0 && lc__now_ms() >= deadline)
      return -ETIMEDOUT;
    lc_process_wait(NULL, some, POLL_MS * 4);
  }
}
