/*
 * pool.c - a pool's workers: one long-lived process per slot, fed through its stdin (exec option
 * `input`, one line per job or update) and answering with one stdout line each (docs/map.md).
 * The protocol itself is lc__pool_step, a pure function of (state, event), which
 * tests/fuzz/fuzz_pool.c drives with arbitrary worker output. A worker that dies (ends without
 * its host being lost) has its job put back (max_requeues) and is started again after a backoff
 * (max_restarts within restart_window_ms), the updates made so far replayed before any job.
 */
#include "queue_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

lc__wstate lc__pool_step(lc__wstate s, lc__wevent ev, lc__waction *act) {
  *act = LC__WA_REFUSED;
  if (s == LC__W_DEAD) {
    if (ev == LC__WE_START) {
      *act = LC__WA_NONE;
      return LC__W_IDLE;
    }
    return s;
  }
  switch (ev) {
  case LC__WE_START:
    return s;
  case LC__WE_STDOUT:
    *act = s == LC__W_JOB      ? LC__WA_ANSWER
           : s == LC__W_UPDATE ? LC__WA_UPDATE_ANSWER
                               : LC__WA_WORKER_LINE;
    return LC__W_IDLE;
  case LC__WE_STDERR:
    *act = s == LC__W_JOB ? LC__WA_JOB_LINE : LC__WA_WORKER_LINE;
    return s;
  case LC__WE_JOB:
  case LC__WE_UPDATE:
    if (s != LC__W_IDLE)
      return s;
    *act = LC__WA_NONE;
    return ev == LC__WE_JOB ? LC__W_JOB : LC__W_UPDATE;
  case LC__WE_END:
    *act = s == LC__W_JOB ? LC__WA_JOB_LOST : s == LC__W_UPDATE ? LC__WA_UPDATE_LOST : LC__WA_NONE;
    return LC__W_DEAD;
  }
  return s;
}

int lc__pool_idle(const lc__qslot *s) {
  return s->proc != NULL && s->wstate == LC__W_IDLE && s->job == NULL;
}

/* The answer of s's job: it is done. */
static void job_answered(lc_jobs *q, lc__qslot *s, const char *line, size_t len) {
  lc__qjob *j = s->job;
  s->job = NULL;
  if (j == NULL)
    return;
  free(j->result);
  j->result = lc__strndup(line, len);
  j->pub.runtime = lc__jobs_wall_now() - j->pub.start_time;
  j->pub.exit.exit_status = 0;
  j->pub.exit.signal = 0;
  j->pub.error = 0;
  if (j->out_fd >= 0 &&
      (write(j->out_fd, line, len) != (ssize_t)len || write(j->out_fd, "\n", 1) != 1))
    j->out_fd = -2;
  lc__jobs_end(q, j, LC_JOB_DONE);
}

static void worker_line(const char *line, size_t len, lc_stream stream, void *payload) {
  lc__qslot *s = payload;
  lc_jobs *q = s->q;
  lc__waction act;
  s->wstate = lc__pool_step(s->wstate, stream == LC_STDOUT ? LC__WE_STDOUT : LC__WE_STDERR, &act);
  if (stream == LC_STDERR)
    snprintf(s->last_err, sizeof(s->last_err), "%.*s", (int)(len < 255 ? len : 255), line);
  switch (act) {
  case LC__WA_ANSWER:
    job_answered(q, s, line, len);
    lc__jobs_kick_here(q);
    break;
  case LC__WA_UPDATE_ANSWER:
    s->upd_done++;
    lc__jobs_line(q, LC_JOBS_LINE_UPDATE, NULL, s, line, len, stream);
    lc__jobs_kick_here(q);
    break;
  case LC__WA_JOB_LINE:
    lc__jobs_keep_line(q, s->job, line, len, stream);
    lc__jobs_line(q, LC_JOBS_LINE_OUTPUT, s->job, s, line, len, stream);
    break;
  case LC__WA_WORKER_LINE:
    lc__jobs_line(q, LC_JOBS_LINE_WORKER, NULL, s, line, len, stream);
    break;
  default:
    break;
  }
}

/* The worker of s is let go of for good (restarts used up). */
static void give_up(lc_jobs *q, lc__qslot *s) {
  s->gone = 1;
  s->restart_at = 0;
  pthread_mutex_lock(&q->mu);
  q->st.slots--;
  q->st.slots_lost++;
  pthread_mutex_unlock(&q->mu);
  lc__jobs_notice(q, s,
                  "%s slot %d given up: its worker died %d times within %d s; it last "
                  "wrote: %s",
                  s->host->name, s->index, s->restarts + 1, q->opts.restart_window_ms / 1000,
                  s->last_err[0] ? s->last_err : "nothing on stderr");
}

