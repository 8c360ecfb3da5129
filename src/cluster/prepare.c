/*
 * prepare.c - staging before workers start: the worker launcher's prepare_host (once per host of
 * the cluster) and prepare_worker (once per worker) build tasks; every host's run at once, as one
 * group job on the engine loop, then every worker's. A failed step fails the start, naming the
 * host and the step; undoing the start removes its workers' directories.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_staging(const lc_cluster *c) {
  return c->w->version >= 4 && (c->w->prepare_host != NULL || c->w->prepare_worker != NULL);
}

static int host_staged(const lc_cluster *c, const lc_runtime *rt) {
  for (size_t i = 0; i < c->nstaged; i++)
    if (c->staged[i] == rt)
      return 1;
  return 0;
}

/* Runs tasks[i] on rts[i], all at once; the first failure becomes the start's error. */
static int run_all(lc_cluster *c, lc_runtime **rts, lc_task **tasks, size_t n, const char *what) {
  lc_group_report *rep = NULL;
  int r;
  if (n == 0)
    return 0;
  r = lc__group_run_tasks(&rep, c->group, rts, (const lc_task *const *)tasks, n, NULL, NULL);
  if (r < 0)
    return r;
  for (size_t i = 0; i < n; i++) {
    if (lc_group_report_error(rep, i) == 0)
      continue;
    r = lc__error_set(lc_group_report_error(rep, i), "cluster: staging on %s failed: %s",
                      lc_group_report_host(rep, i), lc_group_report_message(rep, i));
    break;
  }
  for (size_t i = 0; i < n; i++)
    if (lc_group_report_error(rep, i) == 0)
      lc__cluster_note(c, "%s: %s done in %.3f s", lc_group_report_host(rep, i), what,
                       lc_group_report_seconds(rep, i));
  lc_group_report_free(rep);
  return r;
}

/* Adds "mkdir -p DIR..." of st's workers on rt to t. */
static int add_worker_dirs(lc_cluster *c, const lc__wstart *st, const lc_runtime *rt, lc_task *t) {
  lc__buf cmd = {0};
  int r = lc__buf_puts(&cmd, "mkdir -p");
  for (size_t i = st->first; r >= 0 && i < c->nworkers; i++)
    if (c->workers[i].rt == rt && (r = lc__buf_puts(&cmd, " ")) >= 0)
      r = lc__buf_shell_quote(&cmd, c->workers[i].workdir);
  r = r < 0 ? lc__error_set(-ENOMEM, "out of memory") : lc_task_add_run(t, cmd.data);
  lc__buf_free(&cmd);
  return r;
}

/*
 * The hosts' tasks of st: prepare_host on each host of st's workers that no earlier start
 * prepared, followed by the making of the workers' directories there when prepare_worker needs
 * them. The hosts prepared are the cluster's from now on (st->staged_mark undoes it).
 */
static int stage_hosts(lc_cluster *c, lc__wstart *st) {
  size_t n = 0, cap = c->nworkers - st->first;
  lc_runtime **rts = lc__calloc(cap + 1, sizeof(*rts));
  lc_task **tasks = lc__calloc(cap + 1, sizeof(*tasks));
  lc_runtime **staged = lc__realloc(c->staged, (c->nstaged + cap + 1) * sizeof(*staged));
  int r = 0;

  if (staged != NULL)
    c->staged = staged;
  if (rts == NULL || tasks == NULL || staged == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = st->first; i < c->nworkers; i++) {
    lc_runtime *rt = c->workers[i].rt;
    int fresh = c->w->prepare_host != NULL && !host_staged(c, rt);
    const char *wd = NULL;
    size_t k;
    for (k = 0; k < n && rts[k] != rt; k++)
      ;
    if (k < n || (!fresh && c->w->prepare_worker == NULL))
      continue;
    rts[n] = rt;
    if ((r = lc_task_new(&tasks[n++], "prepare_host")) < 0)
      goto out;
    if (fresh) {
      if ((r = lc_runtime_workdir(&wd, rt)) < 0)
        goto out;
      if ((r = c->w->prepare_host(c->w, c, lc_runtime_name(rt), wd, tasks[n - 1])) < 0) {
        char detail[LC_ERRMSG_MAX];
        snprintf(detail, sizeof(detail), "%s", lc_error_last());
        r = lc__error_set(r, "cluster: the worker launcher's prepare_host for %s failed: %s",
                          lc_runtime_name(rt), detail);
        goto out;
      }
      c->staged[c->nstaged++] = rt;
    }
    if (c->w->prepare_worker != NULL && (r = add_worker_dirs(c, st, rt, tasks[n - 1])) < 0)
      goto out;
  }
  r = run_all(c, rts, tasks, n, "prepare_host");
out:
  for (size_t i = 0; tasks != NULL && i < n; i++)
    lc_task_free(tasks[i]);
  free(tasks);
  free(rts);
  return r;
}

