/*
 * hostrange.h - pdsh/ClusterShell host ranges ("node[01-16]", "gpu[1-4,7]", "r[1-2]n[1-3]"),
 * expanded in one place for host lists and inventory files (inventory.c).
 */
#ifndef LC_HOSTRANGE_H
#define LC_HOSTRANGE_H

#include "internal.h"

/* The most hosts one spec, or one inventory, may name. */
#define LC__HOSTRANGE_MAX 100000

/* Called with each host of a spec, in order; a negative return stops the expansion. */
typedef int (*lc__hostrange_each)(const char *host, size_t len, void *payload);

/*
 * Expands the ranges of the host spec [spec, spec + len) and calls each() once per host, in
 * order: groups left to right, the last group turning fastest (r[1-2]n[1-2]: r1n1 r1n2 r2n1
 * r2n2). A range keeps the zero padding of its low end ([01-10]: 01 .. 10; [8-10]: 8 9 10). A
 * "[...]" that starts the host part ("[::1]:22", "user@[fe80::1]") is an address, not a range:
 * such a spec is passed on whole, as is a spec without brackets.
 * Returns 0; LC_ECONFIG with why filled for a bad range (unclosed, empty, reversed, not a number,
 * more than LC__HOSTRANGE_MAX hosts), before each() was called; else what each() returned, with
 * why untouched. Never sets the thread's error detail itself.
 */
int lc__hostrange_expand(const char *spec, size_t len, lc__hostrange_each each, void *payload,
                         char *why, size_t wn);

/* The first comma of [s, s + len) outside brackets, or NULL: where a host list splits. */
const char *lc__hostrange_comma(const char *s, size_t len);

#endif /* LC_HOSTRANGE_H */
