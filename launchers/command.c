/*
 * command.c - the `command` cluster type: the master and each worker run a command template.
 * Placeholders {master_port} {worker_port} {aux_port} {worker_index} {worker_count} {gpu} {host}
 * {workdir} are replaced by their values, shell-quoted; {{ and }} are literal braces; any other
 * {name} is an error that quotes it.
 */
#include "launchers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct command_type {
  lc_master_launcher master;
  lc_worker_launcher worker;
  char *master_cmd;
  char *worker_cmd;
} command_type;

/* What lc__template_expand's placeholders stand for: a master's (w NULL) or a worker's. */
typedef struct expand_ctx {
  int master_port;
  const lc_worker_info *w;
  const char *master_host;
} expand_ctx;

static int expand_lookup(lc__buf *out, const char *name, size_t len, void *payload) {
  const expand_ctx *x = payload;
  const lc_worker_info *w = x->w;
  char num[32];
  const char *val = NULL;
#define IS(s) (len == sizeof(s) - 1 && strncmp(name, s, len) == 0)
  if (IS("master_port"))
    snprintf(num, sizeof(num), "%d", x->master_port), val = num;
  else if (w != NULL && IS("worker_port"))
    snprintf(num, sizeof(num), "%d", w->port), val = num;
  else if (w != NULL && IS("aux_port"))
    snprintf(num, sizeof(num), "%d", w->aux_port), val = num;
  else if (w != NULL && IS("worker_index"))
    snprintf(num, sizeof(num), "%d", w->index), val = num;
  else if (w != NULL && IS("worker_count"))
    snprintf(num, sizeof(num), "%d", w->count), val = num;
  else if (w != NULL && IS("gpu"))
    snprintf(num, sizeof(num), "%d", w->gpu), val = num;
  else if (IS("host"))
    val = w != NULL ? w->host : x->master_host;
  else if (w != NULL && IS("workdir"))
    val = w->workdir;
#undef IS
  if (val == NULL)
    return 0;
  return lc__buf_shell_quote(out, val) < 0 ? -ENOMEM : 1;
}

int lc__template_expand(char **out, const char *tmpl, int master_port, const lc_worker_info *w,
                        const char *master_host) {
  lc__buf b = {0};
  expand_ctx x = {.master_port = master_port, .w = w, .master_host = master_host};
  int r;

  *out = NULL;
  r = lc__template_render(&b, tmpl, expand_lookup, &x,
                          w == NULL ? " (a master knows {master_port} and {host})" : NULL);
  if (r < 0) {
    lc__buf_free(&b);
    return r;
  }
  *out = b.data;
  return 0;
}

static int master_command(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  command_type *t = self->data;
  return lc__template_expand(out, t->master_cmd, port, NULL, lc_cluster_master_host(c));
}

static int worker_command(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          char **out) {
  command_type *t = self->data;
  (void)c;
  return lc__template_expand(out, t->worker_cmd, w->master_port, w, NULL);
}

static void command_release(lc_master_launcher *master, lc_worker_launcher *worker);

static int command_make(lc_master_launcher **master, lc_worker_launcher **worker,
                        const char *const *args) {
  command_type *t;
  const char *m = lc__type_arg(args, "master"), *w = lc__type_arg(args, "worker"), *e;
  char *check = NULL;
  lc_worker_info probe = {.host = "h", .workdir = "/w"};
  int r;
  *master = NULL;
  *worker = NULL;
  if (m == NULL || w == NULL)
    return lc__error_set(-EINVAL, "the command type needs a master and a worker command "
                                  "(--master-cmd and --worker-cmd)");
  /* a bad template fails now, not on the first host */
  if ((r = lc__template_expand(&check, m, 1, NULL, "h")) < 0)
    return r;
  lc_free(check);
  if ((r = lc__template_expand(&check, w, 1, &probe, NULL)) < 0)
    return r;
  lc_free(check);
  if ((t = lc__calloc(1, sizeof(*t))) == NULL || (t->master_cmd = lc__strdup(m)) == NULL ||
      (t->worker_cmd = lc__strdup(w)) == NULL) {
    if (t != NULL)
      free(t->master_cmd);
    free(t);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  lc__launchers_init(&t->master, &t->worker, t, "command", master_command, worker_command);
  if ((e = lc__type_arg(args, "expose")) != NULL && strcmp(e, "none") != 0 &&
      strcmp(e, "here") != 0 && strcmp(e, "mesh") != 0) {
    command_release(&t->master, &t->worker);
    return lc__error_set(-EINVAL, "command type: expose=%s: want none, here or mesh", e);
  }
  t->worker.mesh = e == NULL || strcmp(e, "none") == 0 ? 0
                   : strcmp(e, "here") == 0         ? LC_WORKER_HERE
                                                    : LC_WORKER_MESH;
  /* mesh=1, the older spelling */
  if (e == NULL && lc__type_arg(args, "mesh") != NULL && strcmp(lc__type_arg(args, "mesh"), "0"))
    t->worker.mesh = LC_WORKER_MESH;
  *master = &t->master;
  *worker = &t->worker;
  return 0;
}

static void command_release(lc_master_launcher *master, lc_worker_launcher *worker) {
  command_type *t = lc__launchers_data(master, worker);
  if (t == NULL)
    return;
  free(t->master_cmd);
  free(t->worker_cmd);
  free(t);
}

const lc_cluster_type lc__command_type = {
    .version = LC_CLUSTER_TYPE_VERSION,
    .name = "command",
    .make = command_make,
    .release = command_release,
};
