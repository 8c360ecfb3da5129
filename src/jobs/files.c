/*
 * files.c - what a job queue keeps on this machine and moves to and from hosts: each job's
 * results directory (written into RESULTS_DIR/.SEQ.partial/, renamed to RESULTS_DIR/SEQ when the
 * job ended, so that no half-written one is ever seen), GNU parallel's joblog (one line per
 * finished job, each with one write()), the files sent into every host's working directory, and
 * the files fetched after a job (returns).
 */
#include "queue_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- results directory ------------------------------------------------------------------------ */

static char *partial_path(const lc_jobs *q, const lc__qjob *j) {
  return lc__sprintf("%s/.%lu.partial", q->results_dir, j->pub.seq);
}

static int open_out(const char *dir, const char *name) {
  char *path = lc__sprintf("%s/%s", dir, name);
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
  free(path);
  return fd;
}

void lc__files_results_begin(lc_jobs *q, lc__qjob *j) {
  char *dir;
  if (q->results_dir == NULL)
    return;
  if (j->out_fd >= 0)
    close(j->out_fd);
  if (j->err_fd >= 0)
    close(j->err_fd);
  j->out_fd = j->err_fd = -1;
  if ((dir = partial_path(q, j)) == NULL)
    return;
  lc__remove_tree(dir); /* an earlier attempt's: a retry replaces it */
  mkdir(q->results_dir, 0700);
  if (mkdir(dir, 0700) == 0) {
    j->partial = 1;
    j->out_fd = open_out(dir, "stdout");
    j->err_fd = open_out(dir, "stderr");
    if (j->out_fd < 0 || j->err_fd < 0)
      j->out_fd = j->err_fd = -2;
  }
  free(dir);
}

static int write_whole(const char *dir, const char *name, const char *text) {
  int fd = open_out(dir, name), r = -1;
  size_t len = strlen(text);
  if (fd >= 0) {
    r = write(fd, text, len) == (ssize_t)len ? 0 : -1;
    close(fd);
  }
  return r;
}

void lc__files_results_end(lc_jobs *q, lc__qjob *j, int keep) {
  char *dir = NULL, *final = NULL, exit_text[64];
  int ok;
  if (q->results_dir == NULL || !j->partial)
    return;
  ok = keep && j->out_fd != -2 && j->err_fd != -2;
  if (j->out_fd >= 0)
    close(j->out_fd);
  if (j->err_fd >= 0)
    close(j->err_fd);
  j->out_fd = j->err_fd = -1;
  j->partial = 0;
  if ((dir = partial_path(q, j)) == NULL ||
      (final = lc__sprintf("%s/%lu", q->results_dir, j->pub.seq)) == NULL)
    goto out;
  if (j->pub.exit.signal)
    snprintf(exit_text, sizeof(exit_text), "%d\nsignal %d\n", j->pub.exit.exit_status,
             j->pub.exit.signal);
  else
    snprintf(exit_text, sizeof(exit_text), "%d\n", j->pub.exit.exit_status);
  if (ok)
    ok = write_whole(dir, "exit", exit_text) == 0 &&
         write_whole(dir, "command", j->input ? j->input : "") == 0;
  if (ok) {
    lc__remove_tree(final);
    ok = rename(dir, final) == 0;
  }
  if (!ok)
    lc__remove_tree(dir);
out:
  free(dir);
  free(final);
}

/* ---- joblog ----------------------------------------------------------------------------------- */

