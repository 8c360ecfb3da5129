/*
 * test_peer.c - the peer lookup of src/peer.c on loopback connections of this machine: the owner
 * and inode NETLINK_SOCK_DIAG reports for the other end of an accepted connection, over IPv4 and
 * IPv6, for this user and (as root, which CI is) for uid 65534; a peer that closed its socket is
 * not taken for anyone. No network beyond loopback.
 */
#include "peer.h"

#include "lc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A listener on the loopback of family (AF_INET or AF_INET6); its port in *port. */
static int listen_loopback(int family, int *port) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&ss, 0, sizeof(ss));
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*a);
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof(*a);
  }
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 8) < 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return fd;
}

static int connect_loopback(int family, int port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int r;
  if (fd < 0)
    return -1;
  if (family == AF_INET) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r = connect(fd, (struct sockaddr *)&a, sizeof(a));
  } else {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    a.sin6_addr = in6addr_loopback;
    r = connect(fd, (struct sockaddr *)&a, sizeof(a));
  }
  if (r < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void own_peer(int family) {
  lc__peer p;
  lc__err err = {0};
  struct stat st;
  int nl = -1, port = 0, l, c, a;
  LC_REQUIRE((l = listen_loopback(family, &port)) >= 0);
  LC_REQUIRE((c = connect_loopback(family, port)) >= 0);
  LC_REQUIRE((a = accept(l, NULL, NULL)) >= 0);
  LC_CHECK(fstat(c, &st) == 0);
  LC_CHECK_OK(lc__peer_lookup(&p, &nl, a, &err));
  LC_CHECK(p.uid == getuid());
  LC_CHECK(p.inode == (unsigned long)st.st_ino); /* the very socket, not the listener or ours */
  LC_CHECK(nl >= 0);
  /* the socket is kept for the next lookup */
  LC_CHECK_OK(lc__peer_lookup(&p, &nl, a, &err));
  LC_CHECK(p.inode == (unsigned long)st.st_ino);
  /* looked up from the other side, the peer is the accepted socket, whose inode is a's */
  LC_CHECK_OK(lc__peer_lookup(&p, &nl, c, &err));
  LC_CHECK(fstat(a, &st) == 0 && p.inode == (unsigned long)st.st_ino);
  lc__peer_close(&nl);
  LC_CHECK(nl == -1);
  close(a);
  close(c);
  close(l);
}

static void test_own_peer_ipv4(void) { own_peer(AF_INET); }
static void test_own_peer_ipv6(void) { own_peer(AF_INET6); }

/* The peer closed before the lookup: its entry (orphaned, or TIME-WAIT with uid 0) names nobody,
 * so it must not pass for root. */
static void test_closed_peer(void) {
  lc__peer p;
  lc__err err = {0};
  int nl = -1, port = 0, l, c, a, r;
  LC_REQUIRE((l = listen_loopback(AF_INET, &port)) >= 0);
  LC_REQUIRE((c = connect_loopback(AF_INET, port)) >= 0);
  LC_REQUIRE((a = accept(l, NULL, NULL)) >= 0);
  close(c);
  r = lc__peer_lookup(&p, &nl, a, &err);
  fprintf(stderr, "  (%s)\n", err.msg);
  LC_CHECK(r == -ENOENT);
  LC_CHECK(strstr(err.msg, "closed its socket") != NULL || strstr(err.msg, "not in the") != NULL);
  lc__peer_close(&nl);
  close(a);
  close(l);
}

/* A socket that is not a connection: its peer is unknown. */
static void test_not_connected(void) {
  lc__peer p;
  lc__err err = {0};
  int nl = -1, port = 0, l;
  LC_REQUIRE((l = listen_loopback(AF_INET, &port)) >= 0);
  LC_CHECK(lc__peer_lookup(&p, &nl, l, &err) < 0);
  LC_CHECK(err.msg[0] != '\0');
  lc__peer_close(&nl);
  close(l);
}

/* Another user's connection (uid 65534): its uid, not ours. Needs root to become that user; CI
 * runs as root. */
static void another_uid(int family) {
  lc__peer p;
  lc__err err = {0};
  int nl = -1, port = 0, l, a, go[2];
  pid_t pid;
  LC_REQUIRE(geteuid() == 0);
  LC_REQUIRE((l = listen_loopback(family, &port)) >= 0);
  LC_REQUIRE(pipe(go) == 0);
  if ((pid = fork()) == 0) {
    char b;
    int c;
    close(go[1]);
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0 || (c = connect_loopback(family, port)) < 0)
      _exit(1);
    if (read(go[0], &b, 1) < 0) /* hold the connection until the parent looked */
      _exit(1);
    close(c);
    _exit(0);
  }
  close(go[0]);
  a = accept(l, NULL, NULL);
  LC_CHECK(a >= 0);
  if (a >= 0) {
    LC_CHECK_OK(lc__peer_lookup(&p, &nl, a, &err));
    LC_CHECK(p.uid == 65534);
    close(a);
  }
  close(go[1]);
  waitpid(pid, NULL, 0);
  lc__peer_close(&nl);
  close(l);
}

static void test_another_uid_ipv4(void) { another_uid(AF_INET); }
static void test_another_uid_ipv6(void) { another_uid(AF_INET6); }

LC_TEST_MAIN(LC_TEST(test_own_peer_ipv4), LC_TEST(test_own_peer_ipv6), LC_TEST(test_closed_peer),
             LC_TEST(test_not_connected), LC_TEST(test_another_uid_ipv4),
             LC_TEST(test_another_uid_ipv6))
