/*
 * test_jobs.c - the job queue (lazycluster/jobs.h) on real test hosts:
 * - 40 command jobs over 4 hosts declared with 2 GPUs each: every job ran once, on one (host, GPU)
 *   at a time (no two overlap there, by the hosts' clock), with its CUDA_VISIBLE_DEVICES and
 *   LAZYCLUSTER_* variables; lc_jobs_next in order; on_line saw every line; the joblog and the
 *   results directory hold every job.
 * - retries: a job that fails twice (a counter file on its host) and then passes, with retries=2
 *   DONE after 3 attempts, the retry on the other slot; with retries=1 FAILED after 2.
 * - cancel: running jobs stopped (nothing left on any host), queued ones CANCELLED at once.
 * - joblog and resume: a queue cancelled mid-run, then one with resume=1 runs only the rest:
 *   every job ran exactly once on the hosts, the joblog holds each job once.
 * - host loss: a host's link cut while its job runs: the job is put back and finishes elsewhere,
 *   once in the joblog; nothing of it is left on the host once it answers again, and the host
 *   takes jobs again (its working directory made anew).
 * - a pool (one worker per slot, fed lines): an update answered by every worker, a worker killed
 *   while it runs a job (the job answered by another or the restarted worker, one more start), the
 *   restarted worker answers the earlier update before any job, a later update answered by all,
 *   100 jobs answered right.
 * - returns: files a job wrote fetched into return_dir under their relative path, the slot held
 *   until they arrived (the next job on it sees them whole), a missing one fails its job naming it.
 * - the give-up clock: every host's link cut, give_up_ms 4000: the queued jobs fail naming every
 *   host and why it was lost, lc_jobs_wait returns.
 * - lc_jobs_update with a timeout while every worker is busy: -ETIMEDOUT, and the update still
 *   reaches every worker once its job ended, before a later one.
 * After each: nothing of the queue left on any host; after a host loss, no working directory
 * either (neither the lost one nor the one made anew).
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define HOSTS 4
#define LOST 1

static lc_engine *engine;
static const char *hosts[] = {"lab0", "lab1", "lab2", "lab3"};
static char tmpdir[256];

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static lc_group *connect_group(int gpus, int slots) {
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  ro.keepalive_timeout_ms = 3000;
  if (lc_group_new(&g, engine, NULL) < 0 || lc_group_connect(&rep, g, hosts, HOSTS, &ro) < 0 ||
      lc_group_report_failures(rep) != 0) {
    fprintf(stderr, "  group setup failed: %s\n", lc_error_last());
    lc_group_report_free(rep);
    lc_group_free(g);
    return NULL;
  }
  lc_group_report_free(rep);
  for (size_t i = 0; i < lc_group_count(g); i++)
    lc_runtime_set_resources(lc_group_at(g, i), gpus, slots);
  return g;
}

/* Processes matching pattern on every host, polled until none is left (lifelines take a moment). */
static int left_everywhere(const char *pattern, int tries) {
  int n = -1;
  for (int t = 0; t < tries && n != 0; t++) {
    if (t > 0)
      usleep(500 * 1000);
    n = th_count_everywhere(HOSTS, pattern);
  }
  return n;
}

/* Working directories of lazycluster left on host i (entries under root's ~/.cache/lazycluster). */
static int workdirs_on(int i) {
  return th_run("exec %d -- sh -c 'test -z \"$(ls -A /root/.cache/lazycluster 2>/dev/null)\"'",
                i) == 0
             ? 0
             : 1;
}

static int workdirs_everywhere(int tries) {
  int n = -1;
  for (int t = 0; t < tries && n != 0; t++) {
    if (t > 0)
      usleep(500 * 1000);
    n = 0;
    for (int i = 0; i < HOSTS; i++)
      n += workdirs_on(i);
  }
  return n;
}

/* Lines of a file here, or -1. */
static int count_lines(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int n = 0;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    n += prefix == NULL || strncmp(line, prefix, strlen(prefix)) == 0;
  fclose(f);
  return n;
}

/* How often each seq appears as the first field of a joblog's lines (header skipped). */
static void joblog_seqs(const char *path, int *count, int max) {
  FILE *f = fopen(path, "r");
  char line[4096];
  memset(count, 0, sizeof(int) * (size_t)(max + 1));
  if (f == NULL)
    return;
  while (fgets(line, sizeof(line), f) != NULL) {
    int seq = atoi(line);
    if (seq >= 1 && seq <= max)
      count[seq]++;
  }
  fclose(f);
}

typedef struct lines_seen {
  pthread_mutex_t mu;
  int output, notice;
  char notices[4096];
} lines_seen;

