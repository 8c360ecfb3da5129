/*
 * cluster_internal.h - what the files of the cluster layer (src/cluster/) share: the cluster
 * object, its record of each worker, and the steps of a start. Nothing below the cluster layer
 * includes it.
 */
#ifndef LC_CLUSTER_INTERNAL_H
#define LC_CLUSTER_INTERNAL_H

#include "../../launchers/launchers.h"

#include "../group_internal.h"
#include "../ports_internal.h"
#include "../runtime_internal.h"
#include <stdatomic.h>

#include <pthread.h>

#define LC__POLL_MS 50
/* Readiness polls one host 10 ms apart for the first half second (most services listen by
 * then), then 10 ms more each time up to LC__LISTING_GAP_MAX_MS, then a quarter more each time up
 * to LC__POLL_GAP_MAX_MS: a service that takes a minute to start (a Python service on a busy
 * host; the dask type waits on its scheduler's log instead) costs its host and this engine a look
 * a second, not four. */
#define LC__LISTING_GAP_MAX_MS 250
#define LC__POLL_GAP_MAX_MS 1000
/* while probes of a host's ports fail, a readiness listing of it: the first after
 * LC__PROBE_LISTING_MS, each later one a second further apart, up to LC__PROBE_LISTING_MAX_MS. A
 * failed probe may be a refused forward (the reason is not known), which only a listing shows. */
#define LC__PROBE_LISTING_MS 1000
#define LC__PROBE_LISTING_MAX_MS 5000
#define LC__TAIL_LINES 8
/* The cluster-wide part of the workers' context, one file in each host's working directory. */
#define LC__CONTEXT_FILE "cluster-context"
/* A context larger than a command's stdin packet (3,584 bytes, runtimes/ssh/ssh.c) goes to the
 * hosts in gzip's format: ~88 bytes a worker, ~9x smaller packed (docs/scale.md). */
#define LC__CONTEXT_GZ_MIN 3584

/* Where a start limit came from, for its error message. */
typedef enum lc__limit_source {
  LC__LIMIT_LIBRARY, /* the library's default */
  LC__LIMIT_TYPE,    /* the launcher's timeout_ms */
  LC__LIMIT_ASKED,   /* lc_cluster_options */
} lc__limit_source;

/* One process's output as the cluster keeps it: its tag ("lab1 worker-3"), its host, and its last
 * stderr lines, for error messages. err is written on the engine thread under the cluster's mu;
 * the rest is set before the process starts. A restarted worker keeps its output (its index). */
typedef struct lc__output {
  lc_cluster *c;
  char tag[160];
  char host[128]; /* the runtime's name */
  int index;      /* the worker's, or -1 for the master */
  char *err_line[LC__TAIL_LINES];
  size_t err_next;
} lc__output;

/* The restarts of one process (a worker, the master) within the restart window, oldest first:
 * lc__now_ms of each, for max_restarts and the backoff (repair.c). */
typedef struct lc__restart_log {
  uint64_t *at;
  size_t n, cap;
} lc__restart_log;

/* The cluster's record of one worker. Caller's thread only (the thread in a call of the
 * cluster), except out, which the engine thread reads. */
typedef struct lc__worker {
  lc_worker_info info; /* what its launcher sees; host and workdir point into the fields below */
  char *host;
  char *workdir;
  lc_runtime *rt;
  lc_process *proc;
  lc__output *out;
  int ready;
  int stopped;  /* by lc_cluster_worker_stop (proc is NULL): no report, no DOWN event */
  int reported; /* its end was reported by lc_cluster_wait (after WORKER_DOWN) */
  /* repair (repair.c, hosts.c): */
  int state;                   /* lc_worker_state */
  int restarts;                /* over the cluster's life */
  lc__restart_log restart_log; /* its restarts within the window */
  uint64_t next_start;         /* lc__now_ms: when a BACKOFF or WAITING worker may start again */
  long long started_ms;        /* wall-clock ms of its current process's start, or 0 */
  int ended, last_status, last_signal; /* its last end */
  char last_end[256];                  /* how that end was worded */
  int took; /* hosts.c: its last end was its host's loss (moved or WAITING, not a restart) */
} lc__worker;

/* A host of the group as the cluster sees it (hosts.c); one per group runtime, in group order. */
typedef struct lc__host {
  int lost;          /* HOST_LOST went out, HOST_BACK not yet */
  long long lost_ms; /* wall-clock ms when it was marked lost */
  uint64_t lost_at;  /* lc__now_ms then */
  int sweep_noted;   /* the note that its old processes' sweep failed went out */
  int renew_noted;   /* the note that its working directory cannot be made again went out */
} lc__host;

