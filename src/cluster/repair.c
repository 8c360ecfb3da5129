/*
 * repair.c - what lc_cluster_wait does between its looks at the clock: a process of the cluster
 * that ended on its own is reported (its DOWN event), then started again after its backoff, or
 * given up, as the restart policy of lc_cluster_options says (restart, max_restarts per
 * restart_window_ms, restart_backoff_ms doubled per restart within the window); the master only
 * when its launcher is restartable. The ttl, a worker's status and the master's restarts are here
 * too. A lost host's workers are hosts.c's: lc__hosts_took says which.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LC__BACKOFF_MAX_MS 60000
#define LC__RESTART_LOG_MAX 4096 /* restarts kept per process without a max_restarts */

long long lc__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lc__restart_log_free(lc__restart_log *l) {
  free(l->at);
  memset(l, 0, sizeof(*l));
}

/* "10 minutes", "2 h", "20 s", "1.5 s". */
static void duration_text(long long ms, char *out, size_t size) {
  if (ms >= 3600000 && ms % 3600000 == 0)
    snprintf(out, size, "%lld h", ms / 3600000);
  else if (ms >= 60000 && ms % 60000 == 0)
    snprintf(out, size, "%lld minute%s", ms / 60000, ms == 60000 ? "" : "s");
  else
    snprintf(out, size, "%g s", (double)ms / 1000.0);
}

/* The restarts of l within the window before now (older ones are forgotten). */
static size_t restarts_in_window(lc_cluster *c, lc__restart_log *l, uint64_t now) {
  uint64_t window = (uint64_t)c->opts.restart_window_ms;
  size_t old = 0;
  while (old < l->n && now - l->at[old] >= window)
    old++;
  if (old > 0) { /* l->at is NULL before the first restart */
    memmove(l->at, l->at + old, (l->n - old) * sizeof(*l->at));
    l->n -= old;
  }
  return l->n;
}

