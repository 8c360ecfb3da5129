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
 * The listing of a host's TCP ports, IPv4 and IPv6, listening or held by a connection: ss where
 * it is; else /proc/net/tcp and /proc/net/tcp6. A port that a connection holds as its local port
 * (one the kernel gave a connection from its ephemeral range, a tunnel's through sshd or any
 * other) cannot be bound by a listener, SO_REUSEADDR or not, so a port is free on a host only when
 * neither listens nor is held; TIME-WAIT holds nothing for a listener that sets SO_REUSEADDR, as
 * servers do. Asking for every state makes the kernel walk its established-connection table,
 * sized by the machine's memory (docs/benchmarks.md, "Measurements quoted by the code", M1: about
 * 5 ms of a host's CPU per listing against under 0.1 ms for listeners alone): paid once or
 * twice per host and start. Readiness, which looks many times, asks for listeners alone.
 */
#define LC__LISTING_COMMAND                                                                        \
  "ss -tnae exclude time-wait 2>/dev/null || cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"
/* Listeners alone, for readiness's looks at ports too many for one ss filter (listing.c). */
#define LC__LISTENERS_COMMAND                                                                      \
  "ss -tne state listening 2>/dev/null || cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"

/*
 * Who reads a host's listing, in one line: "lc-uid N LOOPBACK", N the reader's uid (ss -e and
 * /proc/net/tcp give each socket's uid, so that a listing can judge whose a listener is) and
 * LOOPBACK the host's boot id and network namespace ("3f1c...-...net:[4026531840]"; empty where
 * Linux does not say). Two hosts with the same LOOPBACK share one 127.0.0.1: an SSH host that is
 * this very machine (an sshd on localhost, a shared ~/.ssh/config that lists the machine one runs
 * on) or two names of one host. The facts script says it too. Once a host's uid and loopback are
 * known the runtime keeps them, and later listings of that host save the forks.
 */
#define LC__LISTING_WHO                                                                            \
  "echo lc-uid $(id -u) $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)$(readlink "             \
  "/proc/self/ns/net 2>/dev/null)"

/* The listing, first saying who reads it. */
#define LC__LISTING_COMMAND_UID LC__LISTING_WHO "; " LC__LISTING_COMMAND

/* A loopback's id (lc__portscan.loopback, lc_runtime.loopback): a hash of the LOOPBACK text; 0
 * unknown, 1 asked but not told (a host that is not Linux). */
#define LC__LOOPBACK_UNKNOWN 0
#define LC__LOOPBACK_UNTOLD 1
/* The id of LOOPBACK text (len bytes, blanks around it ignored): LC__LOOPBACK_UNTOLD when it
 * names no network namespace, else a hash above 1. */
uint64_t lc__loopback_id(const char *text, size_t len);
/* The id of this machine's own loopback (this process's boot id and network namespace), read
 * once; LC__LOOPBACK_UNTOLD where Linux does not say. */
uint64_t lc__loopback_here(void);

/* One listener of a watched port, as the listing told it (duplicates, as SO_REUSEPORT makes them,
 * are kept once). */
typedef struct lc__listener {
  int port;
  int v6;           /* addr is IPv6 (else IPv4 in addr[0..3]) */
  int unknown;      /* the address could not be read ("*", old ss formats): taken as any */
  uint8_t addr[16]; /* network order */
  long uid;         /* the socket's owner; -1 when the listing did not say */
} lc__listener;

