/*
 * plugin_type.c - a cluster type as a plug-in: a shared object that lazyclusterctl loads with
 *
 *   lazyclusterctl start --type ./libmytype.so [--type-arg KEY=VALUE]... --workers N
 *
 * It exports one function, `int lc_cluster_type_v1(lc_cluster_type *out)`, which fills in the
 * type: a name, `make` (builds the two launcher structs from the --type-arg options) and
 * `release`. Built here as libmytype.so (examples/CMakeLists.txt: a MODULE library).
 *
 * The type, "greeter": the master and every worker listen on their port (127.0.0.1 of their
 * host) and answer each connection with one line, then close it:
 *   master:    "GREETING master"
 *   worker I:  "GREETING worker-I of N on HOST"
 * The listener is `lazyclusterctl serve PORT TEXT`, the tiny service the built-in `command` type
 * uses by default. Readiness is the library's default: the port accepts while the process lives.
 *
 * Options (--type-arg KEY=VALUE):
 *   greeting=TEXT  the first word of every answer (default "hello")
 *   serve=PATH     the lazyclusterctl to run on the hosts; default: the lazyclusterctl that loaded
 *                  this plug-in, which must then exist at the same path on every host
 *   mesh=1         every worker's port is also reachable on every host (and here)
 *
 * Rules a plug-in lives by (lazyclusterctl links the library statically and exports none of its
 * symbols):
 *   - it calls no lc_* function: the plug-in would not even load ("undefined symbol"). So it
 *     quotes for the shell itself, and reports a bad option on stderr (a type cannot set the
 *     library's lc_error_last detail);
 *   - the command strings it returns are freed with lc_free, which is free(): use malloc;
 *   - the library stays loaded for the life of the process;
 *   - compile it with the same cluster.h: the structs are versioned (LC_*_VERSION), only ever
 *     grow, and the library reads a field only when the version you set has it; zero the
 *     structs (calloc here), since a zero field means the default.
 */
#include <lazycluster/cluster.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one exported symbol (the project builds with hidden visibility by default). */
#define PLUGIN_EXPORT __attribute__((visibility("default")))
PLUGIN_EXPORT int lc_cluster_type_v1(lc_cluster_type *out);

typedef struct greeter {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *serve;    /* the lazyclusterctl to run, shell-quoted */
  char *greeting; /* as given */
} greeter;

/* Appends s to b, quoted for a POSIX shell: 'it'\''s'. */
static void quote_into(char *b, const char *s) {
  b += strlen(b);
  *b++ = '\'';
  for (; *s != '\0'; s++) {
    if (*s == '\'') {
      memcpy(b, "'\\''", 4);
      b += 4;
    } else {
      *b++ = *s;
    }
  }
  *b++ = '\'';
  *b = '\0';
}

static char *quote(const char *s) {
  char *q = malloc(4 * strlen(s) + 3);
  if (q != NULL) {
    q[0] = '\0';
    quote_into(q, s);
  }
  return q;
}

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

/* "exec SERVE serve PORT 'TEXT'": the listener replaces the shell, so stopping the process
 * group stops it. */
static int serve_command(greeter *t, int port, const char *text, char **out) {
  char *q = quote(text);
  *out = q != NULL ? format("exec %s serve %d %s", t->serve, port, q) : NULL;
  free(q);
  return *out != NULL ? 0 : -ENOMEM;
}

static int master_command(lc_master_launcher *self, lc_cluster *cluster, int port, char **out) {
  greeter *t = self->data;
  char *text = format("%s master", t->greeting);
  int r;
  (void)cluster;
  if (text == NULL)
    return -ENOMEM;
  r = serve_command(t, port, text, out);
  free(text);
  return r;
}

static int worker_command(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                          char **out) {
  greeter *t = self->data;
  char *text = format("%s worker-%d of %d on %s", t->greeting, w->index, w->count, w->host);
  int r;
  (void)cluster;
  if (text == NULL)
    return -ENOMEM;
  r = serve_command(t, w->port, text, out);
  free(text);
  return r;
}

static void greeter_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  greeter *t = master != NULL ? master->data : worker != NULL ? worker->data : NULL;
  if (t == NULL)
    return;
  free(t->serve);
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
      fprintf(stderr,
              "greeter: --type-arg %s: unknown, or a bad value (greeting=TEXT, "
              "serve=PATH, mesh=0|1)\n",
              *args);
      return -EINVAL;
    }
  }
  if (serve == NULL) {
    /* the program that loaded us, when it is lazyclusterctl (it has `serve`) */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const char *base;
    self[n > 0 ? n : 0] = '\0';
    base = strrchr(self, '/') != NULL ? strrchr(self, '/') + 1 : self;
    if (strcmp(base, "lazyclusterctl") != 0) {
      fprintf(stderr, "greeter: loaded by %s, not lazyclusterctl: give --type-arg serve=PATH\n",
              self[0] ? self : "an unknown program");
      return -EINVAL;
    }
    serve = self;
  }
  if ((t = calloc(1, sizeof(*t))) == NULL || (t->serve = quote(serve)) == NULL ||
      (t->greeting = strdup(greeting)) == NULL) {
    if (t != NULL)
      free(t->serve);
    free(t);
    return -ENOMEM;
  }
  t->master.version = LC_MASTER_LAUNCHER_VERSION;
  t->master.data = t;
  t->master.command = master_command;
  t->master.wait_ready = NULL; /* ready when its port accepts */
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

int lc_cluster_type_v1(lc_cluster_type *out) {
  memset(out, 0, sizeof(*out));
  out->version = LC_CLUSTER_TYPE_VERSION;
  out->name = "greeter";
  out->make = greeter_make;
  out->release = greeter_release;
  return 0;
}
