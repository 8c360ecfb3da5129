/*
 * dask.c - the `dask` cluster type: a real Dask scheduler (`dask scheduler`) as the master and Dask
 * workers (`dask worker`, each with its nanny port from the ranges), all on 127.0.0.1 and meeting
 * through the tunnels (the worker mesh lets workers fetch data from each other). Ready when the
 * scheduler has logged every worker's registration. Workers start with the scheduler (they retry
 * it until it answers). Options: scheduler_args=..., worker_args=..., nthreads=N.
 *
 * The type's start limits (DASK_MASTER_TIMEOUT_MS, DASK_WORKER_TIMEOUT_MS) replace the library's
 * 3 s and 30 s unless the caller sets its own. They are about 7x and 9x the slowest starts
 * measured (docs/benchmarks.md, M5): a start that has not succeeded by then is broken, and one
 * that is merely slow must not fail.
 *
 * Written on the public API alone (<lazycluster.h>, no lc__ symbol, no private header: the
 * dask_public_api test checks it): the built-in types are the proof that two structs make a type.
 * Readiness: the master's line hook counts the scheduler's "Register worker" (+1) and "Remove
 * worker" (-1) lines with the cluster's counter, and wait_ready waits for the count.
 */
#include <lazycluster.h>

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
  (void)c;
  /* --dashboard-address: its HTTP server would otherwise listen on every interface */
  *out = lc_asprintf("%sexec \"$@\" --host 127.0.0.1 --port %d --no-dashboard "
                     "--dashboard-address 127.0.0.1:0 %s",
                     scheduler_cli, port, t->scheduler_args ? t->scheduler_args : "");
  return *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
}

/* The scheduler logs "Register worker <WorkerState ...>" for each worker it takes and "Remove
 * worker" for each it loses: the cluster's counter follows them (engine thread: no blocking). */
static void master_on_line(lc_master_launcher *self, lc_cluster *c, const char *line, size_t len,
                           lc_stream stream) {
  (void)self;
  (void)len;
  (void)stream;
  if (strstr(line, "Register worker") != NULL)
    lc_cluster_counter_add(c, 1);
  else if (strstr(line, "Remove worker") != NULL)
    lc_cluster_counter_add(c, -1);
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
  int connect_s = (lc_cluster_master_timeout_ms(c) + 999) / 1000 + DASK_CONNECT_TIMEOUT_S;
  *out = lc_asprintf("%sDASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="
                     "\"${DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT:-%ds}\" "
                     "exec \"$@\" tcp://127.0.0.1:%d --host 127.0.0.1 --worker-port %d "
                     "--nanny-port %d --no-dashboard --dashboard-address 127.0.0.1:0 --nthreads %d "
                     "--memory-limit 0 --local-directory \"$LAZYCLUSTER_WORKDIR/dask\" "
                     "--name worker-%d %s",
                     worker_cli, connect_s, w->master_port, w->port, w->aux_port, t->nthreads,
                     w->index, t->worker_args ? t->worker_args : "");
  return *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
}

/* sh text that sets $p to a Python with Dask: the one that runs the scheduler has it; a python3
 * first in PATH may not. */
#define DASK_FIND_PYTHON                                                                           \
  "s=$(command -v dask || command -v dask-scheduler); "                                            \
  "py=$(sed -n '1s/^#! *//p' \"$s\" 2>/dev/null); "                                                \
  "for p in $py python3 /usr/bin/python3; do \"$p\" -c 'import distributed' "                      \
  "2>/dev/null && break; done; "

/* Asks the scheduler through a real Dask client whether it has n workers (for a scheduler whose
 * log says nothing). */
static int ask_scheduler(lc_cluster *c, int n, int timeout_ms) {
  lc_runtime *rt = lc_cluster_master_runtime(c);
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  char cmd[2048];
  int r;
  /* the Python that runs the scheduler has Dask; a python3 first in PATH may not */
  snprintf(cmd, sizeof(cmd),
           DASK_FIND_PYTHON "exec \"$p\" -c 'import sys, distributed\n"
                            "c = distributed.Client(\"tcp://127.0.0.1:%d\", timeout=%d)\n"
                            "c.wait_for_workers(%d, timeout=%d)\n"
                            "print(len(c.scheduler_info()[\"workers\"]))'",
           lc_cluster_master_port(c), timeout_ms / 1000 + 1, n, timeout_ms / 1000 + 1);
  eo.timeout_ms = timeout_ms + 10000;
  if ((r = lc_runtime_exec(&res, rt, cmd, &eo)) < 0)
    return r;
  return res.exit_status == 0 ? 0 : -ETIMEDOUT;
}

/*
 * Ready when the scheduler has registered n workers, every worker of the cluster that runs now:
 * its log lines, which arrive anyway, are counted (no Python client to start). A scheduler that
 * logged no registration at all (its logging turned down) is asked through a client before
 * giving up.
 */
