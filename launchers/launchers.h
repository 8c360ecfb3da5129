/*
 * launchers.h - what the built-in cluster types share.
 */
#ifndef LC_LAUNCHERS_H
#define LC_LAUNCHERS_H

#include "../src/internal.h"
#include "lazycluster.h"

/* Expands a command template for a master (w NULL) or a worker; see command.c. */
int lc__template_expand(char **out, const char *tmpl, int master_port, const lc_worker_info *w,
                        const char *master_host);

/* The value of KEY=VALUE among a type's args, or NULL. */
const char *lc__type_arg(const char *const *args, const char *key);

typedef int (*lc__master_command_fn)(lc_master_launcher *self, lc_cluster *c, int port, char **out);
typedef int (*lc__worker_command_fn)(lc_worker_launcher *self, lc_cluster *c,
                                     const lc_worker_info *w, char **out);

/* Fills in a built-in type's launcher pair: current versions, data, the type's name (static),
 * the two command methods. */
void lc__launchers_init(lc_master_launcher *m, lc_worker_launcher *w, void *data, const char *name,
                        lc__master_command_fn mc, lc__worker_command_fn wc);

/* A type's data, from whichever of its launchers release was given. */
void *lc__launchers_data(lc_master_launcher *m, lc_worker_launcher *w);

extern const lc_cluster_type lc__command_type;
extern const lc_cluster_type lc__dask_type;

#endif /* LC_LAUNCHERS_H */
