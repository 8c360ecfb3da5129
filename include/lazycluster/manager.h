/*
 * lazycluster/manager.h - finding the hosts a user has: from the ssh config (every concrete Host
 * alias), an explicit list, or an inventory file; checking them all at once; and keeping the
 * reachable ones that pass the filters as a group.
 *
 * Threads: any thread but the engine's.
 */
#ifndef LAZYCLUSTER_MANAGER_H
#define LAZYCLUSTER_MANAGER_H

#include "common.h"
#include "group.h"
#include "hostinfo.h"
#include "runtime.h"
#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_discovery lc_discovery;

#define LC_DISCOVER_OPTIONS_VERSION 3

/** Default limit of the facts step on each host (lc_discover_options.facts_timeout_ms). */
#define LC_DISCOVER_FACTS_TIMEOUT_MS 30000
/** A host's facts output beyond this many bytes makes it unreachable, with that reason. */
#define LC_DISCOVER_FACTS_MAX (16 * 1024 * 1024)

/** Where to look and what to keep. A zero field means the default. */
typedef struct lc_discover_options {
  unsigned int version;
  /**
   * Explicit hosts, "lab1,node[01-16],root@10.0.0.3:2222" (ranges as in lazycluster/inventory.h);
   * wins over the inventory and the config.
   */
  const char *hosts;
  /** An inventory file (one host a line, optional gpus=N slots=N); wins over the config. */
  const char *inventory;
  /** Runtime options for every host (ssh_config, timeouts, host key policy); NULL: defaults. */
  const lc_runtime_options *runtime;
  /** Keep only hosts with at least this many GPUs (declared or found). */
  int min_gpus;
  /** Keep only hosts with at least this much memory (bytes, cgroup limits applied). */
  uint64_t min_memory_bytes;
  /** Keep only hosts with at least this many usable cores. */
  double min_cores;
  /** Keep only hosts where all of these executables exist; NULL-terminated. */
  const char *const *executables;
  /** Hosts checked at once; default 64. */
  int fanout;
  /** Non-zero: read every reachable host's facts (implied by any filter). */
  int facts;
  /* ---- version 2 ---- */
  /**
   * Limit in ms of the facts step on each host (host info, GPUs through lazyclusterctl probe or
   * nvidia-smi); default LC_DISCOVER_FACTS_TIMEOUT_MS. A host past it is unreachable, its reason
   * naming the host and the step, and what the step started there is ended.
   */
  int facts_timeout_ms;
  /* ---- version 3 ---- */
  /**
   * When not NULL: once *cancel is non-zero, discovery
   * stops: no more hosts are connected (a connect under way ends by its connect timeout), the
   * facts steps running are told to stop (what they started on the hosts is ended), what it made
   * is freed, and lc_discover returns LC_ECANCELED. It is looked at every 100 ms, read with an
   * atomic load: set it from a signal handler (a plain store), or from another thread with an
   * atomic store (`__atomic_store_n(&flag, 1, __ATOMIC_RELAXED)`), as a plain store from a
   * thread is a data race.
   */
  const volatile sig_atomic_t *cancel;
} lc_discover_options;

#define LC_DISCOVER_OPTIONS_INIT                                                                   \
  { .version = LC_DISCOVER_OPTIONS_VERSION }

/** Initialises opts to the defaults. */
LC_EXTERN void lc_discover_options_init(lc_discover_options *opts);

/** What became of a candidate host. */
typedef enum lc_host_state {
  LC_HOST_READY = 1,       /**< reachable and passes the filters: in the group */
  LC_HOST_UNREACHABLE = 2, /**< refused, timed out, authentication or host key failed */
  LC_HOST_FILTERED = 3,    /**< reachable, but a filter left it out */
} lc_host_state;

/**
 * Finds, checks and filters the hosts; out_group gets the ready ones, out_report every candidate.
 * No candidate at all (no hosts given, no aliases in the config) gives an empty group.
 * Returns 0, -ENOENT/LC_ECONFIG for a bad inventory or config (the detail has FILE:LINE), -ENOMEM,
 * LC_ECANCELED when opts->cancel was set.
 */
LC_EXTERN int lc_discover(lc_group **out_group, lc_discovery **out_report, lc_engine *engine,
                          const lc_discover_options *opts);

/** Number of candidate hosts. */
LC_EXTERN size_t lc_discovery_count(const lc_discovery *d);
/** The i-th candidate as written (alias or spec). Borrowed. */
LC_EXTERN const char *lc_discovery_host(const lc_discovery *d, size_t i);
/** What became of it. */
LC_EXTERN lc_host_state lc_discovery_state(const lc_discovery *d, size_t i);
/** The error code when unreachable, else 0. */
LC_EXTERN int lc_discovery_error(const lc_discovery *d, size_t i);
/** Why it is unreachable or filtered out, or "". Borrowed. */
LC_EXTERN const char *lc_discovery_reason(const lc_discovery *d, size_t i);
/** Seconds to connect and authenticate (reachable hosts). */
LC_EXTERN double lc_discovery_latency(const lc_discovery *d, size_t i);
/** Its facts (reachable hosts), or NULL. Borrowed. */
LC_EXTERN const lc_hostinfo *lc_discovery_info(const lc_discovery *d, size_t i);
/** GPUs declared in the inventory (-1 when not declared). */
LC_EXTERN int lc_discovery_declared_gpus(const lc_discovery *d, size_t i);
/** Slots declared in the inventory (0 when not declared). */
LC_EXTERN int lc_discovery_slots(const lc_discovery *d, size_t i);
/** Frees a report. NULL is fine. */
LC_EXTERN void lc_discovery_free(lc_discovery *d);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_MANAGER_H */
