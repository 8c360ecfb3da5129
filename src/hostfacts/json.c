/*
 * json.c - the reader of `lazyclusterctl probe --json` (lc__probe_json_parse): a small JSON
 * reader (objects, arrays, strings with escapes, unsigned numbers) and the probe's shape on it.
 */
#include "hostfacts_text.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct jin {
  const char *p, *end;
  int depth;
} jin;

#define JSON_DEPTH_MAX 32

static void j_ws(jin *j) {
  while (j->p < j->end && lc__is_blank(*j->p))
    j->p++;
}

static int j_peek(jin *j) {
  j_ws(j);
  return j->p < j->end ? (unsigned char)*j->p : -1;
}

static int j_eat(jin *j, char c) {
  if (j_peek(j) != (unsigned char)c)
    return -EINVAL;
  j->p++;
  return 0;
}

static int hex4(const char *p, const char *end, unsigned *out) {
  unsigned v = 0;
  if (end - p < 4)
    return -EINVAL;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -EINVAL;
  }
  *out = v;
  return 0;
}

/* Appends one byte to buf[n] at *w, dropping what does not fit. */
static void put(char *buf, size_t n, size_t *w, char c) {
  if (buf && *w + 1 < n)
    buf[(*w)++] = c;
}

static void put_utf8(char *buf, size_t n, size_t *w, unsigned cp) {
  if (cp < 0x80) {
    put(buf, n, w, (char)cp);
  } else if (cp < 0x800) {
    put(buf, n, w, (char)(0xc0 | (cp >> 6)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    put(buf, n, w, (char)(0xe0 | (cp >> 12)));
    put(buf, n, w, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  } else {
    put(buf, n, w, (char)(0xf0 | (cp >> 18)));
    put(buf, n, w, (char)(0x80 | ((cp >> 12) & 0x3f)));
    put(buf, n, w, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  }
}

/* A JSON string into buf[n] (cut to fit; NULL: skipped). */
static int j_string(jin *j, char *buf, size_t n) {
  size_t w = 0;
  if (j_eat(j, '"') < 0)
    return -EINVAL;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p++;
    unsigned cp, lo;
    if (c < 0x20)
      return -EINVAL;
    if (c != '\\') {
      put(buf, n, &w, (char)c);
      continue;
    }
    if (j->p >= j->end)
      return -EINVAL;
    switch (*j->p++) {
    case '"':
      put(buf, n, &w, '"');
      break;
    case '\\':
      put(buf, n, &w, '\\');
      break;
    case '/':
      put(buf, n, &w, '/');
      break;
    case 'b':
      put(buf, n, &w, '\b');
      break;
    case 'f':
      put(buf, n, &w, '\f');
      break;
    case 'n':
      put(buf, n, &w, '\n');
      break;
    case 'r':
      put(buf, n, &w, '\r');
      break;
    case 't':
      put(buf, n, &w, '\t');
      break;
    case 'u':
      if (hex4(j->p, j->end, &cp) < 0)
        return -EINVAL;
      j->p += 4;
      if (cp >= 0xd800 && cp <= 0xdbff && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
          hex4(j->p + 2, j->end, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        j->p += 6;
      } else if (cp >= 0xd800 && cp <= 0xdfff) {
        cp = 0xfffd;
      }
      put_utf8(buf, n, &w, cp);
      break;
    default:
      return -EINVAL;
    }
  }
  if (j->p >= j->end)
    return -EINVAL;
  j->p++;
  if (buf && n > 0)
    buf[w] = '\0';
  return 0;
}

/* A JSON number; *u holds it when it is a non-negative integer below 2^63 (*is_u set). */
static int j_number(jin *j, uint64_t *u, int *is_u) {
  int digits = 0, neg = 0, frac = 0;
  uint64_t v = 0;
  j_ws(j);
  if (j->p < j->end && *j->p == '-') {
    neg = 1;
    j->p++;
  }
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (v < (UINT64_C(1) << 59))
      v = v * 10 + (uint64_t)(*j->p - '0');
    else
      frac = 1; /* too large to keep */
    j->p++;
    digits++;
  }
  if (digits == 0)
    return -EINVAL;
  if (j->p < j->end && *j->p == '.') {
    frac = 1;
    j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return -EINVAL;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    frac = 1;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return -EINVAL;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  *is_u = !neg && !frac;
  *u = v;
  return 0;
}

static int j_literal(jin *j, const char *lit) {
  size_t l = strlen(lit);
  j_ws(j);
  if ((size_t)(j->end - j->p) < l || memcmp(j->p, lit, l) != 0)
    return -EINVAL;
  j->p += l;
  return 0;
}

static int j_skip(jin *j);

/* Calls member(key) for each member of an object; member consumes the value. */
typedef int (*j_member_fn)(jin *j, const char *key, void *arg);

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_object(jin *j, j_member_fn member, void *arg) {
  int r;
  if (++j->depth > JSON_DEPTH_MAX || j_eat(j, '{') < 0)
    return -EINVAL;
  if (j_peek(j) == '}') {
    j->p++;
    j->depth--;
    return 0;
  }
  for (;;) {
    char key[64];
    if ((r = j_string(j, key, sizeof(key))) < 0 || (r = j_eat(j, ':')) < 0 ||
        (r = member ? member(j, key, arg) : j_skip(j)) < 0)
      return r;
    if (j_peek(j) == ',') {
      j->p++;
      continue;
    }
    if (j_eat(j, '}') < 0)
      return -EINVAL;
    j->depth--;
    return 0;
  }
}

/* Calls element(index) for each element of an array; element consumes the value. */
typedef int (*j_element_fn)(jin *j, size_t i, void *arg);

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_array(jin *j, j_element_fn element, void *arg) {
  int r;
  if (++j->depth > JSON_DEPTH_MAX || j_eat(j, '[') < 0)
    return -EINVAL;
  if (j_peek(j) == ']') {
    j->p++;
    j->depth--;
    return 0;
  }
  for (size_t i = 0;; i++) {
    if ((r = element ? element(j, i, arg) : j_skip(j)) < 0)
      return r;
    if (j_peek(j) == ',') {
      j->p++;
      continue;
    }
    if (j_eat(j, ']') < 0)
      return -EINVAL;
    j->depth--;
    return 0;
  }
}

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_skip(jin *j) {
  uint64_t u;
  int is_u;
  switch (j_peek(j)) {
  case '{':
    return j_object(j, NULL, NULL);
  case '[':
    return j_array(j, NULL, NULL);
  case '"':
    return j_string(j, NULL, 0);
  case 't':
    return j_literal(j, "true");
  case 'f':
    return j_literal(j, "false");
  case 'n':
    return j_literal(j, "null");
  default:
    return j_number(j, &u, &is_u);
  }
}

static int j_uint(jin *j, uint64_t *out) {
  int is_u;
  int r = j_number(j, out, &is_u);
  return r < 0 ? r : is_u ? 0 : -EINVAL;
}

static int gpu_member(jin *j, const char *key, void *arg) {
  lc_gpu *g = arg;
  uint64_t v;
  if (strcmp(key, "index") == 0) {
    if (j_uint(j, &v) < 0 || v >= LC__HOSTFACTS_MAX_GPUS)
      return -EINVAL;
    g->index = (int)v;
    return 0;
  }
  if (strcmp(key, "uuid") == 0)
    return j_string(j, g->uuid, sizeof(g->uuid));
  if (strcmp(key, "name") == 0)
    return j_string(j, g->name, sizeof(g->name));
  if (strcmp(key, "memory_bytes") == 0)
    return j_uint(j, &g->memory_bytes);
  return j_skip(j);
}

typedef struct probe_state {
  lc_hostinfo *info;
  size_t cap;
  int have_gpus, have_source;
} probe_state;

static int gpu_element(jin *j, size_t i, void *arg) {
  probe_state *ps = arg;
  lc_hostinfo *info = ps->info;
  lc_gpu g, *n;
  int r;
  memset(&g, 0, sizeof(g));
  g.index = (int)(i < LC__HOSTFACTS_MAX_GPUS ? i : 0);
  if ((r = j_object(j, gpu_member, &g)) < 0)
    return r;
  if (info->gpu_count == LC__HOSTFACTS_MAX_GPUS)
    return 0;
  if ((n = lc__grow(info->gpus, &ps->cap, info->gpu_count + 1, sizeof(*n), 8)) == NULL)
    return -ENOMEM;
  info->gpus = n;
  info->gpus[info->gpu_count++] = g;
  return 0;
}

static int probe_member(jin *j, const char *key, void *arg) {
  probe_state *ps = arg;
  if (strcmp(key, "gpus") == 0) {
    ps->have_gpus = 1;
    return j_array(j, gpu_element, ps);
  }
  if (strcmp(key, "gpu_source") == 0) {
    ps->have_source = 1;
    return j_string(j, ps->info->gpu_source, sizeof(ps->info->gpu_source));
  }
  if (strcmp(key, "gpu_reason") == 0)
    return j_string(j, ps->info->gpu_reason, sizeof(ps->info->gpu_reason));
  return j_skip(j);
}

int lc__probe_json_parse(lc_hostinfo *out, const char *text, size_t len) {
  const char *line = NULL, *p = text, *end = text + len;
  probe_state ps = {out, 0, 0, 0};
  jin j;
  int r;
  while (p < end && line == NULL) {
    const char *eol = memchr(p, '\n', (size_t)(end - p)), *s = p;
    while (s < (eol ? eol : end) && lc__is_blank(*s))
      s++;
    if (s < end && *s == '{')
      line = s;
    p = eol ? eol + 1 : end;
  }
  free(out->gpus);
  out->gpus = NULL;
  out->gpu_count = 0;
  out->gpu_source[0] = out->gpu_reason[0] = '\0';
  if (line == NULL)
    return -EINVAL;
  j.p = line;
  j.end = memchr(line, '\n', (size_t)(end - line));
  if (j.end == NULL)
    j.end = end;
  j.depth = 0;
  if ((r = j_object(&j, probe_member, &ps)) == 0 && (!ps.have_gpus || !ps.have_source))
    r = -EINVAL;
  if (r == 0 && j_peek(&j) != -1)
    r = -EINVAL;
  if (r < 0) {
    free(out->gpus);
    out->gpus = NULL;
    out->gpu_count = 0;
    out->gpu_source[0] = out->gpu_reason[0] = '\0';
  }
  return r;
}
