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
 *
 * Security (docs/security.md): unless lc_cluster_is_insecure, every Dask connection of the cluster
 * is mutual TLS (tls://, Dask's --tls-ca-file, --tls-cert, --tls-key, encryption required), with
 * a CA made for the cluster and three certificates it issues: the scheduler's, the workers' and
 * the client's. A scheduler or worker refuses a peer without a certificate of that CA, so another
 * user of a host who reaches a port of the cluster through its tunnels cannot use it. The files
 * go 0600 into the cluster's directory on each host (the master's in master_command, the workers'
 * by prepare_host) and the client's into lc_cluster_client_dir, never through a command line;
 * their names carry a tag of the cluster's CA so that two clusters on one group keep theirs
 * apart. The client env names them (DASK_DISTRIBUTED__COMM__TLS__*) with a tls:// address.
 * Debian 12's Dask (2022.12) does not check host names in its TLS (it expects a per-cluster CA
 * and IP addresses): the certificates name localhost and 127.0.0.1 anyway.
 */
#include <lazycluster.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* What every Dask process and client needs to demand TLS of its peers. */
#define DASK_TLS_ENV "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True"
#define ENV_CA "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"
#define ENV_CERT "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"
#define ENV_KEY "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"

/* One cluster's TLS material: the CA and its three certificates, and the tag in file names. */
typedef struct dask_tls {
  const lc_cluster *c;
  char tag[17];
  lc_tls_ca *ca;
  lc_tls_cert *scheduler, *worker, *client;
  struct dask_tls *next;
} dask_tls;

typedef struct dask_type {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *scheduler_args;
  char *worker_args;
  int nthreads;
  pthread_mutex_t mu; /* tls: clusters of one launcher pair may start on different threads */
  dask_tls *tls;      /* one per cluster that used these launchers */
} dask_type;

static void tls_free(dask_tls *s) {
  if (s == NULL)
    return;
  lc_tls_cert_free(s->scheduler);
  lc_tls_cert_free(s->worker);
  lc_tls_cert_free(s->client);
  lc_tls_ca_free(s->ca);
  free(s);
}

/* Writes text to path on this machine, 0600, atomically (a new file renamed over the old; a
 * symlink planted at path is replaced, not followed). */
static int write_local(const char *path, const char *text) {
  char *tmp = lc_asprintf("%s.new", path);
  size_t len = strlen(text), done = 0;
  int fd = -1, r = 0;
  if (tmp == NULL)
    return lc_error_set(-ENOMEM, "out of memory");
  unlink(tmp);
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
    r = lc_error_set(-errno, "dask: cannot write %s: %s", tmp, strerror(errno));
    goto out;
  }
  while (done < len) {
    ssize_t n = write(fd, text + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      r = lc_error_set(n < 0 ? -errno : -EIO, "dask: cannot write %s: %s", tmp,
                       n < 0 ? strerror(errno) : "short write");
      goto out;
    }
    done += (size_t)n;
  }
  if (close(fd) < 0 || rename(tmp, path) < 0) {
    fd = -1;
    r = lc_error_set(-errno, "dask: cannot write %s: %s", path, strerror(errno));
    goto out;
  }
  fd = -1;
out:
  if (fd >= 0)
    close(fd);
  if (r < 0)
    unlink(tmp);
  lc_free(tmp);
  return r;
}

/* The path of the client's file NAME in the cluster's client directory. */
static char *client_path(const lc_cluster *c, const char *name) {
  return lc_asprintf("%s/dask-%s", lc_cluster_client_dir(c), name);
}

/* The client's files (CA, certificate, key: 0600) into the cluster's client directory, and the
 * client env that names them. */