static void on_line(const lc_jobs_line *l, void *payload) {
  lines_seen *s = payload;
  pthread_mutex_lock(&s->mu);
  if (l->kind == LC_JOBS_LINE_OUTPUT)
    s->output++;
  if (l->kind == LC_JOBS_LINE_NOTICE) {
    s->notice++;
    size_t at = strlen(s->notices);
    snprintf(s->notices + at, sizeof(s->notices) - at, "%s\n", l->line);
  }
  pthread_mutex_unlock(&s->mu);
}

/* ---- 40 jobs over 8 GPUs -------------------------------------------------------------------- */

typedef struct span {
  char host[32];
  int gpu;
  double start, end;
} span;

static void test_gpu_slots(void) {
  lc_group *g = connect_group(2, 0);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lines_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  span spans[41];
  char joblog[512], results[512], path[600];
  int seqs[41], bad = 0, overlaps = 0;
  lc_jobs_stats st;
  const lc_job *j;

  LC_REQUIRE(g != NULL);
  snprintf(joblog, sizeof(joblog), "%s/gpu.joblog", tmpdir);
  snprintf(results, sizeof(results), "%s/gpu.results", tmpdir);
  o.command = "echo $LAZYCLUSTER_HOST $CUDA_VISIBLE_DEVICES $LAZYCLUSTER_GPU $LAZYCLUSTER_JOB "
              "$CUDA_DEVICE_ORDER {#} {1} $(date +%s.%N); sleep 0.2; echo end $(date +%s.%N)";
  o.joblog = joblog;
  o.results_dir = results;
  o.on_line = on_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.slots == 8);
  for (int i = 1; i <= 40; i++) {
    char a[16];
    const char *args[] = {a};
    unsigned long seq = 0;
    snprintf(a, sizeof(a), "x%d", i);
    LC_CHECK_OK(lc_jobs_submit(q, args, 1, &seq));
    LC_CHECK(seq == (unsigned long)i);
  }
  /* {1} and no argument: the message names the number this job would have got; none is used */
  LC_CHECK(lc_jobs_submit(q, NULL, 0, NULL) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "{1}: job 41 has 0 arguments");
  LC_CHECK_OK(lc_jobs_close(q));
  for (int i = 1; i <= 40; i++) {
    char host[32], cvd[16], order[32], arg[16], want[16];
    int gpu = -2, job = 0, seq = 0;
    double start = 0, end = 0;
    LC_REQUIRE(lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 120000) == 0);
    LC_CHECK(j->seq == (unsigned long)i);
    LC_CHECK(j->state == LC_JOB_DONE && j->attempts == 1);
    snprintf(want, sizeof(want), "x%d", i);
    if (sscanf(j->out, "%31s %15s %d %d %31s %d %15s %lf\nend %lf", host, cvd, &gpu, &job, order,
               &seq, arg, &start, &end) != 9 ||
        strcmp(arg, want) != 0) {
      fprintf(stderr, "  job %d said: %s\n", i, j->out);
      bad++;
      continue;
    }
    bad += strcmp(host, j->host) != 0 || atoi(cvd) != j->gpu || gpu != j->gpu || job != i ||
           seq != i || strcmp(order, "PCI_BUS_ID") != 0 || j->gpu < 0 || j->gpu > 1;
    snprintf(spans[i].host, sizeof(spans[i].host), "%s", host);
    spans[i].gpu = gpu;
    spans[i].start = start;
    spans[i].end = end;
  }
  LC_CHECK(bad == 0);
  LC_CHECK(lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 1000) == -ENOENT);
  LC_CHECK(lc_jobs_wait(q, 1000) == 0);
  for (int a = 1; a <= 40; a++)
    for (int b = a + 1; b <= 40; b++)
      if (strcmp(spans[a].host, spans[b].host) == 0 && spans[a].gpu == spans[b].gpu &&
          spans[a].start < spans[b].end && spans[b].start < spans[a].end)
        overlaps++;
  LC_CHECK(overlaps == 0);
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.submitted == 40 && st.done == 40 && st.failed == 0 && st.queued == 0 &&
           st.running == 0 && st.retried == 0 && st.eta == 0);
  LC_CHECK(seen.output == 80);
  lc_jobs_free(q);
  joblog_seqs(joblog, seqs, 40);
  for (int i = 1; i <= 40; i++)
    bad += seqs[i] != 1;
  LC_CHECK(bad == 0);
  LC_CHECK(count_lines(joblog, "Seq\tHost") == 1);
  snprintf(path, sizeof(path), "%s/17/stdout", results);
  LC_CHECK(count_lines(path, NULL) == 2);
  snprintf(path, sizeof(path), "%s/17/exit", results);
  LC_CHECK(count_lines(path, "0") == 1);
  snprintf(path, sizeof(path), "%s/17/command", results);
  LC_CHECK(access(path, R_OK) == 0);
  snprintf(path, sizeof(path), "%s/.17.partial", results);
  LC_CHECK(access(path, F_OK) != 0);
  LC_CHECK(left_everywhere("^sleep 0.2", 10) == 0);
  lc_group_free(g);
}