/* The cluster. Its fields belong to the thread in a call of the cluster (calls must not overlap),
 * except those marked "mu": the engine thread's line callbacks write them under mu. */
/* A start canceled (lc_cluster_cancel): LC_ECANCELED with its detail, else 0. */
int lc__cluster_canceled(lc_cluster *c);

struct lc_cluster {
  lc_group *group;         /* borrowed */
  lc_master_launcher *m;   /* borrowed */
  lc_worker_launcher *w;   /* borrowed */
  lc_cluster_options opts; /* a copy; its strings are the copies below, or NULL */
  char *master_host_opt;
  lc__limit_source master_timeout_src, worker_timeout_src;
  char *master_timeout_opt, *worker_timeout_opt; /* how messages name what changes them */
  char **env;                                    /* opts.env, copied; NULL-terminated */
  char *secret; /* lc_cluster_secret: made at lc_cluster_new, wiped at free */
  size_t nenv;
  lc_ports *worker_ports;
  lc_runtime *local; /* our own local runtime for a master on this machine */
  lc_runtime *master_rt;
  lc_process *master_proc;
  lc__output *master_out;
  int master_reported; /* the master's end was reported by lc_cluster_wait */
  int master_port;
  lc__fwdlist fwds;     /* every tunnel of the cluster */
  lc__relaylog relayed; /* the hosts' listens through their mesh relays (meshrelay.c) */
  lc__worker *workers;
  size_t nworkers, capworkers;
  int *ports; /* reserved by this cluster */
  size_t nports, capports;
  lc__buf log;
  /* lc_cluster_cancel: the flag (any thread, a signal handler too) and the engine's wake-up */
  atomic_int canceled;
  uv_async_t cancel_async; /* [engine], made by lc_cluster_new */
  uv_timer_t cancel_again; /* [engine]: stops what a step launched after the cancel too */
  int cancel_ready;
  pthread_mutex_t mu;  /* the outputs' stderr tails and the counter */
  pthread_cond_t cv;   /* the counter changed */
  long count;          /* mu: lc_cluster_counter_add; 0 when the master starts */
  long changes;        /* mu: lc_cluster_counter_add calls since the master started */
  lc_runtime **staged; /* the hosts prepare_host has prepared (prepare.c) */
  size_t nstaged;
  /* repair (repair.c) */
  uint64_t look_changes; /* the engine's changes at the last whole look (lc__engine_changes) */
  uint64_t look_at;      /* lc__now_ms of the last whole look */
  int look_busy;         /* at the last whole look, something waited on time (a lost host...) */
  int master_backoff;    /* the master ended and starts again at master_next_start */
  uint64_t master_next_start; /* lc__now_ms */
  int master_restarts;        /* over the cluster's life */
  lc__restart_log master_restart_log;
  uint64_t ttl_end; /* lc__now_ms when the ttl is up, or 0 (none, or not started) */
  int expired;      /* the EXPIRED event went out */
  lc__host *hosts;  /* hosts.c: what the cluster knows of each group runtime */
  size_t nhosts;
  /* context.c: per group runtime, the hash of the context file written there (0: none) */
  uint64_t *ctx_sent;
  size_t nctx_sent;
  /* client.c: what a client on this machine needs */
  char *client_dir;          /* opts.client_dir copied, or the cluster's own (client_dir_own) */
  int client_dir_own;        /* made by the cluster: removed with its files at lc_cluster_free */
  char **client_env;         /* client_mu: "NAME=VALUE", NULL-terminated (NULL while empty) */
  size_t nclient_env;        /* client_mu */
  pthread_mutex_t client_mu; /* any thread sets and reads the client env */
  int client_mu_ready;
};

/* Every group runtime's listening ports, one listing each and all at once. */
typedef struct lc__hostscan {
  lc__portscan *per; /* one per group runtime, in group order */
  size_t n;
} lc__hostscan;

/* One start of workers: what undoing it needs. */
typedef struct lc__wstart {
  size_t first, mark, fwd_mark, relay_mark;
  int n;
  int prepared;
  int staged;         /* staging ran: undoing removes the workers' directories */
  size_t staged_mark; /* c->nstaged before this start */
} lc__wstart;

