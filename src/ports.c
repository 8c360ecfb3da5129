/*
 * ports.c - port lists (lc_ports_*), free ports on this machine and on hosts, and the
 * process-wide reservation of ports handed out (lc_port_*).
 */
#include "ports_internal.h"
#include "runtime_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_MAX 65535
#define LISTING_TIMEOUT_MS 30000

typedef struct port_range {
  int first, last;
} port_range;

struct lc_ports {
  port_range *r; /* sorted, neither overlapping nor touching */
  size_t n, cap;
  size_t count;
};

/* ---- sets --------------------------------------------------------------------------------- */

int lc_ports_new(lc_ports **out) {
  if (out == NULL)
    return lc__error_set(-EINVAL, "ports: no output given");
  if ((*out = lc__calloc(1, sizeof(**out))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  return 0;
}

void lc_ports_free(lc_ports *ports) {
  if (ports == NULL)
    return;
  free(ports->r);
  free(ports);
}

static size_t range_size(const port_range *g) { return (size_t)g->last - (size_t)g->first + 1; }

/* Adds first..last (valid, ordered), merging every range it overlaps or touches. */
static int ports_add(lc_ports *p, int first, int last) {
  size_t i = 0, j;
  while (i < p->n && p->r[i].last + 1 < first)
    i++;
  j = i;
  while (j < p->n && p->r[j].first <= last + 1)
    j++;
  if (i == j) {
    if (p->n == p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 8;
      port_range *r = lc__realloc(p->r, cap * sizeof(*r));
      if (r == NULL)
        return lc__error_set(-ENOMEM, "out of memory");
      p->r = r;
      p->cap = cap;
    }
    memmove(&p->r[i + 1], &p->r[i], (p->n - i) * sizeof(*p->r));
    p->n++;
  } else {
    if (p->r[i].first < first)
      first = p->r[i].first;
    if (p->r[j - 1].last > last)
      last = p->r[j - 1].last;
    for (size_t k = i; k < j; k++)
      p->count -= range_size(&p->r[k]);
    memmove(&p->r[i + 1], &p->r[j], (p->n - j) * sizeof(*p->r));
    p->n -= j - i - 1;
  }
  p->r[i].first = first;
  p->r[i].last = last;
  p->count += range_size(&p->r[i]);
  return 0;
}

int lc_ports_add(lc_ports *ports, int first, int last) {
  if (ports == NULL)
    return lc__error_set(-EINVAL, "ports: no set given");
  if (first < 1 || first > PORT_MAX || last < 1 || last > PORT_MAX)
    return lc__error_set(-EINVAL, "ports: %d-%d is outside 1-65535", first, last);
  if (first > last)
    return lc__error_set(-EINVAL, "ports: the range %d-%d runs backwards", first, last);
  return ports_add(ports, first, last);
}

size_t lc_ports_count(const lc_ports *ports) { return ports ? ports->count : 0; }

int lc_ports_at(const lc_ports *ports, size_t i) {
  if (ports == NULL)
    return 0;
  for (size_t k = 0; k < ports->n; k++) {
    size_t size = range_size(&ports->r[k]);
    if (i < size)
      return ports->r[k].first + (int)i;
    i -= size;
  }
  return 0;
}

int lc_ports_contains(const lc_ports *ports, int port) {
  size_t lo = 0, hi;
  if (ports == NULL)
    return 0;
  hi = ports->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (port < ports->r[mid].first)
      hi = mid;
    else if (port > ports->r[mid].last)
      lo = mid + 1;
    else
      return 1;
  }
  return 0;
}

int lc_ports_format(char **out, const lc_ports *ports) {
  lc__buf b = {0};
  int r = 0;
  if (out == NULL || ports == NULL)
    return lc__error_set(-EINVAL, "ports: format needs an output and a set");
  *out = NULL;
  if ((r = lc__buf_append(&b, "", 0)) < 0)
    goto out;
  for (size_t k = 0; k < ports->n && r == 0; k++) {
    const port_range *g = &ports->r[k];
    r = g->first == g->last ? lc__buf_printf(&b, "%s%d", k ? "," : "", g->first)
                            : lc__buf_printf(&b, "%s%d-%d", k ? "," : "", g->first, g->last);
  }
out:
  if (r < 0) {
    lc__buf_free(&b);
    return lc__error_set(-ENOMEM, "out of memory");
  }
  *out = b.data;
  return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/*
 * Reads the digits at s[*i] into *port (capped at PORT_MAX + 1 so it cannot overflow).
 * Returns how many digits there were.
 */
static size_t read_number(const char *s, size_t len, size_t *i, int *port) {
  size_t start = *i;
  *port = 0;
  while (*i < len && is_digit(s[*i])) {
    *port = *port * 10 + (s[*i] - '0');
    if (*port > PORT_MAX)
      *port = PORT_MAX + 1;
    (*i)++;
  }
  return *i - start;
}

/* Checks one number of an item (digits at num, n of them, value port) against 1-65535. */
static int check_port(const char *spec, const char *item, size_t item_len, const char *num,
                      size_t n, int port) {
  if (port == 0)
    return lc__error_set(-EINVAL,
                         "bad port list \"%s\": \"%.*s\": port 0 is not a port (ports are 1-65535)",
                         spec, (int)item_len, item);
  if (port > PORT_MAX)
    return lc__error_set(-EINVAL, "bad port list \"%s\": \"%.*s\": port %.*s is above 65535", spec,
                         (int)item_len, item, (int)n, num);
  return 0;
}

/* Parses one item, blanks already trimmed: PORT or FIRST-LAST. */
static int parse_item(lc_ports *p, const char *spec, const char *item, size_t len) {
  size_t i = 0, n1, n2 = 0;
  int first = 0, last = 0, r;
  n1 = read_number(item, len, &i, &first);
  if (n1 > 0 && i == len) {
    last = first;
  } else if (n1 > 0 && item[i] == '-') {
    i++;
    n2 = read_number(item, len, &i, &last);
    if (n2 == 0 || i != len)
      goto junk;
  } else {
    goto junk;
  }
  if ((r = check_port(spec, item, len, item, n1, first)) < 0)
    return r;
  if (n2 > 0 && (r = check_port(spec, item, len, item + n1 + 1, n2, last)) < 0)
    return r;
  if (first > last)
    return lc__error_set(
        -EINVAL, "bad port list \"%s\": \"%.*s\": the range runs backwards (%d is above %d)", spec,
        (int)len, item, first, last);
  return ports_add(p, first, last);
junk:
  return lc__error_set(-EINVAL,
                       "bad port list \"%s\": \"%.*s\" is not a port or a range of ports (write "
                       "8786 or 60000-60199, separated by commas)",
                       spec, (int)len, item);
}

int lc_ports_parse(lc_ports **out, const char *spec) {
  lc_ports *p = NULL;
  const char *s;
  int r;

  if (out == NULL)
    return lc__error_set(-EINVAL, "ports: no output given");
  *out = NULL;
  if (spec == NULL)
    return lc__error_set(-EINVAL, "bad port list: none given");
  for (s = spec; is_blank(*s); s++)
    ;
  if (*s == '\0')
    return lc__error_set(-EINVAL,
                         "bad port list \"%s\": it is empty (write 8786 or 60000-60199, separated "
                         "by commas)",
                         spec);
  if ((r = lc_ports_new(&p)) < 0)
    return r;
  for (s = spec;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    while (len > 0 && is_blank(*s)) {
      s++;
      len--;
    }
    while (len > 0 && is_blank(s[len - 1]))
      len--;
    if (len == 0) {
      r = lc__error_set(-EINVAL,
                        "bad port list \"%s\": an empty item at character %zu (a comma too many?)",
                        spec, (size_t)(s - spec) + 1);
      goto out;
    }
    if ((r = parse_item(p, spec, s, len)) < 0)
      goto out;
    if (end == NULL)
      break;
    s = end + 1;
  }
  *out = p;
  p = NULL;
  r = 0;
out:
  lc_ports_free(p);
  return r;
}

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

static int bit_get(const uint8_t *bits, int port) { return bits[port >> 3] >> (port & 7) & 1; }
static void bit_set(uint8_t *bits, int port) { bits[port >> 3] |= (uint8_t)(1u << (port & 7)); }
static void bit_clear(uint8_t *bits, int port) { bits[port >> 3] &= (uint8_t) ~(1u << (port & 7)); }

int lc_port_reserve(int port) {
  int r = 0;
  if (port < 1 || port > PORT_MAX)
    return lc__error_set(-EINVAL, "port %d is outside 1-65535", port);
  pthread_mutex_lock(&reserved_lock);
  if (bit_get(reserved, port))
    r = -EADDRINUSE;
  else
    bit_set(reserved, port);
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
  if (bit_get(reserved, port))
    bit_clear(reserved, port);
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
  r = bit_get(reserved, port);
  pthread_mutex_unlock(&reserved_lock);
  return r;
}

/* ---- /proc/net/tcp ------------------------------------------------------------------------ */

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Reads hex digits at line[*i]; returns how many there were (value in *v, capped). */
static size_t read_hex(const char *line, size_t len, size_t *i, unsigned long *v) {
  size_t start = *i;
  *v = 0;
  while (*i < len && hex_value(line[*i]) >= 0) {
    if (*i - start < 8)
      *v = *v << 4 | (unsigned long)hex_value(line[*i]);
    (*i)++;
  }
  return *i - start;
}

static int is_tab_or_space(char c) { return c == ' ' || c == '\t'; }

static void skip_blanks(const char *line, size_t len, size_t *i) {
  while (*i < len && is_tab_or_space(line[*i]))
    (*i)++;
}

/* Reads "ADDRESS:PORT" with an 8- (IPv4) or 32-digit (IPv6) address. Returns 0 or -1. */
static int read_endpoint(const char *line, size_t len, size_t *i, unsigned long *port) {
  unsigned long addr;
  size_t n = read_hex(line, len, i, &addr);
  if ((n != 8 && n != 32) || *i >= len || line[*i] != ':')
    return -1;
  (*i)++;
  n = read_hex(line, len, i, port);
  if (n < 1 || n > 4)
    return -1;
  return 0;
}

/*
 * A line of `ss -tn state listening`: "RECVQ SENDQ LOCAL:PORT PEER:PORT", LOCAL being an IPv4
 * address, [IPv6], or *, each with an optional %interface; an older ss may put a state first.
 * The header ("Recv-Q Send-Q Local Address:Port ...") counts as a header. Returns 1 when the line
 * was one of these (and counted), 0 when it is not ss's.
 */
static int ss_line(lc__portscan *s, const char *line, size_t len, size_t i) {
  static const char local[] = "Local Address";
  int q, port = 0;
  size_t start, colon = 0, n = 0;
  int listen = 1;

  if ((len - i >= 6 && memcmp(line + i, "Recv-Q", 6) == 0) ||
      (len - i >= 5 && memcmp(line + i, "State", 5) == 0)) {
    for (size_t k = i; k + sizeof(local) - 1 <= len; k++)
      if (memcmp(line + k, local, sizeof(local) - 1) == 0) {
        s->headers++;
        return 1;
      }
    return 0;
  }
  if (i < len && !is_digit(line[i])) { /* a state column */
    start = i;
    while (i < len && !is_tab_or_space(line[i]))
      i++;
    listen = i - start == 6 && memcmp(line + start, "LISTEN", 6) == 0;
    skip_blanks(line, len, &i);
  }
  for (int k = 0; k < 2; k++) { /* Recv-Q, Send-Q */
    if (read_number(line, len, &i, &q) == 0 || i >= len || !is_tab_or_space(line[i]))
      return 0;
    skip_blanks(line, len, &i);
  }
  for (start = i; i < len && !is_tab_or_space(line[i]); i++)
    if (line[i] == ':')
      colon = i;
  if (colon == 0 || colon == start || i >= len)
    return 0;
  i = colon + 1;
  n = read_number(line, len, &i, &port); /* capped at PORT_MAX + 1 */
  if (n == 0 || n > 5 || port > PORT_MAX || i >= len || !is_tab_or_space(line[i]))
    return 0;
  s->entries++;
  if (listen && port > 0)
    bit_set(s->listening, port);
  return 1;
}

void lc__portscan_line(lc__portscan *s, const char *line, size_t len) {
  unsigned long sl, local_port, remote_port, state;
  size_t i = 0;

  skip_blanks(line, len, &i);
  if (ss_line(s, line, len, i))
    return;
  if (len - i >= 2 && memcmp(line + i, "sl", 2) == 0) {
    static const char want[] = "local_address";
    for (size_t k = i; k + sizeof(want) - 1 <= len; k++)
      if (memcmp(line + k, want, sizeof(want) - 1) == 0) {
        s->headers++;
        return;
      }
    goto skip;
  }
  /* "   0: LOCAL:PORT REMOTE:PORT ST ..." */
  if (read_hex(line, len, &i, &sl) == 0 || i >= len || line[i] != ':')
    goto skip;
  i++;
  skip_blanks(line, len, &i);
  if (read_endpoint(line, len, &i, &local_port) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_endpoint(line, len, &i, &remote_port) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_hex(line, len, &i, &state) != 2 || (i < len && !is_tab_or_space(line[i])))
    goto skip;
  s->entries++;
  if (state == 0x0A && local_port > 0)
    bit_set(s->listening, (int)local_port);
  return;
skip:
  s->skipped++;
}

void lc__portscan_text(lc__portscan *s, const char *text, size_t len) {
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && text[i] != '\n')
      continue;
    if (i > start)
      lc__portscan_line(s, text + start, i - start);
    start = i + 1;
  }
}

