/*
 * tunnel.c - channels relayed to local streams: the ProxyJump hop (a direct-tcpip channel and one
 * end of a socketpair), local forwards (direct-tcpip for each accepted connection) and remote
 * forwards (tcpip-forward on the host, forwarded-tcpip channels connected to the target here).
 *
 * The data path copies as little as it can: a stream read goes straight into the channel while
 * nothing waits before it (only the rest is queued in to_chan; a read that finds the write gate
 * closed first lets libssh send what it holds), and the host's data is written to the stream from
 * libssh's own buffer by the channel's data callback, up to RELAY_HOLD at a time (only what is
 * still there at the end of a wake-up, or what the stream does not take at once, is read out with
 * ssh_channel_read and written then or later).
 *
 * Back-pressure: a stream's data waits in to_chan (at most RELAY_BUF_MAX, then the stream is not
 * read) until the channel's window and the write gate let it through; what the stream does not
 * take stays in libssh's channel buffer, and the receive window is topped up (by a large
 * ssh_channel_read, the only call of libssh 0.10 that grows it past 1.28 MB) only while nothing
 * waits there, so a slow reader stops the host from sending. Memory per connection stays below
 * about RELAY_BUF_MAX + 2 * RELAY_READ.
 */
#include "ssh_internal.h"

#include "../../src/peer.h"
#include "../../src/ports_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libssh/server.h> /* ssh_send_keepalive */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_READ (2 * 1024 * 1024) /* also the receive window the host may fill */
#define RELAY_BUF_MAX (1024 * 1024)
#define RELAY_HOLD (256 * 1024) /* the host's data held back for one larger write */

static char relay_buf[RELAY_READ]; /* engine thread only */

/* ---- the relay ------------------------------------------------------------------------------ */

static void relay_free(lc__ssh_chan *k) {
  lc__buf_free(&k->to_chan);
  free(k->write_buf);
  free(k->target_host);
  free(k);
}

static void stream_closed(uv_handle_t *h) {
  lc__ssh_chan *k = h->data;
  free(h);
  relay_free(k);
}

/* Ends a relay now: the channel is closed and freed, the stream closed. */
/* Tells a probe's owner r, once. */
static void probe_tell(lc__ssh_chan *k, int r) {
  void (*done)(void *arg, int r) = k->probe_done;
  k->probe_done = NULL;
  if (done != NULL)
    done(k->probe_arg, r);
}

void lc__tunnel_end(lc__ssh_chan *k) {
  lc__ssh_conn *owner = k->owner;
  if (k->ending)
    return;
  k->ending = 1;
  probe_tell(k, LC_ECLOSED); /* the connection went before the host answered */
  if (k->fwd != NULL)        /* a forward's connection (counted since its accept) */
    lc__forward_conn_drop(k->fwd);
  lc__ssh_chan_unlink(k);
  lc__ssh_chan_free(k);
  if (owner != NULL && owner->relay == k) {
    owner->relay = NULL;
    if (owner->state == C_WAIT_JUMP)
      lc__ssh_fail(owner, LC_ECLOSED, "%s: the jump host %s closed the tunnel", owner->where,
                   k->c->rt->name);
  }
  k->owner = NULL;
  if (k->stream != NULL) {
    k->stream->data = k;
    uv_close((uv_handle_t *)k->stream, stream_closed);
  } else {
    relay_free(k);
  }
}

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  /* whole packets; larger reads cost more CPU per byte (docs/benchmarks.md, "Measurements quoted
   * by the code", M2) */
  static char rbuf[2 * PACKET_DATA];
  (void)h;
  (void)suggested;
  buf->base = rbuf;
  buf->len = sizeof(rbuf);
}

static void on_stream_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  lc__ssh_chan *k = st->data;
  if (n > 0) {
    size_t taken = 0;
    if (k->to_chan.len == k->to_chan_off && k->state == CH_RUNNING) {
      ssize_t w;
      /* the gate closed on the last read: one libssh poll round sends what it holds, so that this
       * read goes straight into the channel too instead of being copied to wait in to_chan */
      if (!lc__ssh_write_open(k->c))
        ssh_channel_poll(k->ch, 0);
      w = lc__ssh_chan_put(k, buf->base, (size_t)n); /* nothing queued: no copy */
      if (w < 0) {
        lc__tunnel_end(k);
        return;
      }
      taken = (size_t)w;
    }
    if (taken < (size_t)n) {
      if (k->to_chan_off > 0 && k->to_chan_off >= k->to_chan.len - k->to_chan_off) {
        /* compact only once the written part outweighs the rest: copying stays linear */
        lc__buf_consume(&k->to_chan, k->to_chan_off);
        k->to_chan_off = 0;
      }
      if (lc__buf_append(&k->to_chan, buf->base + taken, (size_t)n - taken) < 0) {
        lc__tunnel_end(k);
        return;
      }
      if (k->to_chan.len - k->to_chan_off >= RELAY_BUF_MAX)
        uv_read_stop(st);
    }
  } else if (n < 0) {
    uv_read_stop(st);
    if (n != UV_EOF) {
      lc__tunnel_end(k);
      return;
    }
    k->stream_eof = 1;
  }
  lc__ssh_conn *c = k->c;
  lc__tunnel_pump(k);
  lc__ssh_update_poll(c);
}

