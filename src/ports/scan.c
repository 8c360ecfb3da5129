/*
 * scan.c - the reader of a host's listing of its ports, listening or held by a connection: ss's
 * output or /proc/net/tcp{,6} (lc__portscan_*), and who listens on a watched port
 * (lc__portscan_ours, _stranger). Pure functions of their input: no system calls, no global
 * state.
 */
#include "ports_private.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Reads a decimal number at line[*i] into *v (-1 when there are no digits or it exceeds
 * 2^32 - 1, a uid's range). Returns how many digits there were. */
static size_t read_uid(const char *line, size_t len, size_t *i, long *v) {
  size_t start = *i;
  unsigned long long n = 0;
  while (*i < len && lc__ports_is_digit(line[*i])) {
    if (n <= 0xFFFFFFFFull)
      n = n * 10 + (unsigned)(line[*i] - '0');
    (*i)++;
  }
  *v = *i > start && n <= 0xFFFFFFFFull ? (long)n : -1;
  return *i - start;
}

/*
 * Reads "ADDRESS:PORT" with an 8- (IPv4) or 32-digit (IPv6) address into l (address, family and
 * port). The kernel prints each 32-bit word of the address as it lies in memory (%08X of a
 * network-order word), read here as a little-endian machine's: on a big-endian host 127.0.0.1
 * would read as 1.0.0.127, not loopback (the check then fails closed). Returns 0 or -1.
 */
static int read_endpoint(const char *line, size_t len, size_t *i, lc__listener *l) {
  unsigned long ignored, port;
  size_t start = *i, n = read_hex(line, len, i, &ignored);
  if ((n != 8 && n != 32) || *i >= len || line[*i] != ':')
    return -1;
  memset(l->addr, 0, sizeof(l->addr));
  l->v6 = n == 32;
  l->unknown = 0;
  for (size_t w = 0; w < n / 8; w++) {
    unsigned long v = 0;
    for (size_t k = 0; k < 8; k++)
      v = v << 4 | (unsigned long)hex_value(line[start + w * 8 + k]);
    for (size_t b = 0; b < 4; b++)
      l->addr[w * 4 + b] = (uint8_t)(v >> (8 * b));
  }
  (*i)++;
  n = read_hex(line, len, i, &port);
  if (n < 1 || n > 4)
    return -1;
  l->port = (int)port;
  return 0;
}

/* Skips one column (what lies before the next blank) and the blanks after it. */
static void skip_column(const char *line, size_t len, size_t *i) {
  while (*i < len && !is_tab_or_space(line[*i]))
    (*i)++;
  skip_blanks(line, len, i);
}

/* The most listeners s keeps. */
static size_t found_max(const lc__portscan *s) {
  return s->found_max > s->found_cap ? s->found_max : s->found_cap;
}

/* Whether port is watched in s. */
static int watched(const lc__portscan *s, int port) {
  int hi = s->watch_hi > 0 ? s->watch_hi : PORT_MAX;
  return s->watch != NULL && port >= s->watch_lo && port <= hi && port >= 1 &&
         lc__ports_bit_get(s->watch, port - s->watch_lo);
}

int lc__portscan_index(lc__portscan *s) {
  size_t n = 16; /* buckets: twice the distinct ports at least (found_max is 8 per port) */
  while (n < found_max(s) / 4)
    n *= 2;
  if ((s->heads = lc__calloc(n, sizeof(*s->heads))) == NULL ||
      (s->next = lc__calloc(s->found_cap + 1, sizeof(*s->next))) == NULL) {
    lc__portscan_unindex(s);
    return -ENOMEM;
  }
  s->mask = n - 1;
  return 0;
}

void lc__portscan_unindex(lc__portscan *s) {
  free(s->heads);
  free(s->next);
  s->heads = s->next = NULL;
  s->mask = 0;
}

/* From 1 + an index (0: none) on along the chain to the next entry of port. */
static size_t chain_from(const lc__portscan *s, uint32_t at, int port) {
  for (; at != 0; at = s->next[at - 1])
    if (s->found[at - 1].port == port)
      return at - 1;
  return s->nfound;
}

size_t lc__portscan_first(const lc__portscan *s, int port) {
  size_t k = 0;
  if (s->heads != NULL)
    return chain_from(s, s->heads[(size_t)port & s->mask], port);
  while (k < s->nfound && s->found[k].port != port)
    k++;
  return k;
}

size_t lc__portscan_next(const lc__portscan *s, size_t k) {
  int port = s->found[k].port;
  if (s->heads != NULL)
    return chain_from(s, s->next[k], port);
  for (k++; k < s->nfound && s->found[k].port != port;)
    k++;
  return k;
}

