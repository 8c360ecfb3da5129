/*
 * hostrange.c - pdsh/ClusterShell host ranges: "node[01-16]", "gpu[1-4,7]", "r[1-2]n[1-3]",
 * "user@node[1-3]:2222". Checked whole before the first host is handed on, so a bad spec names
 * no host at all.
 */
#include "hostrange.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIGITS_MAX 9 /* 999999999 fits a long everywhere */

typedef struct range {
  long lo, hi;
  int width; /* zero-padded to this many digits; 0: not padded */
} range;

typedef struct group {
  size_t lit, litlen; /* the literal text before the group: offset and length in the spec */
  size_t first, n;    /* its ranges */
  size_t at;          /* while expanding: the current range and value */
  long v;
} group;

typedef struct parsed {
  range *r;
  size_t nr, rcap;
  group *g;
  size_t ng, gcap;
  size_t tail; /* offset of the literal text after the last group */
} parsed;

/* A run of 1 to DIGITS_MAX digits: its value, or -1. */
static long number(const char *s, size_t len) { return (long)lc__decimal(s, len, DIGITS_MAX); }

static int padded(const char *s, size_t len) { return len > 1 && s[0] == '0'; }

/* One item of a group, "7", "01-16"; grp is the whole "[...]" for messages. */
static int item_parse(range *out, const char *s, size_t len, const char *grp, int gl, char *why,
                      size_t wn) {
  const char *dash = memchr(s, '-', len);
  const char *hi = dash ? dash + 1 : s;
  size_t ll = dash ? (size_t)(dash - s) : len, hl = dash ? (size_t)(s + len - hi) : len;
  if (len == 0) {
    snprintf(why, wn, "an empty item in '%.*s'", gl, grp);
    return LC_ECONFIG;
  }
  out->lo = number(s, ll);
  out->hi = number(hi, hl);
  if (out->lo < 0 || out->hi < 0) {
    snprintf(why, wn,
             "'%.*s' in '%.*s' is not a number or a range of numbers (like 7, 1-4 or 01-16; at "
             "most %d digits)",
             (int)len, s, gl, grp, DIGITS_MAX);
    return LC_ECONFIG;
  }
  if (out->lo > out->hi) {
    snprintf(why, wn, "'%.*s' in '%.*s' runs backwards", (int)len, s, gl, grp);
    return LC_ECONFIG;
  }
  /* [01-100] gives 01 .. 99, 100 as ClusterShell does; [1-010] is ambiguous */
  if (padded(hi, hl) && (!padded(s, ll) || ll != hl)) {
    snprintf(why, wn, "'%.*s' in '%.*s' pads its two ends differently", (int)len, s, gl, grp);
    return LC_ECONFIG;
  }
  out->width = padded(s, ll) ? (int)ll : 0;
  return 0;
}

