/*
 * cluster.c - a master and workers over a group: the cluster's life (new, start, wait, free) and
 * what it lends. The launchers say what to run; the files beside this one do what every cluster
 * type needs: ports.c, placement.c, context.c (each worker's context), master.c, workers.c,
 * readiness.c, output.c. cluster_internal.h is what they share.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void lc_cluster_options_init(lc_cluster_options *opts) {
  lc_cluster_options init = LC_CLUSTER_OPTIONS_INIT;
  *opts = init;
}

/* ---- cancel ---------------------------------------------------------------------------------- */

typedef struct cancel_call {
  lc__call call;
  lc_cluster *c;
  int closing;
} cancel_call;

/* Engine thread: everything the cluster's start made on its hosts (master, workers, staging,
 * work directories: the processes tagged with it, lc__proc_tag) is told to stop, so that whatever
 * a start waits for (the master's port, workers, readiness) ends now rather than at its limit;
 * other work on the same hosts (a job queue, a user's exec) is left alone. The waiters on the
 * cluster's condition wake up and see the flag. */
static void stop_all(lc_cluster *c) {
  lc_runtime *rts[2] = {c->local, NULL};
  for (size_t i = 0; i < lc_group_count(c->group) + 1; i++) {
    lc_runtime *rt = i < lc_group_count(c->group) ? lc_group_at(c->group, i) : rts[0];
    for (lc_process *p = rt != NULL ? rt->procs : NULL; p != NULL; p = p->next)
      if (p->tag == c)
        lc__proc_stop(p);
  }
  lc__engine_lock(lc__group_engine(c->group));
  lc__engine_broadcast(lc__group_engine(c->group));
  lc__engine_unlock(lc__group_engine(c->group));
  pthread_mutex_lock(&c->mu);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void cancel_tick(uv_timer_t *t) { stop_all(t->data); }

/* A step in flight may still launch a process after this (a spawn posted before the cancel):
 * the timer stops those too, until the cluster is freed. */
static void cancel_now(uv_async_t *a) {
  lc_cluster *c = a->data;
  if (!atomic_load(&c->canceled))
    return;
  stop_all(c);
  if (!uv_is_active((uv_handle_t *)&c->cancel_again))
    uv_timer_start(&c->cancel_again, cancel_tick, 250, 250);
}

static void cancel_init_fn(lc__call *call) {
  lc_cluster *c = ((cancel_call *)call)->c;
  int r = uv_async_init(lc__engine_loop(lc__group_engine(c->group)), &c->cancel_async, cancel_now);
  if (r == 0) {
    c->cancel_async.data = c;
    uv_timer_init(lc__engine_loop(lc__group_engine(c->group)), &c->cancel_again);
    c->cancel_again.data = c;
    c->cancel_ready = 1;
  }
  lc__call_done(call, r == 0 ? 0 : lc__err_set(&call->err, -ENOMEM, "cannot make a uv_async"));
}

static void cancel_closed(uv_handle_t *h) {
  cancel_call *cc = h->data;
  if (--cc->closing == 0)
    lc__call_done(&cc->call, 0);
}

static void cancel_close_fn(lc__call *call) {
  cancel_call *cc = (cancel_call *)call;
  cc->closing = 2;
  cc->c->cancel_async.data = cc;
  cc->c->cancel_again.data = cc;
  uv_close((uv_handle_t *)&cc->c->cancel_async, cancel_closed);
  uv_close((uv_handle_t *)&cc->c->cancel_again, cancel_closed);
}

int lc_cluster_cancel(lc_cluster *c) {
  if (c == NULL)
    return -EINVAL; /* no lc__error_set: this may run in a signal handler */
  atomic_store(&c->canceled, 1);
  if (c->cancel_ready)
    uv_async_send(&c->cancel_async); /* async-signal-safe */
  return 0;
}

int lc__cluster_canceled(lc_cluster *c) {
  if (!atomic_load(&c->canceled))
    return 0;
  return lc__error_set(LC_ECANCELED,
                       "the cluster's start was canceled (lc_cluster_cancel, or Ctrl-C): what it "
                       "had started is undone");
}

int lc_cluster_new(lc_cluster **out, lc_group *group, lc_master_launcher *master,
                   lc_worker_launcher *worker, const lc_cluster_options *opts) {
  lc_cluster *c = NULL;
  int r = 0;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_CLUSTER_OPTIONS_VERSION, "lc_cluster_options");
  LC__CHECK_VERSION(master, LC_MASTER_LAUNCHER_VERSION, "lc_master_launcher");
  LC__CHECK_VERSION(worker, LC_WORKER_LAUNCHER_VERSION, "lc_worker_launcher");
  if (group == NULL || master == NULL || worker == NULL || master->command == NULL ||
      worker->command == NULL)
    return lc__error_set(-EINVAL, "cluster: a group and two launchers with a command are needed");
  if ((c = lc__calloc(1, sizeof(*c))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->group = group;
  c->m = master;
  c->w = worker;
  if (opts != NULL && opts->version >= 6)
    c->opts = *opts;
  else if (opts != NULL && opts->version == 5) /* version 5 ends with ttl_ms */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, insecure));
  else if (opts != NULL && opts->version == 4) /* version 4 ends with exclude_master_host */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, restart));
  else if (opts != NULL && opts->version == 3) /* version 3 ends with worker_timeout_option */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, on_output));
  else if (opts != NULL && opts->version == 2) /* version 2 ends with on_event */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, master_timeout_option));
  else if (opts != NULL) /* version 1 ends with env */
    memcpy(&c->opts, opts, offsetof(lc_cluster_options, on_event));
  if (c->opts.master_port <= 0)
    c->opts.master_port = LC_CLUSTER_MASTER_PORT;
  /* the repair: what older callers got is never to restart */
  if (c->opts.version < 5)
    c->opts.restart = LC_RESTART_NEVER;
  if (c->opts.max_restarts == 0)
    c->opts.max_restarts = 5;
  if (c->opts.restart_window_ms == 0)
    c->opts.restart_window_ms = 600000;
  if (c->opts.restart_backoff_ms == 0)
    c->opts.restart_backoff_ms = 1000;
  /* the start limits: the options', else the type's, else the library's */
  c->master_timeout_src = LC__LIMIT_ASKED;
  if (c->opts.master_timeout_ms <= 0) {
    int type_ms = master->version >= 2 ? master->timeout_ms : 0;
    c->master_timeout_src = type_ms > 0 ? LC__LIMIT_TYPE : LC__LIMIT_LIBRARY;
    c->opts.master_timeout_ms = type_ms > 0 ? type_ms : LC_CLUSTER_MASTER_TIMEOUT_MS;
  }
  c->worker_timeout_src = LC__LIMIT_ASKED;
  if (c->opts.worker_timeout_ms <= 0) {
    int type_ms = worker->version >= 3 ? worker->timeout_ms : 0;
    c->worker_timeout_src = type_ms > 0 ? LC__LIMIT_TYPE : LC__LIMIT_LIBRARY;
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
  if (c->opts.placement != LC_PLACE_SPREAD && c->opts.placement != LC_PLACE_PACK) {
    r = lc__error_set(-EINVAL,
                      "cluster: placement %d is unknown (LC_PLACE_SPREAD or LC_PLACE_PACK)",
                      c->opts.placement);
    goto out;
  }
  if (c->opts.restart != LC_RESTART_ON_FAILURE && c->opts.restart != LC_RESTART_NEVER &&
      c->opts.restart != LC_RESTART_ALWAYS) {
    r = lc__error_set(-EINVAL,
                      "cluster: restart policy %d is unknown (LC_RESTART_ON_FAILURE, "
                      "LC_RESTART_NEVER or LC_RESTART_ALWAYS)",
                      c->opts.restart);
    goto out;
  }
  if (c->opts.restart_window_ms < 0 || c->opts.ttl_ms < 0) {
    r = lc__error_set(-EINVAL, "cluster: %s %lld is negative",
                      c->opts.ttl_ms < 0 ? "ttl_ms" : "restart_window_ms",
                      c->opts.ttl_ms < 0 ? c->opts.ttl_ms : (long long)c->opts.restart_window_ms);
    goto out;
  }
  if (c->opts.max_workers_per_host < 0) {
    r = lc__error_set(-EINVAL, "cluster: max_workers_per_host %d is negative",
                      c->opts.max_workers_per_host);
    goto out;
  }
  if (c->opts.master_port > 65535) {
    r = lc__error_set(-EINVAL, "cluster: master port %d is out of range", c->opts.master_port);
    goto out;
  }
  if ((r = lc_ports_parse(&c->worker_ports, c->opts.worker_ports ? c->opts.worker_ports
                                                                 : LC_CLUSTER_WORKER_PORTS)) < 0)
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
  if (r == 0)
    r = lc_secret_new(&c->secret);
  if (r == 0)
    r = lc__client_init(c);
  if (r == 0) {
    cancel_call cc = {.c = c};
    r = lc__engine_run(lc__group_engine(group), &cc.call, cancel_init_fn);
  }
out:
  if (r < 0) {
    lc_cluster_free(c);
    return r;
  }
  *out = c;
  return 0;
}

