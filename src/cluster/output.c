/*
 * output.c - what a cluster keeps of its processes' output: each process's tag and last stderr
 * lines (for error messages), the line routing to the launchers' hooks and the caller's
 * callbacks, the cluster's log of what it did, and its events.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lc__cluster_note(lc_cluster *c, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  lc__buf_puts(&c->log, line);
  lc__buf_puts(&c->log, "\n");
}

/* Every line of every process: its stderr tail, then the launcher's line hook, then the caller's
 * callbacks (on_output with the index and host, on_line with the tag). Engine thread. */
void lc__cluster_on_line(const char *line, size_t len, lc_stream stream, void *payload) {
  lc__output *t = payload;
  lc_cluster *c = t->c;
  if (stream == LC_STDERR) {
    pthread_mutex_lock(&c->mu);
    free(t->err_line[t->err_next % LC__TAIL_LINES]);
    t->err_line[t->err_next % LC__TAIL_LINES] = lc__strndup(line, len < 400 ? len : 400);
    t->err_next++;
    pthread_mutex_unlock(&c->mu);
  }
  if (t->index < 0 && c->m->version >= 3 && c->m->on_line != NULL)
    c->m->on_line(c->m, c, line, len, stream);
  else if (t->index >= 0 && c->w->version >= 4 && c->w->on_line != NULL)
    c->w->on_line(c->w, c, t->index, line, len, stream);
  if (c->opts.on_output != NULL)
    c->opts.on_output(c, t->index, t->host, line, len, stream, c->opts.payload);
  if (c->opts.on_line != NULL)
    c->opts.on_line(t->tag, line, len, stream, c->opts.payload);
}

/* "exit status 1; last stderr: ... | ..." for a message. */
void lc__cluster_how_ended(lc_cluster *c, lc__output *t, lc_process *p, char *out, size_t size) {
  lc_exec_result res = {.exit_status = -1};
  size_t used = 0;
  int w = lc_process_wait(&res, p, 0), finished = w == 0;
  if (w < 0 && w != -ETIMEDOUT) /* it never ran: the reason its host gave */
    used = (size_t)snprintf(out, size, "it could not run: %s", lc_error_last());
  else if (finished && res.signal)
    used = (size_t)snprintf(out, size, "it was ended by signal %d", res.signal);
  else if (finished)
    used = (size_t)snprintf(out, size, "it exited with status %d", res.exit_status);
  else
    used = (size_t)snprintf(out, size, "it still runs");
  pthread_mutex_lock(&c->mu);
  if (t->err_next > 0 && used < size)
    used += (size_t)snprintf(out + used, size - used, "; its last stderr lines:");
  for (size_t i = t->err_next > LC__TAIL_LINES ? t->err_next - LC__TAIL_LINES : 0; i < t->err_next;
       i++)
    if (used < size)
      used +=
          (size_t)snprintf(out + used, size - used, "\n    %s", t->err_line[i % LC__TAIL_LINES]);
  pthread_mutex_unlock(&c->mu);
}

void lc__output_lifeline_word(lc_cluster *c, lc__output *t, char *out, size_t size) {
  static const char word[] = "lc-lifeline: ";
  const char *last;
  out[0] = '\0';
  pthread_mutex_lock(&c->mu);
  last = t->err_next > 0 ? t->err_line[(t->err_next - 1) % LC__TAIL_LINES] : NULL;
  if (last != NULL && strncmp(last, word, sizeof(word) - 1) == 0)
    snprintf(out, size, "%s", last + sizeof(word) - 1);
  pthread_mutex_unlock(&c->mu);
}

lc__output *lc__output_new(lc_cluster *c, int index, const char *host) {
  lc__output *t = lc__calloc(1, sizeof(*t));
  if (t == NULL)
    return NULL;
  t->c = c;
  t->index = index;
  snprintf(t->host, sizeof(t->host), "%s", host);
  if (index < 0)
    snprintf(t->tag, sizeof(t->tag), "%s master", host);
  else
    snprintf(t->tag, sizeof(t->tag), "%s worker-%d", host, index);
  return t;
}

void lc__output_clear(lc__output *t) {
  pthread_mutex_lock(&t->c->mu);
  for (size_t i = 0; i < LC__TAIL_LINES; i++) {
    free(t->err_line[i]);
    t->err_line[i] = NULL;
  }
  t->err_next = 0;
  pthread_mutex_unlock(&t->c->mu);
}

void lc__output_free(lc__output *t) {
  if (t == NULL)
    return;
  for (size_t i = 0; i < LC__TAIL_LINES; i++)
    free(t->err_line[i]);
  free(t);
}

/* Sends ev to on_event (the kinds of options version 5 only to such callers); a worker's UP or
 * RESTARTED is its state becoming RUNNING. */
void lc__cluster_emit(lc_cluster *c, lc_cluster_event ev, int index) {
  if ((ev == LC_CLUSTER_WORKER_UP || ev == LC_CLUSTER_WORKER_RESTARTED) && index >= 0 &&
      (size_t)index < c->nworkers)
    c->workers[index].state = LC_WORKER_RUNNING;
  if (ev >= LC_CLUSTER_WORKER_RESTARTED && c->opts.version < 5)
    return;
  if (c->opts.on_event != NULL)
    c->opts.on_event(c, ev, index, c->opts.payload);
}
