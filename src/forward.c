/*
 * forward.c - port forwards, whatever the backend: the public calls and the local listener. The
 * backend relays what the listener accepts (the local backend's stream relay:
 * runtimes/local/relay.c).
 */
#include "peer.h"
#include "runtime_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lc_forward_options_init(lc_forward_options *opts) {
  lc_forward_options init = LC_FORWARD_OPTIONS_INIT;
  *opts = init;
}

int lc__forward_target_addr(struct sockaddr_storage *out, const char *host, int port) {
  memset(out, 0, sizeof(*out));
  if (strcmp(host, "localhost") == 0)
    host = "127.0.0.1";
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0)
    return 0;
  if (strcmp(host, "ip6-localhost") == 0)
    host = "::1";
  if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0)
    return 0;
  return -EINVAL;
}

void lc__forward_set_up(lc_forward *f, int up, const char *detail) {
  int was = __atomic_exchange_n(&f->up, up, __ATOMIC_ACQ_REL);
  if (was != up && f->announced && f->on_state != NULL)
    f->on_state(f, up ? LC_FORWARD_UP : LC_FORWARD_DOWN, detail ? detail : "", f->payload);
}

void lc__forward_set_refused(lc_forward *f, const char *detail) {
  __atomic_store_n(&f->up, 0, __ATOMIC_RELEASE);
  if (f->announced && f->on_state != NULL)
    f->on_state(f, LC_FORWARD_DOWN, detail ? detail : "", f->payload);
}

static void unlink_forward(lc_forward *f);

static void batch_one_done(lc_forward *f, const lc__err *err);

void lc__forward_ready(lc_forward *f, const lc__err *err) {
  lc__call *c = f->call;
  f->call = NULL;
  if (c != NULL && err != NULL && err->code < 0)
    unlink_forward(f); /* it never came up: the caller frees it */
  if (err == NULL || err->code == 0) {
    lc__forward_set_up(f, 1, "up");
    f->announced = 1;
  }
  if (c == NULL)
    return;
  if (f->batch != NULL) {
    batch_one_done(f, err);
    return;
  }
  if (err != NULL && err->code < 0)
    c->err = *err;
  lc__call_done(c, err ? err->code : 0);
}

/* ---- the connection cap --------------------------------------------------------------------- */

int lc__forward_conn_take(lc_forward *f) {
  char msg[512], more[96];
  if (f->conns < f->max_conns) {
    f->conns++;
    /* told again only after the overflow eased: a flood at the cap is one notice, not one per
     * connection that ends and one that is refused */
    if (f->cap_told && f->conns <= f->max_conns - f->max_conns / 4)
      f->cap_told = 0;
    return 1;
  }
  if (!f->cap_told && lc__peer_notice_allowed(f->engine, more, sizeof(more))) {
    f->cap_told = 1;
    snprintf(msg, sizeof(msg),
             "%s: the %s forward of port %d (to %s:%d) carries %d connections, its cap "
             "(lc_forward_options.max_connections): new ones are closed until some end%s",
             f->rt != NULL ? f->rt->name : "?", f->kind == LC_FORWARD_LOCAL ? "-L" : "-R", f->port,
             f->target, f->target_port, f->max_conns, more);
    lc__engine_notice(f->engine, msg);
  }
  return 0;
}

void lc__forward_conn_drop(lc_forward *f) {
  if (f->conns > 0)
    f->conns--;
}

/* ---- the local listener --------------------------------------------------------------------- */

static void client_closed(uv_handle_t *h) { free(h); }

static void on_connection(uv_stream_t *server, int status) {
  lc_forward *f = server->data;
  uv_tcp_t *client;
  if (status < 0 || f == NULL)
    return;
  if ((client = lc__malloc(sizeof(*client))) == NULL)
    return;
  uv_tcp_init(server->loop, client);
  if (uv_accept(server, (uv_stream_t *)client) < 0) {
    uv_close((uv_handle_t *)client, client_closed);
    return;
  }
  if (!f->up || f->rt == NULL) { /* down: refuse by closing, the listener stays ours */
    uv_close((uv_handle_t *)client, client_closed);
    return;
  }
  /* a stranger's connection ends here, before a byte or a channel goes anywhere: a reset, so
   * that it leaves no TIME-WAIT behind on our side either */
  if (!lc__peer_admit(f->engine, f->peers, client, f->bind, f->port)) {
    if (uv_tcp_close_reset(client, client_closed) < 0)
      uv_close((uv_handle_t *)client, client_closed);
    return;
  }
  /* past the cap: a reset too, at once (the backend drops the count when the relay ends) */
  if (!lc__forward_conn_take(f)) {
    if (uv_tcp_close_reset(client, client_closed) < 0)
      uv_close((uv_handle_t *)client, client_closed);
    return;
  }
  uv_tcp_nodelay(client, 1);
  f->rt->ops->fwd_accept(f, client);
}