/* Tears down in order: the workers (all told to stop at once, then awaited until their lifelines
 * confirmed their ends, all within one grace period plus a margin, and not on a host that does
 * not answer), then the master the same way, then the tunnels; the hosts' working directories go
 * with their runtimes. */
void lc_cluster_free(lc_cluster *c) {
  uint64_t deadline = 0;
  if (c == NULL)
    return;
  if (c->cancel_ready) {
    cancel_call cc = {.c = c};
    c->cancel_ready = 0;
    lc__engine_run(lc__group_engine(c->group), &cc.call, cancel_close_fn);
  }
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__process_end_begin(c->workers[i].proc);
    if (c->workers[i].proc != NULL && deadline == 0)
      deadline = lc__process_end_deadline(c->workers[i].proc);
  }
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__process_end_wait(c->workers[i].proc, deadline);
    lc__worker_clear(&c->workers[i]);
  }
  lc__process_free_awaited(c->master_proc);
  lc__output_free(c->master_out);
  lc__restart_log_free(&c->master_restart_log);
  lc__relaylog_free(&c->relayed);
  lc__fwdlist_free(&c->fwds);
  lc__cluster_release_ports(c, 0);
  lc__hosts_free(c);
  free(c->ctx_sent);
  lc_runtime_free(c->local);
  lc_ports_free(c->worker_ports);
  for (size_t i = 0; i < c->nenv; i++)
    free(c->env[i]);
  free(c->env);
  if (c->secret != NULL)
    OPENSSL_cleanse(c->secret, strlen(c->secret));
  free(c->secret);
  free(c->workers);
  free(c->staged);
  free(c->ports);
  free(c->master_host_opt);
  free(c->master_timeout_opt);
  free(c->worker_timeout_opt);
  lc__buf_free(&c->log);
  lc__client_free(c);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

