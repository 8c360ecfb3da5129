/*
 * group.c - many runtimes at once. An operation is a job on the engine thread: it starts up to
 * `fanout` hosts, and each host walks through its steps as its processes finish (no thread per
 * host). Hosts that finish hand their slot to the next one. The caller waits for the whole job.
 */
#include "group_internal.h"
#include "ports_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct lc_group {
  lc_engine *engine;
  int fanout;
  char *log_dir;
  lc_runtime **rts;
  size_t n, cap;
  lc__fwdlist fwds;
};

typedef struct report_entry {
  char *host;
  int error;
  char *message;
  lc_exec_result exit;
  double seconds;
  lc__buf log;    /* the last LC_GROUP_REPORT_LOG_MAX bytes or so, whole lines */
  size_t dropped; /* lines cut from the front of log */
} report_entry;

struct lc_group_report {
  size_t n;
  report_entry *e;
};

typedef enum step_kind { STEP_RUN, STEP_SEND, STEP_GET, STEP_WRITE } step_kind;

typedef struct step {
  step_kind kind;
  char *a, *b; /* run: command; send: local, remote; get: remote, local; write: remote */
  char *data;
  size_t len;
  unsigned int mode;
  int borrowed; /* data is the caller's (lc__task_add_write_borrowed), not freed here */
  int gz;            /* write: data is in gzip's format (lc__task_add_write_gz_borrowed) */
  uint64_t unpacked; /* gz: the file's size */
} step;

struct lc_task {
  char *name;
  step *steps;
  size_t n, cap;
};

void lc_group_options_init(lc_group_options *opts) {
  lc_group_options init = LC_GROUP_OPTIONS_INIT;
  *opts = init;
}

/* ---- reports -------------------------------------------------------------------------------- */

static int report_new(lc_group_report **out, size_t n) {
  lc_group_report *r = lc__calloc(1, sizeof(*r));
  *out = NULL;
  if (r == NULL || (r->e = lc__calloc(n, sizeof(*r->e))) == NULL) {
    free(r);
    return -ENOMEM;
  }
  r->n = n;
  *out = r;
  return 0;
}

void lc_group_report_free(lc_group_report *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->e[i].host);
    free(r->e[i].message);
    lc__buf_free(&r->e[i].log);
  }
  free(r->e);
  free(r);
}

size_t lc_group_report_count(const lc_group_report *r) { return r ? r->n : 0; }

size_t lc_group_report_failures(const lc_group_report *r) {
  size_t n = 0;
  for (size_t i = 0; r != NULL && i < r->n; i++)
    n += r->e[i].error != 0;
  return n;
}

const char *lc_group_report_host(const lc_group_report *r, size_t i) {
  return r && i < r->n ? r->e[i].host : NULL;
}

int lc_group_report_error(const lc_group_report *r, size_t i) {
  return r && i < r->n ? r->e[i].error : -EINVAL;
}

const char *lc_group_report_message(const lc_group_report *r, size_t i) {
  return r && i < r->n && r->e[i].message ? r->e[i].message : "";
}

lc_exec_result lc_group_report_exit(const lc_group_report *r, size_t i) {
  lc_exec_result none = {.exit_status = -1};
  return r && i < r->n ? r->e[i].exit : none;
}

double lc_group_report_seconds(const lc_group_report *r, size_t i) {
  return r && i < r->n ? r->e[i].seconds : 0.0;
}

const char *lc_group_report_log(const lc_group_report *r, size_t i) {
  return r && i < r->n && r->e[i].log.data ? r->e[i].log.data : "";
}

/* ---- the group ------------------------------------------------------------------------------ */

