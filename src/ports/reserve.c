/*
 * reserve.c - ports on this machine: whether one is free (lc_port_is_free_local), and the
 * process-wide reservation of ports handed out (lc_port_*).
 */
#include "ports_private.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- this machine --------------------------------------------------------------------------- */

/* Binds a wildcard socket of family to port and closes it: 1 bound, 0 in use, or -errno. */
static int try_bind(int family, int port) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  const struct sockaddr *sa;
  socklen_t salen;
  int fd, r, one = 1;

  if ((fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
    /* A machine without IPv6 has no IPv6 listener to collide with. */
    if (family == AF_INET6 && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT))
      return 1;
    return -errno;
  }
  if (family == AF_INET6) {
    memset(&a6, 0, sizeof(a6));
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons((uint16_t)port);
    /* IPv6 only: IPv4 was tested on its own, and a dual-stack bind would test it twice. */
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    sa = (const struct sockaddr *)&a6;
    salen = sizeof(a6);
  } else {
    memset(&a4, 0, sizeof(a4));
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons((uint16_t)port);
    sa = (const struct sockaddr *)&a4;
    salen = sizeof(a4);
  }
  /* SO_REUSEADDR, as servers (and libuv) bind: connections in TIME_WAIT do not make a port
   * taken, a listener does */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  /* EADDRNOTAVAIL on [::]: IPv6 is switched off, so nothing listens there either */
  if (bind(fd, sa, salen) == 0 || (family == AF_INET6 && errno == EADDRNOTAVAIL))
    r = 1;
  else if (errno == EADDRINUSE || errno == EACCES || errno == EPERM)
    r = 0;
  else
    r = -errno;
  close(fd);
  return r;
}

int lc_port_is_free_local(int port) {
  int r;
  if (port < 1 || port > PORT_MAX)
    return lc__error_set(-EINVAL, "port %d is outside 1-65535", port);
  if ((r = try_bind(AF_INET, port)) == 1)
    r = try_bind(AF_INET6, port);
  if (r < 0)
    return lc__error_set(r, "cannot test port %d on this machine: %s", port, strerror(-r));
  return r;
}

/* ---- reservations ------------------------------------------------------------------------- */

static pthread_mutex_t reserved_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t reserved[65536 / 8];

int lc_port_reserve(int port) {
  int r = 0;
  if (port < 1 || port > PORT_MAX)
    return lc__error_set(-EINVAL, "port %d is outside 1-65535", port);
  pthread_mutex_lock(&reserved_lock);
  if (lc__ports_bit_get(reserved, port))
    r = -EADDRINUSE;
  else
    lc__ports_bit_set(reserved, port);
  pthread_mutex_unlock(&reserved_lock);
  if (r < 0)
    return lc__error_set(r, "port %d is already reserved in this process", port);
  return 0;
}

int lc_port_release(int port) {
  int r = 0;
  if (port < 1 || port > PORT_MAX)
    return lc__error_set(-EINVAL, "port %d is outside 1-65535", port);
  pthread_mutex_lock(&reserved_lock);
  if (lc__ports_bit_get(reserved, port))
    lc__ports_bit_clear(reserved, port);
  else
    r = -ENOENT;
  pthread_mutex_unlock(&reserved_lock);
  if (r < 0)
    return lc__error_set(r, "port %d is not reserved in this process", port);
  return 0;
}

int lc_port_is_reserved(int port) {
  int r;
  if (port < 1 || port > PORT_MAX)
    return 0;
  pthread_mutex_lock(&reserved_lock);
  r = lc__ports_bit_get(reserved, port);
  pthread_mutex_unlock(&reserved_lock);
  return r;
}

int lc__ports_reserve_first(int *out, const lc_ports *ranges, const uint8_t *taken,
                            lc__port_refusals *why) {
  int r = 0;
  *out = 0;
  pthread_mutex_lock(&reserved_lock);
  for (size_t k = 0; k < ranges->n && *out == 0; k++) {
    for (int port = ranges->r[k].first; port <= ranges->r[k].last; port++) {
      int free_here;
      if (lc__ports_bit_get(taken, port)) {
        why->on_hosts++;
        continue;
      }
      if (lc__ports_bit_get(reserved, port)) {
        why->reserved++;
        continue;
      }
      if ((free_here = lc_port_is_free_local(port)) < 0) {
        r = free_here;
        goto out;
      }
      if (!free_here) {
        why->here++;
        continue;
      }
      lc__ports_bit_set(reserved, port);
      *out = port;
      break;
    }
  }
out:
  pthread_mutex_unlock(&reserved_lock);
  return r;
}
