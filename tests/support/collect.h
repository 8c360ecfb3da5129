/*
 * collect.h - gathers a command's output lines for assertions.
 */
#ifndef LC_COLLECT_H
#define LC_COLLECT_H

#include "lazycluster.h"

#include <stdlib.h>
#include <string.h>

typedef struct collect {
  char *text[2];     /* stdout, stderr: lines joined with \n */
  size_t len[2], cap[2];
  size_t lines[2];
  size_t bytes[2];   /* payload bytes, newlines excluded */
  int keep;          /* keep the text (else only count) */
} collect;

static inline void collect_line(const char *line, size_t len, lc_stream stream, void *payload) {
  collect *c = payload;
  int s = stream == LC_STDERR;
  c->lines[s]++;
  c->bytes[s] += len;
  if (!c->keep)
    return;
  if (c->len[s] + len + 2 > c->cap[s]) {
    c->cap[s] = (c->len[s] + len + 2) * 2;
    c->text[s] = realloc(c->text[s], c->cap[s]);
  }
  memcpy(c->text[s] + c->len[s], line, len);
  c->len[s] += len;
  c->text[s][c->len[s]++] = '\n';
  c->text[s][c->len[s]] = '\0';
}

static inline void collect_free(collect *c) {
  free(c->text[0]);
  free(c->text[1]);
  memset(c, 0, sizeof(*c));
}

/* Runs command on rt, keeping its output in c (which the caller frees). */
static inline int collect_exec(collect *c, lc_exec_result *res, lc_runtime *rt, const char *command,
                               const char *const *env) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  memset(c, 0, sizeof(*c));
  c->keep = 1;
  eo.on_line = collect_line;
  eo.payload = c;
  eo.env = env;
  eo.timeout_ms = 60000;
  return lc_runtime_exec(res, rt, command, &eo);
}

#endif /* LC_COLLECT_H */
