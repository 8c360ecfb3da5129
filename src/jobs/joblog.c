/*
 * joblog.c - GNU parallel's joblog (jobs_internal.h): one line per finished job, written as
 * parallel writes it, and read back for resume as parallel reads it, so that either program can
 * resume from the other's file.
 *
 * What GNU parallel does (20221122, read in its source): the header is the nine names joined by
 * tabs; a line is Seq, the sshlogin (":" for this machine), Starttime "%.3f", JobRuntime
 * "%10.3f" of the run time cut (not rounded) to milliseconds, Send and Receive bytes, Exitval,
 * Signal and the command with each newline written as a NUL byte (tabs stay), joined by tabs.
 * --resume skips every job number a line begins with; --resume-failed only those whose Exitval
 * and Signal are both "0", any line of that number counting.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Appends s with each byte of from replaced by to. */
static int append_mapped(lc__buf *out, const char *s, char from, char to) {
  int r = 0;
  for (const char *p = s; *p != '\0' && r == 0;) {
    size_t n = strcspn(p, (char[]){from, '\0'});
    if ((r = lc__buf_append(out, p, n)) < 0 || p[n] == '\0')
      break;
    r = lc__buf_append(out, &to, 1);
    p += n + 1;
  }
  return r;
}

/* One joblog line (jobs_internal.h), as GNU parallel's print_joblog writes it. */
int lc__joblog_format(lc__buf *out, const lc__joblog_entry *e) {
  size_t start = out->len;
  const char *host = e->host != NULL && e->host[0] != '\0' ? e->host : ":";
  double start_time = isfinite(e->start) && e->start > 0 ? e->start : 0;
  double runtime = isfinite(e->runtime) && e->runtime > 0 && e->runtime < 1e15 ? e->runtime : 0;
  int r;

  runtime = (double)(long long)(runtime * 1000) / 1000;
  if ((r = lc__buf_printf(out, "%lu\t", e->seq)) < 0)
    goto out;
  /* a host never holds a tab or newline; were one there, the line would not read back */
  for (const char *p = host; *p != '\0' && r == 0; p++)
    r = lc__buf_append(out, *p == '\t' || *p == '\n' ? " " : p, 1);
  if (r < 0 || (r = lc__buf_printf(out, "\t%.3f\t%10.3f\t%llu\t%llu\t%d\t%d\t", start_time, runtime,
                                   (unsigned long long)e->send, (unsigned long long)e->receive,
                                   e->exitval, e->signal)) < 0)
    goto out;
  if ((r = append_mapped(out, e->command != NULL ? e->command : "", '\n', '\0')) < 0 ||
      (r = lc__buf_append(out, "\n", 1)) < 0)
    goto out;

out:
  if (r < 0) {
    out->len = start;
    if (out->data != NULL)
      out->data[start] = '\0';
    return lc__error_set(-ENOMEM, "out of memory");
  }
  return 0;
}

/* A field of a line, for messages: at most 40 bytes, control bytes as '?'. */
static const char *shown(char *buf, size_t size, const char *s, size_t len) {
  size_t n = len < size - 4 ? len : size - 4;
  for (size_t i = 0; i < n; i++) {
    buf[i] = s[i];
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
      buf[i] = '?';
  }
  memcpy(buf + n, n < len ? "..." : "", n < len ? 4 : 1);
  return buf;
}

/* Whether [s, s + len) is blanks (JobRuntime's padding), then an optional '-' when sign allows,
 * digits, and with frac a '.' and digits. */
static int is_number(const char *s, size_t len, int sign, int frac) {
  size_t i = 0, digits = 0;
  while (i < len && s[i] == ' ' && frac)
    i++;
  if (i < len && s[i] == '-' && sign)
    i++;
  while (i < len && s[i] >= '0' && s[i] <= '9')
    i++, digits++;
  if (frac && i < len && s[i] == '.') {
    i++;
    while (i < len && s[i] >= '0' && s[i] <= '9')
      i++, digits++;
  }
  return digits > 0 && i == len;
}

