/*
 * queue_internal.h - the job queue's state, shared by its parts: the scheduler (queue.c), the
 * pool's workers and their line protocol (pool.c) and what a job leaves on this machine
 * (files.c). Fields say who may touch them:
 *   [made]    written by lc_jobs_new before the engine sees the queue, read-only after
 *   [engine]  the engine thread only
 *   [mu]      under the queue's mutex (waiters read them)
 */
#ifndef LC_JOBS_QUEUE_INTERNAL_H
#define LC_JOBS_QUEUE_INTERNAL_H

#include "../runtime_internal.h"
#include "jobs_internal.h"

#include <pthread.h>
#include <time.h>

typedef struct lc__qjob lc__qjob;
typedef struct lc__qslot lc__qslot;
typedef struct lc__qhost lc__qhost;

/* One job: the public view and what the queue keeps beside it. */
struct lc__qjob {
  lc_job pub;    /* [engine] until it ended, read-only after; pub.state is written under [mu] */
  char *input;   /* pub.input: the command as run (a command job) or the line (a pool job) */
  char *text;    /* lc_jobs_submit_text's template (a command queue), else NULL */
  char **args;   /* NULL-terminated copy */
  char *message; /* pub.message when not "" */
  char *result;  /* pub.result */
  lc__buf out, err;
  lc__qjob *next;        /* [engine]: the run queue; [mu]: the incoming list before that */
  const lc__qslot *last; /* [engine]: the slot of its last attempt */
  int retries_used;      /* [engine] */
  int requeues;          /* [engine]: put back because its worker died */
  int returned;          /* [mu]: handed out by lc_jobs_next */
  int out_fd, err_fd;    /* [engine]: RESULTS_DIR/.SEQ.partial/stdout and stderr, -1 none,
                          * -2 a write failed (the partial directory is then dropped) */
  int partial;           /* [engine]: RESULTS_DIR/.SEQ.partial exists */
};

/* Where a pool worker is in the line protocol (pool.c, a pure function of state and event). */
typedef enum lc__wstate {
  LC__W_IDLE = 0,   /* running, nothing asked */
  LC__W_JOB = 1,    /* a job's line written: its next stdout line answers it */
  LC__W_UPDATE = 2, /* an update written: its next stdout line answers it */
  LC__W_DEAD = 3,   /* not running */
} lc__wstate;

typedef enum lc__wevent {
  LC__WE_START = 0,  /* the worker was started */
  LC__WE_STDOUT = 1, /* a line on its stdout */
  LC__WE_STDERR = 2, /* a line on its stderr */
  LC__WE_JOB = 3,    /* the queue writes a job's line (only when idle) */
  LC__WE_UPDATE = 4, /* the queue writes an update (only when idle) */
  LC__WE_END = 5,    /* it ended */
} lc__wevent;

typedef enum lc__waction {
  LC__WA_NONE = 0,
  LC__WA_ANSWER = 1,        /* the line answers the job */
  LC__WA_UPDATE_ANSWER = 2, /* the line answers the update */
  LC__WA_JOB_LINE = 3,      /* a line of the job's (LC_JOBS_LINE_OUTPUT) */
  LC__WA_WORKER_LINE = 4,   /* a line of the worker's (LC_JOBS_LINE_WORKER) */
  LC__WA_JOB_LOST = 5,      /* it ended with a job: the job goes back */
  LC__WA_UPDATE_LOST = 6,   /* it ended while an update was unanswered */
  LC__WA_REFUSED = 7,       /* the event is not allowed in this state (nothing changes) */
} lc__waction;

/* The protocol: the state after event ev in state s, and what the queue must do (*act). */
lc__wstate lc__pool_step(lc__wstate s, lc__wevent ev, lc__waction *act);

