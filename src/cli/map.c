/*
 * map.c - `lazyclusterctl map [options] [--] COMMAND... ::: a b ::: 1 2`: many jobs over the GPU
 * slots of the hosts (GNU parallel's syntax), through the job queue of lazycluster/jobs.h.
 *
 * Jobs come from ::: lists (their product, the first list slowest), from -a FILE, or from stdin
 * (one job a line, its whitespace-separated fields its arguments). Each job's output lines are
 * tagged "[host gpuN #seq]" ("[host slotN #seq]" without a GPU); --keep-order prints a job's lines
 * once it and every job before it ended. With --pool, one long-lived worker per slot runs
 * --worker-cmd and each job is one line written to it; its answer line is printed tagged.
 *
 * On a terminal a status line (done / running / failed / queued, time left) is redrawn at most
 * four times a second. A summary comes at the end; the exit status is 0 only when every job
 * succeeded, 1 otherwise, 130 after Ctrl-C or SIGTERM (every running job stopped first), 2 for a
 * bad command line or bad input.
 */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CMD "map"
#define MAP_MAX_JOBS 100000000UL
#define MAP_REDRAW_MS 250
#define MAP_FAILURES_SHOWN 10

/* What a signal handler may touch: the signal, and the queue to cancel. */
static volatile sig_atomic_t map_signal;
static lc_jobs *volatile map_queue;

static void on_signal(int signo) {
  lc_jobs *q = map_queue;
  map_signal = signo;
  cli_discovery_signal = signo;
  if (q != NULL)
    lc_jobs_cancel(q);
}

/* A NULL-terminated list of strings; borrowed (argv) or owned, as its user says. */
typedef struct map_strs {
  char **v;
  size_t n, cap;
} map_strs;

