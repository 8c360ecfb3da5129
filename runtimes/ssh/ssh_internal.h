/*
 * ssh_internal.h - the SSH backend's state, shared by ssh.c (the connection and exec channels)
 * and tunnel.c (relayed channels: ProxyJump hops and port forwards). Engine thread only.
 */
#ifndef LC_SSH_INTERNAL_H
#define LC_SSH_INTERNAL_H

#include "../../src/runtime_internal.h"
#include "../../src/sshconfig.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

/*
 * The data one channel packet carries to OpenSSH's sshd: its 32 KiB maximum packet for sessions
 * and TCP channels, less the 10 bytes of header that libssh counts. libssh cuts every write into
 * packets of this size and one for the rest: writes in whole multiples of it send no small
 * packets, each of which costs as much CPU as a full one (padding from the DRBG, cipher calls).
 */
#define PACKET_DATA 32758
#define WRITE_CHUNK (8 * PACKET_DATA)

typedef struct lc__ssh_conn lc__ssh_conn;
typedef struct lc__ssh_chan lc__ssh_chan;
typedef struct lc__ssh_global_req lc__ssh_global_req;
typedef struct lc__ssh_agent lc__ssh_agent;

enum conn_state { C_IDLE, C_RESOLVING, C_TCP, C_WAIT_JUMP, C_HANDSHAKE, C_AUTH, C_READY, C_DEAD };
enum chan_state { CH_QUEUED, CH_OPENING, CH_CONNECTING, CH_EXEC, CH_RUNNING, CH_CLOSING };
/* K_SLOT: a process that the host's agent runs (agent.c), not a channel of its own */
enum chan_kind { K_EXEC, K_RELAY, K_SLOT };

#define LC__SSH_FREED_RING 16

struct lc__ssh_chan {
  lc__ssh_conn *c;
  lc__ssh_chan *next, *prev;
  enum chan_kind kind;
  enum chan_state state;
  ssh_channel ch;
  struct ssh_channel_callbacks_struct cb;
  int remote_closed;

  /* K_EXEC */
  lc_process *p;      /* NULL once detached */
  uint64_t open_sent; /* uv_now when the session open was sent (a refusal's age, ssh.c) */

  /* K_SLOT: its agent (NULL once the agent ended), its ID there, its stdin bytes sent and not yet
   * written by the agent; the agent has its start (spawn_sent), or said it ended (ended: closed
   * at the agent's next pump; slot_fail, when it could not start it, why); killing: forgotten
   * by us, until the agent says it forgot it too */
  lc__ssh_agent *agent;
  unsigned long slot_id;
  size_t unacked;
  int spawn_sent, ended, killing;
  char *slot_fail;

  /* K_RELAY: a channel relayed to a local stream */
  lc__ssh_conn *owner; /* ProxyJump: the connection that rides on this relay */
  lc_forward *fwd;     /* port forward: the forward this connection belongs to */
  char *target_host;   /* direct-tcpip: where the host should connect */
  int target_port;
  int origin_port;
  /* a probe (lc__tunnel_probe): told once whether the channel opened, then it closes */
  void (*probe_done)(void *arg, int r);
  void *probe_arg;
  uv_stream_t *stream;      /* owned (uv_tcp_t or uv_pipe_t on the heap) */
  uv_connect_t connect_req; /* remote forward: connecting the stream to the target */
  lc__buf to_chan;          /* read from the stream; from to_chan_off on not yet in the channel */
  size_t to_chan_off;
  int stream_eof; /* the stream said EOF */
  int chan_eof_sent;
  uv_write_t write_req;
  char *write_buf; /* in flight to the stream */
  int writing;
  size_t rx_waiting;    /* data may wait in libssh's channel buffer (what the callback left) */
  size_t rx_since_grow; /* bytes from the host since the receive window was last topped up */
  int rx_failed;        /* a write to the stream failed inside the data callback */
  unsigned rx_seq; /* the wake-up (lc__ssh_conn.drive_seq) in which the host's data last came */
  uv_shutdown_t shutdown_req;
  int shut_sent, shut_done;
  int ending;
};

/* A global request (tcpip-forward, cancel-tcpip-forward, keepalive@openssh.com): one at a time
 * per session, since libssh 0.10 has one slot for them and would give one's answer to another. */
