/*
 * local.c - the runtime backend for this machine: each process is `/bin/sh -c COMMAND` started
 * with uv_spawn, its stdin a pipe (the script, then the lifeline's control line), stdout and
 * stderr pipes. No sshd
 * needed. Commands start in $HOME, as they would over SSH.
 */
#include "local_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_CHUNK (256 * 1024)

typedef struct local_proc {
  lc_process *p; /* NULL once detached */
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_write_t write_req;
  char *wbuf;
  int writing;
  int in_open;
  int open_handles;
  int eofs;
  int exited;
} local_proc;

static void handle_closed(uv_handle_t *h) {
  local_proc *lp = h->data;
  if (--lp->open_handles == 0) {
    free(lp->wbuf);
    free(lp);
  }
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h))
    uv_close(h, handle_closed);
}

/* Ends p when the process exited and both output pipes reached EOF. */
static void maybe_finish(local_proc *lp) {
  if (lp->p == NULL || !lp->exited || lp->eofs < 2)
    return;
  lc_process *p = lp->p;
  lp->p = NULL;
  if (lp->in_open) {
    lp->in_open = 0;
    close_handle((uv_handle_t *)&lp->in);
  }
  lc__proc_closed(p, NULL);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char rbuf[64 * 1024]; /* engine thread only; each read is consumed before the next */
  (void)h;
  (void)suggested;
  buf->base = rbuf;
  buf->len = sizeof(rbuf);
}

static void kick(local_proc *lp);

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  local_proc *lp = ((uv_handle_t *)s)->data;
  lc_stream stream = s == (uv_stream_t *)&lp->out ? LC_STDOUT : LC_STDERR;
  if (n > 0) {
    if (lp->p != NULL) {
      lc__proc_data(lp->p, stream, buf->base, (size_t)n);
      kick(lp); /* the mark lets the rest of stdin go */
    }
    return;
  }
  if (n == 0)
    return;
  uv_read_stop(s);
  close_handle((uv_handle_t *)s);
  lp->eofs++;
  maybe_finish(lp);
}

static void on_exit_cb(uv_process_t *h, int64_t status, int signal) {
  local_proc *lp = h->data;
  lp->exited = 1;
  if (lp->p != NULL)
    lc__proc_exit(lp->p, (int)status, signal);
  close_handle((uv_handle_t *)h);
  maybe_finish(lp);
}

static void on_written(uv_write_t *req, int status) {
  local_proc *lp = req->data;
  lp->writing = 0;
  if (status < 0 || lp->p == NULL)
    return;
  kick(lp);
}

static void kick(local_proc *lp) {
  lc_process *p = lp->p;
  const char *data;
  size_t n;
  uv_buf_t b;

  if (p == NULL || lp->writing || !lp->in_open)
    return;
  if ((n = lc__proc_in_peek(p, &data)) > 0) {
    if (n > WRITE_CHUNK)
      n = WRITE_CHUNK;
    memcpy(lp->wbuf, data, n);
    lc__proc_in_consume(p, n);
    b = uv_buf_init(lp->wbuf, (unsigned int)n);
    lp->write_req.data = lp;
    if (uv_write(&lp->write_req, (uv_stream_t *)&lp->in, &b, 1, on_written) == 0)
      lp->writing = 1;
    return;
  }
  if (lc__proc_in_eof_due(p)) {
    p->in_eof_sent = 1;
    lp->in_open = 0;
    close_handle((uv_handle_t *)&lp->in);
  }
}

static void local_connect(lc_runtime *rt) { lc__runtime_connected(rt, NULL); }

static void local_proc_start(lc_process *p) {
  local_proc *lp = lc__calloc(1, sizeof(*lp));
  uv_loop_t *loop = lc__engine_loop(p->engine);
  uv_process_options_t po;
  uv_stdio_container_t stdio[3];
  char *args[] = {"/bin/sh", "-c", p->command, NULL};
  lc__err err = {0};
  int r;

  if (lp == NULL || (lp->wbuf = lc__malloc(WRITE_CHUNK)) == NULL) {
    free(lp);
    lc__err_set(&err, -ENOMEM, "out of memory");
    lc__proc_closed(p, &err);
    return;
  }
  lp->p = p;
  p->backend = lp;
  uv_pipe_init(loop, &lp->in, 0);
  uv_pipe_init(loop, &lp->out, 0);
  uv_pipe_init(loop, &lp->err, 0);
  lp->in.data = lp->out.data = lp->err.data = lp->proc.data = lp;
  lp->open_handles = 3;
  memset(&po, 0, sizeof(po));
  memset(stdio, 0, sizeof(stdio));
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&lp->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&lp->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&lp->err;
  po.file = "/bin/sh";
  po.args = args;
  po.cwd = getenv("HOME");
  po.stdio = stdio;
  po.stdio_count = 3;
  po.exit_cb = on_exit_cb;
  /* its own session: a Ctrl-C meant for this program reaches it through its lifeline only */
  po.flags = UV_PROCESS_DETACHED;
  if ((r = uv_spawn(loop, &lp->proc, &po)) < 0) {
    lp->p = NULL;
    close_handle((uv_handle_t *)&lp->in);
    close_handle((uv_handle_t *)&lp->out);
    close_handle((uv_handle_t *)&lp->err);
    lc__err_set(&err, r, "localhost: cannot start /bin/sh: %s", uv_strerror(r));
    lc__proc_closed(p, &err);
    return;
  }
  lp->open_handles++;
  lp->in_open = 1;
  uv_read_start((uv_stream_t *)&lp->out, on_alloc, on_read);
  uv_read_start((uv_stream_t *)&lp->err, on_alloc, on_read);
  kick(lp);
}

