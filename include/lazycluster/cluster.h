/*
 * lazycluster/cluster.h - a master and its workers across a group, wired with tunnels so that
 * every process reaches every other on localhost.
 *
 * A cluster composes a group, port ranges, a master launcher and a worker launcher. The launchers
 * are strategy objects (structs of function pointers with a data pointer): they say what to run
 * and, optionally, how to tell it is ready. The cluster does the rest the same way for every
 * type: free ports from the ranges, placement (a slot per GPU, else per declared slot; spread over
 * the hosts or packed, see lc_placement), each worker's context (environment and cluster.json),
 * readiness polled with timeouts (never fixed sleeps), the tunnels, and cleanup. A new cluster
 * type is two such structs (see examples/custom_cluster.c), or a shared object exporting
 * lc_cluster_type_entry (see lc_cluster_type).
 *
 * Threads: any thread but the engine's; calls on one cluster must not overlap.
 *
 * Launcher methods, and what they may call:
 * - The blocking methods (command, wait_ready, prepare_host, prepare_worker, place, after_start)
 *   run on the thread that called lc_cluster_start* / lc_cluster_worker_restart. They may block,
 *   and may call any lc_runtime_*, lc_group_*, lc_task_*, lc_ports_* function, and of this
 *   cluster only the read-only accessors (lc_cluster_master_*, lc_cluster_worker*,
 * lc_cluster_group, the limits) and the counter (lc_cluster_counter_*). They must not start, stop,
 * restart or free this cluster.
 * - The line hooks (on_line of either launcher) run on the engine thread for every output line:
 *   they must not block, and of lc_* they may call only lc_cluster_counter_add.
 *
 * Lifetimes of what the cluster lends (borrowed pointers):
 * - lc_cluster_worker(c, i), and the lc_worker_info a worker method receives as w: during that
 *   call for a method; for lc_cluster_worker, until the next start, stop, restart or free of the
 *   cluster (the array may move when workers are added).
 * - lc_cluster_worker_process / lc_cluster_master_process: until that process is stopped or
 *   restarted, or the cluster is freed.
 * - lc_cluster_worker_runtime / lc_cluster_master_runtime: as long as the group holds the
 *   runtime (the master's own local runtime: until the cluster is freed).
 * - The line and host strings given to callbacks: during the call.
 *
 * A worker's context is the cluster as it was when that worker started: LAZYCLUSTER_WORKER_COUNT,
 * TF_CONFIG and its cluster.json count and list the workers started until then (its own start
 * included). Workers added later are not written into earlier workers' cluster.json; a type that
 * needs the current set asks its master (the Dask scheduler knows its workers).
 */
#ifndef LAZYCLUSTER_CLUSTER_H
#define LAZYCLUSTER_CLUSTER_H

#include "common.h"
#include "group.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_cluster lc_cluster;

/** One worker, as its launcher sees it. */
typedef struct lc_worker_info {
  int index;        /**< 0 .. count-1, over the cluster's life */
  int count;        /**< workers in the cluster once this start is done */
  const char *host; /**< the runtime it runs on */
  int port;         /**< its own port, free on every host */
  int gpu;          /**< the GPU it owns on its host, or -1 */
  int master_port;
  const char *workdir; /**< its working directory on its host (holds cluster.json) */
  int aux_port;        /**< a second port when the launcher asks for one (a Dask nanny), or 0 */
} lc_worker_info;

/** Where workers go: lc_cluster_options.placement. */
typedef enum lc_placement {
  /** The default: each worker goes to the host with the fewest workers of the cluster among those
   * with a free slot (ties: the first in group order), on its first free slot (once no slot is
   * free: the least used slots instead of the free ones): 4 workers on two 8-GPU hosts get GPUs
   * 0 and 1 of each. */
  LC_PLACE_SPREAD = 0,
  /** Each host's slots are filled, in group order, before the next host gets a worker (the first
   * free slot; once none is free, the first of the least used): 4 workers on two 8-GPU hosts get
   * GPUs 0-3 of the first. */
  LC_PLACE_PACK = 1,
} lc_placement;

/**
 * A place for one worker. A host with GPUs has one slot per GPU (gpu 0..N-1); a host without has
 * its declared slots (an inventory's slots=N), else one, as CPU slots (gpu -1). A host never gets
 * GPU slots it does not have. When every slot of the hosts that may take workers is used, another
 * round over the same slots begins (two workers then share a GPU, and the log says so), unless
 * lc_cluster_options.max_workers_per_host caps it (then the start fails with -ENOSPC).
 */
typedef struct lc_slot {
  const char *host; /**< the runtime's name */
  int gpu;          /**< the GPU of this slot on its host, or -1 */
  int workers;      /**< workers of the cluster on this slot already */
} lc_slot;

#define LC_MASTER_LAUNCHER_VERSION 4

