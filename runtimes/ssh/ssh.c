/*
 * ssh.c - the runtime backend for SSH hosts: one non-blocking libssh session per host, driven by
 * uv_poll on the engine's loop, with every exec a channel of that session.
 *
 * Rules from shared/notes/libssh-0.10-on-libuv.md that shape this file:
 *  - we make the TCP connection ourselves (so getaddrinfo never blocks the loop, and ProxyJump is a
 *    channel of the jump host's session relayed through a socketpair) and hand libssh the fd;
 *  - libssh's socket stays in blocking mode; libssh reads only from inside ssh_event_dopoll;
 *  - after every wake-up every channel is drained, since libssh buffers decrypted data;
 *  - channel writes only while SSH_WRITE_PENDING is clear (the write gate), never past the window;
 *    small writes into exec channels (heartbeats, stops) pass a closed gate, a bounded amount
 *    (gate_allows): libssh sets it after every send, so during an output flood it is rarely clear;
 *  - the poll watches a close-on-exec dup of the fd, stopped before libssh frees the session;
 *  - a channel write never gives libssh more than the socket takes at once: libssh flushes with
 *    a blocking send(), and one host that stops reading must not stop the loop (lc__ssh_chan_put);
 *  - keepalive is a keepalive@openssh.com request that sshd must answer, in the one queue of
 *    global requests (tunnel.c);
 *  - sshd allows 10 session channels per connection (MaxSessions), so a host with more processes
 *    gets more connections: up to MAX_CONNECTIONS, opened MAX_CONNECTING at a time (sshd's
 *    MaxStartups drops a burst of unauthenticated ones). What does not fit waits in a queue for a
 *    free channel; a process under a lifeline (it runs until stopped: a worker) that does not fit
 *    fails at once, naming the host, the count and MaxSessions, rather than waiting for a channel
 *    that never frees.
 */
#include "ssh_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DOPOLL_ROUNDS 64
#define MAX_SESSIONS 10
/* how long after we free a session channel sshd may still count it (a generous bound: it reaps
 * it on its next loop pass) */
#define SESSION_REAP_MS 1000
/* Connections to one host, the primary included: 160 session channels at sshd's default
 * MaxSessions, for 8 GPUs x a few helper processes per worker plus listings and transfers. */
#define MAX_CONNECTIONS 16
#define MAX_CONNECTING 2 /* extra connections being made to one host at once */

static void conn_drive(lc__ssh_conn *c);
static void chans_pump(lc__ssh_conn *c);
static void proxy_note(const lc__ssh_conn *c, char *out, size_t size);
static void on_attempt(uv_timer_t *t);
static void extras_next(lc__ssh_conn *pc);
static void on_poll(uv_poll_t *h, int status, int events);
static void conn_begin(lc__ssh_conn *c);
static void hop_unwait(lc__ssh_conn *c);

/* ---- helpers -------------------------------------------------------------------------------- */

const char *lc__ssh_err(lc__ssh_conn *c) {
  const char *e = c->s ? ssh_get_error(c->s) : NULL;
  return e && *e ? e : "unknown libssh error";
}

static void timer_stop(lc__ssh_conn *c) {
  if (c->timers_inited) {
    uv_timer_stop(&c->timer);
    uv_timer_stop(&c->retry);
  }
}

static void handle_closed(uv_handle_t *h) {
  lc__ssh_conn *c = h->data;
  if (--c->open_handles == 0 && c->close_done != NULL) {
    lc_runtime *rt = c->rt;
    void (*done)(lc_runtime *) = c->close_done;
    int primary = c->primary == NULL;
    lc__ssh_host_clear(&c->host);
    free(c->locked_keys);
    ssh_key_free(c->auth_key);
    free(c);
    if (primary) {
      rt->backend = NULL;
      done(rt);
    }
  }
}

/* ---- channels ------------------------------------------------------------------------------- */

void lc__ssh_chan_link(lc__ssh_conn *c, lc__ssh_chan *k) {
  k->next = c->chans;
  if (c->chans)
    c->chans->prev = k;
  c->chans = k;
}

void lc__ssh_chan_unlink(lc__ssh_chan *k) {
  lc__ssh_conn *c = k->c;
  if (k->kind == K_EXEC)
    c->execs--;
  if (k->prev)
    k->prev->next = k->next;
  else
    c->chans = k->next;
  if (k->next)
    k->next->prev = k->prev;
  k->next = k->prev = NULL;
}

void lc__ssh_chan_free(lc__ssh_chan *k) {
  if (k->ch != NULL) {
    /* libssh keeps a closed channel until the host confirms: it must not call back into k */
    if (k->cb.size != 0)
      ssh_remove_channel_callbacks(k->ch, &k->cb);
    if (k->kind == K_EXEC && k->state != CH_QUEUED)
      k->c->sessions--;
    if (k->kind == K_EXEC && k->state >= CH_EXEC) { /* one sshd granted */
      lc__ssh_conn *c = k->c;
      c->freed_at[c->freed_next++ % LC__SSH_FREED_RING] = uv_now(lc__engine_loop(c->rt->engine));
    }
    if (k->c->s != NULL && ssh_channel_is_open(k->ch))
      ssh_channel_close(k->ch);
    ssh_channel_free(k->ch);
    k->ch = NULL;
  }
}

/*
 * Ends an exec channel: reports p (with err, or NULL when it ran). The channel itself stays, in
 * CH_CLOSING, until the host confirms the close, since sshd counts it against MaxSessions until
 * then; force frees it at once (the connection is going away).
 */
static void exec_end(lc__ssh_chan *k, const lc__err *err, int force) {
  lc_process *p = k->p;
  k->p = NULL;
  if (p != NULL) {
    p->backend = NULL;
    lc__proc_closed(p, err);
  }
  if (!force && k->ch != NULL && k->state >= CH_EXEC && !k->remote_closed) {
    if (k->state != CH_CLOSING) {
      k->state = CH_CLOSING;
      ssh_channel_close(k->ch);
    }
    return;
  }
  lc__ssh_chan_unlink(k);
  lc__ssh_chan_free(k);
  free(k);
}

static void chan_end(lc__ssh_chan *k, const lc__err *err) {
  if (k->kind == K_EXEC)
    exec_end(k, err, 1);
  else
    lc__tunnel_end(k);
}

static void on_exit_status(ssh_session s, ssh_channel ch, int status, void *userdata) {
  lc__ssh_chan *k = userdata;
  (void)s;
  (void)ch;
  if (k->p != NULL)
    lc__proc_exit(k->p, status, 0);
}

/*
 * Output arrives through the data callback, as libssh processes each packet: once the host's
 * CLOSE is processed, libssh refuses to read what is still buffered, so reading after the fact
 * could lose the last bytes of a command's output.
 */
static int on_exec_data(ssh_session s, ssh_channel ch, void *data, uint32_t len, int is_stderr,
                        void *userdata) {
  lc__ssh_chan *k = userdata;
  (void)s;
  (void)ch;
  if (k->p != NULL)
    lc__proc_data(k->p, is_stderr ? LC_STDERR : LC_STDOUT, data, len);
  return (int)len;
}

static void on_channel_close(ssh_session s, ssh_channel ch, void *userdata) {
  lc__ssh_chan *k = userdata;
  (void)s;
  (void)ch;
  k->remote_closed = 1;
}

static void on_exit_signal(ssh_session s, ssh_channel ch, const char *signal, int core,
                           const char *errmsg, const char *lang, void *userdata) {
  lc__ssh_chan *k = userdata;
  int sig = lc__signal_from_name(signal);
  (void)s;
  (void)ch;
  (void)core;
  (void)errmsg;
  (void)lang;
  if (k->p != NULL)
    lc__proc_exit(k->p, -1, sig ? sig : 255);
}

/* The write gate: libssh's output buffer has no limit and is flushed with a blocking send(), so
 * channels take more output only while nothing of it waits unsent. */
int lc__ssh_write_open(const lc__ssh_conn *c) {
  return !(ssh_get_poll_flags(c->s) & SSH_WRITE_PENDING);
}

/*
 * How many bytes of channel data the session's socket takes now without a send() that waits:
 * libssh flushes its output with a blocking send() of all of it, so a write larger than the
 * free send buffer stops the engine (every host) until this host reads again, for as long as
 * a wedged sshd pleases. Free = SO_SNDBUF less what the socket holds (SIOCOUTQ); a quarter of it
 * stays free for the kernel's per-buffer overhead and libssh's own small packets (window
 * adjusts, keepalives). With the write gate open libssh holds nothing unsent itself. A socket
 * that cannot say is not limited (as before).
 */
static size_t sock_room(const lc__ssh_conn *c) {
  int sndbuf = 0, queued = 0;
  socklen_t len = sizeof(sndbuf);
  if (c->poll_fd < 0 || getsockopt(c->poll_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) < 0 ||
      ioctl(c->poll_fd, SIOCOUTQ, &queued) < 0)
    return SIZE_MAX;
  if (queued >= sndbuf)
    return 0;
  return (size_t)(sndbuf - queued) - (size_t)(sndbuf - queued) / 4;
}

/*
 * How many bytes an exec channel (k) may write now although the write gate is closed: libssh
 * asks for POLLOUT again after every send, also with nothing left to write (socket.c), so while
 * a host's output streams in, each read answered by a window adjust, the gate is closed at
 * nearly every turn; a lifeline's heartbeat that waited for it starved until the lifeline ended
 * its command (seen: 1 GB read at 12 MB/s ended after 80 s, the default limit). With the gate
 * closed libssh only buffers (its write_wontblock is 0 after a send) and sends at the next
 * POLLOUT, with the rest. So small writes (heartbeats, stops, lines of input, an EOF) pass: at
 * most GATE_BYPASS_MAX bytes until the gate is seen open again, and only while the socket's free
 * buffer holds all of them. Bulk data (the relays) still waits for the gate. 0: none now.
 */
#define GATE_BYPASS_MAX 4096

/* Whether the write gate is open; when it is, libssh has sent what went past it while closed,
 * and the count of those bytes starts again. */
static int gate_seen_open(lc__ssh_conn *c) {
  if (!lc__ssh_write_open(c))
    return 0;
  c->gate_bypassed = 0;
  return 1;
}

static size_t gate_allows(lc__ssh_chan *k) {
  lc__ssh_conn *c = k->c;
  size_t room;
  if (gate_seen_open(c))
    return SIZE_MAX;
  if (k->kind != K_EXEC || c->gate_bypassed >= GATE_BYPASS_MAX ||
      (room = sock_room(c)) <= c->gate_bypassed)
    return 0;
  room -= c->gate_bypassed;
  return GATE_BYPASS_MAX - c->gate_bypassed < room ? GATE_BYPASS_MAX - c->gate_bypassed : room;
}

