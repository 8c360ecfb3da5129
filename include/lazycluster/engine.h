/*
 * lazycluster/engine.h - the engine: one libuv loop on one thread that owns every connection.
 *
 * Threads: lc_engine_new and lc_engine_free may be called from any thread except the engine's own.
 * Every runtime belongs to one engine; free the runtimes before the engine.
 */
#ifndef LAZYCLUSTER_ENGINE_H
#define LAZYCLUSTER_ENGINE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_engine lc_engine;

#define LC_ENGINE_OPTIONS_VERSION 1

/** Options of an engine. A zero field means the default. */
typedef struct lc_engine_options {
  unsigned int version;
  /** Reserved for later use; keep zero. */
  unsigned int flags;
} lc_engine_options;

#define LC_ENGINE_OPTIONS_INIT {.version = LC_ENGINE_OPTIONS_VERSION}

/** Initialises opts to the defaults. */
LC_EXTERN void lc_engine_options_init(lc_engine_options *opts);

/**
 * Starts an engine thread with its loop. opts may be NULL (defaults).
 * Returns 0, -ENOMEM, or LC_EINTERNAL when the thread or loop cannot start.
 */
LC_EXTERN int lc_engine_new(lc_engine **out, const lc_engine_options *opts);

/** Stops the engine thread and frees the engine. All its runtimes must be freed first. NULL is fine. */
LC_EXTERN void lc_engine_free(lc_engine *engine);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_ENGINE_H */
