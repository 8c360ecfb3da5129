/*
 * hosts.c - the hosts of a cluster's group as lc_cluster_wait sees them: a host whose connection
 * is lost (the runtime's keepalive gave up) is marked lost and its workers are moved to free slots
 * of other hosts, or wait for it (lc_host_loss); once it answers again, and once whatever ran
 * there before has ended (the runtime's sweep after the reconnect ended the lost connection's
 * lifelines; where that failed, their heartbeat limit ran out), it is back: its working
 * directory and staging are made again and its waiting workers start there again. The runtime
 * reconnects by itself (its forwards come back with it); the cluster asks it to also where it has
 * no forward (lc__runtime_keep_connected).
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pause between tries of a waiting worker whose start failed on a host that answers. */
#define LC__HOSTS_RETRY_MS 5000

/* The hosts' records, one per group runtime; every host of the group is kept connected. */
static int hosts_ready(lc_cluster *c) {
  size_t n = lc_group_count(c->group);
  lc__host *v;
  if (c->nhosts >= n)
    return 0;
  if ((v = lc__realloc(c->hosts, (n + 1) * sizeof(*v))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  memset(v + c->nhosts, 0, (n - c->nhosts) * sizeof(*v));
  c->hosts = v;
  c->nhosts = n;
  for (size_t i = 0; i < n; i++)
    lc__runtime_keep_connected(lc_group_at(c->group, i));
  return 0;
}

void lc__hosts_free(lc_cluster *c) {
  free(c->hosts);
  c->hosts = NULL;
  c->nhosts = 0;
}

/* A worker that counts: not removed (the array holds only those), not stopped by the caller. */
static int active(const lc__worker *w) { return w->rt != NULL && !w->stopped; }

/* How long after a loss the host's old processes may still run when the runtime's sweep could
 * not end them (lc__runtime_lost_ended): its lifelines end them once the heartbeat has been
 * silent for more than the limit (at most 4 watchdog periods of a third of it, in whole
 * seconds), then the kill grace, then their cleanup (the directory's removal). */
static uint64_t settle_ms(const lc_runtime *rt) {
  uint64_t period_s = ((uint64_t)(rt->opts.heartbeat_timeout_ms + 999) / 1000 + 2) / 3;
  return 4 * period_s * 1000 + (uint64_t)rt->opts.kill_grace_ms + 2000;
}

/* A free slot (no worker of the cluster on it) for w on a host that answers and is not lost:
 * a GPU of a host with GPUs for a worker with a GPU, a CPU slot (declared slots, else one) of a
 * host without for one without; the policy's filters (master's host, cap per host) hold. */
static int free_slot(lc_cluster *c, const lc__worker *w, lc_runtime **rt_out, int *gpu_out) {
  for (size_t i = 0; i < lc_group_count(c->group); i++) {
    lc_runtime *rt = lc_group_at(c->group, i);
    int gpus = lc_runtime_gpus(rt) > 0 ? lc_runtime_gpus(rt) : 0;
    int slots = gpus > 0 ? gpus : (lc_runtime_slots(rt) > 0 ? lc_runtime_slots(rt) : 1);
    int on = 0;
    if (rt == w->rt || c->hosts[i].lost || !lc_runtime_is_connected(rt) ||
        (gpus > 0) != (w->info.gpu >= 0) || (c->opts.exclude_master_host && rt == c->master_rt))
      continue;
    for (size_t k = 0; k < c->nworkers; k++)
      on += active(&c->workers[k]) && c->workers[k].rt == rt;
    if (on >= slots || (c->opts.max_workers_per_host > 0 && on >= c->opts.max_workers_per_host))
      continue;
    for (int g = gpus > 0 ? 0 : -1; g < (gpus > 0 ? gpus : 0); g++) {
      int used = 0;
      for (size_t k = 0; k < c->nworkers && !used; k++)
        used = active(&c->workers[k]) && c->workers[k].rt == rt && c->workers[k].info.gpu == g;
      if (!used) {
        *rt_out = rt;
        *gpu_out = g;
        return 1;
      }
    }
    if (gpus == 0) {
      *rt_out = rt;
      *gpu_out = -1;
      return 1;
    }
  }
  return 0;
}

/* Starts w at its place (staging first; then as lc_cluster_worker_restart, readiness included)
 * and makes its tunnels. On failure w has no process; the caller decides what it is then. */
static int start_at_place(lc_cluster *c, lc__worker *w) {
  int r;
  w->state = LC_WORKER_STARTING;
  w->reported = 0;
  w->stopped = 0;
  if ((r = lc__worker_stage(c, w)) < 0 ||
      (r = lc_cluster_worker_restart(c, (size_t)w->info.index)) < 0 ||
      (r = lc__worker_tunnels(c, w)) < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    lc__worker_end_process(w);
    w->stopped = 0; /* the restart's undoing marks it stopped: it is not the caller's stop */
    return lc__error_set(r, "%s", saved);
  }
  w->state = LC_WORKER_RUNNING;
  w->took = 0;
  w->started_ms = lc__wall_ms();
  return 0;
}

/* The port w keeps on rt: its own when nothing listens there on rt, else a new one from the
 * ranges (free on every host that answers); its aux port the same way. */
static int port_on(lc_cluster *c, lc__worker *w, lc_runtime *rt) {
  lc_ports *l = NULL;
  int r, *ports[2] = {&w->info.port, &w->info.aux_port};
  if (c->w->portless)
    return 0;
  if ((r = lc_ports_listening(&l, rt, 10000)) < 0)
    return r;
  for (int k = 0; k < 2 && r == 0; k++) {
    int old = *ports[k], got;
    if (old <= 0 || !lc_ports_contains(l, old))
      continue;
    if ((r = lc__cluster_pick_port_connected(c, &got)) < 0)
      break;
    lc__cluster_note(c, "%s: port %d is taken on %s: it gets port %d", w->out->tag, old,
                     lc_runtime_name(rt), got);
    lc__cluster_release_port(c, old);
    *ports[k] = got;
  }
  lc_ports_free(l);
  return r;
}

/* Puts w on rt with its host name, directory, output and GPU (their old values are the
 * caller's). */
static void set_place(lc__worker *w, lc_runtime *rt, char *host, char *dir, lc__output *out,
                      int gpu) {
  w->rt = rt;
  w->host = host;
  w->workdir = dir;
  w->out = out;
  w->info.host = host;
  w->info.workdir = dir;
  w->info.gpu = gpu;
}

/* Moves w (whose host was lost) to gpu on rt: its tunnels go (they listen on its port, also on
 * rt), it gets its directory there and starts; WORKER_MOVED. On failure it is back at its place
 * on the lost host (waiting for it). */
static int move_worker(lc_cluster *c, lc__worker *w, lc_runtime *rt, int gpu) {
  lc_runtime *old_rt = w->rt;
  char *old_host = w->host, *old_dir = w->workdir, *host = NULL, *dir = NULL;
  lc__output *old_out = w->out, *out = NULL;
  int old_gpu = w->info.gpu, old_port = w->info.port, r;
  const char *wd = NULL;

  lc__cluster_drop_port_forwards(c, w->info.port, NULL);
  if ((r = lc_runtime_workdir(&wd, rt)) < 0 || (r = port_on(c, w, rt)) < 0)
    goto out;
  host = lc__strdup(lc_runtime_name(rt));
  dir = lc__sprintf("%s/worker-%d", wd, w->info.index);
  out = lc__output_new(c, w->info.index, lc_runtime_name(rt));
  if (host == NULL || dir == NULL || out == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  set_place(w, rt, host, dir, out, gpu);
  if ((r = start_at_place(c, w)) < 0) {
    lc__cluster_drop_port_forwards(c, w->info.port, NULL);
    set_place(w, old_rt, old_host, old_dir, old_out, old_gpu);
    goto out;
  }
  host = dir = NULL;
  out = NULL;
  free(old_host);
  free(old_dir);
  lc__output_free(old_out);
  lc__cluster_note(c, "%s moved from %s: runs on %s%s, port %d%s", w->out->tag,
                   lc_runtime_name(old_rt), lc_runtime_name(rt), gpu >= 0 ? " with its GPU" : "",
                   w->info.port, w->info.port != old_port ? " (a new one)" : "");
  lc__cluster_emit(c, LC_CLUSTER_WORKER_MOVED, w->info.index);
out:
  free(host);
  free(dir);
  lc__output_free(out);
  return r;
}

/* w's host is lost: its process ended with the connection; it moves or waits. */
static void worker_lost(lc__worker *w, const char *host, uint64_t now) {
  if (w->proc != NULL) {
    lc_process_wait(NULL, w->proc, 1000); /* ended with the connection */
    lc_process_free(w->proc);
    w->proc = NULL;
  }
  w->ready = 0;
  w->took = 1;
  w->ended = 1;
  w->last_status = 0;
  w->last_signal = 0;
  w->started_ms = 0;
  snprintf(w->last_end, sizeof(w->last_end), "its host %s was lost", host);
  w->state = LC_WORKER_WAITING;
  w->next_start = now;
}

/* Host i is lost: HOST_LOST, and its workers move (MOVE, where a slot is free) or wait. */
static void host_lost(lc_cluster *c, size_t i) {
  lc_runtime *rt = lc_group_at(c->group, i);
  const char *name = lc_runtime_name(rt);
  uint64_t now = lc__now_ms();
  c->hosts[i].lost = 1;
  c->hosts[i].sweep_noted = 0;
  c->hosts[i].lost_at = now;
  c->hosts[i].lost_ms = lc__wall_ms();
  lc__cluster_note(c, "%s lost: it stopped answering", name);
  lc__cluster_emit(c, LC_CLUSTER_HOST_LOST, (int)i);
  for (size_t k = 0; k < c->nworkers; k++)
    if (active(&c->workers[k]) && c->workers[k].rt == rt)
      worker_lost(&c->workers[k], name, now);
  for (size_t k = 0; k < c->nworkers; k++) {
    lc__worker *w = &c->workers[k];
    lc_runtime *to = NULL;
    int gpu = -1;
    if (!active(w) || w->rt != rt || w->state != LC_WORKER_WAITING)
      continue;
    if (c->opts.host_loss != LC_HOST_LOSS_MOVE || c->master_proc == NULL || c->master_backoff ||
        !free_slot(c, w, &to, &gpu)) {
      lc__cluster_note(c, "%s waits for %s%s", w->out->tag, name,
                       c->opts.host_loss == LC_HOST_LOSS_MOVE ? " (no free slot elsewhere)" : "");
      continue;
    }
    if (move_worker(c, w, to, gpu) < 0) {
      lc__cluster_note(c, "%s could not move to %s: %s; it waits for %s", w->out->tag,
                       lc_runtime_name(to), lc_error_last(), name);
      w->state = LC_WORKER_WAITING;
    }
  }
}

/* Host i answers again and its old processes have ended: its directory and staging come back,
 * the other workers' tunnels there too (those made while it was away), HOST_BACK. Its waiting
 * workers start in the tick's next step. */
static int host_back(lc_cluster *c, size_t i) {
  lc_runtime *rt = lc_group_at(c->group, i);
  int r;
  if ((r = lc__runtime_workdir_renew(rt)) < 0)
    return r;
  lc__cluster_unstage_host(c, rt);
  for (size_t k = 0; k < c->nworkers; k++) {
    lc__worker *w = &c->workers[k];
    if (active(w) && w->rt != rt && w->state != LC_WORKER_WAITING &&
        (r = lc__worker_tunnels(c, w)) < 0)
      lc__cluster_note(c, "%s: a tunnel of %s could not be made again: %s", lc_runtime_name(rt),
                       w->out->tag, lc_error_last());
  }
  c->hosts[i].lost = 0;
  c->hosts[i].lost_ms = 0;
  lc__cluster_note(c, "%s back: it answers again", lc_runtime_name(rt));
  lc__cluster_emit(c, LC_CLUSTER_HOST_BACK, (int)i);
  return 0;
}

/* Host i answers, but the keeper of its working directory ended and its lifeline removed the
 * directory, the cluster's context in it: the heartbeat was silent past the limit (this program
 * stopped, or too busy to run) while the connection held. The workers there ended the same way;
 * before they start again, the directory comes back and the host is staged again. Told once for
 * as long as that fails. */
static void workdir_back(lc_cluster *c, size_t i, lc_runtime *rt) {
  if (lc__runtime_workdir_renew(rt) < 0) {
    if (!c->hosts[i].renew_noted)
      lc__cluster_note(c,
                       "%s: its working directory is gone (its keeper ended) and cannot be made "
                       "again: %s",
                       lc_runtime_name(rt), lc_error_last());
    c->hosts[i].renew_noted = 1;
    return;
  }
  c->hosts[i].renew_noted = 0;
  lc__cluster_unstage_host(c, rt);
  lc__cluster_note(c,
                   "%s: its working directory was removed by its keeper's lifeline (no "
                   "heartbeat for over the limit) and is made again",
                   lc_runtime_name(rt));
}

/* Host rt answers, but its mesh relay ended (its lifeline: the connection was lost, or the
 * heartbeat was silent past the limit while it held): the ports it listened on are listened on
 * again, through a new relay or with sshd's listens. */
static void relay_back(lc_cluster *c, lc_runtime *rt) {
  int *ports = NULL, r = 0;
  size_t n = 0;
  unsigned char relayed = 0;
  lc__fwd_spec *spec = NULL;
  if (!lc__meshrelay_ended(rt, &ports, &n) || n == 0) {
    free(ports);
    return;
  }
  if ((r = lc__meshrelay_listen_many(&rt, 1, &ports, &n, &relayed, NULL)) == 0 && !relayed) {
    if ((spec = lc__calloc(n, sizeof(*spec))) == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
    } else {
      for (size_t k = 0; k < n; k++)
        spec[k] = lc__fwd_spec_same_port(rt, LC_FORWARD_REMOTE, ports[k]);
      r = lc__forwards_new(spec, n, &c->fwds);
    }
  }
  if (r < 0)
    lc__cluster_note(c,
                     "%s: its mesh relay ended, and the %zu ports it listened on cannot all be "
                     "listened on again: %s",
                     lc_runtime_name(rt), n, lc_error_last());
  else
    lc__cluster_note(c,
                     "%s: its mesh relay ended (its lifeline); its %zu ports are listened on "
                     "again (%s)",
                     lc_runtime_name(rt), n, relayed ? "a new relay" : "sshd");
  free(spec);
  free(ports);
}

/* Lost host i answers again: are its old processes gone? Known when the runtime's sweep ended
 * them; else, where the sweep failed (noted once), when their heartbeat limit surely ran out. */
static int old_ended(lc_cluster *c, size_t i, lc_runtime *rt, uint64_t now) {
  char why[512] = "";
  int ended = lc__runtime_lost_ended(rt, why, sizeof(why));
  if (ended >= 0)
    return ended;
  if (!c->hosts[i].sweep_noted) {
    c->hosts[i].sweep_noted = 1;
    lc__cluster_note(c,
                     "%s answers again, but its old processes could not be ended (%s): it is "
                     "taken back when their heartbeat limit has surely run out, in %.0f s",
                     lc_runtime_name(rt), why,
                     (double)(c->hosts[i].lost_at + settle_ms(rt) > now
                                  ? c->hosts[i].lost_at + settle_ms(rt) - now
                                  : 0) /
                         1000.0);
  }
  return now >= c->hosts[i].lost_at + settle_ms(rt);
}

int lc__hosts_tick(lc_cluster *c) {
  uint64_t now = lc__now_ms();
  int r;
  if ((r = hosts_ready(c)) < 0)
    return r;
  for (size_t i = 0; i < c->nhosts && i < lc_group_count(c->group); i++) {
    lc_runtime *rt = lc_group_at(c->group, i);
    int up = lc_runtime_is_connected(rt);
    if (!c->hosts[i].lost && !up)
      host_lost(c, i);
    else if (!c->hosts[i].lost && lc__runtime_workdir_keeper_ended(rt))
      workdir_back(c, i, rt);
    else if (c->hosts[i].lost && up && old_ended(c, i, rt, now) && (r = host_back(c, i)) < 0)
      lc__cluster_note(c, "%s answers again but cannot take workers yet: %s", lc_runtime_name(rt),
                       lc_error_last());
    if (up && !c->hosts[i].lost)
      relay_back(c, rt);
  }
  /* waiting workers whose host answers (and is not lost) start there again */
  for (size_t k = 0; k < c->nworkers; k++) {
    lc__worker *w = &c->workers[k];
    size_t h = lc__cluster_host_index(c, w->rt);
    if (!active(w) || w->state != LC_WORKER_WAITING || h >= c->nhosts || c->hosts[h].lost ||
        !lc_runtime_is_connected(w->rt) || now < w->next_start || c->master_proc == NULL ||
        c->master_backoff) /* no start against a master that is down (repair.c) */
      continue;
    if (start_at_place(c, w) < 0) {
      lc__cluster_note(c, "%s could not start again on %s: %s; next try in %d s", w->out->tag,
                       w->host, lc_error_last(), LC__HOSTS_RETRY_MS / 1000);
      w->state = LC_WORKER_WAITING;
      w->next_start = lc__now_ms() + LC__HOSTS_RETRY_MS;
    } else {
      lc__cluster_note(c, "%s runs again on %s", w->out->tag, w->host);
    }
  }
  return 0;
}

/* A worker's end seen before the tick saw its host go (the connection went between the two
 * looks) is the loss's too: the next tick takes it. */
int lc__hosts_took(lc_cluster *c, lc__worker *w) {
  size_t h = lc__cluster_host_index(c, w->rt);
  return w->took || w->state == LC_WORKER_WAITING || !lc_runtime_is_connected(w->rt) ||
         (h < c->nhosts && c->hosts[h].lost);
}

int lc_cluster_host_status(const lc_cluster *c, size_t i, lc_host_status *out) {
  lc_runtime *rt;
  if (c == NULL || out == NULL || out->version < 1)
    return lc__error_set(-EINVAL, "lc_cluster_host_status: %s",
                         c == NULL || out == NULL ? "no cluster or no status given"
                                                  : "set out->version (LC_HOST_STATUS_VERSION)");
  if (i >= lc_group_count(c->group))
    return lc__error_set(-ENOENT, "cluster: no host %zu (the group has %zu)", i,
                         lc_group_count(c->group));
  rt = lc_group_at(c->group, i);
  out->name = lc_runtime_name(rt);
  out->connected = lc_runtime_is_connected(rt);
  out->lost_ms = i < c->nhosts && c->hosts[i].lost ? c->hosts[i].lost_ms : 0;
  out->reconnecting = !out->connected && lc__runtime_keeps_connected(rt);
  out->workers = 0;
  for (size_t k = 0; k < c->nworkers; k++)
    out->workers += active(&c->workers[k]) && c->workers[k].rt == rt;
  return 0;
}