/* One slot: a GPU's share of a host, or a CPU slot. */
struct lc__qslot {
  lc_jobs *q;
  lc__qhost *host;
  int index; /* on its host */
  int gpu;   /* -1: none */
  /* [engine] */
  lc__qjob *job;    /* running on it, or NULL */
  lc_process *proc; /* the command job's process, or the pool's worker */
  lc_process *xfer; /* a return being fetched */
  size_t next_return;
  /* the pool's worker */
  lc__wstate wstate;
  size_t upd_done;       /* updates it answered */
  int gone;              /* given up (restarts), [engine]; counted in stats under [mu] */
  uint64_t restart_at;   /* a restart due then, 0: none */
  uint64_t window_start; /* the restart window's first restart */
  int restarts;          /* restarts in that window */
  int starts;            /* workers started on this slot */
  char last_err[256];    /* the worker's last stderr line */
};

struct lc__qhost {
  lc_runtime *rt;
  char *name;
  char *workdir; /* where jobs run: opts->cwd or the runtime's working directory */
  lc__qslot *slots;
  int nslots;
  /* [engine] */
  int down;
  uint64_t lost_at;
  int renew_failed; /* its directory or sends failed once since the loss: settle_ms again */
  int sweep_noted;  /* the note that the runtime's sweep failed went out */
  char why[256];
  /* [mu]: 1: the maintenance thread is to make its directory and sends again; 2: done, 3: failed */
  int renew;
};

struct lc_jobs {
  lc_engine *engine;    /* [made] */
  lc_group *group;      /* [made] */
  lc_jobs_options opts; /* [made]: strings below are the queue's copies */
  char *command, *worker_cmd, *cwd, *return_dir, *joblog_path, *results_dir;
  char **env, **send, **returns;
  size_t nenv;
  int pool;        /* [made]: worker_cmd given */
  long output_max; /* [made]: bytes kept per stream, -1 all */
  lc__qhost *hosts;
  size_t nhosts;
  size_t nslots;
  double t0; /* [made]: wall clock at lc_jobs_new */
  uint64_t t0_ms;

  pthread_mutex_t mu;
  pthread_cond_t cond;

  /* [mu] */
  lc__qjob **jobs; /* by seq - 1 */
  size_t njobs, capjobs;
  lc__qjob *in_head, *in_tail; /* submitted, not yet seen by the engine */
  int closed;
  lc_jobs_stats st; /* counts (elapsed and eta computed on reading) */
  size_t ended;
  unsigned long *done_order; /* seqs as they ended */
  size_t ndone_order;
  size_t next_in_order, next_as_done; /* lc_jobs_next's cursors */
  char **updates;
  size_t nupdates;
  size_t upd_min; /* updates every live worker answered */
  size_t live;    /* processes of the queue not yet ended (jobs, workers, returns) */
  int freeing;
  int maint_started, maint_stop;
  pthread_t maint;
  int handles_closed; /* [engine]: at the free */
  lc__call *fini;     /* [engine]: the free's call, done when both handles closed */

  int cancel; /* [atomic]: lc_jobs_cancel (a signal handler may set it) */

  /* [engine] */
  uv_async_t kick;
  uv_timer_t tick;
  lc__qjob *run_head, *run_tail; /* queued jobs, oldest first (put-backs go first) */
  int cancelled_done;            /* the cancel was carried out */
  int dispatching, redispatch;   /* dispatch() runs; it is to run again */
  size_t upd_known;              /* updates the engine has seen */
  uint64_t unusable_since;       /* when no slot was usable, 0 while one is */
  int joblog_fd;
  lc__joblog_record resume; /* [made] */
};

/* queue.c, engine thread: a job reached its end state (done, failed, cancelled or skipped). */
void lc__jobs_end(lc_jobs *q, lc__qjob *j, lc_job_state state);
/* A line to on_line. */
void lc__jobs_line(lc_jobs *q, lc_jobs_line_kind kind, const lc__qjob *j, const lc__qslot *s,
                   const char *line, size_t len, lc_stream stream);
