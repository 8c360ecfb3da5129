/*
 * launchers.h - what the built-in cluster types share.
 */
#ifndef LC_LAUNCHERS_H
#define LC_LAUNCHERS_H

#include "../src/internal.h"

/* Expands a command template for a master (w NULL) or a worker; see command.c. */
int lc__template_expand(char **out, const char *tmpl, int master_port, const lc_worker_info *w,
                        const char *master_host);

/* The value of KEY=VALUE among a type's args, or NULL. */
const char *lc__type_arg(const char *const *args, const char *key);

/* The runtime the master runs on. */
lc_runtime *lc__cluster_master_runtime(const lc_cluster *c);

extern const lc_cluster_type lc__command_type;
extern const lc_cluster_type lc__dask_type;

#endif /* LC_LAUNCHERS_H */