struct lc__ssh_global_req {
  lc__ssh_global_req *next;
  int keepalive;   /* keepalive@openssh.com: any answer proves the host alive */
  lc_forward *fwd; /* listen: the forward; NULL for a cancel or a keepalive */
  char *bind;
  int port;
  /* a cancel of a listen found unsafe: once answered (the port closed), refused hears why */
  lc_forward *refused;
  lc__err *why;
};

/* A remote listen the host granted whose bound addresses are not checked yet (tunnel.c). */
typedef struct lc__ssh_bound lc__ssh_bound;
struct lc__ssh_bound {
  lc__ssh_bound *next;
  lc_forward *fwd; /* NULL once the forward stopped */
  int port;
};

struct lc__ssh_conn {
  lc_runtime *rt;
  lc__ssh_host host;
  enum conn_state state;
  ssh_session s;
  ssh_event ev;
  struct ssh_callbacks_struct scb;
  uv_poll_t poll;     /* the SSH session's socket */
  uv_poll_t tcp_poll; /* the TCP connect of one address */
  int tcp_poll_fd;
  int poll_fd;
  int poll_mask;
  int poll_inited;
  unsigned drive_seq;   /* counts wake-ups of the ready session */
  int in_rounds;        /* inside the wake-up's libssh poll rounds */
  int in_more;          /* the last wake-up ended with the host's data still unread */
  uv_timer_t timer;     /* connect timeout, then keepalive */
  uv_timer_t retry;     /* a refused session channel or remote listen tries again */
  uv_timer_t reconnect; /* a lost connection with forwards comes back */
  unsigned long backoff_ms;
  int timers_inited;
  int session_cap; /* session channels the host allows at once (sshd MaxSessions) */
  uv_getaddrinfo_t gai;
  int gai_pending;
  struct addrinfo *ai_list, *ai_next;
  int sock;
  int last_errno;
  lc__ssh_chan *chans;
  int sessions; /* open session channels */
  lc__ssh_global_req *reqs, *failed_reqs;
  lc__ssh_global_req *reqs_last; /* the tail of reqs (NULL when empty): a push costs O(1) */
  size_t listens_queued;         /* requests in reqs with a forward (listens) */
  int req_sent;                  /* the head of reqs was sent and waits for its answer */
  uint64_t heard_at;    /* uv_now when the host's bytes last woke the poll: it is alive then */
  uint64_t req_sent_at; /* uv_now when it was sent: unanswered for the keepalive limit = lost */
  int sock_full; /* a write into a channel was cut short: the socket could not take it at once */
  size_t gate_bypassed; /* small writes let past the closed write gate since it was last open */
  /* remote listens granted: those waiting for the next listing of the host's listeners, those
   * the listing in flight (check) covers; one listing at a time checks all granted meanwhile */
  lc__ssh_bound *unchecked, *checking;
  struct lc__listing *check;
  int open_handles;
  void (*close_done)(lc_runtime *rt);
  lc__ssh_chan *relay;   /* in the jump host's connection, when this one rides a ProxyJump */
  lc__ssh_conn *primary; /* an extra connection: the runtime's own one; NULL for that one itself */
  lc__ssh_conn
      *extras; /* the primary's extra connections, opened when sshd's MaxSessions is full */
  lc__ssh_conn *next_extra;
  int execs; /* exec channels on this connection, queued or open */
  /* an extra connection made while MAX_CONNECTING others were connecting: it begins when one of
   * them is done (ssh.c, extras_next) */
  int waiting_turn;
  /* the primary's: the most session channels any connection to the host had open at once, a
   * floor for a cap learned from a refusal (sshd may still count a channel closed just now) */
  int peak;
  /* uv_now of this connection's last session channels freed, a ring: sshd reaps a closed session
   * only after the loop pass that read our close, so an open sent with it is refused while sshd
   * still counts the session we no longer do (ssh.c, exec_pump) */
  uint64_t freed_at[LC__SSH_FREED_RING];
  unsigned freed_next;
  char *locked_keys;
  /* the first identity that PubkeyAcceptedAlgorithms kept from being offered: "ALG key FILE" */
  char algo_skipped[300];
  /* ProxyCommand: the command runs under /bin/sh with one end of a socketpair as its stdin and
   * stdout; libssh gets the other end */
  uv_process_t *proxy; /* its own allocation: reaped after the connection went (proxy_stop) */
  uv_pipe_t proxy_err; /* its stderr: the last bytes are kept for the error message */
  int proxy_running;   /* the process has not exited yet */
  int proxy_inited;    /* proxy and proxy_err are handles to close */
  int proxy_status;    /* exit status once it exited (128+N for signal N) */
  char proxy_errtail[256];
  size_t proxy_errlen;
  int attempt; /* ConnectionAttempts: attempts made so far */
  /* authentication: agent first (unless IdentitiesOnly), then the identity files in order,
   * then (IdentitiesOnly, an identity locked) the agent */
  int auth_step;
  size_t auth_idx;
  ssh_key auth_key;  /* the key being offered, kept across SSH_AUTH_AGAIN */
  int auth_agent_ok; /* an agent is configured and reachable in principle */
  char where[300];   /* "lab3 (198.18.0.13:22)" */
  const char *phase;
  /* ProxyJump: a hop's connection is shared by every runtime behind it; those that wait for it
   * to come up are listed on the hop (hop_waiters, linked by next_hop_waiter), each pointing at
   * the hop it waits for (hop_wait) */
  lc__ssh_conn *hop_waiters, *next_hop_waiter, *hop_wait;
  int hop_connecting; /* this hop's connect was started for its waiters and has not ended */
  /* the socket handed to libssh (SSH_OPTIONS_FD) and its inode: libssh 0.10 does not close a
   * socket it was given, so session_free closes it when it is still that socket */
  int lib_fd;
  unsigned long lib_ino;
  /* the primary's: the host's process agent (agent.c), or NULL; agent_off: it could not start
   * there, processes get a channel each on this connection */
  lc__ssh_agent *agent;
  int agent_off;
};

