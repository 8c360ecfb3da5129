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
#define LISTING_FILTER_MAX 1024 /* watched ports a filter of ss names at most */

/* ---- hosts -------------------------------------------------------------------------------- */

/* One host's listing, started on every host before any is waited for. */
typedef struct listing {
  lc_runtime *rt;
  lc_process *proc;
  lc__portscan scan; /* written on the engine thread until the process has finished */
  int rc;
  char msg[LC_ERRMSG_MAX];
  uint8_t *watch; /* owned, with scan.found: a listing that tells whose the watched ports are */
  char *cmd;      /* owned: the command of a watching listing (listing_command) */
} listing;

/* Watches ports[0..n) in l: their listeners go into l->scan.found with their owners. Distinct
 * listeners per port are few (SO_REUSEPORT's copies count once): 8 each is plenty, and more
 * only make the owner unknown (lc__portscan_ours); found starts at 1 each and grows. The
 * bitmap spans the watched ports alone (a start's ports lie in one range: tens of bytes, not
 * 8 KiB for each of the hosts' listings that are under way at once). Returns 0 or -ENOMEM. */
static int listing_watch(listing *l, const int *ports, size_t n) {
  int lo = PORT_MAX, hi = 1;
  for (size_t i = 0; i < n; i++)
    if (ports[i] > 0 && ports[i] <= PORT_MAX) {
      lo = ports[i] < lo ? ports[i] : lo;
      hi = ports[i] > hi ? ports[i] : hi;
    }
  if (lo > hi) /* nothing to watch: one bit for port 1, never set */
    lo = hi = 1;
  l->scan.found_cap = n + 32;
  l->scan.found_max = 8 * n + 32;
  if ((l->watch = lc__calloc(1, (size_t)(hi - lo) / 8 + 1)) == NULL ||
      (l->scan.found = lc__calloc(l->scan.found_cap, sizeof(*l->scan.found))) == NULL)
    return -ENOMEM;
  if (lc__portscan_index(&l->scan) < 0)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    if (ports[i] > 0 && ports[i] <= PORT_MAX)
      lc__ports_bit_set(l->watch, ports[i] - lo);
  l->scan.watch = l->watch;
  l->scan.watch_lo = lo;
  l->scan.watch_hi = hi;
  return 0;
}

static void listing_unwatch(listing *l) {
  lc__portscan_clear(&l->scan);
  free(l->cmd);
  l->cmd = NULL;
  free(l->watch);
  free(l->scan.found);
  lc__portscan_unindex(&l->scan);
  l->watch = NULL;
  l->scan.watch = NULL;
  l->scan.watch_lo = l->scan.watch_hi = 0;
  l->scan.found = NULL;
  l->scan.nfound = l->scan.found_cap = l->scan.found_max = 0;
}

/*
 * A watching listing's command: ss asked for the watched ports alone ("( sport = :P or ... )"),
 * so that a host with a mesh relay's W listens sends a few lines, not W (150 B each: 150 KB per
 * listing of each host at 1,024 workers, received, decrypted and parsed for every look of the
 * readiness wait and every check of a listen). The /proc fallback (no ss, or an ss without
 * filters) reads everything, as before. NULL when out of memory or the ports are too many.
 */
static const char *watch_command(listing *l, int who) {
  lc__buf b = {0};
  int r = lc__buf_puts(&b, who ? LC__LISTING_WHO "; ss -tne state listening '( "
                               : "ss -tne state listening '( ");
  size_t n = 0;
  for (int p = l->scan.watch_lo; r == 0 && p <= l->scan.watch_hi; p++)
    if (lc__ports_bit_get(l->watch, p - l->scan.watch_lo))
      r = lc__buf_printf(&b, "%ssport = :%d", n++ > 0 ? " or " : "", p);
  if (r == 0 && n > 0 && n <= LISTING_FILTER_MAX &&
      lc__buf_puts(&b, " )' 2>/dev/null || cat /proc/net/tcp /proc/net/tcp6 2>/dev/null") == 0) {
    free(l->cmd);
    l->cmd = b.data;
    return l->cmd;
  }
  lc__buf_free(&b);
  return NULL;
}

/* The command of l: saying who reads it ("lc-uid") while its host's loopback is not known (the
 * first listing of a host), or while a watching listing does not know the host's uid yet. */
static const char *listing_command(listing *l) {
  long known = __atomic_load_n(&l->rt->listing_uid, __ATOMIC_RELAXED);
  const char *watching;
  int who = 0;
  if (lc__runtime_loopback(l->rt) == LC__LOOPBACK_UNKNOWN)
    who = 1;
  else if (l->watch == NULL)
    return LC__LISTING_COMMAND;
  else if (known > 0) {
    l->scan.has_uid = 1;
    l->scan.uid = (unsigned long)(known - 1);
  } else {
    who = 1;
  }
  if (l->watch != NULL && (watching = watch_command(l, who)) != NULL)
    return watching;
  if (l->watch != NULL) /* readiness looks often: listeners alone, as its filtered command */
    return who ? LC__LISTING_WHO "; " LC__LISTENERS_COMMAND : LC__LISTENERS_COMMAND;
  return who ? LC__LISTING_COMMAND_UID : LC__LISTING_COMMAND;
}

