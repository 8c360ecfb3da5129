/*
 * plugin_type.c - a cluster type as a plug-in: a shared object that lazyclusterctl loads with
 *
 *   lazyclusterctl start --type ./libmytype.so [--type-arg KEY=VALUE]... --workers N
 *
 * It exports one function, the entry point
 *
 *   const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);
 *
 * which returns the type, a static struct: a name, `make` (builds the two launcher structs from
 * the --type-arg options) and `release`. The loader passes its own version number and reads the
 * struct's version before anything else. Built here as libmytype.so (examples/CMakeLists.txt: a
 * MODULE library that links nothing of ours).
 *
 * The type, "greeter": the master and every worker listen on their port (127.0.0.1 of their
 * host) and answer each connection with one line, then close it:
 *   master:    "GREETING master on HOST, lazycluster VERSION"
 *   worker I:  "GREETING worker-I of N on HOST"
 * The master's line is staged as a file in the master's working directory on its host before the
 * master starts (lc_runtime_write_file), checked there together with the listener's binary
 * (lc_runtime_exec), and read by the master's command. The listener is `lazyclusterctl serve
 * PORT TEXT`, the tiny service the built-in `command` type uses by default. The master is
 * awaited with the public helpers (lc_ports_wait_listening on lc_cluster_master_runtime and
 * lc_cluster_master_process); the workers' readiness is the library's default (their ports
 * accept while they live).
 *
 * Options (--type-arg KEY=VALUE):
 *   greeting=TEXT  the first word of every answer (default "hello")
 *   serve=PATH     the lazyclusterctl to run on the hosts; default: the lazyclusterctl that loaded
 *                  this plug-in, which must then exist at the same path on every host
 *   mesh=1         every worker's port is also reachable on every host (and here)
 *
 * Rules a plug-in lives by:
 *   - it may call the public API (lc_shell_quote, lc_runtime_exec, lc_error_set, ...), and links
 *     nothing of ours: the symbols come from the program that loads it (lazyclusterctl exports
 *     them), so plug-in and program share one library;
 *   - a failure sets its detail with lc_error_set, which the program prints;
 *   - the command strings it returns are freed with lc_free, which is free(): use malloc;
 *   - the library stays loaded for the life of the process;
 *   - the structs are versioned (LC_*_VERSION), only ever grow, and the library reads a field
 *     only when the version you set has it; zero the structs (calloc here), since a zero field
 *     means the default.
 */
#include <lazycluster.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one exported symbol (the project builds with hidden visibility by default). */
#define PLUGIN_EXPORT __attribute__((visibility("default")))
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);

typedef struct greeter {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *serve_path; /* the lazyclusterctl to run, as given */
  char *serve;      /* the same, shell-quoted (lc_shell_quote: free with lc_free) */
  char *greeting;   /* as given */
} greeter;

/* The staged answer of the master, in the master's working directory. */
#define MASTER_TEXT_FILE "greeter-master.txt"

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *format(const char *fmt, ...) {
  va_list ap;
  char *s = NULL;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* "exec SERVE serve PORT TEXT": the listener replaces the shell, so stopping the process group
 * stops it. text is a shell word, already quoted or expanded by the shell. */
static int serve_command(greeter *t, int port, const char *text, char **out) {
  *out = format("exec %s serve %d %s", t->serve, port, text);
  return *out != NULL ? 0 : lc_error_set(-ENOMEM, "greeter: out of memory");
}

/* Ready: its port listens on its host, while it runs (the public helper a type's wait_ready
 * uses; a master that dies ends the wait at once). */
static int master_ready(lc_master_launcher *self, lc_cluster *cluster, int port, int timeout_ms) {
  (void)self;
  return lc_ports_wait_listening(lc_cluster_master_runtime(cluster), port,
                                 lc_cluster_master_process(cluster), timeout_ms);
}

/* Stages the master's answer on its host, checks it and the listener there, then serves it. */
static int master_command(lc_master_launcher *self, lc_cluster *cluster, int port, char **out) {
  greeter *t = self->data;
  lc_runtime *rt = lc_cluster_master_runtime(cluster);
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {0};
  const char *wd = NULL;
  char *text = NULL, *path = NULL, *check = NULL;
  int r = -ENOMEM;

  *out = NULL;
  if (rt == NULL) {
    r = lc_error_set(-ENOENT, "greeter: the master's host is not in the group");
    goto out;
  }
  if ((r = lc_runtime_workdir(&wd, rt)) < 0)
    goto out;
  text = format("%s master on %s, lazycluster %s", t->greeting, lc_runtime_name(rt), lc_version());
  path = format("%s/" MASTER_TEXT_FILE, wd);
  check = format("test -x %s && test -s " MASTER_TEXT_FILE, t->serve);
  if (text == NULL || path == NULL || check == NULL) {
    r = lc_error_set(-ENOMEM, "greeter: out of memory");
    goto out;
  }
  if ((r = lc_runtime_write_file(rt, path, text, strlen(text), 0644, 30000)) < 0)
    goto out;
  eo.cwd = wd;
  if ((r = lc_runtime_exec(&res, rt, check, &eo)) < 0)
    goto out;
  if (res.exit_status != 0) {
    r = lc_error_set(-ENOENT,
                     "greeter: %s: %s is not an executable there (give --type-arg "
                     "serve=PATH)",
                     lc_runtime_name(rt), t->serve_path);
    goto out;
  }
  r = serve_command(t, port, "\"$(cat " MASTER_TEXT_FILE ")\"", out);
out:
  free(text);
  free(path);
  free(check);
  return r;
}

static int worker_command(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                          char **out) {
  greeter *t = self->data;
  char *text = format("%s worker-%d of %d on %s", t->greeting, w->index, w->count, w->host);
  char *q = NULL;
  int r;
  (void)cluster;
  *out = NULL;
  if (text == NULL || lc_shell_quote(&q, text) < 0)
    r = lc_error_set(-ENOMEM, "greeter: out of memory");
  else
    r = serve_command(t, w->port, q, out);
  free(text);
  lc_free(q);
  return r;
}

static void greeter_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  greeter *t = master != NULL ? master->data : worker != NULL ? worker->data : NULL;
  if (t == NULL)
    return;
  lc_free(t->serve);
  free(t->serve_path);
  free(t->greeting);
  free(t);
}

