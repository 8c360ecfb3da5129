/*
 * runtime_internal.h - the runtime layer's internals: processes (channels) and the backend ops
 * table that runtimes/ssh and runtimes/local implement. Everything here runs on the engine thread
 * unless it says otherwise.
 */
#ifndef LC_RUNTIME_INTERNAL_H
#define LC_RUNTIME_INTERNAL_H

#include "engine.h"

#include "lazycluster/forward.h"
#include "lazycluster/runtime.h"

#include <sys/socket.h>

#define LC__LINE_MAX (1024 * 1024)

typedef struct lc__backend_ops lc__backend_ops;

/* Splits a byte stream into lines for an lc_line_cb. */
typedef struct lc__lines {
  lc__buf buf;
} lc__lines;

/*
 * Who owns each field of lc_process, lc_runtime and lc_forward, as their comments say:
 *   [made]    written by the creating thread before the engine sees the object, read-only after
 *   [engine]  the engine thread only
 *   [atomic]  any thread, with __atomic builtins
 *   [lock]    under the engine's lock (lc__engine_lock), where waiters read it
 *   [wdmu]    under the runtime's workdir_mu
 * "[made] then [engine]": filled before the launch, the engine's alone after it.
 */

/*
 * One command on a host: the generic part of an exec channel or a local child. The backend keeps
 * its own state in `backend` and reports through lc__proc_data/_exit/_closed.
 */
struct lc_process {
  lc__owned owned;         /* in the engine's list while its owner holds it (lc_runtime_spawn) */
  lc_runtime *rt;          /* [made] then [engine]: NULL once the runtime let go of it */
  lc_engine *engine;       /* [made] */
  char *host;              /* [made]: the runtime's name, kept for messages after it let go */
  int grace_ms;            /* [made] */
  lc_process *next, *prev; /* [engine]: the runtime's live processes */
  void *backend;           /* [engine]: the backend's state, NULL once closed */
  char *command;           /* [made]: the line the host's login shell runs (command.c) */
  int lifeline;            /* [made]: receives heartbeats and stop requests on stdin */
  const void *tag;         /* [made]: lc__proc_tag of the thread that made it (its owner) */
  int refs;                /* [engine]: the engine's and the owner's */
  /* [made]: the command's stdin is fed by control lines (lc_exec_options.input); [engine]:
   * input_closed once lc__proc_input_close sent its end */
  int input;
  int input_closed;
  int kick_due; /* [engine]: has stdin for the runtime's kick timer to write */

  /* stdin, [made] then [engine]: the script's shared head (static text, lc__command_compose_parts),
   * the rest of the script and control lines, then borrowed memory, then a local file, then EOF
   * when in_eof is set; until the mark came on stdout (go), only in_gate more bytes of the head
   * and `in` */
  const char *in_head;
  size_t in_head_left;
  lc__buf in;
  size_t in_gate;
  int go;
  const char *in_mem;
  size_t in_mem_left;
  int in_fd;
  uint64_t in_left;
  int in_eof; /* send EOF once everything above is written */
  int in_eof_sent;

  /* output, [engine] (on_line, payload and out_fd: [made] then [engine]; on_line is cleared
   * under [lock] when it finishes): each stream's bytes before the mark are the login shell's
   * (noise, kept for errors) */
  unsigned char mark_at[2]; /* bytes of the mark matched so far; past its length: marked */
  lc__buf noise;
  lc_line_cb on_line;
  void *payload;
  lc__lines lines[2];
  int out_fd; /* raw stdout goes here (file fetch), else lines */
  uint64_t out_bytes;
  lc__buf err_tail; /* the last lines of stderr, for error messages */

  /* end: [engine] until finished, set under [lock]; waiters read them once finished */
  int exited; /* exit status or signal arrived */
  lc_exec_result result;
  int finished; /* [lock]: closed, no more output */
  /* why it failed to run (< 0), when it did, and its text (allocated: few processes fail, and a
   * fixed message buffer was two thirds of every process; lc__proc_err_msg reads it) */
  int err_code;
  char *err_msg;
  long pid;       /* [lock]: the group leader's pid on its host (lifeline), or 0 */
  int pid_looked; /* [engine]: the first stdout line was looked at for the pid */
  /* [made]: a lifeline's random token, the word lc-id=ID of its wrapper's command line on the
   * host: what finds the wrapper again after a lost connection (lc__runtime_lost_ended) */
  char id[20];
  uint64_t started_ms; /* [engine]: when it was launched */
  /* [made] then [engine]: runs on the engine thread once finished (internal users such as
   * groups) */
  void (*on_finish)(lc_process *p, void *arg);
  void *finish_arg;

