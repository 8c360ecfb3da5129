/*
 * queue.c - the job queue's scheduler (lazycluster/jobs.h): slots of the group's hosts, jobs
 * dispatched to free slots on the engine thread as they come and as slots free up, retries on
 * another slot, put-backs of a lost host's jobs, the host's return (its directory and sends made
 * again by the maintenance thread), cancel, and the public calls that wait.
 *
 * Everything that schedules runs on the engine's loop: lc_jobs_submit, lc_jobs_update and
 * lc_jobs_cancel hand their work over under the queue's mutex and wake the loop (one uv_async);
 * a job's end comes from its process's on_finish. One timer runs only while a host is down (to
 * see it answer again, and the give-up clock) or a pool worker's restart is due.
 */
#include "queue_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LC__JOBS_DOWN_POLL_MS 500

double lc__jobs_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void lc_jobs_options_init(lc_jobs_options *opts) {
  lc_jobs_options init = LC_JOBS_OPTIONS_INIT;
  *opts = init;
}

/* ---- small helpers ----------------------------------------------------------------------------
 */

void lc__jobs_live(lc_jobs *q, int delta) {
  pthread_mutex_lock(&q->mu);
  q->live = (size_t)((long)q->live + delta);
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->mu);
}

void lc__jobs_proc_discard(lc_process *p) {
  p->refs = 2; /* lc__proc_launch left one; lc__proc_release drops two */
  p->rt = NULL;
  p->on_finish = NULL;
  p->on_line = NULL;
  lc__proc_release(p);
}

void lc__jobs_line(lc_jobs *q, lc_jobs_line_kind kind, const lc__qjob *j, const lc__qslot *s,
                   const char *line, size_t len, lc_stream stream) {
  lc_jobs_line l = {.kind = kind,
                    .job = j ? &j->pub : NULL,
                    .host = s ? s->host->name : NULL,
                    .slot = s ? s->index : -1,
                    .gpu = s ? s->gpu : -1,
                    .line = line,
                    .len = len,
                    .stream = stream};
  if (q->opts.on_line != NULL)
    q->opts.on_line(&l, q->opts.payload);
}

void lc__jobs_notice(lc_jobs *q, const lc__qslot *s, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  lc__jobs_line(q, LC_JOBS_LINE_NOTICE, NULL, s, text,
                (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, LC_STDERR);
}

/* Appends a line to b, keeping only the last max bytes of whole lines (max < 0: all); b stays
 * NUL-terminated. */
static void keep_tail(lc__buf *b, const char *line, size_t len, long max) {
  if (lc__buf_append(b, line, len) < 0 || lc__buf_append(b, "\n", 1) < 0)
    return;
  while (max >= 0 && b->len > (size_t)max) {
    const char *nl = memchr(b->data, '\n', b->len);
    lc__buf_consume(b, nl ? (size_t)(nl - b->data) + 1 : b->len);
  }
  if (lc__buf_append(b, "", 1) == 0)
    b->len--;
}

void lc__jobs_keep_line(lc_jobs *q, lc__qjob *j, const char *line, size_t len, lc_stream stream) {
  int err = stream == LC_STDERR;
  int *fd = err ? &j->err_fd : &j->out_fd;
  keep_tail(err ? &j->err : &j->out, line, len, q->output_max);
  if (*fd >= 0 && (write(*fd, line, len) != (ssize_t)len || write(*fd, "\n", 1) != 1)) {
    close(*fd); /* results are whole or absent: files.c sees the fd gone */
    *fd = -2;
  }
}

static void free_strv(char **v) {
  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

/* The environment of a job or worker on s: NULL-terminated, free with free_strv. */
static char **slot_env(lc_jobs *q, const lc__qslot *s, unsigned long seq) {
  char **env = lc__calloc(q->nenv + 8, sizeof(*env));
  size_t n = 0;
  int ok = 1;
  if (env == NULL)
    return NULL;
  ok = ok && (env[n++] = lc__sprintf("LAZYCLUSTER_HOST=%s", s->host->name)) != NULL;
  ok = ok && (env[n++] = lc__sprintf("LAZYCLUSTER_SLOT=%d", s->index)) != NULL;
  ok = ok && (env[n++] = lc__sprintf("LAZYCLUSTER_GPU=%d", s->gpu)) != NULL;
  if (ok && s->gpu >= 0) {
    char cvd[160], order[40];
    lc__runtime_gpu_env(s->host->rt, s->gpu, cvd, sizeof(cvd), order, sizeof(order));
    ok = (env[n++] = lc__strdup(cvd)) != NULL;
    if (ok && order[0] != '\0')
      ok = (env[n++] = lc__strdup(order)) != NULL;
  }
  if (ok && seq > 0)
    ok = (env[n++] = lc__sprintf("LAZYCLUSTER_JOB=%lu", seq)) != NULL;
  for (size_t i = 0; ok && i < q->nenv; i++)
    ok = (env[n++] = lc__strdup(q->env[i])) != NULL;
  if (!ok) {
    free_strv(env);
    return NULL;
  }
  return env;
}

int lc__jobs_slot_proc(lc_process **out, lc_jobs *q, lc__qslot *s, const char *command,
                       unsigned long seq, lc_line_cb on_line, int input,
                       void (*on_finish)(lc_process *, void *)) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  char label[48], **env;
  int r;
  *out = NULL;
  if ((env = slot_env(q, s, seq)) == NULL)
    return lc__error_set(-ENOMEM, "%s slot %d: out of memory", s->host->name, s->index);
  if (seq > 0)
    snprintf(label, sizeof(label), "job-%lu", seq);
  else
    snprintf(label, sizeof(label), "pool-%d", s->index);
  eo.env = (const char *const *)env;
  eo.cwd = s->host->workdir;
  eo.on_line = on_line;
  eo.payload = s;
  eo.label = label;
  eo.input = input;
  if ((r = lc__proc_new(out, s->host->rt, command, &eo, 1, NULL, NULL)) == 0) {
    (*out)->on_finish = on_finish;
    (*out)->finish_arg = s;
  }
  free_strv(env);
  return r;
}

/* A NULL-terminated copy of v (n strings, or up to its NULL when n is (size_t)-1). */
static char **copy_strv(const char *const *v, size_t n, size_t *count) {
  size_t k = 0;
  char **c;
  if (v == NULL && n == (size_t)-1) {
    if (count)
      *count = 0;
    return NULL;
  }
  if (n == (size_t)-1)
    for (n = 0; v[n] != NULL; n++)
      ;
  if ((c = lc__calloc(n + 1, sizeof(*c))) == NULL)
    return NULL;
  for (; k < n; k++)
    if ((c[k] = lc__strdup(v[k])) == NULL) {
      free_strv(c);
      return NULL;
    }
  if (count)
    *count = n;
  return c;
}

void lc__jobs_job_begin(lc_jobs *q, lc__qslot *s, lc__qjob *j) {
  s->job = j;
  j->pub.host = s->host->name;
  j->pub.slot = s->index;
  j->pub.gpu = s->gpu;
  j->pub.attempts++;
  j->pub.start_time = lc__jobs_wall_now();
  j->pub.runtime = 0;
  j->last = s;
  j->out.len = j->err.len = 0;
  lc__files_results_begin(q, j);
}

/* ---- the run queue (engine) -------------------------------------------------------------------
 */

static void run_push_tail(lc_jobs *q, lc__qjob *j) {
  j->next = NULL;
  if (q->run_tail)
    q->run_tail->next = j;
  else
    q->run_head = j;
  q->run_tail = j;
}

void lc__jobs_requeue(lc_jobs *q, lc__qjob *j) {
  j->next = q->run_head;
  q->run_head = j;
  if (q->run_tail == NULL)
    q->run_tail = j;
  pthread_mutex_lock(&q->mu); /* the state too: lc_jobs_next reads it */
  j->pub.state = LC_JOB_QUEUED;
  q->st.running--;
  q->st.queued++;
  pthread_mutex_unlock(&q->mu);
}

static void run_remove(lc_jobs *q, lc__qjob *j, lc__qjob *prev) {
  if (prev)
    prev->next = j->next;
  else
    q->run_head = j->next;
  if (q->run_tail == j)
    q->run_tail = prev;
  j->next = NULL;
}

/* ---- ends -------------------------------------------------------------------------------------
 */

void lc__jobs_end(lc_jobs *q, lc__qjob *j, lc_job_state state) {
  lc_job_state was = j->pub.state;
  if (state == LC_JOB_DONE || state == LC_JOB_FAILED)
    lc__files_joblog(q, j);
  if (was == LC_JOB_RUNNING || state == LC_JOB_CANCELLED)
    lc__files_results_end(q, j, state != LC_JOB_CANCELLED);
  pthread_mutex_lock(&q->mu);
  if (was == LC_JOB_RUNNING)
    q->st.running--;
  else if (was == LC_JOB_QUEUED)
    q->st.queued--;
  if (state == LC_JOB_DONE)
    q->st.done++;
  else if (state == LC_JOB_FAILED)
    q->st.failed++;
  else if (state == LC_JOB_CANCELLED)
    q->st.cancelled++;
  else
    q->st.skipped++;
  j->pub.state = state;
  j->pub.message = j->message ? j->message : "";
  j->pub.result = j->result;
  j->pub.out = j->out.data ? j->out.data : "";
  j->pub.out_len = j->out.len;
  j->pub.err = j->err.data ? j->err.data : "";
  j->pub.err_len = j->err.len;
  q->done_order[q->ndone_order++] = j->pub.seq;
  q->ended++;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->mu);
  if (q->opts.on_done != NULL)
    q->opts.on_done(&j->pub, q->opts.payload);
}