/* ---- retries ----------------------------------------------------------------------------------
 */

static void retries_case(int retries, lc_job_state want_state, int want_attempts) {
  lc_group *g = connect_group(-1, 0);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lines_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  char cmd[512];
  const lc_job *j;
  lc_exec_result res;

  LC_REQUIRE(g != NULL);
  lc_group_remove(g, "lab1");
  lc_group_remove(g, "lab2");
  lc_group_remove(g, "lab3"); /* one host: its counter file sees every attempt */
  snprintf(cmd, sizeof(cmd),
           "f=/tmp/lcq-count-%d; n=$(cat $f 2>/dev/null || echo 0); n=$((n+1)); echo $n > $f; "
           "echo \"slot $LAZYCLUSTER_SLOT try $n\"; test $n -ge 3",
           (int)getpid());
  o.slots_per_host = 2;
  o.retries = retries;
  o.on_line = on_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  LC_CHECK_OK(lc_jobs_submit_text(q, cmd, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 60000) == (want_state == LC_JOB_DONE ? 0 : 1));
  LC_REQUIRE(lc_jobs_next(&j, q, LC_JOBS_AS_DONE, 1000) == 0);
  fprintf(stderr, "  attempts %d state %d: %s", j->attempts, (int)j->state, j->out);
  LC_CHECK(j->state == want_state && j->attempts == want_attempts);
  if (want_state == LC_JOB_FAILED) {
    LC_CHECK(j->exit.exit_status == 1 && j->error != 0);
    LC_CHECK_CONTAINS(j->message, "lab0 slot");
  }
  /* a retry goes to the other slot when it is free */
  if (want_attempts == 3)
    LC_CHECK_STR(j->out, "slot 0 try 3\n");
  LC_CHECK(j->slot == (want_attempts == 3 ? 0 : 1));
  lc_jobs_free(q);
  snprintf(cmd, sizeof(cmd), "rm -f /tmp/lcq-count-%d", (int)getpid());
  lc_runtime_exec(&res, lc_group_at(g, 0), cmd, NULL);
  lc_group_free(g);
}

static void test_retries(void) {
  retries_case(2, LC_JOB_DONE, 3);
  retries_case(1, LC_JOB_FAILED, 2);
}

/* ---- cancel -----------------------------------------------------------------------------------
 */

static void test_cancel(void) {
  lc_group *g = connect_group(2, 0);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  char results[512], path[600];
  lc_jobs_stats st = {0};
  int running = 0, cancelled = 0;
  const lc_job *j;

  LC_REQUIRE(g != NULL);
  snprintf(results, sizeof(results), "%s/cancel.results", tmpdir);
  o.command = "echo started; exec sleep 4321";
  o.results_dir = results;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 12; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  for (int t = 0; t < 60 && running < 8; t++) {
    usleep(500 * 1000);
    running = th_count_everywhere(HOSTS, "^sleep 4321");
  }
  LC_CHECK(running == 8);
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.running == 8 && st.queued == 4);
  lc_jobs_cancel(q);
  LC_CHECK(lc_jobs_wait(q, 60000) == 12);
  while (lc_jobs_next(&j, q, LC_JOBS_AS_DONE, 0) == 0)
    cancelled += j->state == LC_JOB_CANCELLED;
  LC_CHECK(cancelled == 12);
  /* confirmed ends: nothing left once lc_jobs_wait returned */
  LC_CHECK(th_count_everywhere(HOSTS, "^sleep 4321") == 0);
  LC_CHECK(lc_jobs_submit(q, NULL, 0, NULL) == LC_ECLOSED);
  lc_jobs_free(q);
  snprintf(path, sizeof(path), "%s/1", results);
  LC_CHECK(access(path, F_OK) != 0); /* a cancelled job leaves no results directory */
  snprintf(path, sizeof(path), "%s/.1.partial", results);
  LC_CHECK(access(path, F_OK) != 0);
  LC_CHECK(left_everywhere("^sleep 4321", 10) == 0);
  lc_group_free(g);
}

/* ---- joblog and resume ------------------------------------------------------------------------
 */

/* Lines "run N" in ~/lcq-runs-PID on every host: count[N]. */
static void runs_on_hosts(lc_group *g, int *count, int max) {
  char cmd[256];
  memset(count, 0, sizeof(int) * (size_t)(max + 1));
  snprintf(cmd, sizeof(cmd), "cat ~/lcq-runs-%d 2>/dev/null; rm -f ~/lcq-runs-%d", (int)getpid(),
           (int)getpid());
  for (size_t i = 0; i < lc_group_count(g); i++) {
    collect col;
    lc_exec_result res;
    if (collect_exec(&col, &res, lc_group_at(g, i), cmd, NULL) == 0 && col.text[0] != NULL)
      for (char *l = col.text[0]; l != NULL && *l;
           l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        int n = 0;
        if (sscanf(l, "run %d", &n) == 1 && n >= 1 && n <= max)
          count[n]++;
      }
    collect_free(&col);
  }
}