static void on_stream_written(uv_write_t *req, int status) {
  lc__ssh_chan *k = req->data;
  lc__ssh_conn *c = k->c;
  k->writing = 0;
  if (k->ending)
    return;
  if (status < 0) {
    lc__tunnel_end(k);
    return;
  }
  lc__tunnel_pump(k);
  lc__ssh_update_poll(c);
}

static void on_stream_shut(uv_shutdown_t *req, int status) {
  lc__ssh_chan *k = req->data;
  lc__ssh_conn *c = k->c;
  (void)status;
  k->shut_done = 1;
  if (k->ending)
    return;
  lc__tunnel_pump(k);
  lc__ssh_update_poll(c);
}

static void stream_start(lc__ssh_chan *k) {
  k->stream->data = k;
  uv_read_start(k->stream, relay_alloc, on_stream_read);
}

/* Moves data both ways as far as windows, the write gate and the stream allow. */
void lc__tunnel_pump(lc__ssh_chan *k) {
  lc__ssh_conn *c = k->c;
  int n, hold;

  if (k->ending || k->state != CH_RUNNING)
    return;
  if (k->rx_failed) {
    lc__tunnel_end(k);
    return;
  }
  /* data waits for the channel: one libssh poll round now (it sends what libssh holds if the
   * socket takes it, and takes the host's window adjusts) lets it go on in this same pass; waiting
   * for the next wake-up instead costs more CPU per byte sent (docs/benchmarks.md, "Measurements
   * quoted by the code", M3) */
  if (k->to_chan.len > k->to_chan_off)
    ssh_channel_poll(k->ch, 0);
  /* channel -> stream: what the data callback left in libssh's buffer, and the window top-up;
   * one write in flight at most. Data held back for a larger write (on_relay_data) stays while
   * this channel got some of the host's data in this wake-up and more is already in the socket:
   * the next wake-up comes at once */
  hold = c->in_more && k->rx_seq == c->drive_seq && k->rx_waiting > 0 && k->rx_waiting < RELAY_HOLD;
  while (!hold && !k->writing && !k->shut_sent &&
         (k->rx_waiting > 0 || k->rx_since_grow >= RELAY_READ / 2)) {
    uv_buf_t b;
    int w;
    k->rx_since_grow = 0; /* a read of RELAY_READ tops the window up to RELAY_READ */
    n = ssh_channel_read(k->ch, relay_buf, sizeof(relay_buf), 0);
    if (k->rx_failed) {
      lc__tunnel_end(k);
      return;
    }
    if (n <= 0) {
      k->rx_waiting = 0;
      break;
    }
    k->rx_waiting = (size_t)n < sizeof(relay_buf) ? 0 : 1;
    k->rx_since_grow += (size_t)n;
    b = uv_buf_init(relay_buf, (unsigned int)n);
    w = uv_try_write(k->stream, &b, 1);
    if (w == n)
      continue;
    if (w < 0 && w != UV_EAGAIN) {
      lc__tunnel_end(k);
      return;
    }
    if (w < 0)
      w = 0;
    free(k->write_buf);
    if ((k->write_buf = lc__malloc((size_t)(n - w))) == NULL) {
      lc__tunnel_end(k);
      return;
    }
    memcpy(k->write_buf, relay_buf + w, (size_t)(n - w));
    b = uv_buf_init(k->write_buf, (unsigned int)(n - w));
    k->write_req.data = k;
    if (uv_write(&k->write_req, k->stream, &b, 1, on_stream_written) < 0) {
      lc__tunnel_end(k);
      return;
    }
    k->writing = 1;
  }
  /* the host's EOF, once everything before it was written: half-close the stream */
  if (!k->writing && !k->shut_sent && (ssh_channel_is_eof(k->ch) || k->remote_closed) &&
      ssh_channel_poll(k->ch, 0) <= 0) {
    k->shut_sent = 1;
    k->shutdown_req.data = k;
    if (uv_shutdown(&k->shutdown_req, k->stream, on_stream_shut) < 0)
      k->shut_done = 1;
  }
  /* stream -> channel, within the window and the write gate */
  if (k->to_chan.len > k->to_chan_off) {
    ssize_t w =
        lc__ssh_chan_put(k, k->to_chan.data + k->to_chan_off, k->to_chan.len - k->to_chan_off);
    if (w < 0) {
      lc__tunnel_end(k);
      return;
    }
    k->to_chan_off += (size_t)w;
    if (k->to_chan_off == k->to_chan.len)
      k->to_chan.len = k->to_chan_off = 0;
  }
  if (!k->stream_eof && k->to_chan.len - k->to_chan_off < RELAY_BUF_MAX / 2)
    uv_read_start(k->stream, relay_alloc, on_stream_read);
  if (k->stream_eof && k->to_chan.len == k->to_chan_off && !k->chan_eof_sent &&
      lc__ssh_write_open(c)) {
    k->chan_eof_sent = 1;
    ssh_channel_send_eof(k->ch);
  }
  /* the host's CLOSE can come while its last data still waits here (libssh delays the close
   * until that is read): end only once everything it sent reached the stream */
  if (!k->writing && k->shut_done && (k->chan_eof_sent || k->remote_closed))
    lc__tunnel_end(k);
}

static void on_relay_close(ssh_session s, ssh_channel ch, void *userdata) {
  lc__ssh_chan *k = userdata;
  (void)s;
  (void)ch;
  k->remote_closed = 1;
}

