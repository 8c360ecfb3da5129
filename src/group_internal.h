/*
 * group_internal.h - the group layer's internals, for the layers above it (clusters): the tunnel
 * mesh and the group's engine. Any thread but the engine's unless it says otherwise.
 */
#ifndef LC_GROUP_INTERNAL_H
#define LC_GROUP_INTERNAL_H

#include "runtime_internal.h"

#include <signal.h>

#include "lazycluster/group.h"

/* Exposes port of owner (NULL: this machine) on this machine and every other runtime of g, so
 * that all meet on localhost:port; the forwards go into keep. Returns 0 or the first error. */
int lc__group_expose(lc_group *g, lc_runtime *owner, int port, lc__fwdlist *keep);
/* lc__group_expose of n ports, all at once; with a log (not NULL), the hosts' listens go
 * through their mesh relays where they can (meshrelay.c), recorded in the log. */
int lc__group_expose_many(lc_group *g, lc_runtime *const *owner, const int *port, size_t n,
                          lc__fwdlist *keep, lc__relaylog *log);
/*
 * Hosts that share a 127.0.0.1 (lc__runtime_same_loopback: an SSH host that is this very machine,
 * two names of one host) need a port once: a second listen there would find it taken. first[i]
 * (lc__group_loopback_firsts, freed by the caller; NULL when out of memory) is the first host of
 * g on host i's loopback (i when none before it, or its loopback is not known). Host i needs a
 * remote listen of a port that owner (NULL: this machine) has unless it is the owner's loopback,
 * this machine's (the owner's process or this machine's local listener serves it there), or that
 * of an earlier host that gets the listen.
 */
size_t *lc__group_loopback_firsts(lc_group *g);
int lc__group_needs_listen(lc_group *g, const size_t *first, size_t i, const lc_runtime *owner);
/* The engine g's runtimes run on. */
/* Runs tasks[i] on rts[i] for each i, all at once within the group's fan-out (one job on the
 * engine loop; a runtime may come more than once, with another task). The report is in the same
 * order; with a log_dir, each writes LOG_DIR/HOST.TASKNAME.log. Returns as lc_group_run_task. */
int lc__group_run_tasks(lc_group_report **out, lc_group *g, lc_runtime *const *rts,
                        const lc_task *const *tasks, size_t n, lc_group_line_cb on_line,
                        void *payload);
lc_engine *lc__group_engine(const lc_group *g);
/* lc_task_add_write without a copy: data must outlive the task (the same text to every host of
 * a group run: one copy, not one per host). */
int lc__task_add_write_borrowed(lc_task *t, const char *remote_path, const void *data, size_t len,
                                unsigned int mode);
/* The same with gz [gz_len] in gzip's format (lc__buf_gzip), unpacked on the host into a file of
 * unpacked bytes; a host where gzip cannot run reports -ENOEXEC (nothing written there). */
int lc__task_add_write_gz_borrowed(lc_task *t, const char *remote_path, const void *gz,
                                   size_t gz_len, uint64_t unpacked, unsigned int mode);
/* lc_group_exec and lc_group_connect that stop early once *cancel (when not NULL) is non-zero (a
 * flag a signal handler may set; looked at every 100 ms): hosts not started are reported
 * LC_ECANCELED, running commands are told to stop (their lifelines end their process groups) and
 * reported LC_ECANCELED; connects under way end by their connect timeout. */
int lc__group_exec_cancel(lc_group_report **out, lc_group *g, const char *command,
                          const lc_exec_options *opts, lc_group_line_cb on_line, void *payload,
                          const volatile sig_atomic_t *cancel);
int lc__group_connect_cancel(lc_group_report **out, lc_group *g, const char *const *hosts, size_t n,
                             const lc_runtime_options *opts, const volatile sig_atomic_t *cancel);

#endif /* LC_GROUP_INTERNAL_H */
