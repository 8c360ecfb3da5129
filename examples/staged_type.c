/*
 * staged_type.c - a cluster type written against the public headers alone (no lc__ symbol, no
 * private header), usable two ways:
 *
 *   as a plug-in:      lazyclusterctl start --type ./libstaged.so --workers 4 [--type-arg ...]
 *   as a static type:  link this file into a program and call staged_type() (see
 *                      tests/integration/test_staged_type.c, which does both)
 *
 * What it shows a type author:
 *   - staging: prepare_host sends the service binary and a small file to every host that gets a
 *     worker, once per host and all hosts at once; prepare_worker writes one file per worker;
 *   - waiting for the master with the public helpers: the master's on_line hook counts its
 *     announcement (lc_cluster_counter_add), wait_ready waits for it (lc_cluster_counter_wait) and
 *     then for its port on its host (lc_ports_wait_listening, with lc_cluster_master_runtime and
 *     lc_cluster_master_process), so that a master that dies ends the wait at once;
 *   - strings from the library's allocator (lc_asprintf, lc_strdup) and error details
 *     (lc_error_set);
 *   - placement, stopping and restarting one worker, and the DOWN events are the cluster's: this
 *     type needs no code for them (the test drives them through lc_cluster_options and
 *     lc_cluster_worker_*).
 *
 * The service: the master and every worker listen on 127.0.0.1:PORT of their host and answer each
 * connection with one line (`lazyclusterctl serve PORT TEXT`):
 *   master:    "staged master"
 *   worker I:  "TEXT from HOST, worker-I, cuda=DEVICES" (TEXT and HOST from the host's staged
 *              file, worker-I from the worker's own, DEVICES its CUDA_VISIBLE_DEVICES or "none")
 * Workers are reachable from this machine (LC_WORKER_HERE): localhost:PORT here is worker I.
 *
 * Options (--type-arg KEY=VALUE):
 *   serve=PATH  the lazyclusterctl to stage and run (default: the program that loaded the type,
 *               /proc/self/exe); it must run on the hosts (same architecture and libraries)
 *   text=WORD   the first word of every worker's answer (default "staged")
 */
#include <lazycluster.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGED_BIN "lc-serve"   /* the staged binary, in the cluster's directory of a host */
#define STAGED_FILE "stage.txt" /* the staged text, beside it */
#define STAGED_ROLE "role.txt"  /* a worker's own file, in its directory */
#define STAGED_ANNOUNCE "staged master starting"

typedef struct staged {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *serve; /* the binary to stage and to run the master with */
  char *text;
} staged;

static int master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  staged *t = self->data;
  char *q = NULL;
  (void)c;
  if (lc_shell_quote(&q, t->serve) < 0)
    return -ENOMEM;
  *out = lc_asprintf("echo '" STAGED_ANNOUNCE "'; exec %s serve %d 'staged master'", q, port);
  lc_free(q);
  return *out ? 0 : lc_error_set(-ENOMEM, "staged: out of memory");
}

/* Engine thread: must not block; may only move the counter. */
static void master_line(lc_master_launcher *self, lc_cluster *c, const char *line, size_t len,
                        lc_stream stream) {
  (void)self;
  if (stream == LC_STDOUT && len == strlen(STAGED_ANNOUNCE) &&
      memcmp(line, STAGED_ANNOUNCE, len) == 0)
    lc_cluster_counter_add(c, 1);
}

/* Ready: the master announced itself (its on_line counted it), then its port listens on its
 * host; the master's end ends either wait at once. */
static int master_ready(lc_master_launcher *self, lc_cluster *c, int port, int timeout_ms) {
  int r;
  (void)self;
  if ((r = lc_cluster_counter_wait(c, 1, timeout_ms, NULL)) < 0)
    return r;
  return lc_ports_wait_listening(lc_cluster_master_runtime(c), port, lc_cluster_master_process(c),
                                 timeout_ms);
}

static int worker_command(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          char **out) {
  (void)self;
  (void)c;
  *out = lc_asprintf("echo $$ > pid; exec ../" STAGED_BIN " serve %d "
                     "\"$(cat ../" STAGED_FILE "), $(cat " STAGED_ROLE
                     "), cuda=${CUDA_VISIBLE_DEVICES:-none}\"",
                     w->port);
  return *out ? 0 : lc_error_set(-ENOMEM, "staged: out of memory");
}