/* What one host's listing said (ss's or /proc/net/tcp's), read line by line. */
typedef struct lc__portscan {
  /* the ports that listen (state 0A) on some address, ascending, each once (lc__portscan_add):
   * a host listens on tens of ports, a mesh host on its W, not on 65,536 (a bitmap of 8 KiB for
   * each of the hosts' scans that are kept at once: 1 MiB at 64 hosts) */
  uint16_t *listen;
  size_t nlisten, listen_cap;
  /* the local ports of the connections listed (any state but TIME-WAIT and closed; the other
   * end's port is not this host's), ascending, each once (lc__portscan_add_held) */
  uint16_t *held;
  size_t nheld, held_cap;
  int nomem; /* a port could not be kept: the scan is incomplete (lc__portscan_to_ports fails) */
  size_t headers; /* header lines ("sl local_address ..."): 1 per file read */
  size_t entries; /* socket lines understood, in any state */
  size_t skipped; /* other lines: garbage, truncated, malformed */
  int has_uid;    /* an "lc-uid N" line came: uid is who read the listing */
  unsigned long uid;
  uint64_t loopback; /* with has_uid: the line's LOOPBACK (lc__loopback_id) */
  /* in detail, the caller's to set (NULL: nothing kept): the listeners of the watched ports go
   * into found[0..nfound), at most found_max (0: found_cap); more are only counted in
   * found_over. watch is a bitmap of ports from watch_lo (bit p - watch_lo) up to watch_hi (0:
   * every port). found grows from found_cap up to found_max as listeners come (lc__realloc). */
  const uint8_t *watch;
  int watch_lo, watch_hi;
  lc__listener *found;
  size_t nfound, found_cap, found_max, found_over;
  /* optional, with found (lc__portscan_index): found by port, so that a listing of thousands of
   * listeners (a host of a large mesh) is read and judged in linear time, not quadratic: bucket
   * port & mask holds 1 + the index of its first entry, next[k] 1 + the one after k (0 ends) */
  uint32_t *heads, *next;
  size_t mask;
} lc__portscan;

/* Adds port to s's listening ports, or to the ports that its connections hold. Returns 0 or
 * -ENOMEM (then s->nomem is set). */
int lc__portscan_add(lc__portscan *s, int port);
int lc__portscan_add_held(lc__portscan *s, int port);
/* Whether port listens in s. */
int lc__portscan_listens(const lc__portscan *s, int port);
/* Whether port is taken in s: it listens or a connection holds it (no listener can bind it). */
int lc__portscan_taken(const lc__portscan *s, int port);
/* Frees s's listening ports (found and its index are the caller's). */
void lc__portscan_clear(lc__portscan *s);
/* lc__portscan_clear, then free(s) (s from lc__calloc); NULL is fine. */
void lc__portscan_free(lc__portscan *s);

/* Gives s (found, found_cap and found_max set) its index by port; lc__portscan_unindex frees
 * it. Without one every look walks all of found. Returns 0 or -ENOMEM. */
int lc__portscan_index(lc__portscan *s);
void lc__portscan_unindex(lc__portscan *s);
/* The listeners kept for port, in found: for (k = lc__portscan_first(s, port); k < s->nfound;
 * k = lc__portscan_next(s, k)) - found[k].port == port each time. */
size_t lc__portscan_first(const lc__portscan *s, int port);
size_t lc__portscan_next(const lc__portscan *s, size_t k);

/*
 * Reads one line of a listing (without its newline; trailing blanks are fine): a header of ss or
 * of /proc/net/tcp{,6}; an ss line ("0 128 127.0.0.1:8786 0.0.0.0:*", "... [::1]:22 ...",
 * "... *:22 ...", "... 127.0.0.53%lo:53 ..."); a /proc/net/tcp entry ("0: 0100007F:1F90
 * 00000000:0000 0A ...") or a /proc/net/tcp6 one (32 hex digits for the address). Anything else
 * only counts as skipped.
 */
void lc__portscan_line(lc__portscan *s, const char *line, size_t len);

/* The same for ss's extended columns ("uid:1000 ino:... sk:..."; no uid: column is uid 0),
 * /proc/net/tcp's uid column, and "lc-uid N LOOPBACK" (has_uid, uid, loopback). */

/* Reads text (the two files one after the other) line by line, as lc__portscan_line. */
void lc__portscan_text(lc__portscan *s, const char *text, size_t len);

/* Whether l listens on loopback only: 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
int lc__listener_is_loopback(const lc__listener *l);
/* Writes l as "0.0.0.0:60000", "[::]:60000" or "*:60000" into buf (size n). */
void lc__listener_format(const lc__listener *l, char *buf, size_t n);
/* The first listener of port in s that belongs to another uid than the listing's reader; NULL
 * when there is none, or when s cannot tell (no "lc-uid" line). */
const lc__listener *lc__portscan_stranger(const lc__portscan *s, int port);
/* Whether port listens in s for the listing's reader: one of its listeners has the reader's uid
 * (or s cannot tell whose they are, and the port listens). */
