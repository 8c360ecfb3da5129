/*
 * listing.c - the listening ports of hosts, read with one listing each, all hosts at once
 * (lc_ports_listening, lc__ports_scan, lc__listing_*), and the common free port of many hosts
 * and this machine (lc_ports_common_free).
 */
#include "ports_private.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTING_TIMEOUT_MS 30000

/* ---- hosts -------------------------------------------------------------------------------- */

/* One host's listing, started on every host before any is waited for. */
typedef struct listing {
  lc_runtime *rt;
  lc_process *proc;
  lc__portscan scan; /* written on the engine thread until the process has finished */
  int rc;
  char msg[LC_ERRMSG_MAX];
} listing;

static void listing_line(const char *line, size_t len, lc_stream stream, void *payload) {
  if (stream == LC_STDOUT)
    lc__portscan_line(payload, line, len);
}

/* Keeps a failure of l: code, and a detail that names the host once. */
static void listing_fail(listing *l, int code, const char *detail) {
  const char *name = lc_runtime_name(l->rt);
  size_t n = strlen(name);
  if (strncmp(detail, name, n) == 0 && detail[n] == ':' && detail[n + 1] == ' ')
    detail += n + 2;
  l->rc = code;
  snprintf(l->msg, sizeof(l->msg), "%s: cannot read its listening ports: %s", name, detail);
}

static void listing_start(listing *l) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;
  eo.on_line = listing_line;
  eo.payload = &l->scan;
  /* a read of two files ends by itself: no lifeline needed, and none to pay for */
  if ((r = lc__runtime_spawn_plain(&l->proc, l->rt, LC__LISTING_COMMAND, &eo)) < 0)
    listing_fail(l, r, lc_error_last());
}

/* Waits for a started listing until deadline (lc__now_ms) and judges its output. */
static void listing_finish(listing *l, uint64_t deadline, int timeout_ms) {
  lc_exec_result res = {.exit_status = -1};
  uint64_t now = lc__now_ms();
  int r;
  if (l->proc == NULL)
    return;
  r = lc_process_wait(&res, l->proc, now < deadline ? (int)(deadline - now) : 0);
  if (r == -ETIMEDOUT) {
    char detail[128];
    snprintf(detail, sizeof(detail), "no answer within %.1f s", timeout_ms / 1000.0);
    listing_fail(l, -ETIMEDOUT, detail);
  } else if (r < 0) {
    listing_fail(l, r, lc_error_last());
  } else if (res.signal != 0) {
    char detail[128];
    snprintf(detail, sizeof(detail), "'%s' was ended by signal %d", LC__LISTING_COMMAND,
             res.signal);
    listing_fail(l, LC_EREMOTE, detail);
  } else if (l->scan.headers == 0) {
    char detail[256];
    snprintf(detail, sizeof(detail),
             "neither ss nor /proc/net/tcp answered there (exit status %d); listening ports "
             "are read with ss or from /proc/net/tcp and /proc/net/tcp6, so the host must "
             "run Linux",
             res.exit_status);
    listing_fail(l, LC_EREMOTE, detail);
  }
  lc_process_free(l->proc); /* ends it when it timed out */
  l->proc = NULL;
}

