/*
 * lazycluster/forward.h - SSH port forwarding both ways, like `ssh -L` and `ssh -R`.
 *
 * A local forward listens on this machine and reaches TARGET:TPORT as seen from the runtime's
 * host; a remote forward listens on the host and reaches TARGET:TPORT as seen from here. Each
 * forward carries many connections at once, with back-pressure both ways (memory per connection
 * stays bounded whatever the speeds) and half-close. Listeners bind to loopback only: on this
 * machine they take connections only from the peers lc_engine_options.peers allows (by default
 * this user); on a host, where sshd listens, the address sshd really bound is checked, and a
 * forward that sshd opened beyond loopback (its GatewayPorts setting) is closed again and fails.
 * When a host's connection drops, its forwards go down, their connections close, and the runtime
 * reconnects with backoff and brings them back up. On the local runtime a forward is a plain relay.
 *
 * Threads: lc_forward_new and lc_forward_free may be called from any thread but the engine's.
 * The state callback runs on the engine thread and must not block.
 */
#ifndef LAZYCLUSTER_FORWARD_H
#define LAZYCLUSTER_FORWARD_H

#include "common.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_forward lc_forward;

typedef enum lc_forward_kind {
  LC_FORWARD_LOCAL = 1,  /**< -L: listen here, reach the target from the host */
  LC_FORWARD_REMOTE = 2, /**< -R: listen on the host, reach the target from here */
} lc_forward_kind;

typedef enum lc_forward_state {
  LC_FORWARD_UP = 1,   /**< listening and relaying */
  LC_FORWARD_DOWN = 2, /**< the host's connection is down; coming back when it answers */
} lc_forward_state;

/** A forward changed state; detail says why ("lab3: connection lost: ..."). Engine thread. */
typedef void (*lc_forward_cb)(lc_forward *fwd, lc_forward_state state, const char *detail,
                              void *payload);

#define LC_FORWARD_OPTIONS_VERSION 3

/** Connections one forward carries at once unless its options say otherwise. */
#define LC_FORWARD_MAX_CONNECTIONS 1024

/** Options of a forward. A zero field means the default. */
typedef struct lc_forward_options {
  unsigned int version;
  /** Where the listener binds: "127.0.0.1" (default) or "::1"; nothing else is accepted. */
  const char *bind_address;
  /** State changes after the forward first came up, and a DOWN again when, back after a
   * reconnect, its listen on the host was refused (detail: why; it then stays down); NULL for
   * none. */
  lc_forward_cb on_state;
  void *payload;
  /* version 2 */
  /** Who may connect to its listener when it listens on this machine: lc_peers + 1 (so that 0
   * means the engine's lc_engine_options.peers). */
  int peers;
  /* version 3 */
  /** Connections carried at once; 0 means LC_FORWARD_MAX_CONNECTIONS (1024). One more is closed
   * as soon as it arrives (a reset here, a closed channel for a -R forward), and the first
   * refusal of each overflow is told through lc_engine_options.on_notice, naming the port. */
  int max_connections;
} lc_forward_options;

#define LC_FORWARD_OPTIONS_INIT {.version = LC_FORWARD_OPTIONS_VERSION}

/** Initialises opts to the defaults. */
LC_EXTERN void lc_forward_options_init(lc_forward_options *opts);

/**
 * Starts a forward and waits until it listens. port is where it listens (for a local forward,
 * 0 picks a free port; a remote forward needs an explicit port); target_host and target_port are
 * where its connections go. opts may be NULL.
 * Returns 0, -EADDRINUSE (the port is taken here or on the host: the detail names which),
 * LC_EFORWARD (the host refuses to forward, e.g. AllowTcpForwarding no), -EINVAL, LC_ECLOSED.
 */
LC_EXTERN int lc_forward_new(lc_forward **out, lc_runtime *rt, lc_forward_kind kind, int port,
                             const char *target_host, int target_port,
                             const lc_forward_options *opts);

/** The port the forward listens on (useful after asking for port 0). */
LC_EXTERN int lc_forward_port(const lc_forward *fwd);

/** Non-zero while the forward is up. */
LC_EXTERN int lc_forward_is_up(const lc_forward *fwd);

/** Stops listening, closes the forward's connections and frees it. NULL is fine. */
LC_EXTERN void lc_forward_free(lc_forward *fwd);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_FORWARD_H */
