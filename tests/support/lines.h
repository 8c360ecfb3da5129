/*
 * lines.h - a process's output lines, gathered on the engine thread and waited for from the
 * test's: a fixed buffer (appended to only, so a line found stays where it is), a mutex and a
 * condition. Used as the on_line callback with the lines as payload.
 */
#ifndef LC_LINES_H
#define LC_LINES_H

#include "lazycluster.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct lines {
  const char *who; /* for messages: "tcptool on lab1" */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t len;
  char text[32 * 1024]; /* the lines, each ending in \n; later ones dropped when full */
} lines;

static inline void lines_init(lines *l, const char *who) {
  memset(l, 0, sizeof(*l));
  l->who = who;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
}

static inline void lines_destroy(lines *l) {
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
}

/* The on_line callback: stderr lines are also shown, tagged with who. */
static inline void lines_line(const char *line, size_t len, lc_stream stream, void *payload) {
  lines *l = payload;
  if (stream == LC_STDERR)
    fprintf(stderr, "  [%s] %.*s\n", l->who, (int)len, line);
  pthread_mutex_lock(&l->mu);
  if (l->len + len + 2 < sizeof(l->text)) {
    memcpy(l->text + l->len, line, len);
    l->len += len;
    l->text[l->len++] = '\n';
    l->text[l->len] = '\0';
  }
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

/* The n-th (0: first) line starting with prefix, or NULL. Called locked. */
static inline const char *lines_find(const lines *l, const char *prefix, int n) {
  size_t plen = strlen(prefix);
  for (const char *p = l->text; *p != '\0';) {
    const char *nl = strchr(p, '\n');
    if (strncmp(p, prefix, plen) == 0 && n-- == 0)
      return p;
    p = nl ? nl + 1 : p + strlen(p);
  }
  return NULL;
}

/* The first line starting with prefix (anywhere: 0, the text containing it), or NULL. Locked. */
static inline const char *lines_match(const lines *l, const char *what, int at_start) {
  return at_start ? lines_find(l, what, 0) : strstr(l->text, what);
}

/*
 * Waits up to ms for a line that starts with what (at_start) or for what anywhere in the text;
 * copies that line (without \n) to out when out is not NULL. 0, or -1 with what was printed shown.
 */
static inline int lines_wait(lines *l, const char *what, int at_start, char *out, size_t size,
                             int ms) {
  struct timespec now;
  const char *p;
  uint64_t end;
  int r = -1;
  clock_gettime(CLOCK_MONOTONIC, &now);
  end = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u + (uint64_t)ms;
  pthread_mutex_lock(&l->mu);
  while ((p = lines_match(l, what, at_start)) == NULL) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u >= end)
      break;
    clock_gettime(CLOCK_REALTIME, &ts); /* the condition's clock */
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
  }
  if (p != NULL) {
    if (out != NULL && size > 0) {
      const char *start = p;
      size_t n;
      while (start > l->text && start[-1] != '\n')
        start--;
      n = strcspn(start, "\n");
      if (n >= size)
        n = size - 1;
      memcpy(out, start, n);
      out[n] = '\0';
    }
    r = 0;
  }
  pthread_mutex_unlock(&l->mu);
  if (r < 0)
    fprintf(stderr, "  %s: no \"%s\" within %d ms; it printed:\n%s", l->who, what, ms, l->text);
  return r;
}

/* How many lines start with prefix. */
static inline int lines_count(lines *l, const char *prefix) {
  int n = 0;
  pthread_mutex_lock(&l->mu);
  while (lines_find(l, prefix, n) != NULL)
    n++;
  pthread_mutex_unlock(&l->mu);
  return n;
}

#endif /* LC_LINES_H */