static void local_proc_kick(lc_process *p) {
  if (p->backend != NULL)
    kick(p->backend);
}

static void local_proc_abort(lc_process *p) {
  local_proc *lp = p->backend;
  if (lp == NULL)
    return;
  lp->p = NULL;
  if (lp->in_open) {
    lp->in_open = 0;
    close_handle((uv_handle_t *)&lp->in);
  }
  /* The pipes stay open until the process group ends, so the child never gets SIGPIPE. */
  lc__proc_closed(p, NULL);
}

/* A forward on this machine is a plain relay from the listener to the target. */
typedef struct target_connect target_connect;
struct target_connect {
  uv_connect_t req;
  uv_tcp_t *client;
  lc_forward *f;               /* NULL once the forward is gone */
  target_connect *next, *prev; /* f->backend: the connects still in flight */
};

static void on_target_connected(uv_connect_t *req, int status) {
  target_connect *lc = (target_connect *)req;
  if (lc->f != NULL) {
    if (lc->prev)
      lc->prev->next = lc->next;
    else
      lc->f->backend = lc->next;
    if (lc->next)
      lc->next->prev = lc->prev;
  }
  if (status < 0 || lc->f == NULL) { /* refused: this connection closes, the forward stays */
    if (lc->f != NULL)
      lc__forward_conn_drop(lc->f);
    uv_close((uv_handle_t *)lc->client, (uv_close_cb)free);
    uv_close((uv_handle_t *)req->handle, (uv_close_cb)free);
  } else {
    uv_tcp_nodelay((uv_tcp_t *)req->handle, 1);
    lc__local_relay_streams(lc->f, (uv_stream_t *)lc->client, req->handle);
  }
  free(lc);
}

static void local_fwd_accept(lc_forward *f, uv_tcp_t *client) {
  struct sockaddr_storage addr;
  uv_tcp_t *up = NULL;
  target_connect *lc = NULL;
  if (lc__forward_target_addr(&addr, f->target, f->target_port) < 0 ||
      (up = lc__malloc(sizeof(*up))) == NULL || (lc = lc__calloc(1, sizeof(*lc))) == NULL) {
    free(up);
    lc__forward_conn_drop(f);
    uv_close((uv_handle_t *)client, (uv_close_cb)free);
    return;
  }
  uv_tcp_init(client->loop, up);
  lc->client = client;
  if (uv_tcp_connect(&lc->req, up, (struct sockaddr *)&addr, on_target_connected) < 0) {
    free(lc);
    lc__forward_conn_drop(f);
    uv_close((uv_handle_t *)client, (uv_close_cb)free);
    uv_close((uv_handle_t *)up, (uv_close_cb)free);
    return;
  }
  lc->f = f;
  lc->next = f->backend;
  if (lc->next)
    lc->next->prev = lc;
  f->backend = lc;
}

/* f is going away: its connects in flight and its relays let go of it, the relays close. */
static void local_fwd_stop(lc_forward *f) {
  for (target_connect *lc = f->backend; lc != NULL; lc = lc->next)
    lc->f = NULL;
  f->backend = NULL;
  lc__local_relays_close(f);
}

static void local_close(lc_runtime *rt, void (*done)(lc_runtime *rt)) { done(rt); }

/* A probe of 127.0.0.1:port here: a TCP connect, closed at once. */
typedef struct local_probe {
  uv_connect_t req;
  uv_tcp_t tcp;
  void (*done)(void *arg, int r);
  void *arg;
} local_probe;

static void probe_closed(uv_handle_t *h) { free(h->data); }

static void on_probe_connected(uv_connect_t *req, int status) {
  local_probe *lp = req->data;
  lp->done(lp->arg, status == 0 ? 1 : status == UV_ECONNREFUSED ? 0 : status);
  uv_close((uv_handle_t *)&lp->tcp, probe_closed);
}

static void local_probe_port(lc_runtime *rt, int port, void (*done)(void *arg, int r), void *arg) {
  struct sockaddr_storage addr;
  local_probe *lp;
  int r;
  if ((r = lc__forward_target_addr(&addr, "127.0.0.1", port)) < 0) {
    done(arg, r);
    return;
  }
  if ((lp = lc__calloc(1, sizeof(*lp))) == NULL) {
    done(arg, -ENOMEM);
    return;
  }
  lp->done = done;
  lp->arg = arg;
  lp->req.data = lp;
  lp->tcp.data = lp;
  uv_tcp_init(lc__engine_loop(rt->engine), &lp->tcp);
  if ((r = uv_tcp_connect(&lp->req, &lp->tcp, (struct sockaddr *)&addr, on_probe_connected)) < 0) {
    done(arg, r);
    uv_close((uv_handle_t *)&lp->tcp, probe_closed);
  }
}

const lc__backend_ops lc__local_ops = {
    .name = "local",
    .caps = LC__BACKEND_ON_THIS_MACHINE,
    .prepare = NULL,
    .connect = local_connect,
    .proc_start = local_proc_start,
    .proc_kick = local_proc_kick,
    .proc_abort = local_proc_abort,
    .fwd_accept = local_fwd_accept,
    .fwd_stop = local_fwd_stop,
    .close = local_close,
    .probe = local_probe_port,
};

int lc_runtime_new_local(lc_runtime **out, lc_engine *engine, const lc_runtime_options *opts) {
  return lc__runtime_make(out, &lc__local_ops, engine, "localhost", NULL, opts, 1);
}
