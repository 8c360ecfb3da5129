/*
 * context.c - a worker's context and its start: the environment (LAZYCLUSTER_*, TF_CONFIG,
 * CUDA_VISIBLE_DEVICES, LAZYCLUSTER_SECRET_FILE), its working directory, its secret and
 * cluster.json (made through the channel by the same command that runs it, never in a command
 * line).
 */
#include "../hostinfo_internal.h"
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char **lc__cluster_env(lc_cluster *c, const char *const *more, size_t nmore) {
  char **v = lc__calloc(c->nenv + nmore + 1, sizeof(*v));
  if (v == NULL)
    return NULL;
  for (size_t i = 0; i < c->nenv; i++)
    v[i] = c->env[i];
  for (size_t i = 0; i < nmore; i++)
    v[c->nenv + i] = (char *)more[i];
  return v;
}

/* TF_CONFIG-style spec of the whole cluster, and this worker's task in it. */
static int cluster_spec(lc_cluster *c, lc__buf *b, int index) {
  lc__buf_printf(b, "{\"cluster\":{\"master\":[\"localhost:%d\"],\"worker\":[", c->master_port);
  for (size_t i = 0; i < c->nworkers; i++)
    lc__buf_printf(b, "%s\"localhost:%d\"", i ? "," : "", c->workers[i].info.port);
  return lc__buf_printf(b, "]},\"task\":{\"type\":\"worker\",\"index\":%d}}", index);
}

/* A JSON string value: "key":"value", escaped. */
static int json_str(lc__buf *b, const char *key, const char *value) {
  int r;
  if ((r = lc__buf_printf(b, "\"%s\":", key)) < 0)
    return r;
  return lc__json_append_string(b, value);
}

/* cluster.json: every string value escaped (host names and paths are the user's); it holds the
 * secret, so it is written 0600 like the secret's own file. */
static int cluster_json(lc_cluster *c, lc__buf *b, const lc__worker *w) {
  lc__buf_printf(b, "{\"master\":{\"addr\":\"localhost\",\"port\":%d,", c->master_port);
  json_str(b, "host", lc_runtime_name(c->master_rt));
  lc__buf_printf(b, "},\"worker_index\":%d,\"worker_count\":%d,", w->info.index, w->info.count);
  json_str(b, "host", w->host);
  lc__buf_printf(b, ",\"port\":%d,\"gpu\":%d,", w->info.port, w->info.gpu);
  json_str(b, "workdir", w->workdir);
  lc__buf_puts(b, ",");
  json_str(b, "secret", c->secret);
  lc__buf_puts(b, ",\"workers\":[");
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__buf_printf(b, "%s{\"index\":%d,", i ? "," : "", c->workers[i].info.index);
    json_str(b, "host", c->workers[i].host);
    lc__buf_printf(b, ",\"port\":%d,\"gpu\":%d}", c->workers[i].info.port, c->workers[i].info.gpu);
  }
  lc__buf_puts(b, "],\"tf_config\":");
  cluster_spec(c, b, w->info.index);
  return lc__buf_puts(b, "}\n");
}

int lc__cluster_secret_setup(lc_cluster *c, lc__buf *b, const char *dir) {
  int r;
  /* a subshell: the umask of the files, whatever umask the process itself is given */
  if ((r = lc__buf_puts(b, "(umask 077 && ")) < 0)
    return r;
  if (dir != NULL &&
      ((r = lc__buf_puts(b, "mkdir -p ")) < 0 || (r = lc__buf_shell_quote(b, dir)) < 0 ||
       (r = lc__buf_puts(b, " && cd ")) < 0 || (r = lc__buf_shell_quote(b, dir)) < 0 ||
       (r = lc__buf_puts(b, " && ")) < 0))
    return r;
  if ((r = lc__buf_puts(b, "rm -f secret && printf '%s\\n' ")) < 0 ||
      (r = lc__buf_shell_quote(b, c->secret)) < 0 || (r = lc__buf_puts(b, " > secret")) < 0)
    return r;
  return 0;
}

/* Everything a worker's start sends to its host: its command, environment and setup text. */
typedef struct wctx {
  char *cmd;
  char **env;
  lc__buf setup;
  char *own[4]; /* the environment entries made here */
  char e[5][64];
  const char *more[11];
  lc_exec_options eo;
  char label[32];
} wctx;

static void wctx_free(wctx *x) {
  lc_free(x->cmd);
  free(x->env);
  lc__buf_free(&x->setup);
  for (size_t i = 0; i < sizeof(x->own) / sizeof(x->own[0]); i++)
    free(x->own[i]);
}

/* Fills x with worker w's start: the launcher's command, the environment, and the setup text that
 * makes its directory, secret and cluster.json before the command runs. */