/* Writes into k's channel as far as its window, the write gate (gate_allows) and the socket's
 * free buffer allow: the bytes taken, or -1 when the channel failed. A write cut short by the
 * socket sets sock_full, so that the poll waits for the socket to drain (lc__ssh_update_poll).
 * Nothing more once the host closed the channel: a write past the closed gate leaves bytes in
 * libssh, whose flush then reads and processes what came in (our callbacks run inside this
 * write), the host's CLOSE included, and a write after it would fail the channel instead of
 * letting its end be reported. */
ssize_t lc__ssh_chan_put(lc__ssh_chan *k, const char *data, size_t len) {
  lc__ssh_conn *c = k->c;
  size_t done = 0, allowed;
  while (done < len && !k->remote_closed && (allowed = gate_allows(k)) > 0) {
    size_t n = len - done < WRITE_CHUNK ? len - done : WRITE_CHUNK;
    uint32_t win = ssh_channel_window_size(k->ch);
    size_t room;
    int w;
    if (win == 0)
      break;
    if (n > win)
      n = win;
    if (allowed != SIZE_MAX) { /* past a closed gate: buffered by libssh, counted */
      if (n > allowed)
        n = allowed;
      if ((w = ssh_channel_write(k->ch, data + done, (uint32_t)n)) < 0)
        return -1;
      if (w == 0)
        break;
      c->gate_bypassed += (size_t)w;
      done += (size_t)w;
      continue;
    }
    if ((room = sock_room(c)) < n) {
      /* whole packets where the room allows: a small packet costs as much CPU as a full one */
      size_t whole = room / PACKET_DATA * PACKET_DATA;
      n = whole > 0 ? whole : room;
      if (n == 0) {
        c->sock_full = 1;
        break;
      }
    }
    if ((w = ssh_channel_write(k->ch, data + done, (uint32_t)n)) < 0)
      return -1;
    if (w == 0)
      break;
    done += (size_t)w;
  }
  return (ssize_t)done;
}

/*
 * Writes what p has for stdin while the window and the write gate allow, EXEC_PUT_MAX at a time:
 * libssh builds each packet whole in buffers of its session that it keeps at their largest size
 * (up to 64 KiB), so one 71 KB write of a cluster's context left ~2 x 32 KB on every connection
 * for good (heaptrack of a 64-host start: 4.2 MB of 13.4 MB). Those buffers grow to a power of
 * two above the packet (data, 9 bytes of channel header, 5 of length and padding length, up to
 * 255 of padding and 64 of MAC): 4,096 bytes of data made them 8 KiB each, 3,584 keeps them at
 * 4 KiB. A command's stdin is scripts and lines, never bulk data. Packets are what costs: each is
 * a send() (and, on a test host, the host's side of TCP in it), so the script's shared head (the
 * lifeline, 3.9 KB) and the start of the script go in one packet (lc__proc_in_gather): a
 * worker's 5.6 KB in two packets, not three.
 */
#define EXEC_PUT_MAX 3584
/* A channel EOF on the wire: header, channel number, padding and MAC (well under this). */
#define EOF_PACKET 128
static int exec_write(lc__ssh_chan *k) {
  lc_process *p = k->p;
  char packet[EXEC_PUT_MAX];
  const char *data;
  size_t n;
  if (k->remote_closed) /* the process is gone: a late heartbeat or stop has no reader */
    return 0;
  while ((n = lc__proc_in_next(p, packet, sizeof(packet), &data)) > 0) {
    ssize_t w = lc__ssh_chan_put(k, data, n);
    if (w < 0)
      return -1;
    lc__proc_in_consume(p, (size_t)w);
    if ((size_t)w < n)
      return 0;
  }
  if (k->remote_closed) /* closed while we wrote (lc__ssh_chan_put) */
    return 0;
  if (lc__proc_in_eof_due(p) && (n = gate_allows(k)) >= EOF_PACKET) {
    p->in_eof_sent = 1;
    /* SSH_AGAIN: the EOF is queued (libssh marked it sent) but its flush did not finish, as past
     * a closed gate when the socket does not poll writable at once: not a failure (CI saw a file
     * transfer fail so, "channel failed" with a stale libssh message) */
    if (ssh_channel_send_eof(k->ch) == SSH_ERROR)
      return -1;
    if (n != SIZE_MAX) /* past a closed gate */
      k->c->gate_bypassed += EOF_PACKET;
  }
  return 0;
}

/* Nothing left to read: the host sent EOF and both buffers are empty. */
static int exec_drained(lc__ssh_chan *k) {
  return ssh_channel_is_eof(k->ch) && ssh_channel_poll(k->ch, 0) <= 0 &&
         ssh_channel_poll(k->ch, 1) <= 0;
}

static void rebalance(lc__ssh_conn *c);

static void on_retry(uv_timer_t *t) {
  lc__ssh_conn *c = t->data;
  if (c->state == C_READY) {
    rebalance(c); /* a cap learned just now: what waits beyond it goes elsewhere */
    lc__tunnel_retry(c);
    chans_pump(c);
    lc__ssh_update_poll(c);
  }
}

/*
 * The session channels of c that sshd may have held when it refused k's open: those open but k,
 * and those freed since shortly before k's open was sent. sshd reaps a closed session only after
 * the loop pass that read our close, so an open sent right after a close (a short command's
 * end, a listing's, a file write's) can find it still counted; taking that refusal for the
 * host's MaxSessions would learn a cap one too low (issue 16: MaxSessions 2 learned as 1).
 */
static int sessions_held(lc__ssh_conn *c, const lc__ssh_chan *k) {
  uint64_t since = k->open_sent > SESSION_REAP_MS ? k->open_sent - SESSION_REAP_MS : 0;
  int n = c->sessions - 1;
  for (int i = 0; i < LC__SSH_FREED_RING; i++)
    n += c->freed_at[i] != 0 && c->freed_at[i] >= since;
  /* sshd reaped them before it read anything sent after its refusal came: the next refusal
   * counts only what is open then, and the cap comes down to the host's own */
  memset(c->freed_at, 0, sizeof(c->freed_at));
  return n;
}

/* Moves an exec channel along: open, exec, then write, read and notice its end. */
static void exec_pump(lc__ssh_chan *k) {
  lc__ssh_conn *c = k->c;
  lc__err err = {0};
  int r, held;

  switch (k->state) {
  case CH_QUEUED:
    if (c->state != C_READY || c->sessions >= c->session_cap)
      return;
    if ((k->ch = ssh_channel_new(c->s)) == NULL) {
      lc__err_set(&err, LC_ESSH, "%s: cannot create a channel: %s", c->rt->name, lc__ssh_err(c));
      exec_end(k, &err, 0);
      return;
    }
    c->sessions++;
    k->open_sent = uv_now(lc__engine_loop(c->rt->engine));
    k->state = CH_OPENING;
    /* fall through */
  case CH_OPENING:
    if ((r = ssh_channel_open_session(k->ch)) == SSH_AGAIN)
      return;
    if (r != SSH_OK && (held = sessions_held(c, k)) > 0) {
      /* The host is at its MaxSessions: queue again with at most as many at once as it may have
       * held, and try again shortly. */
      lc__ssh_conn *pc = c->primary != NULL ? c->primary : c;
      lc__ssh_chan_free(k);
      k->state = CH_QUEUED;
      c->session_cap = held > pc->peak ? held : pc->peak;
      if (c->session_cap < 1)
        c->session_cap = 1;
      /* the same sshd: the primary's cap is what new connections start with */
      if (c->primary != NULL && c->primary->session_cap > c->session_cap)
        c->primary->session_cap = c->session_cap;
      uv_timer_start(&c->retry, on_retry, 50, 0);
      return;
    }
    if (r != SSH_OK) {
      lc__err_set(&err, LC_ESSH, "%s: the host refused a session channel: %s", c->rt->name,
                  lc__ssh_err(c));
      exec_end(k, &err, 0);
      return;
    }
    {
      lc__ssh_conn *pc = c->primary != NULL ? c->primary : c;
      int open = 1;
      for (const lc__ssh_chan *o = c->chans; o != NULL; o = o->next)
        open += o != k && o->kind == K_EXEC && o->state >= CH_EXEC;
      if (open > pc->peak)
        pc->peak = open;
    }
    ssh_callbacks_init(&k->cb);
    k->cb.userdata = k;
    k->cb.channel_exit_status_function = on_exit_status;
    k->cb.channel_exit_signal_function = on_exit_signal;
    k->cb.channel_close_function = on_channel_close;
    k->cb.channel_data_function = on_exec_data;
    ssh_set_channel_callbacks(k->ch, &k->cb);
    k->state = CH_EXEC;
    /* fall through */
  case CH_EXEC:
    if ((r = ssh_channel_request_exec(k->ch, k->p->command)) == SSH_AGAIN)
      return;
    if (r != SSH_OK) {
      lc__err_set(&err, LC_ESSH, "%s: the host refused to run the command: %s", c->rt->name,
                  lc__ssh_err(c));
      exec_end(k, &err, 0);
      return;
    }
    k->state = CH_RUNNING;
    /* fall through */
  case CH_RUNNING:
    /* the output came through on_exec_data as conn_drive processed the packets: nothing waits
     * in libssh's channel buffers to be read (a read would only cost a poll() per stream) */
    if (k->p != NULL && exec_write(k) < 0) {
      lc__err_set(&err, LC_ESSH, "%s: channel failed: %s", c->rt->name, lc__ssh_err(c));
      exec_end(k, &err, 0);
      return;
    }
    if ((k->remote_closed || (k->p != NULL && k->p->exited)) && exec_drained(k))
      exec_end(k, NULL, 0);
    else if (k->remote_closed && !ssh_channel_is_eof(k->ch))
      exec_end(k, NULL, 0);
    return;
  case CH_CONNECTING: /* relays only */
    return;
  case CH_CLOSING: /* what still arrives, on_exec_data discards */
    if (k->remote_closed)
      exec_end(k, NULL, 1);
    return;
  }
}

/* Whether a channel has data waiting to be written into it. */
static int writers_waiting(const lc__ssh_conn *c) {
  for (const lc__ssh_chan *k = c->chans; k != NULL; k = k->next) {
    if (k->kind == K_RELAY && k->state == CH_RUNNING && k->to_chan.len > k->to_chan_off)
      return 1;
    if (k->kind == K_EXEC && k->state == CH_RUNNING && k->p != NULL && lc__proc_in_pending(k->p))
      return 1;
  }
  return 0;
}

static void chans_pump(lc__ssh_conn *c) {
  lc__ssh_chan *k = c->chans, *next;
  for (; k != NULL; k = next) {
    next = k->next;
    if (k->kind == K_EXEC)
      exec_pump(k);
    else
      lc__tunnel_pump_any(k);
  }
}

/* ---- the connection ------------------------------------------------------------------------- */