int lc__portscan_to_ports(lc_ports **out, const lc__portscan *s) {
  lc_ports *p = NULL;
  int r;
  if ((r = lc_ports_new(&p)) < 0)
    return r;
  for (int port = 1; port <= PORT_MAX; port++) {
    int last = port;
    if (!bit_get(s->listening, port))
      continue;
    while (last < PORT_MAX && bit_get(s->listening, last + 1))
      last++;
    if ((r = ports_add(p, port, last)) < 0) {
      lc_ports_free(p);
      return r;
    }
    port = last;
  }
  *out = p;
  return 0;
}

/* ---- hosts -------------------------------------------------------------------------------- */

/* One host's listing, started on every host before any is waited for. */
typedef struct listing {
  lc_runtime *rt;
  lc_process *proc;
  lc__portscan scan; /* written on the engine thread until the process has finished */
  int rc;
  char msg[LC_ERRMSG_MAX];
} listing;

static void listing_line(const char *line, size_t len, lc_stream stream, void *payload) {
  if (stream == LC_STDOUT)
    lc__portscan_line(payload, line, len);
}

/* Keeps a failure of l: code, and a detail that names the host once. */
static void listing_fail(listing *l, int code, const char *detail) {
  const char *name = lc_runtime_name(l->rt);
  size_t n = strlen(name);
  if (strncmp(detail, name, n) == 0 && detail[n] == ':' && detail[n + 1] == ' ')
    detail += n + 2;
  l->rc = code;
  snprintf(l->msg, sizeof(l->msg), "%s: cannot read its listening ports: %s", name, detail);
}