/* The workers' tasks of st (prepare_worker), all at once. */
static int stage_workers(lc_cluster *c, const lc__wstart *st) {
  size_t n = c->nworkers - st->first;
  lc_runtime **rts = lc__calloc(n + 1, sizeof(*rts));
  lc_task **tasks = lc__calloc(n + 1, sizeof(*tasks));
  int r = 0;

  if (rts == NULL || tasks == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t k = 0; k < n; k++) {
    lc__worker *w = &c->workers[st->first + k];
    char name[48];
    snprintf(name, sizeof(name), "prepare_worker-%d", w->info.index);
    rts[k] = w->rt;
    if ((r = lc_task_new(&tasks[k], name)) < 0)
      goto out;
    if ((r = c->w->prepare_worker(c->w, c, &w->info, tasks[k])) < 0) {
      char detail[LC_ERRMSG_MAX];
      snprintf(detail, sizeof(detail), "%s", lc_error_last());
      r = lc__error_set(r, "cluster: the worker launcher's prepare_worker for %s failed: %s",
                        w->out->tag, detail);
      goto out;
    }
  }
  r = run_all(c, rts, tasks, n, "prepare_worker");
out:
  for (size_t k = 0; tasks != NULL && k < n; k++)
    lc_task_free(tasks[k]);
  free(tasks);
  free(rts);
  return r;
}

int lc__workers_stage(lc_cluster *c, lc__wstart *st) {
  int r = 0;
  if (!has_staging(c) || c->nworkers == st->first)
    return 0;
  st->staged_mark = c->nstaged;
  st->staged = 1;
  if ((r = stage_hosts(c, st)) == 0 && c->w->prepare_worker != NULL)
    r = stage_workers(c, st);
  return r;
}

void lc__workers_unstage(lc_cluster *c, lc__wstart *st) {
  char saved[LC_ERRMSG_MAX];
  if (!st->staged)
    return;
  st->staged = 0;
  c->nstaged = st->staged_mark; /* the next start prepares them again */
  snprintf(saved, sizeof(saved), "%s", lc_error_last());
  lc__workers_remove_dirs(c, st->first, c->nworkers);
  lc__error_set(LC_EREMOTE, "%s", saved); /* the start's error stays the detail */
}

