/*
 * lazycluster/inventory.h - the hosts a user names: an inventory file or a host list.
 *
 * An inventory file lists one host a line: `[user@]host[:port]`, `[user@][v6addr][:port]` or an
 * ssh config alias, then optionally `gpus=N` (GPUs to assume, whatever the host reports) and
 * `slots=N` (processes to place there), separated by blanks. `#` starts a comment; blank lines
 * are skipped:
 *
 *     # the lab
 *     lab1 gpus=8 slots=8
 *     root@10.0.0.3:2222 gpus=0
 *     lab2              # an alias of ~/.ssh/config
 *
 * A host list is the same entries separated by commas: "lab1,lab2 gpus=2,root@10.0.0.3:2222".
 *
 * A host may be a range, as pdsh and ClusterShell write them: `node[01-16]` (node01 .. node16,
 * the low end's zero padding kept; `n[8-10]` is n8 n9 n10), `gpu[1-4,7]` (lists and ranges in
 * one bracket; its commas do not split a list), `r[1-2]n[1-8]` (every combination, the last
 * group turning fastest), `root@node[1-3]:2222` (user and port on each). Its gpus=N and slots=N
 * go to every host it names; at most 100000 hosts. A bracket that starts the host is an IPv6
 * address, never a range: `[::1]:22`, `user@[fe80::1]`. A host named again with the same gpus
 * and slots is dropped, its first place kept (as pdsh does); with other values it is an error.
 *
 * Threads: every function here may be called from any thread. An inventory is not locked: many
 * threads may read one at once, but a thread that changes it (lc_inventory_add) must be alone.
 */
#ifndef LAZYCLUSTER_INVENTORY_H
#define LAZYCLUSTER_INVENTORY_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Hosts in the order they were given, each with its declared GPUs and slots. */
typedef struct lc_inventory lc_inventory;

/** Makes an empty inventory. Free it with lc_inventory_free. Returns 0, -EINVAL, -ENOMEM. */
LC_EXTERN int lc_inventory_new(lc_inventory **out);

/**
 * Reads the inventory file at path. Free it with lc_inventory_free.
 * Returns 0; LC_ECONFIG for a bad line (a bad host or range, an unknown key, a bad number, a
 * key given twice, a host listed twice with other gpus or slots, junk, more than 100000 hosts)
 * or a file that lists no host, with "PATH:LINE: why" in
 * lc_error_last(); -ENOENT, -EACCES or another negative errno when the file cannot be read;
 * -EINVAL (a NULL argument); -ENOMEM.
 */
LC_EXTERN int lc_inventory_parse(lc_inventory **out, const char *path);

/**
 * Reads an inventory from memory, as lc_inventory_parse reads a file; name stands for the file in
 * messages ("NAME:LINE: why"; NULL: "inventory"). Errors as lc_inventory_parse.
 */
LC_EXTERN int lc_inventory_parse_text(lc_inventory **out, const char *text, size_t len,
                                      const char *name);

/**
 * Reads a host list: entries as in a file, separated by commas, blanks around them allowed.
 * Returns 0, LC_ECONFIG (an empty list or item, or an item that is bad as a file line would be;
 * the detail quotes the list and numbers the item), -EINVAL (a NULL argument), -ENOMEM.
 */
LC_EXTERN int lc_inventory_from_list(lc_inventory **out, const char *list);

/**
 * Appends one host (for hosts found elsewhere, such as an ssh config; not a range); gpus -1
 * and slots 0 mean "not declared". host is copied. Returns 0, LC_ECONFIG (a bad host spec, gpus
 * or slots out of range), -EEXIST (the host is already listed), -EINVAL (a NULL argument),
 * -ENOMEM.
 */
LC_EXTERN int lc_inventory_add(lc_inventory *inv, const char *host, int gpus, int slots);

/** Frees an inventory. NULL is fine. */
LC_EXTERN void lc_inventory_free(lc_inventory *inv);

/** The number of hosts; 0 for NULL. */
LC_EXTERN size_t lc_inventory_count(const lc_inventory *inv);

/** The i-th host as written ("root@10.0.0.3:2222", "lab1"); borrowed. NULL when out of range. */
LC_EXTERN const char *lc_inventory_host(const lc_inventory *inv, size_t i);

/** The i-th host's declared GPUs (gpus=N), or -1 when none is declared or i is out of range. */
LC_EXTERN int lc_inventory_gpus(const lc_inventory *inv, size_t i);

/** The i-th host's declared slots (slots=N), or 0 when none is declared or i is out of range. */
LC_EXTERN int lc_inventory_slots(const lc_inventory *inv, size_t i);

/**
 * Where the i-th host was given: its line in the file, its item number (from 1) in a list, 0 for
 * a host added with lc_inventory_add or an i out of range.
 */
LC_EXTERN int lc_inventory_line(const lc_inventory *inv, size_t i);

/**
 * Finds host (compared as written) and stores its index in *out.
 * Returns 0, -ENOENT (not listed), -EINVAL (a NULL argument).
 */
LC_EXTERN int lc_inventory_find(size_t *out, const lc_inventory *inv, const char *host);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_INVENTORY_H */
