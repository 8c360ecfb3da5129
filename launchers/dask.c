/*
 * dask.c - the `dask` cluster type: a real Dask scheduler (`dask scheduler`) as the master and Dask
 * workers (`dask worker`, each with its nanny port from the ranges), all on 127.0.0.1 and meeting
 * through the tunnels (the worker mesh lets workers fetch data from each other). Ready when the
 * scheduler has logged every worker's registration. Workers start with the scheduler (they retry
 * it until it answers). Options: scheduler_args=..., worker_args=..., nthreads=N.
 *
 * The type's start limits (DASK_MASTER_TIMEOUT_MS, DASK_WORKER_TIMEOUT_MS) replace the library's
 * 3 s and 30 s unless the caller sets its own. Measured with `lazyclusterctl start --type dask
 * --workers 16` on 4 test hosts of one 2-CPU machine (shared with other work, load 7-18), 9
 * starts: the scheduler was up 2.6-4.4 s after the command started (importing Dask while the 16
 * early workers import it on the same CPUs), all 16 workers 4.1-6.8 s after that. The limits,
 * 30 s and 60 s, are about 7x and 9x the worst of those: a start that has not succeeded by then
 * is broken, and one that is merely slow must not fail.
 */
#include "launchers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DASK_CONNECT_TIMEOUT_S 30 /* distributed.comm.timeouts.connect, Dask's default */
#define DASK_MASTER_TIMEOUT_MS 30000
#define DASK_WORKER_TIMEOUT_MS 60000

/*
 * `dask scheduler` / `dask worker` where the host's Dask has them, else the older dask-scheduler /
 * dask-worker (which, where both exist, print a deprecation warning at every start). The `dask`
 * command came with Dask 2022.10.0, the release whose distributed (pinned to the same version)
 * added those subcommands; the test is the shell's own lookup, no process and no round trip.
 */
#define DASK_COMMAND(sub)                                                                          \
  "if command -v dask >/dev/null 2>&1; then set -- dask " sub "; else set -- dask-" sub "; fi\n"
static const char scheduler_cli[] = DASK_COMMAND("scheduler");
static const char worker_cli[] = DASK_COMMAND("worker");

typedef struct dask_type {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *scheduler_args;
  char *worker_args;
  int nthreads;
} dask_type;

static int master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  dask_type *t = self->data;
  /* readiness: the scheduler logs "Register worker <WorkerState ...>" for each worker it takes */
  lc__cluster_count_master_lines(c, "Register worker", "Remove worker");
  /* --dashboard-address: its HTTP server would otherwise listen on every interface */
  *out = lc__sprintf("%sexec \"$@\" --host 127.0.0.1 --port %d --no-dashboard "
                     "--dashboard-address 127.0.0.1:0 %s",
                     scheduler_cli, port, t->scheduler_args ? t->scheduler_args : "");
  return *out ? 0 : lc__error_set(-ENOMEM, "out of memory");
}

/*
 * Workers start early, while the scheduler starts, and a nanny's first call to the scheduler gives
 * up after Dask's connect timeout (30 s by default): a scheduler slower than that to come up (a
 * busy machine, a slow preload) would take down workers the cluster still waits for. Their
 * connect timeout is therefore the master's timeout plus Dask's default, unless the host's
 * environment sets one.
 */
static int worker_command(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          char **out) {
  dask_type *t = self->data;
  int connect_s = (lc__cluster_master_timeout_ms(c) + 999) / 1000 + DASK_CONNECT_TIMEOUT_S;
  *out = lc__sprintf("%sDASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="
                     "\"${DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT:-%ds}\" "
                     "exec \"$@\" tcp://127.0.0.1:%d --host 127.0.0.1 --worker-port %d "
                     "--nanny-port %d --no-dashboard --dashboard-address 127.0.0.1:0 --nthreads %d "
                     "--memory-limit 0 "
                     "--name worker-%d %s",
                     worker_cli, connect_s, w->master_port, w->port, w->aux_port, t->nthreads,
                     w->index, t->worker_args ? t->worker_args : "");
  return *out ? 0 : lc__error_set(-ENOMEM, "out of memory");
}

