/*
 * placement.c - which host and GPU each worker gets.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdlib.h>

/* One slot per GPU on hosts with GPUs, else the declared slots, else one per host. */
lc__slot *lc__cluster_slots(lc_cluster *c, size_t *count) {
  size_t n = 0, cap = 16;
  lc__slot *s = lc__calloc(cap, sizeof(*s));
  for (size_t i = 0; s != NULL && i < lc_group_count(c->group); i++) {
    lc_runtime *rt = lc_group_at(c->group, i);
    int gpus = lc_runtime_gpus(rt), slots = lc_runtime_slots(rt);
    int k = gpus > 0 ? gpus : slots > 0 ? slots : 1;
    for (int j = 0; j < k; j++) {
      if (n == cap) {
        lc__slot *v = lc__realloc(s, (cap *= 2) * sizeof(*s));
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
