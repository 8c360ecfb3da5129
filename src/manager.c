/*
 * manager.c - discovery: candidates from an explicit list, an inventory file or the ssh config;
 * all connected at once (lc_group_connect); their facts read in one round trip each, all at once
 * (lc_group_exec of the host-facts script); then the filters.
 */
#include "group_internal.h"
#include "hostfacts.h"
#include "ports_internal.h"
#include "runtime_internal.h"
#include "sshconfig.h"

#include "lazycluster/inventory.h"
#include "lazycluster/manager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
  char *host;
  lc_host_state state;
  int error;
  char *reason;
  double latency;
  lc_hostinfo *info;
  int gpus;  /* declared, -1 when not */
  int slots; /* declared, 0 when not */
  lc__buf facts;
  int facts_too_long; /* more than LC_DISCOVER_FACTS_MAX: the rest was not kept */
} candidate;

struct lc_discovery {
  size_t n;
  candidate *c;
  size_t line_hint; /* [engine]: the last facts line's candidate (a host's lines come in runs) */
};

void lc_discover_options_init(lc_discover_options *opts) {
  lc_discover_options init = LC_DISCOVER_OPTIONS_INIT;
  *opts = init;
}

void lc_discovery_free(lc_discovery *d) {
  if (d == NULL)
    return;
  for (size_t i = 0; i < d->n; i++) {
    free(d->c[i].host);
    free(d->c[i].reason);
    lc_hostinfo_free(d->c[i].info);
    lc__buf_free(&d->c[i].facts);
  }
  free(d->c);
  free(d);
}

size_t lc_discovery_count(const lc_discovery *d) { return d ? d->n : 0; }
const char *lc_discovery_host(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].host : NULL;
}
lc_host_state lc_discovery_state(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].state : LC_HOST_UNREACHABLE;
}
int lc_discovery_error(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].error : -EINVAL;
}
const char *lc_discovery_reason(const lc_discovery *d, size_t i) {
  return d && i < d->n && d->c[i].reason ? d->c[i].reason : "";
}
double lc_discovery_latency(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].latency : 0.0;
}
const lc_hostinfo *lc_discovery_info(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].info : NULL;
}
int lc_discovery_declared_gpus(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].gpus : -1;
}
int lc_discovery_slots(const lc_discovery *d, size_t i) {
  return d && i < d->n ? d->c[i].slots : 0;
}

