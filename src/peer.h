/*
 * peer.h - who is at the other end of a loopback TCP connection that a listener of ours accepted
 * on this machine: the owner of the peer's socket, as the kernel's socket diagnostics
 * (NETLINK_SOCK_DIAG, what `ss -tep` shows) report it, and whether lc_engine_options.peers lets
 * that user in. Internal to the library; engine thread only.
 */
#ifndef LC_PEER_H
#define LC_PEER_H

#include "engine.h"

#include <sys/types.h>

/* The peer socket of an accepted connection. */
typedef struct lc__peer {
  uid_t uid;           /* its owner */
  unsigned long inode; /* its inode (socket:[INODE] in /proc/PID/fd) */
  int state;           /* its TCP state (TCP_ESTABLISHED, ...) */
} lc__peer;

/*
 * Looks up the peer socket of fd, a TCP connection on loopback (IPv4 or IPv6) accepted here: one
 * exact 4-tuple request (inet_diag_req_v2) on *nl, a NETLINK_SOCK_DIAG socket opened on first use
 * and kept (pass -1 the first time; close it with lc__peer_close). A peer that already closed its
 * socket (an orphan or TIME-WAIT entry, whose owner the kernel no longer knows) is -ENOENT too.
 * Returns 0, -ENOENT (no such socket, or gone; err says which), -EAFNOSUPPORT (not TCP over
 * IPv4/IPv6), or the errno of a failed netlink call (err names it).
 */
int lc__peer_lookup(lc__peer *out, int *nl, int fd, lc__err *err);

/* Closes a socket lc__peer_lookup opened; -1 is fine. */
void lc__peer_close(int *nl);

/*
 * Whether a refusal notice may be shown now: at most 20 per 10 s and engine (peer.c), the
 * rest counted, so that a stranger who connects in a loop cannot flood the log. The peer check
 * and the -R forwards' refusals share the one limit. When allowed, more gets "" or, after held
 * notices, " (N more refused before this one, not shown)" to end the message with. Returns 1
 * (show it: lc__engine_notice) or 0 (counted, not shown).
 */
int lc__peer_notice_allowed(lc_engine *e, char *more, size_t size);

/*
 * Whether the peer of client, just accepted on a listener of ours at bind:port, may connect under
 * policy (an lc_peers; -1: the engine's). A refused peer is reported through the engine's
 * on_notice, naming the listener, the peer's uid and user; the caller closes the connection.
 * With LC_PEERS_ANY no lookup is made. Returns 1 (let it in) or 0 (refuse it).
 */
int lc__peer_admit(lc_engine *e, int policy, uv_tcp_t *client, const char *bind, int port);

#endif /* LC_PEER_H */
