/*
 * command.c - a job's command, a pool worker's command and a pool job's line (jobs_internal.h):
 * the placeholders of lazycluster/jobs.h over the one template scanner (lc__template_render),
 * each value shell-quoted, and GNU parallel's rule that a template without {} or {N} gets the
 * arguments appended.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* What a template's placeholders stand for while one is rendered. */
typedef struct job_ctx {
  const char *tmpl;
  const char *const *args;
  size_t nargs;
  unsigned long seq;
  const lc__job_place *where;
  int job;        /* 0: a worker's command, which knows no job placeholders */
  int names_only; /* {N} is any argument: only the names are checked */
  int has_arg;    /* the template named {} or {N} */
} job_ctx;

/* Stand-ins while a template is only checked (where NULL). */
static const lc__job_place check_place = {.host = "host", .slot = 0, .gpu = 0, .workdir = "."};

static int quote_number(lc__buf *out, long long v) {
  char num[32];
  snprintf(num, sizeof(num), "%lld", v);
  return lc__buf_shell_quote(out, num);
}

/* Cuts out back to its first len bytes (what a failed call appended). */
static void truncate_to(lc__buf *out, size_t len) {
  out->len = len;
  if (out->data != NULL)
    out->data[len] = '\0';
}

/* Appends the arguments joined by single blanks, quoted as one word. */
static int quote_joined(lc__buf *out, const char *const *args, size_t nargs) {
  lc__buf j = {0};
  int r = 0;
  for (size_t i = 0; i < nargs && r == 0; i++) {
    if (i > 0)
      r = lc__buf_append(&j, " ", 1);
    if (r == 0)
      r = lc__buf_puts(&j, args[i] != NULL ? args[i] : "");
  }
  if (r == 0)
    r = lc__buf_shell_quote(out, j.data != NULL ? j.data : "");
  lc__buf_free(&j);
  return r;
}

static int job_lookup(lc__buf *out, const char *name, size_t len, void *payload) {
  job_ctx *x = payload;
  const lc__job_place *w = x->where != NULL ? x->where : &check_place;
  long long n = -1;
  int r;
#define IS(s) (len == sizeof(s) - 1 && strncmp(name, s, len) == 0)
  if (IS("gpu"))
    r = quote_number(out, w->gpu);
  else if (IS("host"))
    r = lc__buf_shell_quote(out, w->host != NULL ? w->host : "");
  else if (IS("slot"))
    r = quote_number(out, w->slot);
  else if (IS("workdir"))
    r = lc__buf_shell_quote(out, w->workdir != NULL ? w->workdir : "");
  else if (x->job && IS("#"))
    r = quote_number(out, (long long)x->seq);
  else if (x->job && len == 0) {
    x->has_arg = 1;
    r = quote_joined(out, x->args, x->nargs);
  } else if (x->job && name[0] != '0' && (n = lc__decimal(name, len, 18)) >= 1) {
    x->has_arg = 1;
    if (x->names_only)
      return 1;
    if ((unsigned long long)n > x->nargs)
      return lc__error_set(-EINVAL, "template \"%s\": {%.*s}: job %lu has %zu argument%s", x->tmpl,
                           (int)len, name, x->seq, x->nargs, x->nargs == 1 ? "" : "s");
    r = lc__buf_shell_quote(out, x->args[n - 1] != NULL ? x->args[n - 1] : "");
  } else
    return 0; /* not a placeholder of a job (or of a worker) */
#undef IS
  return r < 0 ? -ENOMEM : 1;
}

#define JOB_HINT " (a job knows {} {1}.. {#} {gpu} {host} {slot} {workdir})"

/* The command of job seq (jobs_internal.h). Appends to out; on an error out is as it was. */
int lc__job_command(lc__buf *out, const char *tmpl, const char *const *args, size_t nargs,
                    unsigned long seq, const lc__job_place *where) {
  job_ctx x = {.tmpl = tmpl, .args = args, .nargs = nargs, .seq = seq, .where = where, .job = 1};
  size_t start = out->len;
  int r;

  if ((r = lc__template_render(out, tmpl, job_lookup, &x, JOB_HINT)) < 0)
    goto out;
  /* GNU parallel's rule: no {} nor {N}, so the arguments follow the command */
  for (size_t i = 0; !x.has_arg && i < nargs; i++) {
    if (lc__buf_append(out, " ", 1) < 0 ||
        lc__buf_shell_quote(out, args[i] != NULL ? args[i] : "") < 0) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
  }
  r = 0;

out:
  if (r < 0)
    truncate_to(out, start);
  return r;
}

/* A job template's placeholder names (jobs_internal.h). */
int lc__job_command_check(const char *tmpl) {
  lc__buf scratch = {0};
  job_ctx x = {.tmpl = tmpl, .job = 1, .names_only = 1};
  int r = lc__template_render(&scratch, tmpl, job_lookup, &x, JOB_HINT);
  lc__buf_free(&scratch);
  return r < 0 ? r : 0;
}

/* A pool worker's command (jobs_internal.h): the place placeholders only. */
int lc__job_worker_command(lc__buf *out, const char *tmpl, const lc__job_place *where) {
  job_ctx x = {.tmpl = tmpl, .where = where, .job = 0};
  return lc__template_render(out, tmpl, job_lookup, &x,
                             " (a worker command knows {gpu} {host} {slot} {workdir})");
}

/* A pool job's line (jobs_internal.h): one line, so no argument may hold a newline. */
int lc__job_line(lc__buf *out, const char *const *args, size_t nargs) {
  size_t start = out->len;
  int r = 0;

  for (size_t i = 0; i < nargs; i++) {
    const char *a = args[i] != NULL ? args[i] : "";
    const char *nl = strchr(a, '\n');
    if (nl != NULL) {
      /* quote the argument up to its newline: the message stays one line */
      r = lc__error_set(-EINVAL,
                        "argument %zu \"%.*s\\n%s\" holds a newline: a pool job is one line", i + 1,
                        (int)(nl - a), a, nl[1] != '\0' ? "..." : "");
      goto out;
    }
    if ((i > 0 && lc__buf_append(out, " ", 1) < 0) || lc__buf_puts(out, a) < 0) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
  }
  r = lc__buf_append(out, "", 0);
  if (r < 0)
    r = lc__error_set(-ENOMEM, "out of memory");

out:
  if (r < 0)
    truncate_to(out, start);
  return r;
}
