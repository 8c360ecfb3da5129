/*
 * sweep.c - many jobs over the GPU slots of some hosts with liblazycluster's job queue.
 *
 *   sweep [-F SSH_CONFIG] [HOST...]
 *
 * Connects to the hosts (aliases of the ssh config, or [user@]host[:port]; none: this machine),
 * then
 *   1. runs a sweep of command jobs, one per (learning rate, seed) pair, a job per GPU slot at a
 *      time (one slot per host without GPUs), and prints their results in the order submitted,
 *      each with where it ran: "job 4 lr=0.01 seed=1 on lab1 gpu -1: trained lr=0.01 seed=1 on gpu none";
 *   2. starts a pool, one long-lived sh worker per slot, sends every worker an update
 *      ("scale 10") and then jobs of one line each; prints each answer as it comes
 *      ("answer 3 from lab2 slot 0: 30").
 * Everything it started on the hosts is gone when it returns.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <lazycluster.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOSTS 256

/* The pool's worker: answers "N" with N times its scale, and "scale S" (an update) with "ok".
 * A template: the shell's own braces are written {{ }}. */
static const char worker_cmd[] = "scale=1; while IFS= read -r line; do case $line in "
                                 "scale*) scale=${{line#scale }}; echo ok ;; "
                                 "*) echo $((line * scale)) ;; esac; done";

static int fail(const char *what, int r) {
  fprintf(stderr, "%s: %s\n", what, lc_error_last()[0] ? lc_error_last() : lc_strerror(r));
  return 1;
}

/* 1. A sweep of command jobs; the results in the order submitted (map). */
static int sweep(lc_group *group) {
  static const char *const lrs[] = {"0.1", "0.01"}, *const seeds[] = {"1", "2", "3"};
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lc_jobs *q = NULL;
  const lc_job *job;
  int r, status = 1;
  /* {1} {2}: the job's arguments, shell-quoted; the "training" prints what it was given and
   * the GPU it got (CUDA_VISIBLE_DEVICES, set on a GPU slot) */
  o.command = "echo trained lr={1} seed={2} on gpu ${{CUDA_VISIBLE_DEVICES:-none}}";
  o.retries = 1;
  if ((r = lc_jobs_new(&q, group, &o)) < 0)
    return fail("jobs", r);
  for (size_t i = 0; i < 2; i++)
    for (size_t k = 0; k < 3; k++) {
      const char *args[] = {lrs[i], seeds[k]};
      if ((r = lc_jobs_submit(q, args, 2, NULL)) < 0) {
        fail("submit", r);
        goto out;
      }
    }
  lc_jobs_close(q);
  while ((r = lc_jobs_next(&job, q, LC_JOBS_IN_ORDER, -1)) == 0) {
    char *nl = job->out ? strchr(job->out, '\n') : NULL;
    printf("job %lu lr=%s seed=%s on %s gpu %d: %.*s%s\n", job->seq, job->args[0], job->args[1],
           job->host ? job->host : "-", job->gpu, nl ? (int)(nl - job->out) : 0,
           job->out ? job->out : "", job->state == LC_JOB_DONE ? "" : " (failed)");
  }
  status = lc_jobs_wait(q, -1) == 0 ? 0 : 1;
out:
  lc_jobs_free(q); /* nothing of it is left on any host after this */
  return status;
}

/* 2. A pool: one worker per slot, an update for all of them, then jobs; answers as they come. */
static int pool(lc_group *group) {
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lc_jobs *q = NULL;
  const lc_job *job;
  int r, status = 1;
  o.worker_cmd = worker_cmd;
  if ((r = lc_jobs_new(&q, group, &o)) < 0)
    return fail("pool", r);
  if ((r = lc_jobs_update(q, "scale 10", 60000)) < 0) {
    fail("update", r);
    goto out;
  }
  for (int i = 1; i <= 6; i++) {
    char line[16];
    snprintf(line, sizeof(line), "%d", i);
    if ((r = lc_jobs_submit_text(q, line, NULL)) < 0) {
      fail("submit", r);
      goto out;
    }
  }
  lc_jobs_close(q);
  while (lc_jobs_next(&job, q, LC_JOBS_AS_DONE, -1) == 0)
    printf("answer %s from %s slot %d: %s\n", job->input, job->host ? job->host : "-", job->slot,
           job->result ? job->result : "(none)");
  status = lc_jobs_wait(q, -1) == 0 ? 0 : 1;
out:
  lc_jobs_free(q);
  return status;
}

int main(int argc, char **argv) {
  const char *hosts[MAX_HOSTS];
  size_t nhosts = 0;
  int status = 1, r;
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_engine *engine = NULL;
  lc_group *group = NULL;
  lc_group_report *report = NULL;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-F") == 0 && i + 1 < argc)
      ro.ssh_config = argv[++i];
    else if (argv[i][0] == '-' || nhosts == MAX_HOSTS)
      return fprintf(stderr, "usage: %s [-F SSH_CONFIG] [HOST...]\n", argv[0]), 2;
    else
      hosts[nhosts++] = argv[i];
  }
  signal(SIGPIPE, SIG_IGN);
  if ((r = lc_engine_new(&engine, NULL)) < 0 || (r = lc_group_new(&group, engine, NULL)) < 0) {
    status = fail("engine", r);
    goto out;
  }
  if (nhosts > 0) {
    if ((r = lc_group_connect(&report, group, hosts, nhosts, &ro)) < 0) {
      status = fail("connect", r);
      goto out;
    }
    for (size_t i = 0; i < lc_group_report_count(report); i++)
      if (lc_group_report_error(report, i) != 0)
        fprintf(stderr, "%s: not used: %s\n", lc_group_report_host(report, i),
                lc_group_report_message(report, i));
  } else {
    lc_runtime *local = NULL;
    if ((r = lc_runtime_new_local(&local, engine, NULL)) < 0 ||
        (r = lc_group_add(group, local)) < 0) {
      lc_runtime_free(local);
      status = fail("this machine", r);
      goto out;
    }
  }
  if (lc_group_count(group) == 0) {
    fprintf(stderr, "no host is reachable\n");
    goto out;
  }
  status = sweep(group);
  if (pool(group) != 0)
    status = 1;
out:
  lc_group_report_free(report);
  lc_group_free(group);
  lc_engine_free(engine);
  return status;
}
