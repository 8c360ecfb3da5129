/*
 * engine.c - one libuv loop on one thread. Public calls post an lc__call and wait for it; the loop
 * owns every connection, so no lock guards I/O state.
 */
#include "engine.h"
#include "peer.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct shared_obj shared_obj;
struct shared_obj {
  shared_obj *next;
  char *key;
  void *obj;
  int refs;
};

struct lc_engine {
  uv_loop_t loop;
  uv_async_t wake;
  uv_thread_t thread;
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lc__call *queue_head, *queue_tail;
  int stopping;
  lc__owned owned;               /* [lock]: the list head of what callers hold (lc__engine_adopt) */
  shared_obj *shared;            /* [lock]: lc__engine_share_* */
  lc__peers_state peers;         /* [engine] after lc_engine_new */
  lc_engine_notice_cb on_notice; /* [made] */
  void *notice_payload;          /* [made] */
  uv_check_t linger_check;       /* [engine]: the last turn's wait for let-go processes */
  uv_timer_t linger_timer;
  int linger_killed;
  uint64_t changes; /* [atomic]: lc__engine_changed */
};

void lc_engine_options_init(lc_engine_options *opts) {
  lc_engine_options init = LC_ENGINE_OPTIONS_INIT;
  *opts = init;
}

/*
 * The loop's last turn. Process handles still active then belong to ProxyCommands that were sent
 * SIGTERM and let go (runtimes/ssh/ssh.c, proxy_stop: a process handle closed before its exit
 * would leave a zombie), which close their handle once reaped. Their exit is awaited, at most
 * LINGER_MS (then SIGKILL to their process groups, and as long again), so that the loop closes
 * with nothing open and nothing of theirs is left running.
 */
#define LINGER_MS 2000

static void linger_count(uv_handle_t *h, void *arg) {
  if (uv_handle_get_type(h) == UV_PROCESS && !uv_is_closing(h))
    ++*(int *)arg;
}

static void linger_kill(uv_handle_t *h, void *arg) {
  (void)arg;
  if (uv_handle_get_type(h) == UV_PROCESS && !uv_is_closing(h)) {
    int pid = uv_process_get_pid((uv_process_t *)h);
    if (pid > 0 && kill(-pid, SIGKILL) < 0)
      kill(pid, SIGKILL);
  }
}

static int lingering(lc_engine *e) {
  int n = 0;
  uv_walk(&e->loop, linger_count, &n);
  return n;
}

static void linger_end(lc_engine *e) {
  uv_close((uv_handle_t *)&e->linger_check, NULL);
  uv_close((uv_handle_t *)&e->linger_timer, NULL);
  uv_stop(&e->loop);
}

static void on_linger_check(uv_check_t *h) {
  lc_engine *e = h->data;
  if (lingering(e) == 0)
    linger_end(e);
}

static void on_linger_timer(uv_timer_t *t) {
  lc_engine *e = t->data;
  if (e->linger_killed) {
    linger_end(e);
    return;
  }
  e->linger_killed = 1;
  uv_walk(&e->loop, linger_kill, NULL);
  uv_timer_start(t, on_linger_timer, LINGER_MS, 0);
}

static void on_wake(uv_async_t *h) {
  lc_engine *e = h->data;
  lc__call *c;
  int stopping;

  pthread_mutex_lock(&e->mu);
  c = e->queue_head;
  e->queue_head = e->queue_tail = NULL;
  stopping = e->stopping;
  pthread_mutex_unlock(&e->mu);

  while (c != NULL) {
    lc__call *next = c->next;
    c->fn(c);
    c = next;
  }
  if (stopping) {
    uv_close((uv_handle_t *)&e->wake, NULL);
    /* Everything tracked is closed by now. A handle still open belongs to an object the caller
     * leaked that the engine does not track (a group, a job queue): stop rather than wait on it
     * forever; only let-go processes are awaited, for a bounded time (LINGER_MS). */
    if (lingering(e) == 0) {
      uv_stop(&e->loop);
      return;
    }
    uv_check_init(&e->loop, &e->linger_check);
    e->linger_check.data = e;
    uv_check_start(&e->linger_check, on_linger_check);
    uv_timer_init(&e->loop, &e->linger_timer);
    e->linger_timer.data = e;
    uv_timer_start(&e->linger_timer, on_linger_timer, LINGER_MS, 0);
  }
}

/*
 * The loop writes into sockets and pipes whose peer may be gone (a forwarded client that reset,
 * a local child that closed its stdin); libuv writes with write(), which raises SIGPIPE in the
 * writing thread. A program that embeds us and never ignored SIGPIPE would die of it (status
 * 141), so this thread blocks it: the write then fails with EPIPE alone. The SIGPIPE stays pending
 * on this thread, which never unblocks it, and goes with the thread; the caller's threads and
 * their masks are untouched, and libuv gives each child it spawns an empty mask.
 */
