/*
 * engine.h - the engine's internal interface: run work on the loop thread and wait for it.
 */
#ifndef LC_ENGINE_H
#define LC_ENGINE_H

#include "internal.h"

#include "lazycluster/engine.h"

#include <pthread.h>
#include <sys/types.h>
#include <uv.h>

/*
 * A call: fn runs on the engine thread and, now or later, finishes the call with lc__call_done.
 * The posting thread waits for that. Calls live on the poster's stack.
 */
typedef struct lc__call lc__call;
struct lc__call {
  void (*fn)(lc__call *c);
  lc__call *next;
  lc_engine *engine;
  int done;
  lc__err err;
};

/* Posts c to the engine and waits until it is done; returns its code with the detail raised. */
int lc__engine_run(lc_engine *e, lc__call *c, void (*fn)(lc__call *c));
/* Posts c to the engine without waiting (many calls can then run at once); 0, or an error when
 * the engine is stopping or this is the engine thread (c is then not posted). */
int lc__engine_post(lc_engine *e, lc__call *c, void (*fn)(lc__call *c));
/* Waits until a posted c is done; returns its code with the detail raised. */
int lc__engine_await(lc_engine *e, lc__call *c);
/* Engine thread: finishes a call (code 0 or an error already in c->err via lc__err_set). */
void lc__call_done(lc__call *c, int code);

/*
 * What a caller holds of an engine and may forget to free before lc_engine_free: its runtimes,
 * the processes it spawned and its forwards. Each embeds one of these; the engine keeps them in a
 * list under its lock, and lc_engine_free releases what is still listed (processes, then
 * forwards, then runtimes) with `release`, the object's own public free.
 */
typedef struct lc__owned lc__owned;
struct lc__owned {
  lc__owned *next, *prev; /* [lock] */
  int listed;             /* [lock] */
  int order;              /* [made]: LC__OWNED_*: released in this order */
  void *obj;              /* [made] */
  void (*release)(void *obj);
};
enum { LC__OWNED_PROCESS = 0, LC__OWNED_FORWARD = 1, LC__OWNED_RUNTIME = 2, LC__OWNED_KINDS = 3 };

/* Any thread but the engine's: lists o (a new object handed to the caller). */
void lc__engine_adopt(lc_engine *e, lc__owned *o, int order, void *obj, void (*release)(void *));
/* Any thread: takes o off the list (its owner frees it now); a no-op when it is not listed. */
void lc__engine_disown(lc_engine *e, lc__owned *o);

/*
 * Objects shared by key among an engine's runtimes (a ProxyJump hop: one connection to a bastion
 * for every host behind it), reference counted. Any thread but the engine's; under its lock.
 */
/* The object under key with one more reference, or NULL when there is none. */
void *lc__engine_share_find(lc_engine *e, const char *key);
/* Puts obj under key with one reference and returns it; when another thread put one there first,
 * that one gets a reference and is returned instead (free yours). NULL: out of memory (obj stays
 * yours, unshared). */
void *lc__engine_share_add(lc_engine *e, const char *key, void *obj);
/* Drops a reference to obj: the references left (0: it left the table, free it), or -1 when obj
 * is not shared. */
int lc__engine_share_drop(lc_engine *e, void *obj);

uv_loop_t *lc__engine_loop(lc_engine *e);
int lc__engine_on_thread(const lc_engine *e);

/* The engine's mutex and condition, for handles that other threads wait on (processes). */
void lc__engine_lock(lc_engine *e);
void lc__engine_unlock(lc_engine *e);
/* Waits on the engine's condition until *flag is set or timeout_ms passes (negative: forever).
 * Must hold the lock. Returns 0 or -ETIMEDOUT. */
int lc__engine_wait(lc_engine *e, const int *flag, int timeout_ms);
/* Wakes every waiter; call with the lock held after setting a flag. Counts as a change. */
void lc__engine_broadcast(lc_engine *e);
/* Counts a change that pollers of the engine's state look for (a process ended, a helper's line
 * came, a connection came or went); any thread. lc__engine_changes: the count so far, so that a
 * poller (lc_cluster_wait's repair) looks at everything only when it moved. */
void lc__engine_changed(lc_engine *e);
uint64_t lc__engine_changes(lc_engine *e);

/* What the peer check of our listeners keeps (peer.c), engine thread only: who may connect
 * (an lc_peers), the engine's owner (the real uid at lc_engine_new), the NETLINK_SOCK_DIAG socket
 * (-1 until the first lookup) and the rate limit of refusal notices. */
typedef struct lc__peers_state {
  int policy;
  uid_t owner;
  int nl;
  uint64_t window_start_ms;
  unsigned shown;
  unsigned long held;
} lc__peers_state;

lc__peers_state *lc__engine_peers_state(lc_engine *e);
/* Engine thread: hands message to lc_engine_options.on_notice, if any. */
void lc__engine_notice(lc_engine *e, const char *message);

#endif /* LC_ENGINE_H */
