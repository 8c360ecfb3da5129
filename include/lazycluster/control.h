/*
 * lazycluster/control.h - clusters that outlive a shell: a per-user state directory with one entry
 * per named cluster, and a control socket through which any program of the same user sees, steers
 * and stops the cluster that a supervisor holds (`lazyclusterctl start`, detached or not, or a
 * program of your own that holds an lc_cluster).
 *
 * The state directory is $XDG_RUNTIME_DIR/lazycluster, else ~/.cache/lazycluster/run (made
 * 0700; one owned by another user, or open to group or others, is refused). In it, one directory
 * per cluster, NAME/:
 *
 *   lock           flock'ed by the supervisor while it lives: a free lock means it is gone
 *   info           "pid PID\ncreated MS\ntype TYPE\n": written when the name is claimed
 *   control.sock   the supervisor's socket, mode 0600; a peer of another uid is refused
 *                  (SO_PEERCRED) and the refusal logged
 *   ended          why a cluster ended when it did not end by a stop ("the master ended: ..."),
 *                  written by lc_control_free(ctl, why); kept until lc_control_list cleans it
 *   logs/          master.log, worker-N.log, cluster.log (events), each rotated to FILE.1 at
 *                  lc_control_options.log_max_bytes: a long-lived cluster cannot fill a disk
 *
 * A log line is "MS STREAM [HOST TAG] TEXT\n": MS the time in ms since the Unix epoch, STREAM
 * 'o' (stdout), 'e' (stderr) or 'c' (an event of the cluster), TAG "master", "worker-N" or
 * "cluster" (HOST is "-" for an event). lc_control_log_format turns one into what a user sees.
 *
 * The protocol on the socket: one request line, one reply, then the supervisor closes. The reply
 * starts with "ok\n" or "error MESSAGE\n"; lc_control_request strips that line. Requests:
 *
 *   status           the cluster, as text for a terminal
 *   status json      one JSON object: name, state, type, supervisor_pid, age_s, time_left_s
 *                    (-1: no ttl), master {host, port, pid, restarts, state}, workers [{index, host,
 *                    port, gpu, state, pid, restarts, uptime_s, last_exit}], hosts [{name,
 *                    connected, lost_s, reconnecting, workers}], events [the last lines of
 *                    cluster.log]
 *   summary          one line for `list`: NAME STATE UP/WANTED HOSTS MASTER AGE LEFT
 *   summary json     the same as one JSON object (name, state, workers_up, workers_wanted, hosts,
 *                    master, age_s, time_left_s, supervisor_pid, type)
 *   env              shell export lines: LAZYCLUSTER_MASTER_ADDR, LAZYCLUSTER_MASTER_PORT, and
 *                    those the supervisor set with lc_control_set_env (Dask's
 *                    DASK_SCHEDULER_ADDRESS), values shell-quoted
 *   scale N          lc_cluster_scale(N); the reply comes when it is done
 *   stop             the reply ("stopped") comes once the supervisor tore the cluster down
 *
 * Threads: an lc_control belongs to the thread that holds its cluster (the one calling
 * lc_cluster_wait), except lc_control_log_line and lc_control_log_event: any thread.
 */
#ifndef LAZYCLUSTER_CONTROL_H
#define LAZYCLUSTER_CONTROL_H

#include "cluster.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The state directory (made 0700 where missing). *out is lc_free'd. Returns 0; -EACCES (owned by
 * another user, or open to group or others: the detail names it and its mode); -ENOENT (no
 * $XDG_RUNTIME_DIR and no $HOME); errors of mkdir.
 */
LC_EXTERN int lc_state_dir(char **out);

/* ---- the supervisor's side ------------------------------------------------------------------ */

typedef struct lc_control lc_control;

#define LC_CONTROL_OPTIONS_VERSION 1

typedef struct lc_control_options {
  unsigned int version;
  /** The cluster's name: letters, digits, '.', '_', '-', at most 64, not starting with '.' or
   * '-'; NULL: one is made up (printed by the caller: lc_control_name). */
  const char *name;
  /** The state directory; NULL: lc_state_dir's. */
  const char *state_dir;
  /** A log file's size at which it is rotated (FILE -> FILE.1, the older FILE.1 dropped); 0:
   * 8 MiB. */
  long long log_max_bytes;
  /** The cluster type's name for status and list ("dask"); NULL: "". Copied. */
  const char *type_name;
} lc_control_options;

#define LC_CONTROL_OPTIONS_INIT                                                                    \
  { .version = LC_CONTROL_OPTIONS_VERSION }

/**
 * Claims the name (NAME/ made, its lock taken, info written), opens the log directory and starts
 * listening on NAME/control.sock. Starts nothing else: attach the cluster once it exists. An
 * entry of that name whose lock is free (its supervisor died) is removed first. Returns 0;
 * -EEXIST (a live cluster has that name: the detail names it, its supervisor's pid and age);
 * -EINVAL (a bad name: the detail quotes it and says what is allowed); the errors of
 * lc_state_dir; -ENOMEM.
 */
