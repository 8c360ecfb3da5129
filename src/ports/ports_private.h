/*
 * ports_private.h - what the parts of the ports module (src/ports/) share: the set's layout, the
 * port bitmaps and the digit reader. Private to src/ports/; other modules include
 * ../ports_internal.h or the public lazycluster/ports.h.
 */
#ifndef LC_PORTS_PRIVATE_H
#define LC_PORTS_PRIVATE_H

#include "ports_internal.h"

#include "lazycluster/ports.h"

#include <stddef.h>
#include <stdint.h>

#define PORT_MAX 65535

typedef struct port_range {
  int first, last;
} port_range;

struct lc_ports {
  port_range *r; /* sorted, neither overlapping nor touching */
  size_t n, cap;
  size_t count;
};

static inline int lc__ports_bit_get(const uint8_t *bits, int port) {
  return bits[port >> 3] >> (port & 7) & 1;
}
static inline void lc__ports_bit_set(uint8_t *bits, int port) {
  bits[port >> 3] |= (uint8_t)(1u << (port & 7));
}
static inline void lc__ports_bit_clear(uint8_t *bits, int port) {
  bits[port >> 3] &= (uint8_t) ~(1u << (port & 7));
}

static inline int lc__ports_is_digit(char c) { return c >= '0' && c <= '9'; }

/*
 * Reads the digits at s[*i] into *port (capped at PORT_MAX + 1 so it cannot overflow).
 * Returns how many digits there were.
 */
static inline size_t lc__ports_read_number(const char *s, size_t len, size_t *i, int *port) {
  size_t start = *i;
  *port = 0;
  while (*i < len && lc__ports_is_digit(s[*i])) {
    *port = *port * 10 + (s[*i] - '0');
    if (*port > PORT_MAX)
      *port = PORT_MAX + 1;
    (*i)++;
  }
  return *i - start;
}

/* Adds first..last (valid, ordered) to p, merging every range it overlaps or touches. Returns 0
 * or -ENOMEM. */
int lc__ports_add_range(lc_ports *p, int first, int last);

/* Counts, for the message of LC_ENOPORTS, why the ports of ranges were turned down. */
typedef struct lc__port_refusals {
  size_t on_hosts, reserved, here;
} lc__port_refusals;

/*
 * The first port of ranges that is not in taken (a bitmap: listening on some host), not reserved
 * in this process and free on this machine, reserved for the caller, into *out (0: none; why says
 * why each was turned down). Checked and reserved under one lock. Returns 0, or the error of the
 * test on this machine.
 */
int lc__ports_reserve_first(int *out, const lc_ports *ranges, const uint8_t *taken,
                            lc__port_refusals *why);

#endif /* LC_PORTS_PRIVATE_H */