int lc_group_new(lc_group **out, lc_engine *engine, const lc_group_options *opts) {
  lc_group *g;
  *out = NULL;
  LC__CHECK_VERSION(opts, LC_GROUP_OPTIONS_VERSION, "lc_group_options");
  if (engine == NULL)
    return lc__error_set(-EINVAL, "group: no engine given");
  if ((g = lc__calloc(1, sizeof(*g))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  g->engine = engine;
  g->fanout = opts && opts->fanout > 0 ? opts->fanout : 64;
  if (opts && opts->log_dir && (g->log_dir = lc__strdup(opts->log_dir)) == NULL) {
    free(g);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  *out = g;
  return 0;
}

void lc_group_free(lc_group *g) {
  if (g == NULL)
    return;
  lc__fwdlist_free(&g->fwds);
  for (size_t i = 0; i < g->n; i++) /* every host's teardown at once, not one by one */
    lc__runtime_free_begin(g->rts[i]);
  for (size_t i = 0; i < g->n; i++)
    lc_runtime_free(g->rts[i]);
  free(g->rts);
  free(g->log_dir);
  free(g);
}

size_t lc_group_count(const lc_group *g) { return g->n; }

lc_engine *lc__group_engine(const lc_group *g) { return g->engine; }

lc_runtime *lc_group_at(const lc_group *g, size_t i) { return i < g->n ? g->rts[i] : NULL; }

lc_runtime *lc_group_find(const lc_group *g, const char *name) {
  for (size_t i = 0; name != NULL && i < g->n; i++)
    if (strcmp(g->rts[i]->name, name) == 0)
      return g->rts[i];
  return NULL;
}

int lc_group_remove(lc_group *g, const char *name) {
  for (size_t i = 0; g != NULL && name != NULL && i < g->n; i++) {
    if (strcmp(g->rts[i]->name, name) != 0)
      continue;
    lc_runtime_free(g->rts[i]);
    memmove(&g->rts[i], &g->rts[i + 1], (g->n - i - 1) * sizeof(g->rts[0]));
    g->n--;
    return 0;
  }
  return lc__error_set(-ENOENT, "group: no host %s in the group", name ? name : "(null)");
}

int lc_group_add(lc_group *g, lc_runtime *rt) {
  lc_runtime **v;
  if (g == NULL || rt == NULL)
    return lc__error_set(-EINVAL, "group: no group or runtime given");
  if (lc_group_find(g, rt->name) != NULL)
    return lc__error_set(-EEXIST, "group: %s is already in the group", rt->name);
  if ((v = lc__grow(g->rts, &g->cap, g->n + 1, sizeof(*v), 16)) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  g->rts = v;
  g->rts[g->n++] = rt;
  return 0;
}

/* ---- jobs: one operation over many hosts ---------------------------------------------------- */

typedef struct job job;

typedef struct job_host {
  job *j;
  size_t index;
  lc_runtime *rt;
  const lc_task *task; /* the job's, or this host's own (lc__group_run_tasks) */
  lc_process *p;
  size_t step;
  uint64_t t0;
  int done;
  report_entry *out;
  FILE *logf;
  char *get_local; /* the current get step's local path, {host} replaced */
  struct job_host *next_ready;
  uv_timer_t limit; /* the per-host timeout (lc_exec_options.timeout_ms), then its grace */
  int limit_started;
  int timed_out; /* 1: told to stop at the timeout; 2: given up after the grace too */
  int canceled;  /* told to stop by the job's cancel flag */
} job_host;

struct job {
  lc__call call;
  lc_group *g;
  job_host *hosts;
  size_t n, next, finished;
  const lc_task *task;
  const lc_exec_options *eo;
  lc_group_line_cb on_line;
  void *payload;
  int fail_on_exit; /* a non-zero exit is a failure */
  int own_tasks;    /* each host runs its own task */
  /* connect jobs */
  lc_runtime **pending;
  uv_timer_t tick;
  job_host *ready; /* hosts whose step ended, handled on the next tick */
  int timeout_ms;  /* per host, 0: none */
  size_t closing;  /* handles still closing at the job's end */
  /* the caller's cancel flag (may be set in a signal handler): looked at every WATCH_MS */
  const volatile sig_atomic_t *cancel;
  uv_timer_t watch;
  int watch_started;
  int canceled;
  const void *tag; /* the caller's lc__proc_tag: the job's processes are its */
};

/* How often a job looks at its cancel flag: a flag is all a signal handler may set, so it is
 * polled rather than woken up to. */
#define WATCH_MS 100

/* Appends to a report's log, keeping its memory bounded: past twice the cap, the oldest whole
 * lines go (one move per cap's worth of output, so the cost per byte stays constant). */
static void log_add(report_entry *e, const char *s, size_t n) {
  lc__buf *b = &e->log;
  size_t cut = 0;
  lc__buf_append(b, s, n);
  if (b->len <= 2 * LC_GROUP_REPORT_LOG_MAX)
    return;
  while (cut < b->len && b->len - cut > LC_GROUP_REPORT_LOG_MAX) {
    const char *nl = memchr(b->data + cut, '\n', b->len - cut);
    if (nl == NULL)
      break;
    cut = (size_t)(nl - b->data) + 1;
    e->dropped++;
  }
  lc__buf_consume(b, cut);
}

/* The log as the report shows it: trimmed to the cap, with how many lines went before it. */
static void log_finish(report_entry *e) {
  lc__buf note = {0};
  size_t cut = 0;
  while (e->log.len - cut > LC_GROUP_REPORT_LOG_MAX) {
    const char *nl = memchr(e->log.data + cut, '\n', e->log.len - cut);
    if (nl == NULL)
      break;
    cut = (size_t)(nl - e->log.data) + 1;
    e->dropped++;
  }
  lc__buf_consume(&e->log, cut);
  if (e->dropped == 0)
    return;
  if (lc__buf_printf(&note, "[%zu lines dropped: a report keeps the last %d KiB of a host's log]\n",
                     e->dropped, LC_GROUP_REPORT_LOG_MAX / 1024) == 0 &&
      lc__buf_append(&note, e->log.data, e->log.len) == 0) {
    lc__buf_free(&e->log);
    e->log = note;
  } else {
    lc__buf_free(&note);
  }
}

static void host_log(job_host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void host_log(job_host *h, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof(line))
    n = sizeof(line) - 1;
  line[n++] = '\n'; /* n < sizeof(line) here */
  log_add(h->out, line, (size_t)n);
  if (h->logf != NULL) {
    fwrite(line, 1, (size_t)n, h->logf);
  }
}

static void host_line(const char *line, size_t len, lc_stream stream, void *payload) {
  job_host *h = payload;
  job *j = h->j;
  if (h->task != NULL)
    host_log(h, "%s %.*s", stream == LC_STDERR ? "err:" : "out:", (int)len, line);
  if (j->on_line != NULL)
    j->on_line(h->rt->name, line, len, stream, j->payload);
}

static void job_tick(uv_timer_t *t);

static void job_closed(uv_handle_t *h) {
  job *j = h->data;
  if (--j->closing == 0)
    lc__call_done(&j->call, 0);
}

/* The job is through: its timers close, then the caller wakes. */
static void job_close(job *j) {
  j->closing = 1;
  for (size_t i = 0; i < j->n; i++) {
    if (!j->hosts[i].limit_started)
      continue;
    j->closing++;
    j->hosts[i].limit.data = j;
    uv_close((uv_handle_t *)&j->hosts[i].limit, job_closed);
  }
  if (j->watch_started) {
    j->closing++;
    j->watch.data = j;
    uv_close((uv_handle_t *)&j->watch, job_closed);
  }
  uv_close((uv_handle_t *)&j->tick, job_closed);
}

static void host_start(job_host *h);

/* A host is through: its slot goes to the next host; the last one ends the job. */
static void host_finish(job_host *h, int code, const char *msg) {
  job *j = h->j;
  h->done = 1;
  if (h->limit_started)
    uv_timer_stop(&h->limit);
  h->out->seconds = (double)(lc__now_ms() - h->t0) / 1000.0;
  if (code < 0) {
    h->out->error = code;
    h->out->message = lc__strdup(msg);
    host_log(h, "failed: %s", msg);
  } else if (h->task != NULL) {
    host_log(h, "done in %.3f s", h->out->seconds);
  }
  if (h->logf != NULL) {
    fclose(h->logf);
    h->logf = NULL;
  }
  log_finish(h->out);
  free(h->get_local);
  h->get_local = NULL;
  if (j->next < j->n)
    host_start(&j->hosts[j->next++]);
  if (++j->finished == j->n)
    job_close(j);
}

/*
 * A host's time is up: its process is told to stop (its lifeline ends the whole process group on
 * the host, after the runtime's kill grace). When even that is not confirmed in time (a host that
 * stopped answering), the process is let go and the host reported without waiting more.
 */
static void limit_fired(uv_timer_t *t) {
  job_host *h = t->data;
  lc_process *p = h->p;
  char msg[LC_ERRMSG_MAX];
  if (h->done || p == NULL || p->finished)
    return; /* it ended meanwhile: the next tick checks it */
  if (h->timed_out == 0) {
    h->timed_out = 1;
    host_log(h, "timed out after %.1f s: stopping it", h->j->timeout_ms / 1000.0);
    lc__proc_stop(p);
    uv_timer_start(&h->limit, limit_fired, (uint64_t)p->grace_ms + 5000, 0);
    return;
  }
  h->timed_out = 2;
  h->p = NULL;
  h->out->exit = p->result;
  if (h->canceled)
    snprintf(msg, sizeof(msg), "%s: canceled, and its end was not confirmed within %.1f s",
             h->rt->name, (p->grace_ms + 5000) / 1000.0);
  else
    snprintf(msg, sizeof(msg),
             "%s: timed out after %.1f s, and its end was not confirmed within %.1f s more",
             h->rt->name, h->j->timeout_ms / 1000.0, (p->grace_ms + 5000) / 1000.0);
  lc__proc_release(p);
  host_finish(h, h->canceled ? LC_ECANCELED : -ETIMEDOUT, msg);
}

static void step_ended(lc_process *p, void *arg) {
  job_host *h = arg;
  job *j = h->j;
  (void)p;
  /* handled on the next tick, outside the backend's callbacks */
  h->next_ready = j->ready;
  j->ready = h;
  uv_timer_start(&j->tick, job_tick, 0, 0);
}

static char *replace_host(const char *pattern, const char *host) {
  lc__buf b = {0};
  const char *p = pattern, *hit;
  while ((hit = strstr(p, "{host}")) != NULL) {
    lc__buf_append(&b, p, (size_t)(hit - p));
    lc__buf_puts(&b, host);
    p = hit + 6;
  }
  lc__buf_puts(&b, p);
  return b.data;
}

/* Starts h's current step, or finishes h when it has none left. */
static void step_start(job_host *h) {
  job *j = h->j;
  const step *s;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc__err err = {0};
  int r;

  if (h->task == NULL || h->step >= h->task->n) {
    host_finish(h, 0, NULL);
    return;
  }
  s = &h->task->steps[h->step];
  if (j->eo != NULL) /* checked by lc_group_exec; as long as its version says */
    lc__options_copy(&eo, j->eo, lc__exec_options_size(j->eo));
  eo.input = 0; /* lc_runtime_spawn's alone: nobody feeds a group's commands */
  eo.on_line = host_line;
  eo.payload = h;
  lc__proc_tag = j->tag; /* on the engine thread: the processes are the caller's */
  switch (s->kind) {
  case STEP_RUN:
    host_log(h, "step %zu: run %s", h->step + 1, s->a);
    r = lc__proc_new(&h->p, h->rt, s->a, &eo, 1, NULL, NULL);
    if (r < 0)
      lc__err_set(&err, r, "%s", lc_error_last());
    break;
  case STEP_SEND:
    host_log(h, "step %zu: send %s to %s", h->step + 1, s->a, s->b);
    r = lc__xfer_new(&h->p, h->rt, LC__XFER_SEND, s->a, s->b, NULL, 0, 0, 0, &err);
    break;
  case STEP_GET:
    free(h->get_local);
    h->get_local = replace_host(s->b, h->rt->name);
    host_log(h, "step %zu: get %s to %s", h->step + 1, s->a, h->get_local);
    r = h->get_local
            ? lc__xfer_new(&h->p, h->rt, LC__XFER_GET, h->get_local, s->a, NULL, 0, 0, 0, &err)
            : lc__err_set(&err, -ENOMEM, "out of memory");
    break;
  case STEP_WRITE:
  default:
    host_log(h, "step %zu: write %s", h->step + 1, s->a);
    r = lc__xfer_new(&h->p, h->rt, s->gz ? LC__XFER_WRITE_GZ : LC__XFER_WRITE, NULL, s->a,
                     s->data, s->len, s->unpacked, s->mode, &err);
    break;
  }
  lc__proc_tag = NULL;
  if (r == 0) {
    h->p->on_finish = step_ended;
    h->p->finish_arg = h;
    r = lc__proc_launch(h->p, &err);
    if (r < 0) {
      lc__proc_release(h->p);
      h->p = NULL;
    }
  }
  if (r < 0) { /* named as step_check names a step that failed */
    char msg[LC_ERRMSG_MAX + 64];
    if (h->task->n > 1 || h->task->name[0] != '\0')
      snprintf(msg, sizeof(msg), "step %zu of %s: %s", h->step + 1, h->task->name, err.msg);
    else
      snprintf(msg, sizeof(msg), "%s", err.msg);
    host_finish(h, r, msg);
  }
}

/* h's step ended: check it, then the next step. */
static void step_check(job_host *h) {
  job *j = h->j;
  lc_process *p = h->p;
  const step *s = &h->task->steps[h->step];
  lc__err err = {0};
  int r = 0;

  h->p = NULL;
  h->out->exit = p->result;
  if (h->canceled) {
    r = lc__err_set(&err, LC_ECANCELED, "%s: '%s' was canceled", h->rt->name,
                    s->kind == STEP_RUN ? s->a : "the step");
  } else if (h->timed_out) {
    r = lc__err_set(&err, -ETIMEDOUT, "%s: '%s' timed out after %.1f s", h->rt->name,
                    s->kind == STEP_RUN ? s->a : "the step", j->timeout_ms / 1000.0);
  } else if (s->kind == STEP_RUN) {
    if (p->err_code < 0)
      r = lc__err_set(&err, p->err_code, "%s", lc__proc_err_msg(p));
    else if (j->fail_on_exit && (p->result.exit_status != 0 || p->result.signal != 0))
      r = p->result.signal ? lc__err_set(&err, LC_EREMOTE, "%s: '%s' was ended by signal %d",
                                         h->rt->name, s->a, p->result.signal)
                           : lc__err_set(&err, LC_EREMOTE, "%s: '%s' exited with status %d",
                                         h->rt->name, s->a, p->result.exit_status);
  } else {
    r = lc__xfer_finish(p, 0, &err);
  }
  lc__proc_release(p);
  if (r < 0) {
    char msg[LC_ERRMSG_MAX + 64];
    if (h->task->n > 1 || h->task->name[0] != '\0')
      snprintf(msg, sizeof(msg), "step %zu of %s: %s", h->step + 1, h->task->name, err.msg);
    else
      snprintf(msg, sizeof(msg), "%s", err.msg);
    host_finish(h, r, msg);
    return;
  }
  h->step++;
  if (j->canceled && h->step < h->task->n) {
    snprintf(err.msg, sizeof(err.msg), "%s: canceled before step %zu", h->rt->name, h->step + 1);
    host_finish(h, LC_ECANCELED, err.msg);
    return;
  }
  step_start(h);
}

static void host_start(job_host *h) {
  job *j = h->j;
  h->t0 = lc__now_ms();
  if (j->g->log_dir != NULL && h->task != NULL) {
    char path[4096];
    if (j->own_tasks) /* a host may have several tasks: each its own log */
      snprintf(path, sizeof(path), "%s/%s.%s.log", j->g->log_dir, h->rt->name, h->task->name);
    else
      snprintf(path, sizeof(path), "%s/%s.log", j->g->log_dir, h->rt->name);
    h->logf = fopen(path, "we"); /* close-on-exec: local children must not hold it */
  }
  if (h->task != NULL)
    host_log(h, "task %s on %s", h->task->name, h->rt->name);
  if (j->timeout_ms > 0) { /* the whole host's time, every step together */
    uv_timer_init(lc__engine_loop(j->g->engine), &h->limit);
    h->limit.data = h;
    h->limit_started = 1;
    uv_timer_start(&h->limit, limit_fired, (uint64_t)j->timeout_ms, 0);
  }
  step_start(h);
}

static void job_tick(uv_timer_t *t) {
  job *j = t->data;
  while (j->ready != NULL) {
    job_host *h = j->ready;
    j->ready = h->next_ready;
    step_check(h);
  }
}

/*
 * The cancel flag is set: hosts not started are reported canceled; running ones are told to stop
 * (their lifelines end their process groups) and reported when their end is confirmed, or after
 * the kill grace and 5 s more (limit_fired), so that a host that stopped answering cannot hold
 * the job.
 */
static void job_watch(uv_timer_t *t) {
  job *j = t->data;
  if (j->canceled || !__atomic_load_n(j->cancel, __ATOMIC_RELAXED)) /* set by another thread */
    return;
  j->canceled = 1;
  uv_timer_stop(&j->watch);
  for (; j->next < j->n; j->next++) {
    job_host *h = &j->hosts[j->next];
    h->done = 1;
    h->out->error = LC_ECANCELED;
    h->out->message = lc__sprintf("%s: canceled before it started", h->rt->name);
    log_finish(h->out);
    j->finished++;
  }
  for (size_t i = 0; i < j->n; i++) {
    job_host *h = &j->hosts[i];
    lc_process *p = h->p;
    if (h->done || p == NULL || p->finished || h->canceled)
      continue;
    h->canceled = 1;
    host_log(h, "canceled: stopping it");
    lc__proc_stop(p);
    if (!h->limit_started) {
      uv_timer_init(lc__engine_loop(j->g->engine), &h->limit);
      h->limit.data = h;
      h->limit_started = 1;
    }
    h->timed_out = 1; /* limit_fired's next turn gives up on it */
    uv_timer_start(&h->limit, limit_fired, (uint64_t)p->grace_ms + 5000, 0);
  }
  if (j->finished == j->n)
    job_close(j);
}

static void job_fn(lc__call *c) {
  job *j = (job *)c;
  uv_timer_init(lc__engine_loop(j->g->engine), &j->tick);
  j->tick.data = j;
  if (j->cancel != NULL) {
    uv_timer_init(lc__engine_loop(j->g->engine), &j->watch);
    j->watch.data = j;
    j->watch_started = 1;
    uv_timer_start(&j->watch, job_watch, 0, WATCH_MS);
  }
  if (j->n == 0) {
    job_close(j);
    return;
  }
  while (j->next < j->n && j->next < (size_t)j->g->fanout)
    host_start(&j->hosts[j->next++]);
}

/* Runs task t (or tasks[i], when tasks is not NULL) on the given runtimes; fills a report in
 * the same order. */
static int run_job(lc_group_report **out, lc_group *g, lc_runtime *const *rts, size_t n,
                   const lc_task *t, const lc_task *const *tasks, const lc_exec_options *eo,
                   lc_group_line_cb on_line, void *payload, const volatile sig_atomic_t *cancel) {
  lc_group_report *rep = NULL;
  job j;
  int r;

  *out = NULL;
  if ((r = report_new(&rep, n)) < 0)
    return lc__error_set(r, "out of memory");
  memset(&j, 0, sizeof(j));
  if ((j.hosts = lc__calloc(n, sizeof(*j.hosts))) == NULL) {
    lc_group_report_free(rep);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  if (g->log_dir != NULL)
    mkdir(g->log_dir, 0755);
  j.g = g;
  j.n = n;
  j.task = t;
  j.eo = eo;
  j.on_line = on_line;
  j.payload = payload;
  j.fail_on_exit = 1;
  j.timeout_ms = eo != NULL && eo->timeout_ms > 0 ? eo->timeout_ms : 0;
  j.own_tasks = tasks != NULL;
  j.cancel = cancel;
  j.tag = lc__proc_tag;
  for (size_t i = 0; i < n; i++) {
    j.hosts[i].j = &j;
    j.hosts[i].task = tasks != NULL ? tasks[i] : t;
    j.hosts[i].index = i;
    j.hosts[i].rt = rts[i];
    j.hosts[i].out = &rep->e[i];
    rep->e[i].host = lc__strdup(rts[i]->name);
  }
  r = lc__engine_run(g->engine, &j.call, job_fn);
  free(j.hosts);
  if (r < 0) {
    lc_group_report_free(rep);
    return r;
  }
  *out = rep;
  return 0;
}

int lc_group_exec(lc_group_report **out, lc_group *g, const char *command,
                  const lc_exec_options *opts, lc_group_line_cb on_line, void *payload) {
  return lc__group_exec_cancel(out, g, command, opts, on_line, payload, NULL);
}

int lc__group_exec_cancel(lc_group_report **out, lc_group *g, const char *command,
                          const lc_exec_options *opts, lc_group_line_cb on_line, void *payload,
                          const volatile sig_atomic_t *cancel) {
  step s = {.kind = STEP_RUN, .a = (char *)command};
  lc_task t = {.name = "", .steps = &s, .n = 1};
  *out = NULL;
  LC__CHECK_VERSION(opts, LC_EXEC_OPTIONS_VERSION, "lc_exec_options");
  if (g == NULL || command == NULL)
    return lc__error_set(-EINVAL, "group exec: no group or command given");
  return run_job(out, g, g->rts, g->n, &t, NULL, opts, on_line, payload, cancel);
}

int lc_group_run_task(lc_group_report **out, lc_group *g, const lc_task *t, const char *host,
                      lc_group_line_cb on_line, void *payload) {
  lc_runtime *one;
  *out = NULL;
  if (g == NULL || t == NULL)
    return lc__error_set(-EINVAL, "group task: no group or task given");
  if (host == NULL)
    return run_job(out, g, g->rts, g->n, t, NULL, NULL, on_line, payload, NULL);
  if ((one = lc_group_find(g, host)) == NULL)
    return lc__error_set(-ENOENT, "group task: no host %s in the group", host);
  return run_job(out, g, &one, 1, t, NULL, NULL, on_line, payload, NULL);
}

int lc__group_run_tasks(lc_group_report **out, lc_group *g, lc_runtime *const *rts,
                        const lc_task *const *tasks, size_t n, lc_group_line_cb on_line,
                        void *payload) {
  *out = NULL;
  for (size_t i = 0; i < n; i++)
    if (rts[i] == NULL || tasks[i] == NULL)
      return lc__error_set(-EINVAL, "group tasks: no runtime or task given for entry %zu", i);
  return run_job(out, g, rts, n, NULL, tasks, NULL, on_line, payload, NULL);
}

/* ---- connecting many ------------------------------------------------------------------------ */

typedef struct connect_job {
  lc__call call;
  lc_runtime **rts; /* prepared, not connected; NULL where preparing failed */
  report_entry *e;
  uint64_t *t0;
  size_t n, next, pending;
  int fanout;
  int starting; /* inside connect_next: a connect may fail at once and call back */
  int done;
  const volatile sig_atomic_t *cancel; /* as a job's */
  uv_timer_t watch;
  int watch_started;
  lc_engine *engine;
} connect_job;

static void connect_next(connect_job *j);

static void connect_closed(uv_handle_t *h) { lc__call_done(&((connect_job *)h->data)->call, 0); }

static void connected(lc_runtime *rt, const lc__err *err, void *arg) {
  connect_job *j = arg;
  size_t i = 0;
  while (i < j->n && j->rts[i] != rt)
    i++;
  j->e[i].seconds = (double)(lc__now_ms() - j->t0[i]) / 1000.0;
  if (err != NULL) {
    j->e[i].error = err->code;
    j->e[i].message = lc__strdup(err->msg);
  }
  j->pending--;
  connect_next(j);
}

static void connect_next(connect_job *j) {
  if (j->starting)
    return; /* the outer call goes on */
  j->starting = 1;
  while (j->next < j->n && j->pending < (size_t)j->fanout) {
    size_t i = j->next++;
    if (j->rts[i] == NULL)
      continue;
    j->pending++;
    j->t0[i] = lc__now_ms();
    lc__runtime_connect_async(j->rts[i], connected, j);
  }
  j->starting = 0;
  if (j->pending == 0 && j->next == j->n && !j->done) {
    j->done = 1;
    if (j->watch_started)
      uv_close((uv_handle_t *)&j->watch, connect_closed);
    else
      lc__call_done(&j->call, 0);
  }
}

/* The cancel flag is set: no more connects start (those under way end by their connect
 * timeout: libssh 0.10 has no abort of a connect in progress that leaves the session usable). */
static void connect_watch(uv_timer_t *t) {
  connect_job *j = t->data;
  if (!__atomic_load_n(j->cancel, __ATOMIC_RELAXED))
    return;
  uv_timer_stop(&j->watch);
  for (; j->next < j->n; j->next++)
    if (j->rts[j->next] != NULL && j->e[j->next].error == 0) {
      j->e[j->next].error = LC_ECANCELED;
      j->e[j->next].message = lc__sprintf("%s: canceled before connecting", j->e[j->next].host);
    }
  connect_next(j);
}

static void connect_fn(lc__call *c) {
  connect_job *j = (connect_job *)c;
  if (j->cancel != NULL) {
    uv_timer_init(lc__engine_loop(j->engine), &j->watch);
    j->watch.data = j;
    j->watch_started = 1;
    uv_timer_start(&j->watch, connect_watch, 0, WATCH_MS);
  }
  connect_next(j);
}

int lc_group_connect(lc_group_report **out, lc_group *g, const char *const *hosts, size_t n,
                     const lc_runtime_options *opts) {
  return lc__group_connect_cancel(out, g, hosts, n, opts, NULL);
}

int lc__group_connect_cancel(lc_group_report **out, lc_group *g, const char *const *hosts, size_t n,
                             const lc_runtime_options *opts, const volatile sig_atomic_t *cancel) {
  lc_group_report *rep = NULL;
  connect_job j;
  int r;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_RUNTIME_OPTIONS_VERSION, "lc_runtime_options");
  if (g == NULL || (hosts == NULL && n > 0))
    return lc__error_set(-EINVAL, "group connect: no group or hosts given");
  if ((r = report_new(&rep, n)) < 0)
    return lc__error_set(r, "out of memory");
  memset(&j, 0, sizeof(j));
  j.n = n;
  j.e = rep->e;
  j.fanout = g->fanout;
  j.cancel = cancel;
  j.engine = g->engine;
  if ((j.rts = lc__calloc(n, sizeof(*j.rts))) == NULL ||
      (j.t0 = lc__calloc(n, sizeof(*j.t0))) == NULL) {
    free(j.rts);
    lc_group_report_free(rep);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  /* settings are read here (files); the connections are made on the engine, all at once */
  for (size_t i = 0; i < n; i++) {
    rep->e[i].host = lc__strdup(hosts[i]);
    if (lc_group_find(g, hosts[i]) != NULL) {
      rep->e[i].error = -EEXIST;
      rep->e[i].message = lc__sprintf("%s is already in the group", hosts[i]);
    } else if ((r = lc__runtime_prepare_ssh(&j.rts[i], g->engine, hosts[i], opts)) < 0) {
      rep->e[i].error = r;
      rep->e[i].message = lc__strdup(lc_error_last());
    }
  }
  lc__engine_run(g->engine, &j.call, connect_fn);
  for (size_t i = 0; i < n; i++) {
    if (j.rts[i] == NULL)
      continue;
    if (rep->e[i].error == 0 && (r = lc_group_add(g, j.rts[i])) == 0)
      continue;
    if (rep->e[i].error == 0) { /* the same host twice in the list */
      rep->e[i].error = r;
      rep->e[i].message = lc__strdup(lc_error_last());
    }
    lc__runtime_discard(j.rts[i]);
  }
  free(j.rts);
  free(j.t0);
  *out = rep;
  return 0;
}

/* ---- tasks ---------------------------------------------------------------------------------- */

int lc_task_new(lc_task **out, const char *name) {
  lc_task *t = lc__calloc(1, sizeof(*t));
  *out = NULL;
  if (t == NULL || (t->name = lc__strdup(name ? name : "task")) == NULL) {
    free(t);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  *out = t;
  return 0;
}

void lc_task_free(lc_task *t) {
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->n; i++) {
    free(t->steps[i].a);
    free(t->steps[i].b);
    if (!t->steps[i].borrowed)
      free(t->steps[i].data);
  }
  free(t->steps);
  free(t->name);
  free(t);
}

/* borrow: a write's data is the caller's, kept by pointer (lc__task_add_write_borrowed). */
static int task_add(lc_task *t, step_kind kind, const char *a, const char *b, const void *data,
                    size_t len, unsigned int mode, int borrow) {
  step *s, *v;
  if (t == NULL || a == NULL || (kind != STEP_RUN && kind != STEP_WRITE && b == NULL) ||
      (kind == STEP_WRITE && data == NULL && len > 0))
    return lc__error_set(-EINVAL, "task: a step needs its command or paths");
  if ((v = lc__grow(t->steps, &t->cap, t->n + 1, sizeof(*v), 8)) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  t->steps = v;
  s = &t->steps[t->n];
  memset(s, 0, sizeof(*s));
  s->kind = kind;
  s->mode = mode;
  s->len = len;
  s->borrowed = borrow;
  if ((s->a = lc__strdup(a)) == NULL || (b != NULL && (s->b = lc__strdup(b)) == NULL) ||
      (kind == STEP_WRITE && !borrow && (s->data = lc__malloc(len)) == NULL)) {
    free(s->a);
    free(s->b);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  if (kind == STEP_WRITE && borrow)
    s->data = (char *)data;
  else if (kind == STEP_WRITE && len > 0)
    memcpy(s->data, data, len);
  t->n++;
  return 0;
}

int lc_task_add_run(lc_task *t, const char *command) {
  return task_add(t, STEP_RUN, command, NULL, NULL, 0, 0, 0);
}

int lc_task_add_send(lc_task *t, const char *local_path, const char *remote_path) {
  return task_add(t, STEP_SEND, local_path, remote_path, NULL, 0, 0, 0);
}

int lc_task_add_get(lc_task *t, const char *remote_path, const char *local_path) {
  return task_add(t, STEP_GET, remote_path, local_path, NULL, 0, 0, 0);
}

int lc_task_add_write(lc_task *t, const char *remote_path, const void *data, size_t len,
                      unsigned int mode) {
  return task_add(t, STEP_WRITE, remote_path, NULL, data, len, mode, 0);
}

int lc__task_add_write_borrowed(lc_task *t, const char *remote_path, const void *data, size_t len,
                                unsigned int mode) {
  return task_add(t, STEP_WRITE, remote_path, NULL, data, len, mode, 1);
}

int lc__task_add_write_gz_borrowed(lc_task *t, const char *remote_path, const void *gz,
                                   size_t gz_len, uint64_t unpacked, unsigned int mode) {
  int r = task_add(t, STEP_WRITE, remote_path, NULL, gz, gz_len, mode, 1);
  if (r == 0) {
    t->steps[t->n - 1].gz = 1;
    t->steps[t->n - 1].unpacked = unpacked;
  }
  return r;
}

/* ---- tunnels ------------------------------------------------------------------------------ */

size_t *lc__group_loopback_firsts(lc_group *g) {
  size_t *first = lc__calloc(g->n + 1, sizeof(*first));
  if (first == NULL)
    return NULL;
  for (size_t i = 0; i < g->n; i++) {
    first[i] = i;
    if (lc__runtime_loopback(g->rts[i]) <= LC__LOOPBACK_UNTOLD)
      continue;
    for (size_t j = 0; j < i && first[i] == i; j++)
      if (first[j] == j && lc__runtime_same_loopback(g->rts[i], g->rts[j]))
        first[i] = j;
  }
  return first;
}

int lc__group_needs_listen(lc_group *g, const size_t *first, size_t i, const lc_runtime *owner) {
  return first[i] == i && !lc__runtime_same_loopback(g->rts[i], owner) &&
         !lc__runtime_same_loopback(g->rts[i], NULL);
}

/*
 * Makes each port[k] of owner[k] (NULL: this machine) reachable as localhost:port here (a local
 * forward) and on every other runtime of g (a remote forward to here), all at once and once per
 * loopback (lc__group_needs_listen). The forwards go into keep. With a relay log, each host's
 * listens go through its mesh relay (meshrelay.c: W + 1 requests per host instead of W), recorded
 * in the log; a host without one gets sshd's listens.
 */
int lc__group_expose_many(lc_group *g, lc_runtime *const *owner, const int *port, size_t n,
                          lc__fwdlist *keep, lc__relaylog *log) {
  lc__fwd_spec *spec = NULL;
  size_t ns = 0, *first = NULL, *count = NULL, total = 0;
  int **per = NULL, *all = NULL;
  unsigned char *relayed = NULL;
  int r = 0;
  for (size_t k = 0; k < n; k++)
    if (port[k] < 1 || port[k] > 65535)
      return lc__error_set(-EINVAL, "expose: bad port %d", port[k]);
  if ((first = lc__group_loopback_firsts(g)) == NULL ||
      (count = lc__calloc(g->n + 1, sizeof(*count))) == NULL ||
      (per = lc__calloc(g->n + 1, sizeof(*per))) == NULL ||
      (relayed = lc__calloc(g->n + 1, 1)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  /* the ports each host listens on */
  for (size_t i = 0; i < g->n; i++)
    for (size_t k = 0; k < n; k++)
      count[i] += (size_t)lc__group_needs_listen(g, first, i, owner[k]);
  for (size_t i = 0; i < g->n; i++)
    total += count[i];
  if ((all = lc__calloc(total + 1, sizeof(*all))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  total = 0;
  for (size_t i = 0; i < g->n; i++) {
    per[i] = all + total;
    for (size_t k = 0; k < n; k++)
      if (lc__group_needs_listen(g, first, i, owner[k]))
        all[total++] = port[k];
  }
  if (log != NULL && (r = lc__meshrelay_listen_many(g->rts, g->n, per, count, relayed, log)) < 0)
    goto out;
  for (size_t i = 0; i < g->n; i++)
    if (!relayed[i])
      ns += count[i];
  if ((spec = lc__calloc(ns + n + 1, sizeof(*spec))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  ns = 0;
  for (size_t k = 0; k < n; k++) /* this machine reaches the owner's port */
    if (!lc__runtime_same_loopback(owner[k], NULL))
      spec[ns++] = lc__fwd_spec_same_port(owner[k], LC_FORWARD_LOCAL, port[k]);
  for (size_t i = 0; i < g->n; i++) /* the other hosts reach it through this machine */
    for (size_t k = 0; !relayed[i] && k < count[i]; k++)
      spec[ns++] = lc__fwd_spec_same_port(g->rts[i], LC_FORWARD_REMOTE, per[i][k]);
  r = lc__forwards_new(spec, ns, keep);
out:
  free(all);
  free(relayed);
  free(per);
  free(count);
  free(first);
  free(spec);
  return r;
}

int lc__group_expose(lc_group *g, lc_runtime *owner, int port, lc__fwdlist *keep) {
  return lc__group_expose_many(g, &owner, &port, 1, keep, NULL);
}

int lc_group_free_port(int *out, lc_group *g, const lc_ports *ranges) {
  if (g == NULL || ranges == NULL)
    return lc__error_set(-EINVAL, "group free port: no group or ranges given");
  return lc_ports_common_free(out, g->rts, g->n, ranges);
}

int lc_group_expose_local_port(lc_group *g, int port) {
  if (g == NULL)
    return lc__error_set(-EINVAL, "expose: no group given");
  return lc__group_expose(g, NULL, port, &g->fwds);
}

int lc_group_expose_runtime_port(lc_group *g, const char *host, int port) {
  lc_runtime *rt;
  if (g == NULL)
    return lc__error_set(-EINVAL, "expose: no group given");
  if ((rt = lc_group_find(g, host)) == NULL)
    return lc__error_set(-ENOENT, "expose: no host %s in the group", host ? host : "(null)");
  return lc__group_expose(g, rt, port, &g->fwds);
}