typedef struct lc_master_launcher lc_master_launcher;

/** What to run as the master. */
struct lc_master_launcher {
  unsigned int version;
  void *data;
  /** Sets *out (freed with lc_free) to the shell command that runs the master on port. */
  int (*command)(lc_master_launcher *self, lc_cluster *cluster, int port, char **out);
  /** Optional: blocks until the master is ready; NULL: ready when its port accepts. */
  int (*wait_ready)(lc_master_launcher *self, lc_cluster *cluster, int port, int timeout_ms);
  /* version 2 */
  /** The type's master start limit in ms, used when lc_cluster_options.master_timeout_ms is 0
   * (a Python scheduler needs more than the library's 3 s on a busy machine); 0: the library's
   * (LC_CLUSTER_MASTER_TIMEOUT_MS). */
  int timeout_ms;
  /** The type's name, for messages ("the dask type's default master timeout"); NULL: none. */
  const char *type_name;
  /* version 3 */
  /** Optional: each line the master writes (stdout and stderr, without its newline), on the
   * engine thread, before lc_cluster_options.on_output gets it. For a type whose readiness is in
   * its master's log (a scheduler's "worker registered" lines): count them with
   * lc_cluster_counter_add, wait with lc_cluster_counter_wait. Must not block. */
  void (*on_line)(lc_master_launcher *self, lc_cluster *cluster, const char *line, size_t len,
                  lc_stream stream);
  /* version 4 */
  /** Non-zero: when the master ends on its own, the cluster starts it again on the same host and
   * port (its tunnels stay), under the restart policy of lc_cluster_options (restart,
   * max_restarts, backoff), and the workers stay; for a master whose workers reconnect by
   * themselves. 0 (the default): the master's end is the cluster's end (lc_cluster_wait). */
  int restartable;
};

#define LC_WORKER_LAUNCHER_VERSION 5

#define LC_WORKER_MESH 1 /**< lc_worker_launcher.mesh: each worker's port on every host */
#define LC_WORKER_HERE 2 /**< lc_worker_launcher.mesh: each worker's port on this machine */

typedef struct lc_worker_launcher lc_worker_launcher;

/** What to run as each worker. */
struct lc_worker_launcher {
  unsigned int version;
  void *data;
  /** Sets *out (lc_free) to the shell command that runs worker w (its context is also in the
   * environment: LAZYCLUSTER_MASTER_ADDR, _MASTER_PORT, _WORKER_INDEX, _WORKER_COUNT, _HOST,
   * _WORKDIR, _WORKER_PORT, TF_CONFIG, CUDA_VISIBLE_DEVICES). */
  int (*command)(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                 char **out);
  /** Optional: after workers were started (by lc_cluster_start*, or one by
   * lc_cluster_worker_restart), blocks until n workers are ready, n being every worker of the
   * cluster that runs now (those just started included; not those stopped); a launcher of
   * version 3 or older gets the workers of that start, as it did. NULL: ready when every started
   * worker's port listens. Returns 0, -ETIMEDOUT (the detail says what it waited
   * for), LC_EREMOTE. */
  int (*wait_ready)(lc_worker_launcher *self, lc_cluster *cluster, int n, int timeout_ms);
  /** LC_WORKER_MESH: every worker's port is reachable from every host; LC_WORKER_HERE: only
   * from this machine; 0: workers need no tunnels of their own. */
  int mesh;
  /** Non-zero: workers need no port of their own (readiness is then wait_ready's alone). */
  int portless;
  /** Non-zero: each worker also gets a second free port, aux_port. */
  int aux_port;
  /* version 2 */
  /** Non-zero: lc_cluster_start may start the workers as soon as the master's process runs,
   * before the master is ready (for workers that retry the master until it answers). */
  int early;
  /* version 3 */
  /** The type's worker start limit in ms (all workers of one start), used when
   * lc_cluster_options.worker_timeout_ms is 0; 0: the library's (LC_CLUSTER_WORKER_TIMEOUT_MS). */
  int timeout_ms;
  /* version 4 */
  /** Optional: each line worker index writes, on the engine thread, before
   * lc_cluster_options.on_output gets it. Must not block (see the top of this header). */
  void (*on_line)(lc_worker_launcher *self, lc_cluster *cluster, int index, const char *line,
                  size_t len, lc_stream stream);
  /** Optional: staging on one host, once per cluster, before the first worker starts there. Adds
   * steps to task (send files, write files, run commands; see group.h); the cluster runs the
   * tasks of every host of a start at once, with the group's fan-out, while the master starts.
   * workdir is the runtime's working directory on that host (lc_runtime_workdir: it exists, the
   * workers' directories are in it, it goes when the runtime is freed; a relative remote path is
   * not relative to it). A failed step fails the start and names the host and the step. */
  int (*prepare_host)(lc_worker_launcher *self, lc_cluster *cluster, const char *host,
                      const char *workdir, lc_task *task);
  /** Optional: staging for one worker, once per worker index, before it starts: steps into task
   * as prepare_host (w->workdir exists; w->master_port is not known yet: 0). The tasks of all
   * workers of a start run at once, after their hosts' prepare_host tasks. A start that fails
   * removes its workers' directories (with what these tasks put there) and forgets the hosts it
   * prepared (the next start prepares them again); what prepare_host put in the cluster's
   * directory goes when the group frees the runtime. */
  int (*prepare_worker)(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                        lc_task *task);
  /** Optional: the type's own placement. For worker index, returns the position in slots (the
   * cluster's slots after lc_cluster_options' policy filters: exclude_master_host and
   * max_workers_per_host) of the one it goes to, or a negative error (the detail says why);
   * NULL: the cluster's policy (lc_cluster_options.placement). */
  int (*place)(lc_worker_launcher *self, lc_cluster *cluster, int index, const lc_slot *slots,
               size_t nslots);
  /** Optional: after a start of workers first..first+n-1 is ready (and their MASTER_UP /
   * WORKER_UP events went out): the type's last word (print an address, submit a warm-up job).
   * An error fails the start, and what it started is stopped again. */
  int (*after_start)(lc_worker_launcher *self, lc_cluster *cluster, size_t first, size_t n);
  /* version 5 */
  /** Optional: the type's graceful way to let workers go before lc_cluster_scale stops them (Dask:
   * the scheduler retires them, so their data moves to the others first). workers are the
   * indices, n of them; blocks at most timeout_ms. Whatever it returns, the cluster then stops
   * those workers (a worker that ended by itself meanwhile is not reported as a failure); an
   * error is logged with its detail. NULL: they are stopped at once. */
  int (*retire)(lc_worker_launcher *self, lc_cluster *cluster, const size_t *workers, size_t n,
                int timeout_ms);
};