/* Asks the scheduler through a real Dask client (for a scheduler whose log says nothing). */
static int ask_scheduler(lc_cluster *c, int timeout_ms) {
  lc_runtime *rt = lc__cluster_master_runtime(c);
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  char cmd[2048];
  int r;
  /* the Python that runs the scheduler has Dask; a python3 first in PATH may not */
  snprintf(cmd, sizeof(cmd),
           "s=$(command -v dask || command -v dask-scheduler); "
           "py=$(sed -n '1s/^#! *//p' \"$s\" 2>/dev/null); "
           "for p in $py python3 /usr/bin/python3; do \"$p\" -c 'import distributed' "
           "2>/dev/null && break; done; "
           "exec \"$p\" -c 'import sys, distributed\n"
           "c = distributed.Client(\"tcp://127.0.0.1:%d\", timeout=%d)\n"
           "c.wait_for_workers(%zu, timeout=%d)\n"
           "print(len(c.scheduler_info()[\"workers\"]))'",
           lc_cluster_master_port(c), timeout_ms / 1000 + 1, lc_cluster_worker_count(c),
           timeout_ms / 1000 + 1);
  eo.timeout_ms = timeout_ms + 10000;
  if ((r = lc_runtime_exec(&res, rt, cmd, &eo)) < 0)
    return r;
  return res.exit_status == 0 ? 0 : -ETIMEDOUT;
}

/*
 * Ready when the scheduler has registered every worker: its log lines, which arrive anyway, are
 * counted (no Python client to start). A scheduler that logged no registration at all (its
 * logging turned down) is asked through a client before giving up.
 */
static int wait_ready(lc_worker_launcher *self, lc_cluster *c, int n, int timeout_ms) {
  int seen = 0, r;
  (void)self;
  (void)n;
  r = lc__cluster_wait_count(c, (long)lc_cluster_worker_count(c), timeout_ms, &seen);
  if (r == -ETIMEDOUT && !seen)
    r = ask_scheduler(c, 10000);
  if (r == -ETIMEDOUT)
    return lc__error_set(-ETIMEDOUT, "the Dask scheduler did not report %zu workers within "
                                     "%.1f s",
                         lc_cluster_worker_count(c), timeout_ms / 1000.0);
  return r;
}

static int dask_make(lc_master_launcher **master, lc_worker_launcher **worker,
                     const char *const *args) {
  dask_type *t = lc__calloc(1, sizeof(*t));
  const char *nt = lc__type_arg(args, "nthreads");
  *master = NULL;
  *worker = NULL;
  if (t == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  t->nthreads = nt ? atoi(nt) : 1;
  if (t->nthreads < 1) {
    free(t);
    return lc__error_set(-EINVAL, "dask: nthreads=%s: want a number, 1 or more", nt);
  }
  t->scheduler_args = lc__strdup(lc__type_arg(args, "scheduler_args"));
  t->worker_args = lc__strdup(lc__type_arg(args, "worker_args"));
  lc__launchers_init(&t->master, &t->worker, t, "dask", master_command, worker_command);
  t->master.timeout_ms = DASK_MASTER_TIMEOUT_MS;
  t->worker.timeout_ms = DASK_WORKER_TIMEOUT_MS;
  t->worker.wait_ready = wait_ready;
  t->worker.mesh = LC_WORKER_MESH;
  t->worker.aux_port = 1;
  t->worker.early = 1; /* a Dask worker retries the scheduler until it answers */
  *master = &t->master;
  *worker = &t->worker;
  return 0;
}

static void dask_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  dask_type *t = lc__launchers_data(master, worker);
  if (t == NULL)
    return;
  free(t->scheduler_args);
  free(t->worker_args);
  free(t);
}

const lc_cluster_type lc__dask_type = {
    .version = LC_CLUSTER_TYPE_VERSION,
    .name = "dask",
    .make = dask_make,
    .release = dask_release,
};
