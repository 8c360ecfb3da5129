/*
 * workers.c - a start of workers: placed, given ports and directories (before any starts, so each
 * sees the whole cluster), spawned, their tunnels, readiness, and the undoing of a start that
 * failed (other ports when one was taken after all).
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lc__worker_clear(lc__worker *w) {
  lc_process_free(w->proc);
  lc__output_free(w->out);
  lc__restart_log_free(&w->restart_log);
  free(w->host);
  free(w->workdir);
  memset(w, 0, sizeof(*w));
}

/* Gives the workers of st their ports (and aux ports) from the ranges: from sc, or from a new
 * listing of every host when sc is NULL. */
static int workers_ports(lc_cluster *c, const lc__wstart *st, const lc__hostscan *sc) {
  size_t per = c->w->aux_port ? 2 : 1, n = c->nworkers - st->first;
  int *ports;
  int r;
  if (c->w->portless || n == 0)
    return 0;
  if ((ports = lc__calloc(n * per, sizeof(*ports))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  if ((r = lc__cluster_pick_ports(c, sc, ports, n * per)) == 0)
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
int lc__workers_prepare(lc_cluster *c, int n, const lc__hostscan *sc, lc__wstart *st) {
  int r = 0;

  st->first = c->nworkers;
  st->mark = c->nports;
  st->fwd_mark = c->fwds.n;
  st->relay_mark = c->relayed.n;
  st->n = n;
  st->prepared = 1;
  if (c->nworkers + (size_t)n > c->capworkers) {
    size_t cap = c->nworkers + (size_t)n + 16;
    lc__worker *v = lc__realloc(c->workers, cap * sizeof(*v));
    if (v == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    c->workers = v;
    c->capworkers = cap;
  }
  memset(&c->workers[st->first], 0, (size_t)n * sizeof(*c->workers));
  if ((r = lc__cluster_place(c, st->first, (size_t)n)) < 0)
    goto out;
  lc__cluster_workdirs_begin(c);
  for (int k = 0; k < n; k++) {
    lc__worker *w = &c->workers[c->nworkers];
    size_t idx = c->nworkers;
    const char *wd = NULL;
    w->info.index = (int)idx;
    if ((r = lc_runtime_workdir(&wd, w->rt)) < 0)
      goto out;
    w->host = lc__strdup(lc_runtime_name(w->rt));
    w->workdir = lc__sprintf("%s/worker-%d", wd, w->info.index);
    w->out = lc__output_new(c, (int)idx, lc_runtime_name(w->rt));
    c->nworkers++;
    if (w->host == NULL || w->workdir == NULL || w->out == NULL) {
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
  return r;
}

/* Spawns every prepared worker of st (the master's port is known, if not yet ready). */
int lc__workers_spawn(lc_cluster *c, const lc__wstart *st) {
  int r;
  /* every host of the cluster gets the context of its new size, once, before these start */
  if ((r = lc__cluster_context_send(c, NULL)) < 0)
    return r;
  for (size_t i = st->first; i < c->nworkers && r == 0; i++) {
    c->workers[i].info.master_port = c->master_port;
    r = lc__worker_spawn(c, &c->workers[i]);
  }
  return r;
}

/* Stops the spawned workers of st and awaits their end (their ports are taken again at once),
 * keeping their places: the master's port changed. */
void lc__workers_unspawn(lc_cluster *c, const lc__wstart *st) {
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
void lc__workers_undo(lc_cluster *c, lc__wstart *st) {
  char saved[LC_ERRMSG_MAX];
  if (!st->prepared)
    return;
  snprintf(saved, sizeof(saved), "%s", lc_error_last());
  if (st->staged) { /* their processes end before their directories go */
    lc__workers_unspawn(c, st);
    lc__workers_unstage(c, st);
  }
  for (size_t i = st->first; i < c->nworkers; i++)
    lc__worker_clear(&c->workers[i]);
  c->nworkers = st->first;
  lc__cluster_drop_forwards(c, st->fwd_mark);
  lc__relaylog_drop(&c->relayed, st->relay_mark);
  lc__cluster_release_ports(c, st->mark);
  st->prepared = 0;
  lc__cluster_note(c, "start of %d workers failed: %s", st->n, saved);
  lc__error_set(LC_EREMOTE, "%s", saved); /* the detail, for the caller to return */
}

/* The spawned workers' tunnels (all at once), then their readiness. */
static int workers_ready(lc_cluster *c, const lc__wstart *st) {
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
            : lc__group_expose_many(c->group, owner, port, c->nworkers - first, &c->fwds,
                                    &c->relayed);
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
      lc__fwd_spec f =
          lc__fwd_spec_same_port(c->workers[i].rt, LC_FORWARD_LOCAL, c->workers[i].info.port);
      if (!lc__runtime_same_loopback(f.rt, NULL))
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
    r = c->w->wait_ready(c->w, c, lc__cluster_wait_n(c, st->n), c->opts.worker_timeout_ms);
    snprintf(why, sizeof(why), "%s", lc_error_last());
    if (r == -ETIMEDOUT) { /* the launcher says what it waited for; the cluster, which limit */
      lc__cluster_limit_why(c, 0, src, sizeof(src));
      snprintf(why + strlen(why), sizeof(why) - strlen(why), " %s", src);
    }
    /* A worker of this start that ended fails it, even when the launcher is content: an early
     * worker may have ended before the count to wait for was taken (then it was not counted). */
    for (size_t i = first; i < c->nworkers; i++) {
      lc__worker *w = &c->workers[i];
      if (lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT)
        continue;
      lc__cluster_how_ended(c, w->out, w->proc, msg, sizeof(msg));
      return lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->out->tag, msg);
    }
    if (r < 0) /* every worker still runs: the launcher's reason stands */
      return lc__error_set(r, "%s", why);
    for (size_t i = first; i < c->nworkers; i++)
      lc__cluster_emit(c, LC_CLUSTER_WORKER_UP, c->workers[i].info.index);
    return 0;
  }
  return lc__workers_wait_listening(c, first, deadline);
}

/* Whether a start of workers that failed may do with other ports: a port of theirs was in use
 * after all, on some host (a forward could not listen), or a worker died saying so. The ranges'
 * ports lie in most hosts' ephemeral range (32768-60999 on Linux), where any outgoing
 * connection may take one between the listing and the worker's bind. */
static int workers_port_taken(lc_cluster *c, const lc__wstart *st, int r) {
  char msg[4096];
  if (c->w->portless)
    return 0;
  if (r == -EADDRINUSE)
    return 1;
  for (size_t i = st->first; r == LC_EREMOTE && i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (w->proc == NULL || lc_process_wait(NULL, w->proc, 0) == -ETIMEDOUT)
      continue;
    lc__cluster_how_ended(c, w->out, w->proc, msg, sizeof(msg));
    if (strstr(msg, "in use") != NULL || strstr(msg, "EADDRINUSE") != NULL)
      return 1;
  }
  return 0;
}

/* Tunnels and readiness of spawned workers; when a port was taken after all, the workers of the
 * start are stopped and started again on other ports (up to 5 times). */
int lc__workers_finish(lc_cluster *c, const lc__wstart *st) {
  size_t fwd_mark = c->fwds.n; /* the master's tunnels may come after st's mark: they stay */
  size_t relay_mark = c->relayed.n;
  int r = workers_ready(c, st);
  for (int attempt = 1; r < 0 && attempt < 5; attempt++) {
    char why[LC_ERRMSG_MAX];
    snprintf(why, sizeof(why), "%s", lc_error_last());
    if (!workers_port_taken(c, st, r)) {
      lc__error_set(r, "%s", why); /* the look at the workers must not replace the detail */
      break;
    }
    lc__cluster_note(c, "a worker's port was taken after all (%s): trying other ports", why);
    lc__workers_unspawn(c, st);
    lc__cluster_drop_forwards(c, fwd_mark);
    lc__relaylog_drop(&c->relayed, relay_mark);
    if ((r = workers_ports(c, st, NULL)) < 0) {
      /* none left: the error still says why the first ones would not do (a squatted port) */
      char now[LC_ERRMSG_MAX];
      snprintf(now, sizeof(now), "%s", lc_error_last());
      lc__error_set(r, "%s; other ports were tried because %s", now, why);
      break;
    }
    if ((r = lc__workers_spawn(c, st)) == 0)
      r = workers_ready(c, st);
  }
  return r;
}

int lc_cluster_start_workers(lc_cluster *c, int n) {
  lc__wstart st = {0};
  int r;

  if (n < 1)
    return lc__error_set(-EINVAL, "cluster: %d workers asked for", n);
  if (c->master_proc == NULL)
    return lc__error_set(-EINVAL, "cluster: start the master first");
  if ((r = lc__cluster_nofile(c, (size_t)n)) < 0)
    return r;
  if ((r = lc__workers_prepare(c, n, NULL, &st)) < 0 || (r = lc__workers_stage(c, &st)) < 0 ||
      (r = lc__workers_spawn(c, &st)) < 0 || (r = lc__workers_finish(c, &st)) < 0 ||
      (r = lc__workers_after_start(c, &st)) < 0) {
    lc__workers_undo(c, &st); /* keeps the detail */
    return r;
  }
  return 0;
}