/** Output of every process of the cluster (options version 1 to 3): tag is "HOST master" or
 * "HOST worker-N". Kept for those callers; new code uses lc_cluster_output_cb. */
typedef void (*lc_cluster_line_cb)(const char *tag, const char *line, size_t len, lc_stream stream,
                                   void *payload);

/** One line of a process of the cluster: index is the worker's, or -1 for the master; host is
 * the runtime's name; line has no newline. Engine thread: must not block. */
typedef void (*lc_cluster_output_cb)(lc_cluster *cluster, int index, const char *host,
                                     const char *line, size_t len, lc_stream stream, void *payload);

/** What happened to the cluster, for lc_cluster_options.on_event. */
typedef enum lc_cluster_event {
  LC_CLUSTER_MASTER_UP = 1,   /**< the master is ready and reachable on every host */
  LC_CLUSTER_WORKER_UP = 2,   /**< worker index is ready */
  LC_CLUSTER_MASTER_DOWN = 3, /**< the master's process ended on its own (not stopped by us) */
  LC_CLUSTER_WORKER_DOWN = 4, /**< worker index's process ended on its own */
  /* Options version 5 and later only (an older caller's switch never sees these): */
  LC_CLUSTER_WORKER_RESTARTED = 5,  /**< worker index was started again (restart policy) and is
                                     * ready */
  LC_CLUSTER_WORKER_FAILED = 6,     /**< worker index is given up: it ended and the policy says no
                                     * more (never, on-failure with status 0, or max_restarts) */
  LC_CLUSTER_HOST_LOST = 7,         /**< host index (its position in the group) stopped answering;
                                     * its workers moved (WORKER_MOVED) or wait for it */
  LC_CLUSTER_HOST_BACK = 8,         /**< host index answers again; its tunnels are back and its
                                     * waiting workers start again */
  LC_CLUSTER_WORKER_MOVED = 9,      /**< worker index runs on another host now (a lost host's) */
  LC_CLUSTER_MASTER_RESTARTED = 10, /**< the master (index -1) was started again (restartable) */
  LC_CLUSTER_EXPIRED = 11,          /**< the cluster's ttl is up (index -1) */
  LC_CLUSTER_WORKER_REMOVED = 12,   /**< worker index was stopped by lc_cluster_scale */
} lc_cluster_event;

/** Called on the thread in a call of this cluster: UP events during the start that made the
 * process ready, DOWN events during the lc_cluster_wait (or start) that found the end, once per
 * end. index is -1 for the master. Must not call lc_cluster_* of this cluster except its
 * read-only accessors. */
typedef void (*lc_cluster_event_cb)(lc_cluster *cluster, lc_cluster_event event, int index,
                                    void *payload);

#define LC_CLUSTER_OPTIONS_VERSION 6

