/*
 * ports.c - the cluster's ports: picked from the ranges so that they are free on every host (one
 * listing of each, all at once) and here, reserved in this process, released when the cluster
 * lets them go; and its tunnels' list.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdlib.h>

void lc__cluster_release_ports(lc_cluster *c, size_t from) {
  for (size_t i = from; i < c->nports; i++)
    lc_port_release(c->ports[i]);
  c->nports = from;
}

static int keep_port(lc_cluster *c, int port) {
  int *v = lc__grow(c->ports, &c->capports, c->nports + 1, sizeof(*v), 64);
  if (v == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  c->ports = v;
  c->ports[c->nports++] = port;
  return 0;
}

void lc__cluster_drop_forwards(lc_cluster *c, size_t from) {
  if (from < c->fwds.n)
    lc__forwards_free(c->fwds.v + from, c->fwds.n - from);
  c->fwds.n = from;
}

/* Every runtime the cluster uses: the group's, and our own local one, however many. */
lc_runtime **lc__cluster_runtimes(lc_cluster *c, size_t *n) {
  size_t ng = lc_group_count(c->group);
  lc_runtime **v = lc__calloc(ng + 2, sizeof(*v));
  *n = 0;
  if (v == NULL) {
    lc__error_set(-ENOMEM, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < ng; i++)
    v[(*n)++] = lc_group_at(c->group, i);
  if (c->local != NULL)
    v[(*n)++] = c->local;
  return v;
}

/* Where port is taken (listened on, or held by a connection): "this machine" or the first host's
 * name, all hosts asked at once; NULL when nowhere (or no host that answered). */
const char *lc__cluster_port_taken_where(lc_cluster *c, int port) {
  size_t n;
  lc_runtime **rts;
  lc__portscan *scans = NULL;
  const char *where = NULL;
  if (lc_port_is_free_local(port) == 0 || lc_port_is_reserved(port))
    return "this machine";
  if ((rts = lc__cluster_runtimes(c, &n)) == NULL ||
      (scans = lc__calloc(n, sizeof(*scans))) == NULL) {
    free(rts);
    return NULL;
  }
  lc__ports_scan(scans, rts, n, 10000); /* a host that does not answer tells nothing */
  for (size_t i = 0; i < n; i++) {
    if (where == NULL && lc__portscan_taken(&scans[i], port))
      where = lc_runtime_name(rts[i]);
    lc__portscan_clear(&scans[i]);
  }
  free(scans);
  free(rts);
  return where;
}

/* A port free on every host and here, from ranges; reserved for the cluster. */
int lc__cluster_pick_port(lc_cluster *c, int *out, const lc_ports *ranges) {
  size_t n;
  lc_runtime **rts = lc__cluster_runtimes(c, &n);
  int r;
  if (rts == NULL)
    return -ENOMEM;
  if ((r = lc_ports_common_free(out, rts, n, ranges)) == 0 && (r = keep_port(c, *out)) < 0)
    lc_port_release(*out);
  free(rts);
  return r;
}

int lc__cluster_scan(lc_cluster *c, lc__hostscan *sc) {
  size_t n = lc_group_count(c->group);
  lc_runtime **rts = lc__calloc(n + 1, sizeof(*rts));
  int r;
  if (rts == NULL || (sc->per = lc__calloc(n + 1, sizeof(*sc->per))) == NULL) {
    free(rts);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++)
    rts[i] = lc_group_at(c->group, i);
  sc->n = n;
  r = lc__ports_scan(sc->per, rts, n, 10000);
  free(rts);
  return r;
}

void lc__hostscan_free(lc__hostscan *sc) {
  for (size_t i = 0; sc->per != NULL && i < sc->n; i++)
    lc__portscan_clear(&sc->per[i]);
  free(sc->per);
  sc->per = NULL;
  sc->n = 0;
}

int lc__hostscan_taken(const lc__hostscan *sc, size_t i, int port) {
  return lc__portscan_taken(&sc->per[i], port);
}

/* Called for every worker in loops over the hosts (readiness, context, placement): the
 * runtime's hint first, so that such a loop is not W x H x H steps. */
size_t lc__cluster_host_index(lc_cluster *c, lc_runtime *rt) {
  size_t hint = rt != NULL ? __atomic_load_n(&rt->group_hint, __ATOMIC_RELAXED) : 0;
  if (rt != NULL && lc_group_at(c->group, hint) == rt)
    return hint;
  for (size_t i = 0; i < lc_group_count(c->group); i++)
    if (lc_group_at(c->group, i) == rt) {
      __atomic_store_n(&rt->group_hint, i, __ATOMIC_RELAXED);
      return i;
    }
  return (size_t)-1;
}

/* n ports from ranges, free on every host (as sc saw them) and here, reserved. */
int lc__cluster_pick_from_scan(lc_cluster *c, const lc__hostscan *sc, const lc_ports *ranges,
                               int *out, size_t n) {
  size_t got = 0;
  int r = 0;
  for (size_t k = 0; k < lc_ports_count(ranges) && got < n; k++) {
    int port = lc_ports_at(ranges, k), taken = 0;
    for (size_t i = 0; i < lc_group_count(c->group) && !taken; i++)
      taken = lc__hostscan_taken(sc, i, port);
    if (taken || lc_port_reserve(port) < 0)
      continue;
    if (lc_port_is_free_local(port) != 1 || keep_port(c, port) < 0) {
      lc_port_release(port);
      continue;
    }
    out[got++] = port;
  }
  if (got < n) {
    char *text = NULL;
    lc_ports_format(&text, ranges);
    r = lc__error_set(LC_ENOPORTS,
                      "no free port left in %s: %zu needed, %zu free on all %zu "
                      "hosts and this machine",
                      text ? text : "the worker ranges", n, got, lc_group_count(c->group));
    lc_free(text);
  }
  return r;
}

/* n ports from the worker ranges, free on every host (sc, else one scan now) and here. */
int lc__cluster_pick_ports(lc_cluster *c, const lc__hostscan *given, int *out, size_t n) {
  lc__hostscan sc = {0};
  int r;
  if (given != NULL)
    return lc__cluster_pick_from_scan(c, given, c->worker_ports, out, n);
  if ((r = lc__cluster_scan(c, &sc)) == 0)
    r = lc__cluster_pick_from_scan(c, &sc, c->worker_ports, out, n);
  lc__hostscan_free(&sc);
  return r;
}

/* Whether f is one of the forwards of port (a worker's: its port on both ends) on rt (any when
 * rt is NULL). */
static int forward_of(const lc_forward *f, int port, const lc_runtime *rt) {
  return f->port == port && f->target_port == port && (rt == NULL || f->rt == rt);
}

void lc__cluster_drop_ports_forwards(lc_cluster *c, const int *ports, size_t n, lc_runtime *rt) {
  size_t k = 0;
  if (n == 0)
    return;
  for (size_t i = 0; i < c->fwds.n; i++) {
    lc_forward *f = c->fwds.v[i];
    if (forward_of(f, f->port, rt) && lc__int_sorted_has(ports, n, f->port))
      lc_forward_free(f);
    else
      c->fwds.v[k++] = f;
  }
  c->fwds.n = k;
  lc__relaylog_drop_ports(&c->relayed, ports, n, rt);
}

void lc__cluster_drop_port_forwards(lc_cluster *c, int port, lc_runtime *rt) {
  if (port > 0)
    lc__cluster_drop_ports_forwards(c, &port, 1, rt);
}

void lc__cluster_release_port(lc_cluster *c, int port) {
  size_t k = 0;
  if (port <= 0)
    return;
  for (size_t i = 0; i < c->nports; i++) {
    if (c->ports[i] == port)
      lc_port_release(port);
    else
      c->ports[k++] = c->ports[i];
  }
  c->nports = k;
}

int lc__cluster_has_forward(const lc_cluster *c, lc_runtime *rt, int port) {
  for (size_t i = 0; i < c->fwds.n; i++)
    if (forward_of(c->fwds.v[i], port, rt))
      return 1;
  return rt != NULL && lc__meshrelay_has(rt, port);
}

int lc__cluster_pick_port_connected(lc_cluster *c, int *out) {
  size_t n, k = 0;
  lc_runtime **rts = lc__cluster_runtimes(c, &n);
  int r;
  if (rts == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) /* the connected ones, in place */
    if (lc_runtime_is_connected(rts[i]))
      rts[k++] = rts[i];
  if ((r = lc_ports_common_free(out, rts, k, c->worker_ports)) == 0 && (r = keep_port(c, *out)) < 0)
    lc_port_release(*out);
  free(rts);
  return r;
}

int lc__worker_tunnels(lc_cluster *c, lc__worker *w) {
  size_t ng = lc_group_count(c->group), ns = 0, nh = 0, *first, *one;
  lc__fwd_spec *spec;
  lc_runtime **hosts;
  int port = w->info.port, r = 0, **ports;
  unsigned char *relayed;
  if (c->w->portless || c->w->mesh == 0)
    return 0;
  spec = lc__calloc(ng + 2, sizeof(*spec));
  hosts = lc__calloc(ng + 1, sizeof(*hosts));
  ports = lc__calloc(ng + 1, sizeof(*ports));
  one = lc__calloc(ng + 1, sizeof(*one));
  relayed = lc__calloc(ng + 1, 1);
  first = lc__group_loopback_firsts(c->group);
  if (spec == NULL || hosts == NULL || ports == NULL || one == NULL || relayed == NULL ||
      first == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  /* this machine reaches the worker's port on its host */
  if (!lc__runtime_same_loopback(w->rt, NULL) && !lc__cluster_has_forward(c, w->rt, port))
    spec[ns++] = lc__fwd_spec_same_port(w->rt, LC_FORWARD_LOCAL, port);
  /* every other host reaches it through this machine: through its mesh relay where it can */
  for (size_t i = 0; c->w->mesh == LC_WORKER_MESH && i < ng; i++) {
    lc_runtime *rt = lc_group_at(c->group, i);
    if (!lc__group_needs_listen(c->group, first, i, w->rt) || !lc_runtime_is_connected(rt) ||
        lc__cluster_has_forward(c, rt, port))
      continue;
    hosts[nh] = rt;
    ports[nh] = &port;
    one[nh++] = 1;
  }
  if (nh > 0 && (r = lc__meshrelay_listen_many(hosts, nh, ports, one, relayed, &c->relayed)) < 0)
    goto out;
  for (size_t i = 0; i < nh; i++)
    if (!relayed[i])
      spec[ns++] = lc__fwd_spec_same_port(hosts[i], LC_FORWARD_REMOTE, port);
  r = lc__forwards_new(spec, ns, &c->fwds);
out:
  free(relayed);
  free(one);
  free(ports);
  free(hosts);
  free(first);
  free(spec);
  return r;
}