int lc__worker_stage(lc_cluster *c, lc__worker *w) {
  lc_runtime *rts[1] = {w->rt};
  lc_task *task = NULL;
  lc__buf cmd = {0};
  const char *wd = NULL;
  lc_runtime **staged;
  char name[48];
  int r = 0;

  if (!has_staging(c))
    return 0;
  if (c->w->prepare_host != NULL && !host_staged(c, w->rt)) {
    if ((staged = lc__realloc(c->staged, (c->nstaged + 1) * sizeof(*staged))) == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    c->staged = staged;
    if ((r = lc_runtime_workdir(&wd, w->rt)) < 0 || (r = lc_task_new(&task, "prepare_host")) < 0)
      goto out;
    if ((r = c->w->prepare_host(c->w, c, lc_runtime_name(w->rt), wd, task)) < 0) {
      char detail[LC_ERRMSG_MAX];
      snprintf(detail, sizeof(detail), "%s", lc_error_last());
      r = lc__error_set(r, "cluster: the worker launcher's prepare_host for %s failed: %s",
                        lc_runtime_name(w->rt), detail);
      goto out;
    }
    if ((r = run_all(c, rts, &task, 1, "prepare_host")) < 0)
      goto out;
    c->staged[c->nstaged++] = w->rt;
    lc_task_free(task);
    task = NULL;
  }
  if (c->w->prepare_worker == NULL)
    goto out;
  snprintf(name, sizeof(name), "prepare_worker-%d", w->info.index);
  if ((r = lc_task_new(&task, name)) < 0)
    goto out;
  if (lc__buf_puts(&cmd, "mkdir -p ") < 0 || lc__buf_shell_quote(&cmd, w->workdir) < 0 ||
      (r = lc_task_add_run(task, cmd.data)) < 0) {
    r = r < 0 ? r : lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((r = c->w->prepare_worker(c->w, c, &w->info, task)) < 0) {
    char detail[LC_ERRMSG_MAX];
    snprintf(detail, sizeof(detail), "%s", lc_error_last());
    r = lc__error_set(r, "cluster: the worker launcher's prepare_worker for %s failed: %s",
                      w->out->tag, detail);
    goto out;
  }
  r = run_all(c, rts, &task, 1, "prepare_worker");
out:
  lc_task_free(task);
  lc__buf_free(&cmd);
  return r;
}

void lc__cluster_unstage_host(lc_cluster *c, lc_runtime *rt) {
  size_t k = 0;
  for (size_t i = 0; i < c->nstaged; i++)
    if (c->staged[i] != rt)
      c->staged[k++] = c->staged[i];
  c->nstaged = k;
  lc__cluster_context_forget(c, rt); /* it went with the directory */
}

void lc__workers_remove_dirs(lc_cluster *c, size_t from, size_t to) {
  size_t n = 0, cap = to > from ? to - from : 0;
  lc_runtime **rts = lc__calloc(cap + 1, sizeof(*rts));
  lc_task **tasks = lc__calloc(cap + 1, sizeof(*tasks));
  lc_group_report *rep = NULL;

  for (size_t i = from; rts != NULL && tasks != NULL && i < to; i++) {
    lc_runtime *rt = c->workers[i].rt;
    lc__buf cmd = {0};
    size_t k;
    for (k = 0; k < n && rts[k] != rt; k++)
      ;
    if (k < n || rt == NULL || !lc_runtime_is_connected(rt))
      continue; /* a lost host's directory went with its connection */
    lc__buf_puts(&cmd, "rm -rf --");
    for (size_t j = i; j < to; j++)
      if (c->workers[j].rt == rt && c->workers[j].workdir != NULL) {
        lc__buf_puts(&cmd, " ");
        lc__buf_shell_quote(&cmd, c->workers[j].workdir);
      }
    rts[n] = rt;
    if (cmd.data != NULL && lc_task_new(&tasks[n], "remove") == 0 &&
        lc_task_add_run(tasks[n], cmd.data) < 0) {
      lc_task_free(tasks[n]);
      tasks[n] = NULL;
    }
    if (tasks[n] != NULL)
      n++;
    lc__buf_free(&cmd);
  }
  if (n > 0 &&
      lc__group_run_tasks(&rep, c->group, rts, (const lc_task *const *)tasks, n, NULL, NULL) == 0)
    for (size_t i = 0; i < n; i++)
      if (lc_group_report_error(rep, i) < 0)
        lc__cluster_note(c, "%s: removing the workers' directories failed: %s",
                         lc_group_report_host(rep, i), lc_group_report_message(rep, i));
  lc_group_report_free(rep);
  for (size_t i = 0; tasks != NULL && i < n; i++)
    lc_task_free(tasks[i]);
  free(tasks);
  free(rts);
}
