/*
 * runtime.c - one host, whatever the backend: the blocking public calls, processes and their
 * lifelines, output lines, heartbeats, file transfers and the working directory.
 */
#include "gpu.h"
#include "ports_internal.h"
#include "runtime_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define ERR_TAIL_MAX 4096
#define FILE_CHUNK (256 * 1024)
/* A stdin buffer larger than this is freed once empty (lc__proc_in_consume). */
#define IN_KEEP 256

void lc_runtime_options_init(lc_runtime_options *opts) {
  lc_runtime_options init = LC_RUNTIME_OPTIONS_INIT;
  *opts = init;
}

void lc_exec_options_init(lc_exec_options *opts) {
  lc_exec_options init = LC_EXEC_OPTIONS_INIT;
  *opts = init;
}

size_t lc__exec_options_size(const lc_exec_options *opts) {
  if (opts->version >= 3)
    return sizeof(*opts);
  if (opts->version == 2)
    return LC__FIELD_END(lc_exec_options, label);
  return LC__FIELD_END(lc_exec_options, timeout_ms); /* version 1 ends with timeout_ms */
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int runtime_alloc(lc_runtime **out, lc_engine *engine, const char *name,
                         const lc_runtime_options *opts, const lc__backend_ops *ops) {
  lc_runtime *rt;
  *out = NULL;
  LC__CHECK_VERSION(opts, LC_RUNTIME_OPTIONS_VERSION, "lc_runtime_options");
  if (engine == NULL || name == NULL)
    return lc__error_set(-EINVAL, "runtime: no engine or no host name given");
  if ((rt = lc__calloc(1, sizeof(*rt))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  rt->engine = engine;
  rt->ops = ops;
  rt->gpus = -1;
  if (opts != NULL) /* version 1 ends with workdir_root */
    lc__options_copy(&rt->opts, opts,
                     opts->version >= 2 ? sizeof(rt->opts)
                                        : LC__FIELD_END(lc_runtime_options, workdir_root));
  if ((rt->opts.umask & ~(LC_UMASK_SET | 0777)) != 0) {
    int bad = rt->opts.umask;
    free(rt);
    return lc__error_set(-EINVAL,
                         "runtime %s: umask %#x is not LC_UMASK_SET with a mode of 0 to 0777", name,
                         (unsigned)bad);
  }
  rt->opts.version = LC_RUNTIME_OPTIONS_VERSION;
  if (rt->opts.connect_timeout_ms <= 0)
    rt->opts.connect_timeout_ms = 10000;
  if (rt->opts.keepalive_timeout_ms <= 0)
    rt->opts.keepalive_timeout_ms = 30000;
  /* heartbeat_timeout_ms: set by heartbeat_settle once the backend has read its keepalive */
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

unsigned int lc__runtime_umask(const lc_runtime *rt) {
  return (rt->opts.umask & LC_UMASK_SET) ? (unsigned)rt->opts.umask & 0777u : 077u;
}

static void runtime_release(lc_runtime *rt) {
  lc__engine_disown(rt->engine, &rt->owned);
  pthread_mutex_destroy(&rt->workdir_mu);
  free(rt->name);
  free(rt->ssh_config);
  free(rt->workdir_root);
  free(rt->workdir);
  lc__portscan_free(rt->fresh_listing);
  free(rt->lost_ids);
  free(rt);
}

/* Kicks rt's processes marked kick_due, one by one, from the list's start after each: a kick may
 * end its process, which then leaves the list and is freed. */
static void kick_due(lc_runtime *rt) {
  lc_process *p;
  do {
    for (p = rt->procs; p != NULL && !p->kick_due; p = p->next)
      ;
    if (p != NULL) {
      p->kick_due = 0;
      rt->ops->proc_kick(p);
    }
  } while (p != NULL);
}

/* A heartbeat into every lifeline's stdin. The kicks come after the walk of the list (kick_due):
 * a kick that ended its process freed it under a walk that read its next (ThreadSanitizer saw
 * it in CI: heap-use-after-free, a cancelled job's process ended by the heartbeat's kick). */
static void on_heartbeat(uv_timer_t *t) {
  lc_runtime *rt = t->data;
  for (lc_process *p = rt->procs; p != NULL; p = p->next)
    if (p->lifeline && !p->finished && lc__buf_puts(&p->in, "h\n") == 0)
      p->kick_due = 1;
  kick_due(rt);
}

/*
 * Depth of callbacks into owners' code (line callbacks, on_finish) on this engine thread: those
 * run inside a backend's read or close, where a backend is not entered again (libssh's channel
 * callbacks and the backend's read buffer are in use). Stdin that grows there is written from the
 * runtime's kick timer, on the next turn of the loop.
 */
static __thread int in_callback;

static void on_kick(uv_timer_t *t) {
  lc_runtime *rt = t->data;
  rt->kick_started = 0;
  kick_due(rt);
}

void lc__proc_kick_later(lc_process *p) {
  lc_runtime *rt = p->rt;
  if (rt == NULL || p->finished || !rt->heartbeat_started)
    return;
  p->kick_due = 1;
  if (!rt->kick_started) {
    uv_timer_start(&rt->kick, on_kick, 0, 0);
    rt->kick_started = 1;
  }
}

/* p has more stdin: written now, or soon when this runs inside a backend's callback. */
static void proc_kick_soon(lc_process *p) {
  if (in_callback == 0)
    p->rt->ops->proc_kick(p);
  else
    lc__proc_kick_later(p);
}

static void lost_sweep_start(lc_runtime *rt);
static void proc_unref(lc_process *p);

void lc__runtime_connected(lc_runtime *rt, const lc__err *err) {
  lc__call *c = rt->call;
  rt->call = NULL;
  if (err == NULL || err->code == 0) {
    uint64_t every = (uint64_t)rt->opts.heartbeat_timeout_ms / 3;
    __atomic_store_n(&rt->connected, 1, __ATOMIC_RELEASE);
    lc__engine_changed(rt->engine);
    lost_sweep_start(rt);
    if (!rt->heartbeat_started) {
      uv_timer_init(lc__engine_loop(rt->engine), &rt->heartbeat);
      rt->heartbeat.data = rt;
      uv_timer_start(&rt->heartbeat, on_heartbeat, every, every < 200 ? 200 : every);
      uv_timer_init(lc__engine_loop(rt->engine), &rt->kick);
      rt->kick.data = rt;
      rt->heartbeat_started = 1;
    }
  }
  if (c == NULL) {
    void (*cb)(lc_runtime *, const lc__err *, void *) = rt->on_connected;
    rt->on_connected = NULL;
    if (cb != NULL)
      cb(rt, err != NULL && err->code < 0 ? err : NULL, rt->on_connected_arg);
    return;
  }
  if (err != NULL && err->code < 0)
    c->err = *err;
  lc__call_done(c, err ? err->code : 0);
}

void lc__runtime_connect_async(lc_runtime *rt, void (*cb)(lc_runtime *, const lc__err *, void *),
                               void *arg) {
  rt->on_connected = cb;
  rt->on_connected_arg = arg;
  rt->ops->connect(rt);
}

void lc__runtime_lost(lc_runtime *rt, const lc__err *err) {
  (void)err;
  /* a failed sweep was about the loss before: this one starts afresh (lost_add) */
  if (__atomic_load_n(&rt->lost_state, __ATOMIC_ACQUIRE) == LC__LOST_FAILED)
    __atomic_store_n(&rt->lost_state, LC__LOST_NONE, __ATOMIC_RELEASE);
  __atomic_store_n(&rt->connected, 0, __ATOMIC_RELEASE);
  lc__engine_changed(rt->engine);
}

/*
 * After a host loss. The connection's keepalive gave up, but the host may not have noticed (a
 * cut link): sshd there still holds the lifelines' channels, and they would run on until their
 * heartbeat limit (twice the keepalive limit). So each lifeline closed by a lost connection is
 * noted by its id, and once the host answers again one short command (no lifeline of its own)
 * finds their wrappers by the word lc-id=ID of their command line (never by a pid alone: pids
 * are reused, by a rebooted host or by another cluster of the same user), sends each a SIGTERM,
 * upon which it ends its group as its own stop would (TERM, grace, KILL, sweep, cleanup), and
 * waits for them to be gone, at most the kill grace and 5 s. The forks of a wrapper (its reader,
 * watchdog) carry the same command line: only those whose parent is no match are signalled. The
 * token in grep's own arguments is written as a bracket expression, which does not match itself.
 * A plain user's SIGTERM reaches only that user's processes.
 */
static void lost_add(lc_runtime *rt, const char *id) {
  if (id[0] == '\0') { /* no id (getrandom failed at its start): nothing can find it */
    lc__engine_lock(rt->engine);
    snprintf(rt->lost_why, sizeof(rt->lost_why), "%s: a lifeline had no id", rt->name);
    lc__engine_unlock(rt->engine);
    __atomic_store_n(&rt->lost_state, LC__LOST_FAILED, __ATOMIC_RELEASE);
    return;
  }
  if (rt->nlost == rt->lost_cap) {
    size_t cap = rt->lost_cap ? 2 * rt->lost_cap : 16;
    char(*v)[20] = lc__realloc(rt->lost_ids, cap * sizeof(*v));
    if (v == NULL) { /* unknown then: the caller waits for the heartbeat limit */
      lc__engine_lock(rt->engine);
      snprintf(rt->lost_why, sizeof(rt->lost_why), "%s: out of memory", rt->name);
      lc__engine_unlock(rt->engine);
      __atomic_store_n(&rt->lost_state, LC__LOST_FAILED, __ATOMIC_RELEASE);
      return;
    }
    rt->lost_ids = v;
    rt->lost_cap = cap;
  }
  memcpy(rt->lost_ids[rt->nlost++], id, sizeof(rt->lost_ids[0]));
  if (__atomic_load_n(&rt->lost_state, __ATOMIC_ACQUIRE) != LC__LOST_FAILED)
    __atomic_store_n(&rt->lost_state, LC__LOST_PENDING, __ATOMIC_RELEASE);
}

static void lost_sweep_done(lc_process *p, void *arg) {
  lc_runtime *rt = arg;
  size_t n = rt->lost_swept;
  rt->lost_sweep = NULL;
  rt->lost_swept = 0;
  if (p->exited && p->result.exit_status == 0 && p->result.signal == 0 && p->err_code == 0) {
    memmove(rt->lost_ids, rt->lost_ids + n, (rt->nlost - n) * sizeof(rt->lost_ids[0]));
    rt->nlost -= n;
    if (rt->nlost == 0 && __atomic_load_n(&rt->lost_state, __ATOMIC_ACQUIRE) == LC__LOST_PENDING)
      __atomic_store_n(&rt->lost_state, LC__LOST_NONE, __ATOMIC_RELEASE);
  } else if (lc_runtime_is_connected(rt)) {
    const char *left = p->err_tail.data != NULL ? strstr(p->err_tail.data, "lc-left") : NULL;
    lc__engine_lock(rt->engine);
    if (left != NULL)
      snprintf(rt->lost_why, sizeof(rt->lost_why),
               "%.80s: processes of the lost connection still run after the kill grace:%.*s",
               rt->name, (int)(strcspn(left + 7, "\n") < 200 ? strcspn(left + 7, "\n") : 200),
               left + 7);
    else
      snprintf(rt->lost_why, sizeof(rt->lost_why),
               "%.80s: the command that ends the lost connection's processes failed: %.300s",
               rt->name, p->err_code < 0 ? lc__proc_err_msg(p) : "it exited with an error");
    lc__engine_unlock(rt->engine);
    rt->nlost = 0;
    __atomic_store_n(&rt->lost_state, LC__LOST_FAILED, __ATOMIC_RELEASE);
  } else {
    /* lost again meanwhile: the ids stay for the next connection's sweep */
  }
  proc_unref(p); /* the reference lost_sweep_start held */
  if (rt->nlost > 0 && lc_runtime_is_connected(rt))
    lost_sweep_start(rt);
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

static void kick_closed(uv_handle_t *h) {
  lc_runtime *rt = h->data;
  uv_close((uv_handle_t *)&rt->heartbeat, heartbeat_closed);
}

static void close_fn(lc__call *c) {
  lc_runtime *rt = ((rt_call *)c)->rt;
  rt->call = c;
  __atomic_store_n(&rt->connected, 0, __ATOMIC_RELEASE);
  lc__engine_changed(rt->engine);
  /* Forwards stop here; their handles stay valid for lc_forward_free. */
  for (lc_forward *f = rt->forwards; f != NULL; f = f->next) {
    if (f->listener != NULL) {
      f->listener->data = NULL;
      uv_close((uv_handle_t *)f->listener, (uv_close_cb)free);
      f->listener = NULL;
    }
    if (rt->ops->fwd_stop != NULL)
      rt->ops->fwd_stop(f);
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
    uv_close((uv_handle_t *)&rt->kick, kick_closed);
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

static void release_runtime(void *rt) { lc_runtime_free(rt); }

void lc__runtime_jump_drop(lc_runtime *jump) {
  if (jump != NULL && lc__engine_share_drop(jump->engine, jump) <= 0)
    lc_runtime_free(jump);
}

/*
 * The lifeline's heartbeat limit against the connection's keepalive limit K: a blip that the
 * connection survives must not end the host's processes. While the connection survives, the
 * host hears nothing for at most a heartbeat period (a third of the limit), the keepalive's
 * sending delay (K/6) and its answer's deadline (K); the watchdog ends the group after more
 * than the limit of silence. So the limit must be at least 2K (11K/6 is the worst case); the
 * default is exactly that. A smaller explicit value is kept, with a warning saying what it
 * risks. Backends on this machine have no keepalive: their lifelines hear EOF.
 */
static void heartbeat_settle(lc_runtime *rt) {
  long long least = 2LL * rt->opts.keepalive_timeout_ms;
  char msg[400];
  if (rt->opts.heartbeat_timeout_ms <= 0) {
    rt->opts.heartbeat_timeout_ms = least > 2000000000LL ? 2000000000 : (int)least;
    return;
  }
  if (lc__runtime_on_this_machine(rt) || rt->opts.heartbeat_timeout_ms >= least)
    return;
  snprintf(msg, sizeof(msg),
           "%s: heartbeat_timeout_ms %d is less than twice keepalive_timeout_ms %d: a network "
           "blip that the connection survives can end this host's processes through their "
           "lifelines (use at least %lld, or leave it 0 for that default)",
           rt->name, rt->opts.heartbeat_timeout_ms, rt->opts.keepalive_timeout_ms, least);
  lc__warn(msg);
}

/*
 * A runtime on the backend ops (each backend's constructor passes its own): the settings read
 * (ops->prepare, with via as the ProxyJump when not NULL), then, when connect is set, connected.
 */
int lc__runtime_make(lc_runtime **out, const lc__backend_ops *ops, lc_engine *engine,
                     const char *host, const char *via, const lc_runtime_options *opts,
                     int connect) {
  lc_runtime *rt = NULL;
  lc__err err = {0};
  int r;

  *out = NULL;
  if ((r = runtime_alloc(&rt, engine, host, opts, ops)) < 0)
    return r;
  if (ops->prepare != NULL && (r = ops->prepare(rt, host, via, &err)) < 0) {
    r = lc__err_raise(&err);
    lc__runtime_jump_drop(rt->jump);
    runtime_release(rt);
    return r;
  }
  heartbeat_settle(rt);
  if (connect && (r = runtime_connect(rt)) < 0) {
    lc__err saved = {.code = r};
    snprintf(saved.msg, sizeof(saved.msg), "%s", lc_error_last());
    runtime_close(rt);
    lc__runtime_jump_drop(rt->jump);
    runtime_release(rt);
    return lc__err_raise(&saved);
  }
  lc__engine_adopt(engine, &rt->owned, LC__OWNED_RUNTIME, rt, release_runtime);
  *out = rt;
  return 0;
}

int lc__runtime_on_this_machine(const lc_runtime *rt) {
  return (rt->ops->caps & LC__BACKEND_ON_THIS_MACHINE) != 0;
}

uint64_t lc__runtime_loopback(const lc_runtime *rt) {
  if (rt == NULL || lc__runtime_on_this_machine(rt))
    return lc__loopback_here();
  return __atomic_load_n(&rt->loopback, __ATOMIC_RELAXED);
}

void lc__runtime_learn_loopback(lc_runtime *rt, uint64_t id) {
  if (id != LC__LOOPBACK_UNKNOWN)
    __atomic_store_n(&rt->loopback, id, __ATOMIC_RELAXED);
}

/* rt is NULL (this machine) or a runtime on this machine. */
static int runtime_here(const lc_runtime *rt) {
  return rt == NULL || lc__runtime_on_this_machine(rt);
}

int lc__runtime_same_loopback(const lc_runtime *a, const lc_runtime *b) {
  uint64_t la;
  if (a == b || (runtime_here(a) && runtime_here(b))) /* even where Linux tells no loopback */
    return 1;
  la = lc__runtime_loopback(a);
  return la > LC__LOOPBACK_UNTOLD && la == lc__runtime_loopback(b);
}

void lc__runtime_gpu_env(const lc_runtime *rt, int gpu, char *cvd, size_t cvd_size, char *order,
                         size_t order_size) {
  const char *ours = lc__runtime_on_this_machine(rt) ? getenv("CUDA_VISIBLE_DEVICES") : NULL;
  char entry[128];
  if (ours != NULL && lc__gpu_visible_entry(ours, gpu, entry, sizeof(entry)) == 0) {
    snprintf(cvd, cvd_size, "CUDA_VISIBLE_DEVICES=%s", entry);
    snprintf(order, order_size, "%s", "");
  } else {
    snprintf(cvd, cvd_size, "CUDA_VISIBLE_DEVICES=%d", gpu);
    snprintf(order, order_size, "CUDA_DEVICE_ORDER=PCI_BUS_ID");
  }
}

typedef struct workdir_out workdir_out;
static void workdir_out_free(workdir_out *w);
static int keeper_running(lc_runtime *rt);

void lc__runtime_discard(lc_runtime *rt) {
  if (rt == NULL)
    return;
  lc__meshrelay_free(rt, 0);
  lc_process_free(rt->workdir_making);
  workdir_out_free(rt->workdir_making_arg);
  lc_process_free(rt->workdir_keeper);
  workdir_out_free(rt->workdir_keeper_arg);
  runtime_close(rt);
  lc__runtime_jump_drop(rt->jump);
  runtime_release(rt);
}

/* When a teardown begun now stops waiting for the confirmed end of a process with that grace. */
static uint64_t end_deadline(int grace_ms) {
  return lc__now_ms() + (uint64_t)grace_ms + LC__PROC_END_MARGIN_MS;
}

void lc__runtime_free_begin(lc_runtime *rt) {
  lc__buf cmd = {0};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  if (rt == NULL || rt->free_begun)
    return;
  rt->free_begun = 1;
  if (rt->workdir_making != NULL) { /* begun, never awaited: finish it, so that it goes below */
    const char *wd;
    lc_runtime_workdir(&wd, rt);
  }
  /* a keeper that runs removes the directory as it ends (its lifeline's cleanup, awaited
   * below): a command of its own only when none runs (it was killed whole, or never made) */
  eo.label = "workdir-remove";
  pthread_mutex_lock(&rt->workdir_mu);
  if (rt->workdir != NULL && !rt->opts.keep_workdir && !keeper_running(rt) &&
      lc_runtime_is_connected(rt) && lc__buf_puts(&cmd, "rm -rf -- ") == 0 &&
      lc__buf_shell_quote(&cmd, rt->workdir) == 0)
    lc__runtime_spawn_setup(&rt->free_rm, rt, cmd.data, &eo, NULL);
  pthread_mutex_unlock(&rt->workdir_mu);
  rt->free_deadline = end_deadline(rt->opts.kill_grace_ms);
  lc__buf_free(&cmd);
  lc__process_end_begin(rt->workdir_keeper); /* it removes the directory too, as it ends */
  lc__meshrelay_end_begin(rt);
}

void lc_runtime_free(lc_runtime *rt) {
  uint64_t now;
  if (rt == NULL)
    return;
  lc__runtime_free_begin(rt);
  lc__meshrelay_free(rt, rt->free_deadline); /* before the forwards: its carrier is one */
  now = lc__now_ms();
  if (rt->free_rm != NULL &&
      lc_process_wait(NULL, rt->free_rm,
                      rt->free_deadline > now ? (int)(rt->free_deadline - now) : 0) == -ETIMEDOUT)
    lc__process_free_by(rt->free_rm, rt->free_deadline); /* past its time: its lifeline ends it */
  else
    lc_process_free(rt->free_rm);
  rt->free_rm = NULL;
  /* it removes the directory; gone when it ends */
  lc__process_free_by(rt->workdir_keeper, rt->free_deadline);
  workdir_out_free(rt->workdir_keeper_arg);
  runtime_close(rt);
  lc__runtime_jump_drop(rt->jump);
  runtime_release(rt);
}

const char *lc_runtime_name(const lc_runtime *rt) { return rt->name; }

int lc_runtime_is_connected(const lc_runtime *rt) {
  return __atomic_load_n(&rt->connected, __ATOMIC_ACQUIRE);
}

/* ---- processes ------------------------------------------------------------------------------ */

static void xfer_cleanup(lc_process *p);

static void proc_unref(lc_process *p) {
  if (--p->refs > 0)
    return;
  xfer_cleanup(p);
  free(p->xfer_dest);
  free(p->xfer_what);
  free(p->host);
  free(p->command);
  free(p->err_msg);
  lc__buf_free(&p->in);
  lc__buf_free(&p->noise);
  lc__buf_free(&p->lines[0].buf);
  lc__buf_free(&p->lines[1].buf);
  lc__buf_free(&p->err_tail);
  free(p);
}

void lc__proc_err_set(lc_process *p, int code, const char *fmt, ...) {
  va_list ap;
  free(p->err_msg);
  va_start(ap, fmt);
  p->err_msg = lc__vsprintf(fmt, ap); /* NULL: the code's own text serves (lc__proc_err_msg) */
  va_end(ap);
  p->err_code = code;
}

const char *lc__proc_err_msg(const lc_process *p) {
  if (p->err_code == 0)
    return "";
  return p->err_msg != NULL ? p->err_msg : lc_strerror(p->err_code);
}

void lc__proc_err(const lc_process *p, lc__err *e) {
  e->code = p->err_code;
  snprintf(e->msg, sizeof(e->msg), "%s", lc__proc_err_msg(p));
}

#define PID_LEN (sizeof(LC__COMMAND_PID) - 1)

/* A lifeline's first stdout line: when it is the pid line (command.c), its pid is kept and the
 * line goes to no one; 1 then, else 0. */
static int take_pid(lc_process *p, const char *line, size_t len) {
  long pid = 0;
  size_t i = PID_LEN;
  p->pid_looked = 1;
  if (len <= PID_LEN || memcmp(line, LC__COMMAND_PID, PID_LEN) != 0)
    return 0;
  for (; i < len && line[i] >= '0' && line[i] <= '9' && pid < 100000000L; i++)
    pid = pid * 10 + (line[i] - '0');
  if (i != len)
    return 0;
  lc__engine_lock(p->engine);
  p->pid = pid;
  lc__engine_unlock(p->engine);
  return 1;
}

static void deliver_line(lc_process *p, lc_stream stream, const char *line, size_t len) {
  if (stream == LC_STDOUT && p->lifeline && !p->pid_looked && take_pid(p, line, len))
    return;
  if (stream == LC_STDERR) {
    lc__buf *t = &p->err_tail;
    lc__buf_append(t, line, len < 512 ? len : 512);
    lc__buf_puts(t, "\n");
    if (t->len > ERR_TAIL_MAX) {
      const char *cut = memchr(t->data + (t->len - ERR_TAIL_MAX), '\n', ERR_TAIL_MAX);
      lc__buf_consume(t, cut ? (size_t)(cut - t->data) + 1 : t->len - ERR_TAIL_MAX);
    }
  }
  if (p->on_line != NULL) {
    in_callback++;
    p->on_line(line, len, stream, p->payload);
    in_callback--;
  }
}

#define MARK_LEN (sizeof(LC__COMMAND_MARK) - 1)
#define NOISE_MAX 2048

/* Consumes the bytes before the stream's mark and the mark itself: the number taken. */
static size_t take_noise(lc_process *p, int s, const char *data, size_t len) {
  size_t i = 0;
  while (i < len && p->mark_at[s] < MARK_LEN) {
    char c = data[i++];
    if (c == LC__COMMAND_MARK[p->mark_at[s]]) {
      p->mark_at[s]++;
    } else {
      if (p->noise.len < NOISE_MAX)
        lc__buf_append(&p->noise, LC__COMMAND_MARK, p->mark_at[s]);
      p->mark_at[s] = c == LC__COMMAND_MARK[0];
      if (!p->mark_at[s] && p->noise.len < NOISE_MAX)
        lc__buf_append(&p->noise, &c, 1);
    }
  }
  if (p->mark_at[s] == MARK_LEN) {
    p->mark_at[s]++;
    if (s == LC_STDOUT)
      p->go = 1;
  }
  return i;
}

void lc__proc_data(lc_process *p, lc_stream stream, const char *data, size_t len) {
  lc__buf *b = &p->lines[stream == LC_STDERR].buf;
  size_t start = 0;

  if (p->mark_at[stream == LC_STDERR] <= MARK_LEN) {
    size_t n = take_noise(p, stream == LC_STDERR, data, len);
    data += n;
    len -= n;
  }

  if (stream == LC_STDOUT && p->on_raw != NULL) {
    if (len > 0)
      p->on_raw(p, data, len);
    return;
  }
  if (stream == LC_STDOUT && p->out_fd >= 0) {
    while (len > 0 && p->err_code == 0) {
      ssize_t n = write(p->out_fd, data, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        lc__proc_err_set(p, -errno, "cannot write the fetched file: %s", strerror(errno));
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

/* The login shell ended without running the script: say what it printed, in one line. */
static void not_started(lc_process *p) {
  char what[512];
  size_t n = 0;
  for (size_t i = 0; i < p->noise.len && n < sizeof(what) - 4; i++) {
    unsigned char c = (unsigned char)p->noise.data[i];
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
    if (c < 32 || c == 127)
      continue;
    if (c == ' ' && (n == 0 || what[n - 1] == ' '))
      continue;
    what[n++] = (char)c;
  }
  while (n > 0 && what[n - 1] == ' ')
    n--;
  what[n] = '\0';
  lc__proc_err_set(p, LC_EREMOTE, "%s: the login shell did not run the command (%s %d)%s%s%s",
                   p->host, p->result.signal ? "signal" : "exit status",
                   p->result.signal ? p->result.signal : p->result.exit_status,
                   n ? ": it said \"" : "", what, n ? "\"" : "");
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
  /* a lifeline cut by a lost connection may still run on the host */
  if (rt != NULL && p->lifeline && err != NULL && err->code < 0 && !lc_runtime_is_connected(rt) &&
      !p->exited)
    lost_add(rt, p->id);
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
  if (err != NULL && err->code < 0 && p->err_code == 0)
    lc__proc_err_set(p, err->code, "%s", err->msg);
  else if (p->err_code == 0 && p->exited && p->mark_at[0] <= MARK_LEN)
    not_started(p);
  else if (p->err_code == 0 && !p->exited)
    lc__proc_err_set(p, LC_ECLOSED,
                     "%s: the channel closed before the command reported how it "
                     "ended",
                     rt ? rt->name : "host");
  p->finished = 1;
  p->on_line = NULL;
  p->rt = NULL; /* under the lock: lc__process_end_wait reads it from another thread */
  lc__engine_broadcast(p->engine);
  lc__engine_unlock(p->engine);
  p->backend = NULL;
  if (p->on_finish != NULL) {
    in_callback++;
    p->on_finish(p, p->finish_arg);
    in_callback--;
  }
  proc_unref(p);
}

size_t lc__proc_in_peek(lc_process *p, const char **data) {
  if (p->in_head_left > 0) { /* the script's shared head, before anything */
    *data = p->in_head;
    return p->in_head_left;
  }
  if (!p->go) { /* the script alone, until the host's sh has read it */
    *data = p->in.data;
    return p->in.len < p->in_gate ? p->in.len : p->in_gate;
  }
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
      lc__proc_err_set(p, n < 0 ? -errno : LC_EREMOTE, "cannot read the file being sent: %s",
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

size_t lc__proc_in_gather(lc_process *p, char *buf, size_t max) {
  size_t head = p->in_head_left < max ? p->in_head_left : max, script;
  if (p->in_head_left == 0)
    return 0;
  memcpy(buf, p->in_head, head);
  script = p->in.len < max - head ? p->in.len : max - head;
  if (!p->go && script > p->in_gate - p->in_head_left) /* the gate counts the head too */
    script = p->in_gate - p->in_head_left;
  if (head == p->in_head_left && script > 0)
    memcpy(buf + head, p->in.data, script);
  else
    script = 0;
  return head + script;
}

size_t lc__proc_in_next(lc_process *p, char *buf, size_t max, const char **data) {
  size_t n = lc__proc_in_gather(p, buf, max);
  if (n > 0) {
    *data = buf;
    return n;
  }
  n = lc__proc_in_peek(p, data);
  return n < max ? n : max;
}

void lc__proc_in_consume(lc_process *p, size_t n) {
  if (!p->go)
    p->in_gate -= n;
  if (p->in_head_left > 0) { /* the head, and what lc__proc_in_gather gave of the script */
    size_t head = n < p->in_head_left ? n : p->in_head_left;
    p->in_head += head;
    p->in_head_left -= head;
    n -= head;
  }
  if (n == 0)
    return;
  if (p->in.len > 0) {
    lc__buf_consume(&p->in, n);
    /* the script is out: its buffer need not live as long as the process (a lifeline's stdin
     * gets a few bytes now and then); a file's chunk buffer stays until the file is sent */
    if (p->in.len == 0 && p->in.cap > IN_KEEP && (p->in_fd < 0 || p->in_left == 0))
      lc__buf_free(&p->in);
  } else {
    p->in_mem += n;
    p->in_mem_left -= n;
  }
}

int lc__proc_in_eof_due(const lc_process *p) {
  return p->go && p->in_eof && !p->in_eof_sent && p->in_head_left == 0 && p->in.len == 0 &&
         p->in_mem_left == 0 && (p->in_fd < 0 || p->in_left == 0);
}

int lc__proc_in_pending(const lc_process *p) {
  if (!p->go)
    return p->in_gate > 0 && (p->in_head_left > 0 || p->in.len > 0);
  return p->in_head_left > 0 || p->in.len > 0 || p->in_mem_left > 0 ||
         (p->in_fd >= 0 && p->in_left > 0);
}

typedef struct {
  lc__call call;
  lc_process *p;
} proc_call;

int lc__proc_launch(lc_process *p, lc__err *err) {
  lc_runtime *rt = p->rt;
  if (!lc_runtime_is_connected(rt)) {
    p->refs = 1; /* never started: only the owner holds it */
    return lc__err_set(err, LC_ECLOSED, "%s: not connected", rt->name);
  }
  p->next = rt->procs;
  if (rt->procs)
    rt->procs->prev = p;
  rt->procs = p;
  p->started_ms = lc__now_ms();
  rt->ops->proc_start(p);
  return 0;
}

static void start_fn(lc__call *c) {
  lc_process *p = ((proc_call *)c)->p;
  lc__call_done(c, lc__proc_launch(p, &c->err));
}

void lc__proc_stop(lc_process *p) {
  if (p == NULL || p->finished || p->rt == NULL)
    return;
  if (p->lifeline) {
    if (lc__buf_puts(&p->in, "s\n") == 0)
      proc_kick_soon(p);
  } else {
    p->rt->ops->proc_abort(p);
  }
}

static void stop_fn(lc__call *c) {
  lc__proc_stop(((proc_call *)c)->p);
  lc__call_done(c, 0);
}

/*
 * A line for the command's stdin goes to its lifeline as the control line "dLINE", an end as "e"
 * (command.c); both wait behind the script until the host's sh has read it (the gate in
 * lc__proc_in_peek), and are written in order with the heartbeats and a stop.
 */
static int input_check(lc_process *p, lc__err *err) {
  if (!p->input)
    return lc__err_set(err, -EINVAL,
                       "%s: the process has no input (spawn it with lc_exec_options.input)",
                       p->host);
  return 0;
}

static int input_open(lc_process *p, lc__err *err) {
  if (p->finished || p->rt == NULL)
    return lc__err_set(err, LC_ECLOSED, "%s: the process ended, its input with it", p->host);
  if (!lc_runtime_is_connected(p->rt))
    return lc__err_set(err, LC_ECLOSED, "%s: the connection to the host is lost", p->host);
  return 0;
}

int lc__proc_input_line(lc_process *p, const char *line, size_t len, lc__err *err) {
  const char *bad;
  int r;

  if ((r = input_check(p, err)) < 0)
    goto out;
  if (line == NULL && len > 0) {
    r = lc__err_set(err, -EINVAL, "%s: no line given", p->host);
    goto out;
  }
  if (len > 0 && ((bad = memchr(line, '\n', len)) != NULL || (bad = memchr(line, '\0', len)))) {
    r = lc__err_set(err, -EINVAL, "%s: a line for the process's input holds a %s at byte %zu",
                    p->host, *bad == '\n' ? "newline" : "NUL", (size_t)(bad - line));
    goto out;
  }
  if (p->input_closed) {
    r = lc__err_set(err, -EPIPE, "%s: the process's input was closed", p->host);
    goto out;
  }
  if ((r = input_open(p, err)) < 0)
    goto out;
  if ((r = lc__buf_puts(&p->in, "d")) < 0 ||
      (len > 0 && (r = lc__buf_append(&p->in, line, len)) < 0) ||
      (r = lc__buf_puts(&p->in, "\n")) < 0) {
    r = lc__err_set(err, -ENOMEM, "out of memory");
    goto out;
  }
  proc_kick_soon(p);
out:
  return r;
}

int lc__proc_input_close(lc_process *p, lc__err *err) {
  int r;
  if ((r = input_check(p, err)) < 0 || p->input_closed || (r = input_open(p, err)) < 0)
    return r;
  if (lc__buf_puts(&p->in, "e\n") < 0)
    return lc__err_set(err, -ENOMEM, "out of memory");
  p->input_closed = 1;
  proc_kick_soon(p);
  return 0;
}

typedef struct {
  lc__call call;
  lc_process *p;
  const char *line;
  size_t len;
} input_call;

static void input_line_fn(lc__call *c) {
  input_call *ic = (input_call *)c;
  lc__call_done(c, lc__proc_input_line(ic->p, ic->line, ic->len, &c->err));
}

static void input_close_fn(lc__call *c) {
  input_call *ic = (input_call *)c;
  lc__call_done(c, lc__proc_input_close(ic->p, &c->err));
}

int lc_process_write_line(lc_process *p, const char *line, size_t len) {
  input_call ic = {.p = p, .line = line, .len = len};
  if (p == NULL)
    return lc__error_set(-EINVAL, "write_line: no process given");
  return lc__engine_run(p->engine, &ic.call, input_line_fn);
}

int lc_process_close_input(lc_process *p) {
  input_call ic = {.p = p};
  if (p == NULL)
    return lc__error_set(-EINVAL, "close_input: no process given");
  return lc__engine_run(p->engine, &ic.call, input_close_fn);
}

void lc__proc_release(lc_process *p) {
  p->on_line = NULL;
  p->on_finish = NULL;
  if (!p->finished && p->rt != NULL)
    p->rt->ops->proc_abort(p);
  if (!p->finished)
    lc__proc_closed(p, NULL);
  proc_unref(p);
}

static void free_fn(lc__call *c) {
  lc__proc_release(((proc_call *)c)->p);
  lc__call_done(c, 0);
}

/* 16 random hex digits (64 bits: no two lifelines of any cluster meet); 0, or -1 without. */
static int make_id(char id[20]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char b[8];
  if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
    id[0] = '\0';
    return -1;
  }
  for (int i = 0; i < 8; i++) {
    id[2 * i] = hex[b[i] >> 4];
    id[2 * i + 1] = hex[b[i] & 15];
  }
  id[16] = '\0';
  return 0;
}

_Thread_local const void *lc__proc_tag;

int lc__proc_new(lc_process **out, lc_runtime *rt, const char *command, const lc_exec_options *opts,
                 int lifeline, const char *setup, const char *cleanup) {
  lc_process *p = NULL;
  lc__buf cmd = {0}, script = {0};
  const char *head = NULL;
  size_t head_len = 0;
  lc__err err = {0};
  int r;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_EXEC_OPTIONS_VERSION, "lc_exec_options");
  if (rt == NULL || command == NULL)
    return lc__error_set(-EINVAL, "exec: no runtime or no command given");
  /* the umask of everything the script starts (the first line of the process's own part, after
   * the shared head: that only defines functions) */
  if (lc__buf_printf(&script, "umask %03o\n", lc__runtime_umask(rt)) < 0) {
    lc__buf_free(&script);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  if ((r = lc__command_compose_parts(&cmd, &head, &head_len, &script, command, opts,
                                     lifeline ? (rt->opts.heartbeat_timeout_ms + 999) / 1000 : -1,
                                     rt->opts.kill_grace_ms, setup, cleanup, rt->name, &err)) < 0) {
    lc__buf_free(&cmd);
    lc__buf_free(&script);
    return lc__err_raise(&err);
  }
  if ((p = lc__calloc(1, sizeof(*p))) == NULL || (p->host = lc__strdup(rt->name)) == NULL ||
      (lifeline && make_id(p->id) == 0 &&
       (lc__buf_puts(&cmd, " lc-id=") < 0 || lc__buf_puts(&cmd, p->id) < 0))) {
    if (p != NULL)
      free(p->host);
    free(p);
    lc__buf_free(&cmd);
    lc__buf_free(&script);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  p->rt = rt;
  p->engine = rt->engine;
  p->grace_ms = rt->opts.kill_grace_ms;
  p->command = cmd.data;
  p->in_head = head;
  p->in_head_left = head_len;
  lc__buf_fit(&script); /* a start queues hundreds of scripts at once: no slack in each */
  p->in = script;
  p->in_gate = head_len + script.len;
  p->lifeline = lifeline;
  p->tag = lc__proc_tag;
  p->input = lifeline && opts != NULL && opts->version >= 3 && opts->input != 0;
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

/* The sweep of the lifelines that lost connections left on the host (see lost_add), once the
 * host answers again; one at a time. */
static void lost_sweep_start(lc_runtime *rt) {
  lc__buf sh = {0};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_process *p = NULL;
  lc__err err = {0};
  size_t n = rt->nlost;
  int r = 0;

  if (n == 0 || rt->lost_sweep != NULL)
    return;
  eo.label = "lost-sweep";
  r = lc__buf_printf(&sh, "cd / || exit 1\nlc_grace_tenths=%d lc_pats=\n",
                     (rt->opts.kill_grace_ms + 99) / 100);
  for (size_t i = 0; i < n && r == 0; i++) /* [x]yz matches xyz, not itself */
    r = lc__buf_printf(&sh, "lc_pats=\"$lc_pats -e lc-id=[%c]%s\"\n", rt->lost_ids[i][0],
                       rt->lost_ids[i] + 1);
  if (r == 0)
    r = lc__buf_puts(
        &sh,
        "lc_find() {\n"
        "  lc_found=\n"
        "  for lc_f in $(grep -lzx $lc_pats /proc/[0-9]*/cmdline 2>/dev/null); do\n"
        "    lc_f=${lc_f#/proc/}; lc_found=\"$lc_found ${lc_f%/cmdline}\"\n"
        "  done\n"
        "}\n"
        "lc_find\n"
        "for lc_pid in $lc_found; do\n"
        "  lc_pp=\n"
        "  while read -r lc_k lc_v; do [ \"$lc_k\" = PPid: ] && lc_pp=$lc_v; done "
        "</proc/$lc_pid/status 2>/dev/null\n"
        "  case \" $lc_found \" in *\" $lc_pp \"*) ;; *) kill -TERM \"$lc_pid\" 2>/dev/null ;; "
        "esac\n"
        "done\n"
        "lc_tenths=0\n"
        "while [ -n \"$lc_found\" ] && [ \"$lc_tenths\" -lt $((lc_grace_tenths + 50)) ]; do\n"
        "  sleep 0.1; lc_tenths=$((lc_tenths+1)); lc_find\n"
        "done\n"
        "[ -z \"$lc_found\" ] || { echo \"lc-left$lc_found\" >&2; exit 1; }\n");
  if (r < 0 || (r = lc__proc_new(&p, rt, sh.data, &eo, 0, NULL, NULL)) < 0) {
    lc__engine_lock(rt->engine);
    snprintf(rt->lost_why, sizeof(rt->lost_why), "%s: %s", rt->name,
             r == -ENOMEM ? "out of memory" : lc_error_last());
    lc__engine_unlock(rt->engine);
    rt->nlost = 0;
    __atomic_store_n(&rt->lost_state, LC__LOST_FAILED, __ATOMIC_RELEASE);
    goto out;
  }
  p->in_eof = 1;
  p->on_finish = lost_sweep_done;
  p->finish_arg = rt;
  rt->lost_sweep = p;
  rt->lost_swept = n;
  if (lc__proc_launch(p, &err) < 0) { /* not connected: the next connection tries again */
    rt->lost_sweep = NULL;
    rt->lost_swept = 0;
    proc_unref(p);
  }
out:
  lc__buf_free(&sh);
}

int lc__runtime_lost_ended(lc_runtime *rt, char *why, size_t n) {
  int s = __atomic_load_n(&rt->lost_state, __ATOMIC_ACQUIRE);
  if (s == LC__LOST_FAILED && why != NULL && n > 0) {
    lc__engine_lock(rt->engine);
    snprintf(why, n, "%s", rt->lost_why);
    lc__engine_unlock(rt->engine);
  }
  return s == LC__LOST_NONE ? 1 : s == LC__LOST_PENDING ? 0 : -1;
}

/* Starts p on its runtime; on failure p is freed. */
static int proc_start(lc_process *p) {
  proc_call pc = {.p = p};
  int r;
  if ((r = lc__engine_run(p->engine, &pc.call, start_fn)) < 0)
    proc_unref(p);
  return r;
}

static void release_process(void *p) { lc_process_free(p); }

int lc_runtime_spawn(lc_process **out, lc_runtime *rt, const char *command,
                     const lc_exec_options *opts) {
  int r = lc__runtime_spawn_setup(out, rt, command, opts, NULL);
  if (r == 0)
    lc__engine_adopt(rt->engine, &(*out)->owned, LC__OWNED_PROCESS, *out, release_process);
  return r;
}

int lc__runtime_spawn_setup(lc_process **out, lc_runtime *rt, const char *command,
                            const lc_exec_options *opts, const char *setup) {
  int r;
  if ((r = lc__proc_new(out, rt, command, opts, 1, setup, NULL)) < 0)
    return r;
  if ((r = proc_start(*out)) < 0)
    *out = NULL;
  return r;
}

int lc__runtime_spawn_plain(lc_process **out, lc_runtime *rt, const char *command,
                            const lc_exec_options *opts) {
  int r;
  if ((r = lc__proc_new(out, rt, command, opts, 0, NULL, NULL)) < 0)
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
    r = p->err_code;
  }
  lc__engine_unlock(p->engine);
  if (r == -ETIMEDOUT)
    return lc__error_set(r, "the command is still running after %d ms", timeout_ms);
  if (r < 0)
    return lc__error_set(r, "%s", lc__proc_err_msg(p));
  return 0;
}

int lc__process_finished(lc_process *p, lc_exec_result *out) {
  int finished;
  lc__engine_lock(p->engine);
  if ((finished = p->finished) != 0 && out != NULL)
    *out = p->result;
  lc__engine_unlock(p->engine);
  return finished;
}

long lc_process_pid(const lc_process *p) {
  long pid;
  if (p == NULL)
    return 0;
  lc__engine_lock(p->engine);
  pid = p->pid;
  lc__engine_unlock(p->engine);
  return pid;
}

int lc_process_stop(lc_process *p) {
  proc_call pc = {.p = p};
  if (p == NULL)
    return lc__error_set(-EINVAL, "stop: no process given");
  return lc__engine_run(p->engine, &pc.call, stop_fn);
}

uint64_t lc__process_end_deadline(const lc_process *p) {
  return end_deadline(p != NULL ? p->grace_ms : 0);
}

void lc__process_end_begin(lc_process *p) {
  proc_call pc = {.p = p};
  if (p != NULL && p->lifeline)
    lc__engine_run(p->engine, &pc.call, stop_fn);
}

/* Only while its host answers: a lost host's lifelines end by themselves (the heartbeat), and
 * nobody would confirm it. */
void lc__process_end_wait(lc_process *p, uint64_t deadline) {
  uint64_t now = lc__now_ms();
  if (p == NULL || !p->lifeline || now >= deadline)
    return;
  /* p->rt and p->finished change on the engine thread, under the engine's lock */
  lc__engine_lock(p->engine);
  if (!p->finished && p->rt != NULL && lc_runtime_is_connected(p->rt))
    lc__engine_wait(p->engine, &p->finished, (int)(deadline - now));
  lc__engine_unlock(p->engine);
}

void lc__process_free_by(lc_process *p, uint64_t deadline) {
  lc__process_end_begin(p);
  lc__process_end_wait(p, deadline);
  lc_process_free(p);
}

void lc__process_free_awaited(lc_process *p) {
  lc__process_free_by(p, lc__process_end_deadline(p));
}

void lc_process_free(lc_process *p) {
  proc_call pc = {.p = p};
  if (p == NULL)
    return;
  lc__engine_disown(p->engine, &p->owned);
  lc__engine_run(p->engine, &pc.call, free_fn);
}

/* Waits for p with a limit; past it, ends p and waits for its group to go (grace + a margin). */
static int wait_or_end(lc_exec_result *out, lc_process *p, int timeout_ms, const char *what) {
  int r = lc_process_wait(out, p, timeout_ms > 0 ? timeout_ms : -1);
  if (r != -ETIMEDOUT)
    return r;
  lc_process_stop(p);
  lc_process_wait(NULL, p, p->grace_ms + 5000);
  return lc__error_set(-ETIMEDOUT, "%s: %s timed out after %.1f s", p->host, what,
                       timeout_ms / 1000.0);
}

int lc_runtime_exec(lc_exec_result *out, lc_runtime *rt, const char *command,
                    const lc_exec_options *opts) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  int r;
  LC__CHECK_VERSION(opts, LC_EXEC_OPTIONS_VERSION, "lc_exec_options");
  if (opts != NULL) { /* input is lc_runtime_spawn's alone: nobody could feed it here */
    lc__options_copy(&eo, opts, lc__exec_options_size(opts));
    eo.version = LC_EXEC_OPTIONS_VERSION;
    eo.input = 0;
  }
  if ((r = lc_runtime_spawn(&p, rt, command, opts != NULL ? &eo : NULL)) < 0)
    return r;
  r = wait_or_end(&res, p, opts ? opts->timeout_ms : 0, "command");
  lc_process_free(p);
  if (out != NULL)
    *out = res;
  return r;
}

/* ---- files ---------------------------------------------------------------------------------- */

/*
 * A transfer is a process without a lifeline running a small script (src/command.c), plus local
 * work before (open the source, or a temporary file beside the target) and after (check the exit
 * and the byte count, rename). lc__xfer_new and lc__xfer_finish serve the blocking calls below
 * and the group's tasks alike.
 */
int lc__xfer_new(lc_process **out, lc_runtime *rt, lc__xfer_kind kind, const char *local,
                 const char *remote, const void *data, size_t len, uint64_t unpacked,
                 unsigned int mode, lc__err *err) {
  int write = kind == LC__XFER_WRITE || kind == LC__XFER_WRITE_GZ;
  lc__buf script = {0};
  lc_process *p = NULL;
  struct stat st;
  int fd = -1, r = 0;

  *out = NULL;
  if (rt == NULL || remote == NULL || (!write && local == NULL) ||
      (write && data == NULL && len > 0))
    return lc__err_set(err, -EINVAL, "file transfer: no runtime, path or data given");
  if (kind == LC__XFER_SEND) {
    if ((fd = open(local, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
      r = lc__err_set(err, -errno, "cannot read %s: %s", local, strerror(errno));
      goto out;
    }
    if (!S_ISREG(st.st_mode)) {
      r = lc__err_set(err, -EINVAL, "cannot send %s: not a regular file", local);
      goto out;
    }
    r = lc__command_write_file(&script, remote, (uint64_t)st.st_size, st.st_mode, 0);
  } else if (write) {
    r = lc__command_write_file(&script, remote, kind == LC__XFER_WRITE_GZ ? unpacked : len, mode,
                               kind == LC__XFER_WRITE_GZ);
  } else {
    r = lc__command_get_file(&script, remote);
  }
  if (r < 0 || (r = lc__proc_new(&p, rt, script.data, NULL, 0, NULL, NULL)) < 0) {
    r = lc__err_set(err, r, "%s", r == -ENOMEM ? "out of memory" : lc_error_last());
    goto out;
  }
  p->in_eof = 1;
  p->xfer = kind;
  p->xfer_dest = lc__strdup(kind == LC__XFER_GET ? local : remote);
  p->xfer_what = lc__sprintf("%s %s",
                             kind == LC__XFER_GET    ? "fetching"
                             : kind == LC__XFER_SEND ? "sending to"
                                                     : "writing",
                             remote);
  if (kind == LC__XFER_SEND) {
    p->in_fd = fd;
    p->in_left = (uint64_t)st.st_size;
    fd = -1;
  } else if (write) {
    p->in_mem = data;
    p->in_mem_left = len;
  } else {
    /* a temporary file beside the target, renamed over it only when everything arrived */
    const char *slash = strrchr(local, '/');
    p->xfer_tmp = lc__sprintf("%.*s.%s.lc-tmp.XXXXXX", slash ? (int)(slash - local + 1) : 0, local,
                              slash ? slash + 1 : local);
    if (p->xfer_tmp != NULL && (p->out_fd = mkostemp(p->xfer_tmp, O_CLOEXEC)) < 0) {
      r = lc__err_set(err, -errno, "cannot create a file beside %s: %s", local, strerror(errno));
      free(p->xfer_tmp);
      p->xfer_tmp = NULL;
      goto out;
    }
  }
  if (p->xfer_dest == NULL || p->xfer_what == NULL ||
      (kind == LC__XFER_GET && p->xfer_tmp == NULL)) {
    r = lc__err_set(err, -ENOMEM, "out of memory");
    goto out;
  }
  *out = p;
  p = NULL;
out:
  if (p != NULL) {
    p->refs = 1;
    proc_unref(p);
  }
  if (fd >= 0)
    close(fd);
  lc__buf_free(&script);
  return r;
}

/* Releases a transfer's local resources; a temporary file not renamed is removed. */
static void xfer_cleanup(lc_process *p) {
  if (p->in_fd >= 0) {
    close(p->in_fd);
    p->in_fd = -1;
  }
  if (p->out_fd >= 0) {
    close(p->out_fd);
    p->out_fd = -1;
  }
  if (p->xfer_tmp != NULL) {
    unlink(p->xfer_tmp);
    free(p->xfer_tmp);
    p->xfer_tmp = NULL;
  }
}

int lc__xfer_finish(lc_process *p, int code, lc__err *err) {
  const char *name = p->host;
  unsigned int mode = 0;
  unsigned long long size = 0;
  int r = code;

  if (r == 0 && p->err_code < 0)
    r = lc__err_set(err, p->err_code, "%s", lc__proc_err_msg(p));
  if (r == 0 && (p->result.exit_status != 0 || p->result.signal != 0)) {
    lc__buf *t = &p->err_tail;
    while (t->len > 0 && t->data[t->len - 1] == '\n')
      t->data[--t->len] = '\0';
    const char *last = t->len ? t->data : "no message";
    const char *nl = strrchr(last, '\n');
    r = lc__err_set(
        err, p->xfer == LC__XFER_WRITE_GZ && p->result.exit_status == 3 ? -ENOEXEC : LC_EREMOTE,
        "%s: %s failed: %s", name, p->xfer_what, nl ? nl + 1 : last);
  }
  if (r == 0 && p->xfer == LC__XFER_GET) {
    const char *stat_line = strstr(p->err_tail.data ? p->err_tail.data : "", "lc-stat ");
    if (stat_line == NULL || sscanf(stat_line, "lc-stat %o %llu", &mode, &size) != 2)
      r = lc__err_set(err, LC_EREMOTE, "%s: %s: the host did not report the file's size", name,
                      p->xfer_what);
    else if (size != p->out_bytes)
      r = lc__err_set(err, LC_EREMOTE, "%s: %s: %llu of %llu bytes arrived", name, p->xfer_what,
                      (unsigned long long)p->out_bytes, size);
    /* without setuid, setgid and sticky bits, as OpenSSH's scp and sftp fetch files */
    else if (fchmod(p->out_fd, mode & 0777u) < 0 || fsync(p->out_fd) < 0 ||
             rename(p->xfer_tmp, p->xfer_dest) < 0)
      r = lc__err_set(err, -errno, "cannot write %s: %s", p->xfer_dest, strerror(errno));
    else {
      free(p->xfer_tmp); /* renamed: nothing to remove */
      p->xfer_tmp = NULL;
    }
  }
  xfer_cleanup(p);
  return r;
}

/* The blocking transfers: start, wait (ending it past the limit), finish. */
static int run_transfer(lc_runtime *rt, lc__xfer_kind kind, const char *local, const char *remote,
                        const void *data, size_t len, unsigned int mode, int timeout_ms) {
  lc_process *p = NULL;
  lc__err err = {0};
  int r;
  if ((r = lc__xfer_new(&p, rt, kind, local, remote, data, len, 0, mode, &err)) < 0)
    return lc__err_raise(&err);
  if ((r = proc_start(p)) < 0)
    return r;
  r = wait_or_end(NULL, p, timeout_ms, p->xfer_what);
  if (r < 0) {
    lc__err_set(&err, r, "%s", lc_error_last());
    r = lc__xfer_finish(p, r, &err);
  } else {
    r = lc__xfer_finish(p, 0, &err);
  }
  lc_process_free(p);
  return r < 0 ? lc__err_raise(&err) : 0;
}

int lc_runtime_write_file(lc_runtime *rt, const char *remote_path, const void *data, size_t len,
                          unsigned int mode, int timeout_ms) {
  return run_transfer(rt, LC__XFER_WRITE, NULL, remote_path, data, len, mode, timeout_ms);
}

int lc_runtime_send_file(lc_runtime *rt, const char *local_path, const char *remote_path,
                         int timeout_ms) {
  return run_transfer(rt, LC__XFER_SEND, local_path, remote_path, NULL, 0, 0, timeout_ms);
}

int lc_runtime_get_file(lc_runtime *rt, const char *remote_path, const char *local_path,
                        int timeout_ms) {
  return run_transfer(rt, LC__XFER_GET, local_path, remote_path, NULL, 0, 0, timeout_ms);
}

/* ---- working directory ---------------------------------------------------------------------- */

/* What the making process printed. The keeper's line callback holds it for the runtime's life,
 * so it holds only what came (one per host: no fixed buffers for the longest path). */
struct workdir_out {
  char *path; /* set on the engine thread before done */
  int done;   /* [atomic]: path is set; or it could not be kept (nomem) */
  int nomem;
  char *why; /* the script's refusal of the root (engine thread until the process ended) */
};

static void workdir_out_free(workdir_out *w) {
  if (w == NULL)
    return;
  free(w->path);
  free(w->why);
  free(w);
}

static void workdir_line(const char *line, size_t len, lc_stream stream, void *payload) {
  workdir_out *w = payload;
  if (stream == LC_STDOUT && line[0] == '/' && !__atomic_load_n(&w->done, __ATOMIC_RELAXED)) {
    w->nomem = (w->path = lc__strndup(line, len)) == NULL;
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
  } else if (stream == LC_STDERR && strncmp(line, "lc-refuse ", 10) == 0 && w->why == NULL) {
    w->why = lc__strndup(line + 10, len - 10);
  }
}

/* Starts the process that runs cmd (lc__command_workdir or _again: it prints the directory's
 * path, then stays as its keeper unless keep_workdir), under a lifeline whose end runs cleanup;
 * *wp collects its path. Through the host's agent: a runtime with a working directory wants it. */
static int keeper_start(lc_runtime *rt, const lc__buf *cmd, const lc__buf *cleanup, lc_process **pp,
                        workdir_out **wp) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_process *p = NULL;
  int r;
  *pp = NULL;
  if ((*wp = lc__calloc(1, sizeof(**wp))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  eo.on_line = workdir_line;
  eo.payload = *wp;
  eo.label = "workdir";
  __atomic_store_n(&rt->agent_wanted, 1, __ATOMIC_RELEASE);
  if ((r = lc__proc_new(&p, rt, cmd->data, &eo, 1, NULL, cleanup->data)) < 0 ||
      (r = proc_start(p)) < 0) /* proc_start let go of p */
    return r;
  *pp = p;
  return 0;
}

/* Waits until the keeper printed the path, ended, or deadline (lc__now_ms) passed: whether it
 * printed the path. */
static int keeper_wait(workdir_out *w, lc_process *p, uint64_t deadline) {
  while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && lc__now_ms() < deadline &&
         lc_process_wait(NULL, p, 20) == -ETIMEDOUT)
    ;
  return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/* Starts the process that makes the directory; the caller holds workdir_mu. */
static int workdir_begin_locked(lc_runtime *rt) {
  static unsigned int made;
  lc__buf cmd = {0}, cleanup = {0};
  workdir_out *w = NULL;
  lc_process *p = NULL;
  char host[256] = "host", name[320];
  int r;

  if (rt->workdir != NULL || rt->workdir_making != NULL)
    return 0;
  gethostname(host, sizeof(host) - 1);
  snprintf(name, sizeof(name), "%s-%ld.%u.%llx", host, (long)getpid(),
           __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED), (unsigned long long)lc__now_ms());
  if (lc__command_workdir(&cmd, &cleanup, rt->workdir_root, name, rt->opts.keep_workdir) < 0)
    r = lc__error_set(-ENOMEM, "out of memory");
  else if ((r = keeper_start(rt, &cmd, &cleanup, &p, &w)) == 0) {
    rt->workdir_making = p;
    rt->workdir_making_arg = w;
    rt->workdir_deadline = lc__now_ms() + 30000;
    w = NULL;
  }
  workdir_out_free(w);
  lc__buf_free(&cmd);
  lc__buf_free(&cleanup);
  return r;
}

int lc__runtime_workdir_begin(lc_runtime *rt) {
  int r;
  pthread_mutex_lock(&rt->workdir_mu);
  r = workdir_begin_locked(rt);
  pthread_mutex_unlock(&rt->workdir_mu);
  return r;
}

/*
 * Made on first use by one process that prints the path and then stays as its keeper: when the
 * runtime's lifelines end (free, lost connection, SIGKILL of this program), the keeper removes
 * the directory. With keep_workdir, the process only makes it.
 */
int lc_runtime_workdir(const char **out, lc_runtime *rt) {
  workdir_out *w = NULL;
  lc_process *p = NULL;
  int r = 0;

  *out = NULL;
  pthread_mutex_lock(&rt->workdir_mu);
  if (rt->workdir != NULL)
    goto out;
  if ((r = workdir_begin_locked(rt)) < 0)
    goto out;
  p = rt->workdir_making;
  w = rt->workdir_making_arg;
  rt->workdir_making = NULL;
  rt->workdir_making_arg = NULL;
  if (!keeper_wait(w, p, rt->workdir_deadline)) {
    if (lc_process_wait(NULL, p, 0) != -ETIMEDOUT && w->why != NULL)
      r = lc__error_set(-EPERM, "%s: refused the root of working directories: %s", rt->name,
                        w->why);
    else
      r = lc__error_set(LC_EREMOTE, "%s: cannot create a working directory under %s", rt->name,
                        rt->workdir_root ? rt->workdir_root : "~/.cache/lazycluster");
    goto out;
  }
  if (w->nomem || (rt->workdir = lc__strdup(w->path)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if (!rt->opts.keep_workdir) {
    rt->workdir_keeper = p;
    p = NULL;
  }
out:
  if (p != NULL) {
    lc_process_wait(NULL, p, 5000);
    lc_process_free(p);
  }
  /* the keeper's line callback holds w: it goes with the keeper */
  if (w != NULL && rt->workdir_keeper != NULL && rt->workdir_keeper_arg == NULL)
    rt->workdir_keeper_arg = w;
  else
    workdir_out_free(w);
  if (r == 0)
    *out = rt->workdir;
  pthread_mutex_unlock(&rt->workdir_mu);
  return r;
}

void lc_runtime_set_resources(lc_runtime *rt, int gpus, int slots) {
  rt->gpus = gpus;
  rt->slots = slots > 0 ? slots : 0;
}

int lc_runtime_gpus(const lc_runtime *rt) { return rt->gpus; }

int lc_runtime_slots(const lc_runtime *rt) { return rt->slots; }

void lc__runtime_keep_connected(lc_runtime *rt) {
  __atomic_store_n(&rt->keep_connected, 1, __ATOMIC_RELEASE);
}

int lc__runtime_keeps_connected(const lc_runtime *rt) {
  return __atomic_load_n(&rt->keep_connected, __ATOMIC_ACQUIRE);
}

/* Whether rt's working directory has a keeper that still runs (under workdir_mu). */
static int keeper_running(lc_runtime *rt) {
  return rt->workdir_keeper != NULL && lc_process_wait(NULL, rt->workdir_keeper, 0) == -ETIMEDOUT;
}

int lc__runtime_workdir_keeper_ended(lc_runtime *rt) {
  int ended;
  pthread_mutex_lock(&rt->workdir_mu);
  ended = rt->workdir != NULL && rt->workdir_keeper != NULL && !keeper_running(rt);
  pthread_mutex_unlock(&rt->workdir_mu);
  return ended;
}

/*
 * The keeper of a lost connection ended, and its lifeline on the host removed the directory (or
 * will, at the latest when its heartbeat limit is over: the caller waits for that). The same
 * path comes back, so that what holds it (workers' directories under it) stays right, with a
 * new keeper; with keep_workdir it is only made again.
 */
int lc__runtime_workdir_renew(lc_runtime *rt) {
  lc__buf cmd = {0}, cleanup = {0};
  workdir_out *w = NULL;
  lc_process *p = NULL;
  int r = 0;

  pthread_mutex_lock(&rt->workdir_mu);
  if (rt->workdir == NULL || keeper_running(rt))
    goto out; /* never made, or its keeper still holds it */
  if (lc__command_workdir_again(&cmd, &cleanup, rt->workdir, rt->opts.keep_workdir) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((r = keeper_start(rt, &cmd, &cleanup, &p, &w)) < 0)
    goto out;
  if (!keeper_wait(w, p, lc__now_ms() + 30000)) {
    r = lc__error_set(LC_EREMOTE, "%s: cannot make the working directory %s again", rt->name,
                      rt->workdir);
    goto out;
  }
  lc_process_free(rt->workdir_keeper);
  workdir_out_free(rt->workdir_keeper_arg);
  rt->workdir_keeper = NULL;
  rt->workdir_keeper_arg = NULL;
  if (!rt->opts.keep_workdir) { /* the keeper's line callback holds w: it goes with the keeper */
    rt->workdir_keeper = p;
    rt->workdir_keeper_arg = w;
    p = NULL;
    w = NULL;
  }
out:
  if (p != NULL) {
    lc_process_wait(NULL, p, 5000);
    lc_process_free(p);
  }
  workdir_out_free(w);
  lc__buf_free(&cmd);
  lc__buf_free(&cleanup);
  pthread_mutex_unlock(&rt->workdir_mu);
  return r;
}