/* The candidates: explicit list, else inventory, else every concrete alias of the config. */
static int candidates(lc_discovery *d, const lc_discover_options *o) {
  lc_inventory *inv = NULL;
  char **aliases = NULL;
  size_t n = 0;
  lc__err err = {0};
  int r = 0;

  if (o->hosts != NULL)
    r = lc_inventory_from_list(&inv, o->hosts);
  else if (o->inventory != NULL)
    r = lc_inventory_parse(&inv, o->inventory);
  else if ((r = lc__sshconfig_aliases(&aliases, &n, o->runtime ? o->runtime->ssh_config : NULL,
                                      &err)) < 0)
    return lc__err_raise(&err);
  if (r < 0)
    return r;
  if (inv != NULL)
    n = lc_inventory_count(inv);
  if ((d->c = lc__calloc(n, sizeof(*d->c))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  d->n = n;
  for (size_t i = 0; i < n; i++) {
    d->c[i].host = lc__strdup(inv ? lc_inventory_host(inv, i) : aliases[i]);
    d->c[i].gpus = inv ? lc_inventory_gpus(inv, i) : -1;
    d->c[i].slots = inv ? lc_inventory_slots(inv, i) : 0;
    if (d->c[i].host == NULL)
      r = lc__error_set(-ENOMEM, "out of memory");
  }
out:
  lc_inventory_free(inv);
  lc__strv_free(aliases, n);
  return r;
}

static void facts_line(const char *host, const char *line, size_t len, lc_stream stream,
                       void *payload) {
  lc_discovery *d = payload;
  if (stream != LC_STDOUT)
    return;
  for (size_t k = 0; k < d->n; k++) {
    size_t i = (d->line_hint + k) % d->n; /* from the last line's host: one compare, mostly */
    candidate *c = &d->c[i];
    if (strcmp(c->host, host) != 0)
      continue;
    d->line_hint = i;
    if (c->facts_too_long || c->facts.len + len + 1 > LC_DISCOVER_FACTS_MAX) {
      c->facts_too_long = 1; /* memory stays bounded whatever a host writes */
      return;
    }
    lc__buf_append(&c->facts, line, len);
    lc__buf_puts(&c->facts, "\n");
    return;
  }
}

/* Why a host does not pass the filters, or NULL when it does. */
static char *filtered_out(const candidate *c, const lc_discover_options *o) {
  const lc_hostinfo *h = c->info;
  int gpus = c->gpus >= 0 ? c->gpus : (int)h->gpu_count;
  if (o->min_gpus > 0 && gpus < o->min_gpus)
    return lc__sprintf("%d GPUs, %d wanted", gpus, o->min_gpus);
  if (o->min_memory_bytes > 0 && h->memory_bytes < o->min_memory_bytes)
    return lc__sprintf("%.1f GiB of memory, %.1f GiB wanted", h->memory_bytes / 1073741824.0,
                       o->min_memory_bytes / 1073741824.0);
  if (o->min_cores > 0 && h->cores < o->min_cores)
    return lc__sprintf("%.1f cores, %.1f wanted", h->cores, o->min_cores);
  for (size_t k = 0; o->executables != NULL && o->executables[k] != NULL; k++)
    if (!lc_hostinfo_has_executable(h, o->executables[k]))
      return lc__sprintf("no %s on its PATH", o->executables[k]);
  return NULL;
}

static int canceled(const lc_discover_options *o) {
  if (o->cancel == NULL || !__atomic_load_n(o->cancel, __ATOMIC_RELAXED))
    return 0;
  return lc__error_set(LC_ECANCELED, "discovery was canceled: the hosts it had connected are "
                                     "let go, what their facts steps started is ended");
}

int lc_discover(lc_group **out_group, lc_discovery **out_report, lc_engine *engine,
                const lc_discover_options *opts) {
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_group_options go = LC_GROUP_OPTIONS_INIT;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_discovery *d = NULL;
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  const char **specs = NULL;
  lc__buf script = {0};
  int r;

  *out_group = NULL;
  *out_report = NULL;
  LC__CHECK_VERSION(opts, LC_DISCOVER_OPTIONS_VERSION, "lc_discover_options");
  LC__CHECK_VERSION(opts ? opts->runtime : NULL, LC_RUNTIME_OPTIONS_VERSION, "lc_runtime_options");
  if (opts != NULL)
    lc__options_copy(&o, opts,
                     opts->version == 1   ? LC__FIELD_END(lc_discover_options, facts)
                     : opts->version == 2 ? LC__FIELD_END(lc_discover_options, facts_timeout_ms)
                                          : sizeof(o));
  if (o.facts_timeout_ms <= 0)
    o.facts_timeout_ms = LC_DISCOVER_FACTS_TIMEOUT_MS;
  eo.timeout_ms = o.facts_timeout_ms;
  go.fanout = o.fanout;
  if ((d = lc__calloc(1, sizeof(*d))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  if ((r = candidates(d, &o)) < 0 || (r = lc_group_new(&g, engine, &go)) < 0)
    goto out;
  if ((specs = lc__calloc(d->n, sizeof(*specs))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < d->n; i++)
    specs[i] = d->c[i].host;
  if ((r = lc__group_connect_cancel(&rep, g, specs, d->n, o.runtime, o.cancel)) < 0 ||
      (r = canceled(&o)) < 0)
    goto out;
  for (size_t i = 0; i < d->n; i++) {
    d->c[i].latency = lc_group_report_seconds(rep, i);
    d->c[i].error = lc_group_report_error(rep, i);
    d->c[i].state = d->c[i].error ? LC_HOST_UNREACHABLE : LC_HOST_READY;
    if (d->c[i].error)
      d->c[i].reason = lc__strdup(lc_group_report_message(rep, i));
  }
  lc_group_report_free(rep);
  rep = NULL;
  for (size_t i = 0; i < d->n; i++) /* the inventory's word until facts say more */
    if (d->c[i].state == LC_HOST_READY)
      lc_runtime_set_resources(lc_group_find(g, d->c[i].host), d->c[i].gpus, d->c[i].slots);

  /* facts of every reachable host, one round trip each, all at once */
  if (!o.facts && o.min_gpus <= 0 && o.min_memory_bytes == 0 && o.min_cores <= 0 &&
      (o.executables == NULL || o.executables[0] == NULL)) {
    r = 0;
    goto out;
  }
  if ((r = lc__hostfacts_command(&script, o.executables)) < 0 ||
      (r = lc__group_exec_cancel(&rep, g, script.data, &eo, facts_line, d, o.cancel)) < 0 ||
      (r = canceled(&o)) < 0)
    goto out;
  for (size_t i = 0; i < d->n; i++) {
    candidate *c = &d->c[i];
    lc__err err = {0};
    char *why;
    int fail = 0;
    if (c->state != LC_HOST_READY)
      continue;
    for (size_t k = 0; k < lc_group_report_count(rep); k++) /* the report follows the group */
      if (strcmp(lc_group_report_host(rep, k), c->host) == 0)
        fail = lc_group_report_error(rep, k);
    if (fail == -ETIMEDOUT || c->facts_too_long) {
      c->state = LC_HOST_UNREACHABLE;
      c->error = fail == -ETIMEDOUT ? -ETIMEDOUT : -EMSGSIZE;
      c->reason =
          fail == -ETIMEDOUT
              ? lc__sprintf("%s: too slow: its facts step (host info, GPUs through nvidia-smi or "
                            "lazyclusterctl probe) did not end within %.1f s and was stopped",
                            c->host, o.facts_timeout_ms / 1000.0)
              : lc__sprintf("%s: its facts step wrote more than %d MiB", c->host,
                            LC_DISCOVER_FACTS_MAX / (1024 * 1024));
      lc_group_remove(g, c->host);
      continue;
    }
    int parsed = (c->info = lc__calloc(1, sizeof(*c->info))) == NULL
                     ? -ENOMEM
                     : lc__hostfacts_parse(c->info, c->facts.data ? c->facts.data : "",
                                           c->facts.len, o.executables, &err);
    lc__buf_free(&c->facts); /* read: a start goes on holding every host's info, not its text */
    if (parsed < 0) {
      c->state = LC_HOST_UNREACHABLE;
      c->error = err.code ? err.code : -ENOMEM;
      c->reason = lc__sprintf("%s: cannot read its facts: %s", c->host, err.msg);
      lc_group_remove(g, c->host);
      continue;
    }
    if (c->gpus >= 0)
      lc_hostinfo_declare_gpus(c->info, c->gpus);
    lc_runtime_set_resources(lc_group_find(g, c->host), (int)c->info->gpu_count, c->slots);
    if (c->info->listening != NULL) /* the first port scan of a start need not ask again */
      lc__ports_keep_fresh(lc_group_find(g, c->host), c->info->listening, c->info->held);
    lc__runtime_learn_loopback(lc_group_find(g, c->host), c->info->loopback);
    if ((why = filtered_out(c, &o)) != NULL) {
      c->state = LC_HOST_FILTERED;
      c->reason = why;
      lc_group_remove(g, c->host);
    }
  }
  r = 0;
out:
  lc_group_report_free(rep);
  lc__buf_free(&script);
  free(specs);
  if (r < 0) {
    lc_group_free(g);
    lc_discovery_free(d);
    return r;
  }
  *out_group = g;
  *out_report = d;
  return 0;
}
