/*
 * probe.c - whether ports of a host accept connections, asked of its backend (lc__probe_*): on
 * SSH a direct-tcpip channel per port, which costs no session channel and no process there, so
 * that a readiness poll can ask often without taking the host's channels from its workers.
 */
#include "ports_private.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdlib.h>

typedef struct probe_slot {
  struct lc__probe *x;
  size_t i;
} probe_slot;

struct lc__probe {
  lc__call call; /* call.done: [lock] */
  lc_runtime *rt;
  size_t n, left; /* left: [engine] */
  int *ports;
  int *res; /* [engine] until done */
  probe_slot *slot;
  int abandoned; /* [lock]: the owner let go before the answers came: the engine frees it */
};

static void probe_dispose(lc__probe *x) {
  free(x->ports);
  free(x->res);
  free(x->slot);
  free(x);
}

/* Engine thread: the last answer came; the owner wakes, or x goes if it was let go. */
static void probe_finish(lc__probe *x) {
  lc_engine *e = x->rt->engine;
  int gone;
  lc__engine_lock(e);
  gone = x->abandoned;
  x->call.done = 1;
  lc__engine_broadcast(e);
  lc__engine_unlock(e);
  if (gone)
    probe_dispose(x);
}

static void probe_answer(void *arg, int r) {
  probe_slot *s = arg;
  s->x->res[s->i] = r;
  if (--s->x->left == 0)
    probe_finish(s->x);
}

static void probe_run(lc__call *c) {
  lc__probe *x = (lc__probe *)c;
  size_t n = x->n;
  x->left = n + 1; /* one more while starting: answers may come before the loop ends */
  for (size_t i = 0; i < n; i++)
    x->rt->ops->probe(x->rt, x->ports[i], probe_answer, &x->slot[i]);
  if (--x->left == 0)
    probe_finish(x);
}

int lc__probe_start(lc__probe **out, lc_runtime *rt, const int *ports, size_t n) {
  lc__probe *x = lc__calloc(1, sizeof(*x));
  *out = NULL;
  if (x == NULL || (x->ports = lc__calloc(n + 1, sizeof(int))) == NULL ||
      (x->res = lc__calloc(n + 1, sizeof(int))) == NULL ||
      (x->slot = lc__calloc(n + 1, sizeof(*x->slot))) == NULL) {
    if (x != NULL)
      probe_dispose(x);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  x->rt = rt;
  x->n = n;
  for (size_t i = 0; i < n; i++) {
    x->ports[i] = ports[i];
    x->res[i] = LC_EINTERNAL;
    x->slot[i] = (probe_slot){x, i};
  }
  /* no probe in this backend, or no engine to ask: every answer is "cannot tell" */
  if (n == 0 || rt->ops->probe == NULL || lc__engine_post(rt->engine, &x->call, probe_run) < 0)
    x->call.done = 1;
  *out = x;
  return 0;
}

int lc__probe_wait(lc__probe *x, int timeout_ms) {
  lc_engine *e = x->rt->engine;
  int r;
  lc__engine_lock(e);
  r = x->call.done || lc__engine_wait(e, &x->call.done, timeout_ms) == 0;
  lc__engine_unlock(e);
  return r;
}

const int *lc__probe_result(const lc__probe *x, const int **ports, size_t *n) {
  *ports = x->ports;
  *n = x->n;
  return x->res;
}

void lc__probe_free(lc__probe *x) {
  int done;
  if (x == NULL)
    return;
  lc__engine_lock(x->rt->engine);
  done = x->call.done;
  x->abandoned = 1;
  lc__engine_unlock(x->rt->engine);
  if (done)
    probe_dispose(x);
}
