/*
 * jobs_internal.h - the job queue's parts (lazycluster/jobs.h): the scheduler (queue.c: slots,
 * dispatch, retries, put-backs, cancel, the public calls), the pool's workers and their line
 * protocol (pool.c), what a job leaves behind locally (files.c: results directory, returns,
 * sends) and the pure parts below, which need no network and are fuzzed: a job's command
 * (command.c) and GNU parallel's joblog (joblog.c).
 */
#ifndef LC_JOBS_INTERNAL_H
#define LC_JOBS_INTERNAL_H

#include "../internal.h"

#include "lazycluster/jobs.h"

#include <stdint.h>

/* ---- command.c: a job's command --------------------------------------------------------- */

/* Where a job runs, for the placeholders {gpu} {host} {slot} {workdir}. */
typedef struct lc__job_place {
  const char *host;
  int slot;
  int gpu; /* -1: none */
  const char *workdir;
} lc__job_place;

/*
 * The command of job number seq: tmpl with {} (args joined by single blanks, one word), {1}..{N}
 * (one argument each), {#} (seq), {gpu} {host} {slot} {workdir} (from where) replaced, each value
 * shell-quoted; a tmpl without {} or {N} gets each argument appended, quoted, after a blank.
 * where NULL checks the template only (placeholder values stand in; {N} beyond nargs is still an
 * error). Errors (-EINVAL) quote the template and the placeholder: an unknown placeholder, {N}
 * beyond nargs ("job 5 has 2 arguments"), a lone brace.
 */
int lc__job_command(lc__buf *out, const char *tmpl, const char *const *args, size_t nargs,
                    unsigned long seq, const lc__job_place *where);

/* Checks a job template's placeholders by name only, as lc_jobs_new can: {N} stands for any
 * argument (how many a job has is known when it comes). -EINVAL as lc__job_command. */
int lc__job_command_check(const char *tmpl);

/* A worker's command: tmpl with {gpu} {host} {slot} {workdir} (no job placeholders). */
int lc__job_worker_command(lc__buf *out, const char *tmpl, const lc__job_place *where);

/* A pool job's line: args joined by single blanks; -EINVAL, quoting the argument, when one holds
 * a newline. */
int lc__job_line(lc__buf *out, const char *const *args, size_t nargs);

/* ---- joblog.c: GNU parallel's joblog ---------------------------------------------------- */

/* The header line, without its newline. */
#define LC__JOBLOG_HEADER                                                                          \
  "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand"

/* One line of a joblog. */
typedef struct lc__joblog_entry {
  unsigned long seq;
  const char *host; /* ":" for this machine, as GNU parallel writes it */
  double start;     /* seconds since the epoch */
  double runtime;   /* seconds */
  uint64_t send, receive;
  int exitval; /* -1 is written as GNU parallel does for a job killed by a signal */
  int signal;
  const char *command; /* each newline is written as a NUL byte, as GNU parallel does */
} lc__joblog_entry;

/* Appends e as one line, newline included, as GNU parallel formats it byte for byte
 * ("%lu\t%s\t%.3f\t%10.3f\t..."; Starttime with 3 decimals, JobRuntime cut to milliseconds
 * and padded to 10; a NULL or empty host is ":"). */
int lc__joblog_format(lc__buf *out, const lc__joblog_entry *e);

/* What a joblog records: each job number seen, and whether it succeeded (Exitval and Signal
 * both written "0"). */
typedef struct lc__joblog_seen {
  unsigned long seq;
  int ok;
} lc__joblog_seen;

typedef struct lc__joblog_record {
  lc__joblog_seen *v; /* sorted by seq, one per seq (ok when any line of it succeeded, as
                       * GNU parallel's --resume-failed reads it) */
  size_t n, cap;
  unsigned long max_seq;
  unsigned long max_seq_line; /* the line that names max_seq, for the close-time error */
} lc__joblog_record;

/*
 * Reads a joblog's text (len bytes) into rec. Empty text is an empty joblog. The first line must be
 * the header; each other line has 9 tab-separated fields (Command may hold tabs: the rest of the
 * line), Seq a number from 1, Host not empty, the other fields numbers. A last line without its
 * newline (a write cut short; also a header cut short) is ignored. rec must be empty (zeroed);
 * on an error it is left empty. Errors, -EINVAL, name path and the line: "FILE line 3: not a
 * joblog line (want 9 tab-separated fields ...)", "FILE line 1: not a joblog (its first line is
 * not GNU parallel's header ...)".
 */
int lc__joblog_parse(lc__joblog_record *rec, const char *text, size_t len, const char *path);
/* Whether rec holds seq, and with ok (resume 1: any line; resume 2: a succeeded one). */
int lc__joblog_skips(const lc__joblog_record *rec, unsigned long seq, int resume);
void lc__joblog_record_free(lc__joblog_record *rec);

#endif /* LC_JOBS_INTERNAL_H */