/* ssh.c */
const char *lc__ssh_err(lc__ssh_conn *c);
void lc__ssh_update_poll(lc__ssh_conn *c);
int lc__ssh_write_open(const lc__ssh_conn *c);
ssize_t lc__ssh_chan_put(lc__ssh_chan *k, const char *data, size_t len);
void lc__ssh_fail(lc__ssh_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lc__ssh_start_session(lc__ssh_conn *c, int fd);
void lc__ssh_chan_link(lc__ssh_conn *c, lc__ssh_chan *k);
void lc__ssh_chan_unlink(lc__ssh_chan *k);
void lc__ssh_chan_free(lc__ssh_chan *k);
void lc__ssh_reconnect_later(lc__ssh_conn *c);
/* Runs lc__tunnel_retry and the channel queue again after ms. */
void lc__ssh_retry_in(lc__ssh_conn *c, unsigned long ms);

/* tunnel.c */
void lc__tunnel_keepalive(lc__ssh_conn *c);
const char *lc__tunnel_req_what(const lc__ssh_conn *c, char *buf, size_t size);
void lc__tunnel_pump(lc__ssh_chan *k);
void lc__tunnel_end(lc__ssh_chan *k);
int lc__tunnel_jump_open(lc__ssh_conn *jump, lc__ssh_conn *owner);
void lc__tunnel_accept_forwarded(lc__ssh_conn *c);
void lc__tunnel_requests(lc__ssh_conn *c);
void lc__tunnel_restore(lc__ssh_conn *c);
void lc__tunnel_retry(lc__ssh_conn *c);
void lc__tunnel_pump_any(lc__ssh_chan *k);
void lc__tunnel_lost(lc__ssh_conn *c, const lc__err *err);
void lc__tunnel_fwd_accept(lc_forward *f, uv_tcp_t *client);
void lc__tunnel_fwd_start(lc_forward *f);
void lc__tunnel_fwd_stop(lc_forward *f);
void lc__tunnel_probe(lc_runtime *rt, int port, void (*done)(void *arg, int r), void *arg);

/* agent.c: a host's processes through one process there */
/* 1 when the host's agent takes p (p->backend is then a K_SLOT), 0 when p needs a channel. */
int lc__agent_take(lc__ssh_conn *c, lc_process *p);
/* Whether p is the agent's own process on c. */
int lc__agent_is(const lc__ssh_conn *c, const lc_process *p);
void lc__agent_slot_kick(lc__ssh_chan *k);
void lc__agent_slot_abort(lc__ssh_chan *k);
/* The runtime kicked the agent's own process (lc__agent_is): ends what ended. */
void lc__agent_pump(lc__ssh_conn *c);
/* The agent's stdout (lc_process.on_raw). */
void lc__agent_out(lc_process *ap, const char *data, size_t len);

/* The SSH backend (ssh.c). */
extern const lc__backend_ops lc__ssh_ops;

#endif /* LC_SSH_INTERNAL_H */
