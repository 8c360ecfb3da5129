/*
 * logs.c - `lazyclusterctl logs [NAME] [--master | --worker N | --host H] [-f] [--tail N]`: the
 * output of a cluster's processes and its events, from the log files its supervisor keeps (each
 * rotated to FILE.1 at its size cap), merged by time and tagged as --debug tags them. -f follows
 * them, rotation included, until the cluster is gone.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One log file being read: its path, the open file and what of its last line came so far. */
typedef struct source {
  char *path;
  int fd;
  ino_t ino;
  char *part;
  size_t partlen;
} source;

typedef struct line {
  long long ms;
  size_t seq;
  char *text;
} line;

typedef struct logs {
  const char *dir, *host;
  int master, worker, with_time, color;
  source *src;
  size_t nsrc;
  line *lines;
  size_t nlines, cap, seq;
} logs;

/* Whether a file of the logs directory is one the options select. */
static int wanted(const logs *l, const char *name) {
  size_t n = strlen(name);
  char want[64];
  if (n < 5 || strcmp(name + n - 4, ".log") != 0)
    return 0;
  if (l->master)
    return strcmp(name, "master.log") == 0;
  if (l->worker >= 0) {
    snprintf(want, sizeof(want), "worker-%d.log", l->worker);
    return strcmp(name, want) == 0;
  }
  if (l->host != NULL)
    return strcmp(name, "cluster.log") != 0;
  return 1;
}

static int add_line(logs *l, const char *s, size_t n) {
  char *text;
  if (l->host != NULL) { /* "MS S [HOST TAG] ..." */
    const char *b = memchr(s, '[', n);
    size_t hl = strlen(l->host);
    if (b == NULL || (size_t)(s + n - b) < hl + 2 || memcmp(b + 1, l->host, hl) != 0 ||
        b[1 + hl] != ' ')
      return 0;
  }
  if (l->nlines == l->cap) { /* the capacity changes only with the memory */
    size_t cap = l->cap * 2 + 256;
    line *more = realloc(l->lines, cap * sizeof(*more));
    if (more == NULL)
      return -ENOMEM;
    l->lines = more;
    l->cap = cap;
  }
  if ((text = malloc(n + 1)) == NULL)
    return -ENOMEM;
  memcpy(text, s, n);
  text[n] = '\0';
  l->lines[l->nlines].ms = strtoll(text, NULL, 10);
  l->lines[l->nlines].seq = l->seq++;
  l->lines[l->nlines++].text = text;
  return 0;
}

/* Reads what fd has from where it is, line by line; an unfinished last line waits in src. */
static int read_fd(logs *l, source *src, int fd) {
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    size_t start = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
      if (buf[i] != '\n')
        continue;
      if (src->partlen > 0) {
        char *joined = realloc(src->part, src->partlen + (i - start) + 1);
        if (joined == NULL)
          return -ENOMEM;
        memcpy(joined + src->partlen, buf + start, i - start);
        src->part = joined;
        if (add_line(l, joined, src->partlen + (i - start)) < 0)
          return -ENOMEM;
        src->partlen = 0;
      } else if (add_line(l, buf + start, i - start) < 0) {
        return -ENOMEM;
      }
      start = i + 1;
    }
    if (start < (size_t)n) {
      char *more = realloc(src->part, src->partlen + ((size_t)n - start) + 1);
      if (more == NULL)
        return -ENOMEM;
      memcpy(more + src->partlen, buf + start, (size_t)n - start);
      src->part = more;
      src->partlen += (size_t)n - start;
    }
  }
  return 0;
}

