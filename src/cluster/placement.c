/*
 * placement.c - which host and GPU each worker gets. lc__place is a pure function over the hosts
 * (their GPUs, declared slots, which one runs the master), the policy, the cap and the workers
 * placed already, so that it is tested without hosts (tests/unit/test_placement.c);
 * lc__cluster_place feeds it the cluster's group and workers.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The slots of host h: one per GPU, else its declared slots, else one. */
static int host_nslots(const lc__place_host *h) {
  return h->gpus > 0 ? h->gpus : h->slots > 0 ? h->slots : 1;
}

/* Workers among placed[0..n-1] on host h, and on its slot j (j < 0: the host's). A CPU host's
 * workers are spread over its slots in order, as the policies fill them. */
static int count_on(const lc__place_host *hosts, size_t h, const lc__place_spot *placed, size_t n,
                    int j) {
  int on_host = 0, on_gpu = 0;
  for (size_t i = 0; i < n; i++)
    if (placed[i].host == (int)h) {
      on_host++;
      on_gpu += placed[i].gpu == j;
    }
  if (j < 0)
    return on_host;
  if (hosts[h].gpus > 0)
    return on_gpu;
  return on_host / host_nslots(&hosts[h]) + (j < on_host % host_nslots(&hosts[h]));
}

/* Workers per host and per GPU (gpu[base[h] + j]) among those placed so far, kept as each is
 * placed: count_on's answers without its walk over every placed worker, which made a start of W
 * workers on H hosts cost W x W x H steps (a tenth of our CPU at 1,024 workers on 256 hosts). */
typedef struct counts {
  int *host, *gpu;
  size_t *base;
} counts;

static int count_fast(const lc__place_in *in, const counts *ct, size_t h, int j) {
  int on_host = ct->host[h], ns;
  if (j < 0)
    return on_host;
  if (in->hosts[h].gpus > 0)
    return ct->gpu[ct->base[h] + (size_t)j];
  ns = host_nslots(&in->hosts[h]);
  return on_host / ns + (j < on_host % ns);
}

static void count_add(const lc__place_in *in, counts *ct, const lc__place_spot *s) {
  if (s->host < 0 || (size_t)s->host >= in->nhosts)
    return;
  ct->host[s->host]++;
  if (in->hosts[s->host].gpus > 0 && s->gpu >= 0 && s->gpu < in->hosts[s->host].gpus)
    ct->gpu[ct->base[s->host] + (size_t)s->gpu]++;
}

/* Why no host may take worker index: the master's host excluded, the others at the cap. */
static int no_room(const lc__place_in *in, const lc__place_spot *placed, size_t n, int index) {
  char full[1024] = "", excl[256] = "";
  size_t used = 0;
  for (size_t h = 0; h < in->nhosts; h++) {
    if (in->exclude_master && in->hosts[h].master)
      snprintf(excl, sizeof(excl), "the master's host %s is excluded (exclude_master_host)",
               in->hosts[h].name);
    else if (used < sizeof(full))
      used += (size_t)snprintf(full + used, sizeof(full) - used, "%s%s %d", used ? ", " : "",
                               in->hosts[h].name, count_on(in->hosts, h, placed, n, -1));
  }
  if (full[0] == '\0')
    return lc__error_set(-ENOSPC,
                         "cluster: no host may take worker %d: %s and the group has no "
                         "other host",
                         index, excl);
  return lc__error_set(-ENOSPC,
                       "cluster: no host may take worker %d: every host has the cap of %d workers "
                       "(max_workers_per_host %d; workers now: %s)%s%s",
                       index, in->max_per_host, in->max_per_host, full, excl[0] ? "; " : "", excl);
}

/* The policy's choice among slots: the least used slots; of those, spread takes the host with
 * the fewest workers (ties: the first), pack the first. */
static size_t choose(const lc__place_in *in, const lc_slot *slots, const size_t *slot_host,
                     size_t nslots, const counts *ct) {
  int least = slots[0].workers, best_load = -1;
  size_t best = 0;
  for (size_t s = 1; s < nslots; s++)
    if (slots[s].workers < least)
      least = slots[s].workers;
  for (size_t s = 0; s < nslots; s++) {
    int load;
    if (slots[s].workers != least)
      continue;
    if (in->policy == LC_PLACE_PACK)
      return s;
    load = count_fast(in, ct, slot_host[s], -1);
    if (best_load < 0 || load < best_load) {
      best = s;
      best_load = load;
    }
  }
  return best;
}