static void listener_closed(uv_handle_t *h) { free(h); }

static int listen_local(lc_forward *f, lc__err *err) {
  struct sockaddr_storage addr;
  uv_tcp_t *l;
  int len = sizeof(addr), r;
  if (lc__forward_target_addr(&addr, f->bind, f->port) < 0)
    return lc__err_set(err, -EINVAL, "cannot listen on %s: not an address", f->bind);
  if ((l = lc__malloc(sizeof(*l))) == NULL)
    return lc__err_set(err, -ENOMEM, "out of memory");
  uv_tcp_init(lc__engine_loop(f->engine), l);
  l->data = f;
  if ((r = uv_tcp_bind(l, (struct sockaddr *)&addr, 0)) == 0)
    r = uv_listen((uv_stream_t *)l, 511, on_connection);
  if (r < 0) {
    l->data = NULL;
    uv_close((uv_handle_t *)l, listener_closed);
    if (r == UV_EADDRINUSE)
      return lc__err_set(err, -EADDRINUSE, "port %d is in use on this machine (%s)", f->port,
                         f->bind);
    return lc__err_set(err, r, "cannot listen on %s port %d: %s", f->bind, f->port, uv_strerror(r));
  }
  uv_tcp_getsockname(l, (struct sockaddr *)&addr, &len);
  f->port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                             : ((struct sockaddr_in *)&addr)->sin_port);
  f->listener = l;
  return 0;
}

/* ---- public calls --------------------------------------------------------------------------- */

typedef struct {
  lc__call call;
  lc_forward *f;
} fwd_call;

static void unlink_forward(lc_forward *f) {
  lc_runtime *rt = f->rt;
  if (rt == NULL)
    return;
  if (f->prev)
    f->prev->next = f->next;
  else if (rt->forwards == f)
    rt->forwards = f->next;
  if (f->next)
    f->next->prev = f->prev;
  f->next = f->prev = NULL;
}

static void start_fn(lc__call *c) {
  lc_forward *f = ((fwd_call *)c)->f;
  lc_runtime *rt = f->rt;
  int r;
  if (!lc_runtime_is_connected(rt)) {
    lc__err_set(&c->err, LC_ECLOSED, "%s: not connected", rt->name);
    lc__call_done(c, LC_ECLOSED);
    return;
  }
  f->next = rt->forwards;
  if (rt->forwards)
    rt->forwards->prev = f;
  rt->forwards = f;
  if (f->kind == LC_FORWARD_LOCAL || rt->ops->fwd_start == NULL) {
    if ((r = listen_local(f, &c->err)) < 0) {
      unlink_forward(f);
      lc__call_done(c, r);
      return;
    }
    f->call = c;
    lc__forward_ready(f, NULL);
    return;
  }
  f->call = c;
  rt->ops->fwd_start(f);
}

static void stop_one(lc_forward *f) {
  unlink_forward(f);
  if (f->listener != NULL) {
    f->listener->data = NULL;
    uv_close((uv_handle_t *)f->listener, listener_closed);
    f->listener = NULL;
  }
  if (f->rt != NULL && f->rt->ops->fwd_stop != NULL)
    f->rt->ops->fwd_stop(f);
}

static void stop_fn(lc__call *c) {
  stop_one(((fwd_call *)c)->f);
  lc__call_done(c, 0);
}

static void forward_release(lc_forward *f) {
  lc__engine_disown(f->engine, &f->owned);
  free(f->bind);
  free(f->target);
  free(f);
}

/*
 * A remote listen the host refused: say whether the port is taken there or forwarding is off, in
 * one round trip. Not only a listener (on any address) takes the port: a connection's local port
 * (an outgoing connection's ephemeral port, say) blocks sshd's bind all the same, and so does one
 * in TIME-WAIT for a minute after a close unless it had SO_REUSEADDR; the listing of listeners
 * shows neither. The check exits 2 for a listener, 0 for another socket, 1 for none.
 */