static int tls_client_files(lc_cluster *c, dask_tls *s) {
  char *ca = client_path(c, "ca.pem"), *cert = client_path(c, "client.pem");
  char *key = client_path(c, "client-key.pem");
  int r;
  if (ca == NULL || cert == NULL || key == NULL) {
    r = lc_error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((r = write_local(ca, lc_tls_ca_pem(s->ca))) < 0 ||
      (r = write_local(cert, lc_tls_cert_pem(s->client))) < 0 ||
      (r = write_local(key, lc_tls_cert_key_pem(s->client))) < 0 ||
      (r = lc_cluster_set_client_env(c, ENV_CA, ca)) < 0 ||
      (r = lc_cluster_set_client_env(c, ENV_CERT, cert)) < 0 ||
      (r = lc_cluster_set_client_env(c, ENV_KEY, key)) < 0 ||
      (r = lc_cluster_set_client_env(c, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION", "True")) < 0)
    goto out;
out:
  lc_free(ca);
  lc_free(cert);
  lc_free(key);
  return r;
}

/* A tag for file names from the CA's certificate (FNV-1a of its PEM, which holds a random key
 * and serial): two clusters' files never share a name. */
static void tls_tag(dask_tls *s) {
  unsigned long long h = 14695981039346656037ULL;
  for (const char *p = lc_tls_ca_pem(s->ca); *p != '\0'; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  snprintf(s->tag, sizeof(s->tag), "%016llx", h);
}

/*
 * The TLS material of cluster c, made at its first use (and the client's files written): one CA
 * per cluster. A cluster is known by its pointer and by the client env it got from us (a new
 * cluster at a freed one's address has none, and gets new material). *out is borrowed from t.
 */
static int tls_for(dask_tls **out, dask_type *t, lc_cluster *c) {
  dask_tls *s, **at;
  int r = 0;
  *out = NULL;
  pthread_mutex_lock(&t->mu);
  for (at = &t->tls; *at != NULL && (*at)->c != c; at = &(*at)->next)
    ;
  if ((s = *at) != NULL) {
    int known = 0;
    for (const char *const *e = lc_cluster_client_env(c); *e != NULL && !known; e++)
      known = strncmp(*e, ENV_CA "=", sizeof(ENV_CA)) == 0;
    if (known)
      goto out;
    *at = s->next; /* another cluster's, gone */
    tls_free(s);
  }
  if ((s = calloc(1, sizeof(*s))) == NULL) {
    r = lc_error_set(-ENOMEM, "out of memory");
    goto out;
  }
  s->c = c;
  if ((r = lc_tls_ca_new(&s->ca, "dask")) < 0 ||
      (r = lc_tls_cert_new(&s->scheduler, s->ca, "dask-scheduler")) < 0 ||
      (r = lc_tls_cert_new(&s->worker, s->ca, "dask-worker")) < 0 ||
      (r = lc_tls_cert_new(&s->client, s->ca, "dask-client")) < 0)
    goto out;
  tls_tag(s);
  if ((r = tls_client_files(c, s)) < 0)
    goto out;
  s->next = t->tls;
  t->tls = s;
out:
  if (r < 0)
    tls_free(s);
  else
    *out = s;
  pthread_mutex_unlock(&t->mu);
  return r;
}

/* The three file names of one role ("scheduler", "worker") in a host's directory dir, each
 * shell-quoted when quote is set. */
typedef struct tls_paths {
  char *ca, *cert, *key;
} tls_paths;

static void paths_free(tls_paths *p) {
  lc_free(p->ca);
  lc_free(p->cert);
  lc_free(p->key);
}

static int paths_make(tls_paths *p, const dask_tls *s, const char *dir, const char *role,
                      int quote) {
  char *raw[3], **dst[3] = {&p->ca, &p->cert, &p->key};
  int r = 0;
  memset(p, 0, sizeof(*p));
  raw[0] = lc_asprintf("%s/dask-%s-ca.pem", dir, s->tag);
  raw[1] = lc_asprintf("%s/dask-%s-%s.pem", dir, s->tag, role);
  raw[2] = lc_asprintf("%s/dask-%s-%s-key.pem", dir, s->tag, role);
  for (int i = 0; i < 3; i++) {
    if (r == 0 && raw[i] == NULL)
      r = lc_error_set(-ENOMEM, "out of memory");
    if (r == 0 && quote)
      r = lc_shell_quote(dst[i], raw[i]);
    if (r == 0 && !quote) {
      *dst[i] = raw[i];
      raw[i] = NULL;
    }
    lc_free(raw[i]);
  }
  if (r < 0)
    paths_free(p);
  return r;
}

/* The scheduler's files in its host's directory (again at every start of the master: the
 * directory of a host that was lost is a new one). The quoted paths in *q. */
static int tls_master_files(dask_tls *s, lc_runtime *rt, tls_paths *q) {
  tls_paths p;
  const char *wd = NULL;
  int r;
  memset(q, 0, sizeof(*q));
  if ((r = lc_runtime_workdir(&wd, rt)) < 0 || (r = paths_make(&p, s, wd, "scheduler", 0)) < 0)
    return r;
  if ((r = lc_runtime_write_file(rt, p.ca, lc_tls_ca_pem(s->ca), strlen(lc_tls_ca_pem(s->ca)), 0600,
                                 30000)) < 0 ||
      (r = lc_runtime_write_file(rt, p.cert, lc_tls_cert_pem(s->scheduler),
                                 strlen(lc_tls_cert_pem(s->scheduler)), 0600, 30000)) < 0 ||
      (r = lc_runtime_write_file(rt, p.key, lc_tls_cert_key_pem(s->scheduler),
                                 strlen(lc_tls_cert_key_pem(s->scheduler)), 0600, 30000)) < 0)
    goto out;
  r = paths_make(q, s, wd, "scheduler", 1);
out:
  paths_free(&p);
  return r;
}

/*
 * The scheduler on 127.0.0.1:port; with TLS (the default) its files are written first and the
 * client env gets its tls:// address, else plain tcp:// (insecure).
 */
static int master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  dask_type *t = self->data;
  dask_tls *s = NULL;
  tls_paths q = {0};
  char addr[64];
  int insecure = lc_cluster_is_insecure(c), r;
  *out = NULL;
  if (!insecure && ((r = tls_for(&s, t, c)) < 0 ||
                    (r = tls_master_files(s, lc_cluster_master_runtime(c), &q)) < 0))
    return r;
  snprintf(addr, sizeof(addr), "%s://127.0.0.1:%d", insecure ? "tcp" : "tls", port);
  if ((r = lc_cluster_set_client_env(c, "DASK_SCHEDULER_ADDRESS", addr)) < 0)
    goto out;
  /* --dashboard-address: its HTTP server would otherwise listen on every interface */
  if (insecure)
    *out = lc_asprintf("%sexec \"$@\" --host 127.0.0.1 --port %d --no-dashboard "
                       "--dashboard-address 127.0.0.1:0 %s",
                       scheduler_cli, port, t->scheduler_args ? t->scheduler_args : "");
  else
    *out = lc_asprintf("%sexport " DASK_TLS_ENV "\nexec \"$@\" --host 127.0.0.1 --port %d "
                       "--protocol tls --tls-ca-file %s --tls-cert %s --tls-key %s --no-dashboard "
                       "--dashboard-address 127.0.0.1:0 %s",
                       scheduler_cli, port, q.ca, q.cert, q.key,
                       t->scheduler_args ? t->scheduler_args : "");
  r = *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
out:
  paths_free(&q);
  return r;
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
  lc_runtime *rt = lc_group_find(lc_cluster_group(c), w->host);
  const char *wd = NULL;
  dask_tls *s = NULL;
  tls_paths q = {0};
  int r;
  *out = NULL;
  if (lc_cluster_is_insecure(c)) {
    *out = lc_asprintf("%sDASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="
                       "\"${DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT:-%ds}\" "
                       "exec \"$@\" tcp://127.0.0.1:%d --host 127.0.0.1 --worker-port %d "
                       "--nanny-port %d --no-dashboard --dashboard-address 127.0.0.1:0 "
                       "--nthreads %d --memory-limit 0 --local-directory "
                       "\"$LAZYCLUSTER_WORKDIR/dask\" --name worker-%d %s",
                       worker_cli, connect_s, w->master_port, w->port, w->aux_port, t->nthreads,
                       w->index, t->worker_args ? t->worker_args : "");
    return *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
  }
  /* the files prepare_host wrote into the cluster's directory on the worker's host */
  if (rt == NULL)
    return lc_error_set(-ENOENT, "dask: worker-%d's host %s is not in the cluster's group",
                        w->index, w->host);
  if ((r = tls_for(&s, t, c)) < 0 || (r = lc_runtime_workdir(&wd, rt)) < 0 ||
      (r = paths_make(&q, s, wd, "worker", 1)) < 0)
    return r;
  *out = lc_asprintf("%sexport DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="
                     "\"${DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT:-%ds}\" " DASK_TLS_ENV "\n"
                     "exec \"$@\" tls://127.0.0.1:%d --host 127.0.0.1 --worker-port %d "
                     "--nanny-port %d --tls-ca-file %s --tls-cert %s --tls-key %s --no-dashboard "
                     "--dashboard-address 127.0.0.1:0 --nthreads %d --memory-limit 0 "
                     "--local-directory \"$LAZYCLUSTER_WORKDIR/dask\" --name worker-%d %s",
                     worker_cli, connect_s, w->master_port, w->port, w->aux_port, q.ca, q.cert,
                     q.key, t->nthreads, w->index, t->worker_args ? t->worker_args : "");
  r = *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
  paths_free(&q);
  return r;
}

/* Staging of a worker host (TLS only): the CA and the workers' certificate and key, 0600, into
 * the cluster's directory there. */
static int prepare_host(lc_worker_launcher *self, lc_cluster *c, const char *host,
                        const char *workdir, lc_task *task) {
  dask_tls *s = NULL;
  tls_paths p = {0};
  int r;
  (void)host;
  if (lc_cluster_is_insecure(c))
    return 0;
  if ((r = tls_for(&s, self->data, c)) < 0 || (r = paths_make(&p, s, workdir, "worker", 0)) < 0)
    return r;
  if ((r = lc_task_add_write(task, p.ca, lc_tls_ca_pem(s->ca), strlen(lc_tls_ca_pem(s->ca)),
                             0600)) < 0 ||
      (r = lc_task_add_write(task, p.cert, lc_tls_cert_pem(s->worker),
                             strlen(lc_tls_cert_pem(s->worker)), 0600)) < 0)
    goto out;
  r = lc_task_add_write(task, p.key, lc_tls_cert_key_pem(s->worker),
                        strlen(lc_tls_cert_key_pem(s->worker)), 0600);
out:
  paths_free(&p);
  return r;
}

/* sh text that sets $p to a Python with Dask: the one that runs the scheduler has it; a python3
 * first in PATH may not. */
#define DASK_FIND_PYTHON                                                                           \
  "s=$(command -v dask || command -v dask-scheduler); "                                            \
  "py=$(sed -n '1s/^#! *//p' \"$s\" 2>/dev/null); "                                                \
  "for p in $py python3 /usr/bin/python3; do \"$p\" -c 'import distributed' "                      \
  "2>/dev/null && break; done; "

/*
 * sh text for a Dask client on the master's host (ask_scheduler, retire): with TLS, the
 * scheduler's certificate and key as the client's (in Dask's config, from the environment) and
 * encryption required; *scheme "tls" or "tcp". *out is lc_free'd.
 */
static int client_setup(char **out, const char **scheme, dask_type *t, lc_cluster *c) {
  dask_tls *s = NULL;
  tls_paths q = {0};
  const char *wd = NULL;
  int r;
  *out = NULL;
  *scheme = "tcp";
  if (lc_cluster_is_insecure(c))
    return (*out = lc_asprintf("%s", "")) ? 0 : lc_error_set(-ENOMEM, "out of memory");
  if ((r = tls_for(&s, t, c)) < 0 ||
      (r = lc_runtime_workdir(&wd, lc_cluster_master_runtime(c))) < 0 ||
      (r = paths_make(&q, s, wd, "scheduler", 1)) < 0)
    return r;
  *scheme = "tls";
  *out = lc_asprintf("export " ENV_CA "=%s " ENV_CERT "=%s " ENV_KEY "=%s " DASK_TLS_ENV "\n", q.ca,
                     q.cert, q.key);
  paths_free(&q);
  return *out ? 0 : lc_error_set(-ENOMEM, "out of memory");
}

/* Asks the scheduler through a real Dask client whether it has n workers (for a scheduler whose
 * log says nothing). */
static int ask_scheduler(dask_type *t, lc_cluster *c, int n, int timeout_ms) {
  lc_runtime *rt = lc_cluster_master_runtime(c);
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  const char *scheme;
  char *setup = NULL, *cmd = NULL;
  int r;
  if ((r = client_setup(&setup, &scheme, t, c)) < 0)
    return r;
  /* the Python that runs the scheduler has Dask; a python3 first in PATH may not */
  cmd = lc_asprintf("%s" DASK_FIND_PYTHON "exec \"$p\" -c 'import sys, distributed\n"
                    "c = distributed.Client(\"%s://127.0.0.1:%d\", timeout=%d)\n"
                    "c.wait_for_workers(%d, timeout=%d)\n"
                    "print(len(c.scheduler_info()[\"workers\"]))'",
                    setup, scheme, lc_cluster_master_port(c), timeout_ms / 1000 + 1, n,
                    timeout_ms / 1000 + 1);
  if (cmd == NULL) {
    r = lc_error_set(-ENOMEM, "out of memory");
    goto out;
  }
  eo.timeout_ms = timeout_ms + 10000;
  if ((r = lc_runtime_exec(&res, rt, cmd, &eo)) == 0)
    r = res.exit_status == 0 ? 0 : -ETIMEDOUT;
out:
  lc_free(setup);
  lc_free(cmd);
  return r;
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
  r = lc_cluster_counter_wait(c, n, timeout_ms, &changes);
  if (r == -ETIMEDOUT && changes == 0)
    r = ask_scheduler(self->data, c, n, 10000);
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
  const char *scheme;
  char names[4096] = "", *setup = NULL, *cmd = NULL;
  size_t used = 0;
  int r;
  if (rt == NULL || n == 0)
    return 0;
  for (size_t k = 0; k < n && used + 32 < sizeof(names); k++)
    used += (size_t)snprintf(names + used, sizeof(names) - used, "%s\"worker-%zu\"", k ? "," : "",
                             workers[k]);
  if ((r = client_setup(&setup, &scheme, self->data, c)) < 0)
    return r;
  cmd = lc_asprintf("%s" DASK_FIND_PYTHON "exec \"$p\" -c 'import distributed\n"
                    "c = distributed.Client(\"%s://127.0.0.1:%d\", timeout=%d)\n"
                    "r = c.retire_workers(names=[%s], close_workers=True)\n"
                    "print(\"retired\", len(r))'",
                    setup, scheme, lc_cluster_master_port(c), timeout_ms / 1000 + 1, names);
  if (cmd == NULL) {
    r = lc_error_set(-ENOMEM, "out of memory");
    goto out;
  }
  eo.timeout_ms = timeout_ms;
  if ((r = lc_runtime_exec(&res, rt, cmd, &eo)) < 0)
    goto out;
  if (res.exit_status != 0)
    r = lc_error_set(LC_EREMOTE,
                     "dask: the scheduler did not retire %s (the client exited with status %d)",
                     names, res.exit_status);
out:
  lc_free(setup);
  lc_free(cmd);
  return r;
}

static void dask_free(dask_type *t) {
  if (t == NULL)
    return;
  while (t->tls != NULL) {
    dask_tls *next = t->tls->next;
    tls_free(t->tls);
    t->tls = next;
  }
  pthread_mutex_destroy(&t->mu);
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
  pthread_mutex_init(&t->mu, NULL);
  t->nthreads = nt ? atoi(nt) : 1;
  if (t->nthreads < 1) {
    dask_free(t);
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
  t->worker.prepare_host = prepare_host;
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