/** The library's start limits, for a type that states none. */
#define LC_CLUSTER_MASTER_TIMEOUT_MS 3000
/*
 * The default ports: above Linux's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
 * default), so that no connection made on a host (a tunnel's own, through sshd, or a Dask
 * worker's) is given one of them as its local port between the moment a port is picked as free
 * and the moment the master or a worker binds it: such a port cannot be bound, SO_REUSEADDR or
 * not. (The defaults were 60000 and 60001-60199, inside that range.)
 */
#define LC_CLUSTER_MASTER_PORT 61000
#define LC_CLUSTER_WORKER_PORTS "61001-61199"
#define LC_CLUSTER_WORKER_TIMEOUT_MS 30000

/** Options of a cluster. A zero field means the default. */
typedef struct lc_cluster_options {
  unsigned int version;
  /** The runtime that runs the master; NULL: this machine (the group's "localhost", else a
   * runtime of the cluster's own whose umask is the union of the group's runtimes' umasks, as
   * strict as each of them: lc_runtime_options.umask). */
  const char *master_host;
  /** The master's port; default LC_CLUSTER_MASTER_PORT (61000); another free one from master_ports
   * when it is taken. */
  int master_port;
  /** Non-zero: master_port or nothing (-EADDRINUSE when it is taken). */
  int master_port_fixed;
  /** Worker ports; default LC_CLUSTER_WORKER_PORTS ("61001-61199"). */
  const char *worker_ports;
  /** Master start limit in ms; default: the master launcher's timeout_ms, else
   * LC_CLUSTER_MASTER_TIMEOUT_MS. */
  int master_timeout_ms;
  /** Worker start limit in ms (all workers of one start); default: the worker launcher's
   * timeout_ms, else LC_CLUSTER_WORKER_TIMEOUT_MS. */
  int worker_timeout_ms;
  /** Every process's output lines (for --debug); NULL: kept only for error messages. */
  lc_cluster_line_cb on_line;
  void *payload;
  /** Extra "NAME=VALUE" for every process; NULL-terminated. */
  const char *const *env;
  /* version 2 */
  /** Progress of a start (gets payload too); NULL: none. */
  lc_cluster_event_cb on_event;
  /* version 3 */
  /** How a timeout's error detail names what changes the master's / the workers' start limit
   * (a tool's own option, "--master-timeout S"); NULL: the field of these options
   * ("lc_cluster_options.master_timeout_ms"). Copied. */
  const char *master_timeout_option;
  const char *worker_timeout_option;
  /* version 4 */
  /** Every process's output lines with the worker's index; NULL: none (on_line, if set, still
   * gets them with a tag). Gets payload. */
  lc_cluster_output_cb on_output;
  /** LC_PLACE_SPREAD (0, the default) or LC_PLACE_PACK; a worker launcher's place method
   * overrides it. */
  int placement;
  /** At most this many workers of the cluster on one host; 0: no cap. */
  int max_workers_per_host;
  /** Non-zero: no worker goes to the master's host (-ENOSPC when no other host is left). */
  int exclude_master_host;
  /* version 5: repair (done by lc_cluster_wait) and time limit */
  /** What happens when a worker ends on its own: lc_restart_policy; 0 is
   * LC_RESTART_ON_FAILURE. With options version 1-4 the policy is LC_RESTART_NEVER (what those
   * callers got). */
  int restart;
  /** At most this many restarts of one worker within restart_window_ms; one more end gives it up
   * (WORKER_FAILED). 0: 5; negative: no limit. */
  int max_restarts;
  /** The window of max_restarts in ms; 0: 10 minutes. */
  int restart_window_ms;
  /** The wait before a worker's first restart in ms, doubled at each further restart within the
   * window, at most 60 s; 0: 1000 ms; negative: no wait. */
  int restart_backoff_ms;
  /** What workers of a lost host do: lc_host_loss; 0 is LC_HOST_LOSS_MOVE. */
  int host_loss;
  /** The cluster's time to live in ms from the end of lc_cluster_start; 0: no limit. When it is
   * up, lc_cluster_wait returns -ETIME (after the EXPIRED event); the caller frees the cluster. */
  long long ttl_ms;
  /* version 6: security (docs/security.md) */
  /** Non-zero: the type may leave its own connections unauthenticated (Dask: plain tcp:// instead
   * of mutual TLS), so that any user of any host who reaches a port of the cluster can use it.
   * The cluster still makes its secret. Types read it with lc_cluster_is_insecure. */
  int insecure;
  /** A directory on this machine, the caller's and mode 0700 (lc_cluster_new refuses another),
   * where the type writes what a client of the cluster on this machine needs (Dask: the CA, the
   * client's certificate and key, 0600), named by lc_cluster_client_env; the caller removes it.
   * NULL: the cluster makes a private one (0700, under $XDG_RUNTIME_DIR, else $TMPDIR, else
   * /tmp) and removes it, with the files in it, at lc_cluster_free. Copied. */
  const char *client_dir;
} lc_cluster_options;