static void test_joblog_resume(void) {
  lc_group *g = connect_group(-1, 2);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  char joblog[512], cmd[256];
  int runs[31], seqs[31], seqs1[31], bad = 0, done1 = 0, logged;
  lc_jobs_stats st;
  const lc_job *j;

  LC_REQUIRE(g != NULL);
  snprintf(joblog, sizeof(joblog), "%s/resume.joblog", tmpdir);
  /* a job counts once it got to its end; a cancelled one may still have written, when the stop
   * reached it between its echo and its exit (CI under ThreadSanitizer saw it once) */
  snprintf(cmd, sizeof(cmd), "sleep 0.7; echo run {#} >> ~/lcq-runs-%d", (int)getpid());
  o.command = cmd;
  o.joblog = joblog;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 30; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  for (int i = 0; i < 10; i++)
    LC_CHECK(lc_jobs_next(&j, q, LC_JOBS_AS_DONE, 60000) == 0 && j->state == LC_JOB_DONE);
  lc_jobs_cancel(q);
  lc_jobs_wait(q, 60000);
  lc_jobs_stats_get(q, &st);
  done1 = (int)st.done;
  fprintf(stderr, "  first run: %d done, %zu cancelled\n", done1, st.cancelled);
  LC_CHECK(done1 >= 10 && done1 < 30 && st.done + st.cancelled == 30);
  lc_jobs_free(q);
  logged = count_lines(joblog, NULL) - 1;
  LC_CHECK(logged == done1);
  joblog_seqs(joblog, seqs1, 30);

  o.resume = 1;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 30; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 0);
  lc_jobs_stats_get(q, &st);
  LC_CHECK((int)st.skipped == done1 && (int)st.done == 30 - done1);
  lc_jobs_free(q);
  runs_on_hosts(g, runs, 30);
  joblog_seqs(joblog, seqs, 30);
  /* each job is logged once; one logged by the first run never runs again; one the cancel
   * stopped ran once more, after perhaps a write of its stopped run */
  for (int i = 1; i <= 30; i++)
    if (seqs[i] != 1 || runs[i] < 1 || runs[i] > (seqs1[i] == 1 ? 1 : 2)) {
      fprintf(stderr, "  job %d: ran %d times, %d joblog lines (%d after the first run)\n", i,
              runs[i], seqs[i], seqs1[i]);
      bad++;
    }
  LC_CHECK(bad == 0);
  LC_CHECK(count_lines(joblog, "Seq\t") == 1);

  /* a joblog that records more jobs than were submitted: an error at close */
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK(lc_jobs_close(q) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "resume.joblog line");
  lc_jobs_free(q);
  runs_on_hosts(g, runs, 30);
  LC_CHECK(left_everywhere("^sleep 0.7", 10) == 0);
  lc_group_free(g);
}

/* ---- host loss --------------------------------------------------------------------------------
 */

static void test_host_loss(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lines_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  char joblog[512];
  int seqs[13], bad = 0, on_lost = 0, lost_job = 0;
  lc_jobs_stats st = {0};
  const lc_job *j;
  long long t0;

  LC_REQUIRE(g != NULL);
  snprintf(joblog, sizeof(joblog), "%s/loss.joblog", tmpdir);
  o.command = "exec sleep 6.0123";
  o.joblog = joblog;
  o.on_line = on_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 8; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  /* one job on each host */
  for (int t = 0; t < 60 && th_count_procs(LOST, "^sleep 6.0123") != 1; t++)
    usleep(250 * 1000);
  LC_REQUIRE(th_count_procs(LOST, "^sleep 6.0123") == 1);
  LC_REQUIRE(th_run("link-down %d", LOST) == 0);
  t0 = now_ms();
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 0);
  fprintf(stderr, "  all 8 done %.1f s after the link went down\n", (now_ms() - t0) / 1000.0);
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.done == 8 && st.requeued >= 1 && st.slots == 3 && st.slots_lost == 1);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0) {
    on_lost += strcmp(j->host, hosts[LOST]) == 0;
    if (j->attempts == 2) {
      lost_job++;
      LC_CHECK(j->error == 0);
    }
  }
  LC_CHECK(on_lost == 0 && lost_job >= 1);
  LC_CHECK_CONTAINS(seen.notices, "lab1 lost");
  LC_CHECK_CONTAINS(seen.notices, "put back");
  joblog_seqs(joblog, seqs, 12);
  for (int i = 1; i <= 8; i++)
    bad += seqs[i] != 1;
  LC_CHECK(bad == 0);

  /* the link comes back after the heartbeat limit: the lost job's process is gone there */
  while (now_ms() - t0 < 20000)
    usleep(500 * 1000);
  LC_REQUIRE(th_run("link-up %d", LOST) == 0);
  LC_CHECK(left_everywhere("^sleep 6.0123", 60) == 0);
  fprintf(stderr, "  nothing left %.1f s after the link went down\n", (now_ms() - t0) / 1000.0);
  lc_jobs_free(q);

  /* a queue on the group once the host answers again: it takes jobs again */
  for (int t = 0; t < 120 && !lc_runtime_is_connected(lc_group_at(g, LOST)); t++)
    usleep(500 * 1000);
  LC_CHECK(lc_runtime_is_connected(lc_group_at(g, LOST)));
  o.joblog = NULL;
  o.command = "echo $LAZYCLUSTER_HOST; sleep 1";
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 4; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 0);
  on_lost = 0;
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0)
    on_lost += strcmp(j->host, hosts[LOST]) == 0;
  LC_CHECK(on_lost == 1);
  lc_jobs_free(q);
  lc_group_free(g);
  /* neither the lost host's first directory (its keeper ended with the heartbeat) nor the one
   * the second queue had */
  LC_CHECK(workdirs_everywhere(120) == 0);
}

