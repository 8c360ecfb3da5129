/*
 * logs.c - a cluster's log files (master.log, worker-N.log, cluster.log): one line per output
 * line or event, "MS STREAM [HOST TAG] TEXT", each file rotated to FILE.1 at its size limit.
 */
#include "control_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536 /* a longer line is cut there */

static int open_log(lc_control *ctl, const char *file, lc__log_file *lf) {
  char *path = lc__sprintf("%s/%s", ctl->logs_dir, file);
  struct stat st;
  if (path == NULL)
    return -ENOMEM;
  lf->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  free(path);
  if (lf->fd < 0)
    return -errno;
  lf->size = fstat(lf->fd, &st) == 0 ? (long long)st.st_size : 0;
  return 0;
}

/* FILE -> FILE.1 (the older FILE.1 goes), and a new FILE. */
static int rotate(lc_control *ctl, const char *file, lc__log_file *lf) {
  char *from = lc__sprintf("%s/%s", ctl->logs_dir, file);
  char *to = lc__sprintf("%s/%s.1", ctl->logs_dir, file);
  int r = -ENOMEM;
  if (from != NULL && to != NULL) {
    close(lf->fd);
    lf->fd = -1;
    rename(from, to);
    r = open_log(ctl, file, lf);
  }
  free(from);
  free(to);
  return r;
}

/* Appends one line (text without its newline) to the log file of index (-1 master, -2 events). */
static void append(lc_control *ctl, int index, const char *host, char stream, const char *text,
                   size_t len) {
  char file[32], head[320];
  lc__log_file *lf;
  int hn;
  if (ctl == NULL || ctl->logs_dir == NULL)
    return;
  if (index == -2)
    snprintf(file, sizeof(file), "cluster.log");
  else if (index == -1)
    snprintf(file, sizeof(file), "master.log");
  else
    snprintf(file, sizeof(file), "worker-%d.log", index);
  if (index == -2)
    hn = snprintf(head, sizeof(head), "%lld c [- cluster] ", lc__control_wall_ms());
  else if (index == -1)
    hn = snprintf(head, sizeof(head), "%lld %c [%.200s master] ", lc__control_wall_ms(), stream,
                  host && host[0] ? host : "-");
  else
    hn = snprintf(head, sizeof(head), "%lld %c [%.200s worker-%d] ", lc__control_wall_ms(), stream,
                  host && host[0] ? host : "-", index);
  if (hn < 0 || (size_t)hn >= sizeof(head))
    return;
  if (len > LINE_MAX_BYTES)
    len = LINE_MAX_BYTES;
  /* the whole line within the limit, so that FILE and FILE.1 stay within it */
  if ((long long)hn + (long long)len + 1 > ctl->log_max)
    len = ctl->log_max > hn + 1 ? (size_t)(ctl->log_max - hn - 1) : 0;
  char *line = lc__malloc((size_t)hn + len + 1);
  if (line == NULL)
    return;
  memcpy(line, head, (size_t)hn);
  for (size_t i = 0; i < len; i++) /* one line stays one line */
    line[(size_t)hn + i] = text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
  line[(size_t)hn + len] = '\n';
  size_t total = (size_t)hn + len + 1;

  pthread_mutex_lock(&ctl->log_mu);
  if (index == -2) {
    lf = &ctl->cluster_log;
  } else if (index == -1) {
    lf = &ctl->master_log;
  } else {
    if ((size_t)index >= ctl->n_worker_logs) {
      size_t n = (size_t)index + 1;
      lc__log_file *more = lc__realloc(ctl->worker_logs, n * sizeof(*more));
      if (more == NULL)
        goto out;
      for (size_t i = ctl->n_worker_logs; i < n; i++)
        more[i].fd = -1, more[i].size = 0;
      ctl->worker_logs = more;
      ctl->n_worker_logs = n;
    }
    lf = &ctl->worker_logs[index];
  }
  if (lf->fd < 0 && open_log(ctl, file, lf) < 0)
    goto out;
  if (lf->size > 0 && lf->size + (long long)total > ctl->log_max && rotate(ctl, file, lf) < 0)
    goto out;
  ssize_t n = write(lf->fd, line, total);
  if (n > 0)
    lf->size += n;
out:
  pthread_mutex_unlock(&ctl->log_mu);
  free(line);
}

void lc_control_log_line(lc_control *ctl, int index, const char *host, const char *line, size_t len,
                         lc_stream stream) {
  if (index < -1 || line == NULL)
    return;
  append(ctl, index, host, stream == LC_STDERR ? 'e' : 'o', line, len);
}