/** lc_cluster_options.restart: what happens when a worker's process ends on its own. */
typedef enum lc_restart_policy {
  LC_RESTART_ON_FAILURE = 0, /**< the default: again when it failed (non-zero status, a signal,
                              * its host lost), not when it exited with status 0 */
  LC_RESTART_NEVER = 1,      /**< never: its end is reported (WORKER_FAILED) */
  LC_RESTART_ALWAYS = 2,     /**< again whatever its status */
} lc_restart_policy;

/** lc_cluster_options.host_loss: where a lost host's workers go. */
typedef enum lc_host_loss {
  /** The default: each to a free slot (one no worker of the cluster uses) of another host that
   * answers, keeping its index and GPU count, its port when that is free there, else a new one
   * (its context then names the new host and port; the other workers' context is not rewritten);
   * a worker that finds no free slot waits for its host. */
  LC_HOST_LOSS_MOVE = 0,
  /** Every worker waits for its host and starts there again when it answers. */
  LC_HOST_LOSS_WAIT = 1,
} lc_host_loss;

#define LC_CLUSTER_OPTIONS_INIT                                                                    \
  { .version = LC_CLUSTER_OPTIONS_VERSION }

/** Initialises opts to the defaults. */
LC_EXTERN void lc_cluster_options_init(lc_cluster_options *opts);

/**
 * A cluster over group (borrowed: free the cluster first) with the two launchers (borrowed
 * until the cluster is freed). Starts nothing but the client directory (options' client_dir).
 * Returns 0, -EINVAL (a launcher without command, bad port ranges: the detail quotes them),
 * -EPERM (a client_dir not this user's or open to others: the detail names it and its mode),
 * -ENOMEM.
 */
LC_EXTERN int lc_cluster_new(lc_cluster **out, lc_group *group, lc_master_launcher *master,
                             lc_worker_launcher *worker, const lc_cluster_options *opts);

/**
 * Starts the master and n workers, and waits until all are ready. Overlaps what it can: the
 * workers' ports and working directories are made while the master starts, and a launcher marked
 * `early` has its workers started before the master is ready. Errors as the two calls below.
 */
LC_EXTERN int lc_cluster_start(lc_cluster *c, int n);

/**
 * Starts the master and waits until it is ready; its port is then reachable as localhost:PORT on
 * every host. Returns 0, -EADDRINUSE (fixed port taken, naming where), LC_ENOPORTS,
 * -ETIMEDOUT (not ready in time: the detail names the limit, where it came from and what changes
 * it, and has the master's last stderr lines and exit status).
 */
LC_EXTERN int lc_cluster_start_master(lc_cluster *c);

/**
 * Starts n more workers (the master must be up) and waits until they are ready. A worker that
 * fails names its host, index, exit status and last stderr lines; everything this call started
 * is stopped again. Returns 0, LC_EREMOTE (a worker died), -ETIMEDOUT (the detail names the
 * limit, where it came from and what changes it), LC_ENOPORTS.
 */
LC_EXTERN int lc_cluster_start_workers(lc_cluster *c, int n);

/**
 * Holds the cluster for up to timeout_ms (negative: forever; 0: one look) and repairs it: the
 * caller of a long-lived cluster calls it in a loop (the blocking launcher methods of a restart
 * run in it: a restart that is due blocks until that process is ready or failed, which may take
 * the call past timeout_ms; a backoff never does).
 *
 * A worker that ends on its own gets WORKER_DOWN, then, as the restart policy says, is started
 * again after its backoff (WORKER_RESTARTED once it is ready) or given up (WORKER_FAILED). A
 * host that stops answering gets HOST_LOST and its workers move or wait (lc_host_loss); when it
 * answers again, HOST_BACK and they start there again. These are not errors: the wait goes on.
 *
 * Returns -ETIMEDOUT when the time passed (the cluster may be whole or under repair);
 * LC_EREMOTE once per end that is the caller's to handle: the master ended (and is not
 * restartable, or was given up: the detail names its exit status and last stderr lines; the
 * cluster has failed, free it), or a worker given up ("lab3 worker-2 ended: it exited with status
 * 1" with its last stderr lines; the rest run on); -ETIME when the ttl is up; -EINVAL when
 * nothing runs any more. A process stopped by lc_cluster_worker_stop or lc_cluster_scale is not
 * reported.
 *
 * With options of version 1-4 the policy is LC_RESTART_NEVER: every end is reported as before.
 */
LC_EXTERN int lc_cluster_wait(lc_cluster *c, int timeout_ms);

