/*
 * util.c - memory wrappers, the growable buffer, shell quoting, time, version, removing a tree.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

void *lc__malloc(size_t n) { return malloc(n ? n : 1); }
void *lc__calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }
void *lc__realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
void lc_free(void *ptr) { free(ptr); }

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

void lc__int_sort(int *v, size_t n) {
  if (n > 1)
    qsort(v, n, sizeof(*v), int_cmp);
}

size_t lc__int_lower_bound(const int *v, size_t n, int x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int lc__int_sorted_has(const int *v, size_t n, int x) {
  size_t i = lc__int_lower_bound(v, n, x);
  return i < n && v[i] == x;
}

void *lc__grow(void *items, size_t *cap, size_t need, size_t size, size_t first) {
  size_t n = *cap ? *cap : first ? first : 1;
  void *v;
  if (need <= *cap && items != NULL)
    return items;
  while (n < need) {
    if (n > SIZE_MAX / 2)
      return NULL;
    n *= 2;
  }
  if (size == 0 || n > SIZE_MAX / size || (v = lc__realloc(items, n * size)) == NULL)
    return NULL;
  *cap = n;
  return v;
}

char *lc__strndup(const char *s, size_t n) {
  char *d = lc__malloc(n + 1);
  if (d == NULL)
    return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *lc__strdup(const char *s) { return s ? lc__strndup(s, strlen(s)) : NULL; }

char *lc_strdup(const char *s) { return lc__strdup(s); }

char *lc__vsprintf(const char *fmt, va_list ap) {
  va_list again;
  char *d;
  int n;
  va_copy(again, ap);
  n = vsnprintf(NULL, 0, fmt, ap);
  if (n < 0 || (d = lc__malloc((size_t)n + 1)) == NULL) {
    va_end(again);
    return NULL;
  }
  vsnprintf(d, (size_t)n + 1, fmt, again);
  va_end(again);
  return d;
}

char *lc__sprintf(const char *fmt, ...) {
  va_list ap;
  char *d;
  va_start(ap, fmt);
  d = lc__vsprintf(fmt, ap);
  va_end(ap);
  return d;
}

char *lc_asprintf(const char *fmt, ...) {
  va_list ap;
  char *d;
  if (fmt == NULL)
    return NULL;
  va_start(ap, fmt);
  d = lc__vsprintf(fmt, ap);
  va_end(ap);
  return d;
}

static int buf_reserve(lc__buf *b, size_t extra) {
  size_t cap = b->cap ? b->cap : 64;
  char *d;
  if (b->len + extra + 1 <= b->cap)
    return 0;
  while (cap < b->len + extra + 1)
    cap *= 2;
  if ((d = lc__realloc(b->data, cap)) == NULL)
    return -12; /* -ENOMEM */
  b->data = d;
  b->cap = cap;
  return 0;
}

int lc__buf_append(lc__buf *b, const void *data, size_t n) {
  int r;
  if ((r = buf_reserve(b, n)) < 0)
    return r;
  if (n)
    memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int lc__buf_puts(lc__buf *b, const char *s) { return lc__buf_append(b, s, strlen(s)); }

int lc__buf_gzip(lc__buf *b, const void *data, size_t len) {
  z_stream z;
  int r, zr;
  if (len > 0xffffffffu)
    return -E2BIG;
  memset(&z, 0, sizeof(z));
  /* 15 + 16: the largest window, with gzip's header and trailer rather than zlib's */
  if ((zr = deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)) != Z_OK)
    return zr == Z_MEM_ERROR ? -ENOMEM : -EIO;
  if ((r = buf_reserve(b, deflateBound(&z, (uLong)len))) == 0) {
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)b->data + b->len;
    z.avail_out = (uInt)(b->cap - b->len - 1);
    zr = deflate(&z, Z_FINISH); /* the bound fits it all: one call */
    if (zr == Z_STREAM_END) {
      b->len += z.total_out;
      b->data[b->len] = '\0';
    } else {
      r = -EIO;
    }
  }
  deflateEnd(&z);
  return r;
}

int lc__buf_put_number(lc__buf *b, char sep, unsigned long v) {
  char text[24];
  size_t i = sizeof(text);
  do
    text[--i] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  if (sep != 0)
    text[--i] = sep;
  return lc__buf_append(b, text + i, sizeof(text) - i);
}

int lc__buf_printf(lc__buf *b, const char *fmt, ...) {
  va_list ap;
  int n, r;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return -22;
  if ((r = buf_reserve(b, (size_t)n)) < 0)
    return r;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

int lc__buf_shell_quote(lc__buf *b, const char *s) {
  int r = 0;
  if ((r = lc__buf_append(b, "'", 1)) < 0)
    return r;
  for (;;) {
    size_t n = strcspn(s, "'"); /* a run without quotes goes whole */
    if ((r = lc__buf_append(b, s, n)) < 0)
      return r;
    if (s[n] == '\0')
      break;
    if ((r = lc__buf_append(b, "'\\''", 4)) < 0)
      return r;
    s += n + 1;
  }
  return lc__buf_append(b, "'", 1);
}

void lc__buf_consume(lc__buf *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
  } else {
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
  }
  if (b->data)
    b->data[b->len] = '\0';
}

void lc__buf_fit(lc__buf *b) {
  char *d;
  if (b->data == NULL || b->cap <= b->len + 1)
    return;
  if ((d = realloc(b->data, b->len + 1)) != NULL) { /* else it stays as it was */
    b->data = d;
    b->cap = b->len + 1;
  }
}

void lc__buf_free(lc__buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

uint64_t lc__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#define LC_STR_(x) #x
#define LC_STR(x) LC_STR_(x)
const char *lc_version(void) {
  return LC_STR(LC_VERSION_MAJOR) "." LC_STR(LC_VERSION_MINOR) "." LC_STR(LC_VERSION_PATCH);
}

unsigned int lc_version_number(void) { return LC_VERSION_NUMBER; }

long long lc__decimal(const char *s, size_t len, size_t max_digits) {
  long long v = 0;
  if (len == 0 || len > max_digits || len > 18)
    return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* Refuses an options struct of a version this library does not know (internal.h). */
int lc__check_version(unsigned int version, unsigned int current, const char *type) {
  char known[48];
  if (version >= 1 && version <= current)
    return 0;
  if (current > 1)
    snprintf(known, sizeof(known), "versions 1 to %u", current);
  else
    snprintf(known, sizeof(known), "version 1");
  if (version == 0)
    return lc__error_set(-EINVAL,
                         "%s version 0 is unknown: this library knows %s (not initialised with "
                         "its INIT macro or %s_init()?)",
                         type, known, type);
  return lc__error_set(-EINVAL,
                       "%s version %u is unknown: this library knows %s (built against a newer "
                       "lazycluster header?)",
                       type, version, known);
}

void lc__options_copy(void *dst, const void *src, size_t size) { memcpy(dst, src, size); }

/* remove_tree: a directory and what is in it, at most 4 levels deep, following no symlink (a
 * symlink in it is removed, not what it points to). */
static void remove_tree(int parent, const char *name, int depth) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d;
  struct dirent *de;
  if (fd < 0) {
    unlinkat(parent, name, 0);
    return;
  }
  if ((d = fdopendir(fd)) == NULL) {
    close(fd);
    return;
  }
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (unlinkat(fd, de->d_name, 0) < 0 && errno == EISDIR && depth < 4)
      remove_tree(fd, de->d_name, depth + 1);
  }
  closedir(d);
  unlinkat(parent, name, AT_REMOVEDIR);
}

void lc__remove_tree(const char *dir) { remove_tree(AT_FDCWD, dir, 0); }