  /* [made] then [engine]: its stdout after the mark as it comes, instead of lines (a backend's
   * own process: the SSH backend's agent) */
  void (*on_raw)(lc_process *p, const char *data, size_t len);

  /* a file transfer (lc__xfer_new): [made]; xfer_tmp is the owner's again once finished
   * (lc__xfer_finish) */
  int xfer;
  char *xfer_tmp; /* fetch: the temporary file, until renamed */
  char *xfer_dest;
  char *xfer_what; /* "fetching /etc/hosts" */
};

/* LC__XFER_WRITE_GZ: the data is in gzip's format, unpacked on the host (lc__command_write_file);
 * a host where gzip cannot run fails it with -ENOEXEC. */
typedef enum lc__xfer_kind {
  LC__XFER_SEND = 1,
  LC__XFER_GET,
  LC__XFER_WRITE,
  LC__XFER_WRITE_GZ
} lc__xfer_kind;

/*
 * One forward. The generic layer owns the local listener (every local forward, and a remote
 * forward on the local runtime); the backend relays each accepted connection, and runs remote
 * listeners itself.
 */
struct lc_forward {
  lc__owned owned;         /* in the engine's list until lc_forward_free */
  lc_runtime *rt;          /* [made] then [engine]: NULL once the runtime closed */
  lc_engine *engine;       /* [made] */
  lc_forward *next, *prev; /* [engine]: the runtime's forwards */
  lc_forward_kind kind;    /* [made] */
  char *bind;              /* [made]: listen address */
  /* [made]; 0 becomes the port picked, on the engine thread before the start returns */
  int port;
  char *target;           /* [made] */
  int target_port;        /* [made] */
  int peers;              /* [made]: who may connect to its local listener (lc_peers; -1: the
                           * engine's) */
  lc_forward_cb on_state; /* [made]; called on the engine thread */
  void *payload;          /* [made] */
  int up;                 /* [atomic] */
  int announced;          /* [engine]: came up once, later changes go to on_state */
  uv_tcp_t *listener;     /* [engine]: generic local listener, or NULL */
  void *backend;          /* [engine] */
  /* [engine]: stream relays (local runtime) */
  struct lc__stream_relay *relays;
  lc__call *call; /* [engine]: the start waiting for the first "up" */
  /* [engine]: a start of lc__forwards_new (then call is the batch's): where it reports */
  struct lc__fwd_batch *batch;
  size_t batch_i;
  /* [engine]: backoff of a remote listen that failed after a reconnect */
  unsigned long retry_ms;
  /* [made]: the cap on connections at once; [engine]: how many are carried (from the accept
   * until the relay ends), and whether this overflow was told */
  int max_conns;
  int conns;
  int cap_told;
  /* [engine]: the backend closed its granted remote listen (the host bound more than loopback):
   * its detail says why, the host's refusal needs no explaining */
  int refused_here;
  /* [made]: a mesh relay's carrier (meshrelay.c): the port a connection is for, from the address
   * it came from (origin, as sshd reports it); 0 refuses it. NULL: target_port, always. */
  int (*route)(lc_forward *f, const char *origin);
  void *route_arg;
};

/* Capability flags of a backend (lc__backend_ops.caps), for the layers that must know what a
 * runtime is without naming its backend. */
/* Runs on this machine: its ports are this machine's (nothing needs forwarding to reach them),
 * and a forward's target is connected from here. */
#define LC__BACKEND_ON_THIS_MACHINE (1u << 0)