LC_EXTERN int lc_control_new(lc_control **out, const lc_control_options *opts);

/** The cluster's name. Borrowed. */
LC_EXTERN const char *lc_control_name(const lc_control *ctl);

/** The cluster's directory (STATE/NAME) and its logs directory. Borrowed. */
LC_EXTERN const char *lc_control_dir(const lc_control *ctl);
LC_EXTERN const char *lc_control_logs_dir(const lc_control *ctl);

/** The cluster the requests are about (borrowed; NULL: none yet, status says so). */
LC_EXTERN void lc_control_attach(lc_control *ctl, lc_cluster *c);

/** The state that status and list show: "starting", "running", "degraded", "stopping",
 * "failed"; why (may be NULL) is shown beside it. Copied. */
LC_EXTERN void lc_control_set_state(lc_control *ctl, const char *state, const char *why);

/** Extra "NAME=VALUE" pairs (NULL-terminated) that `env` prints after the master's; copied. */
LC_EXTERN int lc_control_set_env(lc_control *ctl, const char *const *env);

/** One output line of a process into its log file (index -1: the master). Any thread; for an
 * lc_cluster_output_cb. */
LC_EXTERN void lc_control_log_line(lc_control *ctl, int index, const char *host, const char *line,
                                   size_t len, lc_stream stream);

/** One event into cluster.log ("lab2 lost: no answer for 30 s"). Any thread. */
LC_EXTERN void lc_control_log_event(lc_control *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** The listening socket, for a caller's poll (readable: a request waits). */
LC_EXTERN int lc_control_fd(const lc_control *ctl);

/** lc_control_serve's return when a stop was asked. */
#define LC_CONTROL_STOP 1

/**
 * Answers the requests that wait, waiting up to timeout_ms (0: only those there now) for the
 * first. Returns 0; LC_CONTROL_STOP when a client asked to stop (the caller tears the cluster
 * down, then lc_control_free answers that client); a negative error of the socket.
 */
LC_EXTERN int lc_control_serve(lc_control *ctl, int timeout_ms);

/**
 * Answers a waiting stop request ("stopped"), closes the socket and gives the name back. why NULL:
 * the cluster was stopped, its directory goes (logs too); else why is written to NAME/ended and
 * the directory stays for list and status to show. NULL ctl is fine.
 */
LC_EXTERN void lc_control_free(lc_control *ctl, const char *why);

/* ---- any program of the same user ----------------------------------------------------------- */

/** One cluster of the state directory. */
typedef struct lc_control_entry {
  char *name;
  long pid;            /**< its supervisor's */
  int alive;           /**< its supervisor holds the lock */
  long long created_ms; /**< since the Unix epoch */
  char *type;          /**< or "" */
  char *ended;         /**< why it ended (NAME/ended), or NULL (alive, or gone without a word) */
} lc_control_entry;

/**
 * This user's clusters, sorted by name. clean non-zero: the entries of clusters that are not
 * alive are removed after they were read (they are still returned, once). state_dir NULL: the
 * default. Returns 0 (*n may be 0) or an error of lc_state_dir.
 */
LC_EXTERN int lc_control_list(lc_control_entry **out, size_t *n, const char *state_dir, int clean);
LC_EXTERN void lc_control_entries_free(lc_control_entry *entries, size_t n);

/**
 * Sends request to the cluster name's supervisor and waits up to timeout_ms (negative: forever)
 * for the reply (*reply: its body, lc_free'd). name NULL: the one cluster that is alive (-EINVAL
 * when there are none or several; the detail names them). Returns 0; -ENOENT (no such cluster:
 * the detail names those there); LC_ECLOSED (its supervisor is gone: the detail says why it
 * ended, when known); LC_EREMOTE (the supervisor answered an error: the detail is its message);
 * -ETIMEDOUT; -EACCES.
 */
LC_EXTERN int lc_control_request(char **reply, const char *state_dir, const char *name,
                                 const char *request, int timeout_ms);

/** Waits up to timeout_ms (negative: forever) until the supervisor of name is gone (its lock
 * free). Returns 0, -ETIMEDOUT. */
LC_EXTERN int lc_control_wait_gone(const char *state_dir, const char *name, int timeout_ms);

/**
 * The directory of cluster name's logs (*out lc_free'd); name NULL as in lc_control_request.
 * Returns 0, -ENOENT, -EINVAL.
 */
LC_EXTERN int lc_control_logs_path(char **out, const char *state_dir, const char *name);

/**
 * One log line (as written, without its newline) as a user sees it: "[HOST TAG] TEXT", with the
 * time first when with_time ("12:03:04.120 [lab1 worker-3] TEXT"), colored as --debug colors it
 * when color. Writes at most size bytes into out (always terminated); *stream gets the line's
 * stream character. Returns the length, or -EINVAL for a line not in the format.
 */
LC_EXTERN int lc_control_log_format(char *out, size_t size, const char *line, size_t len,
                                    int with_time, int color, char *stream);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_CONTROL_H */