static void poll_stop(lc__ssh_conn *c) {
  if (c->poll_inited) {
    c->poll_inited = 0;
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, handle_closed);
    close(c->poll_fd);
    c->poll_fd = -1;
  }
}

static void tcp_poll_stop(lc__ssh_conn *c) {
  if (c->tcp_poll_fd >= 0) {
    uv_poll_stop(&c->tcp_poll);
    uv_close((uv_handle_t *)&c->tcp_poll, handle_closed);
    close(c->tcp_poll_fd);
    c->tcp_poll_fd = -1;
  }
}

static void proxy_proc_closed(uv_handle_t *h) { free(h); }

/*
 * Ends the ProxyCommand (SIGTERM, as ssh does) and closes its handles. A process handle closed
 * before its exit is never waited for (a zombie until this program ends), so a running one is
 * let go instead: on_proxy_exit closes it once it was reaped (the engine's last turn waits for
 * that, and SIGKILLs its group if it takes too long: engine.c, LINGER_MS).
 */
static void proxy_stop(lc__ssh_conn *c) {
  if (!c->proxy_inited)
    return;
  c->proxy_inited = 0;
  if (c->proxy_running) {
    c->proxy->data = NULL;
    if (kill(-c->proxy->pid, SIGTERM) < 0) /* its whole group: the shell and what it started */
      uv_process_kill(c->proxy, SIGTERM);
  } else {
    uv_close((uv_handle_t *)c->proxy, proxy_proc_closed);
  }
  c->proxy = NULL;
  uv_close((uv_handle_t *)&c->proxy_err, handle_closed);
}