static int explain_remote_refusal(lc_runtime *rt, int port, int code) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {.exit_status = -1};
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "if command -v ss >/dev/null 2>&1; then ss -tanH '( sport = :%d )' | "
           "awk '{ f = 1; if ($1 == \"LISTEN\") l = 1 } END { exit l ? 2 : f ? 0 : 1 }'; "
           "else awk 'FNR > 1 { n = split($2, a, \":\"); if (a[n] == \"%04X\") "
           "{ f = 1; if ($4 == \"0A\") l = 1 } } END { exit l ? 2 : f ? 0 : 1 }' "
           "/proc/net/tcp /proc/net/tcp6; fi",
           port, (unsigned)port);
  eo.timeout_ms = 10000;
  if (lc_runtime_exec(&res, rt, cmd, &eo) < 0)
    res.exit_status = -1; /* could not look: what the refusal most likely means, below */
  if (res.exit_status == 2)
    return lc__error_set(-EADDRINUSE, "port %d is in use on %s", port, rt->name);
  if (res.exit_status == 0)
    return lc__error_set(-EADDRINUSE,
                         "port %d is in use on %s (a connection's local port there "
                         "holds it, or did until a moment ago)",
                         port, rt->name);
  return lc__error_set(code,
                       "%s refused to listen on port %d: the port is free there, so "
                       "forwarding is probably disabled (AllowTcpForwarding in its "
                       "sshd_config)",
                       rt->name, port);
}

/* Checks a forward's settings and makes it, not yet started. */
static int forward_make(lc_forward **out, lc_runtime *rt, lc_forward_kind kind, int port,
                        const char *target_host, int target_port, const lc_forward_options *opts) {
  lc_forward *f = NULL;
  const char *bind = NULL;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_FORWARD_OPTIONS_VERSION, "lc_forward_options");
  bind = opts && opts->bind_address ? opts->bind_address : "127.0.0.1";
  if (rt == NULL || target_host == NULL || target_host[0] == '\0')
    return lc__error_set(-EINVAL, "forward: no runtime or no target host given");
  if (kind != LC_FORWARD_LOCAL && kind != LC_FORWARD_REMOTE)
    return lc__error_set(-EINVAL, "forward: kind must be LC_FORWARD_LOCAL or LC_FORWARD_REMOTE");
  if (port < (kind == LC_FORWARD_REMOTE) || port > 65535)
    return lc__error_set(-EINVAL, "forward: listen port %d is out of range (%s)", port,
                         kind == LC_FORWARD_REMOTE ? "1-65535" : "0-65535, 0 picks one");
  if (target_port < 1 || target_port > 65535)
    return lc__error_set(-EINVAL, "forward: target port %d is out of range (1-65535)", target_port);
  if (kind == LC_FORWARD_REMOTE || lc__runtime_on_this_machine(rt)) {
    struct sockaddr_storage probe;
    if (lc__forward_target_addr(&probe, target_host, target_port) < 0)
      return lc__error_set(-EINVAL,
                           "forward: target %s must be an IP address or localhost: "
                           "this machine connects to it",
                           target_host);
  }
  if (opts != NULL && opts->version >= 3 && opts->max_connections < 0)
    return lc__error_set(-EINVAL, "forward: max_connections %d is negative (0: the default, %d)",
                         opts->max_connections, LC_FORWARD_MAX_CONNECTIONS);
  if (opts != NULL && opts->version >= 2 && (opts->peers < 0 || opts->peers > LC_PEERS_ANY + 1))
    return lc__error_set(-EINVAL, "forward: peers %d: want 0 (the engine's) or an lc_peers + 1",
                         opts->peers);
  if (strcmp(bind, "localhost") == 0)
    bind = "127.0.0.1";
  if (strcmp(bind, "127.0.0.1") != 0 && strcmp(bind, "::1") != 0)
    return lc__error_set(-EINVAL,
                         "forward: refusing to listen on %s: forwards listen on "
                         "loopback only (127.0.0.1 or ::1)",
                         bind);
  if ((f = lc__calloc(1, sizeof(*f))) == NULL || (f->bind = lc__strdup(bind)) == NULL ||
      (f->target = lc__strdup(target_host)) == NULL) {
    if (f)
      forward_release(f);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  f->rt = rt;
  f->engine = rt->engine;
  f->kind = kind;
  f->port = port;
  f->target_port = target_port;
  f->peers = -1;
  if (opts != NULL) {
    f->on_state = opts->on_state;
    f->payload = opts->payload;
    if (opts->version >= 2)
      f->peers = opts->peers - 1;
    if (opts->version >= 3)
      f->max_conns = opts->max_connections;
  }
  if (f->max_conns <= 0)
    f->max_conns = LC_FORWARD_MAX_CONNECTIONS;
  *out = f;
  return 0;
}

