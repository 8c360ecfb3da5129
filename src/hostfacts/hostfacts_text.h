/*
 * hostfacts_text.h - what the parts of the host-facts module (src/hostfacts/) share: the marker
 * of the script's lines, the GPU limit, and the small span helpers every reader uses.
 * Private to src/hostfacts/; other modules include ../hostfacts.h.
 */
#ifndef LC_HOSTFACTS_TEXT_H
#define LC_HOSTFACTS_TEXT_H

#include "hostfacts.h"

#include <string.h>

#define LC__HOSTFACTS_MARK "@@LCF"
#define LC__HOSTFACTS_MAX_GPUS 1024 /* more than any machine has */

static inline void lc__copy_str(char *dst, size_t n, const char *src) {
  size_t l = strnlen(src, n - 1);
  memcpy(dst, src, l);
  dst[l] = '\0';
}

static inline void lc__copy_mem(char *dst, size_t n, const char *src, size_t len) {
  if (len > n - 1)
    len = n - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

static inline int lc__is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Trims blanks from both ends of [*s, *s + *len). */
static inline void lc__trim_span(const char **s, size_t *len) {
  while (*len > 0 && lc__is_blank(**s)) {
    (*s)++;
    (*len)--;
  }
  while (*len > 0 && lc__is_blank((*s)[*len - 1]))
    (*len)--;
}

/* Parses all of [s, s + len) as a decimal number; -1 when it is not one (or too large). */
static inline long long lc__span_number(const char *s, size_t len) {
  return lc__decimal(s, len, 18);
}

#endif /* LC_HOSTFACTS_TEXT_H */