/* What a backend does; every function runs on the engine thread unless it says otherwise. */
struct lc__backend_ops {
  const char *name;
  unsigned caps; /* LC__BACKEND_* flags */
  /* Caller's thread, before the engine sees rt: reads the host's settings into rt->backend;
   * via, when not NULL, overrides its ProxyJump. NULL: nothing to read. */
  int (*prepare)(lc_runtime *rt, const char *host, const char *via, lc__err *err);
  /* Connects; ends with lc__runtime_connected(rt, code, err). */
  void (*connect)(lc_runtime *rt);
  /* Starts p->command as the user's login shell would (`/bin/sh -c` locally), its stdin
   * from lc__proc_in_peek; after each lc__proc_data it writes stdin again (the mark may have
   * let more of it go). Errors later go through lc__proc_closed. */
  void (*proc_start)(lc_process *p);
  /* p has more stdin (or an EOF) to write. */
  void (*proc_kick)(lc_process *p);
  /* Closes p's channel now (the host's side sees EOF and a closed channel). */
  void (*proc_abort)(lc_process *p);
  /* A connection accepted on f's local listener: relay it to f's target (owns client). */
  void (*fwd_accept)(lc_forward *f, uv_tcp_t *client);
  /* Starts a remote forward; ends with lc__forward_ready(f, err). NULL: listen locally. */
  void (*fwd_start)(lc_forward *f);
  /* f is going away: cancel its remote listener and close its connections, now. */
  void (*fwd_stop)(lc_forward *f);
  /* Closes the connection and frees the backend; calls done(rt) when all is closed. */
  void (*close)(lc_runtime *rt, void (*done)(lc_runtime *rt));
  /* Whether something accepts a TCP connection at 127.0.0.1:port on the host (where the
   * cluster's tunnels connect), without a process there: on SSH a direct-tcpip channel, which
   * sshd's MaxSessions does not count. Calls done(arg, r) exactly once, maybe before it returns:
   * r 1 (accepted, then closed), 0 (not accepted: refused, or a failure whose reason the
   * backend cannot read, which may also be a refused forward) or a negative code when it knows
   * it cannot tell (the host refuses forwarding, the connection is gone). A 0 is therefore not
   * the last word: callers read a listing now and then (see readiness.c). NULL: no probe, read
   * a listing instead. */
  void (*probe)(lc_runtime *rt, int port, void (*done)(void *arg, int r), void *arg);
};

struct lc_runtime {
  lc__owned owned;            /* in the engine's list until freed (not a ProxyJump hop) */
  lc_engine *engine;          /* [made] */
  const lc__backend_ops *ops; /* [made]: the backend's constructor chose it */
  void *backend;              /* [made] (ops->prepare) then [engine] */
  char *name;                 /* [made] */
  lc_runtime_options opts;    /* [made]: defaults filled in; strings owned below */
  char *ssh_config;           /* [made] */
  char *workdir_root;         /* [made] */
  int connected;              /* [atomic] */
  lc_process *procs;          /* [engine]: live processes */
  uv_timer_t heartbeat;       /* [engine] */
  int heartbeat_started;      /* [engine]: heartbeat and kick are initialised */
  uv_timer_t kick;            /* [engine]: writes stdin that grew in a callback (runtime.c) */
  int kick_started;           /* [engine] */
  char *workdir;              /* [wdmu] */
  /* [wdmu]: removes the directory when this runtime's lifelines end */
  lc_process *workdir_keeper;
  void *workdir_keeper_arg; /* [wdmu] */
  /* [wdmu]: lc__runtime_workdir_begin started it; not yet awaited */
  lc_process *workdir_making;
  void *workdir_making_arg;  /* [wdmu] */
  uint64_t workdir_deadline; /* [wdmu] */
  pthread_mutex_t workdir_mu;
  lc__call *call; /* [engine]: the call waiting for connect or close */
  /* [made]: the host this one is reached through (ProxyJump); one reference to it, shared with
   * every runtime of the engine behind the same hop (lc__engine_share_*) */
  lc_runtime *jump;
  /* [engine]: live forwards; the backend brings them back after a reconnect */
  lc_forward *forwards;
  /* [atomic]: reconnect after a loss even without forwards (a cluster's hosts) */
  int keep_connected;
  /* [engine]: the callback of lc__runtime_connect_async */
  void (*on_connected)(lc_runtime *rt, const lc__err *err, void *arg);
  void *on_connected_arg; /* [engine] */
  /* the owner's thread (lc_runtime_set_resources) before the runtime is shared, read-only
   * after: GPUs for placement (-1 unknown, taken as none), declared worker slots (0: none) */
  int gpus;
  int slots;
  /* [atomic]: ports its facts saw listening, taken once (src/ports/listing.c) */
  struct lc__portscan *fresh_listing;
  uint64_t fresh_listing_at; /* [atomic]: when fresh_listing was kept (lc__now_ms) */
  /* [atomic]: 1 + the uid the host's listings run as ("lc-uid N"), 0 until one said it */
  long listing_uid;
  /* [atomic]: the id of the host's loopback (ports_internal.h, LC__LOOPBACK_*), from its first
   * listing or its facts: which hosts share one 127.0.0.1 with this machine or with each other */
  uint64_t loopback;
  /* [engine]: the ids of lifelines whose channel a lost connection closed while the host may
   * still run them; after the reconnect one short command (lost_sweep, covering the first
   * lost_swept of them) stops them as their own stop would and waits until they are gone */
  char (*lost_ids)[20];
  size_t nlost, lost_cap, lost_swept;
  lc_process *lost_sweep;
  /* [atomic]: LC__LOST_* ; [lock]: lost_why, why the sweep failed */
  int lost_state;
  char lost_why[512];
  /* [atomic]: its index in the group a cluster last found it in (lc__cluster_host_index): a
   * hint, checked before it is used */
  size_t group_hint;
  /* [owner]: lc__runtime_free_begin ran; the removal of the working directory it started; when
   * it began plus the kill grace and LC__PROC_END_MARGIN_MS (lc__now_ms): lc_runtime_free awaits
   * the removal, the keeper and the relay's helper until then, so that a group's hosts that are
   * slow to end their processes are awaited together, not each for its own margin in turn */
  int free_begun;
  lc_process *free_rm;
  uint64_t free_deadline;
  /* [wdmu]: the helper that listens for this host's mesh ports (meshrelay.c), or NULL */
  struct lc__meshrelay *relay;
  /* [atomic]: it has a working directory, so it runs many processes for long: a backend may
   * run them through one process on the host (runtimes/ssh/agent.c) */
  int agent_wanted;
};