static void session_free(lc__ssh_conn *c) {
  tcp_poll_stop(c);
  poll_stop(c);
  proxy_stop(c);
  if (c->auth_key != NULL) {
    ssh_key_free(c->auth_key);
    c->auth_key = NULL;
  }
  if (c->ev != NULL) {
    if (c->s != NULL)
      ssh_event_remove_session(c->ev, c->s);
    ssh_event_free(c->ev);
    c->ev = NULL;
  }
  if (c->s != NULL) {
    struct stat st;
    ssh_free(c->s);
    c->s = NULL;
    c->sock = -1;
    /* Seen: after ssh_disconnect and ssh_free the socket given with SSH_OPTIONS_FD is still open
     * (CLOSE-WAIT, or ESTABLISHED with the host's session alive: a ProxyJump hop stayed logged
     * in after its last user was freed). Closed here if it is still that socket (same inode: an
     * fd number reused by another thread would be another file). */
    if (c->lib_fd >= 0 && fstat(c->lib_fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
        (unsigned long)st.st_ino == c->lib_ino)
      close(c->lib_fd);
    c->lib_fd = -1;
  }
  if (c->sock >= 0) {
    close(c->sock);
    c->sock = -1;
  }
}

static void on_reconnect(uv_timer_t *t) {
  lc__ssh_conn *c = t->data;
  lc_runtime *rt = c->rt;
  if (c->state != C_DEAD || c->close_done != NULL ||
      (rt->forwards == NULL && !lc__runtime_keeps_connected(rt) && c->hop_waiters == NULL))
    return;
  conn_begin(c); /* behind a hop that is down: waits for it, and brings it back (hop_wait) */
}

/* Schedules the next attempt to bring a lost connection back, backing off up to 30 s. */
void lc__ssh_reconnect_later(lc__ssh_conn *c) {
  c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : 500;
  if (c->backoff_ms > 30000)
    c->backoff_ms = 30000;
  uv_timer_start(&c->reconnect, on_reconnect, c->backoff_ms, 0);
}

/*
 * Every channel ends with err; the runtime hears it is down. A runtime with forwards, or one a
 * cluster keeps (lc__runtime_keep_connected), tries to come back (its forwards go down meanwhile
 * and return with it).
 */
static void conn_lost(lc__ssh_conn *c, const lc__err *err) {
  c->state = C_DEAD;
  hop_unwait(c);
  if (c->primary == NULL)
    lc__runtime_lost(c->rt, err); /* before the waiters wake: they may ask */
  timer_stop(c);
  if (c->primary != NULL && c->primary->state == C_READY) {
    /* an extra connection that failed: what still waits for a channel goes back to the primary */
    for (lc__ssh_chan *k = c->chans, *next; k != NULL; k = next) {
      next = k->next;
      if (k->kind == K_EXEC && k->state == CH_QUEUED) {
        lc__ssh_chan_unlink(k);
        k->c = c->primary;
        c->primary->execs++;
        lc__ssh_chan_link(c->primary, k);
      }
    }
    lc__ssh_retry_in(c->primary, 50); /* more than it may open go on elsewhere (rebalance) */
  }
  while (c->chans != NULL)
    chan_end(c->chans, err);
  if (c->relay != NULL) {
    lc__ssh_chan *k = c->relay;
    c->relay = NULL;
    k->owner = NULL;
    lc__tunnel_end(k);
  }
  if (c->primary == NULL)
    lc__tunnel_lost(c, err);
  session_free(c);
  if (c->primary != NULL)
    extras_next(c->primary); /* the next waiting extra connection's turn */
  if (c->primary == NULL && c->close_done == NULL &&
      (c->rt->forwards != NULL || lc__runtime_keeps_connected(c->rt)) && c->timers_inited)
    lc__ssh_reconnect_later(c);
}

void lc__ssh_fail(lc__ssh_conn *c, int code, const char *fmt, ...) {
  va_list ap;
  lc__err err = {.code = code};
  int was_connecting = c->state != C_READY && c->state != C_DEAD;
  if (c->state == C_DEAD)
    return;
  va_start(ap, fmt);
  vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
  va_end(ap);
  if (c->ai_list != NULL) {
    uv_freeaddrinfo(c->ai_list);
    c->ai_list = c->ai_next = NULL;
  }
  conn_lost(c, &err);
  if (was_connecting && c->primary == NULL)
    lc__runtime_connected(c->rt, &err);
}

/*
 * The keepalive timer, every sixth of the keepalive limit: once the host has been silent for a
 * sixth (nothing came from it: OpenSSH's ServerAliveInterval), a keepalive@openssh.com request
 * goes into the global-request queue when it is empty (sshd answers it, FAILURE or SUCCESS:
 * either proves the host alive; a host that is stopped or wedged still has its kernel
 * acknowledge TCP, so only an answer shows it works). A host that spoke within the sixth is
 * alive without asking: during a start every host talks all the time, and a keepalive is a
 * packet each way, with its padding's random bytes and encryption (perf, 256-host start: 5% of
 * the engine thread). A request sent (keepalive or forward) and unanswered for the whole limit
 * means the host is lost: a host that goes silent is still lost within the limit and a sixth.
 * The timer is set again for the sixth after the host last spoke, or for that deadline when it
 * comes sooner.
 */
static unsigned long keepalives; /* queued so far, every engine's (lc__ssh_keepalives_sent) */

unsigned long lc__ssh_keepalives_sent(void) {
  return __atomic_load_n(&keepalives, __ATOMIC_RELAXED);
}

static void on_keepalive(uv_timer_t *t) {
  lc__ssh_conn *c = t->data;
  uint64_t limit = (uint64_t)c->rt->opts.keepalive_timeout_ms;
  uint64_t every = limit / 6 > 0 ? limit / 6 : 1, now, next;
  if (c->state != C_READY || c->s == NULL)
    return;
  now = uv_now(lc__engine_loop(c->rt->engine));
  if (c->req_sent && now - c->req_sent_at >= every) {
    /* A request unanswered for a while: look before judging. Its answer may have been read
     * already by another libssh call on this session (a channel's close or EOF flushes, and
     * reads what comes meanwhile), and then no more bytes come to wake the poll: the host's
     * last listen of a mesh waited so until the keepalive limit ended the connection. Or it
     * waits unread in the socket, since timers run before the loop reads its sockets and a
     * busy machine makes the loop late: the host is not to blame for that either. */
    conn_drive(c);
    if (c->state != C_READY || c->s == NULL)
      return;
    now = uv_now(lc__engine_loop(c->rt->engine));
  }
  if (c->req_sent && now - c->req_sent_at >= limit) {
    char what[120];
    lc__ssh_fail(c, LC_ECLOSED,
                 "%s: no answer to %s within %.1f s (the keepalive limit): the host "
                 "does not respond, connection lost",
                 c->where, lc__tunnel_req_what(c, what, sizeof(what)), (double)limit / 1000.0);
    return;
  }
  next = every;
  if (c->reqs == NULL && now - c->heard_at < every) {
    next = c->heard_at + every - now; /* heard within the sixth: nothing to ask yet */
  } else if (c->reqs == NULL) {
    __atomic_add_fetch(&keepalives, 1, __ATOMIC_RELAXED);
    lc__tunnel_keepalive(c);
    lc__ssh_update_poll(c);
    if (c->state != C_READY)
      return;
  }
  if (c->req_sent && c->req_sent_at + limit - now < next)
    next = c->req_sent_at + limit - now;
  uv_timer_start(&c->timer, on_keepalive, next > 0 ? next : 1, 0);
}

void lc__ssh_retry_in(lc__ssh_conn *c, unsigned long ms) {
  if (c->timers_inited && !uv_is_active((uv_handle_t *)&c->retry))
    uv_timer_start(&c->retry, on_retry, ms, 0);
}

static void on_connect_timeout(uv_timer_t *t) {
  lc__ssh_conn *c = t->data;
  lc__ssh_fail(c, -ETIMEDOUT, "%s: %s timed out after %.1f s", c->where, c->phase,
               c->rt->opts.connect_timeout_ms / 1000.0);
}

void lc__ssh_update_poll(lc__ssh_conn *c) {
  int mask;
  if (!c->poll_inited || c->s == NULL)
    return;
  mask = UV_READABLE;
  if (!gate_seen_open(c) || c->sock_full)
    mask |= UV_WRITABLE;
  if (mask != c->poll_mask) {
    c->poll_mask = mask;
    uv_poll_start(&c->poll, mask, on_poll);
  }
}

static void on_poll(uv_poll_t *h, int status, int events) {
  lc__ssh_conn *c = h->data;
  if (status == 0 && (events & UV_READABLE))
    c->heard_at = uv_now(lc__engine_loop(c->rt->engine));
  if (status < 0 && c->state != C_READY) {
    if (c->host.proxy_command != NULL) {
      char note[400];
      proxy_note(c, note, sizeof(note));
      lc__ssh_fail(c, LC_ECLOSED, "%s: %s through the ProxyCommand '%s' failed: %s%s", c->where,
                   c->phase, c->host.proxy_command, uv_strerror(status), note);
    } else {
      lc__ssh_fail(c, LC_ECLOSED, "%s: %s failed: %s", c->where, c->phase, uv_strerror(status));
    }
    return;
  }
  conn_drive(c);
}

static int refuse_passphrase(const char *prompt, char *buf, size_t len, int echo, int verify,
                             void *userdata) {
  (void)prompt;
  (void)buf;
  (void)len;
  (void)echo;
  (void)verify;
  if (userdata != NULL)
    *(int *)userdata = 1;
  return -1;
}

/* Notes identity files that are encrypted, so a failed login can say why. */
static void find_locked_keys(lc__ssh_conn *c) {
  const char *home = getenv("HOME");
  char defaults[3][4096];
  const char *files[64];
  size_t n = 0;
  lc__buf out = {0};

  for (size_t i = 0; i < c->host.identity_count && n < LC_ARRAY_SIZE(files); i++)
    files[n++] = c->host.identity_files[i];
  if (home != NULL && !c->host.identities_only) {
    snprintf(defaults[0], sizeof(defaults[0]), "%s/.ssh/id_ed25519", home);
    snprintf(defaults[1], sizeof(defaults[1]), "%s/.ssh/id_ecdsa", home);
    snprintf(defaults[2], sizeof(defaults[2]), "%s/.ssh/id_rsa", home);
    for (int i = 0; i < 3 && n < LC_ARRAY_SIZE(files); i++)
      files[n++] = defaults[i];
  }
  for (size_t i = 0; i < n; i++) {
    ssh_key key = NULL;
    int asked = 0;
    if (access(files[i], R_OK) != 0)
      continue;
    if (ssh_pki_import_privkey_file(files[i], NULL, refuse_passphrase, &asked, &key) == SSH_OK)
      ssh_key_free(key);
    else if (asked)
      lc__buf_printf(&out, "%s%s", out.len ? ", " : "", files[i]);
  }
  free(c->locked_keys);
  c->locked_keys = out.data;
}

/*
 * Looks the host key up in every known_hosts file, as ssh: the user's files (UserKnownHostsFile,
 * default ~/.ssh/known_hosts and known_hosts2) and the global ones (GlobalKnownHostsFile, default
 * /etc/ssh/ssh_known_hosts and ssh_known_hosts2), under HostKeyAlias when set (then without the
 * port, as ssh). A key found in any file is known; a host found with another key is CHANGED.
 * libssh reads one user and one global file, so each file is given to it in turn.
 */
static enum ssh_known_hosts_e known_state(lc__ssh_conn *c, lc__buf *files) {
  lc__ssh_host *h = &c->host;
  enum ssh_known_hosts_e best = SSH_KNOWN_HOSTS_NOT_FOUND, st;
  int errors = 0, n = 0;
  for (size_t i = 0; i < h->known_hosts_count + h->global_known_hosts_count; i++) {
    const char *f = i < h->known_hosts_count ? h->known_hosts_files[i]
                                             : h->global_known_hosts[i - h->known_hosts_count];
    lc__buf_printf(files, "%s%s", files->len ? ", " : "", f);
    n++;
    ssh_options_set(c->s, SSH_OPTIONS_KNOWNHOSTS, f);
    ssh_options_set(c->s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
    st = ssh_session_is_known_server(c->s);
    if (st == SSH_KNOWN_HOSTS_OK) {
      best = st;
      break;
    }
    if (st == SSH_KNOWN_HOSTS_CHANGED)
      best = st;
    else if (st == SSH_KNOWN_HOSTS_OTHER && best != SSH_KNOWN_HOSTS_CHANGED)
      best = st;
    else if (st == SSH_KNOWN_HOSTS_ERROR)
      errors++;
  }
  if (n > 0 && errors == n)
    best = SSH_KNOWN_HOSTS_ERROR;
  return best;
}

/* The name and port known_hosts entries are looked up and written under: HostKeyAlias (no
 * port), else the host name and port. */
static void known_name_set(lc__ssh_conn *c, int alias) {
  int port = alias && c->host.hostkey_alias ? 22 : c->host.port;
  ssh_options_set(c->s, SSH_OPTIONS_HOST,
                  alias && c->host.hostkey_alias ? c->host.hostkey_alias : c->host.hostname);
  ssh_options_set(c->s, SSH_OPTIONS_PORT, &port);
}

static int check_host_key(lc__ssh_conn *c) {
  ssh_key key = NULL;
  unsigned char *hash = NULL;
  size_t hlen = 0;
  char *fp = NULL;
  const char *kh = c->host.known_hosts_count ? c->host.known_hosts_files[0] : c->host.known_hosts;
  const char *type = "key";
  const char *name = c->host.hostkey_alias ? c->host.hostkey_alias : c->host.hostname;
  lc_hostkey_policy pol = c->rt->opts.hostkey_policy;
  lc__buf files = {0};
  int accept_new, r = 0;
  enum ssh_known_hosts_e state;

  if (pol == LC_HOSTKEY_DEFAULT)
    accept_new = c->host.strict == LC__STRICT_ACCEPT_NEW || c->host.strict == LC__STRICT_NO;
  else
    accept_new = pol == LC_HOSTKEY_ACCEPT_NEW;
  if (ssh_get_server_publickey(c->s, &key) == SSH_OK) {
    type = ssh_key_type_to_char(ssh_key_type(key));
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == SSH_OK)
      fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
  }
  known_name_set(c, 1);
  state = known_state(c, &files);
  switch (state) {
  case SSH_KNOWN_HOSTS_OK:
    break;
  case SSH_KNOWN_HOSTS_CHANGED:
  case SSH_KNOWN_HOSTS_OTHER:
    lc__ssh_fail(c, LC_EHOSTKEYCHANGED,
                 "%s: the host key has CHANGED (it is now %s %s, the known_hosts files %s have "
                 "another for %s); refusing to connect. If the change is expected, remove the old "
                 "key with: ssh-keygen -R %s%s%s -f %s",
                 c->where, type, fp ? fp : "?", files.data ? files.data : kh, name,
                 c->host.port != 22 && !c->host.hostkey_alias ? "[" : "", name,
                 c->host.port != 22 && !c->host.hostkey_alias ? "]:PORT" : "", kh);
    r = -1;
    break;
  case SSH_KNOWN_HOSTS_NOT_FOUND:
  case SSH_KNOWN_HOSTS_UNKNOWN:
    if (accept_new) {
      ssh_options_set(c->s, SSH_OPTIONS_KNOWNHOSTS, kh);
      if (ssh_session_update_known_hosts(c->s) != SSH_OK && c->host.strict != LC__STRICT_NO) {
        lc__ssh_fail(c, LC_EHOSTKEYUNKNOWN, "%s: cannot add the host key to %s: %s", c->where, kh,
                     lc__ssh_err(c));
        r = -1;
      }
      break;
    }
    lc__ssh_fail(c, LC_EHOSTKEYUNKNOWN,
                 "%s: the host key is not known (%s %s for %s) and is not in %s. Check the "
                 "fingerprint, then accept it: ssh-keyscan -p %d %s >> %s, or set "
                 "'StrictHostKeyChecking accept-new' for this host in the ssh config, or pass "
                 "--accept-new-host-keys",
                 c->where, type, fp ? fp : "?", name, files.data ? files.data : kh, c->host.port,
                 c->host.hostname, kh);
    r = -1;
    break;
  case SSH_KNOWN_HOSTS_ERROR:
  default:
    lc__ssh_fail(c, LC_EHOSTKEYUNKNOWN, "%s: cannot check the host key against %s: %s", c->where,
                 files.data ? files.data : kh, lc__ssh_err(c));
    r = -1;
    break;
  }
  if (c->s != NULL)
    known_name_set(c, 0);
  lc__buf_free(&files);
  ssh_string_free_char(fp);
  ssh_clean_pubkey_hash(&hash);
  ssh_key_free(key);
  return r;
}

/* The agent socket this host uses: IdentityAgent (a path, or none), else $SSH_AUTH_SOCK; NULL
 * when there is none. */
static const char *agent_path(const lc__ssh_conn *c) {
  const char *a = c->host.identity_agent;
  if (a == NULL)
    a = getenv("SSH_AUTH_SOCK");
  if (a == NULL || *a == '\0' || strcmp(a, "none") == 0)
    return NULL;
  return a;
}

/* The i-th identity file to offer: the config's, else ssh's defaults; NULL past the end. */
static const char *identity_at(const lc__ssh_conn *c, size_t i, char *buf, size_t size) {
  const lc__ssh_host *h = &c->host;
  const char *home = getenv("HOME");
  if (h->identity_count > 0)
    return i < h->identity_count ? h->identity_files[i] : NULL;
  if (i >= h->identity_raw_count)
    return NULL;
  if (strncmp(h->identity_raw[i], "~/", 2) == 0 && home != NULL) {
    snprintf(buf, size, "%s/%s", home, h->identity_raw[i] + 2);
    return buf;
  }
  return h->identity_raw[i];
}

/* Loads identity i with its certificate (CertificateFile, or FILE-cert.pub) when one matches;
 * NULL when it cannot be read or is encrypted. */
static ssh_key identity_load(lc__ssh_conn *c, const char *file) {
  ssh_key key = NULL, cert = NULL;
  char certpath[4300];
  int asked = 0;
  if (access(file, R_OK) != 0 ||
      ssh_pki_import_privkey_file(file, NULL, refuse_passphrase, &asked, &key) != SSH_OK)
    return NULL;
  for (size_t i = 0; i <= c->host.certificate_count; i++) {
    const char *cf = i < c->host.certificate_count ? c->host.certificate_files[i] : certpath;
    if (i == c->host.certificate_count &&
        snprintf(certpath, sizeof(certpath), "%s-cert.pub", file) >= (int)sizeof(certpath))
      break;
    if (access(cf, R_OK) != 0 || ssh_pki_import_cert_file(cf, &cert) != SSH_OK)
      continue;
    if (ssh_pki_copy_cert_to_privkey(cert, key) == SSH_OK) {
      ssh_key_free(cert);
      break;
    }
    ssh_key_free(cert);
    cert = NULL;
  }
  return key;
}

enum { AUTH_AGENT_FIRST, AUTH_FILES, AUTH_AGENT_LAST, AUTH_DONE };

/* libssh refuses to offer a key whose algorithm PubkeyAcceptedAlgorithms leaves out, and says so
 * in its error: the first such key is kept for the message when authentication fails. */
static void note_algo_skipped(lc__ssh_conn *c, const char *file) {
  const char *err = ssh_get_error(c->s), *alg = strstr(err, "key algorithm '"), *end;
  if (c->algo_skipped[0] != '\0' || file == NULL || alg == NULL ||
      strstr(err, "PUBLICKEY_ACCEPTED_TYPES") == NULL)
    return;
  alg += strlen("key algorithm '");
  if ((end = strchr(alg, '\'')) != NULL)
    snprintf(c->algo_skipped, sizeof(c->algo_skipped), "%.*s key %s", (int)(end - alg), alg, file);
}

/*
 * One step of public key authentication, as ssh orders it: the agent's keys first, then each
 * identity file (with its certificate). With IdentitiesOnly yes the agent's keys are not offered
 * (libssh 0.10 cannot offer only those of the agent's keys that match the identity files), except
 * as the last resort when an identity file is encrypted, so that a key loaded into the agent
 * still works. Returns an SSH_AUTH_* code; SSH_AUTH_DENIED when nothing is left to offer.
 */
static int auth_step(lc__ssh_conn *c) {
  char buf[4200];
  const char *file;
  int r;
  for (;;) {
    switch (c->auth_step) {
    case AUTH_AGENT_FIRST:
    case AUTH_AGENT_LAST:
      if (!c->auth_agent_ok || (c->auth_step == AUTH_AGENT_FIRST && c->host.identities_only) ||
          (c->auth_step == AUTH_AGENT_LAST &&
           (!c->host.identities_only || c->locked_keys == NULL))) {
        c->auth_step++;
        continue;
      }
      r = ssh_userauth_agent(c->s, NULL);
      if (r == SSH_AUTH_AGAIN || r == SSH_AUTH_SUCCESS)
        return r;
      if (ssh_get_status(c->s) & (SSH_CLOSED | SSH_CLOSED_ERROR))
        return SSH_AUTH_ERROR;
      c->auth_step++;
      continue;
    case AUTH_FILES:
      if (c->auth_key == NULL) {
        if ((file = identity_at(c, c->auth_idx, buf, sizeof(buf))) == NULL) {
          c->auth_step++;
          continue;
        }
        if ((c->auth_key = identity_load(c, file)) == NULL) {
          c->auth_idx++;
          continue;
        }
      }
      r = ssh_userauth_publickey(c->s, NULL, c->auth_key);
      if (r == SSH_AUTH_AGAIN || r == SSH_AUTH_SUCCESS || r == SSH_AUTH_ERROR)
        return r;
      note_algo_skipped(c, identity_at(c, c->auth_idx, buf, sizeof(buf)));
      ssh_key_free(c->auth_key);
      c->auth_key = NULL;
      c->auth_idx++;
      continue;
    default:
      return SSH_AUTH_DENIED;
    }
  }
}

static void conn_ready(lc__ssh_conn *c) {
  uint64_t every = (uint64_t)c->rt->opts.keepalive_timeout_ms / 6;
  c->state = C_READY;
  c->phase = "connection";
  timer_stop(c);
  if ((c->ev = ssh_event_new()) == NULL || ssh_event_add_session(c->ev, c->s) != SSH_OK) {
    lc__ssh_fail(c, -ENOMEM, "%s: cannot watch the session", c->where);
    return;
  }
  c->req_sent = 0;
  c->sock_full = 0;
  uv_timer_start(&c->timer, on_keepalive, every ? every : 1, 0);
  c->backoff_ms = 0;
  if (c->primary != NULL) { /* an extra connection: its queued processes start now */
    extras_next(c->primary);
    chans_pump(c);
    lc__ssh_update_poll(c);
    return;
  }
  lc__runtime_connected(c->rt, NULL);
  if (c->state == C_READY)
    lc__tunnel_restore(c);
}

static void conn_drive(lc__ssh_conn *c) {
  int r;
  switch (c->state) {
  case C_HANDSHAKE:
    if ((r = ssh_connect(c->s)) == SSH_AGAIN)
      break;
    if (r != SSH_OK) {
      const char *err = lc__ssh_err(c);
      const char *hint = strstr(err, "no match for method encryption") != NULL
                             ? " (Ciphers in the ssh config sets ours)"
                         : strstr(err, "no match for method kex") != NULL
                             ? " (KexAlgorithms in the ssh config sets ours)"
                         : strstr(err, "no match for method server host key") != NULL
                             ? " (HostKeyAlgorithms in the ssh config sets ours)"
                         /* sshd ends the connection without a word on no common algorithm;
                          * when that lands before its offer was read (a reset drops it), libssh
                          * says only "Socket error" */
                         : strstr(err, "Socket error") != NULL
                             ? " (the host closed the connection during the key exchange: sshd "
                               "does so when it has no cipher, key exchange or host key algorithm "
                               "in common with ours, which Ciphers, KexAlgorithms and "
                               "HostKeyAlgorithms in the ssh config set, or when it drops "
                               "connections beyond its MaxStartups)"
                             : "";
      if (c->host.proxy_command != NULL) {
        char note[400];
        proxy_note(c, note, sizeof(note));
        lc__ssh_fail(c, LC_ESSH, "%s: SSH handshake through the ProxyCommand '%s' failed: %s%s",
                     c->where, c->host.proxy_command, err, note);
      } else {
        lc__ssh_fail(c, LC_ESSH, "%s: SSH handshake failed: %s%s", c->where, err, hint);
      }
      return;
    }
    if (check_host_key(c) < 0)
      return;
    find_locked_keys(c);
    c->state = C_AUTH;
    c->phase = "authentication";
    /* fall through */
  case C_AUTH:
    r = auth_step(c);
    if (r == SSH_AUTH_AGAIN && (ssh_get_status(c->s) & (SSH_CLOSED | SSH_CLOSED_ERROR))) {
      lc__ssh_fail(c, LC_EAUTH,
                   "%s: the host closed the connection during authentication as %s (too many "
                   "keys offered for its MaxAuthTries? IdentitiesOnly yes offers only the "
                   "IdentityFile keys): %s",
                   c->where, c->host.user ? c->host.user : "the local user", lc__ssh_err(c));
      return;
    }
    if (r == SSH_AUTH_AGAIN)
      break;
    if (r == SSH_AUTH_SUCCESS) {
      conn_ready(c);
      break;
    }
    if (r == SSH_AUTH_ERROR) {
      lc__ssh_fail(c, LC_EAUTH, "%s: authentication failed: %s", c->where, lc__ssh_err(c));
      return;
    }
    if (c->locked_keys != NULL) {
      lc__ssh_fail(c, LC_EKEYLOCKED,
                   "%s: authentication as %s failed: the private key %s is encrypted and no "
                   "ssh-agent offered it; load it with ssh-add",
                   c->where, c->host.user ? c->host.user : "the local user", c->locked_keys);
      return;
    }
    lc__ssh_fail(c, LC_EAUTH,
                 "%s: authentication as %s failed: the host accepted none of the keys offered "
                 "(%s%s%s%s)%s%s%s%s",
                 c->where, c->host.user ? c->host.user : "the local user",
                 c->host.identity_count ? c->host.identity_files[0] : "default identity files",
                 c->host.identity_count > 1 ? " and others" : "",
                 c->auth_agent_ok ? ", ssh-agent" : "",
                 c->host.identities_only ? "; IdentitiesOnly yes: no other agent key" : "",
                 c->algo_skipped[0] ? "; the " : "", c->algo_skipped,
                 c->algo_skipped[0] ? " was not offered: PubkeyAcceptedAlgorithms in the ssh "
                                      "config allows only "
                                    : "",
                 c->algo_skipped[0] && c->host.pubkey_algorithms ? c->host.pubkey_algorithms : "");
    return;
  case C_READY:
    c->drive_seq++;
    c->sock_full = 0; /* every writer gets its turn below, and says again if the socket is full */
    c->in_rounds = 1;
    c->in_more = 1;
    for (int i = 0; i < DOPOLL_ROUNDS; i++) {
      r = ssh_event_dopoll(c->ev, 0);
      if (r == SSH_ERROR) {
        c->in_rounds = 0;
        lc__ssh_fail(c, LC_ECLOSED, "%s: connection lost: %s", c->where, lc__ssh_err(c));
        return;
      }
      if (r == SSH_AGAIN) {
        c->in_more = 0;
        break;
      }
    }
    c->in_rounds = 0;
    gate_seen_open(c);
    if (c->in_more) { /* held data waits for the next wake-up only if one surely comes */
      int avail = 0;
      c->in_more = ioctl(c->poll_fd, FIONREAD, &avail) == 0 && avail > 0;
    }
    /* answers to listen requests first: sshd can send a new forward's first connection in the
     * same read as its answer, and that connection must find its forward */
    lc__tunnel_requests(c);
    lc__tunnel_accept_forwarded(c);
    chans_pump(c);
    /* a channel's read can flush libssh's output and reopen the write gate that closed on an
     * earlier channel in the same pass: give the writers another turn while it is open */
    for (int i = 0; i < 8 && c->state == C_READY && lc__ssh_write_open(c) && writers_waiting(c);
         i++)
      chans_pump(c);
    lc__tunnel_requests(c);
    if (c->state == C_READY && ssh_get_status(c->s) & (SSH_CLOSED | SSH_CLOSED_ERROR)) {
      lc__ssh_fail(c, LC_ECLOSED, "%s: connection lost: %s", c->where, lc__ssh_err(c));
      return;
    }
    break;
  default:
    return;
  }
  lc__ssh_update_poll(c);
}

/* Runs SSH over fd, a connected socket (or one end of a jump host's relay). */
void lc__ssh_start_session(lc__ssh_conn *c, int fd) {
  lc__ssh_host *h = &c->host;
  socket_t sfd = fd;
  int zero = 0, one = 1;
  long timeout_s = (c->rt->opts.connect_timeout_ms + 999) / 1000;
  const char *ciphers = h->ciphers != NULL ? h->ciphers : LC__SSH_CIPHERS_DEFAULT;

  c->state = C_HANDSHAKE;
  c->phase = "the SSH handshake";
  c->sock = fd;
  if ((c->s = ssh_new()) == NULL) {
    lc__ssh_fail(c, -ENOMEM, "%s: out of memory", c->where);
    return;
  }
  c->sock = -1; /* from here the session uses fd; session_free closes it */
  {
    struct stat st;
    c->lib_fd = fstat(fd, &st) == 0 ? fd : -1;
    c->lib_ino = c->lib_fd >= 0 ? (unsigned long)st.st_ino : 0;
  }
  ssh_options_set(c->s, SSH_OPTIONS_PROCESS_CONFIG, &zero);
  ssh_options_set(c->s, SSH_OPTIONS_FD, &sfd);
  ssh_options_set(c->s, SSH_OPTIONS_HOST, h->hostname);
  ssh_options_set(c->s, SSH_OPTIONS_PORT, &h->port);
  ssh_options_set(c->s, SSH_OPTIONS_TIMEOUT, &timeout_s);
  if (h->user != NULL)
    ssh_options_set(c->s, SSH_OPTIONS_USER, h->user);
  /* the first known_hosts files: libssh prefers the host key types they hold for this host */
  if (h->known_hosts_count > 0)
    ssh_options_set(c->s, SSH_OPTIONS_KNOWNHOSTS, h->known_hosts_files[0]);
  ssh_options_set(c->s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS,
                  h->global_known_hosts_count ? h->global_known_hosts[0] : "/dev/null");
  ssh_options_set(c->s, SSH_OPTIONS_NODELAY, &one);
  ssh_options_set(c->s, SSH_OPTIONS_CIPHERS_C_S, ciphers);
  ssh_options_set(c->s, SSH_OPTIONS_CIPHERS_S_C, ciphers);
  if (h->kex_algorithms != NULL)
    ssh_options_set(c->s, SSH_OPTIONS_KEY_EXCHANGE, h->kex_algorithms);
  if (h->hostkey_algorithms != NULL)
    ssh_options_set(c->s, SSH_OPTIONS_HOSTKEYS, h->hostkey_algorithms);
  if (h->pubkey_algorithms != NULL)
    ssh_options_set(c->s, SSH_OPTIONS_PUBLICKEY_ACCEPTED_TYPES, h->pubkey_algorithms);
  c->auth_agent_ok = agent_path(c) != NULL;
  if (c->auth_agent_ok)
    ssh_options_set(c->s, SSH_OPTIONS_IDENTITY_AGENT, agent_path(c));
  c->auth_step = AUTH_AGENT_FIRST;
  c->auth_idx = 0;
  c->algo_skipped[0] = '\0';
  ssh_callbacks_init(&c->scb);
  c->scb.auth_function = refuse_passphrase;
  c->scb.userdata = NULL;
  ssh_set_callbacks(c->s, &c->scb);
  ssh_set_blocking(c->s, 0);

  /* close-on-exec: a child started here (a local master, a ProxyCommand) must not hold the
   * socket, which would keep the connection open after we closed it */
  if ((c->poll_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0 ||
      uv_poll_init(lc__engine_loop(c->rt->engine), &c->poll, c->poll_fd) < 0) {
    lc__ssh_fail(c, -errno, "%s: cannot watch the socket", c->where);
    return;
  }
  c->poll.data = c;
  c->poll_inited = 1;
  c->open_handles++;
  c->poll_mask = UV_READABLE | UV_WRITABLE;
  uv_poll_start(&c->poll, c->poll_mask, on_poll);
  conn_drive(c);
}

static void tcp_try_next(lc__ssh_conn *c);

static void on_tcp_writable(uv_poll_t *h, int status, int events) {
  lc__ssh_conn *c = h->data;
  int err = 0;
  socklen_t len = sizeof(err);
  (void)events;
  (void)h;
  /* libuv reports POLLERR as a status; the socket's own error says what happened */
  if (getsockopt(c->sock, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err == 0 && status < 0)
    err = -status;
  tcp_poll_stop(c);
  if (c->state != C_TCP)
    return;
  if (err != 0) {
    c->last_errno = err;
    close(c->sock);
    c->sock = -1;
    tcp_try_next(c);
    return;
  }
  {
    int fd = c->sock, flags = fcntl(fd, F_GETFL), one = 1;
    /* unacknowledged data is given up after the keepalive limit, as an unanswered keepalive is
     * (on_keepalive): a blip shorter than the limit keeps the connection */
    unsigned int user_timeout = (unsigned int)c->rt->opts.keepalive_timeout_ms;
    int idle =
        c->rt->opts.keepalive_timeout_ms / 3000 > 0 ? c->rt->opts.keepalive_timeout_ms / 3000 : 1;
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK); /* libssh expects a blocking socket */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
    uv_freeaddrinfo(c->ai_list);
    c->ai_list = c->ai_next = NULL;
    lc__ssh_start_session(c, fd);
  }
}

static void tcp_try_next(lc__ssh_conn *c) {
  struct addrinfo *ai = c->ai_next;
  int fd;
  if (ai == NULL) {
    int e = c->last_errno ? c->last_errno : EHOSTUNREACH;
    if (++c->attempt < c->host.connection_attempts) {
      uv_freeaddrinfo(c->ai_list);
      c->ai_list = c->ai_next = NULL;
      c->state = C_IDLE;
      uv_timer_start(&c->retry, on_attempt, 1000, 0);
      return;
    }
    if (c->attempt > 1)
      lc__ssh_fail(c, -e, "%s: cannot connect after %d attempts (ConnectionAttempts %d): %s",
                   c->where, c->attempt, c->host.connection_attempts, strerror(e));
    else
      lc__ssh_fail(c, -e, "%s: cannot connect: %s", c->where, strerror(e));
    return;
  }
  c->ai_next = ai->ai_next;
  if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
    c->last_errno = errno;
    tcp_try_next(c);
    return;
  }
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
    c->last_errno = errno;
    close(fd);
    tcp_try_next(c);
    return;
  }
  c->sock = fd;
  if ((c->tcp_poll_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0 ||
      uv_poll_init(lc__engine_loop(c->rt->engine), &c->tcp_poll, c->tcp_poll_fd) < 0) {
    lc__ssh_fail(c, -errno, "%s: cannot watch the socket", c->where);
    return;
  }
  c->tcp_poll.data = c;
  c->open_handles++;
  uv_poll_start(&c->tcp_poll, UV_WRITABLE, on_tcp_writable);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  lc__ssh_conn *c = req->data;
  c->open_handles--; /* the request is over */
  c->gai_pending = 0;
  if (c->close_done != NULL || c->state != C_RESOLVING) {
    if (res)
      uv_freeaddrinfo(res);
    if (c->open_handles == 0 && c->close_done != NULL) {
      uv_handle_t fake = {.data = c};
      c->open_handles = 1;
      handle_closed(&fake);
    }
    return;
  }
  if (status < 0) {
    lc__ssh_fail(c, -EHOSTUNREACH, "%s: cannot resolve %s: %s%s", c->where, c->host.hostname,
                 uv_strerror(status),
                 c->host.address_family == LC__AF_INET ? " (AddressFamily inet in the ssh config)"
                 : c->host.address_family == LC__AF_INET6
                     ? " (AddressFamily inet6 in the ssh config)"
                     : "");
    return;
  }
  c->ai_list = c->ai_next = res;
  c->state = C_TCP;
  c->phase = "the TCP connection";
  tcp_try_next(c);
}

/* " (the ProxyCommand exited with status N: its last stderr)" once it exited; else "". */
static void proxy_note(const lc__ssh_conn *c, char *out, size_t size) {
  out[0] = '\0';
  if (c->proxy_running || !c->proxy_inited)
    return;
  snprintf(out, size, " (the ProxyCommand exited with status %d%s%.*s)", c->proxy_status,
           c->proxy_errlen ? ": " : "", (int)c->proxy_errlen, c->proxy_errtail);
}

static void on_proxy_exit(uv_process_t *h, int64_t status, int sig) {
  lc__ssh_conn *c = h->data;
  char note[400];
  if (c == NULL) { /* let go by proxy_stop */
    uv_close((uv_handle_t *)h, proxy_proc_closed);
    return;
  }
  c->proxy_running = 0;
  c->proxy_status = sig ? 128 + sig : (int)status;
  if (c->state == C_HANDSHAKE || c->state == C_AUTH) {
    /* it ended before the host was reached: say so rather than what libssh sees of it */
    proxy_note(c, note, sizeof(note));
    lc__ssh_fail(c, LC_ECLOSED, "%s: the ProxyCommand '%s' ended before the connection was made%s",
                 c->where, c->host.proxy_command, note);
  }
}

static void proxy_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char chunk[1024]; /* engine thread only */
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(chunk, sizeof(chunk));
}

