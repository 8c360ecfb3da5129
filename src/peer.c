/*
 * peer.c - the peer check of our listeners on this machine. A loopback TCP connection carries no
 * credentials (SO_PEERCRED is for Unix sockets), but both of its ends are sockets of this
 * machine's kernel, which knows who owns each: the connection's 4-tuple, seen from the other end,
 * names the peer's socket, and one NETLINK_SOCK_DIAG request returns its owner's uid. Engine
 * thread only.
 */
#include "peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Refusal notices shown per window; the rest are counted and the count said with the next one
 * shown, so that a stranger who connects in a loop cannot flood the log. */
#define NOTICE_BURST 20
#define NOTICE_WINDOW_MS 10000

static int diag_open(int *nl, lc__err *err) {
  struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
  struct timeval tv = {.tv_sec = 1}; /* the kernel answers within the send; this is a backstop */
  int fd;
  if (*nl >= 0)
    return 0;
  if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) < 0)
    return lc__err_set(err, -errno, "cannot open a NETLINK_SOCK_DIAG socket: %s", strerror(errno));
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
    int e = errno;
    close(fd);
    return lc__err_set(err, -e, "cannot set up a NETLINK_SOCK_DIAG socket: %s", strerror(e));
  }
  *nl = fd;
  return 0;
}

void lc__peer_close(int *nl) {
  if (*nl >= 0)
    close(*nl);
  *nl = -1;
}

/* The port and address bytes of a TCP endpoint; 0 or -EAFNOSUPPORT. */
static int endpoint(const struct sockaddr_storage *ss, int family, __be16 *port, __be32 addr[4]) {
  memset(addr, 0, 16);
  if (ss->ss_family != family)
    return -EAFNOSUPPORT;
  if (family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    *port = a->sin_port;
    memcpy(addr, &a->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    *port = a->sin6_port;
    memcpy(addr, &a->sin6_addr, 16);
  }
  return 0;
}

int lc__peer_lookup(lc__peer *out, int *nl, int fd, lc__err *err) {
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } msg;
  struct sockaddr_storage mine, theirs;
  socklen_t ml = sizeof(mine), tl = sizeof(theirs);
  union {
    char bytes[8192];
    struct nlmsghdr align;
  } buf;
  static unsigned int seq; /* shared by every engine's thread: atomic */
  ssize_t n;
  int r = LC_EINTERNAL, family;

  memset(out, 0, sizeof(*out));
  if (getsockname(fd, (struct sockaddr *)&mine, &ml) < 0 ||
      getpeername(fd, (struct sockaddr *)&theirs, &tl) < 0) {
    r = lc__err_set(err, -errno, "the connection is gone before it could be checked: %s",
                    strerror(errno));
    goto out;
  }
  family = mine.ss_family;
  if (family != AF_INET && family != AF_INET6) {
    r = lc__err_set(err, -EAFNOSUPPORT, "not an IPv4 or IPv6 connection");
    goto out;
  }
  memset(&msg, 0, sizeof(msg));
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST; /* one exact socket, not a dump */
  msg.nlh.nlmsg_seq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
  msg.req.sdiag_family = (__u8)family;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  /* the peer's socket: its source is our peer address, its destination our address */
  if ((r = endpoint(&theirs, family, &msg.req.id.idiag_sport, msg.req.id.idiag_src)) < 0 ||
      (r = endpoint(&mine, family, &msg.req.id.idiag_dport, msg.req.id.idiag_dst)) < 0) {
    r = lc__err_set(err, r, "the connection's two ends are of different address families");
    goto out;
  }
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if ((r = diag_open(nl, err)) < 0)
    goto out;
  if (send(*nl, &msg, sizeof(msg), 0) < 0) {
    r = lc__err_set(err, -errno, "NETLINK_SOCK_DIAG request failed: %s", strerror(errno));
    lc__peer_close(nl); /* a fresh socket next time */
    goto out;
  }
  for (;;) {
    if ((n = recv(*nl, buf.bytes, sizeof(buf.bytes), 0)) < 0) {
      if (errno == EINTR)
        continue;
      r = lc__err_set(err, -errno, "no answer to a NETLINK_SOCK_DIAG request: %s", strerror(errno));
      lc__peer_close(nl);
      goto out;
    }
    for (struct nlmsghdr *h = &buf.align; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      const struct inet_diag_msg *d = NLMSG_DATA(h);
      if (h->nlmsg_seq != msg.nlh.nlmsg_seq)
        continue; /* an answer to an earlier request that timed out */
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(h);
        r = e->error == -ENOENT
                ? lc__err_set(err, -ENOENT,
                              "its socket is not in the kernel's table (gone "
                              "already, or not on this machine)")
                : lc__err_set(err, e->error < 0 ? e->error : -EPROTO,
                              "NETLINK_SOCK_DIAG refused the request: %s", strerror(-e->error));
        goto out;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(*d)))
        continue;
      /* the lookup can fall back on a listener of that address and port: only the very socket */
      if (d->idiag_state == TCP_LISTEN || d->id.idiag_sport != msg.req.id.idiag_sport ||
          d->id.idiag_dport != msg.req.id.idiag_dport) {
        r = lc__err_set(err, -ENOENT, "its socket is not in the kernel's table (gone already)");
        goto out;
      }
      if (d->idiag_state == TCP_TIME_WAIT || d->idiag_inode == 0) {
        r = lc__err_set(err, -ENOENT,
                        "it closed its socket before it could be checked, so its "
                        "owner is unknown");
        goto out;
      }
      out->uid = (uid_t)d->idiag_uid;
      out->inode = d->idiag_inode;
      out->state = d->idiag_state;
      r = 0;
      goto out;
    }
  }