/* Splits spec into literal text and groups; counts the hosts against the cap. */
static int spec_parse(parsed *p, const char *spec, size_t len, char *why, size_t wn) {
  size_t lit = 0, i = 0;
  uint64_t total = 1;
  int r;
  while (i < len) {
    size_t open, close;
    uint64_t count = 0;
    group *g;
    if (spec[i] == ']') {
      snprintf(why, wn, "']' without '['");
      return LC_ECONFIG;
    }
    if (spec[i] != '[') {
      i++;
      continue;
    }
    open = i;
    for (close = open + 1; close < len && spec[close] != ']'; close++)
      if (spec[close] == '[') {
        snprintf(why, wn, "'[' inside '[...]'");
        return LC_ECONFIG;
      }
    if (close == len) {
      snprintf(why, wn, "'[' is not closed");
      return LC_ECONFIG;
    }
    if (close == open + 1) {
      snprintf(why, wn, "an empty range '[]'");
      return LC_ECONFIG;
    }
    if ((g = lc__grow(p->g, &p->gcap, p->ng + 1, sizeof(*g), 4)) == NULL)
      return -ENOMEM;
    p->g = g;
    g = &p->g[p->ng++];
    g->lit = lit;
    g->litlen = open - lit;
    g->first = p->nr;
    g->n = 0;
    for (size_t s = open + 1; s <= close;) {
      size_t e = s;
      range *rg;
      while (e < close && spec[e] != ',')
        e++;
      if ((rg = lc__grow(p->r, &p->rcap, p->nr + 1, sizeof(*rg), 4)) == NULL)
        return -ENOMEM;
      p->r = rg;
      rg = &p->r[p->nr];
      if ((r = item_parse(rg, spec + s, e - s, spec + open, (int)(close + 1 - open), why, wn)) < 0)
        return r;
      p->nr++;
      g->n++;
      count += (uint64_t)(rg->hi - rg->lo + 1);
      s = e + 1;
    }
    total *= count > LC__HOSTRANGE_MAX ? LC__HOSTRANGE_MAX + 1 : count;
    if (total > LC__HOSTRANGE_MAX) {
      snprintf(why, wn, "it names more than %d hosts", LC__HOSTRANGE_MAX);
      return LC_ECONFIG;
    }
    i = lit = close + 1;
  }
  p->tail = lit;
  return 0;
}

/* Builds each host in turn, the last group turning fastest. */
static int generate(parsed *p, const char *spec, size_t len, lc__hostrange_each each,
                    void *payload) {
  lc__buf b = {0};
  char num[32];
  size_t k;
  int r = 0;
  for (size_t i = 0; i < p->ng; i++) {
    p->g[i].at = p->g[i].first;
    p->g[i].v = p->r[p->g[i].at].lo;
  }
  do {
    b.len = 0;
    for (size_t i = 0; i < p->ng && r == 0; i++) {
      const group *g = &p->g[i];
      int n = snprintf(num, sizeof(num), "%0*ld", p->r[g->at].width, g->v);
      if ((r = lc__buf_append(&b, spec + g->lit, g->litlen)) == 0)
        r = lc__buf_append(&b, num, (size_t)n);
    }
    if (r == 0)
      r = lc__buf_append(&b, spec + p->tail, len - p->tail);
    if (r < 0 || (r = each(b.data, b.len, payload)) < 0)
      break;
    for (k = p->ng; k > 0; k--) { /* the next host: an odometer over the groups */
      group *g = &p->g[k - 1];
      if (g->v < p->r[g->at].hi) {
        g->v++;
        break;
      }
      if (g->at + 1 < g->first + g->n) {
        g->v = p->r[++g->at].lo;
        break;
      }
      g->at = g->first;
      g->v = p->r[g->at].lo;
    }
  } while (k > 0);
  lc__buf_free(&b);
  return r;
}

int lc__hostrange_expand(const char *spec, size_t len, lc__hostrange_each each, void *payload,
                         char *why, size_t wn) {
  parsed p = {0};
  const char *host = spec;
  int r;
  for (const char *s = spec; s < spec + len; s++)
    if (*s == '@')
      host = s + 1;
  /* no brackets, or an address in brackets as lc_runtime_new_ssh reads it: one host */
  if ((memchr(spec, '[', len) == NULL && memchr(spec, ']', len) == NULL) ||
      (host < spec + len && *host == '['))
    return each(spec, len, payload);
  if ((r = spec_parse(&p, spec, len, why, wn)) == 0)
    r = generate(&p, spec, len, each, payload);
  else if (r == -ENOMEM)
    snprintf(why, wn, "out of memory");
  free(p.r);
  free(p.g);
  return r;
}

const char *lc__hostrange_comma(const char *s, size_t len) {
  int depth = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '[')
      depth++;
    else if (s[i] == ']' && depth > 0)
      depth--;
    else if (s[i] == ',' && depth == 0)
      return s + i;
  }
  return NULL;
}