int lc__place(const lc__place_in *in, lc__place_spot *placed, size_t first, size_t n,
              char (*why)[LC__PLACE_WHY]) {
  size_t total = 0;
  lc_slot *slots = NULL;
  size_t *slot_host = NULL; /* each slot's host and position on it */
  int *slot_pos = NULL;
  counts ct = {0};
  int r = 0;

  if (in->nhosts == 0)
    return lc__error_set(-EINVAL, "cluster: no host to place workers on");
  for (size_t h = 0; h < in->nhosts; h++)
    total += (size_t)host_nslots(&in->hosts[h]);
  if ((slots = lc__calloc(total, sizeof(*slots))) == NULL ||
      (slot_host = lc__calloc(total, sizeof(*slot_host))) == NULL ||
      (slot_pos = lc__calloc(total, sizeof(*slot_pos))) == NULL ||
      (ct.host = lc__calloc(in->nhosts, sizeof(*ct.host))) == NULL ||
      (ct.gpu = lc__calloc(total, sizeof(*ct.gpu))) == NULL ||
      (ct.base = lc__calloc(in->nhosts, sizeof(*ct.base))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t h = 1; h < in->nhosts; h++)
    ct.base[h] = ct.base[h - 1] + (size_t)host_nslots(&in->hosts[h - 1]);
  for (size_t i = 0; i < first; i++)
    count_add(in, &ct, &placed[i]);
  for (size_t k = first; k < first + n; k++) {
    size_t nslots = 0, pick;
    const lc_slot *s;
    const char *how = in->policy == LC_PLACE_PACK ? "pack" : "spread";
    for (size_t h = 0; h < in->nhosts; h++) {
      const lc__place_host *ph = &in->hosts[h];
      if ((in->exclude_master && ph->master) ||
          (in->max_per_host > 0 && count_fast(in, &ct, h, -1) >= in->max_per_host))
        continue;
      for (int j = 0; j < host_nslots(ph); j++) {
        slots[nslots].host = ph->name;
        slots[nslots].gpu = ph->gpus > 0 ? j : -1;
        slots[nslots].workers = count_fast(in, &ct, h, j);
        slot_pos[nslots] = j;
        slot_host[nslots++] = h;
      }
    }
    if (nslots == 0) {
      r = no_room(in, placed, k, (int)k);
      goto out;
    }
    if (in->hook != NULL) {
      int got = in->hook(in->hook_arg, (int)k, slots, nslots);
      how = "the type's place";
      if (got < 0) {
        char detail[LC_ERRMSG_MAX];
        snprintf(detail, sizeof(detail), "%s", lc_error_last());
        r = lc__error_set(got, "cluster: the worker launcher's place failed for worker %zu: %s", k,
                          detail);
        goto out;
      }
      if ((size_t)got >= nslots) {
        r = lc__error_set(-EINVAL,
                          "cluster: the worker launcher's place returned %d for worker %zu, "
                          "which is not a slot (there are %zu: 0-%zu)",
                          got, k, nslots, nslots - 1);
        goto out;
      }
      pick = (size_t)got;
    } else {
      pick = choose(in, slots, slot_host, nslots, &ct);
    }
    s = &slots[pick];
    placed[k].host = (int)slot_host[pick];
    placed[k].gpu = s->gpu;
    count_add(in, &ct, &placed[k]);
    if (why != NULL) {
      char *w = why[k - first];
      if (s->gpu >= 0)
        snprintf(w, LC__PLACE_WHY, "GPU %d of %s (%s", s->gpu, s->host, how);
      else if (host_nslots(&in->hosts[slot_host[pick]]) > 1)
        snprintf(w, LC__PLACE_WHY, "CPU slot %d of %s (%s", slot_pos[pick], s->host, how);
      else
        snprintf(w, LC__PLACE_WHY, "%s, no GPU (%s", s->host, how);
      if (s->workers > 0)
        snprintf(w + strlen(w), LC__PLACE_WHY - strlen(w),
                 "; shared with %d other worker%s: every slot has one", s->workers,
                 s->workers == 1 ? "" : "s");
      snprintf(w + strlen(w), LC__PLACE_WHY - strlen(w), ")");
    }
  }
out:
  free(ct.host);
  free(ct.gpu);
  free(ct.base);
  free(slots);
  free(slot_host);
  free(slot_pos);
  return r;
}

static int call_place(void *arg, int index, const lc_slot *slots, size_t nslots) {
  lc_cluster *c = arg;
  return c->w->place(c->w, c, index, slots, nslots);
}

/*
 * Places workers first..first+n-1 of c->workers (their rt and gpu), counting the cluster's
 * workers before them, by the worker launcher's place or the options' policy; the cluster log
 * says where each went and why.
 */
int lc__cluster_place(lc_cluster *c, size_t first, size_t n) {
  size_t nh = lc_group_count(c->group);
  lc__place_host *hosts = lc__calloc(nh + 1, sizeof(*hosts));
  lc__place_spot *spots = lc__calloc(first + n + 1, sizeof(*spots));
  char(*why)[LC__PLACE_WHY] = lc__calloc(n + 1, sizeof(*why));
  lc__place_in in = {0};
  int r = 0;

  if (hosts == NULL || spots == NULL || why == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t h = 0; h < nh; h++) {
    lc_runtime *rt = lc_group_at(c->group, h);
    hosts[h].name = lc_runtime_name(rt);
    hosts[h].gpus = lc_runtime_gpus(rt);
    hosts[h].slots = lc_runtime_slots(rt);
    hosts[h].master = rt == c->master_rt;
  }
  for (size_t i = 0; i < first; i++) {
    spots[i].host = (int)lc__cluster_host_index(c, c->workers[i].rt);
    spots[i].gpu = c->workers[i].info.gpu;
  }
  in.hosts = hosts;
  in.nhosts = nh;
  in.policy = c->opts.placement;
  in.max_per_host = c->opts.max_workers_per_host;
  in.exclude_master = c->opts.exclude_master_host;
  if (c->w->version >= 4 && c->w->place != NULL) {
    in.hook = call_place;
    in.hook_arg = c;
  }
  if ((r = lc__place(&in, spots, first, n, why)) < 0)
    goto out;
  for (size_t k = 0; k < n; k++) {
    lc__worker *w = &c->workers[first + k];
    w->rt = lc_group_at(c->group, (size_t)spots[first + k].host);
    w->info.gpu = spots[first + k].gpu;
    lc__cluster_note(c, "worker-%zu goes to %s", first + k, why[k]);
  }
out:
  free(hosts);
  free(spots);
  free(why);
  return r;
}
