/*
 * lazycluster/jobs.h - many jobs over the GPU slots of a group (or of a running cluster: its
 * lc_cluster_group), one job per slot at a time; failed jobs retried, the jobs of a lost host or
 * of a dead worker put back in the queue and run elsewhere; GNU parallel's joblog and resume.
 *
 * Two kinds of queue:
 * - Command jobs (lc_jobs_options.worker_cmd NULL): every job is one command run by /bin/sh on a
 *   host under a lifeline, GNU parallel's model. Its output lines and exit status are its result.
 * - A pool (worker_cmd set): one long-lived worker per slot, started once; every job is one line
 *   written to a worker's stdin, and its result is the next line that worker writes on stdout
 *   (stderr stays a log). Updates (lc_jobs_update) are lines too, sent to every worker between
 *   jobs and answered the same way. docs/map.md states the protocol.
 *
 * Slots: a host with GPUs offers slots_per_gpu slots per GPU (its jobs get CUDA_VISIBLE_DEVICES of
 * that GPU and CUDA_DEVICE_ORDER=PCI_BUS_ID); a host without offers slots_per_host, else its
 * declared slots (lc_runtime_set_resources: discovery declares the inventory's slots=, the CLI its
 * cores), else 1. Every job and worker gets LAZYCLUSTER_HOST, LAZYCLUSTER_SLOT (0.. on its host),
 * LAZYCLUSTER_GPU (-1 without one) and, for a command job, LAZYCLUSTER_JOB (its number).
 *
 * Command templates (lc_jobs_options.command, lc_jobs_submit_text in a command queue, worker_cmd)
 * know these placeholders, each value shell-quoted: {} the job's arguments joined by single blanks
 * (one word), {1} {2} .. each argument, {#} the job's number, {gpu} {host} {slot} {workdir} where
 * it runs; {{ and }} are literal braces; any other {name} is an error that quotes it. A template
 * without {} or {N} gets the arguments appended, each quoted (as GNU parallel does).
 *
 * Threads: every function may be called from any thread except the engine's; lc_jobs_cancel also
 * from a signal handler. Callbacks run on the engine thread and must not block.
 */
#ifndef LAZYCLUSTER_JOBS_H
#define LAZYCLUSTER_JOBS_H

#include "common.h"
#include "group.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_jobs lc_jobs;

/** Where a job is in its life. */
typedef enum lc_job_state {
  LC_JOB_QUEUED = 0,    /**< waiting for a slot (also after being put back) */
  LC_JOB_RUNNING = 1,   /**< on a slot */
  LC_JOB_DONE = 2,      /**< ended well: exit status 0 (a command), or answered (a pool) */
  LC_JOB_FAILED = 3,    /**< ended badly after its retries, or could not run (error says why) */
  LC_JOB_CANCELLED = 4, /**< lc_jobs_cancel came first */
  LC_JOB_SKIPPED = 5,   /**< resume: the joblog records it as done */
} lc_job_state;

/**
 * One job. The queue owns it until lc_jobs_free; a callback's job is read only during the call,
 * a finished job (lc_jobs_next) until the queue is freed. Fields may be added at the end.
 */
typedef struct lc_job {
  unsigned long seq;      /**< its number, 1.. in the order submitted ({#}, the joblog's Seq) */
  const char *input;      /**< the command as run (a command job), or the input line (a pool) */
  const char *const *args; /**< its arguments (NULL-terminated; empty for lc_jobs_submit_text) */
  size_t nargs;
  lc_job_state state;
  const char *host; /**< where it ran last (or runs), NULL before its first start */
  int slot;         /**< the slot on that host, -1 before its first start */
  int gpu;          /**< the GPU of that slot, -1 for none */
  int attempts;     /**< starts so far: the first run, retries and runs after being put back */
  /** How the last attempt ended: a command's exit status (or signal); a pool job's is 0. */
  lc_exec_result exit;
  /** 0, or why it failed or was put back last (LC_ECLOSED: its host was lost; LC_EREMOTE: its
   * worker died; -ETIMEDOUT), with message naming the host and the slot. */
  int error;
  const char *message; /**< "" when error is 0 */
  const char *result;  /**< a pool job's answer line (without its newline), else NULL */
  /** The last output_max bytes of its stdout and stderr (whole lines), NUL-terminated. */
  const char *out;
  size_t out_len;
  const char *err;
  size_t err_len;
  double start_time; /**< when the last attempt started, seconds since the epoch */
  double runtime;    /**< how long it ran, seconds */
} lc_job;