/* The same queue, with the host lost while the queue lives, and back: its slot comes back. */
static void test_host_back_in_queue(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lc_jobs_stats st = {0};
  const lc_job *j;
  int on_lost = 0;
  long long t0;

  LC_REQUIRE(g != NULL);
  o.command = "echo $LAZYCLUSTER_HOST; cat marker; exec sleep 3.0321";
  {
    static char marker[512];
    static const char *send[2];
    FILE *f;
    snprintf(marker, sizeof(marker), "%s/marker", tmpdir);
    if ((f = fopen(marker, "w")) != NULL) {
      fputs("sent\n", f);
      fclose(f);
    }
    send[0] = marker;
    o.send = send;
  }
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 4; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  for (int t = 0; t < 60 && th_count_procs(LOST, "^sleep 3.0321") != 1; t++)
    usleep(250 * 1000);
  LC_REQUIRE(th_count_procs(LOST, "^sleep 3.0321") == 1);
  LC_REQUIRE(th_run("link-down %d", LOST) == 0);
  t0 = now_ms();
  while (now_ms() - t0 < 20000)
    usleep(500 * 1000);
  LC_REQUIRE(th_run("link-up %d", LOST) == 0);
  for (int t = 0; t < 240; t++) {
    lc_jobs_stats_get(q, &st);
    if (st.slots == 4)
      break;
    usleep(500 * 1000);
  }
  LC_CHECK(st.slots == 4 && st.slots_lost == 0);
  fprintf(stderr, "  its slot back %.1f s after the link went down\n", (now_ms() - t0) / 1000.0);
  for (int i = 0; i < 4; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 0);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0) {
    LC_CHECK_CONTAINS(j->out, "sent\n"); /* the send made again on the host that came back */
    on_lost += strcmp(j->host, hosts[LOST]) == 0;
  }
  LC_CHECK(on_lost >= 1);
  lc_jobs_free(q);
  LC_CHECK(left_everywhere("^sleep 3.0321", 60) == 0);
  lc_group_free(g);
  /* the directory made anew on the host that came back is gone too, and the old one */
  LC_CHECK(workdirs_everywhere(120) == 0);
}

/* ---- returns ----------------------------------------------------------------------------------
 */

/* Jobs on one slot that write files, fetched into return_dir (which the hosts see too: /var/tmp):
 * each job checks that the one before it had its files here whole before it started (the slot is
 * held until they arrived); a job whose file is missing fails naming it. */