/**
 * Cancels the cluster: a start in progress (lc_cluster_start and friends: the master's wait, the
 * port search, the workers' starts and readiness, the tunnels) stops at its next step, undoes what
 * it started and returns LC_ECANCELED; every process the start made (master, workers, staging,
 * work directories) is told to stop now, so no step waits out its limit, while other processes on
 * the same hosts (a job queue, lc_runtime_spawn outside the cluster) are left alone;
 * lc_cluster_wait returns LC_ECANCELED (no repair). The cluster must still be freed.
 * Async-signal-safe and callable from any thread (an atomic flag and a uv_async_send), also while
 * another thread is inside lc_cluster_start; it is not undone. Returns 0, or -EINVAL for NULL.
 */
LC_EXTERN int lc_cluster_cancel(lc_cluster *c);

/**
 * Sets the number of workers to n: more are started as lc_cluster_start_workers starts them;
 * fewer stop the highest indices (after the worker launcher's retire, if it has one) and remove
 * them: their ports, tunnels and directories go, and the next workers added take those indices
 * again (WORKER_REMOVED each). Counts every worker that is not removed (running, restarting or
 * waiting for its host). Returns 0, -EINVAL (n < 0), the errors of lc_cluster_start_workers.
 */
LC_EXTERN int lc_cluster_scale(lc_cluster *c, int n);

/** Milliseconds until the ttl is up (0 when it is), or -1 without a ttl. */
LC_EXTERN long long lc_cluster_time_left_ms(const lc_cluster *c);

/** What a worker is doing, for lc_worker_status.state. */
typedef enum lc_worker_state {
  LC_WORKER_STARTING = 1, /**< its process runs, not ready yet */
  LC_WORKER_RUNNING = 2,  /**< ready */
  LC_WORKER_BACKOFF = 3,  /**< ended; starts again when its backoff is over */
  LC_WORKER_WAITING = 4,  /**< its host is lost and it found no other: waits for the host */
  LC_WORKER_STOPPED = 5,  /**< stopped by lc_cluster_worker_stop */
  LC_WORKER_FAILED = 6,   /**< ended and given up (or ended with status 0 under on-failure) */
} lc_worker_state;

#define LC_WORKER_STATUS_VERSION 1

/** A worker as lc_cluster_worker_status tells it. Strings borrowed as lc_cluster_worker's. */
typedef struct lc_worker_status {
  unsigned int version; /**< set by the caller: LC_WORKER_STATUS_VERSION */
  int state;            /**< lc_worker_state */
  const char *host;     /**< where it runs (or last ran / waits) */
  int port, gpu;        /**< as lc_worker_info */
  long pid;             /**< its process on its host (lc_process_pid), 0 when none or unknown */
  int restarts;         /**< times it was started again, over the cluster's life */
  long long started_ms; /**< when its current process started (ms since the Unix epoch), or 0 */
  /** Its last end, when it ended at least once: exit status, or the signal (0 when it exited). */
  int ended, last_status, last_signal;
  /** How its last end was worded ("it was ended by signal 9", "its host lab2 was lost"), or "". */
  const char *last_end;
} lc_worker_status;

/** Fills *out (out->version set by the caller) for worker i. Returns 0, -ENOENT, -EINVAL. */
LC_EXTERN int lc_cluster_worker_status(const lc_cluster *c, size_t i, lc_worker_status *out);

#define LC_HOST_STATUS_VERSION 1

/** A host of the cluster's group as the cluster sees it. */
typedef struct lc_host_status {
  unsigned int version; /**< set by the caller: LC_HOST_STATUS_VERSION */
  const char *name;     /**< borrowed, as lc_runtime_name */
  int connected;        /**< it answers now */
  int reconnecting;     /**< lost, and the runtime tries to come back */
  long long lost_ms;    /**< since when it is lost (ms since the Unix epoch), or 0 */
  int workers;          /**< workers of the cluster placed there now */
} lc_host_status;

/** Fills *out for host i (position in the group). Returns 0, -ENOENT, -EINVAL. */
LC_EXTERN int lc_cluster_host_status(const lc_cluster *c, size_t i, lc_host_status *out);

/** Restarts of the master so far (a restartable master), else 0. */
LC_EXTERN int lc_cluster_master_restarts(const lc_cluster *c);

/* ---- one worker ----------------------------------------------------------------------------- */

/**
 * Stops worker i (its process group ends; waits for that) and keeps its place: host, GPU, port,
 * working directory and tunnels stay the cluster's, for lc_cluster_worker_restart. No DOWN event
 * and no lc_cluster_wait report for it. Returns 0, -ENOENT (no worker i), -EINVAL (not
 * running: already stopped or ended).
 */
LC_EXTERN int lc_cluster_worker_stop(lc_cluster *c, size_t i);

/**
 * Starts worker i again on its place (stopping it first if it runs) and waits until it is ready
 * (the worker launcher's wait_ready with every running worker, else its port). Returns 0,
 * -ENOENT, LC_EREMOTE (it died: exit status and last stderr lines), -ETIMEDOUT.
 */