/** What a line came from (lc_jobs_options.on_line). */
typedef enum lc_jobs_line_kind {
  LC_JOBS_LINE_OUTPUT = 0, /**< a job's stdout or stderr (a pool job's stderr; its answer is in
                              job->result, not a line) */
  LC_JOBS_LINE_WORKER = 1, /**< a pool worker's stderr while it has no job (its start, between
                              jobs), or its stdout outside the protocol */
  LC_JOBS_LINE_UPDATE = 2, /**< a pool worker's answer to an update */
  LC_JOBS_LINE_NOTICE = 3, /**< the queue itself: a job put back, a worker restarted, a host lost
                              or back (stream LC_STDERR) */
} lc_jobs_line_kind;

/** One line and where it came from. Engine thread; valid during the call. */
typedef struct lc_jobs_line {
  lc_jobs_line_kind kind;
  const lc_job *job; /**< the job it belongs to, or NULL */
  const char *host;  /**< NULL only for a notice about the queue as a whole */
  int slot;          /**< -1 when none */
  int gpu;           /**< -1 when none */
  const char *line;  /**< without its newline, NUL-terminated */
  size_t len;
  lc_stream stream;
} lc_jobs_line;

typedef void (*lc_jobs_line_cb)(const lc_jobs_line *line, void *payload);
/** A job reached its end state (done, failed, cancelled or skipped). Engine thread. */
typedef void (*lc_jobs_done_cb)(const lc_job *job, void *payload);

#define LC_JOBS_OPTIONS_VERSION 1

/** Options of a queue. A zero field means the default. Strings are copied. */
typedef struct lc_jobs_options {
  unsigned int version;
  /** A command queue's template for lc_jobs_submit (see the top of this file); NULL: each job's
   * text comes with lc_jobs_submit_text. Ignored by a pool. */
  const char *command;
  /** Non-NULL: a pool; the template of its workers' command ({gpu} {host} {slot} {workdir}). */
  const char *worker_cmd;
  /** Slots per GPU; default 1. */
  int slots_per_gpu;
  /** Slots of a host without GPUs; default: its declared slots, else 1. */
  int slots_per_host;
  /** A job whose command fails (exit status not 0, or a signal) runs again up to this many
   * times, on another slot when one is free; default 0. */
  int retries;
  /** A job put back this many times because its pool worker died running it fails (it is likely
   * what kills them); default 3. Jobs of a lost host are put back without a limit. */
  int max_requeues;
  /** A pool worker that dies is started again after restart_backoff_ms (default 1000), doubled
   * for each restart within restart_window_ms (default 600000); after max_restarts (default 5)
   * restarts within the window its slot is given up, naming the host and what the worker last
   * wrote on stderr. */
  int max_restarts;
  int restart_backoff_ms;
  int restart_window_ms;
  /** When no slot of any host has been usable this long (every host lost), the jobs still
   * queued fail, naming the hosts and why they were lost; default 300000 (5 minutes). */
  int give_up_ms;
  /** "NAME=VALUE" for every job and worker, NULL-terminated (copied). */
  const char *const *env;
  /** Working directory of jobs and workers; default: the runtime's working directory. */
  const char *cwd;
  /** Local files sent into every host's working directory (by their base name) before its first
   * job or worker, and again after a lost host's working directory was made anew; NULL-terminated. */
  const char *const *send;
  /** Templates of files a job wrote (relative to its working directory; {#} {1} .. expand), each
   * fetched after the job into return_dir (default "."), under the same relative path. A file
   * that is not there fails the job, naming it. NULL-terminated. */
  const char *const *returns;
  const char *return_dir;
  /** Bytes of each job's stdout and of its stderr kept in its lc_job (the last whole lines);
   * 0: 65536; negative: all of it. */
  long output_max;
  /** Appends one line per finished job to this file in GNU parallel's joblog format (Seq Host
   * Starttime JobRuntime Send Receive Exitval Signal Command, tab-separated, with its header when
   * the file is new or empty). */
  const char *joblog;
  /** 1: jobs the joblog records (any exit) are skipped (GNU parallel's --resume); 2: only those
   * it records as succeeded are skipped (--resume-failed). Needs joblog. A file that is not a
   * joblog, or records a job number beyond the jobs submitted, is an error naming the file and
   * the line (the first at lc_jobs_new, the second at lc_jobs_close). */
  int resume;
  /** Each job's stdout, stderr, exit status and command go to RESULTS_DIR/SEQ/ (stdout, stderr,
   * exit, command), written whole: a job's directory appears when the job ended. */
  const char *results_dir;
  /** Every output line, with its job, host and slot. NULL: lines are only kept (output_max). */
  lc_jobs_line_cb on_line;
  /** Every job at its end. */
  lc_jobs_done_cb on_done;
  void *payload;
} lc_jobs_options;

#define LC_JOBS_OPTIONS_INIT {.version = LC_JOBS_OPTIONS_VERSION}

