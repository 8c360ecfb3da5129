/*
 * context.c - a worker's context and its start: the environment (LAZYCLUSTER_*, TF_CONFIG,
 * CUDA_VISIBLE_DEVICES, LAZYCLUSTER_SECRET_FILE), its working directory, its secret and cluster.json
 * (made through the channel by the same command that runs it, never in a command line).
 */
#include "cluster_internal.h"
#include "../hostinfo_internal.h"

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
    lc__buf_printf(b, ",\"port\":%d,\"gpu\":%d}", c->workers[i].info.port,
                   c->workers[i].info.gpu);
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
  if (dir != NULL && ((r = lc__buf_puts(b, "mkdir -p ")) < 0 ||
                      (r = lc__buf_shell_quote(b, dir)) < 0 || (r = lc__buf_puts(b, " && cd ")) < 0 ||
                      (r = lc__buf_shell_quote(b, dir)) < 0 || (r = lc__buf_puts(b, " && ")) < 0))
    return r;
  if ((r = lc__buf_puts(b, "rm -f secret && printf '%s\\n' ")) < 0 ||
      (r = lc__buf_shell_quote(b, c->secret)) < 0 || (r = lc__buf_puts(b, " > secret")) < 0)
    return r;
  return 0;
}

/* Starts worker w: its directory and cluster.json are made by the same command that runs it. */
int lc__worker_spawn(lc_cluster *c, lc__worker *w) {
  lc__buf spec = {0}, js = {0}, full = {0};
  char *cmd = NULL, *q_dir = NULL, *q_json = NULL, *host_env = NULL, *dir_env = NULL;
  char *tf_env = NULL, *secret_env = NULL, e[5][64], label[32];
  const char *more[11];
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
  secret_env = lc__sprintf("LAZYCLUSTER_SECRET_FILE=%s/secret", w->workdir);
  more[nmore++] = secret_env;
  cluster_json(c, &js, w);
  /* made before the command, in a subshell of umask 077: the directory (0700), the secret and
   * cluster.json (0600); then the command runs there */
  if (host_env == NULL || dir_env == NULL || tf_env == NULL || secret_env == NULL ||
      (env = lc__cluster_env(c, more, nmore)) == NULL || lc_shell_quote(&q_dir, w->workdir) < 0 ||
      lc_shell_quote(&q_json, js.data) < 0 || lc__cluster_secret_setup(c, &full, w->workdir) < 0 ||
      lc__buf_printf(&full, " && rm -f cluster.json && printf '%%s' %s > cluster.json) && cd %s || "
                            "exit 125",
                     q_json, q_dir) < 0) {
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
  free(secret_env);
  free(env);
  lc__buf_free(&spec);
  lc__buf_free(&js);
  lc__buf_free(&full);
  lc_free(cmd);
  return r;
}
