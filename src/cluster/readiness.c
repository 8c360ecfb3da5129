/*
 * readiness.c - whether a process's port listens: polled by waiting on the process with a short
 * limit, then probing the port (a connection to it, no process on the host) and, once it
 * accepted, reading the host's listening ports to tell whose it is (never a fixed sleep); many
 * hosts overlapped, a slow host holding up no other. While probes fail a listing runs only once
 * a second, since a failed probe may also be a forward the host refuses.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The worker's name in messages: its tag without the host ("lab2 worker-0": "worker-0"). */
static const char *worker_name(const lc__worker *w) {
  const char *sp = strchr(w->out->tag, ' ');
  return sp != NULL ? sp + 1 : w->out->tag;
}

/* Starts a listing of host h that watches the ports of its workers first.. not ready yet (ports:
 * room for all of them), so that it tells whose each port is. */
static int host_listing_start(lc_cluster *c, size_t first, size_t h, lc__listing **out,
                              int *ports) {
  size_t n = 0;
  for (size_t i = first; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (!w->ready && lc__cluster_host_index(c, w->rt) == h)
      ports[n++] = w->info.port;
  }
  return lc__listing_start(out, lc_group_at(c->group, h), ports, n);
}

/* Starts a probe of the ports of host h's workers first.. not ready yet whose port did not
 * accept yet (acc: per worker; ports: room for all workers and one more), and of port check
 * when it is not 0: a port a listing showed ours. */
static int host_probe_start(lc_cluster *c, size_t first, size_t h, const char *acc, int check,
                            lc__probe **out, int *ports) {
  size_t n = 0;
  for (size_t i = first; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (!w->ready && !acc[i] && lc__cluster_host_index(c, w->rt) == h)
      ports[n++] = w->info.port;
  }
  if (check != 0)
    ports[n++] = check;
  return lc__probe_start(out, lc_group_at(c->group, h), ports, n);
}

/* A probe of host h, started by host_probe_start, ended (no listing of h ran meanwhile, so its
 * workers not ready are those it asked): acc[i] set for each worker whose port accepted. Returns
 * 1 when every worker of h not ready yet has accepted (a listing is to tell whose the ports
 * are). *blind set when the backend cannot tell for a port, or when port check, which a listing
 * showed ours, did not accept: the host's probes fail where something listens (forwarding
 * refused, a firewall on loopback), so only listings can tell. */
static int host_probe_judge(lc_cluster *c, size_t first, size_t h, const lc__probe *x, int check,
                            char *acc, int *blind) {
  const int *ports = NULL;
  size_t n = 0, j = 0;
  const int *res = lc__probe_result(x, &ports, &n);
  int all = 1;
  for (size_t i = first; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (w->ready || lc__cluster_host_index(c, w->rt) != h)
      continue;
    if (!acc[i] && j < n && ports[j] == w->info.port) {
      acc[i] = res[j] == 1;
      *blind |= res[j] < 0;
      j++;
    }
    all &= acc[i];
  }
  if (check != 0 && j < n && ports[j] == check)
    *blind |= res[j] != 1;
  return all;
}

/* The pause before a host's next look, after a pause of gap, waited ms into the wait
 * (cluster_internal.h: 10 ms, growing to LC__POLL_GAP_MAX_MS). */
static unsigned poll_gap(unsigned gap, uint64_t waited) {
  if (waited < 500)
    return LC__POLL_MS / 5;
  if (gap < LC__LISTING_GAP_MAX_MS)
    return gap + LC__POLL_MS / 5;
  gap += gap / 4;
  return gap < LC__POLL_GAP_MAX_MS ? gap : LC__POLL_GAP_MAX_MS;
}

/*
 * Readiness of workers first..: each host with workers not yet listening is probed on its own,
 * one probe after the other (poll_gap: 10 ms apart for the first half second, growing to a
 * second apart: a slow service is not hammered), so that a slow host holds up no
 * other and a host whose workers are all up is left alone. A probe connects to each port at
 * 127.0.0.1 on the host, where the tunnels connect (on SSH a direct-tcpip channel: no session
 * channel, no process, so a host whose workers hold its channels is still polled); a port that
 * accepted is not asked again, and once all of a host's waiting ports accepted, a listing of the
 * host tells whose they are (one listing per host, usually). A worker is ready when its port
 * listens for the cluster's user there: another uid's listener on it means a stranger took the
 * port, and the wait ends with that error (-EADDRINUSE).
 * A failed probe is "not yet", but the backend may not know why it failed (libssh 0.10 does not
 * keep a channel's open-failure reason), so while some probes fail a listing still runs, after
 * LC__PROBE_LISTING_MS and then a second further apart each time up to LC__PROBE_LISTING_MAX_MS
 * (it also makes the workers already up ready); when such a listing shows
 * ours a port whose probe failed, the next probe asks that port again, and if it fails there the
 * host's probes cannot see (forwarding refused): from then on, as for a backend without probes,
 * the host is polled with listings alone.
 * Ends at the first worker that died.
 */