/* The host's data, in libssh's channel buffer (the callback sees all of it each time a packet
 * adds some): written to the stream when it takes it; returns what was taken (the rest stays in
 * the buffer for lc__tunnel_pump). During a wake-up's poll rounds less than RELAY_HOLD is held
 * back: one write then carries eight packets, not one, and the reader wakes once for them
 * (faster downloads: docs/benchmarks.md, "Measurements quoted by the code", M4);
 * lc__tunnel_pump writes what is held at the end of the
 * wake-up unless more is already waiting in the socket. */
static int on_relay_data(ssh_session s, ssh_channel ch, void *data, uint32_t len, int is_stderr,
                         void *userdata) {
  lc__ssh_chan *k = userdata;
  uv_buf_t b;
  int w;
  (void)s;
  (void)ch;
  if (is_stderr)
    return (int)len; /* a forwarded connection has no stderr */
  k->rx_waiting = len;
  k->rx_seq = k->c->drive_seq;
  if (k->writing || k->shut_sent || k->rx_failed || k->ending || k->state != CH_RUNNING)
    return 0;
  if (k->c->in_rounds && len < RELAY_HOLD)
    return 0;
  b = uv_buf_init(data, len);
  w = uv_try_write(k->stream, &b, 1);
  if (w == UV_EAGAIN) {
    w = 0;
  } else if (w < 0) {
    k->rx_failed = 1; /* ended by lc__tunnel_pump, outside libssh */
    return 0;
  }
  k->rx_waiting = len - (uint32_t)w;
  k->rx_since_grow += (size_t)w;
  return w;
}

static void relay_running(lc__ssh_chan *k) {
  ssh_callbacks_init(&k->cb);
  k->cb.userdata = k;
  k->cb.channel_close_function = on_relay_close;
  k->cb.channel_data_function = on_relay_data;
  k->rx_since_grow = RELAY_READ; /* the first pump grows the window and reads what came early */
  ssh_set_channel_callbacks(k->ch, &k->cb);
  k->state = CH_RUNNING;
  stream_start(k);
  lc__tunnel_pump(k);
}

static lc__ssh_chan *relay_new(lc__ssh_conn *c, uv_stream_t *stream) {
  lc__ssh_chan *k = lc__calloc(1, sizeof(*k));
  if (k == NULL)
    return NULL;
  k->c = c;
  k->kind = K_RELAY;
  k->stream = stream;
  if (stream != NULL)
    stream->data = k;
  return k;
}

/* ---- direct-tcpip: ProxyJump hops and local forwards ---------------------------------------- */

/* The jump host's channel is open: run SSH over a socketpair whose other end is relayed. */
static void jump_opened(lc__ssh_chan *k) {
  lc__ssh_conn *owner = k->owner;
  uv_pipe_t *pipe;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    lc__ssh_fail(owner, -errno, "%s: socketpair: %s", owner->where, strerror(errno));
    return;
  }
  if ((pipe = lc__malloc(sizeof(*pipe))) == NULL) {
    close(sv[0]);
    close(sv[1]);
    lc__ssh_fail(owner, -ENOMEM, "%s: out of memory", owner->where);
    return;
  }
  uv_pipe_init(lc__engine_loop(k->c->rt->engine), pipe, 0);
  k->stream = (uv_stream_t *)pipe;
  pipe->data = k;
  if (uv_pipe_open(pipe, sv[1]) < 0) {
    close(sv[0]);
    close(sv[1]);
    lc__ssh_fail(owner, LC_EINTERNAL, "%s: cannot relay the jump channel", owner->where);
    return;
  }
  relay_running(k);
  lc__ssh_start_session(owner, sv[0]);
}

/* Drives the open of a direct-tcpip channel; then the relay. */
static void direct_drive(lc__ssh_chan *k) {
  int r =
      ssh_channel_open_forward(k->ch, k->target_host, k->target_port, "127.0.0.1", k->origin_port);
  if (r == SSH_AGAIN)
    return;
  if (k->probe_done != NULL) {
    /* libssh 0.10 keeps an open failure's reason only in the session's last error (no
     * per-channel code: ssh_packet_channel_open_fail sets the state OPEN_DENIED and the session
     * error), and other traffic of the session replaces that text before we read it. So a
     * failed open is "not listening yet", unless the text still says sshd prohibits the
     * forward (SSH2_OPEN_ADMINISTRATIVELY_PROHIBITED, 1): then the host's probes tell nothing.
     * A prohibition whose text was replaced is found by the caller: a listing that shows a
     * listener where the probe failed (readiness.c). */
    probe_tell(k, r == SSH_OK                                        ? 1
                  : strstr(lc__ssh_err(k->c), " error (1) ") != NULL ? LC_EREMOTE
                                                                     : 0);
    lc__tunnel_end(k);
    return;
  }
  if (r != SSH_OK) {
    lc__ssh_conn *owner = k->owner;
    if (owner != NULL) {
      k->owner = NULL;
      owner->relay = NULL;
      lc__ssh_fail(owner, -ECONNREFUSED, "%s: the jump host %s cannot reach %s:%d: %s",
                   owner->where, k->c->rt->name, k->target_host, k->target_port, lc__ssh_err(k->c));
    }
    lc__tunnel_end(k); /* a forward's client: only this connection closes */
    return;
  }
  if (k->owner != NULL)
    jump_opened(k);
  else
    relay_running(k);
}

