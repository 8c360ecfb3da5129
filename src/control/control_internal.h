/*
 * control_internal.h - what the files of the control layer (src/control/) share: the supervisor's
 * lc_control, the state directory's paths and entries, and the log files.
 *
 * The layer sits above the cluster layer (it reads a cluster through the public accessors only)
 * and below the CLI. The lock of an entry is an flock(2) on NAME/lock, held by the supervisor's
 * open file description only (O_CLOEXEC: a process it starts does not keep it).
 */
#ifndef LC_CONTROL_INTERNAL_H
#define LC_CONTROL_INTERNAL_H

#include "internal.h"
#include "lazycluster/control.h"

#include <pthread.h>

/* A log file of the cluster's: opened on its first line. */
typedef struct lc__log_file {
  int fd;         /* -1: not open */
  long long size; /* bytes in it now */
} lc__log_file;

struct lc_control {
  char *name, *state_dir, *dir, *logs_dir, *sock_path, *type;
  int lock_fd, listen_fd;
  long long created_ms; /* since the Unix epoch */
  lc_cluster *cluster;  /* borrowed; NULL: not attached yet */
  char *state, *why;
  char **env;    /* "NAME=VALUE", NULL-terminated, or NULL */
  int *stop_fds; /* connections waiting for "stopped" */
  size_t n_stop;

  /* the logs: any thread */
  pthread_mutex_t log_mu;
  long long log_max;
  lc__log_file master_log, cluster_log;
  lc__log_file *worker_logs; /* by index */
  size_t n_worker_logs;
};

/* ms since the Unix epoch. */
long long lc__control_wall_ms(void);

/* Whether name is a valid cluster name; else -EINVAL with a detail that quotes it. */
int lc__control_check_name(const char *name);

/* The state directory: dir when not NULL (checked like the default one, not made), else
 * lc_state_dir's. *out lc_free'd. */
int lc__control_state_dir(char **out, const char *dir);

/* Takes the lock of STATE/NAME/lock without waiting: the fd (O_CLOEXEC) on success, -EWOULDBLOCK
 * when a live supervisor holds it, -ENOENT when there is no such entry (create 0), or an errno.
 * A lock on a file that was removed meanwhile is retried. */
int lc__control_lock(const char *dir, int create);

/* Whether the supervisor of the entry in dir holds its lock (1), or not (0). */
int lc__control_alive(const char *dir);

/* Removes an entry's directory and what is in it (logs/ too). */
void lc__control_remove_dir(const char *dir);

/* Reads an entry's info and ended files into e (name not set). */
void lc__control_read_entry(const char *dir, lc_control_entry *e);

/* "3 s", "2 min", "1 h 5 min", "2 d 3 h": an age for a message; compact: "3s", "2m", "1h05m",
 * "2d03h", for tables and the summary line. */
void lc__control_age(char *out, size_t size, long long ms, int compact);

/* The socket's address for path: the path itself when it fits sun_path, else through
 * /proc/self/fd/N of its directory (*dirfd then set, to be closed by the caller). */
struct sockaddr_un;
int lc__control_sockaddr(struct sockaddr_un *sa, const char *path, int *dirfd);

/* Answers one request of an accepted connection: the reply in *out ("ok\n..." or "error ...\n").
 * Returns 1 for stop (no reply made: the connection waits for lc_control_free), 0, or -ENOMEM. */
int lc__control_answer(lc_control *ctl, const char *request, lc__buf *out);

/* The status as text, as JSON, the summary line and its JSON. */
int lc__control_status_text(lc_control *ctl, lc__buf *b);
int lc__control_status_json(lc_control *ctl, lc__buf *b);
int lc__control_summary(lc_control *ctl, lc__buf *b, int json);
int lc__control_env(lc_control *ctl, lc__buf *b);

/* The last n lines of cluster.log (without their newlines, at most max_bytes read). *lines is a
 * buffer of lines separated by '\n'. */
int lc__control_last_events(lc_control *ctl, lc__buf *lines, int n);

/* Closes the open log files. */
void lc__control_logs_close(lc_control *ctl);

#endif /* LC_CONTROL_INTERNAL_H */