static void engine_main(void *arg) {
  lc_engine *e = arg;
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, NULL);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  uv_run(&e->loop, UV_RUN_NOWAIT); /* the close callbacks of the last turn */
}

void lc__engine_adopt(lc_engine *e, lc__owned *o, int order, void *obj, void (*release)(void *)) {
  o->order = order;
  o->obj = obj;
  o->release = release;
  pthread_mutex_lock(&e->mu);
  o->next = &e->owned;
  o->prev = e->owned.prev;
  e->owned.prev->next = o;
  e->owned.prev = o;
  o->listed = 1;
  pthread_mutex_unlock(&e->mu);
}

void lc__engine_disown(lc_engine *e, lc__owned *o) {
  pthread_mutex_lock(&e->mu);
  if (o->listed) {
    o->prev->next = o->next;
    o->next->prev = o->prev;
    o->next = o->prev = NULL;
    o->listed = 0;
  }
  pthread_mutex_unlock(&e->mu);
}

void *lc__engine_share_find(lc_engine *e, const char *key) {
  void *obj = NULL;
  pthread_mutex_lock(&e->mu);
  for (shared_obj *s = e->shared; s != NULL && obj == NULL; s = s->next)
    if (strcmp(s->key, key) == 0) {
      s->refs++;
      obj = s->obj;
    }
  pthread_mutex_unlock(&e->mu);
  return obj;
}

void *lc__engine_share_add(lc_engine *e, const char *key, void *obj) {
  shared_obj *s = lc__calloc(1, sizeof(*s));
  void *there = NULL;
  if (s == NULL || (s->key = lc__strdup(key)) == NULL) {
    free(s);
    return NULL;
  }
  pthread_mutex_lock(&e->mu);
  for (shared_obj *o = e->shared; o != NULL && there == NULL; o = o->next)
    if (strcmp(o->key, key) == 0) {
      o->refs++;
      there = o->obj;
    }
  if (there == NULL) {
    s->obj = obj;
    s->refs = 1;
    s->next = e->shared;
    e->shared = s;
    s = NULL;
  }
  pthread_mutex_unlock(&e->mu);
  if (s != NULL) {
    free(s->key);
    free(s);
  }
  return there != NULL ? there : obj;
}

int lc__engine_share_drop(lc_engine *e, void *obj) {
  shared_obj **pp, *gone = NULL;
  int left = -1;
  pthread_mutex_lock(&e->mu);
  for (pp = &e->shared; *pp != NULL && (*pp)->obj != obj; pp = &(*pp)->next)
    ;
  if (*pp != NULL) {
    left = --(*pp)->refs;
    if (left == 0) {
      gone = *pp;
      *pp = gone->next;
    }
  }
  pthread_mutex_unlock(&e->mu);
  if (gone != NULL) {
    free(gone->key);
    free(gone);
  }
  return left;
}

/* Takes the first listed object of the given order off the list; NULL when there is none. */
static lc__owned *take_owned(lc_engine *e, int order) {
  lc__owned *o;
  pthread_mutex_lock(&e->mu);
  for (o = e->owned.next; o != &e->owned && o->order != order; o = o->next)
    ;
  if (o == &e->owned) {
    o = NULL;
  } else {
    o->prev->next = o->next;
    o->next->prev = o->prev;
    o->next = o->prev = NULL;
    o->listed = 0;
  }
  pthread_mutex_unlock(&e->mu);
  return o;
}