static void test_returns(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  const char *returns[] = {"sub/out-{#}.txt", "big-{#}.bin", NULL};
  static const char *const args[][2] = {{"a", ""}, {"b", "1"}, {"skip", "2"}, {"c", "2"}};
  char ret[256], cmd[1024], path[600], text[64];
  const lc_job *j;
  FILE *f;

  LC_REQUIRE(g != NULL);
  lc_group_remove(g, "lab1");
  lc_group_remove(g, "lab2");
  lc_group_remove(g, "lab3");
  snprintf(ret, sizeof(ret), "/var/tmp/lc-test-jobs-ret-%d", (int)getpid());
  LC_REQUIRE(mkdir(ret, 0700) == 0);
  snprintf(cmd, sizeof(cmd),
           "if [ -n {2} ]; then s=$(stat -c %%s %s/big-{2}.bin 2>/dev/null); "
           "[ \"$s\" = 20000000 ] && [ -f %s/sub/out-{2}.txt ] || "
           "{{ echo \"early: the files of job\" {2} \"are not here (size $s)\"; exit 9; }}; fi; "
           "mkdir -p sub; head -c 20000000 /dev/zero >big-{#}.bin; "
           "[ {1} = skip ] || echo {1} >sub/out-{#}.txt",
           ret, ret);
  o.command = cmd;
  o.returns = returns;
  o.return_dir = ret;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (size_t i = 0; i < 4; i++)
    LC_CHECK_OK(lc_jobs_submit(q, args[i], 2, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 1);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0) {
    fprintf(stderr, "  job %lu: state %d, %s%s\n", j->seq, (int)j->state, j->message, j->out);
    if (j->seq == 3) {
      LC_CHECK(j->state == LC_JOB_FAILED && j->error != 0);
      LC_CHECK_CONTAINS(j->message, "sub/out-3.txt");
      continue;
    }
    LC_CHECK(j->state == LC_JOB_DONE && j->attempts == 1);
    snprintf(path, sizeof(path), "%s/sub/out-%lu.txt", ret, j->seq);
    text[0] = '\0';
    if ((f = fopen(path, "r")) != NULL) {
      if (fgets(text, sizeof(text), f) == NULL)
        text[0] = '\0';
      fclose(f);
    }
    snprintf(path, sizeof(path), "%s\n", args[j->seq - 1][0]);
    LC_CHECK_STR(text, path);
  }
  lc_jobs_free(q);
  snprintf(path, sizeof(path), "%s/sub/out-3.txt", ret);
  LC_CHECK(access(path, F_OK) != 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ret);
  LC_CHECK(system(cmd) == 0);
  lc_group_free(g);
  LC_CHECK(workdirs_everywhere(20) == 0);
}

/* ---- the give-up clock ------------------------------------------------------------------------
 */

/* Every host's link cut: after give_up_ms with no usable slot the queued jobs fail, naming every
 * host and why it was lost; lc_jobs_wait returns. Once the links are back nothing is left. */
static void test_give_up(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  lines_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lc_jobs_stats st = {0};
  const lc_job *j;
  int failed = 0, named = 0;

  LC_REQUIRE(g != NULL);
  o.command = "exec sleep 7.4321";
  o.give_up_ms = 4000;
  o.on_line = on_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < 8; i++)
    LC_CHECK_OK(lc_jobs_submit(q, NULL, 0, NULL));
  LC_CHECK_OK(lc_jobs_close(q));
  for (int t = 0; t < 60 && th_count_everywhere(HOSTS, "^sleep 7.4321") != HOSTS; t++)
    usleep(250 * 1000);
  LC_REQUIRE(th_count_everywhere(HOSTS, "^sleep 7.4321") == HOSTS);
  for (int i = 0; i < HOSTS; i++)
    LC_REQUIRE(th_run("link-down %d", i) == 0);
  LC_CHECK(lc_jobs_wait(q, 120000) == 8);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0) {
    int all = 1;
    failed += j->state == LC_JOB_FAILED && j->error == -ETIMEDOUT;
    for (int i = 0; i < HOSTS; i++) {
      char want[64];
      snprintf(want, sizeof(want), "%s: ", hosts[i]);
      all = all && strstr(j->message, want) != NULL;
    }
    named += all && strstr(j->message, "no slot usable for 4 s") != NULL;
    if (j->seq == 1)
      fprintf(stderr, "  job 1: %s\n", j->message);
  }
  LC_CHECK(failed == 8 && named == 8);
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.failed == 8 && st.slots == 0 && st.slots_lost == HOSTS);
  LC_CHECK_CONTAINS(seen.notices, "lab0 lost");
  lc_jobs_free(q);
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(th_run("link-up %d", i) == 0);
  LC_CHECK(left_everywhere("^sleep 7.4321", 120) == 0);
  lc_group_free(g);
  LC_CHECK(workdirs_everywhere(120) == 0);
}

/* ---- a pool -----------------------------------------------------------------------------------
 */

typedef struct pool_seen {
  pthread_mutex_t mu;
  int acks[HOSTS][3]; /* update answers per host: upd1, upd2 */
  int worker_lines, job_lines, notices;
} pool_seen;

static void pool_line(const lc_jobs_line *l, void *payload) {
  pool_seen *s = payload;
  int h = l->host ? atoi(l->host + 3) : -1;
  pthread_mutex_lock(&s->mu);
  if (l->kind == LC_JOBS_LINE_UPDATE && h >= 0 && h < HOSTS)
    s->acks[h][strcmp(l->line, "ack upd1") == 0 ? 1 : strcmp(l->line, "ack upd2") == 0 ? 2 : 0]++;
  if (l->kind == LC_JOBS_LINE_WORKER)
    s->worker_lines++;
  if (l->kind == LC_JOBS_LINE_OUTPUT)
    s->job_lines++;
  if (l->kind == LC_JOBS_LINE_NOTICE)
    s->notices++;
  pthread_mutex_unlock(&s->mu);
}