int lc__portscan_ours(const lc__portscan *s, int port);

/* The listening ports of s as a new set, or (held) the ports its connections hold. Returns 0 or
 * -ENOMEM. */
int lc__portscan_to_ports(lc_ports **out, const lc__portscan *s);
int lc__portscan_held_to_ports(lc_ports **out, const lc__portscan *s);

/*
 * The listening ports of n runtimes, read all at once into out[0..n-1]. Returns 0, or the first
 * failure ("lab3: cannot read its listening ports: ..."); -ETIMEDOUT after timeout_ms (0: the
 * default). Any thread but the engine's.
 */
int lc__ports_scan(lc__portscan *out, lc_runtime *const *rts, size_t n, int timeout_ms);

/*
 * Keeps listening and held (what a host's facts just read; held NULL: none) on rt, so that the
 * next lc__ports_scan of rt within LC__FRESH_LISTING_MS takes them instead of another round trip;
 * taken once. -ENOMEM or 0.
 */
#define LC__FRESH_LISTING_MS 2000
int lc__ports_keep_fresh(lc_runtime *rt, const lc_ports *listening, const lc_ports *held);

/* One host's listing, started and judged apart (readiness watches many hosts at its own pace). */
/* Probes of ports on one host (the backend's probe op: a connection to 127.0.0.1:PORT there,
 * no process, no session channel), from any thread but the engine's. start: all at once
 * (-ENOMEM); wait: 1 once all answered (timeout_ms 0: a look); result: per port, 1 accepted, 0
 * not accepted (refused, or a failure the backend cannot explain: read a listing now and then),
 * negative when the backend knows it cannot tell (then read listings); free: also before they
 * answered (the engine frees it then). */
typedef struct lc__probe lc__probe;
int lc__probe_start(lc__probe **out, lc_runtime *rt, const int *ports, size_t n);
int lc__probe_wait(lc__probe *x, int timeout_ms);
const int *lc__probe_result(const lc__probe *x, const int **ports, size_t *n);
void lc__probe_free(lc__probe *x);

typedef struct lc__listing lc__listing;
/* Starts a listing of rt's listening ports; with ports (n of them; NULL: none) it also tells
 * whose they are (lc__portscan_ours, _stranger). Returns 0 or -ENOMEM (a failure to start shows
 * in lc__listing_finish). Any thread but the engine's. */
int lc__listing_start(lc__listing **out, lc_runtime *rt, const int *ports, size_t n);
/* Waits up to timeout_ms: 1 when the listing is over, else 0. */
int lc__listing_wait(lc__listing *x, int timeout_ms);
/* Waits for the end and judges it: 0 with *scan (borrowed from x), or the failure's detail. */
int lc__listing_finish(lc__listing *x, const lc__portscan **scan);
/* Frees x, ending its process if it still runs. NULL is fine. */
void lc__listing_free(lc__listing *x);

/*
 * The same on the engine thread (a backend checking what its host bound): done(x, arg) runs on
 * the engine thread when the listing ended, possibly before lc__listing_launch returns (*out is
 * set first); then lc__listing_result tells how it went and lc__listing_drop frees x (also one
 * still running: done is then never called). Returns 0, or an error without calling done.
 */
int lc__listing_launch(lc__listing **out, lc_runtime *rt, const int *ports, size_t n,
                       void (*done)(lc__listing *x, void *arg), void *arg);
/* 0 with *scan, or the failure's code with *msg ("lab3: cannot read its listening ports: ..."). */
int lc__listing_result(const lc__listing *x, const lc__portscan **scan, const char **msg);
void lc__listing_drop(lc__listing *x);

/*
 * Whose port is in ps, a listing of rt with port watched: 1 when it listens for rt's user alone,
 * 0 when it does not listen, -EADDRINUSE when another uid listens there ("lab2: port 60001 is
 * listened on by uid 65534, not by WHOSE (127.0.0.1:60001): another user took the port").
 */
int lc__ports_judge_owner(lc_runtime *rt, int port, const lc__portscan *ps, const char *whose);

#endif /* LC_PORTS_INTERNAL_H */