static int seen_cmp(const void *a, const void *b) {
  const lc__joblog_seen *x = a, *y = b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int record_add(lc__joblog_record *rec, unsigned long seq, int ok) {
  lc__joblog_seen *v = lc__grow(rec->v, &rec->cap, rec->n + 1, sizeof(*v), 64);
  if (v == NULL)
    return -ENOMEM;
  rec->v = v;
  rec->v[rec->n].seq = seq;
  rec->v[rec->n].ok = ok;
  rec->n++;
  return 0;
}

/* Checks one line that is not the header (without its newline) and adds it to rec. */
static int parse_line(lc__joblog_record *rec, const char *line, size_t len, const char *path,
                      unsigned long lineno) {
  static const char *const names[] = {"Seq",  "Host",    "Starttime", "JobRuntime",
                                      "Send", "Receive", "Exitval",   "Signal"};
  const char *f[9];
  size_t flen[9], rest = len;
  char show[48];
  long long seq;
  int bad = -1;

  f[0] = line;
  for (int i = 0; i < 8; i++) {
    const char *tab = memchr(f[i], '\t', rest);
    if (tab == NULL)
      return lc__error_set(-EINVAL,
                           "%s line %lu: not a joblog line (want 9 tab-separated fields: Seq "
                           "Host Starttime JobRuntime Send Receive Exitval Signal Command)",
                           path, lineno);
    flen[i] = (size_t)(tab - f[i]);
    rest -= flen[i] + 1;
    f[i + 1] = tab + 1;
  }
  flen[8] = rest;

  seq = lc__decimal(f[0], flen[0], 18);
  if (seq < 1 || (unsigned long long)seq > ULONG_MAX)
    return lc__error_set(-EINVAL, "%s line %lu: Seq \"%s\" is not a job number (1 or more)", path,
                         lineno, shown(show, sizeof(show), f[0], flen[0]));
  if (flen[1] == 0 || memchr(f[1], '\0', flen[1]) != NULL)
    bad = 1;
  else if (!is_number(f[2], flen[2], 0, 1))
    bad = 2;
  else if (!is_number(f[3], flen[3], 0, 1))
    bad = 3;
  else if (!is_number(f[4], flen[4], 0, 0))
    bad = 4;
  else if (!is_number(f[5], flen[5], 0, 0))
    bad = 5;
  else if (!is_number(f[6], flen[6], 1, 0))
    bad = 6;
  else if (!is_number(f[7], flen[7], 0, 0))
    bad = 7;
  if (bad >= 0)
    return lc__error_set(-EINVAL, "%s line %lu: %s \"%s\" is not %s", path, lineno, names[bad],
                         shown(show, sizeof(show), f[bad], flen[bad]),
                         bad == 1 ? "a host" : "a number");

  if ((unsigned long)seq > rec->max_seq) {
    rec->max_seq = (unsigned long)seq;
    rec->max_seq_line = lineno;
  }
  /* succeeded as --resume-failed tells it: Exitval and Signal both written "0" */
  if (record_add(rec, (unsigned long)seq,
                 flen[6] == 1 && f[6][0] == '0' && flen[7] == 1 && f[7][0] == '0') < 0)
    return lc__error_set(-ENOMEM, "out of memory");
  return 0;
}

/* Reads a joblog (jobs_internal.h). rec must be empty; on an error it is left empty. */
int lc__joblog_parse(lc__joblog_record *rec, const char *text, size_t len, const char *path) {
  static const char header[] = LC__JOBLOG_HEADER;
  const char *p = text, *end = text + len;
  unsigned long lineno = 0;
  size_t n = 0;
  int r = 0;

  memset(rec, 0, sizeof(*rec));
  if (path == NULL)
    path = "joblog";
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t l = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
    lineno++;
    if (lineno == 1) {
      /* a header cut short is a joblog whose first write was cut short */
      int whole = l == sizeof(header) - 1 && memcmp(p, header, l) == 0;
      int cut = nl == NULL && l < sizeof(header) - 1 && memcmp(p, header, l) == 0;
      if (!whole && !cut) {
        r = lc__error_set(-EINVAL,
                          "%s line 1: not a joblog (its first line is not GNU parallel's header "
                          "Seq Host Starttime JobRuntime Send Receive Exitval Signal Command, "
                          "tab-separated)",
                          path);
        goto out;
      }
    } else if (nl == NULL) {
      break; /* the last line, torn: its job is not known to have ended */
    } else if ((r = parse_line(rec, p, l, path, lineno)) < 0) {
      goto out;
    }
    if (nl == NULL)
      break;
    p = nl + 1;
  }

  /* sorted by seq, one entry each: succeeded when any of its lines says so */
  if (rec->n > 1)
    qsort(rec->v, rec->n, sizeof(*rec->v), seen_cmp);
  for (size_t i = 0; i < rec->n; i++) {
    if (n > 0 && rec->v[n - 1].seq == rec->v[i].seq)
      rec->v[n - 1].ok |= rec->v[i].ok;
    else
      rec->v[n++] = rec->v[i];
  }
  rec->n = n;

out:
  if (r < 0)
    lc__joblog_record_free(rec);
  return r;
}

/* Whether resume skips job seq (jobs_internal.h). */
int lc__joblog_skips(const lc__joblog_record *rec, unsigned long seq, int resume) {
  size_t lo = 0, hi = rec->n;
  if (resume != 1 && resume != 2)
    return 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rec->v[mid].seq == seq)
      return resume == 1 || rec->v[mid].ok;
    if (rec->v[mid].seq < seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

void lc__joblog_record_free(lc__joblog_record *rec) {
  if (rec == NULL)
    return;
  free(rec->v);
  memset(rec, 0, sizeof(*rec));
}