/* ---- output.c ---- */
void lc__cluster_note(lc_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lc__cluster_on_line(const char *line, size_t len, lc_stream stream, void *payload);
/* "it exited with status 1; its last stderr lines: ..." for a message. */
void lc__cluster_how_ended(lc_cluster *c, lc__output *t, lc_process *p, char *out, size_t size);
/* The lifeline's word on why it ended the process ("lc-lifeline: no heartbeat ..."), when that
 * is t's last stderr line: into out, else out is "". */
void lc__output_lifeline_word(lc_cluster *c, lc__output *t, char *out, size_t size);
/* The output of the master (index -1) or of worker index on host. */
lc__output *lc__output_new(lc_cluster *c, int index, const char *host);
/* Forgets a process's stderr tail (a worker restarted). */
void lc__output_clear(lc__output *t);
void lc__output_free(lc__output *t);
void lc__cluster_emit(lc_cluster *c, lc_cluster_event ev, int index);

/* ---- cluster.c ---- */
/* "(the dask type's default master timeout; --master-timeout S changes it)", and the same after
 * the limit in seconds. */
void lc__cluster_limit_why(const lc_cluster *c, int master, char *out, size_t size);
void lc__cluster_limit_text(const lc_cluster *c, int master, char *out, size_t size);
/* LC_EREMOTE naming the first process of the cluster that ended (not one stopped by us or
 * already reported), or 0. */
int lc__cluster_check_ended(lc_cluster *c);
/* The workers that run now (not stopped, not ended). */
int lc__cluster_running_workers(lc_cluster *c);
/* n for the worker launcher's wait_ready: every running worker (launcher version 4), or the
 * workers of this start (older launchers: what n meant to them). */
int lc__cluster_wait_n(lc_cluster *c, int started);
/* The worker launcher's after_start for the ready start st (launcher version 4), or 0. */
int lc__workers_after_start(lc_cluster *c, const lc__wstart *st);

/* ---- ports.c ---- */
void lc__cluster_release_ports(lc_cluster *c, size_t from);
void lc__cluster_drop_forwards(lc_cluster *c, size_t from);
/* Per worker, wherever its records lie in c->fwds and c->ports (a worker's forwards all have its
 * port, on this machine and on the hosts): drops the forwards of port (on rt only, or everywhere
 * when rt is NULL), releases port, tells whether rt has a forward of port. */
void lc__cluster_drop_port_forwards(lc_cluster *c, int port, lc_runtime *rt);
/* The same for many ports (sorted ascending) in one pass over the forwards and the relay log. */
void lc__cluster_drop_ports_forwards(lc_cluster *c, const int *ports, size_t n, lc_runtime *rt);
void lc__cluster_release_port(lc_cluster *c, int port);
int lc__cluster_has_forward(const lc_cluster *c, lc_runtime *rt, int port);
/* A port from the worker ranges free on every connected host and here, reserved. */
int lc__cluster_pick_port_connected(lc_cluster *c, int *out);
/* A worker's tunnels as its launcher's mesh asks (every connected host but its own, or this
 * machine only), those already there kept. */
int lc__worker_tunnels(lc_cluster *c, lc__worker *w);
/* Every runtime the cluster uses (the group's and its own local one), *n of them, in an array
 * the caller frees; NULL (the detail set) when out of memory. */
lc_runtime **lc__cluster_runtimes(lc_cluster *c, size_t *n);
const char *lc__cluster_port_taken_where(lc_cluster *c, int port);
int lc__cluster_pick_port(lc_cluster *c, int *out, const lc_ports *ranges);
int lc__cluster_scan(lc_cluster *c, lc__hostscan *sc);
/* Whether port is taken on host i of sc: it listens there or a connection holds it. */
int lc__hostscan_taken(const lc__hostscan *sc, size_t i, int port);
/* Frees what sc holds (a scan that failed too). */
void lc__hostscan_free(lc__hostscan *sc);
size_t lc__cluster_host_index(lc_cluster *c, lc_runtime *rt);
int lc__cluster_pick_from_scan(lc_cluster *c, const lc__hostscan *sc, const lc_ports *ranges,
                               int *out, size_t n);
int lc__cluster_pick_ports(lc_cluster *c, const lc__hostscan *given, int *out, size_t n);

/* ---- placement.c ---- */
/* One host as placement sees it. */
typedef struct lc__place_host {
  const char *name;
  int gpus;   /* its GPUs, one slot each; 0: none */
  int slots;  /* its declared CPU slots when it has no GPU; 0: one */
  int master; /* the master runs there */
} lc__place_host;

/* Where a worker is: a host (index into the hosts) and its GPU there, or -1. */
typedef struct lc__place_spot {
  int host;
  int gpu;
} lc__place_spot;

/* What placement goes by (lc_cluster_options' placement fields, and a launcher's place). */
typedef struct lc__place_in {
  const lc__place_host *hosts;
  size_t nhosts;
  int policy; /* lc_placement */
  int max_per_host, exclude_master;
  /* NULL: the policy; else the slot position for worker index, or a negative error */
  int (*hook)(void *arg, int index, const lc_slot *slots, size_t nslots);
  void *hook_arg;
} lc__place_in;

#define LC__PLACE_WHY 160

/* Places workers first..first+n-1 into placed[first..], counting placed[0..first-1] (a host
 * index out of range counts nowhere); why[k] (may be NULL) gets where worker first+k went and
 * why ("GPU 1 of lab2 (spread)"). Returns 0, -ENOSPC (the cap or the master's host leave no
 * host: the detail names them), -EINVAL (no host; the hook's index is no slot), the hook's
 * error, -ENOMEM. */
int lc__place(const lc__place_in *in, lc__place_spot *placed, size_t first, size_t n,
              char (*why)[LC__PLACE_WHY]);
/* Places c->workers[first..first+n-1] (rt and info.gpu) after the cluster's earlier workers,
 * and notes each in the cluster log. */
int lc__cluster_place(lc_cluster *c, size_t first, size_t n);

/* ---- context.c ---- */
char **lc__cluster_env(lc_cluster *c, const char *const *more, size_t nmore);
int lc__worker_spawn(lc_cluster *c, lc__worker *w);
/* The context file's text: TF_CONFIG's "cluster" object, newline, cluster.json's "workers"
 * array, newline. */
int lc__cluster_context_text(lc_cluster *c, lc__buf *b);
/* Writes the context file on every host of the cluster's workers (only's host alone when not
 * NULL) that lacks this content, all at once; before workers start there. Returns 0 or the
 * first host's error, naming it. */
int lc__cluster_context_send(lc_cluster *c, const lc__worker *only);
/* rt's directory went (its connection was lost): its context file must be written again. */
void lc__cluster_context_forget(lc_cluster *c, lc_runtime *rt);
/* What lc__worker_spawn would send to w's host, without sending it: the command line and the
 * script (setup, environment, lifeline wrapper, the launcher's command), and (setup not NULL)
 * its setup text alone; for tests. */
int lc__worker_compose(lc_cluster *c, lc__worker *w, lc__buf *line, lc__buf *script,
                       lc__buf *setup);
/* Appends to b the sh text that writes the cluster's secret into `secret` (0600) in dir (made
 * 0700 first; NULL: the current directory), inside a subshell of umask 077 that the caller
 * closes with ")". It goes only into a script read through the channel, never a command line. */
int lc__cluster_secret_setup(lc_cluster *c, lc__buf *b, const char *dir);

/* ---- worker.c ---- */
/* Starts w again on its place (its ended process, if any, freed first) and waits until it is
 * ready; on failure its new process is ended (w->proc NULL, w->stopped set) and *res has how it
 * ended (exit_status -1 and no signal: it was not ready in time). */
int lc__worker_respawn(lc_cluster *c, lc__worker *w, lc_exec_result *res);
/* Ends w's process (its process group, awaited up to LC__WORKER_STOP_WAIT_MS) and lets it go; w
 * is not ready. Its place and state are the caller's (worker.c). NULL proc is fine. */
void lc__worker_end_process(lc__worker *w);

/* ---- master.c ---- */
void lc__cluster_workdirs_begin(lc_cluster *c);
int lc__master_runtime(lc_cluster *c);
void lc__master_drop(lc_cluster *c);
int lc__master_attempt(lc_cluster *c, int attempt, const lc__hostscan *sc, int *port);
int lc__master_await(lc_cluster *c, int port, int *retry);
int lc__master_finish(lc_cluster *c, size_t fwd_mark, int *retry);
/* Starts the master that ended again on its host and port (its tunnels stay) and waits until it
 * is ready. On failure the new process is ended and kept as c->master_proc (ended), and *res has
 * how it ended (exit_status -1 and no signal: it still ran, not ready in time). */
int lc__master_respawn(lc_cluster *c, lc_exec_result *res);

/* ---- workers.c ---- */
void lc__worker_clear(lc__worker *w);
int lc__workers_prepare(lc_cluster *c, int n, const lc__hostscan *sc, lc__wstart *st);
int lc__workers_spawn(lc_cluster *c, const lc__wstart *st);
void lc__workers_unspawn(lc_cluster *c, const lc__wstart *st);
void lc__workers_undo(lc_cluster *c, lc__wstart *st);
int lc__workers_finish(lc_cluster *c, const lc__wstart *st);

/* ---- prepare.c ---- */
/* The staging of st's workers: prepare_host on their hosts not prepared yet, all at once, then
 * prepare_worker of each, all at once (their directories made first). */
int lc__workers_stage(lc_cluster *c, lc__wstart *st);
/* Undoes lc__workers_stage: removes st's workers' directories (their processes have ended) and
 * forgets the hosts it prepared. Keeps the error detail. */
void lc__workers_unstage(lc_cluster *c, lc__wstart *st);
/* The staging of one worker at its place (a moved worker, or one back on its host):
 * prepare_host where its host is not prepared, then its prepare_worker. */
int lc__worker_stage(lc_cluster *c, lc__worker *w);
/* Forgets that rt was prepared (its directory went with a lost connection). */
void lc__cluster_unstage_host(lc_cluster *c, lc_runtime *rt);
/* Removes the working directories of the workers [from, to) on their hosts, all at once. */
void lc__workers_remove_dirs(lc_cluster *c, size_t from, size_t to);

/* ---- repair.c: lc_cluster_wait's repair (restart policy, backoff, master end, ttl) ---- */
/* Wall-clock ms since the Unix epoch (lc__now_ms, in internal.h, is monotonic). */
long long lc__wall_ms(void);
/* One look of lc_cluster_wait: the ttl, the hosts (lc__hosts_tick), the processes that ended
 * (each reported, restarted later or given up, as the policy says), and the restarts that are
 * due (they block until ready). Returns 0, or what lc_cluster_wait returns for an end that is
 * the caller's (LC_EREMOTE, -ETIME). *due: the earliest lc__now_ms a restart waits for, else 0;
 * *pending: a worker or the master waits for a restart or for its host. */
int lc__repair_look(lc_cluster *c, uint64_t *due, int *pending);
/* The ttl starts: lc_cluster_start succeeded. */
void lc__repair_started(lc_cluster *c);
void lc__restart_log_free(lc__restart_log *l);

/* ---- hosts.c: lost hosts and their workers ---- */
/* One look at the hosts, from lc_cluster_wait: a host that stopped answering is marked lost
 * (HOST_LOST) and its workers moved or parked (WAITING); a lost host that answers again is back
 * (HOST_BACK): its directory and staging are made again and its waiting workers started. Returns
 * 0 or an error for lc_cluster_wait to report. */
int lc__hosts_tick(lc_cluster *c);
/* Non-zero when worker w's end is its host's loss (hosts.c takes it: moved or WAITING), so the
 * restart policy does not count it. */
int lc__hosts_took(lc_cluster *c, lc__worker *w);
/* Frees what hosts.c keeps (lc_cluster_free). */
void lc__hosts_free(lc_cluster *c);

/* ---- client.c ---- */
/* The client directory (opts.client_dir checked and copied, or a private one made) and the
 * client env's lock. Returns 0, -EPERM (a client_dir open to others or not ours), -ENOENT,
 * -ENOMEM, mkdtemp's error. */
int lc__client_init(lc_cluster *c);
/* Removes the cluster's own client directory with its files; frees the client env. */
void lc__client_free(lc_cluster *c);

/* ---- nofile.c ---- */
/* The open files this process needs for the cluster with `more` workers added (an estimate: its
 * hosts' connections, the workers' listeners and tunnel connections, a base). */
size_t lc__cluster_nofile_need(lc_cluster *c, size_t more);
/* Before a start of `more` workers: raises the soft RLIMIT_NOFILE to the hard one when the
 * estimate needs it; -EMFILE (naming the limit, the need and how to raise it) when even the hard
 * limit is too low. */
int lc__cluster_nofile(lc_cluster *c, size_t more);

/* ---- readiness.c ---- */
int lc__workers_wait_listening(lc_cluster *c, size_t first, uint64_t deadline);

#endif /* LC_CLUSTER_INTERNAL_H */