static void listing_start(listing *l) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;
  eo.on_line = listing_line;
  eo.payload = &l->scan;
  /* a read of two files ends by itself: no lifeline needed, and none to pay for */
  if ((r = lc__runtime_spawn_plain(&l->proc, l->rt, LC__LISTING_COMMAND, &eo)) < 0)
    listing_fail(l, r, lc_error_last());
}

/* Waits for a started listing until deadline (lc__now_ms) and judges its output. */
static void listing_finish(listing *l, uint64_t deadline, int timeout_ms) {
  lc_exec_result res = {.exit_status = -1};
  uint64_t now = lc__now_ms();
  int r;
  if (l->proc == NULL)
    return;
  r = lc_process_wait(&res, l->proc, now < deadline ? (int)(deadline - now) : 0);
  if (r == -ETIMEDOUT) {
    char detail[128];
    snprintf(detail, sizeof(detail), "no answer within %.1f s", timeout_ms / 1000.0);
    listing_fail(l, -ETIMEDOUT, detail);
  } else if (r < 0) {
    listing_fail(l, r, lc_error_last());
  } else if (res.signal != 0) {
    char detail[128];
    snprintf(detail, sizeof(detail), "'%s' was ended by signal %d", LC__LISTING_COMMAND,
             res.signal);
    listing_fail(l, LC_EREMOTE, detail);
  } else if (l->scan.headers == 0) {
    char detail[256];
    snprintf(detail, sizeof(detail),
             "neither ss nor /proc/net/tcp answered there (exit status %d); listening ports "
             "are read with ss or from /proc/net/tcp and /proc/net/tcp6, so the host must "
             "run Linux",
             res.exit_status);
    listing_fail(l, LC_EREMOTE, detail);
  }
  lc_process_free(l->proc); /* ends it when it timed out */
  l->proc = NULL;
}