void lc_control_log_event(lc_control *ctl, const char *fmt, ...) {
  char text[2048];
  va_list ap;
  int n;
  if (ctl == NULL || fmt == NULL)
    return;
  va_start(ap, fmt);
  n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  append(ctl, -2, NULL, 'c', text, strlen(text));
}

void lc__control_logs_close(lc_control *ctl) {
  pthread_mutex_lock(&ctl->log_mu);
  if (ctl->master_log.fd >= 0)
    close(ctl->master_log.fd);
  if (ctl->cluster_log.fd >= 0)
    close(ctl->cluster_log.fd);
  for (size_t i = 0; i < ctl->n_worker_logs; i++)
    if (ctl->worker_logs[i].fd >= 0)
      close(ctl->worker_logs[i].fd);
  ctl->master_log.fd = ctl->cluster_log.fd = -1;
  ctl->n_worker_logs = 0;
  pthread_mutex_unlock(&ctl->log_mu);
}

int lc__control_last_events(lc_control *ctl, lc__buf *lines, int n) {
  char *path = lc__sprintf("%s/cluster.log", ctl->logs_dir);
  char buf[8192];
  ssize_t got = 0;
  int fd, r = 0;
  if (path == NULL)
    return -ENOMEM;
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  free(path);
  if (fd < 0)
    return 0;
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0;
  if (size > 0)
    got = pread(fd, buf, sizeof(buf), from);
  close(fd);
  if (got <= 0)
    return 0;
  /* the last n whole lines: from the end back over n newlines, not before the first whole line */
  size_t first = 0, e = (size_t)got, i;
  int count = 0;
  if (from > 0) {
    char *nl = memchr(buf, '\n', (size_t)got);
    if (nl == NULL)
      return 0;
    first = (size_t)(nl - buf) + 1;
  }
  if (e > first && buf[e - 1] == '\n')
    e--;
  for (i = e; i > first; i--)
    if (buf[i - 1] == '\n' && ++count == n)
      break;
  if (i < e)
    r = lc__buf_append(lines, buf + i, e - i);
  return r;
}

int lc_control_log_format(char *out, size_t size, const char *line, size_t len, int with_time,
                          int color, char *stream) {
  const char *p = line, *end = line + len, *tag, *tag_end, *text;
  long long ms = 0;
  char st, head[64] = "";
  size_t n = 0;
  if (out == NULL || size == 0 || line == NULL)
    return -EINVAL;
  out[0] = '\0';
  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
    end = line + --len;
  if (p == end || *p < '0' || *p > '9')
    return lc__error_set(-EINVAL, "not a log line: no time first");
  while (p < end && *p >= '0' && *p <= '9' && ms < 1000000000000000LL)
    ms = ms * 10 + (*p++ - '0');
  if (end - p < 4 || p[0] != ' ' || (p[1] != 'o' && p[1] != 'e' && p[1] != 'c') || p[2] != ' ' ||
      p[3] != '[')
    return lc__error_set(-EINVAL, "not a log line: want \"MS STREAM [HOST TAG] TEXT\"");
  st = p[1];
  tag = p + 4;
  if ((tag_end = memchr(tag, ']', (size_t)(end - tag))) == NULL)
    return lc__error_set(-EINVAL, "not a log line: no ']' after its tag");
  text = tag_end + 1;
  if (text < end && *text == ' ')
    text++;
  if (st == 'c' && tag_end - tag > 2 && tag[0] == '-' && tag[1] == ' ')
    tag += 2; /* an event: "[cluster]" */
  if (with_time) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    if (localtime_r(&secs, &tm) != NULL)
      snprintf(head, sizeof(head), "%02d:%02d:%02d.%03d ", tm.tm_hour, tm.tm_min, tm.tm_sec,
               (int)(ms % 1000));
  }
  int k = snprintf(out, size, color ? "%s\033[%sm[%.*s]\033[0m " : "%s%.0s[%.*s] ", head,
                   st == 'e'   ? "33"
                   : st == 'o' ? "36"
                               : "35",
                   (int)(tag_end - tag), tag);
  if (k < 0)
    return -EINVAL;
  n = (size_t)k < size ? (size_t)k : size - 1;
  size_t tlen = (size_t)(end - text);
  if (n + tlen > size - 1)
    tlen = size - 1 - n;
  memcpy(out + n, text, tlen);
  n += tlen;
  out[n] = '\0';
  if (stream != NULL)
    *stream = st;
  return (int)n;
}