/* Worker starts on every host (each start appends a line to ~/lcq-starts-PID). */
static int worker_starts(lc_group *g, int clear) {
  char cmd[256];
  int n = 0;
  snprintf(cmd, sizeof(cmd), "cat ~/lcq-starts-%d 2>/dev/null | wc -l%s", (int)getpid(),
           clear ? "; rm -f ~/lcq-starts-*" : "");
  for (size_t i = 0; i < lc_group_count(g); i++) {
    collect col;
    lc_exec_result res;
    if (collect_exec(&col, &res, lc_group_at(g, i), cmd, NULL) == 0 && col.text[0] != NULL)
      n += atoi(col.text[0]);
    collect_free(&col);
  }
  return n;
}

static void test_pool(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  pool_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  char script[512], text[1024];
  const char *send[] = {script, NULL};
  unsigned long slow = 0;
  int killed = -1, bad = 0, answered = 0;
  lc_jobs_stats st;
  const lc_job *j;
  FILE *f;

  LC_REQUIRE(g != NULL);
  snprintf(script, sizeof(script), "%s/worker.sh", tmpdir);
  snprintf(text, sizeof(text),
           "echo start >> \"$HOME/lcq-starts-%d\"\n"
           "echo \"worker $LAZYCLUSTER_HOST $LAZYCLUSTER_SLOT up\" >&2\n"
           "while IFS= read -r l; do\n"
           "  case \"$l\" in\n"
           "    upd*) echo \"ack $l\" ;;\n"
           "    slow) echo 'slow job' >&2; sleep 7.77; echo 'ans slow' ;;\n"
           "    *) echo \"ans $l\" ;;\n"
           "  esac\n"
           "done\n",
           (int)getpid());
  LC_REQUIRE((f = fopen(script, "w")) != NULL);
  fputs(text, f);
  fclose(f);
  worker_starts(g, 1);
  /* a copy of sh named lcqw: the test kills one worker by its name */
  o.worker_cmd = "cp /bin/sh ./lcqw && exec ./lcqw ./worker.sh";
  o.send = send;
  o.restart_backoff_ms = 200;
  o.on_line = pool_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  LC_CHECK_OK(lc_jobs_update(q, "upd1", 60000));
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(seen.acks[i][1] == 1);
  LC_CHECK_OK(lc_jobs_submit_text(q, "slow", &slow));
  for (int t = 0; t < 120 && killed < 0; t++) {
    for (int i = 0; i < HOSTS && killed < 0; i++)
      if (th_count_procs(i, "^sleep 7.77") == 1)
        killed = i;
    if (killed < 0)
      usleep(250 * 1000);
  }
  LC_REQUIRE(killed >= 0);
  LC_CHECK(th_kill_procs(killed, "lcqw", SIGKILL) == 1);
  for (int i = 1; i <= 100; i++) {
    char a[16];
    const char *args[] = {"j", a};
    snprintf(a, sizeof(a), "%d", i);
    LC_CHECK_OK(lc_jobs_submit(q, args, 2, NULL));
  }
  /* the killed worker comes back and answers the update made before its death first */
  for (int t = 0; t < 120; t++) {
    pthread_mutex_lock(&seen.mu);
    int back = seen.acks[killed][1] == 2;
    pthread_mutex_unlock(&seen.mu);
    if (back)
      break;
    usleep(250 * 1000);
  }
  LC_CHECK(seen.acks[killed][1] == 2);
  LC_CHECK_OK(lc_jobs_update(q, "upd2", 60000));
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(seen.acks[i][2] == 1);
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 120000) == 0);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0) {
    char want[32];
    if (j->seq == slow) {
      LC_CHECK_STR(j->result, "ans slow");
      LC_CHECK(j->attempts == 2 && j->state == LC_JOB_DONE);
      continue;
    }
    answered++;
    snprintf(want, sizeof(want), "ans j %lu", j->seq - 1);
    if (j->result == NULL || strcmp(j->result, want) != 0 || j->state != LC_JOB_DONE) {
      fprintf(stderr, "  job %lu: %s\n", j->seq, j->result ? j->result : "(no result)");
      bad++;
    }
  }
  LC_CHECK(answered == 100 && bad == 0);
  lc_jobs_stats_get(q, &st);
  LC_CHECK(st.done == 101 && st.requeued == 1 && st.slots == 4);
  /* stderr: each worker's "up" (HOSTS + the restarted one) and "slow job" twice. sshd forwards a
   * process's stdout and stderr as they come, not in the order written: a restarted worker's "up"
   * can arrive after its answer to the replayed update, once the next job is on its way, and then
   * reads as that job's line. So the "up" lines are counted with the jobs' lines. */
  pthread_mutex_lock(&seen.mu);
  if (seen.worker_lines + seen.job_lines < HOSTS + 3 || seen.job_lines < 2 || seen.notices < 2)
    fprintf(stderr,
            "  lines: %d of the workers, %d of jobs (want %d in all, 2 of jobs), %d notices "
            "(want 2)\n",
            seen.worker_lines, seen.job_lines, HOSTS + 3, seen.notices);
  LC_CHECK(seen.worker_lines + seen.job_lines >= HOSTS + 3 && seen.job_lines >= 2 &&
           seen.notices >= 2);
  pthread_mutex_unlock(&seen.mu);
  LC_CHECK(worker_starts(g, 0) == HOSTS + 1);
  lc_jobs_free(q);
  LC_CHECK(worker_starts(g, 1) == HOSTS + 1);
  LC_CHECK(left_everywhere("^./lcqw", 10) == 0);
  LC_CHECK(left_everywhere("^sleep 7.77", 10) == 0);
  lc_group_free(g);
}