static int restart_log_add(lc__restart_log *l, uint64_t now) {
  uint64_t *v;
  if (l->n == LC__RESTART_LOG_MAX) { /* only without a max_restarts: the oldest goes */
    memmove(l->at, l->at + 1, (l->n - 1) * sizeof(*l->at));
    l->n--;
  }
  if ((v = lc__grow(l->at, &l->cap, l->n + 1, sizeof(*v), 8)) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  l->at = v;
  l->at[l->n++] = now;
  return 0;
}

/* The wait before the next restart: the backoff, doubled for each restart within the window. */
static uint64_t backoff_ms(lc_cluster *c, size_t recent) {
  uint64_t ms = c->opts.restart_backoff_ms > 0 ? (uint64_t)c->opts.restart_backoff_ms : 0;
  for (size_t k = 0; k < recent && ms < LC__BACKOFF_MAX_MS; k++)
    ms *= 2;
  return ms < LC__BACKOFF_MAX_MS ? ms : LC__BACKOFF_MAX_MS;
}

/*
 * Whether a process that ended with res (status -1 and no signal: it was not ready) starts
 * again: 1, with *wait the backoff; or 0, given up, with why in give_up ("" when the policy says
 * no at all, else "ended 6 times within 10 minutes: given up").
 */
static int policy_restarts(lc_cluster *c, lc__restart_log *l, const lc_exec_result *res,
                           uint64_t *wait, char *give_up, size_t size) {
  uint64_t now = lc__now_ms();
  size_t recent;
  give_up[0] = '\0';
  if (c->opts.restart == LC_RESTART_NEVER)
    return 0;
  if (c->opts.restart == LC_RESTART_ON_FAILURE && res->signal == 0 && res->exit_status == 0)
    return 0;
  recent = restarts_in_window(c, l, now);
  if (c->opts.max_restarts >= 0 && recent >= (size_t)c->opts.max_restarts) {
    char window[64];
    duration_text(c->opts.restart_window_ms, window, sizeof(window));
    snprintf(give_up, size, "ended %zu times within %s: given up", recent + 1, window);
    return 0;
  }
  *wait = backoff_ms(c, recent);
  return 1;
}

/* "it was ended by signal 9", "it exited with status 1", "it was not ready after its restart". */
static void end_text(const lc_exec_result *res, char *out, size_t size) {
  if (res->signal)
    snprintf(out, size, "it was ended by signal %d", res->signal);
  else if (res->exit_status >= 0)
    snprintf(out, size, "it exited with status %d", res->exit_status);
  else
    snprintf(out, size, "it was not ready after its restart");
}

/* How w ended, worded once for the notes, the CLI and status: with the lifeline's reason when
 * its watchdog ended it ("it was ended by signal 15 by its lifeline: no heartbeat for over 60 s
 * ..."), which a bare signal number would hide. */
static void record_end(lc_cluster *c, lc__worker *w, const lc_exec_result *res) {
  char word[200];
  w->ended = 1;
  w->last_status = res->signal ? -1 : res->exit_status;
  w->last_signal = res->signal;
  end_text(res, w->last_end, sizeof(w->last_end));
  if (res->signal && (lc__output_lifeline_word(c, w->out, word, sizeof(word)), word[0] != '\0')) {
    size_t n = strlen(w->last_end);
    snprintf(w->last_end + n, sizeof(w->last_end) - n, " by its lifeline: %s", word);
  }
  w->started_ms = 0;
  w->ready = 0;
}

/* "lab1 worker-2 ended: it exited with status 1; its last stderr lines: ..." (as before the
 * restart policy), or with the policy's give_up: "lab1 worker-2 ended 3 times within 10
 * minutes: given up; it exited with status 1; ...". */
static int report(lc_cluster *c, lc__output *t, lc_process *p, const char *give_up) {
  char how[4096], msg[4400];
  lc__cluster_how_ended(c, t, p, how, sizeof(how));
  if (give_up[0] != '\0')
    snprintf(msg, sizeof(msg), "%s %s; %s", t->tag, give_up, how);
  else
    snprintf(msg, sizeof(msg), "%s ended: %s", t->tag, how);
  lc__cluster_note(c, "%s", msg);
  return lc__error_set(LC_EREMOTE, "%s", msg);
}

/* Worker w's process ended on its own (res): DOWN, then backoff or given up (LC_EREMOTE). */
static int worker_ended(lc_cluster *c, lc__worker *w, const lc_exec_result *res) {
  char give_up[128];
  uint64_t wait = 0;
  record_end(c, w, res);
  w->reported = 1; /* its end is handled: no other look reports it */
  lc__cluster_emit(c, LC_CLUSTER_WORKER_DOWN, w->info.index);
  if (!policy_restarts(c, &w->restart_log, res, &wait, give_up, sizeof(give_up))) {
    w->state = LC_WORKER_FAILED;
    lc__cluster_emit(c, LC_CLUSTER_WORKER_FAILED, w->info.index);
    return report(c, w->out, w->proc, give_up);
  }
  w->state = LC_WORKER_BACKOFF;
  w->next_start = lc__now_ms() + wait;
  lc__cluster_note(c, "%s ended: %s; it starts again in %.1f s", w->out->tag, w->last_end,
                   (double)wait / 1000.0);
  return 0;
}

/* Starts worker w again (its backoff is over). A restart that fails is one more end. */
static int worker_restart(lc_cluster *c, lc__worker *w) {
  lc_exec_result res;
  int r;
  w->restarts++;
  if ((r = restart_log_add(&w->restart_log, lc__now_ms())) < 0)
    return r;
  if ((r = lc__worker_respawn(c, w, &res)) < 0) {
    char why[LC_ERRMSG_MAX];
    snprintf(why, sizeof(why), "%s", lc_error_last());
    lc__cluster_note(c, "%s: its restart failed: %s", w->out->tag, why);
    w->stopped = 0; /* not stopped by the caller: the restart's end is the policy's */
    record_end(c, w, &res);
    if (res.exit_status < 0 && res.signal == 0)
      snprintf(w->last_end, sizeof(w->last_end), "its restart failed: %.200s", why);
    w->reported = 1;
    lc__cluster_emit(c, LC_CLUSTER_WORKER_DOWN, w->info.index);
    {
      char give_up[128];
      uint64_t wait = 0;
      /* a restart that failed is a failure, whatever its status */
      lc_exec_result failed = res;
      if (failed.signal == 0 && failed.exit_status == 0)
        failed.exit_status = -1;
      if (!policy_restarts(c, &w->restart_log, &failed, &wait, give_up, sizeof(give_up))) {
        char msg[4400];
        w->state = LC_WORKER_FAILED;
        lc__cluster_emit(c, LC_CLUSTER_WORKER_FAILED, w->info.index);
        snprintf(msg, sizeof(msg), "%s %s; %s", w->out->tag,
                 give_up[0] ? give_up : "could not be started again", why);
        lc__cluster_note(c, "%s", msg);
        return lc__error_set(LC_EREMOTE, "%s", msg);
      }
      w->state = LC_WORKER_BACKOFF;
      w->next_start = lc__now_ms() + wait;
    }
    return 0;
  }
  lc__cluster_note(c, "%s restarted (restart %d) on port %d", w->out->tag, w->restarts,
                   w->info.port);
  lc__cluster_emit(c, LC_CLUSTER_WORKER_RESTARTED, w->info.index);
  return 0;
}

/* The master ended on its own (res): DOWN, then backoff when its launcher is restartable and the
 * policy says so, else LC_EREMOTE: the cluster has failed. */
static int master_ended(lc_cluster *c, const lc_exec_result *res) {
  char give_up[128] = "";
  uint64_t wait = 0;
  int restartable = c->m->version >= 4 && c->m->restartable;
  c->master_reported = 1;
  lc__cluster_emit(c, LC_CLUSTER_MASTER_DOWN, -1);
  if (!restartable ||
      !policy_restarts(c, &c->master_restart_log, res, &wait, give_up, sizeof(give_up)))
    return report(c, c->master_out, c->master_proc, give_up);
  c->master_backoff = 1;
  c->master_next_start = lc__now_ms() + wait;
  {
    char how[64];
    end_text(res, how, sizeof(how));
    lc__cluster_note(c, "%s ended: %s; it starts again in %.1f s", c->master_out->tag, how,
                     (double)wait / 1000.0);
  }
  return 0;
}

static int master_restart(lc_cluster *c) {
  lc_exec_result res;
  int r;
  c->master_restarts++;
  if ((r = restart_log_add(&c->master_restart_log, lc__now_ms())) < 0)
    return r;
  c->master_backoff = 0;
  if ((r = lc__master_respawn(c, &res)) < 0) {
    char why[LC_ERRMSG_MAX], give_up[128];
    uint64_t wait = 0;
    snprintf(why, sizeof(why), "%s", lc_error_last());
    lc__cluster_note(c, "the master's restart failed: %s", why);
    c->master_reported = 1;
    lc__cluster_emit(c, LC_CLUSTER_MASTER_DOWN, -1);
    if (res.signal == 0 && res.exit_status == 0)
      res.exit_status = -1;
    if (!policy_restarts(c, &c->master_restart_log, &res, &wait, give_up, sizeof(give_up))) {
      char msg[4400];
      snprintf(msg, sizeof(msg), "%s %s; %s", c->master_out->tag,
               give_up[0] ? give_up : "could not be started again", why);
      lc__cluster_note(c, "%s", msg);
      return lc__error_set(LC_EREMOTE, "%s", msg);
    }
    c->master_backoff = 1;
    c->master_next_start = lc__now_ms() + wait;
    return 0;
  }
  lc__cluster_emit(c, LC_CLUSTER_MASTER_RESTARTED, -1);
  return 0;
}

static int ended(lc_process *p, lc_exec_result *res) {
  res->exit_status = -1;
  res->signal = 0;
  return p != NULL && lc__process_finished(p, res);
}

void lc__repair_started(lc_cluster *c) {
  if (c->opts.ttl_ms > 0 && c->ttl_end == 0)
    c->ttl_end = lc__now_ms() + (uint64_t)c->opts.ttl_ms;
}

/*
 * Whether this look is a whole one (every host, every process: ~1,300 lock round trips for 1,024
 * workers on 256 hosts, several times a second for as long as the cluster runs): when the
 * engine counted a change since the last whole look (a process ended, a helper's line, a
 * connection came or went: lc__engine_changed), when something waits on time (a lost host, a
 * worker waiting or backing off, the master's backoff), and at least every LOOK_WHOLE_MS, in
 * case a change came by a way that is not counted. Between them nothing the look acts on
 * changed; the restarts that are due are still seen at every look.
 */
#define LOOK_WHOLE_MS 1000

static int whole_look(lc_cluster *c, uint64_t now) {
  uint64_t changes = lc__engine_changes(lc__group_engine(c->group));
  if (changes == c->look_changes && !c->look_busy && now < c->look_at + LOOK_WHOLE_MS)
    return 0;
  c->look_changes = changes; /* before the look: a change during it makes the next one whole */
  c->look_at = now;
  return 1;
}

/* The hosts (lc__hosts_tick), then the ends: the master's first, then the workers' in order
 * (each call reports one). */
static int look_at_all(lc_cluster *c) {
  lc_exec_result res;
  int r;
  if ((r = lc__hosts_tick(c)) < 0)
    return r;
  if (c->master_proc != NULL && !c->master_reported && ended(c->master_proc, &res) &&
      (r = master_ended(c, &res)) < 0)
    return r;
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (w->proc == NULL || w->stopped || w->reported || !ended(w->proc, &res))
      continue;
    if (lc__hosts_took(c, w))
      continue;
    if ((r = worker_ended(c, w, &res)) < 0)
      return r;
  }
  return 0;
}