/* Keeps the last line or so of what the ProxyCommand writes to stderr, blanks folded. */
static void on_proxy_err(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  lc__ssh_conn *c = st->data;
  if (n <= 0) {
    if (n < 0)
      uv_read_stop(st);
    return;
  }
  for (ssize_t i = 0; i < n; i++) {
    char ch = buf->base[i] == '\n' || buf->base[i] == '\r' ? ' ' : buf->base[i];
    if (c->proxy_errlen + 1 >= sizeof(c->proxy_errtail)) {
      memmove(c->proxy_errtail, c->proxy_errtail + 64, c->proxy_errlen - 64);
      c->proxy_errlen -= 64;
    }
    c->proxy_errtail[c->proxy_errlen++] = ch;
  }
  while (c->proxy_errlen > 0 && c->proxy_errtail[c->proxy_errlen - 1] == ' ')
    c->proxy_errlen--;
  c->proxy_errtail[c->proxy_errlen] = '\0';
}

/*
 * ProxyCommand: runs the command with /bin/sh -c, as ssh does, its stdin and stdout one end of a
 * socketpair, in a session of its own, and starts SSH on the other end. uv_spawn rather than
 * libssh's own ProxyCommand (which forks inside ssh_connect and cannot say why the command failed):
 * the loop never blocks, and the command's exit status and stderr reach the error message.
 */