/* Opens a file to follow; with rotated, first what its FILE.1 holds. */
static int open_source(logs *l, const char *name, int rotated) {
  source *more, *src;
  struct stat st;
  char *old;
  for (size_t i = 0; i < l->nsrc; i++)
    if (strcmp(strrchr(l->src[i].path, '/') + 1, name) == 0)
      return 0;
  if ((more = realloc(l->src, (l->nsrc + 1) * sizeof(*more))) == NULL)
    return -ENOMEM;
  l->src = more;
  src = &l->src[l->nsrc];
  memset(src, 0, sizeof(*src));
  if ((src->path = lc__cli_sprintf("%s/%s", l->dir, name)) == NULL)
    return -ENOMEM;
  if (rotated && (old = lc__cli_sprintf("%s.1", src->path)) != NULL) {
    int fd = open(old, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(old);
    if (fd >= 0) {
      read_fd(l, src, fd);
      close(fd);
      src->partlen = 0;
    }
  }
  if ((src->fd = open(src->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
      fstat(src->fd, &st) < 0) {
    if (src->fd >= 0)
      close(src->fd);
    free(src->path);
    free(src->part);
    return 0; /* gone meanwhile: rotated between the listing and here, or the cluster ended */
  }
  src->ino = st.st_ino;
  l->nsrc++;
  return read_fd(l, src, src->fd);
}

/* Every selected file of the directory not opened yet (a worker added by scale has a new one). */
static int scan(logs *l, int rotated) {
  DIR *d = opendir(l->dir);
  struct dirent *de;
  int r = 0;
  if (d == NULL)
    return -errno;
  while (r == 0 && (de = readdir(d)) != NULL)
    if (wanted(l, de->d_name))
      r = open_source(l, de->d_name, rotated);
  closedir(d);
  return r;
}

/* New lines of every open file; a file that was rotated is read to its end, then its successor
 * is opened. */
static void poll_sources(logs *l) {
  for (size_t i = 0; i < l->nsrc; i++) {
    source *src = &l->src[i];
    struct stat st;
    read_fd(l, src, src->fd);
    if (stat(src->path, &st) == 0 && st.st_ino != src->ino) {
      int fd = open(src->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      read_fd(l, src, src->fd);
      if (fd >= 0) {
        close(src->fd);
        src->fd = fd;
        src->ino = st.st_ino;
        src->partlen = 0;
        read_fd(l, src, src->fd);
      }
    }
  }
}

static int by_time(const void *a, const void *b) {
  const line *x = a, *y = b;
  if (x->ms != y->ms)
    return x->ms < y->ms ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Prints the lines gathered (the last tail of them; tail < 0: all), in time order. */
static void flush_lines(logs *l, long tail) {
  char out[70000];
  size_t from = 0;
  if (l->nlines == 0)
    return;
  qsort(l->lines, l->nlines, sizeof(*l->lines), by_time);
  if (tail >= 0 && l->nlines > (size_t)tail)
    from = l->nlines - (size_t)tail;
  for (size_t i = 0; i < l->nlines; i++) {
    char stream;
    if (i >= from &&
        lc_control_log_format(out, sizeof(out), l->lines[i].text, strlen(l->lines[i].text),
                              l->with_time, l->color, &stream) >= 0)
      puts(out);
    free(l->lines[i].text);
  }
  l->nlines = 0;
  fflush(stdout);
}

static int usage(void) {
  printf("usage: " CLI_NAME " logs [NAME] [--master | --worker N | --host H] [-f] [--tail N]\n"
         "Shows what a cluster's processes wrote, and its events, merged by time and tagged\n"
         "[HOST master] / [HOST worker-N] / [- cluster] as --debug shows them. Each process's\n"
         "log is kept in the state directory up to a size cap (then rotated once).\n"
         "NAME may be left out when one cluster runs.\n\n"
         "  --master        only the master's output\n"
         "  --worker N      only worker N's\n"
         "  --host H        only the processes on host H\n"
         "  -f, --follow    keep printing new lines until the cluster is gone\n"
         "  --tail N        only the last N lines so far (default: all)\n"
         "  --time          each line with its time\n");
  return CLI_EXIT_OK;
}

int cli_logs(int argc, char **argv) {
  logs l = {.worker = -1, .color = isatty(1)};
  const char *name = NULL;
  char *cluster = NULL, *dir = NULL, *end;
  long tail = -1;
  int follow = 0, r, status = CLI_EXIT_OK, picks = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a))
      return usage();
    if (strcmp(a, "-f") == 0 || strcmp(a, "--follow") == 0) {
      follow = 1;
    } else if (strcmp(a, "--time") == 0) {
      l.with_time = 1;
    } else if (strcmp(a, "--master") == 0) {
      l.master = 1;
      picks++;
    } else if (strcmp(a, "--worker") == 0 || strcmp(a, "--host") == 0 || strcmp(a, "--tail") == 0) {
      const char *v = i + 1 < argc ? argv[++i] : NULL;
      long n;
      if (v == NULL)
        return cli_usage_error("logs", "%s needs a value", a);
      if (strcmp(a, "--host") == 0) {
        l.host = v;
        picks++;
        continue;
      }
      n = strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 0 || n > 100000000)
        return cli_usage_error("logs", "%s %s: want a number, 0 or more", a, v);
      if (a[2] == 'w') {
        l.worker = (int)n;
        picks++;
      } else {
        tail = n;
      }
    } else if (cli_take_name("logs", a, &name) < 0) {
      return CLI_EXIT_USAGE;
    }
  }
  if (picks > 1)
    return cli_usage_error("logs", "one of --master, --worker N, --host H");
  if ((status = cli_resolve_name("logs", name, &cluster)) != CLI_EXIT_OK)
    return status;
  if ((r = lc_control_logs_path(&dir, NULL, cluster)) < 0) {
    status = cli_fail("logs", r, cluster);
    goto out;
  }
  l.dir = dir;
  if ((r = scan(&l, 1)) < 0) {
    fprintf(stderr, CLI_NAME " logs: cluster %s: %s: %s\n", cluster, dir, strerror(-r));
    status = CLI_EXIT_FAIL;
    goto out;
  }
  if (l.nsrc == 0 && (l.master || l.worker >= 0)) {
    if (l.master)
      fprintf(stderr, CLI_NAME " logs: cluster %s: no log of its master in %s\n", cluster, dir);
    else
      fprintf(stderr, CLI_NAME " logs: cluster %s: no worker %d (no worker-%d.log in %s)\n",
              cluster, l.worker, l.worker, dir);
    status = CLI_EXIT_FAIL;
    goto out;
  }
  flush_lines(&l, tail);
  while (follow) {
    int gone = lc_control_wait_gone(NULL, cluster, 0) == 0;
    if (!gone)
      poll(NULL, 0, 200);
    if (!l.master && l.worker < 0)
      scan(&l, 0);
    poll_sources(&l);
    flush_lines(&l, -1);
    if (gone)
      break;
  }
out:
  for (size_t i = 0; i < l.nsrc; i++) {
    close(l.src[i].fd);
    free(l.src[i].path);
    free(l.src[i].part);
  }
  free(l.src);
  free(l.lines);
  lc_free(dir);
  free(cluster);
  return status;
}
