/*
 * internal.h - declarations shared between the library's own files (prefix lc__).
 */
#ifndef LC_INTERNAL_H
#define LC_INTERNAL_H

#include "lazycluster/common.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LC_ERRMSG_MAX 1024

/* A code and its detail, carried from the engine thread back to the calling thread. */
typedef struct lc__err {
  int code;
  char msg[LC_ERRMSG_MAX];
} lc__err;

/* Sets the calling thread's error detail and returns code (so: return lc__error_set(...)). */
int lc__error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fills e and returns code; for errors raised on the engine thread. */
int lc__err_set(lc__err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Moves e into the calling thread's detail and returns e->code. */
int lc__err_raise(const lc__err *e);
/* Clears the calling thread's detail. */
void lc__error_clear(void);
/* Hands message to the warning handler (lc_set_warning_handler), once per process. */
void lc__warn(const char *message);

/*
 * Options structs (after libgit2's GIT_ERROR_CHECK_VERSION). A public call that takes one checks
 * its version first: NULL means all defaults; version 0 (never initialised) or one above the
 * version this library was built with (a caller built against a newer header) is refused with
 * -EINVAL and a detail that names the struct. lc__check_version does the check;
 * LC__CHECK_VERSION returns its error from the calling function.
 */
int lc__check_version(unsigned int version, unsigned int current, const char *type);
#define LC__CHECK_VERSION(opts, current, type)                                                     \
  do {                                                                                             \
    int lc__cv_r_ = (opts) == NULL ? 0 : lc__check_version((opts)->version, (current), (type));    \
    if (lc__cv_r_ < 0)                                                                             \
      return lc__cv_r_;                                                                            \
  } while (0)

/*
 * A caller's options struct is only as long as its version says: a version-1 caller never wrote
 * (nor allocated) the fields that version 2 appended. So the library copies a checked struct
 * with lc__options_copy(dst, src, size), where size is where the caller's version ends:
 * LC__FIELD_END(type, last field of that version), or sizeof(type) for the current version.
 * dst keeps its own values (the INIT defaults) beyond size.
 */
#define LC__FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
void lc__options_copy(void *dst, const void *src, size_t size);

/* Removes dir and what is in it (4 levels at most), following no symlink; errors are ignored. */
void lc__remove_tree(const char *dir);

/* Memory: abort-free wrappers; NULL on failure. */
void *lc__malloc(size_t n);
void *lc__calloc(size_t n, size_t size);
void *lc__realloc(void *p, size_t n);
/* Room for need items of size bytes in items, an array with room for *cap: items itself when it
 * has it, else items moved to one with room for twice *cap (first when *cap is 0) or more, until
 * need, and *cap set. NULL when out of memory (or the size would overflow): items and *cap are
 * then as they were. The one growable array of the code base:
 *   int *v = lc__grow(s->v, &s->cap, s->n + 1, sizeof(*v), 16);
 *   if (v == NULL) return -ENOMEM;
 *   s->v = v; */
void *lc__grow(void *items, size_t *cap, size_t need, size_t size, size_t first);
/* Sorts v[0..n) ascending. */
void lc__int_sort(int *v, size_t n);
/* In v[0..n), sorted ascending: the index of the first element >= x (n when none). */
size_t lc__int_lower_bound(const int *v, size_t n, int x);
/* Whether x is in v[0..n), sorted ascending. */
int lc__int_sorted_has(const int *v, size_t n, int x);
char *lc__strdup(const char *s);
char *lc__strndup(const char *s, size_t n);
char *lc__sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same from a va_list (ap is used up). */
char *lc__vsprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* A growable byte buffer. */
typedef struct lc__buf {
  char *data;
  size_t len;
  size_t cap;
} lc__buf;
int lc__buf_append(lc__buf *b, const void *data, size_t n);
int lc__buf_puts(lc__buf *b, const char *s);
int lc__buf_printf(lc__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends sep (when not 0) and v in decimal: lc__buf_printf(b, " %lu", v) without the format's
 * cost, for lists of thousands of numbers (the ports of a mesh, on every host). */
int lc__buf_put_number(lc__buf *b, char sep, unsigned long v);
/* Appends s quoted for a POSIX shell: 'it'\''s'. */
int lc__buf_shell_quote(lc__buf *b, const char *s);

/* All of [s, s + len) as a decimal number of 1 to max_digits (at most 18) digits; -1 when it is
 * not one. */
long long lc__decimal(const char *s, size_t len, size_t max_digits);
void lc__buf_consume(lc__buf *b, size_t n);
/* Gives back what b holds beyond its text (for text that waits long, many at once). */
void lc__buf_fit(lc__buf *b);
void lc__buf_free(lc__buf *b);
/* Appends data [len] in gzip's format (zlib, level 6), for a host's `gzip -dc`: -ENOMEM, or
 * -EIO when zlib fails otherwise. */
int lc__buf_gzip(lc__buf *b, const void *data, size_t len);

/*
 * Templates (template.c): tmpl with each {name} replaced by what lookup appends to out (a value
 * shell-quoted, as lookup decides); {{ and }} are literal braces. lookup returns 1 when it knew
 * name (len bytes, not NUL-terminated; "" for {}), 0 when not, or an error (its detail set with
 * lc__error_set). An unknown name, a lone } and a { without } fail with -EINVAL and a message
 * that quotes the template and the placeholder; an unknown name's is followed by hint (NULL for
 * none). Appends to out; on an error out is left as it was.
 */
typedef int (*lc__template_lookup)(lc__buf *out, const char *name, size_t len, void *ctx);
int lc__template_render(lc__buf *out, const char *tmpl, lc__template_lookup lookup, void *ctx,
                        const char *hint);

/* Monotonic milliseconds. */
uint64_t lc__now_ms(void);

#endif /* LC_INTERNAL_H */