/* After l's output: keeps the uid and the loopback it told for its host's next listings. */
static void listing_learn(listing *l) {
  if (l->scan.has_uid && l->scan.uid < 0x7FFFFFFFul)
    __atomic_store_n(&l->rt->listing_uid, (long)l->scan.uid + 1, __ATOMIC_RELAXED);
  if (l->scan.has_uid)
    lc__runtime_learn_loopback(l->rt, l->scan.loopback);
}

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
  if ((r = lc__runtime_spawn_plain(&l->proc, l->rt, listing_command(l), &eo)) < 0)
    listing_fail(l, r, lc_error_last());
}

/* Judges a listing that ended (res: how; its output is in l->scan): l->rc and l->msg. */
static void listing_judge(listing *l, const lc_exec_result *res) {
  if (res->signal != 0) {
    char detail[128];
    snprintf(detail, sizeof(detail), "'%s' was ended by signal %d", LC__LISTING_COMMAND,
             res->signal);
    listing_fail(l, LC_EREMOTE, detail);
  } else if (l->scan.headers == 0) {
    char detail[256];
    snprintf(detail, sizeof(detail),
             "neither ss nor /proc/net/tcp answered there (exit status %d); listening ports "
             "are read with ss or from /proc/net/tcp and /proc/net/tcp6, so the host must "
             "run Linux",
             res->exit_status);
    listing_fail(l, LC_EREMOTE, detail);
  } else {
    listing_learn(l);
  }
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
  } else {
    listing_judge(l, &res);
    if (l->rc == 0 && l->scan.nomem)
      listing_fail(l, -ENOMEM, "out of memory");
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
  lc__portscan_clear(&l->scan);
  free(l);
  return r;
}

int lc__ports_keep_fresh(lc_runtime *rt, const lc_ports *listening, const lc_ports *held) {
  lc__portscan *s = lc__calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->headers = 2;
  for (size_t i = 0; i < lc_ports_count(listening); i++)
    lc__portscan_add(s, lc_ports_at(listening, i));
  for (size_t i = 0; held != NULL && i < lc_ports_count(held); i++)
    lc__portscan_add_held(s, lc_ports_at(held, i));
  if (s->nomem) {
    lc__portscan_free(s);
    return -ENOMEM;
  }
  __atomic_store_n(&rt->fresh_listing_at, lc__now_ms(), __ATOMIC_RELAXED);
  lc__portscan_free(__atomic_exchange_n(&rt->fresh_listing, s, __ATOMIC_ACQ_REL));
  return 0;
}

/* What rt's facts read, when that was recent enough; NULL otherwise. Taken once. */
static lc__portscan *take_fresh(lc_runtime *rt) {
  uint64_t at = __atomic_load_n(&rt->fresh_listing_at, __ATOMIC_RELAXED);
  lc__portscan *s = __atomic_exchange_n(&rt->fresh_listing, NULL, __ATOMIC_ACQ_REL);
  if (s != NULL && lc__now_ms() - at > LC__FRESH_LISTING_MS) {
    lc__portscan_free(s);
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
  /* lc__listing_launch: called on the engine thread when the listing ended */
  void (*done)(lc__listing *x, void *arg);
  void *arg;
};

int lc__listing_start(lc__listing **out, lc_runtime *rt, const int *ports, size_t n) {
  lc__listing *x = lc__calloc(1, sizeof(*x));
  *out = NULL;
  if (x == NULL || (ports != NULL && listing_watch(&x->l, ports, n) < 0)) {
    if (x != NULL)
      listing_unwatch(&x->l);
    free(x);
    return lc__error_set(-ENOMEM, "out of memory");
  }
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
  listing_unwatch(&x->l);
  free(x);
}

/* ---- on the engine thread ------------------------------------------------------------------ */

static void listing_ended(lc_process *p, void *arg) {
  lc__listing *x = arg;
  if (p->err_code < 0)
    listing_fail(&x->l, p->err_code, lc__proc_err_msg(p));
  else
    listing_judge(&x->l, &p->result);
  x->done(x, x->arg);
}

int lc__listing_launch(lc__listing **out, lc_runtime *rt, const int *ports, size_t n,
                       void (*done)(lc__listing *x, void *arg), void *arg) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc__listing *x = lc__calloc(1, sizeof(*x));
  lc__err err = {0};
  int r = LC_EINTERNAL;

  *out = NULL;
  if (x == NULL || (ports != NULL && listing_watch(&x->l, ports, n) < 0)) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto fail;
  }
  x->l.rt = rt;
  x->started = lc__now_ms();
  x->done = done;
  x->arg = arg;
  eo.on_line = listing_line;
  eo.payload = &x->l.scan;
  if ((r = lc__proc_new(&x->l.proc, rt, listing_command(&x->l), &eo, 0, NULL, NULL)) < 0)
    goto fail;
  x->l.proc->on_finish = listing_ended;
  x->l.proc->finish_arg = x;
  *out = x; /* done may run before the launch returns: x is the caller's from here on */
  if ((r = lc__proc_launch(x->l.proc, &err)) < 0) {
    *out = NULL;
    r = lc__err_raise(&err);
    goto fail;
  }
  return 0;
