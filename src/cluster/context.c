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

/* A JSON string value: "key":"value", escaped. */
static int json_str(lc__buf *b, const char *key, const char *value) {
  int r;
  if ((r = lc__buf_printf(b, "\"%s\":", key)) < 0)
    return r;
  return lc__json_append_string(b, value);
}

/*
 * The cluster-wide part of every worker's context, the same for all of them, as the file
 * LC__CONTEXT_FILE in each host's working directory holds it: line 1 is TF_CONFIG's "cluster"
 * object, line 2 cluster.json's "workers" array (every string JSON-escaped, so neither holds a
 * newline). A worker's setup text puts its own part around them (worker_setup).
 */
int lc__cluster_context_text(lc_cluster *c, lc__buf *b) {
  lc__buf_printf(b, "{\"master\":[\"localhost:%d\"],\"worker\":[", c->master_port);
  for (size_t i = 0; i < c->nworkers; i++)
    lc__buf_printf(b, "%s\"localhost:%d\"", i ? "," : "", c->workers[i].info.port);
  lc__buf_puts(b, "]}\n[");
  for (size_t i = 0; i < c->nworkers; i++) {
    lc__buf_printf(b, "%s{\"index\":%d,", i ? "," : "", c->workers[i].info.index);
    json_str(b, "host", c->workers[i].host);
    lc__buf_printf(b, ",\"port\":%d,\"gpu\":%d}", c->workers[i].info.port, c->workers[i].info.gpu);
  }
  return lc__buf_puts(b, "]\n");
}

/* cluster.json up to its "workers" (this worker's own part): every string value escaped (host
 * names and paths are the user's); it holds the secret, so the file is 0600 like the secret's. */
static int json_head(lc_cluster *c, lc__buf *b, const lc__worker *w) {
  lc__buf_printf(b, "{\"master\":{\"addr\":\"localhost\",\"port\":%d,", c->master_port);
  json_str(b, "host", lc_runtime_name(c->master_rt));
  lc__buf_printf(b, "},\"worker_index\":%d,\"worker_count\":%d,", w->info.index, w->info.count);
  json_str(b, "host", w->host);
  lc__buf_printf(b, ",\"port\":%d,\"gpu\":%d,", w->info.port, w->info.gpu);
  json_str(b, "workdir", w->workdir);
  lc__buf_puts(b, ",");
  json_str(b, "secret", c->secret);
  return lc__buf_puts(b, ",\"workers\":");
}

/*
 * Worker w's setup text (sh, through the channel): TF_CONFIG from the host's context file with
 * its own task around it, then, in a subshell of umask 077, its directory (0700), the secret and
 * cluster.json (0600: its own part, the file's workers, its TF_CONFIG), then into the directory.
 * Its own part only: the text does not grow with the cluster. A missing context file is named.
 */
static int worker_setup(lc_cluster *c, const lc__worker *w, lc__buf *b) {
  lc__buf head = {0};
  const char *slash = strrchr(w->workdir, '/');
  char *dir = lc__sprintf("%.*s", slash ? (int)(slash - w->workdir) : 1, slash ? w->workdir : ".");
  int r = dir == NULL ? -ENOMEM : 0;

  if (r == 0)
    r = json_head(c, &head, w);
  if (r >= 0 && (r = lc__buf_puts(b, "lc_ctx=")) >= 0 && (r = lc__buf_shell_quote(b, dir)) >= 0)
    r = lc__buf_printf(
        b,
        "/" LC__CONTEXT_FILE "\n"
        "if [ ! -r \"$lc_ctx\" ]; then printf 'lazycluster: %%s: the cluster'\\''s context is "
        "not there (it is written before the workers of the host start)\\n' \"$lc_ctx\" >&2; "
        "exit 125; fi\n"
        "lc_tf=$(sed -n 1p \"$lc_ctx\") && lc_workers=$(sed -n 2p \"$lc_ctx\") || exit 125\n"
        "TF_CONFIG='{\"cluster\":'\"$lc_tf\"',\"task\":{\"type\":\"worker\",\"index\":%d}}'\n"
        "export TF_CONFIG\n",
        w->info.index);
  if (r >= 0)
    r = lc__cluster_secret_setup(c, b, w->workdir);
  if (r >= 0 && (r = lc__buf_puts(b, " && rm -f cluster.json && printf '%s%s%s%s}\\n' ")) >= 0 &&
      (r = lc__buf_shell_quote(b, head.data)) >= 0 &&
      (r = lc__buf_puts(
           b, " \"$lc_workers\" ',\"tf_config\":' \"$TF_CONFIG\" > cluster.json) && cd ")) >= 0 &&
      (r = lc__buf_shell_quote(b, w->workdir)) >= 0)
    r = lc__buf_puts(b, " || exit 125");
  free(dir);
  lc__buf_free(&head);
  return r;
}