LC_EXTERN int lc_cluster_worker_restart(lc_cluster *c, size_t i);

/** Worker i's process while it runs or until it is reported ended, else NULL. Borrowed (see
 * the top of this header). */
LC_EXTERN lc_process *lc_cluster_worker_process(const lc_cluster *c, size_t i);

/** The runtime worker i runs on, or NULL. Borrowed. */
LC_EXTERN lc_runtime *lc_cluster_worker_runtime(const lc_cluster *c, size_t i);

/** The master's process, or NULL before it started. Borrowed. */
LC_EXTERN lc_process *lc_cluster_master_process(const lc_cluster *c);

/** The runtime the master runs on, or NULL before it started. Borrowed. */
LC_EXTERN lc_runtime *lc_cluster_master_runtime(const lc_cluster *c);

/** The start limits in force, in ms: the options', else the type's, else the library's. */
LC_EXTERN int lc_cluster_master_timeout_ms(const lc_cluster *c);
LC_EXTERN int lc_cluster_worker_timeout_ms(const lc_cluster *c);

/* ---- for types: a counter moved by line hooks ----------------------------------------------- */

/**
 * Adds delta to the cluster's counter and returns the new value. Any thread, also the engine's
 * (a line hook). The counter is 0 when the master starts.
 */
LC_EXTERN long lc_cluster_counter_add(lc_cluster *c, long delta);

/**
 * Waits until the counter is at least n: 0; LC_EREMOTE as soon as a process of the cluster ends
 * (the detail names it); -ETIMEDOUT (the detail gives the count). *changes (may be NULL): the
 * number of lc_cluster_counter_add calls since the master started (0: no counted line came).
 */
LC_EXTERN int lc_cluster_counter_wait(lc_cluster *c, long n, int timeout_ms, long *changes);

/** The master's port, or 0 before it started. */
LC_EXTERN int lc_cluster_master_port(const lc_cluster *c);

/** The host the master runs on ("localhost" for this machine). */
LC_EXTERN const char *lc_cluster_master_host(const lc_cluster *c);

/** The group. Borrowed. */
LC_EXTERN lc_group *lc_cluster_group(const lc_cluster *c);

/** Number of workers started. */
LC_EXTERN size_t lc_cluster_worker_count(const lc_cluster *c);

/** The i-th worker, or NULL. Borrowed. */
LC_EXTERN const lc_worker_info *lc_cluster_worker(const lc_cluster *c, size_t i);

/** What the cluster did, one event a line ("lab1 worker-3 ready on port 60004"). Borrowed. */
LC_EXTERN const char *lc_cluster_log(const lc_cluster *c);

/**
 * The cluster's secret (LC_SECRET_LEN hex characters, made from the system's CSPRNG at
 * lc_cluster_new; security.h). Every process of the cluster finds it in the file that
 * LAZYCLUSTER_SECRET_FILE names (0600, in its 0700 directory) and in cluster.json ("secret").
 * Borrowed: lives as long as the cluster. Never NULL.
 */
LC_EXTERN const char *lc_cluster_secret(const lc_cluster *c);

/** Non-zero when lc_cluster_options.insecure was set. */
LC_EXTERN int lc_cluster_is_insecure(const lc_cluster *c);

/** The client directory: lc_cluster_options.client_dir, or the private one the cluster made.
 * Borrowed: lives as long as the cluster. Never NULL for a cluster. */
LC_EXTERN const char *lc_cluster_client_dir(const lc_cluster *c);

/**
 * For a type: sets (or, with value NULL, removes) one variable of what a client on this machine
 * needs to reach the cluster (DASK_SCHEDULER_ADDRESS, the paths of TLS files). Both are copied.
 * Any thread; a type sets them from its methods. Returns 0, -EINVAL (a bad name: letters,
 * digits and '_', not starting with a digit), -ENOMEM.
 */
LC_EXTERN int lc_cluster_set_client_env(lc_cluster *c, const char *name, const char *value);

/**
 * What a client on this machine needs besides LAZYCLUSTER_MASTER_ADDR and _PORT, as
 * NULL-terminated "NAME=VALUE" strings (`lazyclusterctl env` prints them, `run` hands them to its
 * driver). Borrowed until the next lc_cluster_set_client_env or lc_cluster_free. Never NULL.
 */
LC_EXTERN const char *const *lc_cluster_client_env(const lc_cluster *c);

/**
 * Stops the workers, then the master (their process groups end), closes the cluster's tunnels
 * and releases its ports. The group stays. NULL is fine.
 */
LC_EXTERN void lc_cluster_free(lc_cluster *c);

/* ---- cluster types -------------------------------------------------------------------------- */