int lc__tunnel_jump_open(lc__ssh_conn *j, lc__ssh_conn *owner) {
  lc__ssh_chan *k = relay_new(j, NULL);
  if (k == NULL || (k->ch = ssh_channel_new(j->s)) == NULL ||
      (k->target_host = lc__strdup(owner->host.hostname)) == NULL) {
    if (k != NULL) {
      if (k->ch)
        ssh_channel_free(k->ch);
      free(k);
    }
    return -ENOMEM;
  }
  k->state = CH_OPENING;
  k->owner = owner;
  k->target_port = owner->host.port;
  k->origin_port = 22;
  lc__ssh_chan_link(j, k);
  owner->relay = k;
  direct_drive(k);
  lc__ssh_update_poll(j);
  return 0;
}

void lc__tunnel_fwd_accept(lc_forward *f, uv_tcp_t *client) {
  lc__ssh_conn *c = f->rt->backend;
  struct sockaddr_storage peer;
  int len = sizeof(peer);
  lc__ssh_chan *k;
  if (c == NULL || c->state != C_READY || (k = relay_new(c, (uv_stream_t *)client)) == NULL) {
    lc__forward_conn_drop(f);
    uv_close((uv_handle_t *)client, (uv_close_cb)free);
    return;
  }
  if ((k->ch = ssh_channel_new(c->s)) == NULL || (k->target_host = lc__strdup(f->target)) == NULL) {
    k->stream = NULL;
    if (k->ch)
      ssh_channel_free(k->ch);
    free(k->target_host);
    free(k);
    lc__forward_conn_drop(f);
    uv_close((uv_handle_t *)client, (uv_close_cb)free);
    return;
  }
  uv_tcp_getpeername(client, (struct sockaddr *)&peer, &len);
  k->origin_port = ntohs(((struct sockaddr_in *)&peer)->sin_port);
  k->target_port = f->target_port;
  k->fwd = f;
  k->state = CH_OPENING;
  lc__ssh_chan_link(c, k);
  direct_drive(k);
  lc__ssh_update_poll(c);
}

/* A probe of 127.0.0.1:port on the host: a direct-tcpip channel (sshd connects to the port and
 * answers the open only then; no session channel, no process), closed as soon as it opened. */
void lc__tunnel_probe(lc_runtime *rt, int port, void (*done)(void *arg, int r), void *arg) {
  lc__ssh_conn *c = rt->backend;
  lc__ssh_chan *k;
  if (c == NULL || c->state != C_READY) {
    done(arg, LC_ECLOSED);
    return;
  }
  if ((k = relay_new(c, NULL)) == NULL || (k->ch = ssh_channel_new(c->s)) == NULL ||
      (k->target_host = lc__strdup("127.0.0.1")) == NULL) {
    if (k != NULL) {
      if (k->ch != NULL)
        ssh_channel_free(k->ch);
      free(k);
    }
    done(arg, -ENOMEM);
    return;
  }
  k->target_port = port;
  k->origin_port = 0;
  k->probe_done = done;
  k->probe_arg = arg;
  k->state = CH_OPENING;
  lc__ssh_chan_link(c, k);
  direct_drive(k);
  lc__ssh_update_poll(c);
}

/* ---- remote forwards ------------------------------------------------------------------------ */

/*
 * What sshd really bound: it may listen on more than we asked for (GatewayPorts yes puts our -R
 * forward on 0.0.0.0 and [::], open to the network, whatever bind address we send), and another
 * user may already listen on the port on an address sshd did not take (its bind of [::1] fails,
 * 127.0.0.1 still works: localhost then reaches the stranger). So a granted listen is not up
 * until a listing of the host's listeners (ss -e or /proc/net/tcp, with owners) showed the port
 * on loopback alone and for our uid alone; else it is cancelled at once and refused. One listing
 * covers every listen granted before it started: while more listens wait in the queue none
 * starts (their grants come one round trip apart), so a mesh of N ports on a host costs one
 * listing (an exec channel: one round trip plus the shell and ss, some 10-30 ms), not N.
 * Meanwhile the host's connections to the port are taken only from loopback (the originator
 * sshd reports), so nothing from the network gets through in the gap.
 */

static void req_free(lc__ssh_global_req *q) {
  free(q->bind);
  free(q->why);
  free(q);
}

static lc__ssh_global_req *req_push(lc__ssh_conn *c, lc_forward *f, const char *bind, int port) {
  lc__ssh_global_req *q = lc__calloc(1, sizeof(*q));
  if (q == NULL || (q->bind = lc__strdup(bind)) == NULL) {
    free(q);
    return NULL;
  }
  q->fwd = f;
  q->port = port;
  c->listens_queued += f != NULL;
  /* a mesh queues thousands of listens per host: no walk to the tail for each */
  if (c->reqs == NULL)
    c->reqs = q;
  else
    c->reqs_last->next = q;
  c->reqs_last = q;
  return q;
}

/* Takes the head off c's queue. */
static lc__ssh_global_req *req_pop(lc__ssh_conn *c) {
  lc__ssh_global_req *q = c->reqs;
  c->reqs = q->next;
  if (c->reqs == NULL)
    c->reqs_last = NULL;
  c->listens_queued -= q->fwd != NULL;
  q->next = NULL;
  return q;
}

/* A forward refused after the host granted its listen (and closed it again): its start fails,
 * or, back after a reconnect, it stays down and its on_state hears why (a second DOWN). */
static void refused_done(lc_forward *f, const lc__err *why) {
  if (f->call != NULL)
    lc__forward_ready(f, why);
  else
    lc__forward_set_refused(f, why->msg);
}

/* Closes f's listen on the host at once (cancel-tcpip-forward) and its connections; once the
 * host answered the cancel, f hears why. */
