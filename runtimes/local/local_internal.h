/*
 * local_internal.h - shared between the local backend's files (runtimes/local/). Engine thread
 * only.
 */
#ifndef LC_LOCAL_INTERNAL_H
#define LC_LOCAL_INTERNAL_H

#include "../../src/runtime_internal.h"

extern const lc__backend_ops lc__local_ops;

/* Relays a connected local stream to another: both are owned by the relay, which belongs to f
 * (in f->relays) until either side closes. */
void lc__local_relay_streams(lc_forward *f, uv_stream_t *a, uv_stream_t *b);
/* Closes every stream relay of f now. */
void lc__local_relays_close(lc_forward *f);

#endif /* LC_LOCAL_INTERNAL_H */
