/*
 * run.c - lc_runtime_hostinfo: the facts script run on one runtime, its output parsed.
 */
#include "hostfacts_text.h"
#include "lazycluster/runtime.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_OUTPUT ((size_t)64 * 1024 * 1024) /* a host's /proc/net/tcp can be large, not this */
#define ERR_TAIL_MAX 512

typedef struct collected {
  lc__buf out;
  char err_tail[ERR_TAIL_MAX];
  int too_long, oom;
} collected;

static void collect_line(const char *line, size_t len, lc_stream stream, void *payload) {
  collected *c = payload;
  if (stream == LC_STDERR) {
    lc__copy_mem(c->err_tail, sizeof(c->err_tail), line, len);
    return;
  }
  if (c->too_long || c->oom)
    return;
  if (c->out.len + len + 1 > MAX_OUTPUT) {
    c->too_long = 1;
    return;
  }
  if (lc__buf_append(&c->out, line, len) < 0 || lc__buf_append(&c->out, "\n", 1) < 0)
    c->oom = 1;
}

/* Sets the detail "NAME: host facts: DETAIL", naming the host once. */
static int facts_fail(const lc_runtime *rt, int code, const char *detail) {
  const char *name = lc_runtime_name(rt);
  size_t n = strlen(name);
  if (strncmp(detail, name, n) == 0 && detail[n] == ':' && detail[n + 1] == ' ')
    detail += n + 2;
  return lc__error_set(code, "%s: host facts: %s", name, detail);
}

int lc_runtime_hostinfo(lc_hostinfo **out, lc_runtime *rt, const char *const *executables,
                        int timeout_ms) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {.exit_status = -1};
  lc_process *proc = NULL;
  lc_hostinfo *info = NULL;
  collected *c = NULL;
  lc__buf cmd = {0};
  lc__err err = {0};
  int r = -ENOMEM;
  if (out == NULL || rt == NULL)
    return lc__error_set(-EINVAL, "lc_runtime_hostinfo: %s is NULL", out ? "rt" : "out");
  *out = NULL;
  if ((c = lc__calloc(1, sizeof(*c))) == NULL || (info = lc__calloc(1, sizeof(*info))) == NULL ||
      lc__hostfacts_command(&cmd, executables) < 0 || lc__buf_append(&cmd, "", 1) < 0) {
    r = facts_fail(rt, -ENOMEM, "out of memory");
    goto out;
  }
  eo.on_line = collect_line;
  eo.payload = c;
  if (timeout_ms <= 0)
    timeout_ms = LC__HOSTFACTS_TIMEOUT_MS;
  /* Waited for here rather than with lc_runtime_exec, so that a silent host costs the timeout and
   * no more: the process is let go at once (lc_process_free ends it, no callback runs after). */
  if ((r = lc_runtime_spawn(&proc, rt, cmd.data, &eo)) < 0) {
    facts_fail(rt, r, lc_error_last());
    goto out;
  }
  r = lc_process_wait(&res, proc, timeout_ms);
  if (r == -ETIMEDOUT) {
    char detail[96];
    snprintf(detail, sizeof(detail), "no answer within %.1f s", timeout_ms / 1000.0);
    facts_fail(rt, r, detail);
  } else if (r < 0) {
    facts_fail(rt, r, lc_error_last());
  }
  lc_process_free(proc);
  proc = NULL;
  if (r < 0)
    goto out;
  if (c->oom || c->too_long) {
    r = facts_fail(rt, c->oom ? -ENOMEM : LC_EREMOTE,
                   c->oom ? "out of memory" : "more than 64 MiB of output");
    goto out;
  }
  if ((r = lc__hostfacts_parse(info, c->out.data ? c->out.data : "", c->out.len, executables,
                               &err)) < 0) {
    char detail[LC_ERRMSG_MAX];
    if (res.signal != 0)
      snprintf(detail, sizeof(detail), "%.600s (ended by signal %d)%s%.300s", err.msg, res.signal,
               c->err_tail[0] ? "; stderr: " : "", c->err_tail);
    else
      snprintf(detail, sizeof(detail), "%.600s (exit status %d)%s%.300s", err.msg, res.exit_status,
               c->err_tail[0] ? "; stderr: " : "", c->err_tail);
    facts_fail(rt, r, detail);
    goto out;
  }
  lc__runtime_learn_loopback(rt, info->loopback);
  *out = info;
  info = NULL;
out:
  lc_hostinfo_free(info);
  if (c)
    lc__buf_free(&c->out);
  free(c);
  lc__buf_free(&cmd);
  return r;
}
