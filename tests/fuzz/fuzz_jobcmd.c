/*
 * fuzz_jobcmd.c - a job's command template and its arguments (src/jobs/command.c over
 * src/template.c): the input is the template, then up to 8 arguments, each after a NUL byte.
 * Checks, besides the sanitizers: a call that fails leaves the buffer as it was, and a pool job's
 * line is the arguments joined by single blanks.
 */
#include "jobs/jobs_internal.h"

#include "fuzz_util.h"

#define MAX_ARGS 8

/* Renders with out already holding "pre" and checks what a failure leaves. */
static void check_kept(lc__buf *b, int r) {
  if (r < 0 && (b->len != 3 || memcmp(b->data, "pre", 4) != 0))
    abort();
  if (r == 0 && (b->len < 3 || memcmp(b->data, "pre", 3) != 0 || strlen(b->data) != b->len))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_strndup(data, size);
  const char *args[MAX_ARGS];
  const char *end = text + size, *p;
  size_t nargs = 0, joined = 0;
  lc__job_place where = {.host = "lab'2", .slot = 3, .gpu = 1, .workdir = "/tmp/w $(x)"};
  lc__job_place nogpu = {.host = "", .slot = 0, .gpu = -1, .workdir = NULL};
  lc__buf b = {0};
  int r;

  /* the template ends at the first NUL (fuzz_strndup's own at the latest) */
  for (p = text + strlen(text); p < end && nargs < MAX_ARGS; p += strlen(p)) {
    args[nargs] = ++p;
    joined += strlen(p) + (nargs > 0);
    nargs++;
  }

  lc__buf_puts(&b, "pre");
  check_kept(&b, lc__job_command(&b, text, args, nargs, 5, &where));
  b.len = 3;
  check_kept(&b, lc__job_command(&b, text, args, nargs, 1, &nogpu));
  b.len = 3;
  check_kept(&b, lc__job_command(&b, text, args, nargs, 0, NULL));
  b.len = 3;
  check_kept(&b, lc__job_worker_command(&b, text, &where));
  b.len = 3;
  check_kept(&b, r = lc__job_line(&b, args, nargs));
  if (r == 0 && b.len != 3 + joined)
    abort();
  lc__buf_free(&b);
  free(text);
  return 0;
}
