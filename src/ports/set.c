/*
 * set.c - port sets (lc_ports_*): adding, merging, lookup, formatting, and parsing port lists.
 */
#include "ports_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
int lc__ports_add_range(lc_ports *p, int first, int last) {
  size_t i = 0, j;
  while (i < p->n && p->r[i].last + 1 < first)
    i++;
  j = i;
  while (j < p->n && p->r[j].first <= last + 1)
    j++;
  if (i == j) {
    port_range *r = lc__grow(p->r, &p->cap, p->n + 1, sizeof(*r), 8);
    if (r == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    p->r = r;
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
  return lc__ports_add_range(ports, first, last);
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
  n1 = lc__ports_read_number(item, len, &i, &first);
  if (n1 > 0 && i == len) {
    last = first;
  } else if (n1 > 0 && item[i] == '-') {
    i++;
    n2 = lc__ports_read_number(item, len, &i, &last);
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
  return lc__ports_add_range(p, first, last);
junk:
  return lc__error_set(-EINVAL,
                       "bad port list \"%s\": \"%.*s\" is not a port or a range of ports (write "
                       "8786 or 61001-61199, separated by commas)",
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
                         "bad port list \"%s\": it is empty (write 8786 or 61001-61199, separated "
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