int lc_ports_listening(lc_ports **out, lc_runtime *rt, int timeout_ms) {
  listing *l = NULL;
  int r;
  if (out == NULL || rt == NULL)
    return lc__error_set(-EINVAL, "listening ports: no output or no runtime given");
  *out = NULL;
  if (timeout_ms <= 0)
    timeout_ms = LISTING_TIMEOUT_MS;
  if ((l = lc__calloc(1, sizeof(*l))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  l->rt = rt;
  listing_start(l);
  listing_finish(l, lc__now_ms() + (uint64_t)timeout_ms, timeout_ms);
  if ((r = l->rc) < 0)
    lc__error_set(r, "%s", l->msg);
  else
    r = lc__portscan_to_ports(out, &l->scan);
  free(l);
  return r;
}

int lc__ports_keep_fresh(lc_runtime *rt, const lc_ports *listening) {
  lc__portscan *s = lc__calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->headers = 2;
  for (size_t i = 0; i < lc_ports_count(listening); i++) {
    int p = lc_ports_at(listening, i);
    s->listening[p / 8] |= (uint8_t)(1u << (p % 8));
  }
  __atomic_store_n(&rt->fresh_listing_at, lc__now_ms(), __ATOMIC_RELAXED);
  free(__atomic_exchange_n(&rt->fresh_listing, s, __ATOMIC_ACQ_REL));
  return 0;
}

/* What rt's facts read, when that was recent enough; NULL otherwise. Taken once. */
static lc__portscan *take_fresh(lc_runtime *rt) {
  uint64_t at = __atomic_load_n(&rt->fresh_listing_at, __ATOMIC_RELAXED);
  lc__portscan *s = __atomic_exchange_n(&rt->fresh_listing, NULL, __ATOMIC_ACQ_REL);
  if (s != NULL && lc__now_ms() - at > LC__FRESH_LISTING_MS) {
    free(s);
    s = NULL;
  }
  return s;
}

/* Starts a listing of each of rts, or takes what its facts read a moment ago. */
static void listings_start(listing *ls, lc_runtime *const *rts, size_t n) {
  for (size_t i = 0; i < n; i++) {
    lc__portscan *fresh = take_fresh(rts[i]);
    ls[i].rt = rts[i];
    if (fresh != NULL) {
      ls[i].scan = *fresh; /* read by the host's facts a moment ago: no round trip */
      free(fresh);
    } else {
      listing_start(&ls[i]);
    }
  }
}

int lc__ports_scan(lc__portscan *out, lc_runtime *const *rts, size_t n, int timeout_ms) {
  listing *ls = NULL;
  uint64_t deadline;
  int r = 0;
  if (n == 0)
    return 0;
  if (timeout_ms <= 0)
    timeout_ms = LISTING_TIMEOUT_MS;
  if ((ls = lc__calloc(n, sizeof(*ls))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  deadline = lc__now_ms() + (uint64_t)timeout_ms;
  listings_start(ls, rts, n);
  for (size_t i = 0; i < n; i++) {
    listing_finish(&ls[i], deadline, timeout_ms);
    if (ls[i].rc < 0 && r == 0)
      r = lc__error_set(ls[i].rc, "%s", ls[i].msg);
    out[i] = ls[i].scan;
  }
  free(ls);
  return r;
}

struct lc__listing {
  listing l;
  uint64_t started;
};

int lc__listing_start(lc__listing **out, lc_runtime *rt) {
  lc__listing *x = lc__calloc(1, sizeof(*x));
  *out = NULL;
  if (x == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  x->l.rt = rt;
  x->started = lc__now_ms();
  listing_start(&x->l);
  *out = x;
  return 0;
}

int lc__listing_wait(lc__listing *x, int timeout_ms) {
  return x->l.proc == NULL || lc_process_wait(NULL, x->l.proc, timeout_ms) != -ETIMEDOUT;
}

int lc__listing_finish(lc__listing *x, const lc__portscan **scan) {
  uint64_t now = lc__now_ms();
  listing_finish(&x->l,
                 x->started + LISTING_TIMEOUT_MS > now ? x->started + LISTING_TIMEOUT_MS : now,
                 LISTING_TIMEOUT_MS);
  *scan = &x->l.scan;
  return x->l.rc < 0 ? lc__error_set(x->l.rc, "%s", x->l.msg) : 0;
}

void lc__listing_free(lc__listing *x) {
  if (x == NULL)
    return;
  lc_process_free(x->l.proc);
  free(x);
}

/* Counts, for the message of LC_ENOPORTS, why the ports of ranges were turned down. */
typedef struct refusals {
  size_t on_hosts, reserved, here;
} refusals;

int lc_ports_common_free(int *out, lc_runtime *const *rts, size_t n, const lc_ports *ranges) {
  listing *ls = NULL;
  uint8_t *taken = NULL;
  refusals why = {0, 0, 0};
  uint64_t deadline;
  char *text = NULL;
  int r = LC_EINTERNAL;

  if (out == NULL || ranges == NULL || ranges->count == 0)
    return lc__error_set(-EINVAL, "common free port: no output or no ports given");
  *out = 0;
  for (size_t i = 0; i < n; i++)
    if (rts == NULL || rts[i] == NULL)
      return lc__error_set(-EINVAL, "common free port: runtime %zu of %zu is NULL", i, n);
  if ((taken = lc__calloc(1, 65536 / 8)) == NULL ||
      (n > 0 && (ls = lc__calloc(n, sizeof(*ls))) == NULL)) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }

  /* Every host at once: start all listings, then collect them. */
  deadline = lc__now_ms() + LISTING_TIMEOUT_MS;
  listings_start(ls, rts, n);
  for (size_t i = 0; i < n; i++)
    listing_finish(&ls[i], deadline, LISTING_TIMEOUT_MS);
  for (size_t i = 0; i < n; i++) {
    if (ls[i].rc < 0) {
      r = lc__error_set(ls[i].rc, "%s", ls[i].msg);
      goto out;
    }
    for (size_t b = 0; b < 65536 / 8; b++)
      taken[b] |= ls[i].scan.listening[b];
  }

  /* The first candidate that passes; checked and reserved under one lock. */
  pthread_mutex_lock(&reserved_lock);
  for (size_t k = 0; k < ranges->n && *out == 0; k++) {
    for (int port = ranges->r[k].first; port <= ranges->r[k].last; port++) {
      int free_here;
      if (bit_get(taken, port)) {
        why.on_hosts++;
        continue;
      }
      if (bit_get(reserved, port)) {
        why.reserved++;
        continue;
      }
      if ((free_here = lc_port_is_free_local(port)) < 0) {
        pthread_mutex_unlock(&reserved_lock);
        r = free_here;
        goto out;
      }
      if (!free_here) {
        why.here++;
        continue;
      }
      bit_set(reserved, port);
      *out = port;
      break;
    }
  }
  pthread_mutex_unlock(&reserved_lock);
  if (*out != 0) {
    r = 0;
    goto out;
  }
  if (lc_ports_format(&text, ranges) < 0) {
    r = -ENOMEM;
    goto out;
  }
  r = lc__error_set(LC_ENOPORTS,
                    "no free port in %s (%zu port%s) on %zu host%s and this machine: taken on a "
                    "host: %zu, reserved in this process: %zu, in use on this machine: %zu",
                    text, ranges->count, ranges->count == 1 ? "" : "s", n, n == 1 ? "" : "s",
                    why.on_hosts, why.reserved, why.here);
out:
  free(text);
  free(ls);
  free(taken);
  return r;
}
