/*
 * relay.c - the local backend's forwards: a connection accepted on the forward's local listener
 * and the connection to its target, relayed stream to stream with back-pressure and half-close.
 * Engine thread only.
 */
#include "local_internal.h"

#include <stdlib.h>

#define RELAY_CHUNK (64 * 1024)
#define RELAY_HIGH (1024 * 1024) /* stop reading while this much waits to be written */

/* ---- stream to stream relay ----------------------------------------------------------------- */

typedef struct lc__stream_relay lc__stream_relay;
struct lc__stream_relay {
  lc__stream_relay *next, *prev; /* the forward's relays */
  lc_forward *f;
  uv_stream_t *s[2];
  int eof[2];  /* s[i] said EOF */
  int shut[2]; /* s[i] was shut down for writing */
  int closing;
  int open_handles;
  uv_shutdown_t shutdown_req[2];
};

typedef struct relay_write {
  uv_write_t req;
  lc__stream_relay *r;
  int to;
  char data[];
} relay_write;

static void relay_closed(uv_handle_t *h) {
  lc__stream_relay *r = h->data;
  free(h);
  if (--r->open_handles == 0)
    free(r);
}

static void relay_close(lc__stream_relay *r) {
  if (r->closing)
    return;
  r->closing = 1;
  if (r->f != NULL) {
    lc__forward_conn_drop(r->f);
    if (r->prev)
      r->prev->next = r->next;
    else
      r->f->relays = r->next;
    if (r->next)
      r->next->prev = r->prev;
    r->f = NULL;
  }
  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)r->s[i], relay_closed);
}

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  relay_write *w = malloc(sizeof(*w) + RELAY_CHUNK);
  (void)h;
  (void)suggested;
  buf->base = w ? w->data : NULL;
  buf->len = w ? RELAY_CHUNK : 0;
}

static void relay_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void relay_written(uv_write_t *req, int status) {
  relay_write *w = (relay_write *)req;
  lc__stream_relay *r = w->r;
  int to = w->to, from = !to;
  free(w);
  if (r->closing)
    return;
  if (status < 0) {
    relay_close(r);
    return;
  }
  if (!r->eof[from] && uv_stream_get_write_queue_size(r->s[to]) < RELAY_HIGH / 2)
    uv_read_start(r->s[from], relay_alloc, relay_read);
}

static void relay_shut(uv_shutdown_t *req, int status) {
  lc__stream_relay *r = req->data;
  (void)status;
  if (r->shut[0] && r->shut[1])
    relay_close(r);
}

static void relay_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  lc__stream_relay *r = st->data;
  int from = st == r->s[1], to = !from;
  relay_write *w = buf->base ? (relay_write *)(buf->base - offsetof(relay_write, data)) : NULL;
  if (n > 0 && !r->closing) {
    uv_buf_t b = uv_buf_init(buf->base, (unsigned int)n);
    w->r = r;
    w->to = to;
    if (uv_write(&w->req, r->s[to], &b, 1, relay_written) < 0) {
      free(w);
      relay_close(r);
      return;
    }
    if (uv_stream_get_write_queue_size(r->s[to]) >= RELAY_HIGH)
      uv_read_stop(st); /* back-pressure: resume when the writes drain */
    return;
  }
  free(w);
  if (n == 0 || r->closing)
    return;
  uv_read_stop(st);
  if (n != UV_EOF) {
    relay_close(r);
    return;
  }
  /* half-close: pass the EOF on, keep the other direction open */
  r->eof[from] = 1;
  r->shut[to] = 1;
  r->shutdown_req[to].data = r;
  if (uv_shutdown(&r->shutdown_req[to], r->s[to], relay_shut) < 0)
    relay_close(r);
}

void lc__local_relay_streams(lc_forward *f, uv_stream_t *a, uv_stream_t *b) {
  lc__stream_relay *r = lc__calloc(1, sizeof(*r));
  if (r == NULL) {
    lc__forward_conn_drop(f);
    uv_close((uv_handle_t *)a, (uv_close_cb)free);
    uv_close((uv_handle_t *)b, (uv_close_cb)free);
    return;
  }
  r->s[0] = a;
  r->s[1] = b;
  r->open_handles = 2;
  r->f = f;
  r->next = f->relays;
  if (f->relays)
    f->relays->prev = r;
  f->relays = r;
  a->data = b->data = r;
  uv_read_start(a, relay_alloc, relay_read);
  uv_read_start(b, relay_alloc, relay_read);
}

void lc__local_relays_close(lc_forward *f) {
  while (f->relays != NULL)
    relay_close(f->relays);
}