/* What is known of the processes of this runtime's lost connections (lost_state). */
enum { LC__LOST_NONE = 0, LC__LOST_PENDING = 1, LC__LOST_FAILED = 2 };

/* How many bytes of opts (a checked lc_exec_options) its version has: what lc__options_copy
 * may read. */
size_t lc__exec_options_size(const lc_exec_options *opts);

/* Who makes processes on this thread (a cluster's start: lc_cluster_cancel stops those alone);
 * lc__proc_new copies it into lc_process.tag. NULL: nobody in particular. */
extern _Thread_local const void *lc__proc_tag;

/* Processes for internal users (groups), any thread: a command, or a file transfer. */
/* setup (NULL for none): sh text run before the command, after its cwd and environment, in the
 * process that then runs it; it travels with the script, never in a command line. */
int lc__proc_new(lc_process **out, lc_runtime *rt, const char *command, const lc_exec_options *opts,
                 int lifeline, const char *setup, const char *cleanup);
/* Writes (LC__XFER_WRITE, _GZ) send data [len]; unpacked: the file's size once unpacked (_GZ). */
int lc__xfer_new(lc_process **out, lc_runtime *rt, lc__xfer_kind kind, const char *local,
                 const char *remote, const void *data, size_t len, uint64_t unpacked,
                 unsigned int mode, lc__err *err);
/* Any thread, after p finished: checks how a transfer went and completes it locally. */
int lc__xfer_finish(lc_process *p, int code, lc__err *err);
/* Engine thread: starts p; on_finish (when set) runs when it ends. 0 or LC_ECLOSED. */
int lc__proc_launch(lc_process *p, lc__err *err);
/* Engine thread: a line into the stdin of p (spawned with lc_exec_options.input), len bytes
 * without its newline; close: its stdin ends. Same returns as lc_process_write_line and
 * lc_process_close_input, with err set. Also from inside line callbacks and on_finish (of p or
 * any other process): the backend then writes it on the loop's next turn. */
int lc__proc_input_line(lc_process *p, const char *line, size_t len, lc__err *err);
int lc__proc_input_close(lc_process *p, lc__err *err);
/* Engine thread, also inside callbacks: lc_process_stop (a lifeline's "s", written on the next
 * turn of the loop when inside a backend's callback; a process without one is aborted). */