/* Keeps l (a listener) in s->found when its port is watched, once. */
static void keep_listener(lc__portscan *s, const lc__listener *l) {
  if (l->port < 1 || l->port > PORT_MAX || !watched(s, l->port))
    return;
  for (size_t k = lc__portscan_first(s, l->port); k < s->nfound; k = lc__portscan_next(s, k)) {
    const lc__listener *o = &s->found[k];
    if (o->v6 == l->v6 && o->unknown == l->unknown && o->uid == l->uid &&
        memcmp(o->addr, l->addr, sizeof(o->addr)) == 0)
      return;
  }
  if (s->found != NULL && s->nfound >= s->found_cap && s->found_cap < found_max(s)) {
    size_t cap = s->found_cap * 2 < found_max(s) ? s->found_cap * 2 : found_max(s);
    lc__listener *f = lc__realloc(s->found, cap * sizeof(*f));
    uint32_t *next =
        f != NULL && s->heads != NULL ? lc__realloc(s->next, (cap + 1) * sizeof(*next)) : s->next;
    if (f != NULL)
      s->found = f;
    if (f != NULL && (s->heads == NULL || next != NULL)) {
      s->next = next;
      s->found_cap = cap;
    }
  }
  if (s->found == NULL || s->nfound >= s->found_cap) {
    s->found_over++;
    return;
  }
  if (s->heads != NULL) { /* at the end of its bucket's chain: listed in the listing's order */
    uint32_t *at = &s->heads[(size_t)l->port & s->mask];
    while (*at != 0)
      at = &s->next[*at - 1];
    *at = (uint32_t)s->nfound + 1;
    s->next[s->nfound] = 0;
  }
  s->found[s->nfound++] = *l;
}

/* Reads ss's text of an address (line[start..end): "127.0.0.1", "[::1]", "*", "0.0.0.0%lo",
 * "::" of an older ss) into l; what is not an address stays unknown (taken as any). */
static void ss_address(lc__listener *l, const char *line, size_t start, size_t end) {
  char text[64];
  size_t n = 0;
  memset(l->addr, 0, sizeof(l->addr));
  l->v6 = 0;
  l->unknown = 1;
  if (start < end && line[start] == '[' && line[end - 1] == ']') {
    start++;
    end--;
  }
  for (size_t k = start; k < end && line[k] != '%' && line[k] != ']'; k++) {
    if (n + 1 >= sizeof(text))
      return;
    text[n++] = line[k];
  }
  text[n] = '\0';
  if (inet_pton(AF_INET, text, l->addr) == 1) {
    l->unknown = 0;
  } else if (inet_pton(AF_INET6, text, l->addr) == 1) {
    l->v6 = 1;
    l->unknown = 0;
  }
}

/* The uid of ss -e's extended columns after the peer address, from line[i]: "uid:N" comes before
 * "ino:N" and is left out for uid 0; no "ino:" either means ss was not asked (-1). */
static long ss_uid(const char *line, size_t len, size_t i) {
  long uid = -1;
  skip_blanks(line, len, &i);
  skip_column(line, len, &i); /* the peer */
  while (i < len) {
    if (len - i > 4 && memcmp(line + i, "uid:", 4) == 0) {
      i += 4;
      read_uid(line, len, &i, &uid);
    } else if (len - i > 4 && memcmp(line + i, "ino:", 4) == 0) {
      return uid >= 0 ? uid : 0;
    }
    skip_column(line, len, &i);
  }
  return -1;
}

/*
 * A line of `ss -tn state listening`: "RECVQ SENDQ LOCAL:PORT PEER:PORT", LOCAL being an IPv4
 * address, [IPv6], or *, each with an optional %interface; with more than one state asked (and
 * in an older ss) a state comes first: "LISTEN ...", "ESTAB ..." (a held port), "TIME-WAIT ...".
 * The header ("Recv-Q Send-Q Local Address:Port ...") counts as a header. Returns 1 when the line
 * was one of these (and counted), 0 when it is not ss's.
 */