static void proxy_start(lc__ssh_conn *c) {
  uv_loop_t *loop = lc__engine_loop(c->rt->engine);
  uv_process_options_t o;
  uv_stdio_container_t io[3];
  char *argv[4];
  int sv[2], r;
  memset(&o, 0, sizeof(o));
  c->state = C_TCP;
  c->phase = "the ProxyCommand";
  c->proxy_errlen = 0;
  c->proxy_errtail[0] = '\0';
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    lc__ssh_fail(c, -errno, "%s: cannot run the ProxyCommand: %s", c->where, strerror(errno));
    return;
  }
  if ((c->proxy = lc__calloc(1, sizeof(*c->proxy))) == NULL) {
    close(sv[0]);
    close(sv[1]);
    lc__ssh_fail(c, -ENOMEM, "%s: out of memory", c->where);
    return;
  }
  uv_pipe_init(loop, &c->proxy_err, 0);
  c->proxy_err.data = c;
  io[0].flags = UV_INHERIT_FD;
  io[0].data.fd = sv[1];
  io[1].flags = UV_INHERIT_FD;
  io[1].data.fd = sv[1];
  io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[2].data.stream = (uv_stream_t *)&c->proxy_err;
  argv[0] = (char *)"/bin/sh";
  argv[1] = (char *)"-c";
  argv[2] = c->host.proxy_command;
  argv[3] = NULL;
  o.file = "/bin/sh";
  o.args = argv;
  o.stdio = io;
  o.stdio_count = 3;
  o.exit_cb = on_proxy_exit;
  /* a session of its own: a Ctrl-C at the terminal (or a signal to our process group) is ours
   * to handle, by stopping the cluster through this very connection; the command ends when we
   * end it, or at EOF when this process is gone */
  o.flags = UV_PROCESS_WINDOWS_HIDE | UV_PROCESS_DETACHED;
  c->proxy->data = c;
  r = uv_spawn(loop, c->proxy, &o);
  close(sv[1]);
  c->proxy_inited = 1;
  c->open_handles += 1; /* the stderr pipe; the process handle is on its own */
  if (r < 0) {
    close(sv[0]);
    c->proxy_running = 0;
    lc__ssh_fail(c, r, "%s: cannot run the ProxyCommand '%s': %s", c->where, c->host.proxy_command,
                 uv_strerror(r));
    return;
  }
  c->proxy_running = 1;
  uv_read_start((uv_stream_t *)&c->proxy_err, proxy_alloc, on_proxy_err);
  lc__ssh_start_session(c, sv[0]);
}