void lc__proc_stop(lc_process *p);
/* Engine thread: the owner lets go of p (ending it if it runs). */
void lc__proc_release(lc_process *p);
/* Engine thread, before p finished: records why p failed to run (replacing a reason before). */
void lc__proc_err_set(lc_process *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Once p finished (or on the engine thread): the text of why it failed, "" when it did not;
 * lc__proc_err fills e with code and text. */
const char *lc__proc_err_msg(const lc_process *p);
void lc__proc_err(const lc_process *p, lc__err *e);

/* For backends' constructors (any thread but the engine's): a runtime on ops, its settings read
 * by ops->prepare (via: the ProxyJump, NULL as the config says), connected unless connect is 0. */
int lc__runtime_make(lc_runtime **out, const lc__backend_ops *ops, lc_engine *engine,
                     const char *host, const char *via, const lc_runtime_options *opts,
                     int connect);
/* The umask of what rt starts (lc_runtime_options.umask: 077 unless LC_UMASK_SET). Any thread. */
unsigned int lc__runtime_umask(const lc_runtime *rt);
/* Whether rt runs on this machine (LC__BACKEND_ON_THIS_MACHINE). Any thread. */
int lc__runtime_on_this_machine(const lc_runtime *rt);
/* The id of rt's loopback (LC__LOOPBACK_*): this machine's for a runtime on this machine, else
 * what rt's listings or facts told (lc__runtime_learn_loopback); NULL is this machine. */
uint64_t lc__runtime_loopback(const lc_runtime *rt);
void lc__runtime_learn_loopback(lc_runtime *rt, uint64_t id);
/* Whether a and b (NULL: this machine) share one 127.0.0.1: the same runtime, or both told the
 * same loopback. A port listening on one of them is the other's too: a tunnel between them
 * cannot listen and is not needed. */
int lc__runtime_same_loopback(const lc_runtime *a, const lc_runtime *b);
/* The environment that gives a process on rt the GPU numbered gpu (>= 0) among rt's GPUs:
 * "CUDA_VISIBLE_DEVICES=..." into cvd and "CUDA_DEVICE_ORDER=PCI_BUS_ID" into order (a host's GPUs
 * are numbered as nvidia-smi does, in PCI order). On this machine under a CUDA_VISIBLE_DEVICES
 * of ours (a user who keeps to some GPUs of a shared host) its GPUs are those, numbered as CUDA
 * does: the process gets that list's entry gpu as it is written there, in our own device order
 * (order empty). Any thread. */
void lc__runtime_gpu_env(const lc_runtime *rt, int gpu, char *cvd, size_t cvd_size, char *order,
                         size_t order_size);
/* Runtimes for groups (runtimes/ssh): settings read here (any thread), connected on the engine
 * thread. */
int lc__runtime_prepare_ssh(lc_runtime **out, lc_engine *engine, const char *host,
                            const lc_runtime_options *opts);
/* Keepalive requests the SSH backend queued so far, every engine's (for tests: a host that spoke
 * within a sixth of the keepalive limit is not asked). */
unsigned long lc__ssh_keepalives_sent(void);
void lc__runtime_connect_async(lc_runtime *rt, void (*cb)(lc_runtime *, const lc__err *, void *),
                               void *arg);
/* Closes and frees a runtime that never connected (any thread but the engine's). */
void lc__runtime_discard(lc_runtime *rt);

/* For backends. */
void lc__runtime_connected(lc_runtime *rt, const lc__err *err);
void lc__runtime_lost(lc_runtime *rt, const lc__err *err);
/* Any thread: 1 when the lifelines of this runtime's lost connections are known to be gone on
 * the host (the sweep after the reconnect confirmed it, or there were none), 0 while that is
 * not known yet, -1 when the sweep failed (why, when not NULL, gets its message): the caller
 * then waits for their heartbeat limit instead. */
int lc__runtime_lost_ended(lc_runtime *rt, char *why, size_t n);
void lc__proc_data(lc_process *p, lc_stream stream, const char *data, size_t len);
void lc__proc_exit(lc_process *p, int status, int signal);
/* Kicks p (ops->proc_kick) on the next turn of the loop, with whatever else is due then. */
void lc__proc_kick_later(lc_process *p);
/* The process's channel is closed; err is NULL when it ran (exit status arrived). */
void lc__proc_closed(lc_process *p, const lc__err *err);
/* Bytes of stdin ready to write (reads the next chunk of a file source); 0 when none now. */
size_t lc__proc_in_peek(lc_process *p, const char **data);
/* While the script's shared head is not out: copies the rest of the head and as much of the
 * script after it as may go now into buf (up to max), so that the two go in one packet; returns
 * how many bytes (lc__proc_in_consume takes them), or 0 when the head is out (peek then). */
size_t lc__proc_in_gather(lc_process *p, char *buf, size_t max);
/* The next bytes of stdin to write, at most max: gathered into buf while the head is not out,
 * else in place (*data); 0 when none now. lc__proc_in_consume takes what was written of them. */
size_t lc__proc_in_next(lc_process *p, char *buf, size_t max, const char **data);
void lc__proc_in_consume(lc_process *p, size_t n);
/* Non-zero when all stdin is written and EOF should be sent now. */
int lc__proc_in_eof_due(const lc_process *p);
/* Non-zero when p has stdin that may be written now. */
int lc__proc_in_pending(const lc_process *p);

/* forward.c, for backends */
void lc__forward_ready(lc_forward *f, const lc__err *err);
void lc__forward_set_up(lc_forward *f, int up, const char *detail);
/* f is down for a reason its owner must hear even when it was down already (a -R listen refused
 * after a reconnect, already DOWN from the lost connection): a DOWN with detail, again if so. */
void lc__forward_set_refused(lc_forward *f, const char *detail);
/* Resolves a target host for a connection from here: numeric addresses and "localhost". */
/* Engine thread: counts one more connection of f and says 1, or, at f's cap, says 0 (close it)
 * and tells the first refusal of each overflow through the engine's notices. */
int lc__forward_conn_take(lc_forward *f);
/* Engine thread: a connection that lc__forward_conn_take counted has ended. */
void lc__forward_conn_drop(lc_forward *f);
int lc__forward_target_addr(struct sockaddr_storage *out, const char *host, int port);

/* forward.c: forwards kept together (a group's tunnel mesh, a cluster's tunnels); the list owns
 * them. Any thread but the engine's. */
typedef struct lc__fwdlist {
  lc_forward **v;
  size_t n, cap;
} lc__fwdlist;
/* Adds f to l; on -ENOMEM f is freed. */
int lc__fwdlist_add(lc__fwdlist *l, lc_forward *f);
/* Frees every forward of l and empties it. */
void lc__fwdlist_free(lc__fwdlist *l);
/* A forward for lc__forwards_new. */
typedef struct lc__fwd_spec {
  lc_runtime *rt;
  lc_forward_kind kind;
  int port;
  const char *target;
  int target_port;
  int (*route)(lc_forward *f, const char *origin); /* NULL, or a mesh relay's carrier's */
  void *route_arg;
  int max_conns; /* 0: the default */
} lc__fwd_spec;
/* A forward of port on rt to the same port on 127.0.0.1 at the other end: what the tunnels of
 * the mesh and of a cluster's workers all are. */
static inline lc__fwd_spec lc__fwd_spec_same_port(lc_runtime *rt, lc_forward_kind kind, int port) {
  return (lc__fwd_spec){
      .rt = rt, .kind = kind, .port = port, .target = "127.0.0.1", .target_port = port};
}
/* Makes n forwards at once (all started, then all awaited); each one up goes into keep. Returns
 * 0 or the first error, as lc_forward_new would. */
int lc__forwards_new(const lc__fwd_spec *spec, size_t n, lc__fwdlist *keep);
/* Stops and frees v[0..n) (NULLs skipped), as lc_forward_free does each, in one engine call. */
void lc__forwards_free(lc_forward **v, size_t n);

/*
 * meshrelay.c: a host's listens for the tunnel mesh through one helper there (perl) instead of
 * one sshd -R listen each. Any thread but the engine's; the calls on one runtime come from one
 * caller at a time (a cluster's).
 */
/* The ports relayed on each host, in the order they were added, so that a failed step can drop
 * what it added (lc__relaylog_drop from a mark, n). A mesh adds W ports on each of H hosts, one
 * host's after another's: entry i is port[i] on the runtime of the run it falls in (run[j] holds
 * entries run[j].first up to the next run's first), 2 bytes an entry, not a pointer each (a
 * 1,024-worker mesh on 256 hosts: 262,144 entries). */
typedef struct lc__relayrun {
  lc_runtime *rt;
  size_t first;
} lc__relayrun;
typedef struct lc__relaylog {
  uint16_t *port;
  lc__relayrun *run;
  size_t n, cap;     /* entries */
  size_t nrun, rcap; /* runs */
} lc__relaylog;
/* Appends port on rt. Returns 0 or -ENOMEM (the log as it was). */
int lc__relaylog_add(lc__relaylog *log, lc_runtime *rt, int port);
/* Entry i's runtime (i < log->n). */
lc_runtime *lc__relaylog_rt(const lc__relaylog *log, size_t i);
/*
 * Listens on each host rts[i] for ports[i][0..count[i]) through its relay (made when it has
 * none). relayed[i] says, per host, whether its relay took them; a host whose relay cannot be
 * made or ended (no perl there, its loopback does not take 127.1.0.1, it did not answer in time)
 * gets 0 and is the caller's to serve with sshd's listens. Returns 0, or -EADDRINUSE naming host
 * and port when a port is taken on a host (that host's ports of the call are not listened on).
 * What was listened on goes into log (NULL: not kept).
 */
int lc__meshrelay_listen_many(lc_runtime *const *rts, size_t nh, int *const *ports,
                              const size_t *count, unsigned char *relayed, lc__relaylog *log);
/* The port of rt's relay's carrier on the host (its one -R listen), 0 when it has none up. */
int lc__meshrelay_carrier_port(lc_runtime *rt);
/* Whether port is rt's relay's (listened on, or waiting for lc__meshrelay_ended's caller). */
int lc__meshrelay_has(lc_runtime *rt, int port);
/* The relay of rt ended (its lifeline ended it: the connection was lost, the heartbeat was
 * silent past the limit, it was killed) or failed with ports that it listened on: 1 and those
 * ports (*ports, the caller's to free, and to listen on again), and the relay is made afresh at
 * the next listen; else 0. */
int lc__meshrelay_ended(lc_runtime *rt, int **ports, size_t *n);
/* The first half of lc_runtime_free, which does it when it was not done: starts removing the
 * working directory and tells its keeper and the mesh relay to end, without waiting, so that a
 * group's free ends every host's at once (one by one, each waited for its host: 112 s for 256
 * hosts here). Any thread but the engine's. */
void lc__runtime_free_begin(lc_runtime *rt);
/* Tells rt's relay to end, without waiting. */
void lc__meshrelay_end_begin(lc_runtime *rt);
/* Stops the relay of rt (lc_runtime_free): its helper's end awaited until deadline (lc__now_ms), or
 * for its own margin when 0. */
void lc__meshrelay_free(lc_runtime *rt, uint64_t deadline);
/* Drops log's entries from index from on (each relay stops listening on them). */
void lc__relaylog_drop(lc__relaylog *log, size_t from);
/* Drops the entries of the ports (sorted ascending) on rt, or on every host when rt is NULL: one
 * pass over the log, whatever n (a scale-down of many workers is not quadratic in them). */
void lc__relaylog_drop_ports(lc__relaylog *log, const int *ports, size_t n, lc_runtime *rt);
/* lc__relaylog_drop(log, 0) and frees it. */
void lc__relaylog_free(lc__relaylog *log);

/* command.c: composing what a host runs. */
/* What a script prints first on stdout and on stderr: the output before it is the login shell's
 * rc files' (dropped), and stdin past the script is held back until it arrives on stdout. */
#define LC__COMMAND_MARK "\036lc\n"
#define LC__COMMAND_MARK_SH "\\036lc\\n" /* the same, for sh's printf */
/* The first line a lifeline writes on stdout after the mark: the pid of the command's process
 * group leader (lc_process_pid), taken by runtime.c and never given to a line callback. */
#define LC__COMMAND_PID "\036lc-pid "
#define LC__COMMAND_PID_SH "\\036lc-pid " /* the same, for sh's printf */
/* line: what the login shell runs (`exec /bin/sh -s lc-lifeline HOST LABEL`), the same in every
 * shell and free of values; script: what goes first into stdin. heartbeat_s < 0: no lifeline;
 * cleanup (NULL for none) runs after a lifeline ends its group. */
int lc__command_compose(lc__buf *line, lc__buf *script, const char *command,
                        const lc_exec_options *opts, int heartbeat_s, int grace_ms,
                        const char *setup, const char *cleanup, const char *host, lc__err *err);
/* The same in two parts: the script is *head (head_len bytes of static text, the same for every
 * process of its kind: never copied) followed by rest. */
int lc__command_compose_parts(lc__buf *line, const char **head, size_t *head_len, lc__buf *rest,
                              const char *command, const lc_exec_options *opts, int heartbeat_s,
                              int grace_ms, const char *setup, const char *cleanup,
                              const char *host, lc__err *err);
/* The lifeline's sweep, sh text that defines lc_sweep SIG (see command.c); for its unit test. */
const char *lc__command_lifeline_sweep(void);
int lc__command_write_file(lc__buf *out, const char *path, uint64_t size, unsigned int mode,
                           int gz);
int lc__command_get_file(lc__buf *out, const char *path);
/* Makes working directory NAME under root and prints its path; unless keep, it then stays (the
 * keeper) and cleanup gets the text its lifeline runs to remove the directory. */
/* lc_runtime_spawn without the lifeline wrapper: for short reads that end by themselves (a
 * listing of ports), where the wrapper's start would be most of the cost. */
int lc__runtime_spawn_plain(lc_process **out, lc_runtime *rt, const char *command,
                            const lc_exec_options *opts);
/* lc_runtime_spawn with setup text (lc__proc_new): what a cluster writes into a worker's
 * directory before the worker starts. */
int lc__runtime_spawn_setup(lc_process **out, lc_runtime *rt, const char *command,
                            const lc_exec_options *opts, const char *setup);
/* What a working directory's keeper runs once the directory is made: one process and nothing
 * else in its group, so that a stop ends it at once (a shell looping over `sleep & wait` took
 * about 2 s from the stop to its confirmed end, per host, at every runtime's free). The sleep
 * outlasts any cluster (68 years); GNU's and busybox's sleep take the number. */
#define LC__KEEPER_SH "exec sleep 2147483647\n"

/*
 * How long a teardown waits for the confirmed end of a process under a lifeline, beyond the kill
 * grace period: the lifeline's SIGTERM, grace, SIGKILL, its sweep and its cleanup (a working
 * directory's removal), then the wrapper's exit status over the channel.
 */
#define LC__PROC_END_MARGIN_MS 10000

/* A teardown that returns when nothing is left, for many processes at once: end_begin tells a
 * process under a lifeline to stop (returns at once); end_wait awaits its confirmed end until
 * deadline (lc__now_ms), and not at all while its host does not answer; end_deadline is now plus
 * its kill grace period plus a margin (LC__PROC_END_MARGIN_MS, runtime.c); free_awaited is the
 * three, then lc_process_free. All accept NULL and do nothing for a process without a lifeline.
 * Any thread but the engine's. */
uint64_t lc__process_end_deadline(const lc_process *p);
/* Whether p has finished (its result into *out, when not NULL): a look, as lc_process_wait(out,
 * p, 0) without its error text, for pollers that look at many processes often. */
int lc__process_finished(lc_process *p, lc_exec_result *out);
void lc__process_end_begin(lc_process *p);
void lc__process_end_wait(lc_process *p, uint64_t deadline);
void lc__process_free_awaited(lc_process *p);
/* free_awaited with a deadline of the caller's (lc__now_ms), shared by many processes. */
void lc__process_free_by(lc_process *p, uint64_t deadline);
/* Starts making rt's working directory without waiting (lc_runtime_workdir then waits for it),
 * so that many hosts make theirs at once. 0 when started or already there. Any thread but the
 * engine's. */
int lc__runtime_workdir_begin(lc_runtime *rt);
/* After a lost connection (whose keeper's lifeline removed the working directory on the host):
 * makes the same directory again, with a new keeper. 0 when it is there again or was never
 * made. Any thread but the engine's. */
int lc__runtime_workdir_renew(lc_runtime *rt);
/* Whether the working directory was made and its keeper has ended since (its lifeline removed
 * the directory: a lost connection, or a heartbeat silent past the limit while connected). */
int lc__runtime_workdir_keeper_ended(lc_runtime *rt);
/* The backend brings rt back after a lost connection, forwards or not (any thread). */
void lc__runtime_keep_connected(lc_runtime *rt);
/* Whether the backend tries to bring rt back after a loss (any thread). */
int lc__runtime_keeps_connected(const lc_runtime *rt);
int lc__command_workdir(lc__buf *out, lc__buf *cleanup, const char *root, const char *name,
                        int keep);
/* The script that makes the working directory path again after its keeper ended (the same path:
 * what holds it stays right), and keeps it unless keep. */
int lc__command_workdir_again(lc__buf *out, lc__buf *cleanup, const char *path, int keep);
int lc__signal_from_name(const char *name);

/* Caller's thread: drops rt->jump's reference; the last one frees the hop runtime. NULL is fine. */
void lc__runtime_jump_drop(lc_runtime *jump);

#endif /* LC_RUNTIME_INTERNAL_H */