/* The end of a start: a forward that did not come up is freed, with its cause explained. */
static int forward_started(lc_forward *f, int r) {
  if (r < 0) {
    if (r == LC_EFORWARD && f->kind == LC_FORWARD_REMOTE && !f->refused_here)
      r = explain_remote_refusal(f->rt, f->port, r);
    forward_release(f);
  }
  return r;
}

static void release_forward(void *f) { lc_forward_free(f); }

int lc_forward_new(lc_forward **out, lc_runtime *rt, lc_forward_kind kind, int port,
                   const char *target_host, int target_port, const lc_forward_options *opts) {
  lc_forward *f = NULL;
  fwd_call fc;
  int r;

  *out = NULL;
  if ((r = forward_make(&f, rt, kind, port, target_host, target_port, opts)) < 0)
    return r;
  fc.f = f;
  if ((r = forward_started(f, lc__engine_run(rt->engine, &fc.call, start_fn))) < 0)
    return r;
  lc__engine_adopt(f->engine, &f->owned, LC__OWNED_FORWARD, f, release_forward);
  *out = f;
  return 0;
}

/*
 * Many forwards at once, started as one engine call per engine (struct lc__fwd_batch): every
 * start is made before any is awaited, so the round trips to different hosts overlap (one host's
 * remote listens still go one at a time in its backend). A mesh starts W x H forwards: each keeps
 * only its result here (a code, and a message only when it failed), not an lc__call of its own
 * (over 1 KiB with its message: 70 MB at 64 hosts x 1024 workers, all of it in the peak RSS),
 * and the caller wakes once when all are done, not once per forward.
 */
struct lc__fwd_batch {
  lc__call call;
  lc_forward **f; /* this batch's part of the arrays of lc__forwards_new */
  int *code;
  lc__err **err; /* the detail of each failed start, NULL for the others */
  size_t n, pending;
};

/* Engine thread: one forward of a batch is up or failed; the last one finishes the call. */
static void batch_one_done(lc_forward *f, const lc__err *err) {
  struct lc__fwd_batch *b = f->batch;
  size_t i = f->batch_i;
  f->batch = NULL;
  b->code[i] = err != NULL && err->code < 0 ? err->code : 0;
  if (b->code[i] < 0 && (b->err[i] = lc__malloc(sizeof(*b->err[i]))) != NULL)
    *b->err[i] = *err;
  if (--b->pending == 0)
    lc__call_done(&b->call, 0);
}

/* Engine thread: starts every forward of the batch, as start_fn does one. */
static void batch_fn(lc__call *c) {
  struct lc__fwd_batch *b = (struct lc__fwd_batch *)c;
  b->pending = b->n + 1; /* one more until every start was made: no early end */
  for (size_t i = 0; i < b->n; i++) {
    lc_forward *f = b->f[i];
    lc_runtime *rt = f->rt;
    lc__err err = {0};
    f->batch = b;
    f->batch_i = i;
    if (!lc_runtime_is_connected(rt)) {
      lc__err_set(&err, LC_ECLOSED, "%s: not connected", rt->name);
      batch_one_done(f, &err);
      continue;
    }
    f->next = rt->forwards;
    if (rt->forwards)
      rt->forwards->prev = f;
    rt->forwards = f;
    f->call = c;
    if (f->kind == LC_FORWARD_LOCAL || rt->ops->fwd_start == NULL) {
      int r = listen_local(f, &err);
      if (r < 0 && err.code == 0)
        lc__err_set(&err, r, "%s", lc_strerror(r));
      lc__forward_ready(f, r < 0 ? &err : NULL);
    } else {
      rt->ops->fwd_start(f);
    }
  }
  if (--b->pending == 0)
    lc__call_done(c, 0);
}

