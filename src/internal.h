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

/* Memory: abort-free wrappers; NULL on failure. */
void *lc__malloc(size_t n);
void *lc__calloc(size_t n, size_t size);
void *lc__realloc(void *p, size_t n);
char *lc__strdup(const char *s);
char *lc__strndup(const char *s, size_t n);
char *lc__sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer. */
typedef struct lc__buf {
  char *data;
  size_t len;
  size_t cap;
} lc__buf;
int lc__buf_append(lc__buf *b, const void *data, size_t n);
int lc__buf_puts(lc__buf *b, const char *s);
int lc__buf_printf(lc__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s quoted for a POSIX shell: 'it'\''s'. */
int lc__buf_shell_quote(lc__buf *b, const char *s);

/* All of [s, s + len) as a decimal number of 1 to max_digits (at most 18) digits; -1 when it is
 * not one. */
long long lc__decimal(const char *s, size_t len, size_t max_digits);
void lc__buf_consume(lc__buf *b, size_t n);
void lc__buf_free(lc__buf *b);

/* Monotonic milliseconds. */
uint64_t lc__now_ms(void);

#endif /* LC_INTERNAL_H */