/* ---- ProxyJump hops, shared ---------------------------------------------------------------- */

/* c no longer waits for its hop. */
static void hop_unwait(lc__ssh_conn *c) {
  lc__ssh_conn **pp;
  if (c->hop_wait == NULL)
    return;
  for (pp = &c->hop_wait->hop_waiters; *pp != NULL && *pp != c; pp = &(*pp)->next_hop_waiter)
    ;
  if (*pp != NULL)
    *pp = c->next_hop_waiter;
  c->next_hop_waiter = NULL;
  c->hop_wait = NULL;
}

/* The hop's connect ended: each runtime that waited opens its channel through it now (all at
 * once), or fails naming the hop. */
static void hop_done(lc_runtime *jrt, const lc__err *err, void *arg) {
  lc__ssh_conn *j = jrt->backend, *w, *list;
  (void)arg;
  if (j == NULL)
    return;
  j->hop_connecting = 0;
  list = j->hop_waiters; /* taken whole: a waiter that fails may start the hop again */
  j->hop_waiters = NULL;
  for (lc__ssh_conn *x = list; x != NULL; x = x->next_hop_waiter)
    x->hop_wait = NULL;
  while ((w = list) != NULL) {
    list = w->next_hop_waiter;
    w->next_hop_waiter = NULL;
    if (w->state != C_WAIT_JUMP || w->relay != NULL)
      continue;
    if (err != NULL)
      lc__ssh_fail(w, err->code, "%s: through the jump host: %s", w->where, err->msg);
    else
      conn_begin(w);
  }
}

/* c goes through jrt, which is not up: c waits for it, and the first waiter starts its connect
 * (the first ever, or again after a loss), so that one connection serves every host behind it. */
static void hop_wait(lc__ssh_conn *c, lc_runtime *jrt) {
  lc__ssh_conn *j = jrt->backend;
  c->hop_wait = j;
  c->next_hop_waiter = j->hop_waiters;
  j->hop_waiters = c;
  if (j->hop_connecting)
    return;
  j->hop_connecting = 1;
  if (!j->timers_inited) { /* never connected */
    lc__runtime_connect_async(jrt, hop_done, NULL);
    return;
  }
  jrt->on_connected = hop_done;
  jrt->on_connected_arg = NULL;
  if (j->state == C_DEAD) {
    uv_timer_stop(&j->reconnect);
    conn_begin(j);
  }
}

/* Starts (or, after a loss, restarts) connecting: through the jump host, or resolve + TCP. */
static void conn_begin(lc__ssh_conn *c) {
  lc_runtime *rt = c->rt;
  char port[16];
  struct addrinfo hints;

  if (c->gai_pending) { /* a lookup from the last attempt still runs */
    lc__ssh_reconnect_later(c);
    return;
  }
  c->state = C_IDLE;
  uv_timer_start(&c->timer, on_connect_timeout, (uint64_t)rt->opts.connect_timeout_ms, 0);
  if (rt->jump != NULL) {
    lc__ssh_conn *j = rt->jump->backend;
    if (j == NULL) {
      lc__ssh_fail(c, LC_ECLOSED, "%s: the jump host %s is closed", c->where, rt->jump->name);
      return;
    }
    c->state = C_WAIT_JUMP;
    if (j->state != C_READY) {
      c->phase = "connecting to the jump host";
      hop_wait(c, rt->jump);
      return;
    }
    c->phase = "the tunnel through the jump host";
    if (lc__tunnel_jump_open(j, c) < 0)
      lc__ssh_fail(c, -ENOMEM, "%s: cannot open a channel on the jump host", c->where);
    return;
  }
  if (c->host.proxy_command != NULL) {
    proxy_start(c);
    return;
  }
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = c->host.address_family == LC__AF_INET    ? AF_INET
                    : c->host.address_family == LC__AF_INET6 ? AF_INET6
                                                             : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof(port), "%d", c->host.port);
  c->state = C_RESOLVING;
  c->phase = "name resolution";
  c->gai.data = c;
  if (uv_getaddrinfo(lc__engine_loop(rt->engine), &c->gai, on_resolved, c->host.hostname, port,
                     &hints) < 0) {
    lc__ssh_fail(c, -EHOSTUNREACH, "%s: cannot resolve %s", c->where, c->host.hostname);
    return;
  }
  c->gai_pending = 1;
  c->open_handles++;
}

/* ConnectionAttempts: another try, a second after the last failed (as ssh). */
static void on_attempt(uv_timer_t *t) {
  lc__ssh_conn *c = t->data;
  if (c->state == C_IDLE && c->close_done == NULL)
    conn_begin(c);
}

static void timers_init(lc__ssh_conn *c) {
  uv_loop_t *loop = lc__engine_loop(c->rt->engine);
  uv_timer_init(loop, &c->timer);
  uv_timer_init(loop, &c->retry);
  uv_timer_init(loop, &c->reconnect);
  c->timer.data = c->retry.data = c->reconnect.data = c;
  c->timers_inited = 1;
  c->open_handles += 3;
  c->session_cap = MAX_SESSIONS;
}

static void ssh_connect_start(lc_runtime *rt) {
  lc__ssh_conn *c = rt->backend;
  c->attempt = 0;
  timers_init(c);
  conn_begin(c);
}

static void timers_init(lc__ssh_conn *c);

/* Whether c is being made: an attempt under way, or one waiting for its next try. */
static int conn_connecting(const lc__ssh_conn *c) {
  return c->state != C_READY && c->state != C_DEAD && !c->waiting_turn;
}

/* Begins the extra connections of pc that wait for their turn, while fewer than MAX_CONNECTING
 * are being made. */
static void extras_next(lc__ssh_conn *pc) {
  int busy = 0;
  if (pc->close_done != NULL)
    return;
  for (lc__ssh_conn *e = pc->extras; e != NULL; e = e->next_extra)
    busy += conn_connecting(e);
  for (lc__ssh_conn *e = pc->extras; e != NULL && busy < MAX_CONNECTING; e = e->next_extra)
    if (e->waiting_turn) {
      e->waiting_turn = 0;
      busy++;
      conn_begin(e);
    }
}

/* A copy of the primary's settings for an extra connection; it begins now, or when fewer than
 * MAX_CONNECTING others are being made. */
static lc__ssh_conn *extra_new(lc__ssh_conn *pc) {
  lc__ssh_conn *c = lc__calloc(1, sizeof(*c)), **tail;
  lc__ssh_host *h, *from = &pc->host;
  if (c == NULL)
    return NULL;
  h = &c->host;
  if (lc__ssh_host_copy(h, from) < 0) {
    free(c);
    return NULL;
  }
  c->rt = pc->rt;
  c->primary = pc;
  c->sock = c->poll_fd = c->tcp_poll_fd = c->lib_fd = -1;
  c->phase = "connecting";
  memcpy(c->where, pc->where, sizeof(c->where));
  /* appended: the oldest connections are filled first */
  for (tail = &pc->extras; *tail != NULL; tail = &(*tail)->next_extra)
    ;
  *tail = c;
  timers_init(c);
  c->session_cap = pc->session_cap; /* what the host allowed so far */
  c->waiting_turn = 1;
  extras_next(pc);
  return c;
}

/* Where a new process goes: a connection with a free session slot (one still being made
 * counts), else a new connection while there are fewer than MAX_CONNECTIONS; but never except.
 * NULL when every connection is full. */
static lc__ssh_conn *pick_conn(lc__ssh_conn *pc, const lc__ssh_conn *except) {
  int n = 1;
  if (pc != except && pc->state == C_READY && pc->execs < pc->session_cap)
    return pc;
  for (lc__ssh_conn *e = pc->extras; e != NULL; e = e->next_extra, n++)
    if (e != except && e->state != C_DEAD && e->execs < e->session_cap)
      return e;
  if (n < MAX_CONNECTIONS) {
    lc__ssh_conn *e = extra_new(pc);
    if (e != NULL && e->state != C_DEAD)
      return e;
  }
  return NULL;
}

/* Processes of rt's connections that hold or wait for a session channel (closing ones not). */
static int host_load(const lc__ssh_conn *pc, int *conns) {
  int n = 0;
  *conns = 0;
  for (const lc__ssh_conn *c = pc; c != NULL; c = c == pc ? pc->extras : c->next_extra) {
    if (c->state == C_DEAD)
      continue;
    ++*conns;
    for (const lc__ssh_chan *k = c->chans; k != NULL; k = k->next)
      n += k->kind == K_EXEC && k->state != CH_CLOSING;
  }
  return n;
}

/* Fails p, which found every connection to its host full, when it would hold its channel until
 * stopped (a lifeline): waiting for a free one would end as a start timeout with no reason. A
 * short process waits in the queue. Returns 1 when it failed p. */
static int full_fail(lc__ssh_conn *pc, lc_process *p) {
  lc__err err = {0};
  int conns = 0, load;
  if (!p->lifeline)
    return 0;
  load = host_load(pc, &conns);
  lc__err_set(&err, LC_ESSH,
              "%s: %d processes at once, more than the %d session channels of the %d "
              "connections lazycluster opens to one host carry (MaxSessions %d: the session "
              "channels the host's sshd allows per connection, learned from its refusals); "
              "raise MaxSessions in its sshd_config or start fewer processes there",
              pc->rt->name, load + 1, MAX_CONNECTIONS * pc->session_cap, MAX_CONNECTIONS,
              pc->session_cap);
  p->backend = NULL;
  lc__proc_closed(p, &err);
  return 1;
}

/* Appends k to c's channels: processes start in the order they were asked for. */
static void exec_append(lc__ssh_conn *c, lc__ssh_chan *k) {
  k->c = c;
  k->next = NULL;
  c->execs++;
  if (c->chans == NULL) {
    c->chans = k;
    k->prev = NULL;
  } else {
    lc__ssh_chan *t = c->chans;
    while (t->next)
      t = t->next;
    t->next = k;
    k->prev = t;
  }
}

/*
 * After c learned a lower cap: the processes queued on it beyond what it may open go to other
 * connections (new ones if need be), the last asked for first; a long-running one with nowhere
 * to go fails (full_fail), a short one stays queued.
 */
