/*
 * inventory.c - the hosts a user names: inventory files ("host gpus=N slots=N" a line, comments)
 * and comma-separated host lists, read with the same entry grammar and the same messages. Host
 * ranges ("node[01-16]") are expanded here, so every way of naming hosts takes them.
 */
#include "hostrange.h"
#include "internal.h"

#include "lazycluster/inventory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPUS_MAX 4096
#define SLOTS_MAX 1000000
#define FILE_MAX ((size_t)16 * 1024 * 1024)

typedef struct entry {
  char *host;
  int gpus;  /* -1: not declared */
  int slots; /* 0: not declared */
  int line;  /* file line or list item, from 1; 0: added */
} entry;

struct lc_inventory {
  entry *e;
  size_t n, cap;
  size_t *index; /* open addressing on the host: entry number + 1; 0: free */
  size_t index_cap;
};

int lc_inventory_new(lc_inventory **out) {
  if (out == NULL)
    return lc__error_set(-EINVAL, "lc_inventory_new: out is NULL");
  if ((*out = lc__calloc(1, sizeof(**out))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  return 0;
}

void lc_inventory_free(lc_inventory *inv) {
  if (inv == NULL)
    return;
  for (size_t i = 0; i < inv->n; i++)
    free(inv->e[i].host);
  free(inv->e);
  free(inv->index);
  free(inv);
}

size_t lc_inventory_count(const lc_inventory *inv) { return inv ? inv->n : 0; }

const char *lc_inventory_host(const lc_inventory *inv, size_t i) {
  return inv && i < inv->n ? inv->e[i].host : NULL;
}

int lc_inventory_gpus(const lc_inventory *inv, size_t i) {
  return inv && i < inv->n ? inv->e[i].gpus : -1;
}

int lc_inventory_slots(const lc_inventory *inv, size_t i) {
  return inv && i < inv->n ? inv->e[i].slots : 0;
}

int lc_inventory_line(const lc_inventory *inv, size_t i) {
  return inv && i < inv->n ? inv->e[i].line : 0;
}

/* FNV-1a: a 100000-host range must not cost n^2 comparisons to check for repeats. */
static size_t host_hash(const char *s, size_t len) {
  uint64_t h = 14695981039346656037u;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211u;
  return (size_t)h;
}

static long find(const lc_inventory *inv, const char *host, size_t len) {
  if (inv->index_cap == 0)
    return -1;
  for (size_t k = host_hash(host, len) & (inv->index_cap - 1);;
       k = (k + 1) & (inv->index_cap - 1)) {
    size_t i = inv->index[k];
    if (i == 0)
      return -1;
    if (strlen(inv->e[i - 1].host) == len && memcmp(inv->e[i - 1].host, host, len) == 0)
      return (long)(i - 1);
  }
}

/* Puts entry i into the index. */
static void index_put(lc_inventory *inv, size_t i) {
  const char *h = inv->e[i].host;
  size_t k = host_hash(h, strlen(h)) & (inv->index_cap - 1);
  while (inv->index[k] != 0)
    k = (k + 1) & (inv->index_cap - 1);
  inv->index[k] = i + 1;
}

/* Makes room in the index for one more entry; the index stays at most half full. */
static int index_reserve(lc_inventory *inv) {
  size_t ncap, *nx;
  if (2 * (inv->n + 1) <= inv->index_cap)
    return 0;
  ncap = inv->index_cap ? inv->index_cap * 2 : 64;
  if ((nx = lc__calloc(ncap, sizeof(*nx))) == NULL)
    return -ENOMEM;
  free(inv->index);
  inv->index = nx;
  inv->index_cap = ncap;
  for (size_t j = 0; j < inv->n; j++)
    index_put(inv, j);
  return 0;
}

int lc_inventory_find(size_t *out, const lc_inventory *inv, const char *host) {
  long i;
  if (out == NULL || inv == NULL || host == NULL)
    return lc__error_set(-EINVAL, "lc_inventory_find: a NULL argument");
  if ((i = find(inv, host, strlen(host))) < 0)
    return lc__error_set(-ENOENT, "host '%s' is not in the inventory", host);
  *out = (size_t)i;
  return 0;
}

/* ---- one entry ----------------------------------------------------------------------------- */

/*
 * Checks a host spec: "[user@]host[:port]", "[user@][v6addr][:port]", a bare IPv6 address or an
 * ssh alias, as lc_runtime_new_ssh reads them. Fills why and returns -1 when it is not one.
 */
static int check_host(const char *s, size_t len, char *why, size_t wn) {
  const char *at = NULL, *h, *end = s + len, *colon = NULL, *port = NULL;
  size_t colons = 0;
  for (const char *p = s; p < end; p++) {
    unsigned char c = (unsigned char)*p;
    if (c <= ' ' || c == 0x7f) {
      snprintf(why, wn, "a blank or control character");
      return -1;
    }
    if (strchr("=,#\"'\\*?!/", c) != NULL) {
      snprintf(why, wn, "'%c' cannot be part of a host", c);
      return -1;
    }
    if (c == '@')
      at = p;
  }
  h = at ? at + 1 : s;
  if (at == s) {
    snprintf(why, wn, "empty user");
    return -1;
  }
  if (*s == '-' || (h < end && *h == '-')) {
    snprintf(why, wn, "a user or host cannot start with '-'");
    return -1;
  }
  /* ranges were expanded before; what is left is one "[address]" that starts the host */
  for (const char *p = s, *close = NULL; p < end; p++) {
    if (*p != '[' && *p != ']')
      continue;
    if (p == h && *p == '[')
      continue;
    if (*p == ']' && h < end && *h == '[' && close == NULL && p > h) {
      close = p;
      continue;
    }
    snprintf(why, wn, "'%c' outside an [address] that starts the host", *p);
    return -1;
  }
  if (h < end && *h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    if (close == NULL || close == h + 1 || (close + 1 < end && close[1] != ':')) {
      snprintf(why, wn, "expected [address] or [address]:port");
      return -1;
    }
    port = close + 1 < end ? close + 2 : NULL;
    if (port == end) {
      snprintf(why, wn, "empty port");
      return -1;
    }
  } else {
    for (const char *p = h; p < end; p++)
      if (*p == ':' && colons++ == 0)
        colon = p;
    if (colon == h) {
      snprintf(why, wn, "no host");
      return -1;
    }
    if (colons == 1) { /* host:port; more colons: an IPv6 address without a port */
      port = colon + 1;
      if (port == end) {
        snprintf(why, wn, "empty port");
        return -1;
      }
    }
  }
  if (h == end) {
    snprintf(why, wn, "no host");
    return -1;
  }
  if (port) {
    long v = 0;
    for (const char *p = port; p < end; p++) {
      if (*p < '0' || *p > '9' || v > 65535) {
        v = 0;
        break;
      }
      v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535) {
      snprintf(why, wn, "bad port '%.*s' (1 to 65535)", (int)(end - port), port);
      return -1;
    }
  }
  return 0;
}

/* A whole number from min to max; -1 when the text is not one. */
static long number(const char *s, size_t len, long min, long max) {
  long v = 0;
  if (len == 0 || len > 9)
    return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v < min || v > max ? -1 : v;
}

static int append(lc_inventory *inv, const char *host, size_t len, int gpus, int slots, int line) {
  entry *e, *ne;
  if (index_reserve(inv) < 0)
    return -ENOMEM;
  if ((ne = lc__grow(inv->e, &inv->cap, inv->n + 1, sizeof(*ne), 16)) == NULL)
    return -ENOMEM;
  inv->e = ne;
  e = &inv->e[inv->n];
  if ((e->host = lc__strndup(host, len)) == NULL)
    return -ENOMEM;
  e->gpus = gpus;
  e->slots = slots;
  e->line = line;
  index_put(inv, inv->n);
  inv->n++;
  return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* One entry on its way in: what every host of its range gets, and what messages say. */
typedef struct adding {
  lc_inventory *inv;
  const char *spec, *where, *unit;
  size_t specl;
  int gpus, slots, line;
} adding;

/* " (from 'SPEC')" when host came out of a range, else "": for messages. */
static const char *from_spec(const adding *a, const char *host, size_t hl, char *buf, size_t n) {
  buf[0] = '\0';
  if (hl != a->specl || memcmp(host, a->spec, hl) != 0)
    snprintf(buf, n, " (from '%.*s')", (int)a->specl, a->spec);
  return buf;
}

/*
 * Adds one host of an entry. A host named again with the same gpus and slots is left where it
 * was first named (pdsh and clush drop repeats too); with other values it is an error, since
 * which of them was meant cannot be told.
 */
static int add_host(const char *host, size_t hl, void *payload) {
  adding *a = payload;
  lc_inventory *inv = a->inv;
  char why[160], from[512];
  long prev;
  if (check_host(host, hl, why, sizeof(why)) < 0)
    return lc__error_set(LC_ECONFIG, "%s: bad host '%.*s'%s: %s", a->where, (int)hl, host,
                         from_spec(a, host, hl, from, sizeof(from)), why);
  if ((prev = find(inv, host, hl)) >= 0) {
    const entry *e = &inv->e[prev];
    if (e->gpus == a->gpus && e->slots == a->slots)
      return 0;
    from_spec(a, host, hl, from, sizeof(from));
    if (e->line > 0)
      return lc__error_set(LC_ECONFIG,
                           "%s: host '%.*s'%s is listed twice (first as %s %d), with other gpus "
                           "or slots",
                           a->where, (int)hl, host, from, a->unit, e->line);
    return lc__error_set(LC_ECONFIG, "%s: host '%.*s'%s is listed twice, with other gpus or slots",
                         a->where, (int)hl, host, from);
  }
  if (inv->n >= LC__HOSTRANGE_MAX)
    return lc__error_set(LC_ECONFIG, "%s: more than %d hosts", a->where, LC__HOSTRANGE_MAX);
  if (append(inv, host, hl, a->gpus, a->slots, a->line) < 0)
    return lc__error_set(-ENOMEM, "out of memory");
  return 0;
}

/* Whether s ends inside "[...]": "node[1," of "node[1, 3]". */
static int open_bracket(const char *s, size_t len) {
  int open = 0;
  for (size_t i = 0; i < len; i++)
    open = s[i] == '[' ? 1 : s[i] == ']' ? 0 : open;
  return open;
}

/*
 * Reads one entry "HOST [gpus=N] [slots=N]" from [s, s + len) (no comment, no newline) into inv;
 * HOST may be a range ("node[01-16]"), which adds every host it names. where ("FILE:LINE" or
 * "host list '...': item N") starts every message. An empty entry is skipped (*added 0).
 */
static int entry_parse(lc_inventory *inv, const char *s, size_t len, int line, const char *where,
                       const char *unit, int *added) {
  const char *p = s, *end = s + len, *host = NULL;
  size_t hl = 0;
  int gpus = -1, slots = 0, r;
  char why[160];
  adding a;
  *added = 0;
  while (p < end) {
    const char *tok, *eq;
    size_t tl;
    while (p < end && is_blank(*p))
      p++;
    if (p == end)
      break;
    tok = p;
    while (p < end && !is_blank(*p))
      p++;
    tl = (size_t)(p - tok);
    eq = memchr(tok, '=', tl);
    if (host == NULL) {
      if (eq != NULL)
        return lc__error_set(LC_ECONFIG, "%s: expected a host before '%.*s'", where, (int)tl, tok);
      host = tok;
      hl = tl;
      continue;
    }
    if (eq == NULL)
      return lc__error_set(
          LC_ECONFIG, "%s: unexpected '%.*s' after the host (expected gpus=N or slots=N%s)", where,
          (int)tl, tok, open_bracket(host, hl) ? "; a range has no blanks: n[1,3]" : "");
    if ((size_t)(eq - tok) == 4 && memcmp(tok, "gpus", 4) == 0) {
      if (gpus >= 0)
        return lc__error_set(LC_ECONFIG, "%s: gpus is given twice", where);
      if ((gpus = (int)number(eq + 1, (size_t)(tok + tl - eq - 1), 0, GPUS_MAX)) < 0)
        return lc__error_set(LC_ECONFIG, "%s: bad gpus value '%.*s' (a whole number, 0 to %d)",
                             where, (int)(tok + tl - eq - 1), eq + 1, GPUS_MAX);
    } else if ((size_t)(eq - tok) == 5 && memcmp(tok, "slots", 5) == 0) {
      if (slots > 0)
        return lc__error_set(LC_ECONFIG, "%s: slots is given twice", where);
      if ((slots = (int)number(eq + 1, (size_t)(tok + tl - eq - 1), 1, SLOTS_MAX)) < 0)
        return lc__error_set(LC_ECONFIG, "%s: bad slots value '%.*s' (a whole number, 1 to %d)",
                             where, (int)(tok + tl - eq - 1), eq + 1, SLOTS_MAX);
    } else {
      return lc__error_set(LC_ECONFIG, "%s: unknown key '%.*s' (expected gpus or slots)", where,
                           (int)(eq - tok), tok);
    }
  }
  if (host == NULL)
    return 0;
  a = (adding){.inv = inv,
               .spec = host,
               .specl = hl,
               .where = where,
               .unit = unit,
               .gpus = gpus,
               .slots = slots,
               .line = line};
  why[0] = '\0';
  if ((r = lc__hostrange_expand(host, hl, add_host, &a, why, sizeof(why))) < 0 && why[0] != '\0')
    return lc__error_set(r, "%s: bad host range '%.*s': %s", where, (int)hl, host, why);
  if (r == 0)
    *added = 1;
  return r;
}

int lc_inventory_add(lc_inventory *inv, const char *host, int gpus, int slots) {
  char why[160];
  size_t len;
  if (inv == NULL || host == NULL)
    return lc__error_set(-EINVAL, "lc_inventory_add: a NULL argument");
  len = strlen(host);
  if (check_host(host, len, why, sizeof(why)) < 0)
    return lc__error_set(LC_ECONFIG, "bad host '%s': %s", host, why);
  if (gpus < -1 || gpus > GPUS_MAX || slots < 0 || slots > SLOTS_MAX)
    return lc__error_set(LC_ECONFIG, "host '%s': gpus %d or slots %d out of range", host, gpus,
                         slots);
  if (find(inv, host, len) >= 0)
    return lc__error_set(-EEXIST, "host '%s' is already in the inventory", host);
  if (append(inv, host, len, gpus, slots, 0) < 0)
    return lc__error_set(-ENOMEM, "out of memory");
  return 0;
}

/* ---- files and lists ----------------------------------------------------------------------- */

int lc_inventory_parse_text(lc_inventory **out, const char *text, size_t len, const char *name) {
  lc_inventory *inv = NULL;
  size_t start = 0;
  int line = 0, r;
  if (out == NULL || (text == NULL && len > 0))
    return lc__error_set(-EINVAL, "lc_inventory_parse_text: a NULL argument");
  *out = NULL;
  if (name == NULL)
    name = "inventory";
  if ((r = lc_inventory_new(&inv)) < 0)
    return r;
  for (size_t i = 0; i <= len; i++) {
    const char *s = text + start, *hash;
    size_t l = i - start;
    char where[512];
    int added;
    if (i < len && text[i] != '\n')
      continue;
    start = i + 1;
    line++;
    if (memchr(s, '\0', l) != NULL) {
      r = lc__error_set(LC_ECONFIG, "%s:%d: a NUL byte (not a text file?)", name, line);
      goto out;
    }
    if ((hash = memchr(s, '#', l)) != NULL)
      l = (size_t)(hash - s);
    snprintf(where, sizeof(where), "%s:%d", name, line);
    if ((r = entry_parse(inv, s, l, line, where, "line", &added)) < 0)
      goto out;
  }
  if (inv->n == 0) {
    r = lc__error_set(LC_ECONFIG, "%s: lists no host", name);
    goto out;
  }
  *out = inv;
  inv = NULL;
  r = 0;
out:
  lc_inventory_free(inv);
  return r;
}

/* Reads at most FILE_MAX bytes of path. */
static int read_file(const char *path, char **out, size_t *len) {
  lc__buf b = {0};
  char chunk[8192];
  int fd, r = 0;
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return -errno;
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = -errno;
      break;
    }
    if (n == 0)
      break;
    if (b.len + (size_t)n > FILE_MAX) {
      r = -EFBIG;
      break;
    }
    if ((r = lc__buf_append(&b, chunk, (size_t)n)) < 0)
      break;
  }
  close(fd);
  if (r < 0) {
    lc__buf_free(&b);
    return r;
  }
  *out = b.data;
  *len = b.len;
  return 0;
}

int lc_inventory_parse(lc_inventory **out, const char *path) {
  char *text = NULL;
  size_t len = 0;
  int r;
  if (out == NULL || path == NULL)
    return lc__error_set(-EINVAL, "lc_inventory_parse: a NULL argument");
  *out = NULL;
  if ((r = read_file(path, &text, &len)) < 0)
    return lc__error_set(r, "%s: cannot read the inventory: %s", path,
                         r == -EFBIG ? "larger than 16 MiB" : lc_strerror(r));
  r = lc_inventory_parse_text(out, text ? text : "", len, path);
  free(text);
  return r;
}

int lc_inventory_from_list(lc_inventory **out, const char *list) {
  lc_inventory *inv = NULL;
  const char *p;
  int item = 0, r;
  if (out == NULL || list == NULL)
    return lc__error_set(-EINVAL, "lc_inventory_from_list: a NULL argument");
  *out = NULL;
  for (p = list; *p == ' ' || *p == '\t'; p++)
    ;
  if (*p == '\0')
    return lc__error_set(LC_ECONFIG, "the host list is empty");
  if ((r = lc_inventory_new(&inv)) < 0)
    return r;
  p = list;
  for (;;) {
    const char *comma = lc__hostrange_comma(p, strlen(p)); /* node[1,3] is one item */
    size_t l = comma ? (size_t)(comma - p) : strlen(p);
    char where[512];
    int added;
    item++;
    snprintf(where, sizeof(where), "host list '%.400s': item %d", list, item);
    if (memchr(p, '#', l) != NULL) {
      r = lc__error_set(LC_ECONFIG, "%s: '#' cannot be part of a host", where);
      goto out;
    }
    if ((r = entry_parse(inv, p, l, item, where, "item", &added)) < 0)
      goto out;
    if (!added) {
      r = lc__error_set(LC_ECONFIG, "%s is empty", where);
      goto out;
    }
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  *out = inv;
  inv = NULL;
  r = 0;
out:
  lc_inventory_free(inv);
  return r;
}