static void worker_finished(lc_process *p, void *arg) {
  lc__qslot *s = arg;
  lc_jobs *q = s->q;
  lc__qjob *j = s->job;
  lc__err perr;
  lc_exec_result res = p->result;
  int lost, cancelled = q->cancelled_done;
  lc__waction act;
  uint64_t now = lc__now_ms();

  lc__proc_err(p, &perr);
  lost = perr.code == LC_ECLOSED;

  s->proc = NULL;
  s->job = NULL;
  s->wstate = lc__pool_step(s->wstate, LC__WE_END, &act);
  s->wstate = LC__W_DEAD;
  lc__proc_release(p);
  lc__jobs_live(q, -1);
  if (j != NULL) {
    j->pub.runtime = lc__jobs_wall_now() - j->pub.start_time;
    j->pub.exit = res;
    if (cancelled) {
      lc__jobs_end(q, j, LC_JOB_CANCELLED);
    } else {
      int fail = 0;
      if (lost) {
        lc__files_results_end(q, j, 0);
      } else if (++j->requeues > q->opts.max_requeues) {
        fail = 1;
      } else {
        lc__files_results_end(q, j, 0);
      }
      free(j->message);
      j->message =
          lost ? lc__sprintf("%s slot %d: the host was lost: %s", s->host->name, s->index, perr.msg)
               : lc__sprintf("%s slot %d: its worker died running job %lu (%s %d)%s%s",
                             s->host->name, s->index, j->pub.seq,
                             res.signal ? "signal" : "exit status",
                             res.signal ? res.signal : res.exit_status, s->last_err[0] ? ": " : "",
                             s->last_err);
      j->pub.message = j->message ? j->message : "";
      j->pub.error = lost ? LC_ECLOSED : LC_EREMOTE;
      if (fail) {
        lc__jobs_end(q, j, LC_JOB_FAILED);
      } else {
        lc__jobs_requeue(q, j);
        pthread_mutex_lock(&q->mu);
        q->st.requeued++;
        pthread_mutex_unlock(&q->mu);
        lc__jobs_notice(q, s, "job %lu put back: %s", j->pub.seq, j->pub.message);
      }
    }
  }
  if (cancelled || s->gone) {
    /* nothing more */
  } else if (lost) {
    lc__jobs_host_lost(q, s->host, perr.msg[0] ? perr.msg : "its connection went");
  } else {
    if (s->window_start == 0 || now - s->window_start > (uint64_t)q->opts.restart_window_ms) {
      s->window_start = now;
      s->restarts = 0;
    }
    if (s->restarts >= q->opts.max_restarts) {
      give_up(q, s);
    } else {
      uint64_t wait = (uint64_t)q->opts.restart_backoff_ms << (s->restarts < 20 ? s->restarts : 20);
      s->restart_at = now + wait;
      s->restarts++;
      lc__jobs_notice(q, s, "%s slot %d: its worker ended (%s %d%s%s); it starts again in %.1f s",
                      s->host->name, s->index, res.signal ? "signal" : "exit status",
                      res.signal ? res.signal : res.exit_status,
                      s->last_err[0] ? ", it wrote: " : "", s->last_err, (double)wait / 1000.0);
    }
    lc__jobs_arm(q);
  }
  lc__jobs_kick_here(q);
}

int lc__pool_start(lc_jobs *q, lc__qslot *s) {
  lc__buf cmd = {0};
  lc__job_place where = {s->host->name, s->index, s->gpu, s->host->workdir};
  lc_process *p = NULL;
  lc__err err = {0};
  lc__waction act;
  int r;

  s->restart_at = 0;
  if (s->proc != NULL || s->gone)
    return 0;
  if ((r = lc__job_worker_command(&cmd, q->worker_cmd, &where)) < 0 ||
      (r = lc__buf_append(&cmd, "", 1)) < 0 ||
      (r = lc__jobs_slot_proc(&p, q, s, cmd.data, 0, worker_line, 1, worker_finished)) < 0) {
    snprintf(s->last_err, sizeof(s->last_err), "%s", lc_error_last());
    goto out;
  }
  s->proc = p;
  s->wstate = lc__pool_step(LC__W_DEAD, LC__WE_START, &act);
  s->upd_done = 0;
  lc__jobs_live(q, 1);
  /* a host not connected fails here too (LC_ECLOSED), its message naming the host */
  if ((r = lc__proc_launch(p, &err)) < 0) {
    s->proc = NULL;
    s->wstate = LC__W_DEAD;
    lc__jobs_live(q, -1);
    lc__jobs_proc_discard(p);
    snprintf(s->last_err, sizeof(s->last_err), "%.200s", err.msg);
  } else {
    s->starts++;
  }
out:
  lc__buf_free(&cmd);
  return r;
}