int lc__repair_look(lc_cluster *c, uint64_t *due, int *pending) {
  uint64_t now = lc__now_ms();
  int r;

  *due = 0;
  *pending = 0;
  if (c->ttl_end != 0 && now >= c->ttl_end) {
    char limit[64];
    if (!c->expired) {
      c->expired = 1;
      lc__cluster_emit(c, LC_CLUSTER_EXPIRED, -1);
    }
    duration_text(c->opts.ttl_ms, limit, sizeof(limit));
    lc__cluster_note(c, "the cluster's time limit of %s is up", limit);
    return lc__error_set(-ETIME, "the cluster's time limit of %s is up", limit);
  }
  if (whole_look(c, now) && (r = look_at_all(c)) < 0) {
    c->look_at = 0; /* it stopped at one end to report: the next look goes on from there */
    return r;
  }
  /* restarts that are due: the master's first (its workers may need it) */
  if (c->master_backoff && lc__now_ms() >= c->master_next_start && (r = master_restart(c)) < 0)
    return r;
  /* a worker's restart waits while the master is down: against no master it would fail (or
   * come up unreachable) and spend its restart budget for the master's end */
  for (size_t i = 0; i < c->nworkers && !c->master_backoff; i++) {
    lc__worker *w = &c->workers[i];
    if (w->state != LC_WORKER_BACKOFF || w->stopped || lc__now_ms() < w->next_start)
      continue;
    if ((r = worker_restart(c, w)) < 0)
      return r;
  }
  if (c->master_backoff) {
    *pending = 1;
    *due = c->master_next_start;
  }
  c->look_busy = *pending || c->master_backoff;
  for (size_t i = 0; i < c->nhosts && !c->look_busy; i++)
    c->look_busy = c->hosts[i].lost;
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__worker *w = &c->workers[i];
    if (w->stopped)
      continue;
    if (w->state == LC_WORKER_WAITING)
      *pending = 1;
    if (w->state == LC_WORKER_BACKOFF) {
      *pending = 1;
      if (!c->master_backoff && (*due == 0 || w->next_start < *due))
        *due = w->next_start;
    }
  }
  return 0;
}