int lc_cluster_master_port(const lc_cluster *c) { return c->master_port; }
const char *lc_cluster_master_host(const lc_cluster *c) {
  return c->master_rt ? lc_runtime_name(c->master_rt) : NULL;
}
lc_group *lc_cluster_group(const lc_cluster *c) { return c->group; }
lc_runtime *lc_cluster_master_runtime(const lc_cluster *c) { return c->master_rt; }
lc_process *lc_cluster_master_process(const lc_cluster *c) { return c->master_proc; }
int lc_cluster_master_timeout_ms(const lc_cluster *c) { return c->opts.master_timeout_ms; }
int lc_cluster_worker_timeout_ms(const lc_cluster *c) { return c->opts.worker_timeout_ms; }
lc_process *lc_cluster_worker_process(const lc_cluster *c, size_t i) {
  return i < c->nworkers && !c->workers[i].reported ? c->workers[i].proc : NULL;
}
lc_runtime *lc_cluster_worker_runtime(const lc_cluster *c, size_t i) {
  return i < c->nworkers ? c->workers[i].rt : NULL;
}
size_t lc_cluster_worker_count(const lc_cluster *c) { return c->nworkers; }
const lc_worker_info *lc_cluster_worker(const lc_cluster *c, size_t i) {
  return i < c->nworkers ? &c->workers[i].info : NULL;
}
const char *lc_cluster_log(const lc_cluster *c) { return c->log.data ? c->log.data : ""; }
const char *lc_cluster_secret(const lc_cluster *c) { return c->secret; }