/*
 * A cluster type: a name and a maker of its two launchers. The built-in ones come from
 * lc_cluster_type_find; one in C from a shared object (a plug-in) through its entry point:
 *
 *   #include <lazycluster.h>
 *
 *   static const lc_cluster_type greeter = {
 *       .version = LC_CLUSTER_TYPE_VERSION, .name = "greeter", .make = make, .release = release};
 *
 *   __attribute__((visibility("default")))
 *   const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
 *     return library_version >= LC_VERSION_NUMBER ? &greeter : NULL;  // NULL: too old for us
 *   }
 *
 * built with `cc -shared -fPIC -o libgreeter.so greeter.c` and started with
 * `lazyclusterctl start --type ./libgreeter.so`. The library calls the entry point with its own
 * version number (LC_VERSION_NUMBER) and reads only `version` of the struct returned until it
 * knows that version: a plug-in built against newer headers is refused with a message naming
 * both versions, never read past its end. The struct is the plug-in's own (static), borrowed for
 * as long as the plug-in stays loaded, which is the life of the process.
 *
 * A plug-in may call the whole public API (lc_shell_quote, lc_runtime_exec, lc_error_set, ...):
 * it leaves those symbols undefined (do not link it against liblazycluster: a second copy of
 * the library would have its own engine and error detail) and takes them from the program that
 * loads it. lazyclusterctl exports them; so does a program linked against liblazycluster.so,
 * or one linked statically with its symbols exported (-rdynamic).
 *
 * Version 1 was filled in by `int lc_cluster_type_v1(lc_cluster_type *out)` into the caller's
 * struct; this library refuses such a plug-in with a message saying how to port it.
 */

/** The struct's version these headers define; the library reads versions 1 to this one. */
#define LC_CLUSTER_TYPE_VERSION 2

/** The name of the function a plug-in exports, as a string for dlsym. */
#define LC_CLUSTER_TYPE_ENTRY "lc_cluster_type_entry"

/** A named cluster type: what `lazyclusterctl start --type NAME` builds. */
typedef struct lc_cluster_type {
  /** LC_CLUSTER_TYPE_VERSION of the headers the type was built with; the library reads it first. */
  unsigned int version;
  /** The type's name ("greeter"): messages and type_name use it. Not NULL, not empty. */
  const char *name;
  /**
   * Makes the launchers; args are the type's options ("KEY=VALUE", NULL-terminated; borrowed for
   * the call). On failure it returns a negative code and sets the detail with lc_error_set
   * ("greeter: --type-arg colour=red: unknown; want greeting=TEXT ..."). Not NULL.
   */
  int (*make)(lc_master_launcher **master, lc_worker_launcher **worker, const char *const *args);
  /** Frees what make made; the cluster using them is freed first. May be NULL. */
  void (*release)(lc_master_launcher *master, lc_worker_launcher *worker);
} lc_cluster_type;

/**
 * The entry point a plug-in exports, named lc_cluster_type_entry (LC_CLUSTER_TYPE_ENTRY).
 * library_version is the loading library's LC_VERSION_NUMBER. Returns the plug-in's static type,
 * or NULL to refuse a library too old for it: the loader then says the plug-in refused that
 * library version, followed by the detail the plug-in set with lc_error_set, if any.
 */
typedef const lc_cluster_type *(*lc_cluster_type_entry_fn)(unsigned int library_version);

/** For a type's make: the VALUE of the first "KEY=VALUE" among args (NULL-terminated; NULL is
 * fine), or NULL when key is not there. Borrowed from args. */
LC_EXTERN const char *lc_cluster_type_arg(const char *const *args, const char *key);

/** The built-in type of that name ("command", "dask"), or NULL. Static storage. */
LC_EXTERN const lc_cluster_type *lc_cluster_type_find(const char *name);

/**
 * Loads a type from a shared object: dlopen, then its lc_cluster_type_entry, then the version of
 * the struct it returns. path must contain a slash ("./libx.so"): it is never looked up in the
 * library search path. The file and every directory above it must be this user's or root's and
 * not writable by group or others (a directory with the sticky bit, such as /tmp, may be), as
 * ssh checks a key; what is loaded is the file checked. *out is the plug-in's own struct,
 * borrowed: the object stays loaded for the life of the process. On failure *out is NULL, the
 * object is unloaded, and the detail names path and the cause: -EPERM (the file or directory at
 * fault, its owner and mode), it cannot be loaded (-ENOENT; a name without a slash; an lc_*
 * symbol it needs that this program does not export), or LC_ECONFIG: no entry point (or only the
 * version-1 lc_cluster_type_v1), the plug-in refused this library's version, a struct version
 * this library does not know, or no name or make.
 */
LC_EXTERN int lc_cluster_type_load(const lc_cluster_type **out, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_CLUSTER_H */