/* An update while every worker is busy past its timeout: -ETIMEDOUT, and it still reaches every
 * worker once their jobs end (before the next update). The jobs wait for a file that the test
 * makes only after the timeout. */
static void test_update_timeout(void) {
  lc_group *g = connect_group(-1, 1);
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;
  pool_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  char dir[256], script[600], go[600], text[1024];
  const char *send[] = {script, NULL};
  const lc_job *j;
  int blocked = 0, answered = 0;
  FILE *f;

  LC_REQUIRE(g != NULL);
  snprintf(dir, sizeof(dir), "/var/tmp/lc-test-jobs-upd-%d", (int)getpid());
  LC_REQUIRE(mkdir(dir, 0755) == 0);
  snprintf(script, sizeof(script), "%s/worker.sh", tmpdir);
  snprintf(go, sizeof(go), "%s/go", dir);
  snprintf(
      text, sizeof(text),
      "while IFS= read -r l; do\n"
      "  case \"$l\" in\n"
      "    upd*) echo \"ack $l\" ;;\n"
      "    block) echo blocked >&2; while [ ! -e %s ]; do sleep 0.1; done; echo 'ans block' ;;\n"
      "  esac\n"
      "done\n",
      go);
  LC_REQUIRE((f = fopen(script, "w")) != NULL);
  fputs(text, f);
  fclose(f);
  o.worker_cmd = "exec sh ./worker.sh";
  o.send = send;
  o.on_line = pool_line;
  o.payload = &seen;
  LC_REQUIRE_OK(lc_jobs_new(&q, g, &o));
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK_OK(lc_jobs_submit_text(q, "block", NULL));
  for (int t = 0; t < 240 && blocked < HOSTS; t++) {
    usleep(250 * 1000);
    pthread_mutex_lock(&seen.mu);
    blocked = seen.job_lines;
    pthread_mutex_unlock(&seen.mu);
  }
  LC_REQUIRE(blocked == HOSTS);
  LC_CHECK(lc_jobs_update(q, "upd1", 500) == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "within 500 ms");
  pthread_mutex_lock(&seen.mu);
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(seen.acks[i][1] == 0);
  pthread_mutex_unlock(&seen.mu);
  LC_REQUIRE((f = fopen(go, "w")) != NULL);
  fclose(f);
  /* the next update waits for every worker's answer to both, in order */
  LC_CHECK_OK(lc_jobs_update(q, "upd2", 60000));
  pthread_mutex_lock(&seen.mu);
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(seen.acks[i][1] == 1 && seen.acks[i][2] == 1);
  pthread_mutex_unlock(&seen.mu);
  LC_CHECK_OK(lc_jobs_close(q));
  LC_CHECK(lc_jobs_wait(q, 60000) == 0);
  while (lc_jobs_next(&j, q, LC_JOBS_IN_ORDER, 0) == 0)
    answered += j->result != NULL && strcmp(j->result, "ans block") == 0;
  LC_CHECK(answered == HOSTS);
  lc_jobs_free(q);
  unlink(go);
  rmdir(dir);
  LC_CHECK(left_everywhere("worker.sh", 10) == 0);
  lc_group_free(g);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_gpu_slots),      LC_TEST(test_retries),   LC_TEST(test_cancel),
      LC_TEST(test_joblog_resume),  LC_TEST(test_host_loss), LC_TEST(test_host_back_in_queue),
      LC_TEST(test_pool),           LC_TEST(test_returns),   LC_TEST(test_give_up),
      LC_TEST(test_update_timeout),
  };
  char cmd[600];
  int r;
  signal(SIGPIPE, SIG_IGN);
  th_dir();
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/lc-test-jobs-%d", (int)getpid());
  if (mkdir(tmpdir, 0700) < 0 || lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  for (int i = 0; i < HOSTS; i++)
    th_run("link-up %d", i); /* whatever happened */
  lc_engine_free(engine);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmpdir);
  return r;
}