/* A notice line (LC_JOBS_LINE_NOTICE) formatted. */
void lc__jobs_notice(lc_jobs *q, const lc__qslot *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Keeps a line of a job's output (output_max) and writes it to its results. */
void lc__jobs_keep_line(lc_jobs *q, lc__qjob *j, const char *line, size_t len, lc_stream stream);
/* j starts on s (a command's process or a pool worker's line): where, when, its attempt, its
 * kept output and results begun anew. */
void lc__jobs_job_begin(lc_jobs *q, lc__qslot *s, lc__qjob *j);
/* Seconds since the epoch (a job's start_time and runtime). */
double lc__jobs_wall_now(void);
/* *ts set to timeout_ms from now on CLOCK_MONOTONIC (the queue's condition's clock) and
 * returned; NULL for a negative timeout_ms (forever). */
struct timespec *lc__jobs_deadline(struct timespec *ts, int timeout_ms);
/* Puts j back at the head of the run queue (a put-back or a retry). */
void lc__jobs_requeue(lc_jobs *q, lc__qjob *j);
/* The host of s is lost (its connection went): its slots wait until it is back. */
void lc__jobs_host_lost(lc_jobs *q, lc__qhost *h, const char *why);
/* Makes (does not start) the process of a job (seq > 0) or of a pool worker (seq 0, input 1) on
 * s: the command in the host's working directory with the slot's environment, its lines to
 * on_line with s as payload, on_finish(p, s) at its end. 0, or an error with its message set. */
int lc__jobs_slot_proc(lc_process **out, lc_jobs *q, lc__qslot *s, const char *command,
                       unsigned long seq, lc_line_cb on_line, int input,
                       void (*on_finish)(lc_process *, void *));
/* Starts the timer for the next thing due (a host down, a restart). */
void lc__jobs_arm(lc_jobs *q);
/* Process counting for the free's confirmed ends. */
void lc__jobs_live(lc_jobs *q, int delta);
/* Frees p, made by lc__proc_new and never started (or its lc__proc_launch failed). */
void lc__jobs_proc_discard(lc_process *p);
/* Runs what is due after an event: a cancel, updates, dispatch. */
void lc__jobs_kick_here(lc_jobs *q);
/* A return of s's job was fetched (code 0) or failed. */
void lc__jobs_return_done(lc_jobs *q, lc__qslot *s, int code, const char *msg);

/* pool.c, engine thread */
/* Starts the worker of s (its updates replayed before any job); 0 or an error (s not usable). */
int lc__pool_start(lc_jobs *q, lc__qslot *s);
/* Writes j's line to the idle worker of s. */
int lc__pool_send_job(lc_jobs *q, lc__qslot *s, lc__qjob *j);
/* Gives every idle worker its next update; recomputes upd_min. */
void lc__pool_pump_updates(lc_jobs *q);
/* Starts the workers whose restart is due; returns the next due time (0: none). */
uint64_t lc__pool_restarts(lc_jobs *q, uint64_t now);
/* Whether s takes a job now. */
int lc__pool_idle(const lc__qslot *s);

/* files.c */
/* Engine thread: RESULTS_DIR/.SEQ.partial made anew for an attempt of j (no-op without). */
void lc__files_results_begin(lc_jobs *q, lc__qjob *j);
/* Engine thread: the partial directory gets exit and command and becomes RESULTS_DIR/SEQ; or,
 * with keep 0 (cancelled), is removed. */
void lc__files_results_end(lc_jobs *q, lc__qjob *j, int keep);
/* Engine thread: one joblog line for j (done or failed) with one write(). */
void lc__files_joblog(lc_jobs *q, const lc__qjob *j);
/* lc_jobs_new: opens the joblog (header when empty) and, with resume, reads what it records. */
int lc__files_joblog_open(lc_jobs *q);
/* Any thread but the engine's: sends opts->send into h's working directory. */
int lc__files_send(lc_jobs *q, lc__qhost *h);
/* Engine thread: fetches the next return of s's job; 1 when one was started, 0 when none is left,
 * or an error (the job fails with it: err set). */
int lc__files_next_return(lc_jobs *q, lc__qslot *s, lc__err *err);

#endif /* LC_JOBS_QUEUE_INTERNAL_H */