static int greeter_make(lc_master_launcher **master, lc_worker_launcher **worker,
                        const char *const *args) {
  const char *greeting = "hello", *serve = NULL;
  char self[4096];
  int mesh = 0;
  greeter *t;

  *master = NULL;
  *worker = NULL;
  for (; args != NULL && *args != NULL; args++) {
    const char *eq = strchr(*args, '='), *v = eq != NULL ? eq + 1 : "";
    size_t k = eq != NULL ? (size_t)(eq - *args) : strlen(*args);
    if (k == 8 && strncmp(*args, "greeting", k) == 0 && *v != '\0') {
      greeting = v;
    } else if (k == 5 && strncmp(*args, "serve", k) == 0 && *v != '\0') {
      serve = v;
    } else if (k == 4 && strncmp(*args, "mesh", k) == 0 &&
               (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)) {
      mesh = *v == '1';
    } else {
      return lc_error_set(-EINVAL,
                          "greeter: --type-arg %s: unknown, or a bad value (greeting=TEXT, "
                          "serve=PATH, mesh=0|1)",
                          *args);
    }
  }
  if (serve == NULL) {
    /* the program that loaded us, when it is lazyclusterctl (it has `serve`) */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const char *base;
    self[n > 0 ? n : 0] = '\0';
    base = strrchr(self, '/') != NULL ? strrchr(self, '/') + 1 : self;
    if (strcmp(base, "lazyclusterctl") != 0)
      return lc_error_set(-EINVAL,
                          "greeter: loaded by %s, not lazyclusterctl: give --type-arg "
                          "serve=PATH",
                          self[0] ? self : "an unknown program");
    serve = self;
  }
  if ((t = calloc(1, sizeof(*t))) == NULL || (t->serve_path = strdup(serve)) == NULL ||
      lc_shell_quote(&t->serve, serve) < 0 || (t->greeting = strdup(greeting)) == NULL) {
    if (t != NULL) {
      lc_free(t->serve);
      free(t->serve_path);
    }
    free(t);
    return lc_error_set(-ENOMEM, "greeter: out of memory");
  }
  t->master.version = LC_MASTER_LAUNCHER_VERSION;
  t->master.data = t;
  t->master.command = master_command;
  t->master.wait_ready = master_ready;
  /* the type's start limits (0: the library's 3 s and 30 s, plenty for a listener that starts
   * in milliseconds; a type whose master imports a Python framework states more); the user's
   * --master-timeout and --timeout still win. type_name names the type in a timeout's message. */
  t->master.timeout_ms = 0;
  t->master.type_name = "greeter";
  t->worker.timeout_ms = 0;
  t->worker.version = LC_WORKER_LAUNCHER_VERSION;
  t->worker.data = t;
  t->worker.command = worker_command;
  t->worker.wait_ready = NULL; /* ready when every worker's port accepts */
  t->worker.mesh = mesh;
  *master = &t->master;
  *worker = &t->worker;
  return 0;
}

static const lc_cluster_type greeter_type = {
    .version = LC_CLUSTER_TYPE_VERSION,
    .name = "greeter",
    .make = greeter_make,
    .release = greeter_release,
};

const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  /* built against these headers: refuse a library older than them */
  return library_version >= LC_VERSION_NUMBER ? &greeter_type : NULL;
}
