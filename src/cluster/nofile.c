/*
 * nofile.c - open files for a start: what this process will hold for the cluster, estimated from
 * its hosts and workers, against RLIMIT_NOFILE. The soft limit is raised to the hard one only
 * when the estimate needs it (a program that embeds the library may rely on descriptors below
 * FD_SETSIZE for select(), so the library does not raise it otherwise; lazyclusterctl always
 * does); beyond the hard limit the start fails before anything starts, saying how to raise it.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

/* The engine's own (loop, wake-ups, stdio, log files) and a local master's pipes. */
#define LC__NOFILE_BASE 64

size_t lc__cluster_nofile_need(lc_cluster *c, size_t more) {
  size_t hosts = lc_group_count(c->group), workers = c->nworkers + more;
  size_t n = LC__NOFILE_BASE + 2 * hosts; /* each host's SSH socket and the dup that is polled */
  if (c->w->portless || c->w->mesh == 0)
    return n + workers; /* each worker's connection to the master through its host's tunnel */
  /* each worker: its port's listener here (-L), its connection to the master, and one
   * connection from another host through this machine (two sockets here) under the mesh */
  return n + workers * (c->w->mesh == LC_WORKER_MESH ? 4 : 2);
}

int lc__cluster_nofile(lc_cluster *c, size_t more) {
  struct rlimit rl;
  size_t need = lc__cluster_nofile_need(c, more);
  unsigned long long soft, hard;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || need <= rl.rlim_cur)
    return 0;
  soft = (unsigned long long)rl.rlim_cur;
  hard = (unsigned long long)rl.rlim_max;
  if (rl.rlim_max != RLIM_INFINITY && need > rl.rlim_max)
    return lc__error_set(-EMFILE,
                         "cluster: %zu workers on %zu hosts need about %zu open files in this "
                         "process, more than its limit allows (RLIMIT_NOFILE: soft %llu, hard "
                         "%llu); raise it (ulimit -n %zu in the shell that starts it; the hard "
                         "limit: nofile in /etc/security/limits.conf, or LimitNOFILE= for a "
                         "systemd service) and start again",
                         c->nworkers + more, lc_group_count(c->group), need, soft, hard, need);
  rl.rlim_cur = rl.rlim_max != RLIM_INFINITY ? rl.rlim_max : (rlim_t)need * 4;
  if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
    return lc__error_set(-errno,
                         "cluster: %zu workers on %zu hosts need about %zu open files in this "
                         "process, and raising its soft limit of open files (RLIMIT_NOFILE) from "
                         "%llu to %llu failed: %s; raise it (ulimit -n %zu) and start again",
                         c->nworkers + more, lc_group_count(c->group), need, soft,
                         (unsigned long long)rl.rlim_cur, strerror(errno), need);
  lc__cluster_note(c, "the soft limit of open files raised from %llu to %llu (about %zu needed)",
                   soft, (unsigned long long)rl.rlim_cur, need);
  return 0;
}