long long lc_cluster_time_left_ms(const lc_cluster *c) {
  uint64_t now;
  if (c == NULL || c->opts.ttl_ms <= 0)
    return -1;
  if (c->ttl_end == 0)
    return c->opts.ttl_ms;
  now = lc__now_ms();
  return now >= c->ttl_end ? 0 : (long long)(c->ttl_end - now);
}

int lc_cluster_master_restarts(const lc_cluster *c) { return c != NULL ? c->master_restarts : 0; }

int lc_cluster_worker_status(const lc_cluster *c, size_t i, lc_worker_status *out) {
  const lc__worker *w;
  if (c == NULL || out == NULL)
    return lc__error_set(-EINVAL, "worker status: no cluster or no status given");
  if (out->version < 1)
    return lc__error_set(-EINVAL,
                         "lc_worker_status: version %u is unknown (set it to "
                         "LC_WORKER_STATUS_VERSION)",
                         out->version);
  if (i >= c->nworkers)
    return lc__error_set(-ENOENT, "cluster: no worker %zu (the cluster has %zu)", i, c->nworkers);
  w = &c->workers[i];
  out->state = w->state ? w->state : LC_WORKER_STARTING;
  out->host = w->host;
  out->port = w->info.port;
  out->gpu = w->info.gpu;
  out->pid = 0;
  if (w->proc != NULL && !w->stopped && !w->reported &&
      (w->state == LC_WORKER_STARTING || w->state == LC_WORKER_RUNNING))
    out->pid = lc_process_pid(w->proc);
  out->restarts = w->restarts;
  out->started_ms = w->started_ms;
  out->ended = w->ended;
  out->last_status = w->last_status;
  out->last_signal = w->last_signal;
  out->last_end = w->last_end;
  return 0;
}