static int wctx_make(lc_cluster *c, lc__worker *w, wctx *x) {
  lc__buf spec = {0}, js = {0};
  char *q_dir = NULL, *q_json = NULL;
  size_t nmore = 0;
  int r;

  memset(x, 0, sizeof(*x));
  x->eo = (lc_exec_options)LC_EXEC_OPTIONS_INIT;
  if ((r = c->w->command(c->w, c, &w->info, &x->cmd)) < 0)
    return r;
  snprintf(x->e[0], sizeof(x->e[0]), "LAZYCLUSTER_MASTER_PORT=%d", c->master_port);
  snprintf(x->e[1], sizeof(x->e[1]), "LAZYCLUSTER_WORKER_INDEX=%d", w->info.index);
  snprintf(x->e[2], sizeof(x->e[2]), "LAZYCLUSTER_WORKER_COUNT=%d", w->info.count);
  snprintf(x->e[3], sizeof(x->e[3]), "LAZYCLUSTER_WORKER_PORT=%d", w->info.port);
  snprintf(x->e[4], sizeof(x->e[4]), "CUDA_VISIBLE_DEVICES=%d", w->info.gpu);
  for (int i = 0; i < 4; i++)
    x->more[nmore++] = x->e[i];
  x->more[nmore++] = "LAZYCLUSTER_MASTER_ADDR=localhost";
  cluster_spec(c, &spec, w->info.index);
  x->own[0] = lc__sprintf("LAZYCLUSTER_HOST=%s", w->host);
  x->own[1] = lc__sprintf("LAZYCLUSTER_WORKDIR=%s", w->workdir);
  x->own[2] = lc__sprintf("TF_CONFIG=%s", spec.data ? spec.data : "{}");
  for (int i = 0; i < 3; i++)
    x->more[nmore++] = x->own[i];
  if (w->info.gpu >= 0) {
    x->more[nmore++] = x->e[4];
    x->more[nmore++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
  }
  x->own[3] = lc__sprintf("LAZYCLUSTER_SECRET_FILE=%s/secret", w->workdir);
  x->more[nmore++] = x->own[3];
  cluster_json(c, &js, w);
  /* made before the command, in a subshell of umask 077: the directory (0700), the secret and
   * cluster.json (0600); then the command runs there */
  if (x->own[0] == NULL || x->own[1] == NULL || x->own[2] == NULL || x->own[3] == NULL ||
      (x->env = lc__cluster_env(c, x->more, nmore)) == NULL ||
      lc_shell_quote(&q_dir, w->workdir) < 0 || lc_shell_quote(&q_json, js.data) < 0 ||
      lc__cluster_secret_setup(c, &x->setup, w->workdir) < 0 ||
      lc__buf_printf(&x->setup,
                     " && rm -f cluster.json && printf '%%s' %s > cluster.json) && cd %s || "
                     "exit 125",
                     q_json, q_dir) < 0)
    r = lc__error_set(-ENOMEM, "out of memory");
  x->eo.env = (const char *const *)x->env;
  x->eo.on_line = lc__cluster_on_line;
  x->eo.payload = w->out;
  snprintf(x->label, sizeof(x->label), "worker-%d", w->info.index);
  x->eo.label = x->label;
  lc_free(q_dir);
  lc_free(q_json);
  lc__buf_free(&spec);
  lc__buf_free(&js);
  return r;
}

int lc__worker_compose(lc_cluster *c, lc__worker *w, lc__buf *line, lc__buf *script,
                       lc__buf *setup) {
  wctx x;
  lc__err err = {0};
  int r;
  if ((r = wctx_make(c, w, &x)) == 0 &&
      (r = lc__command_compose(line, script, x.cmd, &x.eo, 15, 2000, x.setup.data, NULL, w->host,
                               &err)) < 0)
    lc__err_raise(&err);
  if (r == 0 && setup != NULL && x.setup.data != NULL)
    r = lc__buf_puts(setup, x.setup.data);
  wctx_free(&x);
  return r;
}

/* Starts worker w: its directory and cluster.json are made by the same command that runs it. */
int lc__worker_spawn(lc_cluster *c, lc__worker *w) {
  wctx x;
  int r;
  if ((r = wctx_make(c, w, &x)) < 0)
    goto out;
  /* the directory and cluster.json are made before the command, through the channel */
  if ((r = lc__runtime_spawn_setup(&w->proc, w->rt, x.cmd, &x.eo, x.setup.data)) == 0) {
    w->state = LC_WORKER_STARTING;
    w->started_ms = lc__wall_ms();
    lc__cluster_note(c, "%s starting on port %d%s: %s", w->out->tag, w->info.port,
                     w->info.gpu >= 0 ? " with its GPU" : "", x.cmd);
  }
out:
  wctx_free(&x);
  return r;
}