int lc_ports_listening(lc_ports **out, lc_runtime *rt, int timeout_ms) {
  listing *l = NULL;
  int r;
  if (out == NULL || rt == NULL)
    return lc__error_set(-EINVAL, "listening ports: no output or no runtime given");
  *out = NULL;
  if (timeout_ms <= 0)
    timeout_ms = LISTING_TIMEOUT_MS;
  if ((l = lc__calloc(1, sizeof(*l))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  l->rt = rt;
  listing_start(l);
  listing_finish(l, lc__now_ms() + (uint64_t)timeout_ms, timeout_ms);
  if ((r = l->rc) < 0)
    lc__error_set(r, "%s", l->msg);
  else
    r = lc__portscan_to_ports(out, &l->scan);
  free(l);
  return r;
}

int lc__ports_keep_fresh(lc_runtime *rt, const lc_ports *listening) {
  lc__portscan *s = lc__calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->headers = 2;
  for (size_t i = 0; i < lc_ports_count(listening); i++) {
    int p = lc_ports_at(listening, i);
    s->listening[p / 8] |= (uint8_t)(1u << (p % 8));
  }
  __atomic_store_n(&rt->fresh_listing_at, lc__now_ms(), __ATOMIC_RELAXED);
  free(__atomic_exchange_n(&rt->fresh_listing, s, __ATOMIC_ACQ_REL));
  return 0;
}

/* What rt's facts read, when that was recent enough; NULL otherwise. Taken once. */
static lc__portscan *take_fresh(lc_runtime *rt) {
  uint64_t at = __atomic_load_n(&rt->fresh_listing_at, __ATOMIC_RELAXED);
  lc__portscan *s = __atomic_exchange_n(&rt->fresh_listing, NULL, __ATOMIC_ACQ_REL);
  if (s != NULL && lc__now_ms() - at > LC__FRESH_LISTING_MS) {
    free(s);
    s = NULL;
  }
  return s;
}

/* Starts a listing of each of rts, or takes what its facts read a moment ago. */
static void listings_start(listing *ls, lc_runtime *const *rts, size_t n) {
  for (size_t i = 0; i < n; i++) {
    lc__portscan *fresh = take_fresh(rts[i]);
    ls[i].rt = rts[i];
    if (fresh != NULL) {
      ls[i].scan = *fresh; /* read by the host's facts a moment ago: no round trip */
      free(fresh);
    } else {
      listing_start(&ls[i]);
    }
  }
}

int lc__ports_scan(lc__portscan *out, lc_runtime *const *rts, size_t n, int timeout_ms) {
  listing *ls = NULL;
  uint64_t deadline;
  int r = 0;
  if (n == 0)
    return 0;
  if (timeout_ms <= 0)
    timeout_ms = LISTING_TIMEOUT_MS;
  if ((ls = lc__calloc(n, sizeof(*ls))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  deadline = lc__now_ms() + (uint64_t)timeout_ms;
  listings_start(ls, rts, n);
  for (size_t i = 0; i < n; i++) {
    listing_finish(&ls[i], deadline, timeout_ms);
    if (ls[i].rc < 0 && r == 0)
      r = lc__error_set(ls[i].rc, "%s", ls[i].msg);
    out[i] = ls[i].scan;
  }
  free(ls);
  return r;
}

struct lc__listing {
  listing l;
  uint64_t started;
};

int lc__listing_start(lc__listing **out, lc_runtime *rt) {
  lc__listing *x = lc__calloc(1, sizeof(*x));
  *out = NULL;
  if (x == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  x->l.rt = rt;
  x->started = lc__now_ms();
  listing_start(&x->l);
  *out = x;
  return 0;
}

int lc__listing_wait(lc__listing *x, int timeout_ms) {
  return x->l.proc == NULL || lc_process_wait(NULL, x->l.proc, timeout_ms) != -ETIMEDOUT;
}

int lc__listing_finish(lc__listing *x, const lc__portscan **scan) {
  uint64_t now = lc__now_ms();
  listing_finish(&x->l,
                 x->started + LISTING_TIMEOUT_MS > now ? x->started + LISTING_TIMEOUT_MS : now,
                 LISTING_TIMEOUT_MS);
  *scan = &x->l.scan;
  return x->l.rc < 0 ? lc__error_set(x->l.rc, "%s", x->l.msg) : 0;
}

void lc__listing_free(lc__listing *x) {
  if (x == NULL)
    return;
  lc_process_free(x->l.proc);
  free(x);
}

int lc_ports_common_free(int *out, lc_runtime *const *rts, size_t n, const lc_ports *ranges) {
  listing *ls = NULL;
  uint8_t *taken = NULL;
  lc__port_refusals why = {0, 0, 0};
  uint64_t deadline;
  char *text = NULL;
  int r = LC_EINTERNAL;

  if (out == NULL || ranges == NULL || ranges->count == 0)
    return lc__error_set(-EINVAL, "common free port: no output or no ports given");
  *out = 0;
  for (size_t i = 0; i < n; i++)
    if (rts == NULL || rts[i] == NULL)
      return lc__error_set(-EINVAL, "common free port: runtime %zu of %zu is NULL", i, n);
  if ((taken = lc__calloc(1, 65536 / 8)) == NULL ||
      (n > 0 && (ls = lc__calloc(n, sizeof(*ls))) == NULL)) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }

  /* Every host at once: start all listings, then collect them. */
  deadline = lc__now_ms() + LISTING_TIMEOUT_MS;
  listings_start(ls, rts, n);
  for (size_t i = 0; i < n; i++)
    listing_finish(&ls[i], deadline, LISTING_TIMEOUT_MS);
  for (size_t i = 0; i < n; i++) {
    if (ls[i].rc < 0) {
      r = lc__error_set(ls[i].rc, "%s", ls[i].msg);
      goto out;
    }
    for (size_t b = 0; b < 65536 / 8; b++)
      taken[b] |= ls[i].scan.listening[b];
  }

  /* The first candidate that passes; checked and reserved under one lock. */
  if ((r = lc__ports_reserve_first(out, ranges, taken, &why)) < 0)
    goto out;
  if (*out != 0) {
    r = 0;
    goto out;
  }
  if (lc_ports_format(&text, ranges) < 0) {
    r = -ENOMEM;
    goto out;
  }
  r = lc__error_set(LC_ENOPORTS,
                    "no free port in %s (%zu port%s) on %zu host%s and this machine: taken on a "
                    "host: %zu, reserved in this process: %zu, in use on this machine: %zu",
                    text, ranges->count, ranges->count == 1 ? "" : "s", n, n == 1 ? "" : "s",
                    why.on_hosts, why.reserved, why.here);
out:
  free(text);
  free(ls);
  free(taken);
  return r;
}

/* The pause between two looks grows from 10 ms to 50 ms: most services listen within a few ms. */
#define WAIT_PAUSE_FIRST_MS 10
#define WAIT_PAUSE_MAX_MS 50

int lc_ports_wait_listening(lc_runtime *rt, int port, lc_process *proc, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  int pause = WAIT_PAUSE_FIRST_MS;
  if (rt == NULL || proc == NULL || port < 1 || port > 65535)
    return lc__error_set(-EINVAL, "wait for a listening port: no runtime, no process or port %d",
                         port);
  for (;;) {
    lc_ports *l = NULL;
    int up;
    if (lc_process_wait(NULL, proc, 0) != -ETIMEDOUT)
      return lc__error_set(LC_EREMOTE, "%s: the process ended before port %d listened",
                           lc_runtime_name(rt), port);
    up = lc_ports_listening(&l, rt, 10000) == 0 && lc_ports_contains(l, port);
    lc_ports_free(l);
    /* listening, and still alive: a process that died of "address in use" is not ready */
    if (up && lc_process_wait(NULL, proc, 0) == -ETIMEDOUT)
      return 0;
    if (up)
      return lc__error_set(LC_EREMOTE, "%s: the process ended as port %d listened (another's?)",
                           lc_runtime_name(rt), port);
    if (lc__now_ms() >= deadline)
      return lc__error_set(-ETIMEDOUT, "%s: port %d did not listen within %.1f s",
                           lc_runtime_name(rt), port, timeout_ms / 1000.0);
    /* the pause is a wait on the process: its end ends it at once */
    if (lc_process_wait(NULL, proc, pause) != -ETIMEDOUT)
      return lc__error_set(LC_EREMOTE, "%s: the process ended before port %d listened",
                           lc_runtime_name(rt), port);
    pause = pause * 2 < WAIT_PAUSE_MAX_MS ? pause * 2 : WAIT_PAUSE_MAX_MS;
  }
}