int lc__workers_wait_listening(lc_cluster *c, size_t first, uint64_t deadline) {
  uint64_t t0 = lc__now_ms();
  size_t nh = lc_group_count(c->group);
  lc__listing **ls = lc__calloc(nh + 1, sizeof(*ls));
  lc__probe **pr = lc__calloc(nh + 1, sizeof(*pr));
  uint64_t *next = lc__calloc(nh + 1, sizeof(*next));
  uint64_t *listed = lc__calloc(nh + 1, sizeof(*listed)); /* when a listing last started */
  unsigned *lgap =
      lc__calloc(nh + 1, sizeof(*lgap)); /* listings while probes fail: how far apart */
  unsigned *gap = lc__calloc(nh + 1, sizeof(*gap));
  int *check = lc__calloc(nh + 1, sizeof(*check));   /* a port a listing found ours unprobed */
  int *probed = lc__calloc(nh + 1, sizeof(*probed)); /* the check port the running probe asks */
  char *needed = lc__calloc(nh + 1, 1);
  char *confirm = lc__calloc(nh + 1, 1);      /* all ports accepted: a listing tells whose */
  char *blind = lc__calloc(nh + 1, 1);        /* probes cannot tell: listings alone */
  char *acc = lc__calloc(c->nworkers + 1, 1); /* the worker's port accepted a probe */
  int *ports = lc__calloc(c->nworkers + 2, sizeof(*ports));
  char msg[4096];
  int r = 0, rescan = 1;
  size_t pending = 0;
  lc_process *some = NULL;
  uint64_t seen = 0, scanned_at = 0;

  if (ls == NULL || pr == NULL || next == NULL || listed == NULL || lgap == NULL || gap == NULL ||
      check == NULL || probed == NULL || needed == NULL || confirm == NULL || blind == NULL ||
      acc == NULL || ports == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t h = 0; h < nh; h++) {
    listed[h] = t0;
    lgap[h] = LC__PROBE_LISTING_MS;
  }
  for (;;) {
    lc__listing *busy = NULL;
    lc__probe *probing = NULL;
    uint64_t now = lc__now_ms(), changes;
    for (size_t h = 0; h < nh; h++) {
      int b = 0;
      if (pr[h] == NULL || !lc__probe_wait(pr[h], 0))
        continue;
      confirm[h] = (char)host_probe_judge(c, first, h, pr[h], probed[h], acc, &b);
      if (b && !blind[h])
        lc__cluster_note(c,
                         "%s: probes of its ports fail where a port listens (TCP forwarding "
                         "refused?): readiness reads listings of the host",
                         lc_runtime_name(lc_group_at(c->group, h)));
      blind[h] |= (char)b;
      lc__probe_free(pr[h]);
      pr[h] = NULL;
      probed[h] = 0;
      gap[h] = poll_gap(gap[h], now - t0);
      next[h] = now + gap[h];
    }
    /* listings that ended: the workers of their host that listen are ready */
    for (size_t h = 0; h < nh; h++) {
      const lc__portscan *ps = NULL;
      if (ls[h] == NULL || !lc__listing_wait(ls[h], 0))
        continue;
      if ((r = lc__listing_finish(ls[h], &ps)) < 0)
        goto out;
      for (size_t i = first; i < c->nworkers; i++) {
        lc__worker *w = &c->workers[i];
        char whose[200];
        if (w->ready || lc__cluster_host_index(c, w->rt) != h)
          continue;
        /* only a listener of the user's uid makes the worker ready; another's took the port */
        snprintf(whose, sizeof(whose), "%s's %s", lc_runtime_name(w->rt), worker_name(w));
        if ((r = lc__ports_judge_owner(w->rt, w->info.port, ps, whose)) < 0)
          goto out;
        if (r == 0) {
          acc[i] = 0; /* accepted, but not listed (yet): probed again */
          continue;
        }
        r = 0;
        w->ready = 1;
        rescan = 1;
        /* found by a listing though its probes failed: the next probe asks this port too */
        if (!acc[i] && !blind[h])
          check[h] = w->info.port;
        lc__cluster_note(c, "%s ready on port %d", w->out->tag, w->info.port);
        lc__cluster_emit(c, LC_CLUSTER_WORKER_UP, w->info.index);
      }
      lc__listing_free(ls[h]);
      ls[h] = NULL;
      if (blind[h]) {
        gap[h] = poll_gap(gap[h], now - t0);
        next[h] = now + gap[h];
      }
    }
    /* the workers: looked at again only when the engine's state moved (a process ended: it
     * counts as a change before its waiters can see it), a listing made some ready, or a second
     * passed; a pass that changed nothing costs no look at each of thousands of workers */
    changes = lc__engine_changes(lc__group_engine(c->group));
    if (rescan || changes != seen || now >= scanned_at + 1000) {
      seen = changes;
      scanned_at = now;
      rescan = 0;
      pending = 0;
      some = NULL;
      memset(needed, 0, nh);
      for (size_t i = first; i < c->nworkers; i++) {
        lc__worker *w = &c->workers[i];
        size_t h = lc__cluster_host_index(c, w->rt);
        if (w->ready)
          continue;
        if (lc__process_finished(w->proc, NULL)) {
          lc__cluster_how_ended(c, w->out, w->proc, msg, sizeof(msg));
          r = lc__error_set(LC_EREMOTE, "%s failed to start: %s", w->out->tag, msg);
          goto out;
        }
        if (c->w->portless || h == (size_t)-1) {
          w->ready = 1;
          lc__cluster_emit(c, LC_CLUSTER_WORKER_UP, w->info.index);
          continue;
        }
        needed[h] = 1;
        pending++;
        some = w->proc;
      }
    }
    if (pending == 0)
      goto out;
    if (now >= deadline) {
      for (size_t i = first; i < c->nworkers; i++) {
        lc__worker *w = &c->workers[i];
        if (w->ready)
          continue;
        char limit[640];
        lc__cluster_how_ended(c, w->out, w->proc, msg, sizeof(msg));
        lc__cluster_limit_text(c, 0, limit, sizeof(limit));
        r = lc__error_set(-ETIMEDOUT, "%s did not listen on port %d within %s: %s", w->out->tag,
                          w->info.port, limit, msg);
        goto out;
      }
    }
    for (size_t h = 0; h < nh; h++) {
      if (needed[h] && ls[h] == NULL && pr[h] == NULL) {
        /* a listing: to tell whose the ports are once all accepted; for a host whose probes
         * cannot tell, at the probes' pace; while probes fail, once every LC__PROBE_LISTING_MS.
         * A port to check first goes to a probe. */
        int by = confirm[h] && check[h] == 0;
        if (by || (blind[h] && now >= next[h]) ||
            (!blind[h] && check[h] == 0 && now >= listed[h] + lgap[h])) {
          if (!by && !blind[h] && lgap[h] < LC__PROBE_LISTING_MAX_MS)
            lgap[h] += LC__PROBE_LISTING_MS;
          confirm[h] = 0;
          listed[h] = now;
          if ((r = host_listing_start(c, first, h, &ls[h], ports)) < 0)
            goto out;
        } else if (!blind[h] && (now >= next[h] || check[h] != 0)) {
          probed[h] = check[h];
          check[h] = 0;
          if ((r = host_probe_start(c, first, h, acc, probed[h], &pr[h], ports)) < 0)
            goto out;
        }
      }
      busy = ls[h] != NULL ? ls[h] : busy;
      probing = pr[h] != NULL ? pr[h] : probing;
    }
    /* the pause is a wait on a listing, a probe (or a worker): its end cuts it short */
    if (busy != NULL)
      lc__listing_wait(busy, LC__POLL_MS / 10);
    else if (probing != NULL)
      lc__probe_wait(probing, LC__POLL_MS / 10);
    else
      lc_process_wait(NULL, some, LC__POLL_MS / 10);
  }
out:
  for (size_t h = 0; ls != NULL && h < nh; h++)
    lc__listing_free(ls[h]);
  for (size_t h = 0; pr != NULL && h < nh; h++)
    lc__probe_free(pr[h]);
  free(ls);
  free(pr);
  free(next);
  free(listed);
  free(lgap);
  free(gap);
  free(check);
  free(probed);
  free(needed);
  free(confirm);
  free(blind);
  free(acc);
  free(ports);
  return r;
}