/* FNV-1a: whether a host has this context already (never 0, which means "nothing sent"). */
static uint64_t context_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h | 1;
}

void lc__cluster_context_forget(lc_cluster *c, lc_runtime *rt) {
  size_t i = lc__cluster_host_index(c, rt);
  if (i < c->nctx_sent)
    c->ctx_sent[i] = 0;
}

/*
 * One pass of lc__cluster_context_send: writes data [len] (gzip's format when unpacked is not 0:
 * that many bytes unpacked) on the hosts of the cluster's workers (only's alone, when not NULL)
 * that want it (want[i] 1: not this content yet; 2: gzip could not run there, plain text
 * only); want[i] becomes 0 where it was written, 2 where gzip could not run. Returns 0 when every
 * host either has it or wants it plain next.
 */
static int context_pass(lc_cluster *c, const lc__worker *only, unsigned char *want,
                        const char *data, size_t len, size_t unpacked, uint64_t h) {
  size_t ng = lc_group_count(c->group), n = 0, written = 0;
  lc_runtime **rts = lc__calloc(ng + 1, sizeof(*rts));
  lc_task **tasks = lc__calloc(ng + 1, sizeof(*tasks));
  size_t *at = lc__calloc(ng + 1, sizeof(*at));
  unsigned char *listed = lc__calloc(ng + 1, 1); /* host i is in at[]: once per host */
  lc_group_report *rep = NULL;
  int r = 0;

  if (rts == NULL || tasks == NULL || at == NULL || listed == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  for (size_t k = 0; k < (only ? 1 : c->nworkers) && r == 0; k++) {
    const lc__worker *w = only ? only : &c->workers[k];
    size_t i = w->rt != NULL ? lc__cluster_host_index(c, w->rt) : (size_t)-1;
    const char *wd = NULL;
    char *path = NULL;
    if (i >= ng || listed[i] || want[i] == 0 || (unpacked && want[i] != 1))
      continue;
    if ((r = lc_runtime_workdir(&wd, w->rt)) < 0)
      break;
    if ((path = lc__sprintf("%s/" LC__CONTEXT_FILE, wd)) == NULL ||
        (r = lc_task_new(&tasks[n], "context")) < 0 ||
        (r = unpacked ? lc__task_add_write_gz_borrowed(tasks[n], path, data, len, unpacked, 0600)
                      : lc__task_add_write_borrowed(tasks[n], path, data, len, 0600)) < 0)
      r = r < 0 ? r : lc__error_set(-ENOMEM, "out of memory");
    free(path);
    rts[n] = w->rt;
    listed[i] = 1;
    at[n++] = i;
  }
  if (r < 0 || n == 0 ||
      (r = lc__group_run_tasks(&rep, c->group, rts, (const lc_task *const *)tasks, n, NULL, NULL)) <
          0)
    goto out;
  for (size_t k = 0; k < n; k++) {
    int e = lc_group_report_error(rep, k);
    if (e == 0) {
      c->ctx_sent[at[k]] = h;
      want[at[k]] = 0;
      written++;
      continue;
    }
    if (e == -ENOEXEC && unpacked) {
      want[at[k]] = 2;
      continue;
    }
    if (r == 0)
      r = lc__error_set(e,
                        "cluster: writing the cluster's context (%s in the working directory) "
                        "on %s failed: %s",
                        LC__CONTEXT_FILE, lc_group_report_host(rep, k),
                        lc_group_report_message(rep, k));
  }
  if (r == 0 && written > 0)
    lc__cluster_note(c, "the cluster's context (%zu bytes%s) written on %zu host%s",
                     unpacked ? unpacked : len, unpacked ? ", sent in gzip's format" : "",
                     written, written == 1 ? "" : "s");
  if (r == 0 && written < n)
    lc__cluster_note(c, "gzip cannot run on %zu host%s: the context goes there unpacked",
                     n - written, n - written == 1 ? "" : "s");
out:
  lc_group_report_free(rep);
  for (size_t k = 0; tasks != NULL && k <= n && k < ng + 1; k++)
    lc_task_free(tasks[k]);
  free(tasks);
  free(rts);
  free(at);
  free(listed);
  return r;
}

/*
 * Writes the cluster's context file (lc__cluster_context_text; 0600, a temporary file renamed
 * over it) on the hosts of the cluster's workers (only's alone, when not NULL) that do not have
 * this content yet: once per host and change, all hosts at once, before workers start there. A
 * context larger than LC__CONTEXT_GZ_MIN is packed once here and unpacked by each host's gzip
 * (a tenth of the bytes and packets for thousands of workers); a host where gzip cannot run
 * gets the plain text in a second pass.
 */
int lc__cluster_context_send(lc_cluster *c, const lc__worker *only) {
  size_t ng = lc_group_count(c->group);
  lc__buf text = {0}, gz = {0};
  unsigned char *want = NULL;
  uint64_t h;
  int r = 0;

  if (c->nworkers == 0)
    return 0;
  if (ng > c->nctx_sent) {
    uint64_t *v = lc__realloc(c->ctx_sent, ng * sizeof(*v));
    if (v == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    memset(v + c->nctx_sent, 0, (ng - c->nctx_sent) * sizeof(*v));
    c->ctx_sent = v;
    c->nctx_sent = ng;
  }
  if (lc__cluster_context_text(c, &text) < 0 || (want = lc__calloc(ng + 1, 1)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  h = context_hash(text.data, text.len);
  for (size_t k = 0; k < (only ? 1 : c->nworkers); k++) {
    const lc__worker *w = only ? only : &c->workers[k];
    size_t i = w->rt != NULL ? lc__cluster_host_index(c, w->rt) : (size_t)-1;
    if (i < ng && c->ctx_sent[i] != h && lc_runtime_is_connected(w->rt))
      want[i] = 1;
  }
  /* packed only where that saves bytes; zlib failing otherwise (-EIO) sends it plain */
  if (text.len > LC__CONTEXT_GZ_MIN && lc__buf_gzip(&gz, text.data, text.len) == -ENOMEM) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if (gz.len > 0 && gz.len < text.len)
    r = context_pass(c, only, want, gz.data, gz.len, text.len, h);
  if (r == 0)
    r = context_pass(c, only, want, text.data, text.len, 0, h);
out:
  free(want);
  lc__buf_free(&gz);
  lc__buf_free(&text); /* after the tasks: they borrowed it */
  return r;
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
  char *own[4];   /* the environment entries made here */
  char e[6][160]; /* [4]: CUDA_VISIBLE_DEVICES, [5]: CUDA_DEVICE_ORDER or "" */
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
  for (int i = 0; i < 4; i++)
    x->more[nmore++] = x->e[i];
  x->more[nmore++] = "LAZYCLUSTER_MASTER_ADDR=localhost";
  x->own[0] = lc__sprintf("LAZYCLUSTER_HOST=%s", w->host);
  x->own[1] = lc__sprintf("LAZYCLUSTER_WORKDIR=%s", w->workdir);
  for (int i = 0; i < 2; i++)
    x->more[nmore++] = x->own[i];
  if (w->info.gpu >= 0) {
    lc__runtime_gpu_env(w->rt, w->info.gpu, x->e[4], sizeof(x->e[4]), x->e[5], sizeof(x->e[5]));
    x->more[nmore++] = x->e[4];
    if (x->e[5][0] != '\0')
      x->more[nmore++] = x->e[5];
  }
  x->own[2] = lc__sprintf("LAZYCLUSTER_SECRET_FILE=%s/secret", w->workdir);
  x->more[nmore++] = x->own[2];
  /* TF_CONFIG comes from the host's context file, in the setup text (after these) */
  if (x->own[0] == NULL || x->own[1] == NULL || x->own[2] == NULL ||
      (x->env = lc__cluster_env(c, x->more, nmore)) == NULL || worker_setup(c, w, &x->setup) < 0)
    r = lc__error_set(-ENOMEM, "out of memory");
  x->eo.env = (const char *const *)x->env;
  x->eo.on_line = lc__cluster_on_line;
  x->eo.payload = w->out;
  snprintf(x->label, sizeof(x->label), "worker-%d", w->info.index);
  x->eo.label = x->label;
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