out:
  return r;
}

/* "nobody" for uid, or "" when it has no name here. */
static void user_name(uid_t uid, char *out, size_t size) {
  struct passwd pw, *found = NULL;
  char buf[2048];
  out[0] = '\0';
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != NULL)
    snprintf(out, size, "%s", found->pw_name);
}

/* "uid 65534 (nobody)" */
static void describe_uid(uid_t uid, char *out, size_t size) {
  char name[256];
  user_name(uid, name, sizeof(name));
  snprintf(out, size, name[0] ? "uid %u (%s)" : "uid %u", (unsigned)uid, name);
}

int lc__peer_notice_allowed(lc_engine *e, char *more, size_t size) {
  lc__peers_state *ps = lc__engine_peers_state(e);
  uint64_t now = lc__now_ms();
  if (size > 0)
    more[0] = '\0';
  if (now - ps->window_start_ms >= NOTICE_WINDOW_MS) {
    ps->window_start_ms = now;
    ps->shown = 0;
  }
  if (ps->shown >= NOTICE_BURST) {
    ps->held++;
    return 0;
  }
  ps->shown++;
  if (ps->held > 0)
    snprintf(more, size, " (%lu more refused before this one, not shown)", ps->held);
  ps->held = 0;
  return 1;
}

static void refuse(lc_engine *e, lc__peers_state *ps, int policy, const char *bind, int port,
                   const lc__peer *p, const char *why) {
  char who[320], owner[320], msg[1024], more[96];
  int v6 = strchr(bind, ':') != NULL;
  if (!lc__peer_notice_allowed(e, more, sizeof(more)))
    return;
  describe_uid(ps->owner, owner, sizeof(owner));
  if (why != NULL) {
    snprintf(msg, sizeof(msg), "%s%s%s:%d: refused a connection: cannot tell who made it: %s%s",
             v6 ? "[" : "", bind, v6 ? "]" : "", port, why, more);
  } else {
    describe_uid(p->uid, who, sizeof(who));
    snprintf(msg, sizeof(msg),
             "%s%s%s:%d: refused a connection from %s: only %s%s may connect (who may: "
             "lazyclusterctl --peers, lc_engine_options.peers)%s",
             v6 ? "[" : "", bind, v6 ? "]" : "", port, who, owner,
             policy == LC_PEERS_OWNER_AND_ROOT && ps->owner != 0 ? " and root" : "", more);
  }
  lc__engine_notice(e, msg);
}

int lc__peer_admit(lc_engine *e, int policy, uv_tcp_t *client, const char *bind, int port) {
  lc__peers_state *ps = lc__engine_peers_state(e);
  lc__peer p;
  lc__err err = {0};
  uv_os_fd_t fd;
  if (policy < 0)
    policy = ps->policy;
  if (policy == LC_PEERS_ANY)
    return 1;
  if (uv_fileno((uv_handle_t *)client, &fd) < 0) {
    refuse(e, ps, policy, bind, port, NULL, "it has no socket");
    return 0;
  }
  if (lc__peer_lookup(&p, &ps->nl, fd, &err) < 0) {
    refuse(e, ps, policy, bind, port, NULL, err.msg);
    return 0;
  }
  if (p.uid == ps->owner || (policy == LC_PEERS_OWNER_AND_ROOT && p.uid == 0))
    return 1;
  refuse(e, ps, policy, bind, port, &p, NULL);
  return 0;
}
