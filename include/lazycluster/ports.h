/*
 * lazycluster/ports.h - TCP port lists as users write them, free ports here and on hosts, and
 * the process-wide reservation of ports handed out.
 *
 * Threads: lc_ports_listening and lc_ports_common_free may be called from any thread except the
 * engine thread (so not from inside a callback); they run commands on runtimes and wait for them.
 * Every other function here may be called from any thread. An lc_ports is not locked: many
 * threads may read one at once, but a thread that changes it (lc_ports_add) must be alone with it.
 * The reservations (lc_port_reserve, lc_port_release, and the port lc_ports_common_free hands
 * out) are one set per process, guarded by a mutex.
 */
#ifndef LAZYCLUSTER_PORTS_H
#define LAZYCLUSTER_PORTS_H

#include "common.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A set of TCP ports (1-65535), kept as sorted, merged ranges. */
typedef struct lc_ports lc_ports;

/** Makes an empty set. Free it with lc_ports_free. Returns 0, -EINVAL (out is NULL), -ENOMEM. */
LC_EXTERN int lc_ports_new(lc_ports **out);

/**
 * Parses a port list as users write it: ports and ranges separated by commas, spaces around the
 * commas allowed ("8786", "60000-60199", "61000-61010, 62000"). Overlapping or repeated items
 * are merged. Free the set with lc_ports_free.
 * Returns 0, -EINVAL (an empty list, an empty item, junk, port 0, a port above 65535, a range
 * whose first port is above its last; lc_error_last() quotes the bad item and the whole list),
 * -ENOMEM.
 */
LC_EXTERN int lc_ports_parse(lc_ports **out, const char *spec);

/** Frees a set. NULL is fine. */
LC_EXTERN void lc_ports_free(lc_ports *ports);

/**
 * Adds the ports first..last (both included; first == last for one port), merging with what is
 * there. Returns 0, -EINVAL (a NULL set, a port outside 1-65535, first above last), -ENOMEM.
 */
LC_EXTERN int lc_ports_add(lc_ports *ports, int first, int last);

/** How many ports the set holds; 0 for NULL. */
LC_EXTERN size_t lc_ports_count(const lc_ports *ports);

/**
 * The i-th port of the set in ascending order (0 <= i < lc_ports_count), so that
 * `for (i = 0; i < lc_ports_count(p); i++) lc_ports_at(p, i)` visits every port.
 * Returns 0 when i is out of range or ports is NULL.
 */
LC_EXTERN int lc_ports_at(const lc_ports *ports, size_t i);

/** Non-zero when port is in the set; 0 otherwise and for NULL. */
LC_EXTERN int lc_ports_contains(const lc_ports *ports, int port);

/**
 * Writes the set back as text in its merged, sorted form ("8786,60000-60199"; "" for an empty
 * set), which lc_ports_parse reads back unless it is empty. Free *out with lc_free.
 * Returns 0, -EINVAL (a NULL argument), -ENOMEM.
 */
LC_EXTERN int lc_ports_format(char **out, const lc_ports *ports);

/**
 * Whether port is free on this machine: a wildcard bind of it succeeds, for IPv4 (0.0.0.0) and,
 * where the machine has IPv6, for IPv6 ([::], IPv6 only), without SO_REUSEADDR; the sockets are
 * closed at once. A listener or a bound socket on any address makes it taken, and so does a port
 * this process may not bind (below 1024 without the right). The port is not reserved by this.
 * Returns 1 (free), 0 (taken), -EINVAL (port outside 1-65535) or another negative errno when no
 * socket can be made.
 */
LC_EXTERN int lc_port_is_free_local(int port);

/**
 * The TCP ports that listen on the host of rt, on any address, IPv4 and IPv6, read in one round
 * trip (one command: /proc/net/tcp and /proc/net/tcp6). timeout_ms 0 means 30000.
 * Free *out with lc_ports_free.
 * Returns 0, -ETIMEDOUT, LC_ECLOSED (the connection dropped), LC_EREMOTE (the host has no
 * readable /proc/net/tcp), -EINVAL; lc_error_last() names the host.
 */
LC_EXTERN int lc_ports_listening(lc_ports **out, lc_runtime *rt, int timeout_ms);

/**
 * Waits until port listens on rt (as lc_ports_listening sees it) while proc, the process that
 * should listen there, runs: its end ends the wait at once, since every pause is a wait on it
 * (10 ms at first, growing to 50 ms). Each look probes 127.0.0.1:port on the host (on SSH a
 * direct-tcpip channel: no session channel, no process there); a listing of the host runs once
 * the probe got through, every second meanwhile (a failed probe may also be a forward the host's
 * sshd refuses: only a listing tells), and at every look where the backend knows it cannot
 * probe. For a launcher's wait_ready (lc_cluster_master_runtime and
 * lc_cluster_master_process give both). A listener on port owned by a uid other than the one
 * rt runs as (where the host tells owners: ss -e or /proc/net/tcp's uid column) is never taken
 * for proc's: the wait ends at once. Returns 0; -ETIMEDOUT after timeout_ms; LC_EREMOTE when proc
 * ended (also when it ended as the port listened: someone else's listener); -EADDRINUSE when
 * another uid listens on port (the detail names that uid and its address); -EINVAL. The detail
 * names the host and the port.
 */
LC_EXTERN int lc_ports_wait_listening(lc_runtime *rt, int port, lc_process *proc, int timeout_ms);

/**
 * The first port of ranges, in ascending order, that no host of rts[0..n-1] listens on, that is
 * free on this machine (lc_port_is_free_local) and that this process has not reserved; it comes
 * back reserved until lc_port_release. The hosts' listening ports are read concurrently, one
 * round trip each, at most 30 s. n may be 0 (rts may then be NULL): this machine only.
 * A host's listing is a snapshot: when the service then fails with "address in use", call again
 * for the next port (and release the first).
 * Returns 0, LC_ENOPORTS (no port left; the detail names the ranges and how many hosts were
 * checked), the error of a host whose listing failed (the detail names it), -EINVAL (a NULL out
 * or ranges, an empty range, a NULL runtime).
 */
LC_EXTERN int lc_ports_common_free(int *out, lc_runtime *const *rts, size_t n,
                                   const lc_ports *ranges);

/**
 * Reserves port in this process, for a port the caller chose itself, so that
 * lc_ports_common_free never hands it out. Returns 0, -EADDRINUSE (already reserved), -EINVAL
 * (port outside 1-65535).
 */
LC_EXTERN int lc_port_reserve(int port);

/**
 * Ends the reservation of port, so that lc_ports_common_free may hand it out again.
 * Returns 0, -ENOENT (it was not reserved), -EINVAL (port outside 1-65535).
 */
LC_EXTERN int lc_port_release(int port);

/** Non-zero when port is reserved in this process. */
LC_EXTERN int lc_port_is_reserved(int port);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_PORTS_H */
