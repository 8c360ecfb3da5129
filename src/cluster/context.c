/*
 * context.c - a worker's context and its start: the environment (LAZYCLUSTER_*, TF_CONFIG,
 * CUDA_VISIBLE_DEVICES), its working directory and cluster.json (made through the channel by the
 * same command that runs it).
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

static int cluster_json(lc_cluster *c, lc__buf *b, const lc__worker *w) {
  lc__buf_printf(b, "{\"master\":{\"addr\":\"localhost\",\"port\":%d,\"host\":\"%s\"},",
                 c->master_port, lc_runtime_name(c->master_rt));
  lc__buf_printf(b,
                 "\"worker_index\":%d,\"worker_count\":%d,\"host\":\"%s\",\"port\":%d,"
                 "\"gpu\":%d,\"workdir\":\"%s\",\"workers\":[",
                 w->info.index, w->info.count, w->host, w->info.port, w->info.gpu, w->workdir);
  for (size_t i = 0; i < c->nworkers; i++)
    lc__buf_printf(b, "%s{\"index\":%d,\"host\":\"%s\",\"port\":%d,\"gpu\":%d}", i ? "," : "",
                   c->workers[i].info.index, c->workers[i].host, c->workers[i].info.port,
                   c->workers[i].info.gpu);
  lc__buf_puts(b, "],\"tf_config\":");
  cluster_spec(c, b, w->info.index);
  return lc__buf_puts(b, "}\n");
}

/* Starts worker w: its directory and cluster.json are made by the same command that runs it. */
int lc__worker_spawn(lc_cluster *c, lc__worker *w) {
  lc__buf spec = {0}, js = {0}, full = {0};
  char *cmd = NULL, *q_dir = NULL, *q_json = NULL, *host_env = NULL, *dir_env = NULL;
  char *tf_env = NULL, e[5][64], label[32];
  const char *more[10];
  char **env = NULL;
  size_t nmore = 0;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;

  if ((r = c->w->command(c->w, c, &w->info, &cmd)) < 0)
    return r;
  snprintf(e[0], sizeof(e[0]), "LAZYCLUSTER_MASTER_PORT=%d", c->master_port);
  snprintf(e[1], sizeof(e[1]), "LAZYCLUSTER_WORKER_INDEX=%d", w->info.index);
  snprintf(e[2], sizeof(e[2]), "LAZYCLUSTER_WORKER_COUNT=%d", w->info.count);
  snprintf(e[3], sizeof(e[3]), "LAZYCLUSTER_WORKER_PORT=%d", w->info.port);
  snprintf(e[4], sizeof(e[4]), "CUDA_VISIBLE_DEVICES=%d", w->info.gpu);
  for (int i = 0; i < 4; i++)
    more[nmore++] = e[i];
  more[nmore++] = "LAZYCLUSTER_MASTER_ADDR=localhost";
  cluster_spec(c, &spec, w->info.index);
  host_env = lc__sprintf("LAZYCLUSTER_HOST=%s", w->host);
  dir_env = lc__sprintf("LAZYCLUSTER_WORKDIR=%s", w->workdir);
  tf_env = lc__sprintf("TF_CONFIG=%s", spec.data ? spec.data : "{}");
  more[nmore++] = host_env;
  more[nmore++] = dir_env;
  more[nmore++] = tf_env;
  if (w->info.gpu >= 0) {
    more[nmore++] = e[4];
    more[nmore++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
  }
  cluster_json(c, &js, w);
  if (host_env == NULL || dir_env == NULL || tf_env == NULL ||
      (env = lc__cluster_env(c, more, nmore)) == NULL || lc_shell_quote(&q_dir, w->workdir) < 0 ||
      lc_shell_quote(&q_json, js.data) < 0 ||
      lc__buf_printf(&full, "mkdir -p %s && cd %s && printf '%%s' %s > cluster.json || exit 125",
                     q_dir, q_dir, q_json) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  eo.env = (const char *const *)env;
  eo.on_line = lc__cluster_on_line;
  eo.payload = w->out;
  snprintf(label, sizeof(label), "worker-%d", w->info.index);
  eo.label = label;
  /* the directory and cluster.json are made before the command, through the channel */
  if ((r = lc__runtime_spawn_setup(&w->proc, w->rt, cmd, &eo, full.data)) == 0) {
    w->state = LC_WORKER_STARTING;
    w->started_ms = lc__wall_ms();
    lc__cluster_note(c, "%s starting on port %d%s: %s", w->out->tag, w->info.port,
                     w->info.gpu >= 0 ? " with its GPU" : "", cmd);
  }
out:
  lc_free(q_dir);
  lc_free(q_json);
  free(host_env);
  free(dir_env);
  free(tf_env);
  free(env);
  lc__buf_free(&spec);
  lc__buf_free(&js);
  lc__buf_free(&full);
  lc_free(cmd);
  return r;
}