static void rebalance(lc__ssh_conn *c) {
  lc__ssh_conn *pc = c->primary != NULL ? c->primary : c;
  int queued = 0, excess;
  lc__ssh_chan *k, *last = NULL;
  for (k = c->chans; k != NULL; k = k->next) {
    queued += k->kind == K_EXEC && k->state == CH_QUEUED;
    last = k;
  }
  excess = c->sessions + queued - c->session_cap;
  for (k = last; k != NULL && excess > 0;) {
    lc__ssh_chan *prev = k->prev;
    if (k->kind == K_EXEC && k->state == CH_QUEUED && k->p != NULL) {
      lc__ssh_conn *to = pick_conn(pc, c);
      excess--;
      if (to != NULL) {
        lc__ssh_chan_unlink(k);
        exec_append(to, k);
        exec_pump(k);
        lc__ssh_update_poll(to);
      } else if (k->p->lifeline) {
        lc_process *p = k->p;
        lc__ssh_chan_unlink(k);
        k->p = NULL;
        free(k);
        full_fail(pc, p);
      }
    }
    k = prev;
  }
}

static void ssh_proc_start(lc_process *p) {
  lc__ssh_conn *pc = p->rt->backend, *c;
  lc__ssh_chan *k = lc__calloc(1, sizeof(*k));
  lc__err err = {0};
  if (k == NULL) {
    lc__err_set(&err, -ENOMEM, "out of memory");
    lc__proc_closed(p, &err);
    return;
  }
  if (pc->state != C_READY) {
    free(k);
    lc__err_set(&err, LC_ECLOSED, "%s: not connected", p->rt->name);
    lc__proc_closed(p, &err);
    return;
  }
  if (lc__agent_take(pc, p)) {
    free(k);
    return;
  }
  if ((c = pick_conn(pc, NULL)) == NULL) {
    if (full_fail(pc, p)) {
      free(k);
      return;
    }
    c = pc; /* a short process waits for a channel that frees */
  }
  k->kind = K_EXEC;
  k->state = CH_QUEUED;
  k->p = p;
  p->backend = k;
  exec_append(c, k);
  exec_pump(k);
  lc__ssh_update_poll(c);
}

static void ssh_proc_kick(lc_process *p) {
  lc__ssh_chan *k = p->backend;
  if (k != NULL && k->kind == K_SLOT) {
    lc__agent_slot_kick(k);
    return;
  }
  if (lc__agent_is(p->rt->backend, p)) {
    lc__agent_pump(p->rt->backend); /* may end it */
    k = p->backend;
  }
  if (k == NULL)
    return;
  lc__ssh_conn *c = k->c;
  exec_pump(k);
  lc__ssh_update_poll(c);
}

static void ssh_proc_abort(lc_process *p) {
  lc__ssh_chan *k = p->backend;
  if (k == NULL)
    return;
  if (k->kind == K_SLOT) {
    lc__agent_slot_abort(k);
    return;
  }
  lc__ssh_conn *c = k->c;
  /* Closing the channel gives the lifeline its EOF: it ends the process group. */
  exec_end(k, NULL, 0);
  chans_pump(c); /* a queued process may take the freed session */
  lc__ssh_update_poll(c);
}

static void extra_closed(lc_runtime *rt) { (void)rt; }

static void conn_close(lc__ssh_conn *c, void (*done)(lc_runtime *rt));

static void ssh_close(lc_runtime *rt, void (*done)(lc_runtime *rt)) {
  lc__ssh_conn *c = rt->backend;
  if (c == NULL) {
    done(rt);
    return;
  }
  while (c->extras != NULL) {
    lc__ssh_conn *e = c->extras;
    c->extras = e->next_extra;
    conn_close(e, extra_closed);
  }
  conn_close(c, done);
}

/* Closes one connection; its memory goes when its handles have closed (then done, for the
 * primary). */
static void conn_close(lc__ssh_conn *c, void (*done)(lc_runtime *rt)) {
  uv_handle_t fake;
  c->close_done = done; /* no reconnect from here on */
  hop_unwait(c);
  while (c->chans != NULL)
    chan_end(c->chans, NULL);
  if (c->relay != NULL) {
    lc__ssh_chan *k = c->relay;
    c->relay = NULL;
    k->owner = NULL;
    lc__tunnel_end(k);
  }
  if (c->primary == NULL) {
    lc__err err = {.code = LC_ECLOSED};
    snprintf(err.msg, sizeof(err.msg), "%s: the runtime is closing", c->where);
    lc__tunnel_lost(c, &err);
  }
  if (c->ai_list != NULL) {
    uv_freeaddrinfo(c->ai_list);
    c->ai_list = c->ai_next = NULL;
  }
  if (c->s != NULL && c->state == C_READY) {
    poll_stop(c);
    ssh_disconnect(c->s);
  }
  session_free(c);
  c->state = C_DEAD;
  if (c->timers_inited) {
    c->timers_inited = 0;
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    uv_close((uv_handle_t *)&c->retry, handle_closed);
    uv_close((uv_handle_t *)&c->reconnect, handle_closed);
  }
  /* one extra count so that handles closing during this call cannot free c under us */
  c->open_handles++;
  fake.data = c;
  handle_closed(&fake);
}

/*
 * rt->jump: the hop called name (reached itself through via, when not NULL), shared with every
 * runtime of the engine that goes through the same hop: same user, address, port, chain before
 * it, config file and connection options. It is prepared here, not connected: the first runtime
 * that connects through it starts its connect, the others wait for that one (hop_wait).
 */
static int hop_get(lc_runtime *rt, const char *name, const char *via, lc__err *err) {
  lc__ssh_host h = {0};
  lc_runtime *made = NULL, *shared;
  char *key = NULL;
  int r;
  if ((r = lc__sshconfig_resolve(&h, rt->ssh_config, name, err)) < 0)
    return r;
  key = lc__sprintf("%s\n%s@%s:%d\n%s\n%d %d %d", rt->ssh_config ? rt->ssh_config : "",
                    h.user ? h.user : "", h.hostname, h.port, via ? via : "",
                    (int)rt->opts.hostkey_policy, rt->opts.connect_timeout_ms,
                    rt->opts.keepalive_timeout_ms);
  lc__ssh_host_clear(&h);
  if (key == NULL)
    return lc__err_set(err, -ENOMEM, "out of memory");
  if ((rt->jump = lc__engine_share_find(rt->engine, key)) != NULL) {
    free(key);
    return 0;
  }
  if ((r = lc__runtime_make(&made, &lc__ssh_ops, rt->engine, name, via, &rt->opts, 0)) < 0) {
    free(key);
    return lc__err_set(err, r, "%s", lc_error_last());
  }
  lc__engine_disown(rt->engine, &made->owned); /* its users free it: lc__runtime_jump_drop */
  shared = lc__engine_share_add(rt->engine, key, made);
  free(key);
  if (shared != NULL && shared != made) { /* another thread made the same hop meanwhile */
    lc__runtime_jump_drop(made);
    made = shared;
  }
  rt->jump = made; /* shared == NULL: out of memory for the table, so this one is its own */
  return 0;
}

/* ops->prepare: reads the host's settings; via, when not NULL, overrides its ProxyJump. */
static int ssh_prepare(lc_runtime *rt, const char *host, const char *via, lc__err *err) {
  lc__ssh_conn *c = NULL;
  const char *jump_spec;
  char *jump_copy = NULL;
  int r = 0;

  if ((c = lc__calloc(1, sizeof(*c))) == NULL)
    return lc__err_set(err, -ENOMEM, "out of memory");
  c->rt = rt;
  c->sock = -1;
  c->poll_fd = -1;
  c->tcp_poll_fd = -1;
  c->lib_fd = -1;
  c->phase = "connecting";
  if ((r = lc__sshconfig_resolve(&c->host, rt->ssh_config, host, err)) < 0)
    goto out;
  snprintf(c->where, sizeof(c->where), "%s (%s:%d)", host, c->host.hostname, c->host.port);
  lc__ssh_host_warn(&c->host);
  if (c->host.connect_timeout_s > 0 && (rt->opts.connect_timeout_ms == 10000))
    rt->opts.connect_timeout_ms = c->host.connect_timeout_s * 1000;
  /* ServerAliveInterval and ServerAliveCountMax: the host is declared dead after interval x
   * count of silence, as ssh does, unless the caller set its own keepalive timeout. Not the
   * 300 s that BatchMode yes implies: for ssh that turns a keepalive on, for us it would turn
   * our 30 s limit into 15 minutes. */
  if (c->host.server_alive_given && c->host.server_alive_interval_s > 0 &&
      rt->opts.keepalive_timeout_ms == 30000)
    rt->opts.keepalive_timeout_ms =
        c->host.server_alive_interval_s *
        (c->host.server_alive_count_max > 0 ? c->host.server_alive_count_max : 1) * 1000;
  if (via != NULL &&
      c->host.proxy_command != NULL) { /* a hop of a ProxyJump chain: the chain wins */
    free(c->host.proxy_command);
    c->host.proxy_command = NULL;
  }
  if (c->host.proxy_command != NULL)
    snprintf(c->where, sizeof(c->where), "%s (%s:%d via ProxyCommand)", host, c->host.hostname,
             c->host.port);
  jump_spec = via != NULL ? via : c->host.proxy_jump;
  if (jump_spec != NULL && jump_spec[0] != '\0' && strcmp(jump_spec, "none") != 0) {
    /* "a,b": b is the last hop before the host, and is itself reached through a */
    char *last;
    if ((jump_copy = lc__strdup(jump_spec)) == NULL) {
      r = lc__err_set(err, -ENOMEM, "out of memory");
      goto out;
    }
    last = strrchr(jump_copy, ',');
    if (last != NULL)
      *last++ = '\0';
    if ((r = hop_get(rt, last ? last : jump_copy, last ? jump_copy : NULL, err)) < 0) {
      r = lc__err_set(err, r, "%s: through the jump host: %s", c->where, err->msg);
      goto out;
    }
    snprintf(c->where, sizeof(c->where), "%s (%s:%d via %s)", host, c->host.hostname, c->host.port,
             rt->jump->name);
  }
  rt->backend = c;
  c = NULL;
out:
  free(jump_copy);
  if (c != NULL) {
    lc__ssh_host_clear(&c->host);
    free(c);
  }
  return r;
}

const lc__backend_ops lc__ssh_ops = {
    .name = "ssh",
    .caps = 0,
    .prepare = ssh_prepare,
    .connect = ssh_connect_start,
    .proc_start = ssh_proc_start,
    .proc_kick = ssh_proc_kick,
    .proc_abort = ssh_proc_abort,
    .fwd_accept = lc__tunnel_fwd_accept,
    .fwd_start = lc__tunnel_fwd_start,
    .fwd_stop = lc__tunnel_fwd_stop,
    .close = ssh_close,
    .probe = lc__tunnel_probe,
};

int lc_runtime_new_ssh(lc_runtime **out, lc_engine *engine, const char *host,
                       const lc_runtime_options *opts) {
  return lc__runtime_make(out, &lc__ssh_ops, engine, host, NULL, opts, 1);
}

int lc__runtime_prepare_ssh(lc_runtime **out, lc_engine *engine, const char *host,
                            const lc_runtime_options *opts) {
  return lc__runtime_make(out, &lc__ssh_ops, engine, host, NULL, opts, 0);
}