static int ss_line(lc__portscan *s, const char *line, size_t len, size_t i) {
  static const char local[] = "Local Address";
  int q, port = 0;
  size_t start, colon = 0, n = 0;
  int listen = 1, held = 0;

  if ((len - i >= 6 && memcmp(line + i, "Recv-Q", 6) == 0) ||
      (len - i >= 5 && memcmp(line + i, "State", 5) == 0)) {
    for (size_t k = i; k + sizeof(local) - 1 <= len; k++)
      if (memcmp(line + k, local, sizeof(local) - 1) == 0) {
        s->headers++;
        return 1;
      }
    return 0;
  }
  if (i < len && !lc__ports_is_digit(line[i])) { /* a state column */
    start = i;
    while (i < len && !is_tab_or_space(line[i]))
      i++;
    listen = i - start == 6 && memcmp(line + start, "LISTEN", 6) == 0;
    /* a connection's end holds its local port, but in TIME-WAIT (SO_REUSEADDR binds over it)
     * or UNCONN (closed) */
    held = !listen && !(i - start == 9 && memcmp(line + start, "TIME-WAIT", 9) == 0) &&
           !(i - start == 6 && memcmp(line + start, "UNCONN", 6) == 0);
    skip_blanks(line, len, &i);
  }
  for (int k = 0; k < 2; k++) { /* Recv-Q, Send-Q */
    if (lc__ports_read_number(line, len, &i, &q) == 0 || i >= len || !is_tab_or_space(line[i]))
      return 0;
    skip_blanks(line, len, &i);
  }
  for (start = i; i < len && !is_tab_or_space(line[i]); i++)
    if (line[i] == ':')
      colon = i;
  if (colon == 0 || colon == start || i >= len)
    return 0;
  i = colon + 1;
  n = lc__ports_read_number(line, len, &i, &port); /* capped at PORT_MAX + 1 */
  if (n == 0 || n > 5 || port > PORT_MAX || i >= len || !is_tab_or_space(line[i]))
    return 0;
  s->entries++;
  if (listen && port > 0) {
    lc__listener l;
    lc__portscan_add(s, port);
    if (watched(s, port)) {
      ss_address(&l, line, start, colon);
      l.port = port;
      l.uid = ss_uid(line, len, i);
      keep_listener(s, &l);
    }
  } else if (held && port > 0) {
    lc__portscan_add_held(s, port);
  }
  return 1;
}