/* Once per host: the binary (made executable) and the host's file, into the cluster's directory. */
static int prepare_host(lc_worker_launcher *self, lc_cluster *c, const char *host,
                        const char *workdir, lc_task *task) {
  staged *t = self->data;
  char *bin = lc_asprintf("%s/" STAGED_BIN, workdir);
  char *file = lc_asprintf("%s/" STAGED_FILE, workdir);
  char *text = lc_asprintf("%s from %s", t->text, host);
  int r = -ENOMEM;
  (void)c;
  if (bin != NULL && file != NULL && text != NULL &&
      (r = lc_task_add_send(task, t->serve, bin)) == 0)
    r = lc_task_add_write(task, file, text, strlen(text), 0600);
  lc_free(bin);
  lc_free(file);
  lc_free(text);
  return r;
}

/* Once per worker: its own file, in its directory. */
static int prepare_worker(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          lc_task *task) {
  char *file = lc_asprintf("%s/" STAGED_ROLE, w->workdir);
  char *role = lc_asprintf("worker-%d", w->index);
  int r = -ENOMEM;
  (void)self;
  (void)c;
  if (file != NULL && role != NULL)
    r = lc_task_add_write(task, file, role, strlen(role), 0600);
  lc_free(file);
  lc_free(role);
  return r;
}

static int staged_make(lc_master_launcher **master, lc_worker_launcher **worker,
                       const char *const *args) {
  const char *serve = lc_cluster_type_arg(args, "serve");
  const char *text = lc_cluster_type_arg(args, "text");
  char self_exe[PATH_MAX];
  staged *t;
  *master = NULL;
  *worker = NULL;
  if (serve == NULL) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n <= 0)
      return lc_error_set(-ENOENT, "staged: no serve=PATH given, and /proc/self/exe is "
                                   "unreadable");
    self_exe[n] = '\0';
    serve = self_exe;
  }
  if (access(serve, X_OK) != 0)
    return lc_error_set(-ENOENT, "staged: serve=%s: not an executable file", serve);
  if (text != NULL && (text[0] == '\0' || strpbrk(text, " '\"\\$`\n") != NULL))
    return lc_error_set(-EINVAL, "staged: text=%s: want one plain word", text);
  if ((t = calloc(1, sizeof(*t))) == NULL)
    return lc_error_set(-ENOMEM, "staged: out of memory");
  t->serve = lc_strdup(serve);
  t->text = lc_strdup(text != NULL ? text : "staged");
  if (t->serve == NULL || t->text == NULL) {
    lc_free(t->serve);
    lc_free(t->text);
    free(t);
    return lc_error_set(-ENOMEM, "staged: out of memory");
  }
  t->master.version = LC_MASTER_LAUNCHER_VERSION;
  t->master.data = t;
  t->master.command = master_command;
  t->master.wait_ready = master_ready;
  t->master.type_name = "staged";
  t->master.on_line = master_line;
  t->worker.version = LC_WORKER_LAUNCHER_VERSION;
  t->worker.data = t;
  t->worker.command = worker_command;
  t->worker.mesh = LC_WORKER_HERE;
  t->worker.prepare_host = prepare_host;
  t->worker.prepare_worker = prepare_worker;
  *master = &t->master;
  *worker = &t->worker;
  return 0;
}

static void staged_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  staged *t = master != NULL ? master->data : worker != NULL ? worker->data : NULL;
  if (t == NULL)
    return;
  lc_free(t->serve);
  lc_free(t->text);
  free(t);
}

static const lc_cluster_type staged_type_def = {
    .version = LC_CLUSTER_TYPE_VERSION,
    .name = "staged",
    .make = staged_make,
    .release = staged_release,
};

/* The plug-in's way in: lazyclusterctl calls it with its library's version; a library older than
 * the headers this was built with may lack functions it calls, so it is refused. */
__attribute__((visibility("default"))) const lc_cluster_type *
lc_cluster_type_entry(unsigned int library_version);
const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  if (library_version < LC_VERSION_NUMBER) {
    lc_error_set(-ENOTSUP, "staged: built with lazycluster %u, needs that or newer",
                 (unsigned)LC_VERSION_NUMBER);
    return NULL;
  }
  return &staged_type_def;
}

/* The static way in: a program that links this file. */
const lc_cluster_type *staged_type(void);
const lc_cluster_type *staged_type(void) { return &staged_type_def; }
