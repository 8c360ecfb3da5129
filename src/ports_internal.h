/*
 * ports_internal.h - the reader of a host's listening ports (ss's output or /proc/net/tcp's)
 * behind lc_ports_listening and the host facts, shared with the unit tests, which feed it
 * recorded text.
 */
#ifndef LC_PORTS_INTERNAL_H
#define LC_PORTS_INTERNAL_H

#include "internal.h"

#include "lazycluster/ports.h"
#include "lazycluster/runtime.h"

/*
 * The listing of a host's listening TCP ports, IPv4 and IPv6: ss asked for listeners only, where
 * ss is; else /proc/net/tcp and /proc/net/tcp6. ss first because its kernel side visits only the
 * listening sockets, while reading /proc/net/tcp walks the whole established-connection table,
 * which is sized by the machine's memory, not by its connections (docs/benchmarks.md,
 * "Measurements quoted by the code", M1).
 */
#define LC__LISTING_COMMAND                                                                        \
  "ss -tn state listening 2>/dev/null || cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"

/* What one host's listing said (ss's or /proc/net/tcp's), read line by line. */
typedef struct lc__portscan {
  uint8_t listening[65536 / 8]; /* bit p: port p listens (state 0A) on some address */
  size_t headers;               /* header lines ("sl local_address ..."): 1 per file read */
  size_t entries;               /* socket lines understood, in any state */
  size_t skipped;               /* other lines: garbage, truncated, malformed */
} lc__portscan;

/*
 * Reads one line of a listing (without its newline; trailing blanks are fine): a header of ss or
 * of /proc/net/tcp{,6}; an ss line ("0 128 127.0.0.1:8786 0.0.0.0:*", "... [::1]:22 ...",
 * "... *:22 ...", "... 127.0.0.53%lo:53 ..."); a /proc/net/tcp entry ("0: 0100007F:1F90
 * 00000000:0000 0A ...") or a /proc/net/tcp6 one (32 hex digits for the address). Anything else
 * only counts as skipped.
 */
void lc__portscan_line(lc__portscan *s, const char *line, size_t len);

/* Reads text (the two files one after the other) line by line, as lc__portscan_line. */
void lc__portscan_text(lc__portscan *s, const char *text, size_t len);

/* The listening ports of s as a new set. Returns 0 or -ENOMEM. */
int lc__portscan_to_ports(lc_ports **out, const lc__portscan *s);

/*
 * The listening ports of n runtimes, read all at once into out[0..n-1]. Returns 0, or the first
 * failure ("lab3: cannot read its listening ports: ..."); -ETIMEDOUT after timeout_ms (0: the
 * default). Any thread but the engine's.
 */
int lc__ports_scan(lc__portscan *out, lc_runtime *const *rts, size_t n, int timeout_ms);

/*
 * Keeps listening (what a host's facts just read) on rt, so that the next lc__ports_scan of rt
 * within LC__FRESH_LISTING_MS takes it instead of another round trip; taken once. -ENOMEM or 0.
 */
#define LC__FRESH_LISTING_MS 2000
int lc__ports_keep_fresh(lc_runtime *rt, const lc_ports *listening);

/* One host's listing, started and judged apart (readiness watches many hosts at its own pace). */
typedef struct lc__listing lc__listing;
/* Starts a listing of rt's listening ports. Returns 0 or -ENOMEM (a failure to start shows in
 * lc__listing_finish). */
int lc__listing_start(lc__listing **out, lc_runtime *rt);
/* Waits up to timeout_ms: 1 when the listing is over, else 0. */
int lc__listing_wait(lc__listing *x, int timeout_ms);
/* Waits for the end and judges it: 0 with *scan (borrowed from x), or the failure's detail. */
int lc__listing_finish(lc__listing *x, const lc__portscan **scan);
/* Frees x, ending its process if it still runs. NULL is fine. */
void lc__listing_free(lc__listing *x);

#endif /* LC_PORTS_INTERNAL_H */