void lc__portscan_line(lc__portscan *s, const char *line, size_t len) {
  static const char who[] = "lc-uid ";
  unsigned long sl, state;
  lc__listener local, remote;
  size_t i = 0;

  skip_blanks(line, len, &i);
  if (len - i >= sizeof(who) - 1 && memcmp(line + i, who, sizeof(who) - 1) == 0) {
    long uid;
    i += sizeof(who) - 1;
    if (read_uid(line, len, &i, &uid) == 0 || uid < 0)
      goto skip;
    s->has_uid = 1;
    s->uid = (unsigned long)uid;
    s->loopback = lc__loopback_id(line + i, len - i);
    return;
  }
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
  if (read_endpoint(line, len, &i, &local) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_endpoint(line, len, &i, &remote) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_hex(line, len, &i, &state) != 2 || (i < len && !is_tab_or_space(line[i])))
    goto skip;
  s->entries++;
  if (state == 0x0A && local.port > 0) {
    lc__portscan_add(s, local.port);
    if (watched(s, local.port)) {
      /* "tx_queue:rx_queue tr:tm->when retrnsmt uid ..." */
      skip_blanks(line, len, &i);
      for (int k = 0; k < 3; k++)
        skip_column(line, len, &i);
      if (read_uid(line, len, &i, &local.uid) == 0 || (i < len && !is_tab_or_space(line[i])))
        local.uid = -1;
      keep_listener(s, &local);
    }
  } else if (state != 0x06 && state != 0x07 && local.port > 0) { /* not TIME_WAIT, CLOSE */
    lc__portscan_add_held(s, local.port);
  }
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

/* Where port is in v[0..n) (ascending), or would go. */
static size_t set_find(const uint16_t *v, size_t n, int port) {
  size_t lo = 0, hi = n;
  if (hi > 0 && v[hi - 1] < port) /* the common case when a listing is in order */
    return hi;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < port)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int set_has(const uint16_t *v, size_t n, int port) {
  size_t i = set_find(v, n, port);
  return port >= 1 && port <= PORT_MAX && i < n && v[i] == port;
}

/* Adds port to *set (*n ports, room for *cap), once, in order; -ENOMEM sets s->nomem. */
static int set_add(lc__portscan *s, uint16_t **set, size_t *n, size_t *cap, int port) {
  size_t i = set_find(*set, *n, port);
  uint16_t *v;
  if (port < 1 || port > PORT_MAX || (i < *n && (*set)[i] == port))
    return 0;
  if ((v = lc__grow(*set, cap, *n + 1, sizeof(*v), 16)) == NULL) {
    s->nomem = 1;
    return -ENOMEM;
  }
  *set = v;
  memmove(v + i + 1, v + i, (*n - i) * sizeof(*v));
  v[i] = (uint16_t)port;
  (*n)++;
  return 0;
}

int lc__portscan_add(lc__portscan *s, int port) {
  return set_add(s, &s->listen, &s->nlisten, &s->listen_cap, port);
}

int lc__portscan_add_held(lc__portscan *s, int port) {
  return set_add(s, &s->held, &s->nheld, &s->held_cap, port);
}

int lc__portscan_listens(const lc__portscan *s, int port) {
  return set_has(s->listen, s->nlisten, port);
}

int lc__portscan_taken(const lc__portscan *s, int port) {
  return set_has(s->listen, s->nlisten, port) || set_has(s->held, s->nheld, port);
}

void lc__portscan_clear(lc__portscan *s) {
  free(s->listen);
  free(s->held);
  s->listen = s->held = NULL;
  s->nlisten = s->listen_cap = s->nheld = s->held_cap = 0;
  s->nomem = 0;
}

void lc__portscan_free(lc__portscan *s) {
  if (s != NULL)
    lc__portscan_clear(s);
  free(s);
}

/* The ports v[0..n) (ascending) of s as a new set. */
static int set_to_ports(lc_ports **out, const lc__portscan *s, const uint16_t *v, size_t n) {
  lc_ports *p = NULL;
  int r;
  if (s->nomem)
    return lc__error_set(-ENOMEM, "out of memory");
  if ((r = lc_ports_new(&p)) < 0)
    return r;
  for (size_t k = 0; k < n;) { /* runs of consecutive ports as ranges */
    size_t e = k;
    while (e + 1 < n && v[e + 1] == v[e] + 1)
      e++;
    if ((r = lc__ports_add_range(p, v[k], v[e])) < 0) {
      lc_ports_free(p);
      return r;
    }
    k = e + 1;
  }
  *out = p;
  return 0;
}

int lc__portscan_to_ports(lc_ports **out, const lc__portscan *s) {
  return set_to_ports(out, s, s->listen, s->nlisten);
}

int lc__portscan_held_to_ports(lc_ports **out, const lc__portscan *s) {
  return set_to_ports(out, s, s->held, s->nheld);
}

int lc__listener_is_loopback(const lc__listener *l) {
  static const uint8_t v6_loopback[16] = {[15] = 1};
  static const uint8_t v4_mapped[12] = {[10] = 0xff, [11] = 0xff};
  if (l->unknown)
    return 0;
  if (!l->v6)
    return l->addr[0] == 127;
  return memcmp(l->addr, v6_loopback, 16) == 0 ||
         (memcmp(l->addr, v4_mapped, 12) == 0 && l->addr[12] == 127);
}

void lc__listener_format(const lc__listener *l, char *buf, size_t n) {
  char text[INET6_ADDRSTRLEN] = "*";
  if (!l->unknown)
    inet_ntop(l->v6 ? AF_INET6 : AF_INET, l->addr, text, sizeof(text));
  snprintf(buf, n, l->v6 && !l->unknown ? "[%s]:%d" : "%s:%d", text, l->port);
}

const lc__listener *lc__portscan_stranger(const lc__portscan *s, int port) {
  if (!s->has_uid)
    return NULL;
  for (size_t k = lc__portscan_first(s, port); k < s->nfound; k = lc__portscan_next(s, k))
    if (s->found[k].uid >= 0 && (unsigned long)s->found[k].uid != s->uid)
      return &s->found[k];
  return NULL;
}

int lc__portscan_ours(const lc__portscan *s, int port) {
  if (!lc__portscan_listens(s, port))
    return 0;
  if (!s->has_uid || s->watch == NULL || s->found_over > 0)
    return 1; /* cannot tell whose: as before owners were asked */
  for (size_t k = lc__portscan_first(s, port); k < s->nfound; k = lc__portscan_next(s, k))
    if (s->found[k].uid < 0 || (unsigned long)s->found[k].uid == s->uid)
      return 1;
  return 0;
}

/* ---- loopbacks ----------------------------------------------------------------------------- */

uint64_t lc__loopback_id(const char *text, size_t len) {
  static const char ns[] = "net:[";
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  const char *t = text;
  size_t n = len, found = 0;
  while (n > 0 && (is_tab_or_space(t[0]) || t[0] == '\r'))
    t++, n--;
  while (n > 0 && (is_tab_or_space(t[n - 1]) || t[n - 1] == '\r'))
    n--;
  for (size_t i = 0; i + sizeof(ns) - 1 <= n && !found; i++)
    found = memcmp(t + i, ns, sizeof(ns) - 1) == 0;
  if (!found)
    return LC__LOOPBACK_UNTOLD;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)t[i]) * 1099511628211ull;
  return h > LC__LOOPBACK_UNTOLD ? h : h + 2;
}

static uint64_t loopback_here;
static pthread_once_t loopback_once = PTHREAD_ONCE_INIT;

static void loopback_read(void) {
  char text[256];
  size_t used = 0;
  ssize_t n;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f != NULL) {
    if (fgets(text, 64, f) != NULL)
      used = strcspn(text, "\n");
    fclose(f);
  }
  n = readlink("/proc/self/ns/net", text + used, sizeof(text) - used - 1);
  loopback_here = n > 0 ? lc__loopback_id(text, used + (size_t)n) : LC__LOOPBACK_UNTOLD;
}

uint64_t lc__loopback_here(void) {
  pthread_once(&loopback_once, loopback_read);
  return loopback_here;
}