/** Initialises opts to the defaults. */
LC_EXTERN void lc_jobs_options_init(lc_jobs_options *opts);

/**
 * A queue over the runtimes of g (they must stay in g while the queue lives; a runtime added
 * later is not used). Sends the files of opts->send, starts a pool's workers (a slot whose worker
 * does not start is given up with a warning; no slot at all is an error naming each host's
 * reason), and opens the joblog. Jobs start as soon as they are submitted.
 * Returns 0, -EINVAL (a bad template: the message quotes it; no slot), -ENOENT (a file to send,
 * a joblog's directory), LC_EREMOTE (a send or every worker failed), -ENOMEM.
 */
LC_EXTERN int lc_jobs_new(lc_jobs **out, lc_group *g, const lc_jobs_options *opts);

/**
 * Submits a job with nargs arguments: a command queue runs opts->command with them (see the
 * placeholders above); a pool sends them joined by single blanks as the job's line. *seq (may be
 * NULL) gets its number. Returns 0, -EINVAL (no command template; a line with a newline or NUL;
 * an argument placeholder beyond nargs), -EPIPE (after lc_jobs_close), LC_ECLOSED (cancelled).
 */
LC_EXTERN int lc_jobs_submit(lc_jobs *q, const char *const *args, size_t nargs,
                             unsigned long *seq);

/** Submits one job as text: a command template of its own (a command queue) or the line (a
 * pool). Errors as lc_jobs_submit. */
LC_EXTERN int lc_jobs_submit_text(lc_jobs *q, const char *text, unsigned long *seq);

/** No more jobs will come: lc_jobs_wait can then return, and lc_jobs_next end. Checks the
 * joblog's job numbers against the jobs submitted (resume). */
LC_EXTERN int lc_jobs_close(lc_jobs *q);

/**
 * Waits until every job submitted has ended (after lc_jobs_close: the queue is done), or
 * timeout_ms passes (negative: forever). Returns the number of jobs that did not succeed (failed
 * or cancelled) when all ended, -ETIMEDOUT, -EINVAL when the queue is not closed.
 */
LC_EXTERN int lc_jobs_wait(lc_jobs *q, int timeout_ms);

/** lc_jobs_next's order. */
typedef enum lc_jobs_order {
  LC_JOBS_IN_ORDER = 0, /**< by job number (map): waits for the next number */
  LC_JOBS_AS_DONE = 1,  /**< as they end (imap_unordered) */
} lc_jobs_order;

/**
 * The next job that reached its end state, each once: in submission order or as they end.
 * *out is the queue's (valid until lc_jobs_free). Returns 0, -ETIMEDOUT, -ENOENT when the queue
 * is closed and every job was returned.
 */
LC_EXTERN int lc_jobs_next(const lc_job **out, lc_jobs *q, lc_jobs_order order, int timeout_ms);

/**
 * A pool: sends line to every worker between jobs, and to every worker started later (restarted
 * or on a host that came back) before its first job, in the order the updates were made. Waits up
 * to timeout_ms (negative: forever) until every live worker answered it. Returns 0, -ETIMEDOUT
 * (the update stays queued), -EINVAL (a command queue; a newline or NUL in line).
 */
LC_EXTERN int lc_jobs_update(lc_jobs *q, const char *line, int timeout_ms);

/**
 * Cancels every job that has not ended: queued ones at once, running ones stopped through their
 * lifelines (nothing left on any host), pool workers ended. Returns at once; lc_jobs_wait then
 * returns as soon as the stops are confirmed. Any thread, also a signal handler.
 */
LC_EXTERN void lc_jobs_cancel(lc_jobs *q);

/** Counts of a queue, at one moment. */
typedef struct lc_jobs_stats {
  size_t submitted, queued, running, done, failed, cancelled, skipped;
  size_t slots;      /**< slots in use now (hosts connected, workers alive) */
  size_t slots_lost; /**< slots of hosts lost or workers given up */
  size_t requeued;   /**< times jobs were put back (host lost, worker died) */
  size_t retried;    /**< retries of failed jobs */
  double elapsed;    /**< seconds since lc_jobs_new */
  /** Seconds left if the rest go as the finished ones went, -1 while unknown. */
  double eta;
} lc_jobs_stats;

LC_EXTERN void lc_jobs_stats_get(lc_jobs *q, lc_jobs_stats *out);

/**
 * Cancels what has not ended (as lc_jobs_cancel), waits until it is confirmed ended on every host
 * that answers, closes the joblog and frees the queue (and every lc_job). The group stays. NULL
 * is fine.
 */
LC_EXTERN void lc_jobs_free(lc_jobs *q);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_JOBS_H */
