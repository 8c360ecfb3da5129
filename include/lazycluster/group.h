/*
 * lazycluster/group.h - many runtimes at once: connect, run commands and tasks on all of them
 * concurrently (with a fan-out cap), and wire them together with tunnels.
 *
 * Everything a group does runs on the engine's one loop: a thousand hosts cost a thousand
 * sockets, not threads. Each operation reports per host: the result, or the failure with its
 * reason, and the time it took.
 *
 * Threads: every function may be called from any thread except the engine's; calls on one group
 * must not overlap. Line callbacks run on the engine thread and must not block.
 */
#ifndef LAZYCLUSTER_GROUP_H
#define LAZYCLUSTER_GROUP_H

#include "common.h"
#include "forward.h"
#include "ports.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_group lc_group;
typedef struct lc_group_report lc_group_report;
typedef struct lc_task lc_task;

#define LC_GROUP_OPTIONS_VERSION 1

/** Options of a group. A zero field means the default. */
typedef struct lc_group_options {
  unsigned int version;
  /** At most this many hosts busy with one operation at once; default 64. */
  int fanout;
  /** Each task run writes DIR/HOST.log (created if missing); NULL keeps logs in memory only. */
  const char *log_dir;
} lc_group_options;

#define LC_GROUP_OPTIONS_INIT                                                                      \
  { .version = LC_GROUP_OPTIONS_VERSION }

/** Initialises opts to the defaults. */
LC_EXTERN void lc_group_options_init(lc_group_options *opts);

/** An empty group on engine. opts may be NULL. Returns 0 or -ENOMEM. */
LC_EXTERN int lc_group_new(lc_group **out, lc_engine *engine, const lc_group_options *opts);

/**
 * Releases everything the group made and holds: its tunnels, then its runtimes (their processes
 * end, their working directories go unless kept). Every host is told at once and all are awaited
 * against one deadline (the kill grace plus 10 s), whatever the number of hosts. NULL is fine.
 */
LC_EXTERN void lc_group_free(lc_group *g);

/** Adds a runtime; the group owns it from now on. -EEXIST when a runtime of that name is in. */
LC_EXTERN int lc_group_add(lc_group *g, lc_runtime *rt);

/**
 * Connects to n SSH hosts at once (specs as for lc_runtime_new_ssh); the reachable ones join the
 * group. The report lists every host with its error (0 when it joined) and connect time.
 * Returns 0 even when some hosts failed; -ENOMEM or -EINVAL for the call itself.
 */
LC_EXTERN int lc_group_connect(lc_group_report **out, lc_group *g, const char *const *hosts,
                               size_t n, const lc_runtime_options *opts);

/** Takes the named runtime out of the group and frees it. -ENOENT when it is not in. */
LC_EXTERN int lc_group_remove(lc_group *g, const char *name);

/** Number of runtimes in the group. */
LC_EXTERN size_t lc_group_count(const lc_group *g);

/** The i-th runtime (in the order they joined), or NULL. Borrowed. */
LC_EXTERN lc_runtime *lc_group_at(const lc_group *g, size_t i);

/** The runtime of that name, or NULL. Borrowed. */
LC_EXTERN lc_runtime *lc_group_find(const lc_group *g, const char *name);

/** One line of output from one host of a group operation. Engine thread. */
typedef void (*lc_group_line_cb)(const char *host, const char *line, size_t len, lc_stream stream,
                                 void *payload);

/**
 * A report keeps about this many bytes of each host's log: the last whole lines, after a line
 * "[N lines dropped: ...]" when there were more. Every line still reaches on_line and the log_dir
 * file; only the report's copy is bounded.
 */
#define LC_GROUP_REPORT_LOG_MAX (64 * 1024)

/**
 * Runs command on every runtime at once (fan-out capped). opts gives environment, working
 * directory and a per-host timeout (opts->timeout_ms, 0: none); its on_line is not used: on_line
 * here gets every line with its host. A host whose command exits non-zero is a failure in the
 * report (LC_EREMOTE); a host past the timeout has its command stopped (its whole process group
 * on the host, after the runtime's kill grace) and is a failure with -ETIMEDOUT naming the host
 * and the seconds. Returns 0 (failures are per host), or -ENOMEM/-EINVAL.
 */