/* Where the master's (master != 0) or the workers' start limit came from and what changes it,
 * for a timeout's message: "(the dask type's default master timeout; --master-timeout S changes
 * it)". */
void lc__cluster_limit_why(const lc_cluster *c, int master, char *out, size_t size) {
  lc__limit_source src = master ? c->master_timeout_src : c->worker_timeout_src;
  const char *what = master ? "master timeout" : "worker timeout";
  const char *type = c->m->version >= 2 ? c->m->type_name : NULL;
  const char *opt = master ? c->master_timeout_opt : c->worker_timeout_opt;
  if (src == LC__LIMIT_ASKED)
    snprintf(out, size, "(the %s given; %s changes it)", what, opt);
  else if (src == LC__LIMIT_TYPE)
    snprintf(out, size, "(the %s type's default %s; %s changes it)", type ? type : "cluster", what,
             opt);
  else
    snprintf(out, size, "(the default %s; %s changes it)", what, opt);
}

/* "30 s (the dask type's default master timeout; --master-timeout S changes it)". */
void lc__cluster_limit_text(const lc_cluster *c, int master, char *out, size_t size) {
  char why[512];
  lc__cluster_limit_why(c, master, why, sizeof(why));
  snprintf(out, size, "%g s %s",
           (master ? c->opts.master_timeout_ms : c->opts.worker_timeout_ms) / 1000.0, why);
}

/*
 * The master and n workers, overlapped: the master is spawned first; while it starts, the
 * workers are placed, get their ports and directories, and their staging runs; an `early`
 * launcher's workers are spawned before the master is ready. A master that must move to another
 * port takes its early workers down and has them started again.
 */
static int cluster_start(lc_cluster *c, int n);

/* What the start makes is tagged with the cluster (lc__proc_tag): its cancel stops those alone. */
int lc_cluster_start(lc_cluster *c, int n) {
  const void *was = lc__proc_tag;
  int r;
  lc__proc_tag = c;
  r = cluster_start(c, n);
  lc__proc_tag = was;
  return r;
}

