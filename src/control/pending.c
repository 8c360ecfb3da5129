/*
 * pending.c - TEMPORARY: weak stand-ins for cluster accessors of issue 13 that other branches
 * (repair) implements. A strong definition replaces each at link time; this file goes once
 * they are merged.
 */
#include "control_internal.h"
#include "lazycluster/group.h"
#include "lazycluster/runtime.h"

#include <errno.h>
#include <string.h>

#define LC__WEAK __attribute__((weak))

LC__WEAK int lc_cluster_worker_status(const lc_cluster *c, size_t i, lc_worker_status *out) {
  const lc_worker_info *w = lc_cluster_worker(c, i);
  lc_process *p;
  if (w == NULL)
    return -ENOENT;
  p = lc_cluster_worker_process(c, i);
  out->state = p ? LC_WORKER_RUNNING : LC_WORKER_FAILED;
  out->host = w->host;
  out->port = w->port;
  out->gpu = w->gpu;
  out->pid = p ? lc_process_pid(p) : 0;
  out->last_end = "";
  return 0;
}

LC__WEAK int lc_cluster_master_restarts(const lc_cluster *c) {
  (void)c;
  return 0;
}

LC__WEAK long long lc_cluster_time_left_ms(const lc_cluster *c) {
  (void)c;
  return -1;
}