int lc__forwards_new(const lc__fwd_spec *spec, size_t n, lc__fwdlist *keep) {
  struct lc__fwd_batch *batch = NULL;
  lc_forward **f = NULL;
  int *code = NULL;
  lc__err **err = NULL;
  size_t nb = 0, made = 0;
  char first[LC_ERRMSG_MAX] = "";
  int r = 0;

  if (n == 0)
    return 0;
  if ((f = lc__calloc(n, sizeof(*f))) == NULL || (code = lc__calloc(n, sizeof(*code))) == NULL ||
      (err = lc__calloc(n, sizeof(*err))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (; made < n; made++) {
    const lc__fwd_spec *s = &spec[made];
    if ((r = forward_make(&f[made], s->rt, s->kind, s->port, s->target, s->target_port, NULL)) < 0)
      goto out;
    f[made]->route = s->route;
    f[made]->route_arg = s->route_arg;
    if (s->max_conns > 0)
      f[made]->max_conns = s->max_conns;
    nb += made == 0 || f[made]->engine != f[made - 1]->engine;
  }
  /* one batch per run of forwards on the same engine (in practice one: a group's) */
  if ((batch = lc__calloc(nb, sizeof(*batch))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  nb = 0;
  for (size_t i = 0; i < n; i++) {
    if (nb == 0 || f[i]->engine != batch[nb - 1].call.engine) {
      batch[nb].f = &f[i];
      batch[nb].code = &code[i];
      batch[nb].err = &err[i];
      batch[nb].call.engine = f[i]->engine;
      nb++;
    }
    batch[nb - 1].n++;
  }
  for (size_t k = 0; k < nb; k++) {
    int e = lc__engine_post(batch[k].call.engine, &batch[k].call, batch_fn);
    if (e < 0) { /* not posted: each of its forwards failed so */
      batch[k].call.engine = NULL;
      for (size_t i = 0; i < batch[k].n; i++)
        batch[k].code[i] = e;
      if (first[0] == '\0')
        snprintf(first, sizeof(first), "%s", lc_error_last());
    }
  }
  for (size_t k = 0; k < nb; k++)
    if (batch[k].call.engine != NULL)
      lc__engine_await(batch[k].call.engine, &batch[k].call);
  /* every start is seen to, whatever happened to the others; the first error stands */
  for (size_t i = 0; i < n; i++) {
    int e = code[i];
    if (e < 0)
      lc__error_set(e, "%s", err[i] != NULL ? err[i]->msg : first[0] ? first : lc_strerror(e));
    lc_forward *one = f[i];
    f[i] = NULL;
    if ((e = forward_started(one, e)) == 0) /* a failed one is freed by now */
      e = lc__fwdlist_add(keep, one);       /* frees it when it cannot keep it */
    if (e < 0 && r == 0) {
      r = e;
      snprintf(first, sizeof(first), "%s", lc_error_last());
    }
  }
  if (r < 0)
    lc__error_set(r, "%s", first);
  made = 0;
out:
  for (size_t i = 0; i < made; i++)
    forward_release(f[i]); /* made, never started */
  for (size_t i = 0; err != NULL && i < n; i++)
    free(err[i]);
  free(batch);
  free(err);
  free(code);
  free(f);
  return r;
}

int lc__fwdlist_add(lc__fwdlist *l, lc_forward *f) {
  lc_forward **v = lc__grow(l->v, &l->cap, l->n + 1, sizeof(*v), 16);
  if (v == NULL) {
    lc_forward_free(f);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  l->v = v;
  l->v[l->n++] = f;
  return 0;
}

/* A stop of many forwards on one engine as one call (lc__forwards_free). */
typedef struct {
  lc__call call;
  lc_forward **v;
  size_t n;
} stop_batch;

static void stop_batch_fn(lc__call *c) {
  stop_batch *b = (stop_batch *)c;
  for (size_t i = 0; i < b->n; i++)
    stop_one(b->v[i]);
  lc__call_done(c, 0);
}

/*
 * Stops and frees v[0..n): one engine call for each run of forwards on the same engine, not one
 * round trip between the threads per forward (a mesh's W x H of them: the engine thread waited
 * seconds on its mutex for the caller's wake-ups, its timers and hosts unserved meanwhile).
 */
void lc__forwards_free(lc_forward **v, size_t n) {
  size_t i = 0;
  while (i < n) {
    stop_batch b = {.v = &v[i]};
    if (v[i] == NULL) {
      i++;
      continue;
    }
    while (i + b.n < n && v[i + b.n] != NULL && v[i + b.n]->engine == v[i]->engine)
      b.n++;
    lc__engine_run(v[i]->engine, &b.call, stop_batch_fn);
    for (size_t k = 0; k < b.n; k++)
      forward_release(v[i + k]);
    i += b.n;
  }
}

void lc__fwdlist_free(lc__fwdlist *l) {
  lc__forwards_free(l->v, l->n);
  free(l->v);
  memset(l, 0, sizeof(*l));
}

int lc_forward_port(const lc_forward *f) { return f->port; }

int lc_forward_is_up(const lc_forward *f) { return __atomic_load_n(&f->up, __ATOMIC_ACQUIRE); }

void lc_forward_free(lc_forward *f) {
  fwd_call fc = {.f = f};
  if (f == NULL)
    return;
  lc__engine_run(f->engine, &fc.call, stop_fn);
  forward_release(f);
}