static void listen_refuse(lc__ssh_conn *c, lc_forward *f, int port, const lc__err *why) {
  lc__ssh_global_req *q = NULL;
  lc__err *keep = lc__malloc(sizeof(*keep));
  for (lc__ssh_chan *k = c->chans, *next; k != NULL; k = next) {
    next = k->next;
    if (k->kind == K_RELAY && k->fwd == f)
      lc__tunnel_end(k);
  }
  f->backend = NULL;
  if (keep == NULL || (q = req_push(c, NULL, f->bind, port)) == NULL) {
    free(keep);
    refused_done(f, why); /* out of memory: the lost connection will close the port */
    return;
  }
  *keep = *why;
  q->refused = f;
  q->why = keep;
}

/* Whether a listen waits in c's queue: its grant comes within a round trip, and the listing
 * that checks it can check the others too. */
static int listen_queued(const lc__ssh_conn *c) { return c->listens_queued > 0; }

/* Judges one granted listen by the listing (r, ps, msg: lc__listing_result): up, or refused. */
static void bound_judge(lc__ssh_conn *c, const lc__ssh_bound *b, int r, const lc__portscan *ps,
                        const char *msg) {
  const char *host = c->rt->name;
  const lc__listener *other = NULL;
  lc__err err = {0};
  char wide[400] = "", where[80];
  size_t n = 0;

  if (r < 0) {
    lc__err_set(&err, r,
                "%s: cannot tell which addresses sshd listens on for our -R forward of "
                "port %d, so it is closed again: %s",
                host, b->port, msg);
    listen_refuse(c, b->fwd, b->port, &err);
    return;
  }
  if ((other = lc__portscan_stranger(ps, b->port)) != NULL) {
    lc__listener_format(other, where, sizeof(where));
    lc__err_set(&err, -EADDRINUSE,
                "%s: port %d is also listened on by uid %ld (%s), not by our -R forward alone: "
                "another user took the port",
                host, b->port, other->uid, where);
    listen_refuse(c, b->fwd, b->port, &err);
    return;
  }
  for (size_t k = lc__portscan_first(ps, b->port); k < ps->nfound; k = lc__portscan_next(ps, k)) {
    const lc__listener *l = &ps->found[k];
    if (lc__listener_is_loopback(l))
      continue;
    lc__listener_format(l, where, sizeof(where));
    n += (size_t)snprintf(wide + n, n < sizeof(wide) ? sizeof(wide) - n : 0, "%s%s",
                          n > 0 ? " and " : "", where);
    if (n >= sizeof(wide))
      n = sizeof(wide);
  }
  if (n > 0) {
    b->fwd->refused_here = 1;
    lc__err_set(&err, LC_EFORWARD,
                "%s: sshd listens on %s for our -R forward, not on loopback alone: its "
                "GatewayPorts is yes; set GatewayPorts no (the default) or clientspecified for "
                "this user",
                host, wide);
    listen_refuse(c, b->fwd, b->port, &err);
    return;
  }
  if (ps->found_over > 0) {
    lc__err_set(&err, LC_EFORWARD,
                "%s: more listeners than could be checked around our -R forward of port %d, so "
                "it is closed again",
                host, b->port);
    listen_refuse(c, b->fwd, b->port, &err);
    return;
  }
  lc__forward_ready(b->fwd, NULL);
}

static void check_start(lc__ssh_conn *c);

/* The listing of c's host ended: each listen it covers is judged, then the next ones. */
static void check_done(lc__listing *x, void *arg) {
  lc__ssh_conn *c = arg;
  lc__ssh_bound *list = c->checking;
  const lc__portscan *ps = NULL;
  const char *msg = NULL;
  int r = lc__listing_result(x, &ps, &msg);
  c->check = NULL;
  if (c->state != C_READY || c->close_done != NULL) { /* lc__tunnel_lost tells them */
    lc__listing_drop(x);
    return;
  }
  c->checking = NULL;
  while (list != NULL) {
    lc__ssh_bound *b = list;
    list = b->next;
    if (b->fwd != NULL)
      bound_judge(c, b, r, ps, msg);
    free(b);
  }
  lc__listing_drop(x);
  check_start(c);
  lc__tunnel_requests(c); /* the cancels of refused listens */
  lc__ssh_update_poll(c);
}

/* Starts the listing that checks the listens granted so far, unless one runs or more listens are
 * on their way. */