int lc__files_joblog_open(lc_jobs *q) {
  const char *path = q->joblog_path;
  struct stat st;
  int r = 0;
  if (path == NULL)
    return 0;
  if (q->opts.resume) {
    lc__buf text = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)
      return lc__error_set(-errno, "cannot read the joblog %s: %s", path, strerror(errno));
    if (fd >= 0) {
      char chunk[65536];
      ssize_t n;
      while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        if (lc__buf_append(&text, chunk, (size_t)n) < 0) {
          n = -1;
          errno = ENOMEM;
          break;
        }
      if (n < 0)
        r = lc__error_set(-errno, "cannot read the joblog %s: %s", path, strerror(errno));
      close(fd);
    }
    if (r == 0)
      r = lc__joblog_parse(&q->resume, text.data ? text.data : "", text.len, path);
    lc__buf_free(&text);
    if (r < 0)
      return r;
  }
  if ((q->joblog_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
    return lc__error_set(-errno, "cannot open the joblog %s: %s", path, strerror(errno));
  if (fstat(q->joblog_fd, &st) == 0 && st.st_size == 0) {
    static const char header[] = LC__JOBLOG_HEADER "\n";
    if (write(q->joblog_fd, header, sizeof(header) - 1) != (ssize_t)(sizeof(header) - 1))
      return lc__error_set(-errno, "cannot write the joblog %s: %s", path, strerror(errno));
  }
  return 0;
}

void lc__files_joblog(lc_jobs *q, const lc__qjob *j) {
  lc__buf line = {0};
  lc__joblog_entry e = {.seq = j->pub.seq,
                        .host = j->pub.host ? j->pub.host : ":",
                        .start = j->pub.start_time,
                        .runtime = j->pub.runtime,
                        .exitval = j->pub.exit.exit_status,
                        .signal = j->pub.exit.signal,
                        .command = j->input ? j->input : ""};
  if (q->joblog_fd < 0)
    return;
  if (lc__joblog_format(&line, &e) == 0 &&
      write(q->joblog_fd, line.data, line.len) != (ssize_t)line.len)
    lc__warn("the joblog could not be written: a job's line is missing");
  lc__buf_free(&line);
}

/* ---- sends ------------------------------------------------------------------------------------ */

int lc__files_send(lc_jobs *q, lc__qhost *h) {
  for (size_t i = 0; q->send != NULL && q->send[i] != NULL; i++) {
    const char *local = q->send[i], *base = strrchr(local, '/');
    char *remote = lc__sprintf("%s/%s", h->workdir, base ? base + 1 : local);
    int r;
    if (remote == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    r = lc_runtime_send_file(h->rt, local, remote, 0);
    free(remote);
    if (r < 0)
      return lc__error_set(r, "%s: cannot send %s: %s", h->name, local, lc_error_last());
  }
  return 0;
}

/* ---- returns ---------------------------------------------------------------------------------- */

typedef struct {
  const lc__qjob *j;
} ret_ctx;

/* {#} and {N}, unquoted: they make a path, not a shell word. */
static int ret_lookup(lc__buf *out, const char *name, size_t len, void *ctx) {
  const lc__qjob *j = ((ret_ctx *)ctx)->j;
  long long n;
  if (len == 1 && name[0] == '#')
    return lc__buf_printf(out, "%lu", j->pub.seq) < 0 ? -ENOMEM : 1;
  if ((n = lc__decimal(name, len, 6)) < 1)
    return 0;
  if ((size_t)n > j->pub.nargs)
    return lc__error_set(-EINVAL, "job %lu has %zu argument%s", j->pub.seq, j->pub.nargs,
                         j->pub.nargs == 1 ? "" : "s");
  return lc__buf_puts(out, j->args[n - 1]) < 0 ? -ENOMEM : 1;
}

/* mkdir -p of the directories above path (not path itself). */
static void make_parents(const char *path) {
  char *p = lc__strdup(path);
  for (char *c = p ? p + 1 : NULL; c != NULL && *c != '\0'; c++)
    if (*c == '/') {
      *c = '\0';
      mkdir(p, 0700);
      *c = '/';
    }
  free(p);
}

static void return_finished(lc_process *p, void *arg) {
  lc__qslot *s = arg;
  lc__err err = {0};
  int r = lc__xfer_finish(p, 0, &err);
  s->xfer = NULL;
  lc__proc_release(p);
  lc__jobs_live(s->q, -1);
  if (r == 0)
    s->next_return++;
  lc__jobs_return_done(s->q, s, r, err.msg);
}

int lc__files_next_return(lc_jobs *q, lc__qslot *s, lc__err *err) {
  lc__buf rel = {0};
  ret_ctx ctx = {s->job};
  char *local = NULL, *remote = NULL;
  lc_process *p = NULL;
  int r;

  if (q->returns[s->next_return] == NULL)
    return 0;
  if ((r = lc__template_render(&rel, q->returns[s->next_return], ret_lookup, &ctx, NULL)) < 0 ||
      (r = lc__buf_append(&rel, "", 1)) < 0) {
    r = lc__err_set(err, r, "%s", lc_error_last());
    goto out;
  }
  if (rel.data[0] == '/' || strstr(rel.data, "..") != NULL) {
    r = lc__err_set(err, -EINVAL, "return %s: not a path inside the job's working directory",
                    rel.data);
    goto out;
  }
  if ((local = lc__sprintf("%s/%s", q->return_dir ? q->return_dir : ".", rel.data)) == NULL ||
      (remote = lc__sprintf("%s/%s", s->host->workdir, rel.data)) == NULL) {
    r = lc__err_set(err, -ENOMEM, "out of memory");
    goto out;
  }
  make_parents(local);
  if ((r = lc__xfer_new(&p, s->host->rt, LC__XFER_GET, local, remote, NULL, 0, 0, 0, err)) < 0)
    goto out;
  p->on_finish = return_finished;
  p->finish_arg = s;
  s->xfer = p;
  lc__jobs_live(q, 1);
  if ((r = lc__proc_launch(p, err)) < 0) {
    s->xfer = NULL;
    lc__xfer_finish(p, r, err);
    lc__jobs_proc_discard(p);
    lc__jobs_live(q, -1);
    goto out;
  }
  r = 1;
out:
  free(local);
  free(remote);
  lc__buf_free(&rel);
  return r;
}
