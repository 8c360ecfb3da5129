/*
 * scale.c - lc_cluster_scale: more workers start as lc_cluster_start_workers starts them; fewer
 * are the highest indices, let go gracefully where the type can (the worker launcher's retire),
 * then stopped and removed: their tunnels on every host, their ports, their directories and their
 * records go, so that the next workers added take those indices again.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The type's graceful way, when it has one; its failure is only noted: they are stopped anyway. */
static void retire(lc_cluster *c, size_t first, size_t n) {
  size_t *idx;
  int r;
  if (c->w->version < 5 || c->w->retire == NULL || c->master_proc == NULL)
    return;
  if ((idx = lc__calloc(n, sizeof(*idx))) == NULL)
    return;
  for (size_t k = 0; k < n; k++)
    idx[k] = first + k;
  if ((r = c->w->retire(c->w, c, idx, n, c->opts.worker_timeout_ms)) < 0)
    lc__cluster_note(c, "the worker launcher's retire of workers %zu-%zu failed (%s): %s", first,
                     first + n - 1, lc_err_name(r), lc_error_last());
  else
    lc__cluster_note(c, "workers %zu-%zu retired by the worker launcher", first, first + n - 1);
  free(idx);
}

/* Workers first.. stop (all at once) and go: tunnels (of all of them in one pass), ports,
 * directories, records. */
static void remove_from(lc_cluster *c, size_t first) {
  int *ports = lc__calloc(c->nworkers - first, sizeof(*ports));
  size_t np = 0;
  for (size_t i = first; i < c->nworkers; i++)
    if (c->workers[i].proc != NULL)
      lc_process_stop(c->workers[i].proc);
  for (size_t i = first; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    lc__worker_end_process(w);
    if (c->w->portless || w->info.port <= 0)
      continue;
    if (ports != NULL)
      ports[np++] = w->info.port;
    else /* out of memory: one at a time */
      lc__cluster_drop_port_forwards(c, w->info.port, NULL);
  }
  lc__int_sort(ports, np);
  lc__cluster_drop_ports_forwards(c, ports, np, NULL);
  free(ports);
  for (size_t i = first; i < c->nworkers && !c->w->portless; i++) {
    lc__cluster_release_port(c, c->workers[i].info.port);
    lc__cluster_release_port(c, c->workers[i].info.aux_port);
  }
  lc__workers_remove_dirs(c, first, c->nworkers);
  while (c->nworkers > first) {
    lc__worker *w = &c->workers[c->nworkers - 1];
    int index = w->info.index;
    lc__cluster_note(c, "%s removed", w->out ? w->out->tag : "a worker");
    lc__worker_clear(w);
    c->nworkers--;
    lc__cluster_emit(c, LC_CLUSTER_WORKER_REMOVED, index);
  }
}

int lc_cluster_scale(lc_cluster *c, int n) {
  size_t now;
  if (c == NULL)
    return lc__error_set(-EINVAL, "lc_cluster_scale: no cluster given");
  if (n < 0)
    return lc__error_set(-EINVAL, "cluster: cannot scale to %d workers (0 or more)", n);
  now = c->nworkers;
  if ((size_t)n > now)
    return lc_cluster_start_workers(c, (int)((size_t)n - now));
  if ((size_t)n == now)
    return 0;
  lc__cluster_note(c, "scaling from %zu workers to %d", now, n);
  retire(c, (size_t)n, now - (size_t)n);
  remove_from(c, (size_t)n);
  return 0;
}
