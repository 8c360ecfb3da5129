/*
 * worker.c - one worker: stopped, and started again on its place (host, GPU, port, working
 * directory and tunnels stay the cluster's between the two), with its readiness.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a stopped worker's process group may take to end (the lifeline's SIGTERM, grace
 * period, SIGKILL) before we give up waiting and free the handle, which ends it too. */
#define LC__WORKER_STOP_WAIT_MS 30000

void lc__worker_end_process(lc__worker *w) {
  if (w->proc != NULL) {
    lc_process_stop(w->proc);
    lc_process_wait(NULL, w->proc, LC__WORKER_STOP_WAIT_MS);
    lc_process_free(w->proc);
    w->proc = NULL;
  }
  w->ready = 0;
}

/* Ends w's process (its process group) and waits for that; its place stays. */
static void worker_end(lc_cluster *c, lc__worker *w, const char *why) {
  lc__worker_end_process(w);
  w->stopped = 1;
  w->reported = 0;
  w->state = LC_WORKER_STOPPED;
  w->started_ms = 0;
  lc__cluster_note(c, "%s %s", w->out->tag, why);
}

int lc_cluster_worker_stop(lc_cluster *c, size_t i) {
  lc__worker *w;
  if (i >= c->nworkers)
    return lc__error_set(-ENOENT, "cluster: no worker %zu (the cluster has %zu)", i, c->nworkers);
  w = &c->workers[i];
  if (w->state == LC_WORKER_BACKOFF && !w->stopped) { /* its restart is called off */
    lc_process_free(w->proc);
    w->proc = NULL;
    w->stopped = 1;
    w->reported = 0;
    w->state = LC_WORKER_STOPPED;
    lc__cluster_note(c, "%s stopped (its restart called off)", w->out->tag);
    return 0;
  }
  if (w->proc == NULL || w->stopped || w->reported ||
      lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT)
    return lc__error_set(-EINVAL, "cluster: %s does not run (%s)", w->out->tag,
                         w->stopped ? "it was stopped" : "it ended");
  worker_end(c, w, "stopped");
  return 0;
}

/* Readiness of the restarted worker w: the launcher's wait_ready with every running worker, else
 * its port listening on its host; a process that ends meanwhile is named. */
static int worker_ready(lc_cluster *c, lc__worker *w) {
  char msg[4096], limit[640];
  int r;
  if (c->w->wait_ready != NULL) {
    r = c->w->wait_ready(c->w, c, lc__cluster_wait_n(c, 1), c->opts.worker_timeout_ms);
    if (lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT) /* ended, counted or not */
      r = LC_EREMOTE;
    else if (r == -ETIMEDOUT) {
      char why[LC_ERRMSG_MAX];
      snprintf(why, sizeof(why), "%s", lc_error_last());
      lc__cluster_limit_why(c, 0, limit, sizeof(limit));
      return lc__error_set(r, "%s was not ready after its restart: %s %s", w->out->tag, why, limit);
    } else if (r < 0)
      return r;
  } else if (c->w->portless) {
    r = lc_process_wait(NULL, w->proc, 0) != -ETIMEDOUT ? LC_EREMOTE : 0;
  } else {
    r = lc_ports_wait_listening(w->rt, w->info.port, w->proc, c->opts.worker_timeout_ms);
  }
  if (r != LC_EREMOTE && r != -ETIMEDOUT)
    return r;
  lc__cluster_how_ended(c, w->out, w->proc, msg, sizeof(msg)); /* only for a message */
  if (r == LC_EREMOTE)
    return lc__error_set(r, "%s failed to restart: %s", w->out->tag, msg);
  lc__cluster_limit_text(c, 0, limit, sizeof(limit));
  return lc__error_set(r, "%s did not listen on port %d within %s after its restart: %s",
                       w->out->tag, w->info.port, limit, msg);
}

int lc__worker_respawn(lc_cluster *c, lc__worker *w, lc_exec_result *res) {
  int r;
  res->exit_status = -1;
  res->signal = 0;
  lc_process_free(w->proc); /* an ended process (a restart after an end) */
  w->proc = NULL;
  lc__output_clear(w->out);
  w->info.master_port = c->master_port;
  if ((r = lc__cluster_context_send(c, w)) < 0 || (r = lc__worker_spawn(c, w)) < 0)
    return r;
  w->stopped = 0;
  w->reported = 0;
  if ((r = worker_ready(c, w)) < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    lc_process_wait(res, w->proc, 0);
    worker_end(c, w, "stopped: its restart failed");
    return lc__error_set(r, "%s", saved);
  }
  w->ready = 1;
  return 0;
}

int lc_cluster_worker_restart(lc_cluster *c, size_t i) {
  lc_exec_result res;
  lc__worker *w;
  int r;
  if (i >= c->nworkers)
    return lc__error_set(-ENOENT, "cluster: no worker %zu (the cluster has %zu)", i, c->nworkers);
  if (c->master_proc == NULL)
    return lc__error_set(-EINVAL, "cluster: the master does not run");
  w = &c->workers[i];
  if (w->proc != NULL)
    worker_end(c, w, "stopped for its restart");
  if ((r = lc__worker_respawn(c, w, &res)) < 0)
    return r;
  lc__cluster_note(c, "%s ready again on port %d", w->out->tag, w->info.port);
  lc__cluster_emit(c, LC_CLUSTER_WORKER_UP, w->info.index);
  return 0;
}