LC_EXTERN int lc_group_exec(lc_group_report **out, lc_group *g, const char *command,
                            const lc_exec_options *opts, lc_group_line_cb on_line, void *payload);

/* ---- tasks ---------------------------------------------------------------------------------- */

/** An empty task (a sequence of steps). name appears in logs and errors. */
LC_EXTERN int lc_task_new(lc_task **out, const char *name);
/** Frees a task. NULL is fine. */
LC_EXTERN void lc_task_free(lc_task *t);
/** Step: run a command (a non-zero exit fails the step). */
LC_EXTERN int lc_task_add_run(lc_task *t, const char *command);
/** Step: send a local file to remote_path. */
LC_EXTERN int lc_task_add_send(lc_task *t, const char *local_path, const char *remote_path);
/** Step: fetch remote_path to local_path; "{host}" in local_path becomes the host's name. */
LC_EXTERN int lc_task_add_get(lc_task *t, const char *remote_path, const char *local_path);
/** Step: write len bytes (copied) into remote_path with mode. */
LC_EXTERN int lc_task_add_write(lc_task *t, const char *remote_path, const void *data, size_t len,
                                unsigned int mode);

/**
 * Runs the task on one runtime (host non-NULL) or on all at once. A failing step stops that
 * host's task; the report's message names the step. Each host's log (every step and every output
 * line) is in the report and, with a log_dir, in LOG_DIR/HOST.log.
 * Returns 0 (failures are per host), -ENOENT for an unknown host, -ENOMEM.
 */
LC_EXTERN int lc_group_run_task(lc_group_report **out, lc_group *g, const lc_task *t,
                                const char *host, lc_group_line_cb on_line, void *payload);

/* ---- ports and tunnels ---------------------------------------------------------------------- */

/**
 * The first port of ranges free on every runtime of the group and on this machine, reserved in
 * this process until lc_port_release (see ports.h). Returns 0, LC_ENOPORTS, or a host's error.
 */
LC_EXTERN int lc_group_free_port(int *out, lc_group *g, const lc_ports *ranges);

/**
 * Makes port of this machine reachable as localhost:port on every runtime (a remote forward on
 * each). The forwards live as long as the group. Returns 0 or the first failure, naming the host.
 */
LC_EXTERN int lc_group_expose_local_port(lc_group *g, int port);

/**
 * Makes port of the runtime host reachable as localhost:port here (a local forward) and on every
 * other runtime (a remote forward to here), so that every entity meets on localhost:port.
 */
LC_EXTERN int lc_group_expose_runtime_port(lc_group *g, const char *host, int port);

/* ---- reports -------------------------------------------------------------------------------- */

/** Number of hosts in a report. */
LC_EXTERN size_t lc_group_report_count(const lc_group_report *r);
/** Number of hosts that failed. */
LC_EXTERN size_t lc_group_report_failures(const lc_group_report *r);
/** The i-th host's name. Borrowed from the report. */
LC_EXTERN const char *lc_group_report_host(const lc_group_report *r, size_t i);
/** The i-th host's error: 0, or a code as the single-host calls return. */
LC_EXTERN int lc_group_report_error(const lc_group_report *r, size_t i);
/** The i-th host's error detail, or "". Borrowed. */
LC_EXTERN const char *lc_group_report_message(const lc_group_report *r, size_t i);
/** How the i-th host's last command ended (exec and run steps). */
LC_EXTERN lc_exec_result lc_group_report_exit(const lc_group_report *r, size_t i);
/** Seconds the i-th host took. */
LC_EXTERN double lc_group_report_seconds(const lc_group_report *r, size_t i);
/** The i-th host's log (steps and output lines; the last LC_GROUP_REPORT_LOG_MAX bytes or so), or
 * "". Borrowed. */
LC_EXTERN const char *lc_group_report_log(const lc_group_report *r, size_t i);
/** Frees a report. NULL is fine. */
LC_EXTERN void lc_group_report_free(lc_group_report *r);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_GROUP_H */