int lc_engine_new(lc_engine **out, const lc_engine_options *opts) {
  lc_engine *e = NULL;
  pthread_condattr_t ca;
  int r = LC_EINTERNAL;

  *out = NULL;
  LC__CHECK_VERSION(opts, LC_ENGINE_OPTIONS_VERSION, "lc_engine_options");
  if (opts != NULL && opts->version >= 2 &&
      (opts->peers < LC_PEERS_OWNER || opts->peers > LC_PEERS_ANY))
    return lc__error_set(-EINVAL,
                         "lc_engine_options.peers %d: want LC_PEERS_OWNER, "
                         "LC_PEERS_OWNER_AND_ROOT or LC_PEERS_ANY",
                         opts->peers);
  if ((e = lc__calloc(1, sizeof(*e))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  /* options of version 1 have no peers field: they get the safe default, LC_PEERS_OWNER */
  e->peers.policy = LC_PEERS_OWNER;
  e->peers.owner = getuid();
  e->peers.nl = -1;
  if (opts != NULL && opts->version >= 2) {
    e->peers.policy = opts->peers;
    e->on_notice = opts->on_notice;
    e->notice_payload = opts->payload;
  }
  e->owned.next = e->owned.prev = &e->owned;
  pthread_mutex_init(&e->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&e->cv, &ca);
  pthread_condattr_destroy(&ca);
  if ((r = uv_loop_init(&e->loop)) < 0) {
    r = lc__error_set(LC_EINTERNAL, "cannot create the event loop: %s", uv_strerror(r));
    goto out;
  }
  e->wake.data = e;
  if ((r = uv_async_init(&e->loop, &e->wake, on_wake)) < 0 ||
      (r = uv_thread_create(&e->thread, engine_main, e)) < 0) {
    r = lc__error_set(LC_EINTERNAL, "cannot start the engine thread: %s", uv_strerror(r));
    goto out;
  }
  *out = e;
  e = NULL;
  r = 0;
out:
  if (e != NULL) {
    if (uv_loop_alive(&e->loop) || e->wake.data) {
      uv_close((uv_handle_t *)&e->wake, NULL);
      uv_run(&e->loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(&e->loop);
    free(e);
  }
  return r;
}

void lc_engine_free(lc_engine *e) {
  if (e == NULL)
    return;
  /* What the caller still holds goes first, as the caller would have freed it: processes end
   * (their lifelines end their groups on the hosts), forwards stop, runtimes disconnect. */
  for (int order = 0; order < LC__OWNED_KINDS; order++) {
    lc__owned *o;
    while ((o = take_owned(e, order)) != NULL)
      o->release(o->obj);
  }
  pthread_mutex_lock(&e->mu);
  e->stopping = 1;
  pthread_mutex_unlock(&e->mu);
  uv_async_send(&e->wake);
  uv_thread_join(&e->thread);
  uv_loop_close(&e->loop);
  lc__peer_close(&e->peers.nl);
  while (e->shared != NULL) { /* none once every runtime is freed */
    shared_obj *s = e->shared;
    e->shared = s->next;
    free(s->key);
    free(s);
  }
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
}

uv_loop_t *lc__engine_loop(lc_engine *e) { return &e->loop; }

lc__peers_state *lc__engine_peers_state(lc_engine *e) { return &e->peers; }

void lc__engine_notice(lc_engine *e, const char *message) {
  if (e->on_notice != NULL)
    e->on_notice(message, e->notice_payload);
}

int lc__engine_on_thread(const lc_engine *e) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &e->thread);
}

void lc__engine_lock(lc_engine *e) { pthread_mutex_lock(&e->mu); }
void lc__engine_unlock(lc_engine *e) { pthread_mutex_unlock(&e->mu); }
void lc__engine_changed(lc_engine *e) { __atomic_add_fetch(&e->changes, 1, __ATOMIC_RELEASE); }

uint64_t lc__engine_changes(lc_engine *e) { return __atomic_load_n(&e->changes, __ATOMIC_ACQUIRE); }

void lc__engine_broadcast(lc_engine *e) {
  lc__engine_changed(e);
  pthread_cond_broadcast(&e->cv);
}

int lc__engine_wait(lc_engine *e, const int *flag, int timeout_ms) {
  struct timespec deadline;
  if (timeout_ms == 0) /* a look, not a wait: no clock, no futex call, the lock given up never */
    return *flag ? 0 : -ETIMEDOUT;
  if (timeout_ms > 0) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  while (!*flag) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&e->cv, &e->mu);
    } else if (pthread_cond_timedwait(&e->cv, &e->mu, &deadline) == ETIMEDOUT) {
      return *flag ? 0 : -ETIMEDOUT;
    }
  }
  return 0;
}

int lc__engine_post(lc_engine *e, lc__call *c, void (*fn)(lc__call *c)) {
  c->fn = fn;
  c->engine = e;
  c->next = NULL;
  c->done = 0;
  c->err.code = 0;
  c->err.msg[0] = '\0';
  if (lc__engine_on_thread(e))
    return lc__error_set(LC_EINTERNAL, "blocking lazycluster call made on the engine thread "
                                       "(from inside a callback)");
  pthread_mutex_lock(&e->mu);
  if (e->stopping) {
    pthread_mutex_unlock(&e->mu);
    return lc__error_set(LC_EINTERNAL, "the engine is stopping");
  }
  if (e->queue_tail)
    e->queue_tail->next = c;
  else
    e->queue_head = c;
  e->queue_tail = c;
  uv_async_send(&e->wake);
  pthread_mutex_unlock(&e->mu);
  return 0;
}

int lc__engine_await(lc_engine *e, lc__call *c) {
  pthread_mutex_lock(&e->mu);
  lc__engine_wait(e, &c->done, -1);
  pthread_mutex_unlock(&e->mu);
  return lc__err_raise(&c->err);
}

int lc__engine_run(lc_engine *e, lc__call *c, void (*fn)(lc__call *c)) {
  int r;
  if ((r = lc__engine_post(e, c, fn)) < 0)
    return r;
  return lc__engine_await(e, c);
}

void lc__call_done(lc__call *c, int code) {
  lc_engine *e = c->engine;
  pthread_mutex_lock(&e->mu);
  if (code < 0 && c->err.code == 0)
    lc__err_set(&c->err, code, "%s", lc_strerror(code));
  c->err.code = code;
  c->done = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}