/* Sets j's error (0 clears it) and message. */
static void job_error(lc__qjob *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void job_error(lc__qjob *j, int code, const char *fmt, ...) {
  va_list ap;
  char text[1024];
  free(j->message);
  j->message = NULL;
  j->pub.error = code;
  j->pub.message = "";
  if (fmt == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  j->message = lc__strdup(text);
  j->pub.message = j->message ? j->message : "";
}

/* ---- hosts ------------------------------------------------------------------------------------
 */

/* How long after a loss the host's old processes may still run (their lifelines end them when
 * the heartbeat has been silent past its limit), as the cluster layer waits (cluster/hosts.c)
 * where the runtime's sweep after the reconnect could not end them. */
static uint64_t settle_ms(const lc_runtime *rt) {
  uint64_t period_s = ((uint64_t)(rt->opts.heartbeat_timeout_ms + 999) / 1000 + 2) / 3;
  return 4 * period_s * 1000 + (uint64_t)rt->opts.kill_grace_ms + 2000;
}

static size_t usable_slots(const lc__qhost *h) {
  size_t n = 0;
  if (h->down)
    return 0;
  for (int k = 0; k < h->nslots; k++)
    n += !h->slots[k].gone;
  return n;
}

void lc__jobs_host_lost(lc_jobs *q, lc__qhost *h, const char *why) {
  if (h->down)
    return;
  h->down = 1;
  h->lost_at = lc__now_ms();
  h->renew_failed = 0;
  h->sweep_noted = 0;
  snprintf(h->why, sizeof(h->why), "%s", why ? why : "its connection was lost");
  pthread_mutex_lock(&q->mu);
  for (int k = 0; k < h->nslots; k++)
    if (!h->slots[k].gone) {
      q->st.slots--;
      q->st.slots_lost++;
    }
  pthread_mutex_unlock(&q->mu);
  lc__jobs_notice(q, NULL, "%s lost (%s): its jobs go back to the queue until it answers again",
                  h->name, h->why);
  lc__jobs_arm(q);
}

/* The maintenance thread made h's directory and sends again (or failed to). */
static void host_back(lc_jobs *q, lc__qhost *h, int ok) {
  if (!ok) {
    h->lost_at = lc__now_ms(); /* tries again after another settle period */
    h->renew_failed = 1;
    lc__jobs_notice(q, NULL,
                    "%s answers again but its working directory or sends failed; it "
                    "tries again later",
                    h->name);
    return;
  }
  h->down = 0;
  pthread_mutex_lock(&q->mu);
  for (int k = 0; k < h->nslots; k++)
    if (!h->slots[k].gone) {
      q->st.slots++;
      q->st.slots_lost--;
    }
  pthread_mutex_unlock(&q->mu);
  lc__jobs_notice(q, NULL, "%s back: it answers again", h->name);
  if (q->pool)
    for (int k = 0; k < h->nslots; k++)
      if (!h->slots[k].gone && h->slots[k].proc == NULL && !q->cancelled_done)
        lc__pool_start(q, &h->slots[k]);
}

/* The maintenance thread: a host that answers again gets its directory and sends made anew
 * (blocking calls, which may not run on the engine thread). */
static void *maint_main(void *arg) {
  lc_jobs *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    lc__qhost *h = NULL;
    for (size_t i = 0; i < q->nhosts && h == NULL; i++)
      if (q->hosts[i].renew == 1)
        h = &q->hosts[i];
    if (h == NULL) {
      if (q->maint_stop)
        break;
      pthread_cond_wait(&q->cond, &q->mu);
      continue;
    }
    pthread_mutex_unlock(&q->mu);
    int r = q->cwd != NULL ? 0 : lc__runtime_workdir_renew(h->rt);
    if (r == 0)
      r = lc__files_send(q, h);
    pthread_mutex_lock(&q->mu);
    h->renew = r == 0 ? 2 : 3;
    uv_async_send(&q->kick); /* the free joins this thread before it closes the handle */
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

/* ---- dispatch ---------------------------------------------------------------------------------
 */

static int slot_free(const lc_jobs *q, const lc__qslot *s) {
  if (s->gone || s->host->down || s->job != NULL)
    return 0;
  if (q->pool)
    return lc__pool_idle(s);
  return s->proc == NULL && s->xfer == NULL;
}

/* A free slot for j: another than its last one when one is free, on the host with the fewest
 * jobs running. */
static lc__qslot *pick_slot(lc_jobs *q, const lc__qjob *j) {
  lc__qslot *best = NULL;
  int best_score = 0;
  for (size_t i = 0; i < q->nhosts; i++) {
    lc__qhost *h = &q->hosts[i];
    int busy = 0;
    if (h->down)
      continue;
    if (!lc_runtime_is_connected(h->rt)) {
      lc__jobs_host_lost(q, h, "not connected");
      continue;
    }
    for (int k = 0; k < h->nslots; k++)
      busy += h->slots[k].job != NULL;
    for (int k = 0; k < h->nslots; k++) {
      lc__qslot *s = &h->slots[k];
      int score;
      if (!slot_free(q, s))
        continue;
      score = busy + 1;
      if (j->last != NULL &&
          (s == j->last || (s->host == j->last->host && s->gpu >= 0 && s->gpu == j->last->gpu)))
        score += 1 << 20;
      else if (j->last != NULL && s->host == j->last->host)
        score += 1 << 10;
      if (best == NULL || score < best_score) {
        best = s;
        best_score = score;
      }
    }
  }
  return best;
}

static void job_finished(lc_process *p, void *arg);
static void job_output(const char *line, size_t len, lc_stream stream, void *payload);

/* Runs command job j on s; on failure j ends or goes back. */
static void start_command(lc_jobs *q, lc__qslot *s, lc__qjob *j) {
  lc__buf cmd = {0};
  lc__job_place where = {s->host->name, s->index, s->gpu, s->host->workdir};
  lc_process *p = NULL;
  lc__err err = {0};
  int r;

  r = lc__job_command(&cmd, j->text ? j->text : q->command, (const char *const *)j->args,
                      j->pub.nargs, j->pub.seq, &where);
  if (r < 0) {
    job_error(j, r, "%s", lc_error_last());
    lc__jobs_end(q, j, LC_JOB_FAILED);
    goto out;
  }
  free(j->input);
  j->input = cmd.data;
  j->pub.input = j->input;
  cmd.data = NULL;
  if ((r = lc__jobs_slot_proc(&p, q, s, j->input, j->pub.seq, job_output, 0, job_finished)) < 0) {
    job_error(j, r, "%s slot %d: %s", s->host->name, s->index, lc_error_last());
    lc__jobs_end(q, j, LC_JOB_FAILED);
    goto out;
  }
  s->proc = p;
  s->next_return = 0; /* this job's returns, from the first */
  lc__jobs_job_begin(q, s, j);
  lc__jobs_live(q, 1);
  if (lc__proc_launch(p, &err) < 0) {
    lc__jobs_proc_discard(p);
    s->job = NULL;
    s->proc = NULL;
    lc__jobs_live(q, -1);
    j->pub.attempts--;
    lc__jobs_requeue(q, j);
    lc__jobs_host_lost(q, s->host, err.msg);
  }
out:
  lc__buf_free(&cmd);
}

/* Starts queued jobs on free slots, oldest first. A start may end at once (its host found lost,
 * the job back at the head) and call back in here: the outer loop then goes on. */
static void dispatch(lc_jobs *q) {
  lc__qjob *j;
  lc__qslot *s;
  if (q->dispatching) {
    q->redispatch = 1;
    return;
  }
  q->dispatching = 1;
  while (!q->cancelled_done && (j = q->run_head) != NULL && (s = pick_slot(q, j)) != NULL) {
    run_remove(q, j, NULL);
    pthread_mutex_lock(&q->mu); /* the state too: lc_jobs_next reads it */
    q->st.queued--;
    q->st.running++;
    j->pub.state = LC_JOB_RUNNING;
    pthread_mutex_unlock(&q->mu);
    if (q->pool) {
      if (lc__pool_send_job(q, s, j) < 0) /* its worker is gone: the slot is no longer idle */
        lc__jobs_requeue(q, j);
    } else {
      start_command(q, s, j);
    }
  }
  q->dispatching = 0;
  if (q->redispatch) {
    q->redispatch = 0;
    dispatch(q);
  }
}

/* ---- a command job's process ------------------------------------------------------------------
 */

static void job_output(const char *line, size_t len, lc_stream stream, void *payload) {
  lc__qslot *s = payload;
  lc__qjob *j = s->job;
  if (j == NULL)
    return;
  lc__jobs_keep_line(s->q, j, line, len, stream);
  lc__jobs_line(s->q, LC_JOBS_LINE_OUTPUT, j, s, line, len, stream);
}

/* How job j on s ended well: its returns are fetched, then it is done. */
static void job_succeeded(lc_jobs *q, lc__qslot *s, lc__qjob *j) {
  lc__err err = {0};
  int r = q->returns != NULL && !q->cancelled_done ? lc__files_next_return(q, s, &err) : 0;
  if (r > 0)
    return; /* the slot stays busy until the returns are here */
  s->job = NULL;
  if (r < 0) {
    job_error(j, err.code, "%s", err.msg);
    lc__jobs_end(q, j, LC_JOB_FAILED);
    return;
  }
  job_error(j, 0, NULL);
  lc__jobs_end(q, j, LC_JOB_DONE);
}

static void check_and_dispatch(lc_jobs *q);

/* A return finished (files.c calls it through on_finish). */
void lc__jobs_return_done(lc_jobs *q, lc__qslot *s, int code, const char *msg) {
  lc__qjob *j = s->job;
  if (j == NULL)
    return;
  if (code < 0) {
    s->job = NULL;
    job_error(j, code, "%s", msg);
    lc__jobs_end(q, j, q->cancelled_done ? LC_JOB_CANCELLED : LC_JOB_FAILED);
  } else if (q->cancelled_done) {
    s->job = NULL;
    lc__jobs_end(q, j, LC_JOB_CANCELLED);
  } else {
    job_succeeded(q, s, j);
  }
  check_and_dispatch(q);
}

static void job_finished(lc_process *p, void *arg) {
  lc__qslot *s = arg;
  lc_jobs *q = s->q;
  lc__qjob *j = s->job;
  lc_exec_result res = p->result;
  lc__err perr;
  int lost, ok;

  lc__proc_err(p, &perr);
  s->proc = NULL;
  lc__proc_release(p);
  lc__jobs_live(q, -1);
  if (j == NULL)
    return;
  j->pub.runtime = lc__jobs_wall_now() - j->pub.start_time;
  j->pub.exit = res;
  lost = perr.code == LC_ECLOSED; /* an exit status that arrived counts, even if the host went */
  ok = perr.code == 0 && res.exit_status == 0 && res.signal == 0;
  /* a job that ended well before the cancel reached it is done (it ran whole) */
  if (q->cancelled_done && (!ok || q->returns != NULL)) {
    s->job = NULL;
    job_error(j, 0, NULL);
    lc__jobs_end(q, j, LC_JOB_CANCELLED);
  } else if (lost) {
    s->job = NULL;
    job_error(j, LC_ECLOSED, "%s slot %d: the host was lost: %s", s->host->name, s->index,
              perr.msg[0] ? perr.msg : "its connection went");
    lc__files_results_end(q, j, 0);
    lc__jobs_requeue(q, j);
    pthread_mutex_lock(&q->mu);
    q->st.requeued++;
    pthread_mutex_unlock(&q->mu);
    lc__jobs_notice(q, s, "job %lu put back: %s lost while it ran", j->pub.seq, s->host->name);
    lc__jobs_host_lost(q, s->host, perr.msg[0] ? perr.msg : "its connection went");
  } else if (ok) {
    job_succeeded(q, s, j);
  } else {
    s->job = NULL;
    if (perr.code < 0)
      job_error(j, perr.code, "%s slot %d: %s", s->host->name, s->index, perr.msg);
    else if (res.signal)
      job_error(j, LC_EREMOTE, "%s slot %d: job %lu killed by signal %d", s->host->name, s->index,
                j->pub.seq, res.signal);
    else
      job_error(j, LC_EREMOTE, "%s slot %d: job %lu exited with status %d", s->host->name, s->index,
                j->pub.seq, res.exit_status);
    if (j->retries_used < q->opts.retries) {
      j->retries_used++;
      pthread_mutex_lock(&q->mu);
      q->st.retried++;
      pthread_mutex_unlock(&q->mu);
      lc__jobs_requeue(q, j);
    } else {
      lc__jobs_end(q, j, LC_JOB_FAILED);
    }
  }
  check_and_dispatch(q);
}

/* ---- the loop's work --------------------------------------------------------------------------
 */

/* Cancels: queued jobs at once, running ones through their lifelines (their ends follow). */
static void do_cancel(lc_jobs *q) {
  lc__qjob *j;
  q->cancelled_done = 1;
  while ((j = q->run_head) != NULL) {
    run_remove(q, j, NULL);
    lc__jobs_end(q, j, LC_JOB_CANCELLED);
  }
  for (size_t i = 0; i < q->nhosts; i++)
    for (int k = 0; k < q->hosts[i].nslots; k++) {
      lc__qslot *s = &q->hosts[i].slots[k];
      s->restart_at = 0;
      if (s->proc != NULL)
        lc__proc_stop(s->proc);
      if (s->xfer != NULL)
        lc__proc_stop(s->xfer);
    }
}

/* After any event: a cancel carried out, updates to idle workers first (a restarted worker
 * answers them before any job), then jobs to free slots. */
static void check_and_dispatch(lc_jobs *q) {
  if (__atomic_load_n(&q->cancel, __ATOMIC_ACQUIRE) && !q->cancelled_done)
    do_cancel(q);
  if (q->pool)
    lc__pool_pump_updates(q);
  dispatch(q);
}

void lc__jobs_kick_here(lc_jobs *q) { check_and_dispatch(q); }

/* Give-up clock: no slot usable for give_up_ms fails the queued jobs. */
static void give_up_check(lc_jobs *q, uint64_t now) {
  size_t usable = 0;
  char hosts[768] = "";
  size_t at = 0;
  lc__qjob *j;
  for (size_t i = 0; i < q->nhosts; i++)
    usable += usable_slots(&q->hosts[i]);
  if (usable > 0 || q->run_head == NULL) {
    q->unusable_since = usable > 0 ? 0 : q->unusable_since;
    if (usable > 0)
      return;
  }
  if (q->unusable_since == 0) {
    q->unusable_since = now;
    return;
  }
  if (now - q->unusable_since < (uint64_t)q->opts.give_up_ms || q->run_head == NULL)
    return;
  for (size_t i = 0; i < q->nhosts && at < sizeof(hosts) - 1; i++) {
    int n = snprintf(hosts + at, sizeof(hosts) - at, "%s%s: %s", i ? "; " : "", q->hosts[i].name,
                     q->hosts[i].down ? q->hosts[i].why : "no worker left");
    if (n < 0)
      break;
    at += (size_t)n;
  }
  while ((j = q->run_head) != NULL) {
    run_remove(q, j, NULL);
    job_error(j, -ETIMEDOUT, "no slot usable for %.0f s (%s)", q->opts.give_up_ms / 1000.0, hosts);
    lc__jobs_end(q, j, LC_JOB_FAILED);
  }
}

/* Lost host h answers again: may it take jobs? Once the runtime's sweep ended its old
 * processes (at once), else (the sweep failed, noted once; or its renewal failed before) after
 * the settle period. */
static int old_ended(lc_jobs *q, lc__qhost *h, uint64_t now) {
  char why[512] = "";
  int ended = lc__runtime_lost_ended(h->rt, why, sizeof(why));
  if (ended == 0)
    return 0;
  if (ended < 0 && !h->sweep_noted) {
    h->sweep_noted = 1;
    lc__jobs_notice(q, NULL,
                    "%s answers again, but its old processes could not be ended (%s): it takes "
                    "jobs again when their heartbeat limit has surely run out",
                    h->name, why);
  }
  return (ended > 0 && !h->renew_failed) || now >= h->lost_at + settle_ms(h->rt);
}

static void on_tick(uv_timer_t *t) {
  lc_jobs *q = t->data;
  uint64_t now = lc__now_ms();
  int want_thread = 0;
  for (size_t i = 0; i < q->nhosts; i++) {
    lc__qhost *h = &q->hosts[i];
    if (!h->down || !lc_runtime_is_connected(h->rt) || !old_ended(q, h, now))
      continue;
    pthread_mutex_lock(&q->mu);
    if (h->renew == 0) {
      h->renew = 1;
      want_thread = 1;
      pthread_cond_broadcast(&q->cond);
    }
    pthread_mutex_unlock(&q->mu);
  }
  if (want_thread) {
    pthread_mutex_lock(&q->mu);
    if (!q->maint_started && pthread_create(&q->maint, NULL, maint_main, q) == 0)
      q->maint_started = 1;
    pthread_mutex_unlock(&q->mu);
  }
  if (!q->cancelled_done)
    give_up_check(q, now);
  if (q->pool && !q->cancelled_done)
    lc__pool_restarts(q, now);
  check_and_dispatch(q);
  lc__jobs_arm(q);
}

void lc__jobs_arm(lc_jobs *q) {
  uint64_t now = lc__now_ms(), due = 0;
  int down = 0;
  for (size_t i = 0; i < q->nhosts; i++)
    down |= q->hosts[i].down;
  if (down || (q->unusable_since != 0 && q->run_head != NULL))
    due = now + LC__JOBS_DOWN_POLL_MS;
  if (q->pool && !q->cancelled_done) {
    uint64_t r = lc__pool_restarts(q, 0);
    if (r != 0 && (due == 0 || r < due))
      due = r;
  }
  if (due == 0) {
    uv_timer_stop(&q->tick);
    return;
  }
  uv_timer_start(&q->tick, on_tick, due > now ? due - now : 0, 0);
}

static void on_kick(uv_async_t *a) {
  lc_jobs *q = a->data;
  lc__qjob *in;
  pthread_mutex_lock(&q->mu);
  in = q->in_head;
  q->in_head = q->in_tail = NULL;
  pthread_mutex_unlock(&q->mu);
  if (__atomic_load_n(&q->cancel, __ATOMIC_ACQUIRE) && !q->cancelled_done)
    do_cancel(q);
  while (in != NULL) {
    lc__qjob *j = in;
    in = j->next;
    j->next = NULL;
    if (q->cancelled_done) {
      lc__jobs_end(q, j, LC_JOB_CANCELLED);
    } else if (q->opts.resume && lc__joblog_skips(&q->resume, j->pub.seq, q->opts.resume)) {
      lc__jobs_end(q, j, LC_JOB_SKIPPED);
    } else {
      run_push_tail(q, j);
    }
  }
  for (size_t i = 0; i < q->nhosts; i++) {
    lc__qhost *h = &q->hosts[i];
    int r;
    pthread_mutex_lock(&q->mu);
    r = h->renew;
    if (r >= 2)
      h->renew = 0;
    pthread_mutex_unlock(&q->mu);
    if (r >= 2 && h->down)
      host_back(q, h, r == 2);
  }
  check_and_dispatch(q);
  lc__jobs_arm(q);
}

/* ---- lc_jobs_new and its parts ----------------------------------------------------------------
 */

typedef struct {
  lc__call call;
  lc_jobs *q;
} jobs_call;

static void init_fn(lc__call *c) {
  lc_jobs *q = ((jobs_call *)c)->q;
  size_t started = 0;
  uv_async_init(lc__engine_loop(q->engine), &q->kick, on_kick);
  q->kick.data = q;
  uv_timer_init(lc__engine_loop(q->engine), &q->tick);
  q->tick.data = q;
  if (q->pool) {
    char why[1024] = "";
    size_t at = 0;
    for (size_t i = 0; i < q->nhosts; i++)
      for (int k = 0; k < q->hosts[i].nslots; k++) {
        if (lc__pool_start(q, &q->hosts[i].slots[k]) == 0) {
          started++;
        } else if (at < sizeof(why) - 1) {
          int n = snprintf(why + at, sizeof(why) - at, "%s%s slot %d: %s", at ? "; " : "",
                           q->hosts[i].name, k, q->hosts[i].slots[k].last_err);
          at += n > 0 ? (size_t)n : 0;
        }
      }
    if (started == 0) {
      lc__call_done(c, lc__err_set(&c->err, LC_EREMOTE, "no pool worker started: %s", why));
      return;
    }
  }
  lc__call_done(c, 0);
}

static void close_cb(uv_handle_t *h) {
  lc_jobs *q = h->data;
  if (++q->handles_closed == 2)
    lc__call_done(q->fini, 0);
}

/* The free's last engine work: whatever still runs is let go, the handles closed. */
static void fini_fn(lc__call *c) {
  lc_jobs *q = ((jobs_call *)c)->q;
  for (size_t i = 0; i < q->nhosts; i++)
    for (int k = 0; k < q->hosts[i].nslots; k++) {
      lc__qslot *s = &q->hosts[i].slots[k];
      lc_process *ps[2] = {s->proc, s->xfer};
      s->proc = s->xfer = NULL;
      for (int m = 0; m < 2; m++)
        if (ps[m] != NULL) {
          ps[m]->on_finish = NULL;
          lc__proc_release(ps[m]);
        }
    }
  uv_timer_stop(&q->tick);
  q->fini = c;
  q->kick.data = q;
  q->tick.data = q;
  uv_close((uv_handle_t *)&q->kick, close_cb);
  uv_close((uv_handle_t *)&q->tick, close_cb);
}

static int copy_options(lc_jobs *q, const lc_jobs_options *opts) {
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  if (opts != NULL)
    lc__options_copy(&o, opts, sizeof(o));
  q->opts = o;
  if ((o.command && !(q->command = lc__strdup(o.command))) ||
      (o.worker_cmd && !(q->worker_cmd = lc__strdup(o.worker_cmd))) ||
      (o.cwd && !(q->cwd = lc__strdup(o.cwd))) ||
      (o.return_dir && !(q->return_dir = lc__strdup(o.return_dir))) ||
      (o.joblog && !(q->joblog_path = lc__strdup(o.joblog))) ||
      (o.results_dir && !(q->results_dir = lc__strdup(o.results_dir))) ||
      (o.env && !(q->env = copy_strv(o.env, (size_t)-1, &q->nenv))) ||
      (o.send && !(q->send = copy_strv(o.send, (size_t)-1, NULL))) ||
      (o.returns && !(q->returns = copy_strv(o.returns, (size_t)-1, NULL))))
    return lc__error_set(-ENOMEM, "out of memory");
  q->opts.command = q->command;
  q->opts.worker_cmd = q->worker_cmd;
  q->opts.cwd = q->cwd;
  q->opts.return_dir = q->return_dir;
  q->opts.joblog = q->joblog_path;
  q->opts.results_dir = q->results_dir;
  q->opts.env = (const char *const *)q->env;
  q->opts.send = (const char *const *)q->send;
  q->opts.returns = (const char *const *)q->returns;
  q->pool = q->worker_cmd != NULL;
  if (q->opts.slots_per_gpu <= 0)
    q->opts.slots_per_gpu = 1;
  if (q->opts.retries < 0)
    q->opts.retries = 0;
  if (q->opts.max_requeues <= 0)
    q->opts.max_requeues = 3;
  if (q->opts.max_restarts <= 0)
    q->opts.max_restarts = 5;
  if (q->opts.restart_backoff_ms <= 0)
    q->opts.restart_backoff_ms = 1000;
  if (q->opts.restart_window_ms <= 0)
    q->opts.restart_window_ms = 600000;
  if (q->opts.give_up_ms <= 0)
    q->opts.give_up_ms = 300000;
  q->output_max = q->opts.output_max == 0  ? 65536
                  : q->opts.output_max < 0 ? -1
                                           : q->opts.output_max;
  if (q->opts.resume && q->joblog_path == NULL)
    return lc__error_set(-EINVAL, "jobs: resume needs a joblog");
  if (q->pool && q->returns != NULL)
    return lc__error_set(-EINVAL, "jobs: returns are for command jobs, not a pool");
  return 0;
}

/* The slots of every host of g. */
static int make_hosts(lc_jobs *q, lc_group *g) {
  q->nhosts = lc_group_count(g);
  if (q->nhosts == 0)
    return lc__error_set(-EINVAL, "jobs: the group has no host, so no slot");
  if ((q->hosts = lc__calloc(q->nhosts, sizeof(*q->hosts))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  for (size_t i = 0; i < q->nhosts; i++) {
    lc__qhost *h = &q->hosts[i];
    lc_runtime *rt = lc_group_at(g, i);
    int gpus = lc_runtime_gpus(rt) > 0 ? lc_runtime_gpus(rt) : 0;
    int n = gpus > 0                     ? gpus * q->opts.slots_per_gpu
            : q->opts.slots_per_host > 0 ? q->opts.slots_per_host
            : lc_runtime_slots(rt) > 0   ? lc_runtime_slots(rt)
                                         : 1;
    h->rt = rt;
    if ((h->name = lc__strdup(lc_runtime_name(rt))) == NULL ||
        (h->slots = lc__calloc((size_t)n, sizeof(*h->slots))) == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    h->nslots = n;
    for (int k = 0; k < n; k++) {
      lc__qslot *s = &h->slots[k];
      s->q = q;
      s->host = h;
      s->index = k;
      s->gpu = gpus > 0 ? k / q->opts.slots_per_gpu : -1;
      s->wstate = LC__W_DEAD;
    }
    q->nslots += (size_t)n;
    lc__runtime_keep_connected(rt);
  }
  return 0;
}

/* Working directories, made on all hosts at once, then sends. */
static int prepare_hosts(lc_jobs *q) {
  int r = 0;
  if (q->cwd == NULL)
    for (size_t i = 0; i < q->nhosts; i++)
      lc__runtime_workdir_begin(q->hosts[i].rt);
  for (size_t i = 0; i < q->nhosts; i++) {
    lc__qhost *h = &q->hosts[i];
    const char *wd = q->cwd;
    /* made anew when its keeper ended with a lost connection (a host that came back) */
    if (wd == NULL &&
        ((r = lc_runtime_workdir(&wd, h->rt)) < 0 || (r = lc__runtime_workdir_renew(h->rt)) < 0))
      return r;
    if ((h->workdir = lc__strdup(wd)) == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < q->nhosts; i++)
    if ((r = lc__files_send(q, &q->hosts[i])) < 0)
      return r;
  return 0;
}

static void jobs_release(lc_jobs *q);

int lc_jobs_new(lc_jobs **out, lc_group *g, const lc_jobs_options *opts) {
  lc_jobs *q = NULL;
  jobs_call jc;
  lc__buf check = {0};
  int r;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_JOBS_OPTIONS_VERSION, "lc_jobs_options");
  if (g == NULL)
    return lc__error_set(-EINVAL, "jobs: no group given");
  if ((q = lc__calloc(1, sizeof(*q))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  pthread_mutex_init(&q->mu, NULL);
  {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cond, &ca);
    pthread_condattr_destroy(&ca);
  }
  q->joblog_fd = -1;
  q->group = g;
  q->t0 = lc__jobs_wall_now();
  q->t0_ms = lc__now_ms();
  /* a template's unknown placeholders now, not at the first job ({N} only per job) */
  if ((r = copy_options(q, opts)) < 0 ||
      (!q->pool && q->command != NULL && (r = lc__job_command_check(q->command)) < 0))
    goto out;
  if (q->pool) {
    lc__job_place stand = {"host", 0, 0, "/"};
    if ((r = lc__job_worker_command(&check, q->worker_cmd, &stand)) < 0)
      goto out;
  }
  if ((r = make_hosts(q, g)) < 0)
    goto out;
  q->engine = q->hosts[0].rt->engine;
  if ((r = lc__files_joblog_open(q)) < 0 || (r = prepare_hosts(q)) < 0)
    goto out;
  pthread_mutex_lock(&q->mu);
  q->st.slots = q->nslots;
  pthread_mutex_unlock(&q->mu);
  jc.q = q;
  if ((r = lc__engine_run(q->engine, &jc.call, init_fn)) < 0) {
    lc_jobs_free(q);
    q = NULL;
    goto out;
  }
out:
  lc__buf_free(&check);
  if (r < 0 && q != NULL)
    jobs_release(q);
  else
    *out = q;
  return r;
}

/* ---- submit, close ----------------------------------------------------------------------------
 */

static int submit(lc_jobs *q, const char *const *args, size_t nargs, const char *text,
                  unsigned long *seq) {
  lc__qjob *j = NULL;
  lc__buf check = {0};
  const char *tmpl = NULL;
  int r = 0;
  static const char *const none[] = {NULL};

  if (seq != NULL)
    *seq = 0;
  if (q == NULL)
    return lc__error_set(-EINVAL, "jobs: no queue given");
  if (__atomic_load_n(&q->cancel, __ATOMIC_ACQUIRE))
    return lc__error_set(LC_ECLOSED, "jobs: the queue was cancelled");
  if ((j = lc__calloc(1, sizeof(*j))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  j->out_fd = j->err_fd = -1;
  j->pub.slot = -1;
  j->pub.gpu = -1;
  j->pub.message = "";
  j->pub.out = j->pub.err = "";
  if ((j->args = copy_strv(args ? args : none, nargs, NULL)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  j->pub.args = (const char *const *)j->args;
  j->pub.nargs = nargs;
  if (q->pool) {
    if (text != NULL) {
      if (strchr(text, '\n') != NULL) {
        r = lc__error_set(-EINVAL, "jobs: a pool job's line holds a newline: \"%.60s\"", text);
        goto out;
      }
      r = lc__buf_puts(&check, text);
    } else {
      r = lc__job_line(&check, args, nargs);
    }
  } else {
    if ((tmpl = text ? text : q->command) == NULL) {
      r = lc__error_set(-EINVAL, "jobs: no command template (lc_jobs_options.command) for the "
                                 "job's arguments");
      goto out;
    }
    if (text != NULL && (j->text = lc__strdup(text)) == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
  }
  if (r < 0)
    goto out;
  pthread_mutex_lock(&q->mu);
  if (q->closed) {
    pthread_mutex_unlock(&q->mu);
    r = lc__error_set(-EPIPE, "jobs: the queue is closed (lc_jobs_close)");
    goto out;
  }
  /* a command's check under the lock: its errors name the number this job gets */
  if ((tmpl != NULL && (r = lc__job_command(&check, tmpl, (const char *const *)j->args, nargs,
                                            q->njobs + 1, NULL)) < 0) ||
      (r = lc__buf_append(&check, "", 1)) < 0) {
    pthread_mutex_unlock(&q->mu);
    goto out;
  }
  j->input = check.data;
  j->pub.input = j->input;
  check.data = NULL;
  if (q->njobs == q->capjobs) {
    size_t cap = q->capjobs ? q->capjobs * 2 : 64;
    lc__qjob **v = lc__realloc(q->jobs, cap * sizeof(*v));
    unsigned long *d = lc__realloc(q->done_order, cap * sizeof(*d));
    if (v != NULL)
      q->jobs = v;
    if (d != NULL)
      q->done_order = d;
    if (v == NULL || d == NULL) {
      pthread_mutex_unlock(&q->mu);
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    q->capjobs = cap;
  }
  j->pub.seq = q->njobs + 1;
  q->jobs[q->njobs++] = j;
  q->st.submitted++;
  q->st.queued++;
  if (q->in_tail)
    q->in_tail->next = j;
  else
    q->in_head = j;
  q->in_tail = j;
  if (seq != NULL)
    *seq = j->pub.seq;
  j = NULL;
  pthread_mutex_unlock(&q->mu);
  uv_async_send(&q->kick);
out:
  if (j != NULL) {
    free_strv(j->args);
    free(j->text);
    free(j->input);
    free(j);
  }
  lc__buf_free(&check);
  return r < 0 ? r : 0;
}

int lc_jobs_submit(lc_jobs *q, const char *const *args, size_t nargs, unsigned long *seq) {
  return submit(q, args, nargs, NULL, seq);
}

int lc_jobs_submit_text(lc_jobs *q, const char *text, unsigned long *seq) {
  if (text == NULL)
    return lc__error_set(-EINVAL, "jobs: no text given");
  return submit(q, NULL, 0, text, seq);
}

int lc_jobs_close(lc_jobs *q) {
  int r = 0;
  if (q == NULL)
    return lc__error_set(-EINVAL, "jobs: no queue given");
  pthread_mutex_lock(&q->mu);
  q->closed = 1;
  pthread_cond_broadcast(&q->cond);
  if (q->opts.resume && q->resume.max_seq > q->njobs)
    r = lc__error_set(-EINVAL, "%s line %lu: job %lu is beyond the %zu jobs submitted",
                      q->joblog_path, q->resume.max_seq_line, q->resume.max_seq, q->njobs);
  pthread_mutex_unlock(&q->mu);
  return r;
}

/* ---- waiting ----------------------------------------------------------------------------------
 */

/* Waits on the queue's condition until the deadline (0: forever); -ETIMEDOUT past it. Holds mu. */
static int cond_wait_until(lc_jobs *q, const struct timespec *deadline) {
  if (deadline == NULL) {
    pthread_cond_wait(&q->cond, &q->mu);
    return 0;
  }
  return pthread_cond_timedwait(&q->cond, &q->mu, deadline) == ETIMEDOUT ? -ETIMEDOUT : 0;
}

struct timespec *lc__jobs_deadline(struct timespec *ts, int timeout_ms) {
  if (timeout_ms < 0)
    return NULL;
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += timeout_ms / 1000;
  ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
  return ts;
}

int lc_jobs_wait(lc_jobs *q, int timeout_ms) {
  struct timespec ts, *dl = lc__jobs_deadline(&ts, timeout_ms);
  int r = 0;
  if (q == NULL)
    return lc__error_set(-EINVAL, "jobs: no queue given");
  pthread_mutex_lock(&q->mu);
  if (!q->closed) {
    pthread_mutex_unlock(&q->mu);
    return lc__error_set(-EINVAL, "jobs: wait needs lc_jobs_close first (more jobs may come)");
  }
  while (q->ended < q->njobs && r == 0)
    r = cond_wait_until(q, dl);
  if (q->ended == q->njobs)
    r = (int)(q->st.failed + q->st.cancelled);
  pthread_mutex_unlock(&q->mu);
  if (r == -ETIMEDOUT)
    return lc__error_set(r, "jobs: %zu of %zu jobs still not ended after %d ms",
                         q->njobs - q->ended, q->njobs, timeout_ms);
  return r;
}

int lc_jobs_next(const lc_job **out, lc_jobs *q, lc_jobs_order order, int timeout_ms) {
  struct timespec ts, *dl = lc__jobs_deadline(&ts, timeout_ms);
  int r = 0;
  *out = NULL;
  if (q == NULL)
    return lc__error_set(-EINVAL, "jobs: no queue given");
  pthread_mutex_lock(&q->mu);
  for (;;) {
    lc__qjob *j = NULL;
    if (order == LC_JOBS_IN_ORDER) {
      while (q->next_in_order < q->njobs && q->jobs[q->next_in_order]->returned)
        q->next_in_order++;
      if (q->next_in_order < q->njobs) {
        lc__qjob *c = q->jobs[q->next_in_order];
        if (c->pub.state >= LC_JOB_DONE)
          j = c;
      }
    } else {
      while (q->next_as_done < q->ndone_order &&
             q->jobs[q->done_order[q->next_as_done] - 1]->returned)
        q->next_as_done++;
      if (q->next_as_done < q->ndone_order)
        j = q->jobs[q->done_order[q->next_as_done] - 1];
    }
    if (j != NULL) {
      j->returned = 1;
      *out = &j->pub;
      break;
    }
    if (q->closed &&
        (order == LC_JOBS_IN_ORDER ? q->next_in_order >= q->njobs : q->next_as_done >= q->njobs)) {
      r = -ENOENT;
      break;
    }
    if ((r = cond_wait_until(q, dl)) < 0)
      break;
  }
  pthread_mutex_unlock(&q->mu);
  if (r == -ETIMEDOUT)
    return lc__error_set(r, "jobs: no job ended within %d ms", timeout_ms);
  if (r == -ENOENT)
    return lc__error_set(r, "jobs: every job was returned");
  return 0;
}

void lc_jobs_cancel(lc_jobs *q) {
  if (q == NULL)
    return;
  __atomic_store_n(&q->cancel, 1, __ATOMIC_RELEASE);
  uv_async_send(&q->kick);
}

void lc_jobs_stats_get(lc_jobs *q, lc_jobs_stats *out) {
  size_t ended, left;
  memset(out, 0, sizeof(*out));
  if (q == NULL)
    return;
  pthread_mutex_lock(&q->mu);
  *out = q->st;
  pthread_mutex_unlock(&q->mu);
  out->elapsed = (double)(lc__now_ms() - q->t0_ms) / 1000.0;
  ended = out->done + out->failed;
  left = out->queued + out->running;
  out->eta = -1;
  if (left == 0)
    out->eta = 0;
  else if (ended > 0 && out->elapsed > 0)
    out->eta = out->elapsed / (double)ended * (double)left;
}

/* ---- free -------------------------------------------------------------------------------------
 */

static void jobs_release(lc_jobs *q) {
  for (size_t i = 0; i < q->njobs; i++) {
    lc__qjob *j = q->jobs[i];
    free_strv(j->args);
    free(j->text);
    free(j->input);
    free(j->message);
    free(j->result);
    lc__buf_free(&j->out);
    lc__buf_free(&j->err);
    if (j->out_fd >= 0)
      close(j->out_fd);
    if (j->err_fd >= 0)
      close(j->err_fd);
    free(j);
  }
  for (lc__qjob *j = q->in_head; q->njobs == 0 && j != NULL;) {
    lc__qjob *n = j->next;
    free(j);
    j = n;
  }
  free(q->jobs);
  free(q->done_order);
  for (size_t i = 0; q->hosts != NULL && i < q->nhosts; i++) {
    free(q->hosts[i].name);
    free(q->hosts[i].workdir);
    free(q->hosts[i].slots);
  }
  free(q->hosts);
  for (size_t i = 0; i < q->nupdates; i++)
    free(q->updates[i]);
  free(q->updates);
  free(q->command);
  free(q->worker_cmd);
  free(q->cwd);
  free(q->return_dir);
  free(q->joblog_path);
  free(q->results_dir);
  free_strv(q->env);
  free_strv(q->send);
  free_strv(q->returns);
  if (q->joblog_fd >= 0)
    close(q->joblog_fd);
  lc__joblog_record_free(&q->resume);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cond);
  free(q);
}

void lc_jobs_free(lc_jobs *q) {
  jobs_call jc;
  struct timespec ts;
  uint64_t grace = 0;
  if (q == NULL)
    return;
  for (size_t i = 0; i < q->nhosts; i++)
    if ((uint64_t)q->hosts[i].rt->opts.kill_grace_ms > grace)
      grace = (uint64_t)q->hosts[i].rt->opts.kill_grace_ms;
  lc_jobs_cancel(q);
  /* the stops confirmed: every process of the queue ended (a lost host's end with its channel) */
  pthread_mutex_lock(&q->mu);
  q->freeing = 1;
  lc__jobs_deadline(&ts, (int)(grace + 10000));
  while (q->live > 0 && cond_wait_until(q, &ts) == 0)
    ;
  q->maint_stop = 1;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->mu);
  if (q->maint_started)
    pthread_join(q->maint, NULL);
  jc.q = q;
  lc__engine_run(q->engine, &jc.call, fini_fn);
  jobs_release(q);
}
