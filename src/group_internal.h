/*
 * group_internal.h - the group layer's internals, for the layers above it (clusters): the tunnel
 * mesh and the group's engine. Any thread but the engine's unless it says otherwise.
 */
#ifndef LC_GROUP_INTERNAL_H
#define LC_GROUP_INTERNAL_H

#include "runtime_internal.h"

#include "lazycluster/group.h"

/* Exposes port of owner (NULL: this machine) on this machine and every other runtime of g, so
 * that all meet on localhost:port; the forwards go into keep. Returns 0 or the first error. */
int lc__group_expose(lc_group *g, lc_runtime *owner, int port, lc__fwdlist *keep);
/* lc__group_expose of n ports, all at once. */
int lc__group_expose_many(lc_group *g, lc_runtime *const *owner, const int *port, size_t n,
                          lc__fwdlist *keep);
/* The engine g's runtimes run on. */
lc_engine *lc__group_engine(const lc_group *g);

#endif /* LC_GROUP_INTERNAL_H */