fail:
  if (x != NULL) {
    if (x->l.proc != NULL)
      lc__proc_release(x->l.proc);
    listing_unwatch(&x->l);
    free(x);
  }
  return r;
}

int lc__listing_result(const lc__listing *x, const lc__portscan **scan, const char **msg) {
  *scan = &x->l.scan;
  *msg = x->l.msg;
  return x->l.rc;
}

void lc__listing_drop(lc__listing *x) {
  if (x == NULL)
    return;
  if (x->l.proc != NULL)
    lc__proc_release(x->l.proc);
  listing_unwatch(&x->l);
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
    for (size_t k = 0; k < ls[i].scan.nlisten; k++)
      lc__ports_bit_set(taken, ls[i].scan.listen[k]);
    for (size_t k = 0; k < ls[i].scan.nheld; k++) /* a connection's: no listener can bind it */
      lc__ports_bit_set(taken, ls[i].scan.held[k]);
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
  for (size_t i = 0; ls != NULL && i < n; i++)
    lc__portscan_clear(&ls[i].scan);
  free(ls);
  free(taken);
  return r;
}

/* The pause between two looks grows from 10 ms to 50 ms: most services listen within a few ms. */
#define WAIT_PAUSE_FIRST_MS 10
#define WAIT_PAUSE_MAX_MS 50
/* while probes fail, a listing now and then: a listener on another address than 127.0.0.1, or
 * a host that refuses forwards (the probe's failure reason is not known, see tunnel.c) */
#define WAIT_LISTING_MS 1000

int lc__ports_judge_owner(lc_runtime *rt, int port, const lc__portscan *ps, const char *whose) {
  const lc__listener *other = lc__portscan_stranger(ps, port);
  char where[80];
  if (other != NULL) {
    lc__listener_format(other, where, sizeof(where));
    return lc__error_set(-EADDRINUSE,
                         "%s: port %d is listened on by uid %ld, not by %s (%s): another user "
                         "took the port",
                         lc_runtime_name(rt), port, other->uid, whose, where);
  }
  return lc__portscan_ours(ps, port);
}

/*
 * A poll costs no session channel while the port refuses: each look probes it (a connection to
 * 127.0.0.1:port on the host; on SSH a direct-tcpip channel), and a listing, which tells whose
 * the listener is, runs once the probe got through, or at most every WAIT_LISTING_MS meanwhile
 * (a listener on another address only than 127.0.0.1, or one on a host that refuses forwards, is
 * seen by a listing alone), or at every look where the backend knows it cannot probe (no probe
 * op, the connection gone).
 */
int lc_ports_wait_listening(lc_runtime *rt, int port, lc_process *proc, int timeout_ms) {
  uint64_t deadline = lc__now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  uint64_t listed_at = lc__now_ms(); /* the first listing waits for a probe, or for the pace */
  int pause = WAIT_PAUSE_FIRST_MS, blind = 0;
  char whose[64];
  if (rt == NULL || proc == NULL || port < 1 || port > 65535)
    return lc__error_set(-EINVAL, "wait for a listening port: no runtime, no process or port %d",
                         port);
  snprintf(whose, sizeof(whose), "the process started there (pid %ld)", lc_process_pid(proc));
  for (;;) {
    lc__listing *x = NULL;
    const lc__portscan *ps = NULL;
    int up = 0, list = blind;
    uint64_t now;
    if (lc_process_wait(NULL, proc, 0) != -ETIMEDOUT)
      return lc__error_set(LC_EREMOTE, "%s: the process ended before port %d listened",
                           lc_runtime_name(rt), port);
    if (!blind) {
      lc__probe *pr = NULL;
      const int *ports = NULL;
      size_t n = 0;
      now = lc__now_ms();
      if (lc__probe_start(&pr, rt, &port, 1) < 0)
        return -ENOMEM;
      /* an unanswered probe is a "no" for this look; the next look asks again */
      if (lc__probe_wait(pr, now < deadline ? (int)(deadline - now) + 1 : 1)) {
        int res = lc__probe_result(pr, &ports, &n)[0];
        list = res == 1;
        blind = res < 0;
      }
      lc__probe_free(pr);
    }
    now = lc__now_ms();
    if (blind || list || now >= listed_at + WAIT_LISTING_MS) {
      listed_at = now;
      /* whose the port is: another user's listener there is not ours, and never ready */
      if (lc__listing_start(&x, rt, &port, 1) == 0 && lc__listing_finish(x, &ps) == 0 &&
          (up = lc__ports_judge_owner(rt, port, ps, whose)) < 0) {
        lc__listing_free(x);
        return up;
      }
      lc__listing_free(x);
    }
    /* listening, and still alive: a process that died of "address in use" is not ready */
    if (up > 0 && lc_process_wait(NULL, proc, 0) == -ETIMEDOUT)
      return 0;
    if (up > 0)
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