static int strs_push(map_strs *s, char *str) {
  if (s->n + 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    char **v = realloc(s->v, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = str;
  s->v[s->n] = NULL;
  return 0;
}

static void strs_free(map_strs *s, int owned) {
  for (size_t i = 0; owned && i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof(*s));
}

typedef struct map_cli {
  cli_hostopts h;
  lc_jobs_options jo;
  const char *cluster, *arg_file;
  char **words; /* COMMAND..., borrowed from argv */
  int nwords;
  map_strs *lists; /* the ::: lists, their words borrowed from argv */
  size_t nlists;
  map_strs lines;   /* -a FILE or stdin: one job a line (owned) */
  size_t *lineno;   /* each one's line number there (blank lines are skipped) */
  map_strs env;     /* --env: "NAME=VALUE" (owned) */
  map_strs sends;   /* --send (borrowed) */
  map_strs returns; /* --return (borrowed) */
  map_strs updates; /* --update (borrowed) */
  char *command;    /* the words joined */
  char *cluster_hosts;
  int pool, keep_order, color, use_local;
  /* the run */
  pthread_mutex_t lock; /* one line at a time on stdout and stderr, and the status line */
  char *buf;
  size_t bufcap;
  int progress, progress_shown;
  uint64_t drawn_ms;
  size_t njobs, nfailed;
  char failures[1024]; /* the summary's "#7 (lab1 gpu0) exit 3, ..." */
} map_cli;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- output ------------------------------------------------------------------------------- */

/* "host gpu0 #7", "host slot3 #7", or what there is of it. */
static void tag_of(char *out, size_t size, const char *host, int slot, int gpu, unsigned long seq,
                   const char *what) {
  int n = snprintf(out, size, "%s", host ? host : "?");
  if (n < 0 || (size_t)n >= size)
    return;
  if (gpu >= 0)
    n += snprintf(out + n, size - (size_t)n, " gpu%d", gpu);
  else if (slot >= 0)
    n += snprintf(out + n, size - (size_t)n, " slot%d", slot);
  if (n < 0 || (size_t)n >= size)
    return;
  if (seq > 0)
    snprintf(out + n, size - (size_t)n, " #%lu", seq);
  else if (what != NULL)
    snprintf(out + n, size - (size_t)n, " %s", what);
}

/* Takes the status line off the terminal. Under m->lock. */
static void progress_clear(map_cli *m) {
  if (m->progress_shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    m->progress_shown = 0;
  }
}

/* One line, "[TAG] LINE", in one write, never mixed with another: any thread. */
static void print_tagged(map_cli *m, FILE *f, const char *tag, const char *line, size_t len) {
  size_t need = strlen(tag) + len + 32;
  int n;
  pthread_mutex_lock(&m->lock);
  progress_clear(m);
  if (need > m->bufcap) {
    char *b = realloc(m->buf, need);
    if (b == NULL)
      goto out;
    m->buf = b;
    m->bufcap = need;
  }
  n = snprintf(m->buf, m->bufcap, m->color ? "\033[%sm[%s]\033[0m " : "[%.0s%s] ",
               f == stderr ? "33" : "36", tag);
  if (n < 0)
    goto out;
  memcpy(m->buf + n, line, len);
  m->buf[(size_t)n + len] = '\n';
  fwrite(m->buf, 1, (size_t)n + len + 1, f);
  fflush(f);
out:
  pthread_mutex_unlock(&m->lock);
}

/* A message of ours on stderr, clear of the status line: any thread. */
static void say(map_cli *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(map_cli *m, const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&m->lock);
  progress_clear(m);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
  pthread_mutex_unlock(&m->lock);
}

/* Every line of the queue as it comes (engine thread). With --keep-order a job's own lines wait
 * for lc_jobs_next (they are kept whole: output_max -1). */
static void on_line(const lc_jobs_line *l, void *payload) {
  map_cli *m = payload;
  char tag[512];
  FILE *f = l->stream == LC_STDERR ? stderr : stdout;
  switch (l->kind) {
  case LC_JOBS_LINE_OUTPUT:
    if (m->keep_order)
      return;
    tag_of(tag, sizeof(tag), l->host, l->slot, l->gpu, l->job ? l->job->seq : 0, NULL);
    print_tagged(m, f, tag, l->line, l->len);
    break;
  case LC_JOBS_LINE_WORKER:
    tag_of(tag, sizeof(tag), l->host, l->slot, l->gpu, 0, "worker");
    print_tagged(m, stderr, tag, l->line, l->len);
    break;
  case LC_JOBS_LINE_UPDATE:
    tag_of(tag, sizeof(tag), l->host, l->slot, l->gpu, 0, "update");
    print_tagged(m, stdout, tag, l->line, l->len);
    break;
  case LC_JOBS_LINE_NOTICE:
  default:
    say(m, CLI_NAME " " CMD ": %.*s\n", (int)l->len, l->line);
    break;
  }
}

/* The lines of text (len bytes, whole lines), each tagged. */
static void print_lines(map_cli *m, FILE *f, const char *tag, const char *text, size_t len) {
  while (len > 0) {
    const char *nl = memchr(text, '\n', len);
    size_t l = nl ? (size_t)(nl - text) : len;
    print_tagged(m, f, tag, text, l);
    l += nl ? 1 : 0;
    text += l;
    len -= l;
  }
}

/* "exit 3", "signal 9", or why it could not run. */
static void how_it_ended(char *out, size_t size, const lc_job *j) {
  if (j->state == LC_JOB_CANCELLED)
    snprintf(out, size, "cancelled");
  else if (j->exit.signal != 0)
    snprintf(out, size, "signal %d", j->exit.signal);
  else if (j->exit.exit_status > 0)
    snprintf(out, size, "exit %d", j->exit.exit_status);
  else if (j->error != 0)
    snprintf(out, size, "%s", j->message && j->message[0] ? j->message : lc_strerror(j->error));
  else
    snprintf(out, size, "exit %d", j->exit.exit_status);
}

/* A job at its end, each once, in the order asked for (main thread). */
static void job_ended(map_cli *m, const lc_job *j) {
  char tag[512], how[512], where[512] = "";
  tag_of(tag, sizeof(tag), j->host, j->slot, j->gpu, j->seq, NULL);
  if (m->keep_order && j->state != LC_JOB_SKIPPED) {
    print_lines(m, stdout, tag, j->out ? j->out : "", j->out_len);
    print_lines(m, stderr, tag, j->err ? j->err : "", j->err_len);
  }
  if (m->pool && j->result != NULL)
    print_tagged(m, stdout, tag, j->result, strlen(j->result));
  if (j->state != LC_JOB_FAILED)
    return;
  how_it_ended(how, sizeof(how), j);
  if (j->host != NULL) { /* "(lab1 gpu0) " */
    where[0] = '(';
    tag_of(where + 1, sizeof(where) - 3, j->host, j->slot, j->gpu, 0, NULL);
    strcat(where, ") ");
  }
  say(m, CLI_NAME " " CMD ": job #%lu %sfailed%s: %s\n", j->seq, where,
      j->attempts > 1 ? " (every attempt)" : "", how);
  if (m->nfailed++ < MAP_FAILURES_SHOWN) {
    size_t at = strlen(m->failures);
    snprintf(m->failures + at, sizeof(m->failures) - at, "%s#%lu %s%s", at ? ", " : "", j->seq,
             where, how);
  }
}

/* "1h02m", "3m20s", "12s". */
static void duration(char *out, size_t size, double s) {
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(out, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(out, size, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(out, size, "%lds", t);
}

/* The status line on a terminal, at most every MAP_REDRAW_MS. */
static void progress_draw(map_cli *m, lc_jobs *q) {
  lc_jobs_stats st;
  char left[32] = "?";
  uint64_t now = now_ms();
  if (!m->progress || now - m->drawn_ms < MAP_REDRAW_MS)
    return;
  m->drawn_ms = now;
  lc_jobs_stats_get(q, &st);
  if (st.eta >= 0)
    duration(left, sizeof(left), st.eta);
  pthread_mutex_lock(&m->lock);
  fprintf(stderr, "\r\033[K%zu/%zu done, %zu running, %zu failed, %zu queued, %s left",
          st.done + st.skipped, m->njobs, st.running, st.failed, st.queued, left);
  fflush(stderr);
  m->progress_shown = 1;
  pthread_mutex_unlock(&m->lock);
}

/* ---- the command line --------------------------------------------------------------------- */

static int usage(void) {
  printf(
      "usage: " CLI_NAME " map [options] [--] COMMAND... ::: A B ... [::: 1 2 ...]\n"
      "       " CLI_NAME " map [options] [--] COMMAND... -a FILE   (or lines on stdin)\n"
      "       " CLI_NAME " map --pool --worker-cmd CMD [options] ::: A B ...\n"
      "Runs many jobs over the hosts' GPU slots, one job per slot at a time, as GNU parallel\n"
      "does: the jobs are the product of the ::: lists (the first list slowest), or one a line\n"
      "of -a FILE (-a -, or no list with stdin not a terminal: stdin; a line's whitespace-\n"
      "separated fields are its arguments). COMMAND runs with sh; its placeholders, each value\n"
      "shell-quoted: {} the job's arguments joined by blanks, {1} {2} .. one each, {#} the job's\n"
      "number, {gpu} {host} {slot} {workdir} where it runs, {{ and }} braces. A COMMAND without\n"
      "{} or {N} gets the arguments appended. Each output line is tagged [host gpuN #seq]\n"
      "([host slotN #seq] without a GPU). Jobs get CUDA_VISIBLE_DEVICES, LAZYCLUSTER_HOST,\n"
      "LAZYCLUSTER_SLOT, LAZYCLUSTER_GPU and LAZYCLUSTER_JOB. A job of a lost host runs again\n"
      "elsewhere. Exit status: 0 when every job succeeded, 1 when one did not, 130 after Ctrl-C\n"
      "(running jobs are stopped, nothing is left on the hosts), 2 for bad input.\n"
      "With no host configured, this machine runs the jobs. See docs/map.md.\n\n"
      "  --slots-per-gpu K       jobs at once on one GPU (default 1)\n"
      "  --slots-per-host N      jobs at once on a host without GPUs (default: its slots=\n"
      "                          in the inventory, else its CPU cores)\n"
      "  --retries N             run a failed job again up to N times, on another slot when\n"
      "                          one is free (default 0)\n"
      "  --joblog FILE           one line per finished job, GNU parallel's joblog format\n"
      "  --resume                skip the jobs the joblog records (needs --joblog)\n"
      "  --resume-failed         skip only the jobs the joblog records as succeeded\n"
      "  --results DIR           each job's stdout, stderr, exit and command into DIR/SEQ/\n"
      "  --keep-order            print each job's output once it and every job before it\n"
      "                          ended, in the order of the jobs (default: as they come)\n"
      "  --send FILE             copy FILE into each host's working directory before its\n"
      "                          first job (repeatable)\n"
      "  --return PATTERN        fetch what a job wrote there (placeholders {#} {1} ..)\n"
      "                          after it ends, to the same relative path here (repeatable)\n"
      "  --env NAME=VALUE        a variable for every job; --env NAME takes its value from\n"
      "                          here (repeatable)\n"
      "  --pool                  one long-lived worker per slot, each job a line written to\n"
      "                          its stdin, its answer the next line on its stdout\n"
      "  --worker-cmd CMD        the pool's worker ({gpu} {host} {slot} {workdir})\n"
      "  --update LINE           a line sent to every worker before the jobs (repeatable;\n"
      "                          --pool)\n"
      "  --cluster NAME          run on the hosts of the running cluster NAME (give the same\n"
      "                          -F as it had)\n"
      "  --color, --no-color     colored tags (default: when stdout is a terminal)\n\n"
      "%s",
      cli_hostopts_help());
  return CLI_EXIT_OK;
}

/* A non-negative count option's value into *out; -1 with the usage error printed. */
static int take_count(const char *opt, const char *v, int min, int *out) {
  char *end;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < min || n > 1000000)
    return cli_usage_error(CMD, "%s '%s': want a number, %d or more", opt, v, min), -1;
  *out = (int)n;
  return 0;
}

/* --env NAME=VALUE or NAME (its value here, so that it shows in no command line). */
static int take_env(map_cli *m, const char *v) {
  const char *eq = strchr(v, '='), *val = eq ? NULL : getenv(v);
  size_t n = eq ? (size_t)(eq - v) : strlen(v);
  char *e;
  if (n == 0 || strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n ||
      (v[0] >= '0' && v[0] <= '9'))
    return cli_usage_error(CMD, "--env %.*s: want NAME=VALUE or NAME (letters, digits, _)", (int)n,
                           v),
           -1;
  if (eq == NULL && val == NULL)
    return cli_usage_error(CMD, "--env %s: %s is not set here (give NAME=VALUE)", v, v), -1;
  if ((e = eq ? strdup(v) : lc__cli_sprintf("%s=%s", v, val)) == NULL || strs_push(&m->env, e) < 0)
    return free(e), cli_usage_error(CMD, "out of memory"), -1;
  return 0;
}

/* A new ::: list. */
static int new_list(map_cli *m) {
  map_strs *l = realloc(m->lists, (m->nlists + 1) * sizeof(*l));
  if (l == NULL)
    return -ENOMEM;
  m->lists = l;
  memset(&m->lists[m->nlists++], 0, sizeof(*l));
  return 0;
}

/* Options, then COMMAND (after -- or from the first word that is no option), then ::: lists.
 * Returns -1 to go on, or an exit code. */
static int parse(map_cli *m, int argc, char **argv) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int took;
    if (cli_is_help(a))
      return usage();
    if (strcmp(a, "--") == 0 || strcmp(a, ":::") == 0 || a[0] != '-' || a[1] == '\0') {
      i += strcmp(a, "--") == 0;
      break;
    }
    if (strcmp(a, "--pool") == 0) {
      m->pool = 1;
      continue;
    }
    if (strcmp(a, "--keep-order") == 0 || strcmp(a, "-k") == 0) {
      m->keep_order = 1;
      continue;
    }
    if (strcmp(a, "--resume") == 0 || strcmp(a, "--resume-failed") == 0) {
      m->jo.resume = a[8] == '\0' ? 1 : 2;
      continue;
    }
    if (strcmp(a, "--color") == 0 || strcmp(a, "--no-color") == 0) {
      m->color = a[2] == 'c';
      continue;
    }
    if ((took = cli_hostopts_take(&m->h, CMD, argc, argv, &i)) < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if (v == NULL)
      return cli_usage_error(CMD, "%s: unknown option, or it needs a value", a);
    i++;
    if (strcmp(a, "--slots-per-gpu") == 0) {
      if (take_count(a, v, 1, &m->jo.slots_per_gpu) < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--slots-per-host") == 0) {
      if (take_count(a, v, 1, &m->jo.slots_per_host) < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--retries") == 0) {
      if (take_count(a, v, 0, &m->jo.retries) < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--joblog") == 0) {
      m->jo.joblog = v;
    } else if (strcmp(a, "--results") == 0) {
      m->jo.results_dir = v;
    } else if (strcmp(a, "--worker-cmd") == 0) {
      m->jo.worker_cmd = v;
    } else if (strcmp(a, "--cluster") == 0) {
      m->cluster = v;
    } else if (strcmp(a, "-a") == 0 || strcmp(a, "--arg-file") == 0) {
      m->arg_file = v;
    } else if (strcmp(a, "--env") == 0) {
      if (take_env(m, v) < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--send") == 0 || strcmp(a, "--return") == 0 ||
               strcmp(a, "--update") == 0) {
      map_strs *s = a[2] == 's' ? &m->sends : a[2] == 'r' ? &m->returns : &m->updates;
      if (strs_push(s, argv[i]) < 0)
        return cli_usage_error(CMD, "out of memory");
    } else {
      return cli_usage_error(CMD, "unknown option %s", a);
    }
  }
  m->words = argv + i;
  for (; i < argc && strcmp(argv[i], ":::") != 0; i++)
    m->nwords++;
  for (; i < argc; i++) {
    if (strcmp(argv[i], ":::") == 0) {
      if (new_list(m) < 0)
        return cli_usage_error(CMD, "out of memory");
    } else if (strs_push(&m->lists[m->nlists - 1], argv[i]) < 0) {
      return cli_usage_error(CMD, "out of memory");
    }
  }
  /* what goes together */
  if (m->pool && m->jo.worker_cmd == NULL)
    return cli_usage_error(CMD, "--pool needs --worker-cmd CMD (the worker every slot runs)");
  if (!m->pool && m->jo.worker_cmd != NULL)
    return cli_usage_error(CMD, "--worker-cmd is for --pool (a command job's COMMAND goes "
                                "after the options)");
  if (!m->pool && m->updates.n > 0)
    return cli_usage_error(CMD, "--update '%s' is for --pool (a line for every worker)",
                           m->updates.v[0]);
  if (m->pool && m->nwords > 0)
    return cli_usage_error(CMD,
                           "--pool takes no COMMAND ('%s'): each job is a line for the "
                           "--worker-cmd workers",
                           m->words[0]);
  if (!m->pool && m->nwords == 0)
    return cli_usage_error(CMD, "no command: " CLI_NAME " map [options] -- COMMAND ::: A B");
  if (m->jo.resume && m->jo.joblog == NULL)
    return cli_usage_error(CMD, "%s needs --joblog FILE (the jobs it records are skipped)",
                           m->jo.resume == 1 ? "--resume" : "--resume-failed");
  if (m->arg_file != NULL && m->nlists > 0)
    return cli_usage_error(CMD, "-a %s and ::: lists together: give one of them", m->arg_file);
  if (m->cluster != NULL && (m->h.discover.hosts || m->h.discover.inventory))
    return cli_usage_error(CMD, "--cluster %s and --hosts/--inventory together: give one",
                           m->cluster);
  for (size_t l = 0; l < m->nlists; l++)
    if (m->lists[l].n == 0)
      return cli_usage_error(CMD, "no jobs: the %zu%s ::: list is empty", l + 1,
                             l == 0   ? "st"
                             : l == 1 ? "nd"
                             : l == 2 ? "rd"
                                      : "th");
  return -1;
}

/* The words of COMMAND joined by single blanks (the host's sh reads them), as exec does. */
static int join_words(map_cli *m) {
  size_t len = 1, at = 0;
  for (int i = 0; i < m->nwords; i++)
    len += strlen(m->words[i]) + 1;
  if ((m->command = malloc(len)) == NULL)
    return -ENOMEM;
  for (int i = 0; i < m->nwords; i++) {
    size_t l = strlen(m->words[i]);
    if (i > 0)
      m->command[at++] = ' ';
    memcpy(m->command + at, m->words[i], l);
    at += l;
  }
  m->command[at] = '\0';
  return 0;
}

/* -a FILE, or stdin: every line that is not blank, without its newline. Returns -1 to go on, or
 * an exit code with the error printed. */
static int read_lines(map_cli *m) {
  int from_stdin = m->arg_file == NULL || strcmp(m->arg_file, "-") == 0;
  const char *name = from_stdin ? "stdin" : m->arg_file;
  FILE *f = from_stdin ? stdin : fopen(m->arg_file, "r");
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  size_t at = 0;
  int status = -1;
  if (f == NULL)
    return cli_usage_error(CMD, "-a %s: %s", m->arg_file, strerror(errno));
  while ((n = getline(&line, &cap, f)) >= 0) {
    char *copy = NULL;
    size_t *more;
    at++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = '\0';
    if (line[strspn(line, " \t")] == '\0')
      continue;
    if ((more = realloc(m->lineno, (m->lines.n + 1) * sizeof(*more))) != NULL)
      m->lineno = more;
    if (more == NULL || (copy = strdup(line)) == NULL || strs_push(&m->lines, copy) < 0) {
      free(copy);
      status = cli_fail(CMD, -ENOMEM, "cannot read the jobs");
      goto out;
    }
    m->lineno[m->lines.n - 1] = at;
  }
  if (ferror(f)) {
    status = cli_usage_error(CMD, "-a %s: %s", name, strerror(errno));
    goto out;
  }
  if (m->lines.n == 0)
    status = cli_usage_error(CMD, "no jobs: %s has no line", name);
out:
  free(line);
  if (!from_stdin)
    fclose(f);
  return status;
}

/* ---- hosts -------------------------------------------------------------------------------- */

/* The host names in a supervisor's `status json` answer ("hosts":[{"name":"lab1",...},...]),
 * joined by commas into *out; "localhost" (this machine's runtime) sets m->use_local instead. */
static int cluster_hosts(map_cli *m, const char *json, char **out) {
  const char *p = strstr(json, "\"hosts\":[");
  size_t len = 0;
  char *s = malloc(strlen(json) + 1);
  if (s == NULL)
    return -ENOMEM;
  s[0] = '\0';
  for (p = p ? p + 9 : NULL; p != NULL && *p && *p != ']';) {
    const char *key = strstr(p, "\"name\":\""), *end = strchr(p, ']');
    size_t at = len;
    if (key == NULL || (end != NULL && key > end))
      break;
    p = key + 8;
    if (len > 0)
      s[len++] = ',';
    for (; *p && *p != '"'; p++) {
      if (*p == '\\' && p[1] != '\0')
        p++;
      s[len++] = *p;
    }
    s[len] = '\0';
    if (strcmp(s + at + (at > 0), "localhost") == 0) {
      m->use_local = 1;
      len = at;
      s[len] = '\0';
    }
    p += *p == '"';
    while (*p && *p != '}')
      p++;
    p += *p == '}';
    p += *p == ',';
  }
  *out = s;
  return 0;
}

/* The hosts: those of --cluster, or as every command finds them. Each host without declared
 * slots offers its CPU cores. */
static int hosts_up(map_cli *m, lc_engine *engine, lc_group **g, lc_discovery **d) {
  int r, status;
  if (m->cluster != NULL) {
    char *reply = NULL;
    if ((status = cli_request(CMD, m->cluster, "status json", 15000, &reply)) != CLI_EXIT_OK)
      return status;
    r = cluster_hosts(m, reply, &m->cluster_hosts);
    lc_free(reply);
    if (r < 0)
      return cli_fail(CMD, r, "--cluster");
    if (m->cluster_hosts[0] == '\0' && !m->use_local) {
      fprintf(stderr, CLI_NAME " " CMD ": --cluster %s: it has no hosts\n", m->cluster);
      return CLI_EXIT_FAIL;
    }
    m->h.discover.hosts = m->cluster_hosts;
  }
  if (m->cluster != NULL && m->cluster_hosts[0] == '\0') { /* this machine alone */
    if ((r = lc_group_new(g, engine, NULL)) < 0)
      return cli_fail(CMD, r, "cannot make the group");
  } else if ((status = cli_hosts_connect(CMD, &m->h, engine, 1, g, d)) != CLI_EXIT_OK) {
    return status;
  }
  if (m->use_local) {
    lc_runtime *local = NULL;
    if ((r = lc_runtime_new_local(&local, engine, &m->h.runtime)) < 0 ||
        (r = lc_group_add(*g, local)) < 0) {
      lc_runtime_free(local);
      return cli_fail(CMD, r, "cannot use this machine");
    }
  }
  /* slots: declared, else one per core (this machine's, or a host's from its facts) */
  for (size_t i = 0; i < lc_group_count(*g); i++) {
    lc_runtime *rt = lc_group_at(*g, i);
    const lc_hostinfo *info = NULL;
    int cores;
    if (lc_runtime_slots(rt) > 0)
      continue;
    for (size_t k = 0; *d != NULL && k < lc_discovery_count(*d); k++)
      if (lc_group_find(*g, lc_discovery_host(*d, k)) == rt)
        info = lc_discovery_info(*d, k);
    if (info == NULL) { /* this machine */
      cli_local_resources(rt, 1);
      continue;
    }
    cores = (int)lc_hostinfo_cores(info);
    lc_runtime_set_resources(rt, lc_runtime_gpus(rt), cores > 0 ? cores : 1);
  }
  return CLI_EXIT_OK;
}

/* ---- jobs --------------------------------------------------------------------------------- */

/* Submits every job: the product of the ::: lists (the first slowest), or the lines. */
static int submit_all(map_cli *m, lc_jobs *q) {
  const char **args = NULL;
  char *copy = NULL;
  size_t nargs = m->nlists > 0 ? m->nlists : 0;
  int r = 0;
  if (m->nlists > 0) {
    if ((args = calloc(nargs + 1, sizeof(*args))) == NULL)
      return -ENOMEM;
    for (size_t k = 0; k < m->njobs && !map_signal; k++) {
      size_t rest = k;
      for (size_t l = nargs; l-- > 0;) {
        args[l] = m->lists[l].v[rest % m->lists[l].n];
        rest /= m->lists[l].n;
      }
      if ((r = lc_jobs_submit(q, args, nargs, NULL)) < 0)
        goto out;
    }
    goto out;
  }
  for (size_t k = 0; k < m->lines.n && !map_signal; k++) {
    size_t n = 0, cap = 0;
    char *save = NULL, *f;
    free(copy);
    if ((copy = strdup(m->lines.v[k])) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    for (f = strtok_r(copy, " \t", &save); f != NULL; f = strtok_r(NULL, " \t", &save)) {
      if (n + 2 > cap) {
        const char **more = realloc(args, (cap = cap * 2 + 8) * sizeof(*args));
        if (more == NULL) {
          r = -ENOMEM;
          goto out;
        }
        args = more;
      }
      args[n++] = f;
    }
    args[n] = NULL;
    if ((r = lc_jobs_submit(q, args, n, NULL)) < 0) {
      char *why = lc__cli_sprintf("%s", lc_error_last());
      lc_error_set(r, "%s line %zu: %s", m->arg_file ? m->arg_file : "stdin", m->lineno[k],
                   why ? why : lc_strerror(r));
      free(why);
      goto out;
    }
  }
out:
  free(copy);
  free(args);
  return r;
}

/* How many jobs the ::: lists make; 0 when too many. */
static size_t count_jobs(map_cli *m) {
  size_t n = 1;
  if (m->nlists == 0)
    return m->lines.n;
  for (size_t l = 0; l < m->nlists; l++) {
    if (m->lists[l].n > MAP_MAX_JOBS / n)
      return 0;
    n *= m->lists[l].n;
  }
  return n;
}

/* Until every job was returned by lc_jobs_next: print what each left, draw the status line. */
static void drain(map_cli *m, lc_jobs *q) {
  lc_jobs_order order = m->keep_order ? LC_JOBS_IN_ORDER : LC_JOBS_AS_DONE;
  for (;;) {
    const lc_job *j = NULL;
    int r = lc_jobs_next(&j, q, order, MAP_REDRAW_MS);
    if (r == -ENOENT)
      break;
    if (r == 0)
      job_ended(m, j);
    progress_draw(m, q);
  }
  pthread_mutex_lock(&m->lock);
  progress_clear(m);
  pthread_mutex_unlock(&m->lock);
}

/* "40 jobs: 38 done, 2 failed: #7 (lab1 gpu0) exit 3, ..." on stderr. */
static void summary(map_cli *m, lc_jobs *q) {
  lc_jobs_stats st;
  char took[32];
  lc_jobs_stats_get(q, &st);
  duration(took, sizeof(took), st.elapsed);
  fprintf(stderr, "%zu jobs: %zu done", st.submitted, st.done);
  if (st.skipped > 0)
    fprintf(stderr, ", %zu skipped (in the joblog)", st.skipped);
  if (st.cancelled > 0)
    fprintf(stderr, ", %zu cancelled", st.cancelled);
  if (st.requeued > 0 || st.retried > 0)
    fprintf(stderr, " (%zu put back, %zu retried)", st.requeued, st.retried);
  fprintf(stderr, ", %zu failed%s%s%s in %s\n", st.failed, m->failures[0] ? ": " : "", m->failures,
          m->nfailed > MAP_FAILURES_SHOWN ? ", ..." : "", took);
}

int cli_map(int argc, char **argv) {
  map_cli m;
  lc_engine *engine = NULL;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  lc_jobs *q = NULL;
  struct sigaction sa;
  int r, status;

  memset(&m, 0, sizeof(m));
  pthread_mutex_init(&m.lock, NULL);
  cli_hostopts_init(&m.h);
  lc_jobs_options_init(&m.jo);
  m.color = isatty(1);
  if ((status = parse(&m, argc, argv)) >= 0)
    goto out;
  if (m.nlists == 0 && m.arg_file == NULL && isatty(0)) {
    status = cli_usage_error(CMD, "no jobs: give ::: lists, -a FILE, or lines on stdin");
    goto out;
  }
  if (m.nlists == 0 && (status = read_lines(&m)) >= 0)
    goto out;
  if ((m.njobs = count_jobs(&m)) == 0) {
    status = cli_usage_error(CMD, "too many jobs: the ::: lists make more than %lu", MAP_MAX_JOBS);
    goto out;
  }
  if (!m.pool && join_words(&m) < 0) {
    status = cli_fail(CMD, -ENOMEM, "out of memory");
    goto out;
  }

  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: a wait ends early and sees the signal */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  if ((r = lc_engine_new(&engine, NULL)) < 0) {
    status = cli_fail(CMD, r, "cannot start the engine");
    goto out;
  }
  if ((status = hosts_up(&m, engine, &g, &d)) != CLI_EXIT_OK)
    goto out;
  if (map_signal)
    goto stopped;

  m.jo.command = m.command;
  m.jo.env = m.env.n ? (const char *const *)m.env.v : NULL;
  m.jo.send = m.sends.n ? (const char *const *)m.sends.v : NULL;
  m.jo.returns = m.returns.n ? (const char *const *)m.returns.v : NULL;
  m.jo.output_max = m.keep_order ? -1 : 0; /* the jobs' lines wait for their turn */
  m.jo.on_line = on_line;
  m.jo.payload = &m;
  if ((r = lc_jobs_new(&q, g, &m.jo)) < 0) {
    /* a bad template (the placeholder quoted), a joblog that is not one: bad input */
    status = cli_fail(CMD, r, "cannot start the jobs");
    if (r == -EINVAL || r == -ENOENT)
      status = CLI_EXIT_USAGE;
    goto out;
  }
  map_queue = q;
  if (map_signal)
    lc_jobs_cancel(q);
  for (size_t i = 0; i < m.updates.n && !map_signal; i++)
    if ((r = lc_jobs_update(q, m.updates.v[i], -1)) < 0 && !map_signal) {
      status = cli_fail(CMD, r, "--update");
      goto out;
    }
  m.progress = isatty(2);
  if ((r = submit_all(&m, q)) < 0 && !map_signal) {
    status = r == -EINVAL ? (cli_fail(CMD, r, "bad job"), CLI_EXIT_USAGE)
                          : cli_fail(CMD, r, "cannot submit the jobs");
    goto out;
  }
  if ((r = lc_jobs_close(q)) < 0 && !map_signal) {
    status = r == -EINVAL ? (cli_fail(CMD, r, "--resume"), CLI_EXIT_USAGE)
                          : cli_fail(CMD, r, "cannot close the queue");
    goto out;
  }
  drain(&m, q);
  r = lc_jobs_wait(q, -1);
  summary(&m, q);
  status = r == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
stopped:
  if (map_signal) {
    say(&m, CLI_NAME " " CMD ": stopped (%s): nothing of the jobs is left on the hosts\n",
        map_signal == SIGINT    ? "SIGINT"
        : map_signal == SIGTERM ? "SIGTERM"
                                : "SIGHUP");
    status = 130;
  }
out:
  map_queue = NULL;
  lc_jobs_free(q); /* cancels what runs and waits until it is gone from every host */
  lc_discovery_free(d);
  lc_group_free(g);
  lc_engine_free(engine);
  for (size_t l = 0; l < m.nlists; l++)
    strs_free(&m.lists[l], 0);
  free(m.lists);
  strs_free(&m.lines, 1);
  free(m.lineno);
  strs_free(&m.env, 1);
  strs_free(&m.sends, 0);
  strs_free(&m.returns, 0);
  strs_free(&m.updates, 0);
  free(m.command);
  free(m.cluster_hosts);
  free(m.buf);
  pthread_mutex_destroy(&m.lock);
  return status;
}