static int wait_ready(lc_worker_launcher *self, lc_cluster *c, int n, int timeout_ms) {
  long changes = 0;
  int r;
  (void)self;
  r = lc_cluster_counter_wait(c, n, timeout_ms, &changes);
  if (r == -ETIMEDOUT && changes == 0)
    r = ask_scheduler(c, n, 10000);
  if (r == -ETIMEDOUT)
    return lc_error_set(-ETIMEDOUT, "the Dask scheduler did not report %d workers within %.1f s", n,
                        timeout_ms / 1000.0);
  return r;
}

/*
 * lc_cluster_scale's graceful way: the scheduler retires the workers by name (worker-N), which
 * moves the data they hold to the others first and closes them (with their nannies); the cluster
 * stops what is left of them afterwards.
 */
static int retire(lc_worker_launcher *self, lc_cluster *c, const size_t *workers, size_t n,
                  int timeout_ms) {
  lc_runtime *rt = lc_cluster_master_runtime(c);
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  char names[4096] = "", cmd[8192];
  size_t used = 0;
  int r;
  (void)self;
  if (rt == NULL || n == 0)
    return 0;
  for (size_t k = 0; k < n && used + 32 < sizeof(names); k++)
    used += (size_t)snprintf(names + used, sizeof(names) - used, "%s\"worker-%zu\"", k ? "," : "",
                             workers[k]);
  snprintf(cmd, sizeof(cmd),
           DASK_FIND_PYTHON "exec \"$p\" -c 'import distributed\n"
                            "c = distributed.Client(\"tcp://127.0.0.1:%d\", timeout=%d)\n"
                            "r = c.retire_workers(names=[%s], close_workers=True)\n"
                            "print(\"retired\", len(r))'",
           lc_cluster_master_port(c), timeout_ms / 1000 + 1, names);
  eo.timeout_ms = timeout_ms;
  if ((r = lc_runtime_exec(&res, rt, cmd, &eo)) < 0)
    return r;
  if (res.exit_status != 0)
    return lc_error_set(LC_EREMOTE,
                        "dask: the scheduler did not retire %s (the client exited "
                        "with status %d)",
                        names, res.exit_status);
  return 0;
}

static void dask_free(dask_type *t) {
  if (t == NULL)
    return;
  lc_free(t->scheduler_args);
  lc_free(t->worker_args);
  free(t);
}

static int dask_make(lc_master_launcher **master, lc_worker_launcher **worker,
                     const char *const *args) {
  dask_type *t = calloc(1, sizeof(*t));
  const char *nt = lc_cluster_type_arg(args, "nthreads");
  const char *sa = lc_cluster_type_arg(args, "scheduler_args");
  const char *wa = lc_cluster_type_arg(args, "worker_args");
  *master = NULL;
  *worker = NULL;
  if (t == NULL)
    return lc_error_set(-ENOMEM, "out of memory");
  t->nthreads = nt ? atoi(nt) : 1;
  if (t->nthreads < 1) {
    free(t);
    return lc_error_set(-EINVAL, "dask: nthreads=%s: want a number, 1 or more", nt);
  }
  t->scheduler_args = lc_strdup(sa);
  t->worker_args = lc_strdup(wa);
  if ((sa != NULL && t->scheduler_args == NULL) || (wa != NULL && t->worker_args == NULL)) {
    dask_free(t);
    return lc_error_set(-ENOMEM, "out of memory");
  }
  t->master.version = LC_MASTER_LAUNCHER_VERSION;
  t->master.data = t;
  t->master.command = master_command;
  t->master.timeout_ms = DASK_MASTER_TIMEOUT_MS;
  t->master.type_name = "dask";
  t->master.on_line = master_on_line;
  t->worker.version = LC_WORKER_LAUNCHER_VERSION;
  t->worker.data = t;
  t->worker.command = worker_command;
  t->worker.timeout_ms = DASK_WORKER_TIMEOUT_MS;
  t->worker.wait_ready = wait_ready;
  t->worker.mesh = LC_WORKER_MESH;
  t->worker.aux_port = 1;
  t->worker.early = 1; /* a Dask worker retries the scheduler until it answers */
  t->worker.retire = retire;
  *master = &t->master;
  *worker = &t->worker;
  return 0;
}

static void dask_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  dask_free(master != NULL ? master->data : worker != NULL ? worker->data : NULL);
}

/* The built-in type's entry, found by name through lc_cluster_type_find. */
extern const lc_cluster_type lc__dask_type;
const lc_cluster_type lc__dask_type = {
    .version = LC_CLUSTER_TYPE_VERSION,
    .name = "dask",
    .make = dask_make,
    .release = dask_release,
};