static int cluster_start(lc_cluster *c, int n) {
  size_t mark = c->nports, fwd_mark = c->fwds.n;
  lc__wstart st = {0};
  lc__hostscan sc = {0};
  int port = 0, r, retry = 0, spawned = 0;
  int early = c->w->version >= 2 && c->w->early;

  if (c->master_proc != NULL)
    return n > 0 ? lc_cluster_start_workers(c, n) : 0;
  if (n > 0 && (r = lc__cluster_nofile(c, (size_t)n)) < 0) /* before anything starts */
    return r;
  if (n < 1) {
    if (n < 0)
      return lc__error_set(-EINVAL, "cluster: %d workers asked for", n);
    if ((r = lc_cluster_start_master(c)) == 0)
      lc__repair_started(c);
    return r;
  }
  if ((r = lc__cluster_canceled(c)) < 0 || (r = lc__master_runtime(c)) < 0)
    return r;
  lc__cluster_workdirs_begin(c);
  /* one listing of every host picks the master's port and the workers'; a cancel is seen
   * between the steps (and ends what a step waits for: cancel_now) */
  if ((r = lc__cluster_scan(c, &sc)) < 0 || (r = lc__cluster_canceled(c)) < 0 ||
      (r = lc__master_attempt(c, 0, &sc, &port)) < 0 || (r = lc__cluster_canceled(c)) < 0 ||
      (r = lc__workers_prepare(c, n, &sc, &st)) < 0 || (r = lc__cluster_canceled(c)) < 0 ||
      (r = lc__workers_stage(c, &st)) < 0 || (r = lc__cluster_canceled(c)) < 0)
    goto out;
  if (early && (r = lc__workers_spawn(c, &st)) < 0)
    goto out;
  spawned = early;
  if ((r = lc__cluster_canceled(c)) == 0 && (r = lc__master_await(c, port, &retry)) == 0 &&
      (r = lc__cluster_canceled(c)) == 0)
    r = lc__master_finish(c, fwd_mark, &retry);
  for (int attempt = 1; r < 0 && retry && attempt < 5 && !atomic_load(&c->canceled); attempt++) {
    if (spawned)
      lc__workers_unspawn(c, &st);
    spawned = 0;
    if ((r = lc__master_attempt(c, attempt, NULL, &port)) == 0 &&
        (r = lc__master_await(c, port, &retry)) == 0)
      r = lc__master_finish(c, fwd_mark, &retry);
  }
  if (r < 0 || (r = lc__cluster_canceled(c)) < 0)
    goto out;
  if (!spawned && (r = lc__workers_spawn(c, &st)) < 0)
    goto out;
  if ((r = lc__cluster_canceled(c)) == 0 && (r = lc__workers_finish(c, &st)) == 0 &&
      (r = lc__cluster_canceled(c)) == 0)
    r = lc__workers_after_start(c, &st);
  if (r == 0)
    r = lc__cluster_canceled(c); /* a cancel that came too late to stop a step still undoes */
out:
  lc__hostscan_free(&sc);
  if (r < 0) {
    char saved[LC_ERRMSG_MAX];
    if (r != LC_ECANCELED && atomic_load(&c->canceled)) /* a step failed because of it */
      r = lc__cluster_canceled(c);
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    lc__workers_undo(c, &st);
    lc__master_drop(c);
    lc__cluster_drop_forwards(c, fwd_mark);
    lc__cluster_release_ports(c, mark);
    return lc__error_set(r, "%s", saved);
  }
  lc__repair_started(c);
  return 0;
}

int lc__workers_after_start(lc_cluster *c, const lc__wstart *st) {
  int r;
  if (c->w->version < 4 || c->w->after_start == NULL)
    return 0;
  if ((r = c->w->after_start(c->w, c, st->first, (size_t)st->n)) < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    r = lc__error_set(r, "the worker launcher's after_start failed: %s", saved);
  }
  return r;
}

/* A process of the cluster that may still be reported: started, not stopped by us, its end not
 * reported yet. */
static int reportable(lc_process *p, int stopped, int reported) {
  return p != NULL && !stopped && !reported;
}

/* The first process of the cluster that ended on its own and may still be reported: 1 and
 * *which (-1: the master, else the worker's index), or 0. */
static int find_ended(lc_cluster *c, int *which) {
  if (reportable(c->master_proc, 0, c->master_reported) &&
      lc__process_finished(c->master_proc, NULL)) {
    *which = -1;
    return 1;
  }
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (reportable(w->proc, w->stopped, w->reported) && lc__process_finished(w->proc, NULL)) {
      *which = (int)i;
      return 1;
    }
  }
  return 0;
}

/* "lab1 worker-2 ended: it exited with status 1; its last stderr lines: ..." */
static void ended_text(lc_cluster *c, int which, char *out, size_t size) {
  lc__output *t = which < 0 ? c->master_out : c->workers[which].out;
  lc_process *p = which < 0 ? c->master_proc : c->workers[which].proc;
  char how[4096];
  lc__cluster_how_ended(c, t, p, how, sizeof(how));
  snprintf(out, size, "%s ended: %s", t->tag, how);
}

/* LC_EREMOTE, naming the first process of the cluster that ended on its own and how, or 0.
 * Processes stopped by us and ends already reported are left out. */