static void check_start(lc__ssh_conn *c) {
  lc__ssh_bound *list;
  int *ports = NULL;
  size_t n = 0;
  int r;
  if (c->check != NULL || c->unchecked == NULL || c->state != C_READY || listen_queued(c))
    return;
  list = c->checking = c->unchecked;
  c->unchecked = NULL;
  for (lc__ssh_bound *b = list; b != NULL; b = b->next)
    n++;
  if ((ports = lc__calloc(n, sizeof(*ports))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
  } else {
    n = 0;
    for (lc__ssh_bound *b = list; b != NULL; b = b->next)
      ports[n++] = b->port;
    r = lc__listing_launch(&c->check, c->rt, ports, n, check_done, c);
  }
  free(ports);
  if (r < 0) {
    lc__err err = {0};
    c->checking = NULL;
    lc__err_set(&err, r, "%s", lc_error_last());
    while (list != NULL) {
      lc__ssh_bound *b = list;
      list = b->next;
      if (b->fwd != NULL)
        bound_judge(c, b, r, NULL, err.msg);
      free(b);
    }
  }
}

/* The host granted f's listen of port: checked before it counts as up. */
static void bound_add(lc__ssh_conn *c, lc_forward *f, int port) {
  lc__ssh_bound *b = lc__calloc(1, sizeof(*b));
  if (b == NULL) {
    lc__err err = {0};
    lc__err_set(&err, -ENOMEM, "%s: out of memory checking the -R forward of port %d", c->rt->name,
                port);
    listen_refuse(c, f, port, &err);
    return;
  }
  b->fwd = f;
  b->port = port;
  b->next = c->unchecked;
  c->unchecked = b;
}

/* Forgets f in a list of granted listens (f stopped). */
static void bound_forget(lc__ssh_bound *b, const lc_forward *f) {
  for (; b != NULL; b = b->next)
    if (b->fwd == f)
      b->fwd = NULL;
}

/*
 * After a push: sends the queue's head unless it is out already. Then its answer comes with a
 * wake-up of the connection (conn_drive asks libssh after it), or the keepalive timer looks for
 * it (on_keepalive); asking libssh now costs a poll() and finds nothing, and a mesh pushes
 * hundreds of listens per host at once (and their cancels at its stop).
 */
static void requests_behind(lc__ssh_conn *c) {
  if (!c->req_sent)
    lc__tunnel_requests(c);
}

/*
 * The bind address of the call that asks after a sent keepalive's answer. libssh 0.10's
 * ssh_send_keepalive sends keepalive@openssh.com with want-reply and always returns SSH_OK, so
 * its answer is read through another global-request call: while a request is pending, any of
 * them only asks after its answer (SSH_AGAIN until it came; then SSH_OK or, for sshd's FAILURE,
 * SSH_ERROR with SSH_REQUEST_DENIED). Should the answer have come inside ssh_send_keepalive
 * already, the call sends a real cancel-tcpip-forward instead, of an address no forward of ours
 * has: sshd refuses it, and its answer proves the host alive just as well.
 *
 * Why this is sound (libssh 0.10's global_request keeps one state per session, NONE or PENDING
 * or an answer; a call made while it is not NONE sends nothing and only waits for that answer):
 *  - no real forward is ever cancelled: sshd cancels the forward whose listen address and port
 *    both match, and ".invalid" (RFC 6761) never resolves, so no forward can have been granted
 *    on this bind;
 *  - the queue is never confused: on_keepalive queues a keepalive only when the queue is empty,
 *    and every request, keepalive included, is sent only from the head of the queue, so a
 *    keepalive is never outstanding beside a tcpip-forward or cancel (which would make libssh
 *    take the keepalive's answer for the forward's, or drop the forward unsent);
 *  - a forward queued behind a keepalive waits for the keepalive's answer (or for the keepalive
 *    limit, after which the connection is given up and the forward retried on the next one).
 */
#define KEEPALIVE_PROBE_BIND "lc-keepalive.invalid"

/* Queues a keepalive@openssh.com request behind the others (ssh.c's keepalive timer). */
void lc__tunnel_keepalive(lc__ssh_conn *c) {
  lc__ssh_global_req *q = req_push(c, NULL, KEEPALIVE_PROBE_BIND, 0);
  if (q == NULL)
    return; /* out of memory: the next tick tries again */
  q->keepalive = 1;
  requests_behind(c);
}

/* What the request waiting for its answer is, for the message of a host that never answers. */
const char *lc__tunnel_req_what(const lc__ssh_conn *c, char *buf, size_t size) {
  const lc__ssh_global_req *q = c->reqs;
  if (q == NULL || q->keepalive)
    snprintf(buf, size, "a keepalive request");
  else if (q->fwd != NULL)
    snprintf(buf, size, "the -R forward request for port %d", q->port);
  else
    snprintf(buf, size, "the cancel of the -R forward of port %d", q->port);
  return buf;
}

/* One step of the keepalive at the head of the queue: SSH_AGAIN until its answer came. */
static int keepalive_step(lc__ssh_conn *c) {
  if (!c->req_sent) {
    ssh_send_keepalive(c->s);
    if (ssh_get_status(c->s) & (SSH_CLOSED | SSH_CLOSED_ERROR))
      return SSH_ERROR;
    c->req_sent = 1;
    c->req_sent_at = uv_now(lc__engine_loop(c->rt->engine));
  }
  return ssh_channel_cancel_forward(c->s, KEEPALIVE_PROBE_BIND, 0);
}

/*
 * Sends the global requests one at a time (only one may be outstanding per session): listens,
 * cancels and keepalives. Each answer is awaited for at most the keepalive limit (on_keepalive
 * in ssh.c ends the connection then: the one slot would stay taken).
 */
void lc__tunnel_requests(lc__ssh_conn *c) {
  while (c->reqs != NULL && c->state == C_READY) {
    lc__ssh_global_req *q = c->reqs;
    int r;
    if (q->keepalive) {
      r = keepalive_step(c);
    } else {
      if (!c->req_sent)
        c->req_sent_at = uv_now(lc__engine_loop(c->rt->engine));
      r = q->fwd != NULL ? ssh_channel_listen_forward(c->s, q->bind, q->port, NULL)
                         : ssh_channel_cancel_forward(c->s, q->bind, q->port);
    }
    if (r == SSH_AGAIN) {
      c->req_sent = 1;
      return;
    }
    /* an answer: the host is alive now (it may have been read inside this call, where the poll
     * never saw it: on_keepalive counts from here) */
    c->heard_at = uv_now(lc__engine_loop(c->rt->engine));
    c->req_sent = 0;
    req_pop(c);
    if (q->fwd != NULL && r == SSH_OK) {
      q->fwd->backend = c; /* listening on the host; up once checked */
      q->fwd->retry_ms = 0;
      bound_add(c, q->fwd, q->port);
    } else if (q->fwd == NULL && q->refused != NULL) {
      refused_done(q->refused, q->why); /* the unsafe listen is closed now */
    } else if (q->fwd != NULL && q->fwd->call != NULL) {
      lc__err err = {0};
      lc__err_set(&err, LC_EFORWARD, "%s refused to listen on %s port %d: %s", c->rt->name, q->bind,
                  q->port, lc__ssh_err(c));
      lc__forward_ready(q->fwd, &err);
    } else if (q->fwd != NULL) {
      /* after a reconnect the old session may still hold the port: try again, backing off */
      q->next = c->failed_reqs;
      c->failed_reqs = q;
      q->fwd->retry_ms = q->fwd->retry_ms ? q->fwd->retry_ms * 2 : 250;
      if (q->fwd->retry_ms > 10000)
        q->fwd->retry_ms = 10000;
      lc__ssh_retry_in(c, q->fwd->retry_ms);
      continue;
    }
    req_free(q);
  }
  check_start(c);
}

void lc__tunnel_fwd_start(lc_forward *f) {
  lc__ssh_conn *c = f->rt->backend;
  lc__err err = {0};
  if (c == NULL || c->state != C_READY) {
    lc__err_set(&err, LC_ECLOSED, "%s: not connected", f->rt->name);
    lc__forward_ready(f, &err);
    return;
  }
  if (req_push(c, f, f->bind, f->port) == NULL) {
    lc__err_set(&err, -ENOMEM, "out of memory");
    lc__forward_ready(f, &err);
    return;
  }
  requests_behind(c);
  lc__ssh_update_poll(c);
}

static void on_target_connected(uv_connect_t *req, int status) {
  lc__ssh_chan *k = req->data;
  lc__ssh_conn *c = k->c;
  if (k->ending)
    return;
  if (status < 0) { /* the target refused: only this connection closes */
    lc__tunnel_end(k);
    lc__ssh_update_poll(c);
    return;
  }
  uv_tcp_nodelay((uv_tcp_t *)k->stream, 1);
  relay_running(k);
  lc__ssh_update_poll(c);
}

/* Whether sshd says a forwarded connection came from loopback ("127.0.0.1", "::1"). */
static int from_loopback(const char *originator) {
  lc__listener l = {.port = 1};
  if (originator == NULL)
    return 0;
  if (inet_pton(AF_INET, originator, l.addr) != 1) {
    if (inet_pton(AF_INET6, originator, l.addr) != 1)
      return 0;
    l.v6 = 1;
  }
  return lc__listener_is_loopback(&l);
}

/* A connection forwarded from originator:oport to port, refused: told through the engine's
 * on_notice (rate-limited with the peer check's refusals). */
static void refused_origin(lc__ssh_conn *c, int port, const char *originator, int oport) {
  char msg[1024], more[96];
  int v6 = originator != NULL && strchr(originator, ':') != NULL;
  if (!lc__peer_notice_allowed(c->rt->engine, more, sizeof(more)))
    return;
  snprintf(msg, sizeof(msg),
           "%s: refused a connection to our -R forward of port %d from %s%s%s:%d: only the "
           "host's loopback may connect (sshd listens wider than asked: GatewayPorts?)%s",
           c->rt->name, port, v6 ? "[" : "", originator != NULL ? originator : "?", v6 ? "]" : "",
           oport, more);
  lc__engine_notice(c->rt->engine, msg);
}

/* Takes the connections the host forwards to us, and connects each to its forward's target. Only
 * those from the host's loopback: our listens are loopback's alone (checked once granted), and
 * one from elsewhere means sshd listened wider (GatewayPorts) and the check has not closed it yet,
 * or a process there connected from another of the host's addresses; it is refused and told.
 */
void lc__tunnel_accept_forwarded(lc__ssh_conn *c) {
  ssh_channel ch;
  int dport = 0, oport = 0;
  char *origin = NULL;
  while (c->state == C_READY &&
         (ch = ssh_channel_open_forward_port(c->s, 0, &dport, &origin, &oport)) != NULL) {
    lc_forward *f = c->rt->forwards;
    struct sockaddr_storage addr;
    uv_tcp_t *tcp = NULL;
    lc__ssh_chan *k = NULL;
    int local = from_loopback(origin), taken = 0, tport = 0;
    if (!local)
      refused_origin(c, dport, origin, oport);
    while (f != NULL && !(f->kind == LC_FORWARD_REMOTE && f->port == dport && f->backend == c))
      f = f->next;
    /* a mesh relay's carrier: the address it came from says which port (meshrelay.c) */
    if (local && f != NULL)
      tport = f->route != NULL ? f->route(f, origin) : f->target_port;
    ssh_string_free_char(origin);
    origin = NULL;
    if (!local || f == NULL || tport == 0 || lc__forward_target_addr(&addr, f->target, tport) < 0 ||
        (tcp = lc__malloc(sizeof(*tcp))) == NULL || !(taken = lc__forward_conn_take(f)) ||
        (k = relay_new(c, NULL)) == NULL) {
      if (taken) /* past the cap, the channel closes at once: sshd closes the host's client */
        lc__forward_conn_drop(f);
      free(tcp);
      ssh_channel_close(ch);
      ssh_channel_free(ch);
      continue;
    }
    uv_tcp_init(lc__engine_loop(c->rt->engine), tcp);
    k->stream = (uv_stream_t *)tcp;
    tcp->data = k;
    k->ch = ch;
    k->fwd = f;
    k->state = CH_CONNECTING;
    lc__ssh_chan_link(c, k);
    k->connect_req.data = k;
    if (uv_tcp_connect(&k->connect_req, tcp, (struct sockaddr *)&addr, on_target_connected) < 0)
      lc__tunnel_end(k);
  }
}

/* Drops f's requests from a list; one already sent keeps its place, answered for nobody. Returns
 * the list's last request (NULL when it is empty). */
static lc__ssh_global_req *drop_reqs(lc__ssh_global_req **q, lc_forward *f, int head_sent,
                                     size_t *listens) {
  lc__ssh_global_req *last = NULL;
  for (int first = 1; *q != NULL; first = 0) {
    if ((*q)->refused == f) /* its cancel still goes; nobody hears of it */
      (*q)->refused = NULL;
    if ((*q)->fwd != f) {
      last = *q;
      q = &(*q)->next;
    } else if (first && head_sent) {
      (*q)->fwd = NULL;
      if (listens != NULL)
        --*listens;
      last = *q;
      q = &(*q)->next;
    } else {
      lc__ssh_global_req *dead = *q;
      *q = dead->next;
      if (listens != NULL)
        --*listens;
      req_free(dead);
    }
  }
  return last;
}

void lc__tunnel_fwd_stop(lc_forward *f) {
  lc__ssh_conn *c = f->rt != NULL ? f->rt->backend : NULL;
  if (c == NULL)
    return;
  for (lc__ssh_chan *k = c->chans, *next; k != NULL; k = next) {
    next = k->next;
    if (k->kind == K_RELAY && k->fwd == f)
      lc__tunnel_end(k);
  }
  /* A listen the host granted on c (f->backend == c) has no request left in c's queues: its own
   * was taken off when granted, and a refusal (listen_refuse) or a lost connection clears
   * f->backend before f is queued again. So the queues are walked only for the others: the stop of
   * each forward of a mesh would otherwise walk the cancels queued by the stops before it
   * (quadratic in the listens per host). */
  if (f->backend != c) {
    c->reqs_last = drop_reqs(&c->reqs, f, c->req_sent, &c->listens_queued);
    drop_reqs(&c->failed_reqs, f, 0, NULL);
  }
  bound_forget(c->unchecked, f); /* granted, not checked yet: short lists, empty once up */
  bound_forget(c->checking, f);
  if (f->kind == LC_FORWARD_REMOTE && f->backend == c && c->state == C_READY) {
    req_push(c, NULL, f->bind, f->port); /* cancel-tcpip-forward */
    requests_behind(c);
    lc__ssh_update_poll(c);
  }
  f->backend = NULL;
}

/* ---- connection lost, connection back ------------------------------------------------------- */

/* The connection is gone: forwards go down (their connections end with the channels). */
void lc__tunnel_lost(lc__ssh_conn *c, const lc__err *err) {
  while (c->reqs != NULL || c->failed_reqs != NULL) {
    lc__ssh_global_req *q = c->reqs ? c->reqs : c->failed_reqs;
    if (q == c->reqs)
      req_pop(c);
    else
      c->failed_reqs = q->next;
    if (q->fwd != NULL && q->fwd->call != NULL)
      lc__forward_ready(q->fwd, err);
    else if (q->refused != NULL) /* the port closed with the connection */
      refused_done(q->refused, q->why);
    req_free(q);
  }
  c->req_sent = 0;
  lc__listing_drop(c->check);
  c->check = NULL;
  for (lc__ssh_bound **l = &c->unchecked; l != NULL; l = l == &c->unchecked ? &c->checking : NULL)
    while (*l != NULL) {
      lc__ssh_bound *b = *l;
      *l = b->next;
      if (b->fwd != NULL && b->fwd->call != NULL)
        lc__forward_ready(b->fwd, err);
      free(b);
    }
  for (lc_forward *f = c->rt->forwards; f != NULL; f = f->next) {
    if (f->backend == c)
      f->backend = NULL;
    lc__forward_set_up(f, 0, err->msg);
  }
}

/* Back after a reconnect: local forwards are up again, remote ones ask the host to listen. */
void lc__tunnel_restore(lc__ssh_conn *c) {
  for (lc_forward *f = c->rt->forwards; f != NULL; f = f->next) {
    if (f->kind == LC_FORWARD_LOCAL)
      lc__forward_set_up(f, 1, "reconnected");
    else
      req_push(c, f, f->bind, f->port); /* checked again once granted */
  }
  lc__tunnel_retry(c);
}

/* Remote listens that failed after a reconnect go back into the queue. */
void lc__tunnel_retry(lc__ssh_conn *c) {
  while (c->failed_reqs != NULL) {
    lc__ssh_global_req *q = c->failed_reqs;
    c->failed_reqs = q->next;
    if (q->fwd != NULL)
      req_push(c, q->fwd, q->bind, q->port);
    req_free(q);
  }
  lc__tunnel_requests(c);
}

/* Relays of one connection: open, connect, pump. */
void lc__tunnel_pump_any(lc__ssh_chan *k) {
  if (k->state == CH_OPENING)
    direct_drive(k);
  else if (k->state == CH_RUNNING)
    lc__tunnel_pump(k);
}
