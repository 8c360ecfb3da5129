/*
 * runtime.c - one host, whatever the backend: the blocking public calls, processes and their
 * lifelines, output lines, heartbeats, file transfers and the working directory.
 */
#include "runtime_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ERR_TAIL_MAX 4096
#define FILE_CHUNK (256 * 1024)

void lc_runtime_options_init(lc_runtime_options *opts) {
  lc_runtime_options init = LC_RUNTIME_OPTIONS_INIT;
  *opts = init;
}

void lc_exec_options_init(lc_exec_options *opts) {
  lc_exec_options init = LC_EXEC_OPTIONS_INIT;
  *opts = init;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int runtime_alloc(lc_runtime **out, lc_engine *engine, const char *name,
                         const lc_runtime_options *opts, const lc__backend_ops *ops) {
  lc_runtime *rt;
  *out = NULL;
  if (engine == NULL || name == NULL)
    return lc__error_set(-EINVAL, "runtime: no engine or no host name given");
  if ((rt = lc__calloc(1, sizeof(*rt))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  rt->engine = engine;
  rt->ops = ops;
  if (opts != NULL)
    rt->opts = *opts;
  rt->opts.version = LC_RUNTIME_OPTIONS_VERSION;
  if (rt->opts.connect_timeout_ms <= 0)
    rt->opts.connect_timeout_ms = 10000;
  if (rt->opts.keepalive_timeout_ms <= 0)
    rt->opts.keepalive_timeout_ms = 30000;
  if (rt->opts.heartbeat_timeout_ms <= 0)
    rt->opts.heartbeat_timeout_ms = 15000;
  if (rt->opts.kill_grace_ms <= 0)
    rt->opts.kill_grace_ms = 3000;
  rt->name = lc__strdup(name);
  rt->ssh_config = lc__strdup(rt->opts.ssh_config);
  rt->workdir_root = lc__strdup(rt->opts.workdir_root);
  rt->opts.ssh_config = rt->ssh_config;
  rt->opts.workdir_root = rt->workdir_root;
  pthread_mutex_init(&rt->workdir_mu, NULL);
  if (rt->name == NULL || (opts && opts->ssh_config && !rt->ssh_config) ||
      (opts && opts->workdir_root && !rt->workdir_root)) {
    free(rt->name);
    free(rt->ssh_config);
    free(rt->workdir_root);
    free(rt);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  *out = rt;
  return 0;
}

static void runtime_release(lc_runtime *rt) {
  pthread_mutex_destroy(&rt->workdir_mu);
  free(rt->name);
  free(rt->ssh_config);
  free(rt->workdir_root);
  free(rt->workdir);
  free(rt);
}

static void on_heartbeat(uv_timer_t *t) {
  lc_runtime *rt = t->data;
  for (lc_process *p = rt->procs; p != NULL; p = p->next) {
    if (!p->lifeline || p->finished)
      continue;
    if (lc__buf_puts(&p->in, "h\n") == 0)
      rt->ops->proc_kick(p);
  }
}

void lc__runtime_connected(lc_runtime *rt, const lc__err *err) {
  lc__call *c = rt->call;
  rt->call = NULL;
  if (err == NULL || err->code == 0) {
    uint64_t every = (uint64_t)rt->opts.heartbeat_timeout_ms / 3;
    __atomic_store_n(&rt->connected, 1, __ATOMIC_RELEASE);
    if (!rt->heartbeat_started) {
      uv_timer_init(lc__engine_loop(rt->engine), &rt->heartbeat);
      rt->heartbeat.data = rt;
      uv_timer_start(&rt->heartbeat, on_heartbeat, every, every < 200 ? 200 : every);
      rt->heartbeat_started = 1;
    }
  }
  if (c == NULL)
    return;
  if (err != NULL && err->code < 0)
    c->err = *err;
  lc__call_done(c, err ? err->code : 0);
}

void lc__runtime_lost(lc_runtime *rt, const lc__err *err) {
  (void)err;
  __atomic_store_n(&rt->connected, 0, __ATOMIC_RELEASE);
}

static void connect_fn(lc__call *c) {
  lc_runtime *rt = *(lc_runtime **)(c + 1);
  rt->call = c;
  rt->ops->connect(rt);
}

typedef struct {
  lc__call call;
  lc_runtime *rt;
} rt_call;

static void close_done(lc_runtime *rt) {
  lc__call *c = rt->call;
  rt->call = NULL;
  lc__call_done(c, 0);
}

static void heartbeat_closed(uv_handle_t *h) {
  lc_runtime *rt = h->data;
  rt->ops->close(rt, close_done);
}

static void close_fn(lc__call *c) {
  lc_runtime *rt = ((rt_call *)c)->rt;
  rt->call = c;
  __atomic_store_n(&rt->connected, 0, __ATOMIC_RELEASE);
  /* Forwards stop here; their handles stay valid for lc_forward_free. */
  for (lc_forward *f = rt->forwards; f != NULL; f = f->next) {
    if (f->listener != NULL) {
      f->listener->data = NULL;
      uv_close((uv_handle_t *)f->listener, (uv_close_cb)free);
      f->listener = NULL;
    }
    if (rt->ops->fwd_stop != NULL)
      rt->ops->fwd_stop(f);
    lc__forward_close_relays(f);
    __atomic_store_n(&f->up, 0, __ATOMIC_RELEASE);
    f->rt = NULL;
  }
  rt->forwards = NULL;
  /* Closing a lifeline's channel ends its process group on the host. */
  while (rt->procs != NULL) {
    lc_process *p = rt->procs;
    rt->ops->proc_abort(p);
    if (rt->procs == p) /* a backend that could not close it at once */
      lc__proc_closed(p, NULL);
  }
  if (rt->heartbeat_started)
    uv_close((uv_handle_t *)&rt->heartbeat, heartbeat_closed);
  else
    rt->ops->close(rt, close_done);
}

static int runtime_connect(lc_runtime *rt) {
  rt_call rc = {.rt = rt};
  return lc__engine_run(rt->engine, &rc.call, connect_fn);
}

static void runtime_close(lc_runtime *rt) {
  rt_call rc = {.rt = rt};
  lc__engine_run(rt->engine, &rc.call, close_fn);
}

int lc_runtime_new_ssh(lc_runtime **out, lc_engine *engine, const char *host,
                       const lc_runtime_options *opts) {
  return lc__runtime_new_ssh_via(out, engine, host, NULL, opts);
}

int lc__runtime_new_ssh_via(lc_runtime **out, lc_engine *engine, const char *host, const char *via,
                            const lc_runtime_options *opts) {
  lc_runtime *rt = NULL;
  lc__err err = {0};
  int r;

  if ((r = runtime_alloc(&rt, engine, host, opts, &lc__ssh_ops)) < 0)
    return r;
  if ((r = lc__ssh_prepare(rt, host, via, &err)) < 0) {
    r = lc__err_raise(&err);
    lc_runtime_free(rt->jump);
    runtime_release(rt);
    return r;
  }
  if ((r = runtime_connect(rt)) < 0) {
    lc__err saved = {.code = r};
    snprintf(saved.msg, sizeof(saved.msg), "%s", lc_error_last());
    runtime_close(rt);
    lc_runtime_free(rt->jump);
    runtime_release(rt);
    return lc__err_raise(&saved);
  }
  *out = rt;
  return 0;
}

int lc_runtime_new_local(lc_runtime **out, lc_engine *engine, const lc_runtime_options *opts) {
  lc_runtime *rt = NULL;
  int r;
  if ((r = runtime_alloc(&rt, engine, "localhost", opts, &lc__local_ops)) < 0)
    return r;
  if ((r = runtime_connect(rt)) < 0) {
    runtime_close(rt);
    runtime_release(rt);
    return r;
  }
  *out = rt;
  return 0;
}

void lc_runtime_free(lc_runtime *rt) {
  if (rt == NULL)
    return;
  if (rt->workdir != NULL && !rt->opts.keep_workdir && lc_runtime_is_connected(rt)) {
    lc__buf cmd = {0};
    lc_exec_options eo = {.version = LC_EXEC_OPTIONS_VERSION, .timeout_ms = 10000};
    lc_exec_result res;
    if (lc__buf_puts(&cmd, "rm -rf -- ") == 0 && lc__buf_shell_quote(&cmd, rt->workdir) == 0)
      lc_runtime_exec(&res, rt, cmd.data, &eo);
    lc__buf_free(&cmd);
  }
  runtime_close(rt);
  lc_runtime_free(rt->jump);
  runtime_release(rt);
}

const char *lc_runtime_name(const lc_runtime *rt) { return rt->name; }

int lc_runtime_is_connected(const lc_runtime *rt) {
  return __atomic_load_n(&rt->connected, __ATOMIC_ACQUIRE);
}

/* ---- processes ------------------------------------------------------------------------------ */

static void proc_unref(lc_process *p) {
  if (--p->refs > 0)
    return;
  free(p->command);
  lc__buf_free(&p->in);
  lc__buf_free(&p->lines[0].buf);
  lc__buf_free(&p->lines[1].buf);
  lc__buf_free(&p->err_tail);
  free(p);
}

static void deliver_line(lc_process *p, lc_stream stream, const char *line, size_t len) {
  if (stream == LC_STDERR) {
    lc__buf *t = &p->err_tail;
    lc__buf_append(t, line, len < 512 ? len : 512);
    lc__buf_puts(t, "\n");
    if (t->len > ERR_TAIL_MAX) {
      const char *cut = memchr(t->data + (t->len - ERR_TAIL_MAX), '\n', ERR_TAIL_MAX);
      lc__buf_consume(t, cut ? (size_t)(cut - t->data) + 1 : t->len - ERR_TAIL_MAX);
    }
  }
  if (p->on_line != NULL)
    p->on_line(line, len, stream, p->payload);
}

void lc__proc_data(lc_process *p, lc_stream stream, const char *data, size_t len) {
  lc__buf *b = &p->lines[stream == LC_STDERR].buf;
  size_t start = 0;

  if (stream == LC_STDOUT && p->out_fd >= 0) {
    while (len > 0 && p->err.code == 0) {
      ssize_t n = write(p->out_fd, data, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        lc__err_set(&p->err, -errno, "cannot write the fetched file: %s", strerror(errno));
        break;
      }
      data += n;
      len -= (size_t)n;
      p->out_bytes += (uint64_t)n;
    }
    return;
  }
  /* Lines are copied into b so that each is NUL-terminated for the callback. */
  for (size_t i = 0; i < len; i++) {
    if (data[i] != '\n')
      continue;
    lc__buf_append(b, data + start, i - start);
    deliver_line(p, stream, b->data, b->len);
    b->len = 0;
    start = i + 1;
  }
  if (start < len)
    lc__buf_append(b, data + start, len - start);
  while (b->len >= LC__LINE_MAX) {
    char keep = b->data[LC__LINE_MAX];
    b->data[LC__LINE_MAX] = '\0';
    deliver_line(p, stream, b->data, LC__LINE_MAX);
    b->data[LC__LINE_MAX] = keep;
    lc__buf_consume(b, LC__LINE_MAX);
  }
}

void lc__proc_exit(lc_process *p, int status, int signal) {
  p->exited = 1;
  p->result.exit_status = signal ? -1 : status;
  p->result.signal = signal;
}

void lc__proc_closed(lc_process *p, const lc__err *err) {
  lc_runtime *rt = p->rt;
  if (p->finished)
    return;
  for (int s = 0; s < 2; s++) {
    lc__buf *b = &p->lines[s].buf;
    if (b->len > 0) {
      deliver_line(p, s ? LC_STDERR : LC_STDOUT, b->data, b->len);
      b->len = 0;
    }
  }
  if (rt != NULL) {
    if (p->prev)
      p->prev->next = p->next;
    else
      rt->procs = p->next;
    if (p->next)
      p->next->prev = p->prev;
    p->next = p->prev = NULL;
  }
  lc__engine_lock(p->engine);
  if (err != NULL && err->code < 0 && p->err.code == 0)
    p->err = *err;
  else if (p->err.code == 0 && !p->exited)
    lc__err_set(&p->err, LC_ECLOSED, "%s: the channel closed before the command reported how it "
                                     "ended", rt ? rt->name : "host");
  p->finished = 1;
  p->on_line = NULL;
  lc__engine_broadcast(p->engine);
  lc__engine_unlock(p->engine);
  p->rt = NULL;
  p->backend = NULL;
  proc_unref(p);
}

size_t lc__proc_in_peek(lc_process *p, const char **data) {
  if (p->in.len > 0) {
    *data = p->in.data;
    return p->in.len;
  }
  if (p->in_mem_left > 0) {
    *data = p->in_mem;
    return p->in_mem_left;
  }
  if (p->in_fd >= 0 && p->in_left > 0) {
    size_t want = p->in_left < FILE_CHUNK ? (size_t)p->in_left : FILE_CHUNK;
    ssize_t n;
    if (lc__buf_append(&p->in, NULL, 0) < 0 || p->in.cap < want + 1) {
      char *d = lc__realloc(p->in.data, want + 1);
      if (d == NULL)
        return 0;
      p->in.data = d;
      p->in.cap = want + 1;
    }
    do
      n = read(p->in_fd, p->in.data, want);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      lc__err_set(&p->err, n < 0 ? -errno : LC_EREMOTE, "cannot read the file being sent: %s",
                  n < 0 ? strerror(errno) : "it shrank while being sent");
      p->in_left = 0;
      return 0;
    }
    p->in.len = (size_t)n;
    p->in_left -= (uint64_t)n;
    *data = p->in.data;
    return p->in.len;
  }
  return 0;
}

void lc__proc_in_consume(lc_process *p, size_t n) {
  if (p->in.len > 0) {
    lc__buf_consume(&p->in, n);
  } else {
    p->in_mem += n;
    p->in_mem_left -= n;
  }
}

int lc__proc_in_eof_due(const lc_process *p) {
  return p->in_eof && !p->in_eof_sent && p->in.len == 0 && p->in_mem_left == 0 &&
         (p->in_fd < 0 || p->in_left == 0);
}

typedef struct {
  lc__call call;
  lc_process *p;
} proc_call;

static void start_fn(lc__call *c) {
  lc_process *p = ((proc_call *)c)->p;
  lc_runtime *rt = p->rt;
  if (!lc_runtime_is_connected(rt)) {
    lc__err_set(&c->err, LC_ECLOSED, "%s: not connected", rt->name);
    p->refs = 1; /* the caller frees it */
    lc__call_done(c, LC_ECLOSED);
    return;
  }
  p->next = rt->procs;
  if (rt->procs)
    rt->procs->prev = p;
  rt->procs = p;
  p->started_ms = lc__now_ms();
  rt->ops->proc_start(p);
  lc__call_done(c, 0);
}

static void stop_fn(lc__call *c) {
  lc_process *p = ((proc_call *)c)->p;
  if (!p->finished && p->rt != NULL) {
    if (p->lifeline) {
      if (lc__buf_puts(&p->in, "s\n") == 0)
        p->rt->ops->proc_kick(p);
    } else {
      p->rt->ops->proc_abort(p);
    }
  }
  lc__call_done(c, 0);
}

static void free_fn(lc__call *c) {
  lc_process *p = ((proc_call *)c)->p;
  p->on_line = NULL;
  if (!p->finished && p->rt != NULL)
    p->rt->ops->proc_abort(p);
  if (!p->finished)
    lc__proc_closed(p, NULL);
  proc_unref(p);
  lc__call_done(c, 0);
}

static int proc_alloc(lc_process **out, lc_runtime *rt, const char *command,
                      const lc_exec_options *opts, int lifeline) {
  lc_process *p = NULL;
  lc__buf cmd = {0};
  lc__err err = {0};
  int r;

  *out = NULL;
  if (rt == NULL || command == NULL)
    return lc__error_set(-EINVAL, "exec: no runtime or no command given");
  if ((r = lc__command_compose(&cmd, command, opts,
                               lifeline ? (rt->opts.heartbeat_timeout_ms + 999) / 1000 : -1,
                               rt->opts.kill_grace_ms, &err)) < 0) {
    lc__buf_free(&cmd);
    return lc__err_raise(&err);
  }
  if ((p = lc__calloc(1, sizeof(*p))) == NULL) {
    lc__buf_free(&cmd);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  p->rt = rt;
  p->engine = rt->engine;
  p->command = cmd.data;
  p->lifeline = lifeline;
  p->refs = 2;
  p->in_fd = -1;
  p->out_fd = -1;
  if (opts != NULL) {
    p->on_line = opts->on_line;
    p->payload = opts->payload;
  }
  *out = p;
  return 0;
}

/* Starts p on its runtime; on failure p is freed. */
static int proc_start(lc_process *p) {
  proc_call pc = {.p = p};
  int r;
  if ((r = lc__engine_run(p->engine, &pc.call, start_fn)) < 0)
    proc_unref(p);
  return r;
}

int lc_runtime_spawn(lc_process **out, lc_runtime *rt, const char *command,
                     const lc_exec_options *opts) {
  int r;
  if ((r = proc_alloc(out, rt, command, opts, 1)) < 0)
    return r;
  if ((r = proc_start(*out)) < 0)
    *out = NULL;
  return r;
}

int lc_process_wait(lc_exec_result *out, lc_process *p, int timeout_ms) {
  int r;
  lc__engine_lock(p->engine);
  r = lc__engine_wait(p->engine, &p->finished, timeout_ms);
  if (r == 0) {
    if (out != NULL)
      *out = p->result;
    r = p->err.code;
  }
  lc__engine_unlock(p->engine);
  if (r == -ETIMEDOUT)
    return lc__error_set(r, "the command is still running after %d ms", timeout_ms);
  if (r < 0)
    return lc__err_raise(&p->err);
  return 0;
}

int lc_process_stop(lc_process *p) {
  proc_call pc = {.p = p};
  if (p == NULL)
    return lc__error_set(-EINVAL, "stop: no process given");
  return lc__engine_run(p->engine, &pc.call, stop_fn);
}

void lc_process_free(lc_process *p) {
  proc_call pc = {.p = p};
  if (p == NULL)
    return;
  lc__engine_run(p->engine, &pc.call, free_fn);
}

/* Waits for p with a limit; past it, ends p and waits for its group to go (grace + a margin). */
static int wait_or_end(lc_exec_result *out, lc_process *p, int timeout_ms, const char *what) {
  lc_runtime *rt = p->rt;
  const char *name = rt ? rt->name : "host";
  int grace = rt ? rt->opts.kill_grace_ms : 3000;
  int r = lc_process_wait(out, p, timeout_ms > 0 ? timeout_ms : -1);
  if (r != -ETIMEDOUT)
    return r;
  lc_process_stop(p);
  lc_process_wait(NULL, p, grace + 5000);
  return lc__error_set(-ETIMEDOUT, "%s: %s timed out after %.1f s", name, what,
                       timeout_ms / 1000.0);
}

int lc_runtime_exec(lc_exec_result *out, lc_runtime *rt, const char *command,
                    const lc_exec_options *opts) {
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  int r;
  if ((r = lc_runtime_spawn(&p, rt, command, opts)) < 0)
    return r;
  r = wait_or_end(&res, p, opts ? opts->timeout_ms : 0, "command");
  lc_process_free(p);
  if (out != NULL)
    *out = res;
  return r;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* Runs a transfer script without a lifeline; stdin from memory or a file, stdout to a file. */
static int run_transfer(lc_process **keep, lc_runtime *rt, const char *script, const char *mem,
                        size_t mem_len, int in_fd, uint64_t in_len, int out_fd, int timeout_ms,
                        const char *what) {
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  int r;

  *keep = NULL;
  if ((r = proc_alloc(&p, rt, script, NULL, 0)) < 0)
    return r;
  p->in_mem = mem;
  p->in_mem_left = mem_len;
  p->in_fd = in_fd;
  p->in_left = in_len;
  p->in_eof = 1;
  p->out_fd = out_fd;
  if ((r = proc_start(p)) < 0)
    return r;
  r = wait_or_end(&res, p, timeout_ms, what);
  if (r == 0 && (res.exit_status != 0 || res.signal != 0)) {
    lc__buf *t = &p->err_tail;
    while (t->len > 0 && t->data[t->len - 1] == '\n')
      t->data[--t->len] = '\0';
    const char *last = t->len ? t->data : "no message";
    const char *nl = strrchr(last, '\n');
    r = lc__error_set(LC_EREMOTE, "%s: %s failed: %s", rt->name, what, nl ? nl + 1 : last);
  }
  *keep = p;
  return r;
}

int lc_runtime_write_file(lc_runtime *rt, const char *remote_path, const void *data, size_t len,
                          unsigned int mode, int timeout_ms) {
  lc__buf script = {0};
  lc_process *p = NULL;
  char what[512];
  int r;

  if (rt == NULL || remote_path == NULL || (data == NULL && len > 0))
    return lc__error_set(-EINVAL, "write_file: no runtime, path or data given");
  if ((r = lc__command_write_file(&script, remote_path, len, mode)) < 0) {
    lc__buf_free(&script);
    return lc__error_set(r, "out of memory");
  }
  snprintf(what, sizeof(what), "writing %s", remote_path);
  r = run_transfer(&p, rt, script.data, data, len, -1, 0, -1, timeout_ms, what);
  lc_process_free(p);
  lc__buf_free(&script);
  return r;
}

int lc_runtime_send_file(lc_runtime *rt, const char *local_path, const char *remote_path,
                         int timeout_ms) {
  lc__buf script = {0};
  lc_process *p = NULL;
  struct stat st;
  char what[512];
  int fd = -1, r;

  if (rt == NULL || local_path == NULL || remote_path == NULL)
    return lc__error_set(-EINVAL, "send_file: no runtime or path given");
  if ((fd = open(local_path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
    r = lc__error_set(-errno, "cannot read %s: %s", local_path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    r = lc__error_set(-EINVAL, "cannot send %s: not a regular file", local_path);
    goto out;
  }
  if ((r = lc__command_write_file(&script, remote_path, (uint64_t)st.st_size, st.st_mode)) < 0) {
    r = lc__error_set(r, "out of memory");
    goto out;
  }
  snprintf(what, sizeof(what), "sending %s to %s", local_path, remote_path);
  r = run_transfer(&p, rt, script.data, NULL, 0, fd, (uint64_t)st.st_size, -1, timeout_ms, what);
out:
  lc_process_free(p);
  lc__buf_free(&script);
  if (fd >= 0)
    close(fd);
  return r;
}

int lc_runtime_get_file(lc_runtime *rt, const char *remote_path, const char *local_path,
                        int timeout_ms) {
  lc__buf script = {0}, tmp = {0};
  lc_process *p = NULL;
  const char *slash, *stat_line;
  unsigned int mode = 0;
  unsigned long long size = 0;
  char what[512];
  int fd = -1, r;

  if (rt == NULL || local_path == NULL || remote_path == NULL)
    return lc__error_set(-EINVAL, "get_file: no runtime or path given");
  /* A temporary file beside the target, renamed over it only when everything arrived. */
  slash = strrchr(local_path, '/');
  if ((r = lc__buf_printf(&tmp, "%.*s.%s.lc-tmp.XXXXXX", slash ? (int)(slash - local_path + 1) : 0,
                          local_path, slash ? slash + 1 : local_path)) < 0 ||
      (r = lc__command_get_file(&script, remote_path)) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((fd = mkostemp(tmp.data, O_CLOEXEC)) < 0) {
    r = lc__error_set(-errno, "cannot create a file beside %s: %s", local_path, strerror(errno));
    goto out;
  }
  snprintf(what, sizeof(what), "fetching %s", remote_path);
  if ((r = run_transfer(&p, rt, script.data, NULL, 0, -1, 0, fd, timeout_ms, what)) < 0)
    goto out;
  if (p->err.code < 0) {
    r = lc__err_raise(&p->err);
    goto out;
  }
  stat_line = strstr(p->err_tail.data ? p->err_tail.data : "", "lc-stat ");
  if (stat_line == NULL || sscanf(stat_line, "lc-stat %o %llu", &mode, &size) != 2) {
    r = lc__error_set(LC_EREMOTE, "%s: fetching %s: the host did not report the file's size",
                      rt->name, remote_path);
    goto out;
  }
  if (size != p->out_bytes) {
    r = lc__error_set(LC_EREMOTE, "%s: fetching %s: %llu of %llu bytes arrived", rt->name,
                      remote_path, (unsigned long long)p->out_bytes, size);
    goto out;
  }
  if (fchmod(fd, mode & 07777u) < 0 || fsync(fd) < 0 || rename(tmp.data, local_path) < 0) {
    r = lc__error_set(-errno, "cannot write %s: %s", local_path, strerror(errno));
    goto out;
  }
  tmp.len = 0; /* renamed: nothing to remove */
out:
  lc_process_free(p);
  if (fd >= 0)
    close(fd);
  if (tmp.len > 0 && fd >= 0)
    unlink(tmp.data);
  lc__buf_free(&tmp);
  lc__buf_free(&script);
  return r;
}

/* ---- working directory ---------------------------------------------------------------------- */

typedef struct {
  char path[4096];
} workdir_out;

static void workdir_line(const char *line, size_t len, lc_stream stream, void *payload) {
  workdir_out *w = payload;
  if (stream == LC_STDOUT && line[0] == '/' && len < sizeof(w->path))
    memcpy(w->path, line, len + 1);
}

int lc_runtime_workdir(const char **out, lc_runtime *rt) {
  lc__buf cmd = {0};
  workdir_out w = {{0}};
  lc_exec_options eo = {.version = LC_EXEC_OPTIONS_VERSION, .on_line = workdir_line,
                        .payload = &w, .timeout_ms = 30000};
  lc_exec_result res;
  char host[256] = "host", name[320];
  int r = 0;

  *out = NULL;
  pthread_mutex_lock(&rt->workdir_mu);
  if (rt->workdir != NULL)
    goto out;
  gethostname(host, sizeof(host) - 1);
  snprintf(name, sizeof(name), "%s-%ld", host, (long)getpid());
  if ((r = lc__command_workdir(&cmd, rt->workdir_root, name)) < 0) {
    r = lc__error_set(r, "out of memory");
    goto out;
  }
  if ((r = lc_runtime_exec(&res, rt, cmd.data, &eo)) < 0)
    goto out;
  if (res.exit_status != 0 || w.path[0] == '\0') {
    r = lc__error_set(LC_EREMOTE, "%s: cannot create a working directory under %s", rt->name,
                      rt->workdir_root ? rt->workdir_root : "~/.cache/lazycluster");
    goto out;
  }
  if ((rt->workdir = lc__strdup(w.path)) == NULL)
    r = lc__error_set(-ENOMEM, "out of memory");
out:
  if (r == 0)
    *out = rt->workdir;
  pthread_mutex_unlock(&rt->workdir_mu);
  lc__buf_free(&cmd);
  return r;
}