int lc__pool_send_job(lc_jobs *q, lc__qslot *s, lc__qjob *j) {
  lc__err err = {0};
  lc__waction act;
  int r;
  if ((r = lc__proc_input_line(s->proc, j->input, strlen(j->input), &err)) < 0) {
    s->wstate = LC__W_DEAD; /* it takes nothing more; its end follows */
    lc__proc_stop(s->proc);
    return r;
  }
  s->wstate = lc__pool_step(s->wstate, LC__WE_JOB, &act);
  lc__jobs_job_begin(q, s, j);
  return 0;
}

void lc__pool_pump_updates(lc_jobs *q) {
  size_t nupd, min = (size_t)-1;
  pthread_mutex_lock(&q->mu);
  nupd = q->nupdates;
  pthread_mutex_unlock(&q->mu);
  for (size_t i = 0; i < q->nhosts; i++)
    for (int k = 0; k < q->hosts[i].nslots; k++) {
      lc__qslot *s = &q->hosts[i].slots[k];
      if (s->proc == NULL || s->wstate == LC__W_DEAD)
        continue;
      if (lc__pool_idle(s) && s->upd_done < nupd && !q->cancelled_done) {
        const char *line;
        lc__err err = {0};
        lc__waction act;
        pthread_mutex_lock(&q->mu);
        line = q->updates[s->upd_done];
        pthread_mutex_unlock(&q->mu);
        if (lc__proc_input_line(s->proc, line, strlen(line), &err) < 0) {
          s->wstate = LC__W_DEAD;
          lc__proc_stop(s->proc);
          continue;
        }
        s->wstate = lc__pool_step(s->wstate, LC__WE_UPDATE, &act);
      }
      if (s->upd_done < min)
        min = s->upd_done;
    }
  pthread_mutex_lock(&q->mu);
  q->upd_min = min == (size_t)-1 ? nupd : min;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->mu);
}

uint64_t lc__pool_restarts(lc_jobs *q, uint64_t now) {
  uint64_t next = 0;
  for (size_t i = 0; i < q->nhosts; i++)
    for (int k = 0; k < q->hosts[i].nslots; k++) {
      lc__qslot *s = &q->hosts[i].slots[k];
      if (s->restart_at == 0)
        continue;
      if (s->proc != NULL || s->gone) {
        s->restart_at = 0;
        continue;
      }
      if (now != 0 && s->restart_at <= now && !s->host->down) {
        lc__jobs_notice(q, s, "%s slot %d: its worker starts again", s->host->name, s->index);
        if (lc__pool_start(q, s) < 0)
          give_up(q, s);
        continue;
      }
      if (!s->host->down && (next == 0 || s->restart_at < next))
        next = s->restart_at;
    }
  return next;
}

int lc_jobs_update(lc_jobs *q, const char *line, int timeout_ms) {
  struct timespec ts, *dl;
  char *copy;
  size_t k;
  int r = 0;
  if (q == NULL || line == NULL)
    return lc__error_set(-EINVAL, "jobs: no queue or no line given");
  if (!q->pool)
    return lc__error_set(-EINVAL, "jobs: updates are for a pool, not a command queue");
  if (strchr(line, '\n') != NULL)
    return lc__error_set(-EINVAL, "jobs: an update holds a newline: \"%.60s\"", line);
  if ((copy = lc__strdup(line)) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  pthread_mutex_lock(&q->mu);
  {
    char **v = lc__realloc(q->updates, (q->nupdates + 1) * sizeof(*v));
    if (v == NULL) {
      pthread_mutex_unlock(&q->mu);
      free(copy);
      return lc__error_set(-ENOMEM, "out of memory");
    }
    q->updates = v;
    q->updates[q->nupdates++] = copy;
    k = q->nupdates;
  }
  pthread_mutex_unlock(&q->mu);
  uv_async_send(&q->kick);
  dl = lc__jobs_deadline(&ts, timeout_ms);
  pthread_mutex_lock(&q->mu);
  while (q->upd_min < k && r == 0)
    r = dl == NULL ? pthread_cond_wait(&q->cond, &q->mu)
                   : pthread_cond_timedwait(&q->cond, &q->mu, dl);
  r = q->upd_min >= k ? 0 : -ETIMEDOUT;
  pthread_mutex_unlock(&q->mu);
  if (r < 0)
    return lc__error_set(r, "jobs: not every worker answered the update within %d ms", timeout_ms);
  return 0;
}