int lc__cluster_check_ended(lc_cluster *c) {
  char msg[4400];
  int which;
  if (!find_ended(c, &which))
    return 0;
  ended_text(c, which, msg, sizeof(msg));
  return lc__error_set(LC_EREMOTE, "%s", msg);
}

int lc__cluster_running_workers(lc_cluster *c) {
  int n = 0;
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    n += reportable(w->proc, w->stopped, w->reported) &&
         lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT;
  }
  return n;
}

int lc__cluster_wait_n(lc_cluster *c, int started) {
  return c->w->version >= 4 ? lc__cluster_running_workers(c) : started;
}

long lc_cluster_counter_add(lc_cluster *c, long delta) {
  long v;
  pthread_mutex_lock(&c->mu);
  v = c->count += delta;
  c->changes++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return v;
}

/*
 * Waits until the counter reaches n: 0; LC_EREMOTE as soon as the master or a worker ended
 * (naming it); -ETIMEDOUT with the count. The pause between looks at the processes is a wait on
 * the counter: each change ends it at once.
 */
int lc_cluster_counter_wait(lc_cluster *c, long n, int timeout_ms, long *changes) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  long count, seen;
  int r;
  for (;;) {
    struct timespec ts;
    pthread_mutex_lock(&c->mu);
    count = c->count;
    seen = c->changes;
    pthread_mutex_unlock(&c->mu);
    if (changes != NULL)
      *changes = seen;
    if (count >= n)
      return 0;
    if (c->master_proc == NULL)
      return lc__error_set(LC_EREMOTE, "cluster: the master does not run");
    if ((r = lc__cluster_check_ended(c)) < 0)
      return r;
    if (lc__now_ms() >= deadline)
      return lc__error_set(-ETIMEDOUT, "the cluster's counter was %ld of %ld after %.1f s", count,
                           n, timeout_ms / 1000.0);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += LC__POLL_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    if (c->changes == seen)
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    pthread_mutex_unlock(&c->mu);
  }
}

/*
 * Holds and repairs the cluster (repair.c does each look): between looks it waits on a running
 * process, or on the counter's condition when none runs, for at most a poll's time and never past
 * the next due restart, the ttl or the caller's limit.
 */
int lc_cluster_wait(lc_cluster *c, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  int r;
  for (;;) {
    lc_process *some = NULL;
    uint64_t due = 0, now, pause = LC__POLL_MS * 4;
    int pending = 0;
    if (atomic_load(&c->canceled)) /* no repair after a cancel: it stopped them on purpose */
      return lc__error_set(LC_ECANCELED, "the cluster was canceled (lc_cluster_cancel)");
    if ((r = lc__repair_look(c, &due, &pending)) < 0)
      return r;
    if (reportable(c->master_proc, 0, c->master_reported))
      some = c->master_proc;
    for (size_t i = 0; i < c->nworkers && some == NULL; i++)
      if (reportable(c->workers[i].proc, c->workers[i].stopped, c->workers[i].reported))
        some = c->workers[i].proc;
    if (some == NULL && !pending)
      return lc__error_set(-EINVAL, "cluster: nothing runs");
    now = lc__now_ms();
    if (timeout_ms >= 0 && now >= deadline)
      return -ETIMEDOUT;
    if (due != 0)
      pause = due <= now ? 0 : due - now < pause ? due - now : pause;
    if (timeout_ms >= 0 && deadline - now < pause)
      pause = deadline - now;
    if (c->ttl_end != 0)
      pause = c->ttl_end <= now ? 0 : c->ttl_end - now < pause ? c->ttl_end - now : pause;
    if (pause == 0)
      continue;
    if (some != NULL) {
      lc_process_wait(NULL, some, (int)pause);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += (time_t)(pause / 1000);
      ts.tv_nsec += (long)(pause % 1000) * 1000000L;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_mutex_lock(&c->mu);
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
      pthread_mutex_unlock(&c->mu);
    }
  }
}
