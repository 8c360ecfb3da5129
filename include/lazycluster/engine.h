/*
 * lazycluster/engine.h - the engine: one libuv loop on one thread that owns every connection.
 *
 * Threads: lc_engine_new and lc_engine_free may be called from any thread except the engine's own.
 * Every runtime belongs to one engine; free the runtimes before the engine (lc_engine_free frees
 * those left, see there).
 *
 * Signals: the engine thread blocks SIGPIPE in its own mask (a forwarded client that resets makes
 * a write fail with EPIPE, never kills the program); the caller's threads keep their masks.
 */
#ifndef LAZYCLUSTER_ENGINE_H
#define LAZYCLUSTER_ENGINE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_engine lc_engine;

#define LC_ENGINE_OPTIONS_VERSION 2

/** Who may connect to a listener of ours on this machine (a local forward, the local end of a
 * forward on the local runtime, the mesh). The peer of each loopback connection is looked up in
 * the kernel's socket table (NETLINK_SOCK_DIAG) as it is accepted; a peer not allowed is closed at
 * once, before a byte is relayed, and reported through on_notice. */
typedef enum lc_peers {
  LC_PEERS_OWNER = 0,          /**< the default: only this process's user (its real UID) */
  LC_PEERS_OWNER_AND_ROOT = 1, /**< that user and root */
  LC_PEERS_ANY = 2,            /**< anyone (no lookup: the behaviour before this option) */
} lc_peers;

/** Receives a notice of the engine (a refused peer: "127.0.0.1:40123: refused a connection from
 * uid 65534 (nobody): only uid 1000 (alice) may connect (...)"; a connection that sshd forwarded
 * to a -R forward from an address other than the host's loopback: "lab3: refused a connection to
 * our -R forward of port 60000 from 10.0.0.7:51234: ..."). Refusals are told at most 20 in 10 s;
 * the next one told says how many were held back. Engine thread: must not block. */
typedef void (*lc_engine_notice_cb)(const char *message, void *payload);

/** Options of an engine. A zero field means the default. */
typedef struct lc_engine_options {
  unsigned int version;
  /** Reserved for later use; keep zero. */
  unsigned int flags;
  /* version 2 */
  /** Who may connect to this engine's listeners: lc_peers; 0 is LC_PEERS_OWNER. Options of
   * version 1 get LC_PEERS_OWNER too: it is the safe way. */
  int peers;
  /** Notices, such as refused peers; NULL: dropped. Gets payload. */
  lc_engine_notice_cb on_notice;
  void *payload;
} lc_engine_options;

#define LC_ENGINE_OPTIONS_INIT {.version = LC_ENGINE_OPTIONS_VERSION}

/** Initialises opts to the defaults. */
LC_EXTERN void lc_engine_options_init(lc_engine_options *opts);

/**
 * Starts an engine thread with its loop. opts may be NULL (defaults: only this user may connect
 * to its listeners). Returns 0, -ENOMEM, -EINVAL (peers not an lc_peers), or LC_EINTERNAL when the
 * thread or loop cannot start.
 */
LC_EXTERN int lc_engine_new(lc_engine **out, const lc_engine_options *opts);

/**
 * Stops the engine thread and frees the engine. NULL is fine. Runtimes, processes (from
 * lc_runtime_spawn) and forwards of this engine that were not freed are freed here, as their own
 * free calls would (processes end, forwards close, connections close): their handles are dangling
 * afterwards, and using them is the caller's bug. Groups, clusters and job queues built on the
 * engine are not tracked: free them first.
 */
LC_EXTERN void lc_engine_free(lc_engine *engine);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_ENGINE_H */
