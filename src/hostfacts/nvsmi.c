/*
 * nvsmi.c - the reader of nvidia-smi's CSV (lc__nvsmi_parse).
 */
#include "hostfacts_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A value nvidia-smi prints where it has none: "[N/A]", "N/A", "[Not Supported]", ... */
static int smi_unknown(const char *s, size_t len) {
  return len == 0 || (len == 3 && memcmp(s, "N/A", 3) == 0) ||
         (len >= 2 && s[0] == '[' && s[len - 1] == ']');
}

#define SMI_FIELDS_MAX 64

/* Which field of a line holds what (-1: none), as the header names them; ncols fields a line. */
typedef struct smi_cols {
  int index, uuid, name, memory, ncols;
} smi_cols;

static const smi_cols smi_cols_default = {0, 1, 2, 3, 4};

/* Splits [line, line + len) at commas into at most SMI_FIELDS_MAX trimmed fields; -1 for more. */
static int smi_split(const char *line, size_t len, const char **f, size_t *fl) {
  int n = 0;
  const char *p = line, *end = line + len;
  for (;;) {
    const char *c = memchr(p, ',', (size_t)(end - p));
    if (n == SMI_FIELDS_MAX)
      return -1;
    f[n] = p;
    fl[n] = (size_t)((c ? c : end) - p);
    lc__trim_span(&f[n], &fl[n]);
    n++;
    if (c == NULL)
      return n;
    p = c + 1;
  }
}

static int span_is(const char *s, size_t len, const char *word) {
  return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* The header `--format=csv` prints ("index, uuid, name, memory.total [MiB]"), read into *cols;
 * 0 when the line is one, -1 when it is not. Columns other than these four are kept in place and
 * ignored, so a header of any query that has them works. */
static int smi_header(smi_cols *cols, const char *line, size_t len) {
  const char *f[SMI_FIELDS_MAX];
  size_t fl[SMI_FIELDS_MAX];
  smi_cols c = {-1, -1, -1, -1, 0};
  int n = smi_split(line, len, f, fl), known = 0;
  if (n < 0)
    return -1;
  for (int i = 0; i < n; i++) {
    if (span_is(f[i], fl[i], "index"))
      c.index = i;
    else if (span_is(f[i], fl[i], "uuid") || span_is(f[i], fl[i], "gpu_uuid"))
      c.uuid = i;
    else if (span_is(f[i], fl[i], "name") || span_is(f[i], fl[i], "gpu_name"))
      c.name = i;
    else if (fl[i] >= 12 && memcmp(f[i], "memory.total", 12) == 0 &&
             (fl[i] == 12 || f[i][12] == ' '))
      c.memory = i;
    else
      continue;
    known++;
  }
  if (known == 0)
    return -1;
  c.ncols = n;
  *cols = c;
  return 0;
}

/* One CSV line into g, its fields where cols says; -1 when it is not one. A line with more fields
 * than columns has commas in its name, which takes the extra fields. row is the line's place
 * among the GPU lines, the index when no column gives one. */
static int smi_line(lc_gpu *g, const smi_cols *cols, const char *line, size_t len, size_t row) {
  const char *f[SMI_FIELDS_MAX], *v;
  size_t fl[SMI_FIELDS_MAX], vl;
  int n = smi_split(line, len, f, fl), extra;
  long long num;
  memset(g, 0, sizeof(*g));
  if (n < cols->ncols || (n > cols->ncols && cols->name < 0))
    return -1;
  extra = n - cols->ncols;
#define SMI_AT(col) ((col) > cols->name && cols->name >= 0 ? (col) + extra : (col))
  /* index */
  if (cols->index >= 0) {
    v = f[SMI_AT(cols->index)];
    vl = fl[SMI_AT(cols->index)];
    if ((num = lc__span_number(v, vl)) < 0 || num >= LC__HOSTFACTS_MAX_GPUS)
      return -1;
    g->index = (int)num;
  } else {
    if (row >= LC__HOSTFACTS_MAX_GPUS)
      return -1;
    g->index = (int)row;
  }
  /* uuid: "GPU-...", "MIG-..." or unknown */
  if (cols->uuid >= 0) {
    v = f[SMI_AT(cols->uuid)];
    vl = fl[SMI_AT(cols->uuid)];
    if (!smi_unknown(v, vl)) {
      if (vl < 5 || (memcmp(v, "GPU-", 4) != 0 && memcmp(v, "MIG-", 4) != 0) ||
          memchr(v, ' ', vl) != NULL)
        return -1;
      lc__copy_mem(g->uuid, sizeof(g->uuid), v, vl);
    }
  }
  /* name: from its first field to the end of its last */
  if (cols->name >= 0) {
    v = f[cols->name];
    vl = (size_t)(f[cols->name + extra] + fl[cols->name + extra] - v);
    if (!smi_unknown(v, vl))
      lc__copy_mem(g->name, sizeof(g->name), v, vl);
  }
  /* memory.total in MiB, with or without its unit; unknown on unified-memory parts (GB10) */
  if (cols->memory >= 0) {
    v = f[SMI_AT(cols->memory)];
    vl = fl[SMI_AT(cols->memory)];
    if (vl > 3 && memcmp(v + vl - 3, "MiB", 3) == 0) {
      vl -= 3;
      lc__trim_span(&v, &vl);
    }
    if (!smi_unknown(v, vl)) {
      if ((num = lc__span_number(v, vl)) < 0)
        return -1;
      g->memory_bytes = (uint64_t)num * 1024u * 1024u;
    }
  }
#undef SMI_AT
  return 0;
}

int lc__nvsmi_parse(lc_hostinfo *out, const char *text, size_t len, int exit_status) {
  char first_bad[160] = "";
  size_t bad = 0, cap = 0, start = 0, rows = 0, headers = 0;
  smi_cols cols = smi_cols_default;
  lc_gpu g, *n;
  free(out->gpus);
  out->gpus = NULL;
  out->gpu_count = 0;
  lc__copy_str(out->gpu_source, sizeof(out->gpu_source), "nvidia-smi");
  out->gpu_reason[0] = '\0';
  for (size_t i = 0; i <= len; i++) {
    const char *line = text + start;
    size_t ll = i - start;
    if (i < len && text[i] != '\n')
      continue;
    start = i + 1;
    lc__trim_span(&line, &ll);
    if (ll == 0)
      continue;
    if (out->gpu_count == 0 && smi_header(&cols, line, ll) == 0) {
      headers++;
      continue;
    }
    if (smi_line(&g, &cols, line, ll, rows++) < 0) {
      if (bad++ == 0)
        lc__copy_mem(first_bad, sizeof(first_bad), line, ll);
      continue;
    }
    if (out->gpu_count == LC__HOSTFACTS_MAX_GPUS)
      continue;
    if ((n = lc__grow(out->gpus, &cap, out->gpu_count + 1, sizeof(*n), 8)) == NULL)
      return -ENOMEM;
    out->gpus = n;
    out->gpus[out->gpu_count++] = g;
  }
  if (out->gpu_count > 0 && bad > 0)
    snprintf(out->gpu_reason, sizeof(out->gpu_reason),
             "nvidia-smi: skipped %zu line(s) it could not read, the first: '%s'", bad, first_bad);
  else if (out->gpu_count == 0 && exit_status == 124)
    snprintf(out->gpu_reason, sizeof(out->gpu_reason), "nvidia-smi: no answer within %d s%s%s",
             LC__HOSTFACTS_GPU_WAIT_S, bad ? ": " : "", first_bad);
  else if (out->gpu_count == 0 && bad > 0)
    snprintf(out->gpu_reason, sizeof(out->gpu_reason), "nvidia-smi: %s (exit status %d)", first_bad,
             exit_status);
  else if (out->gpu_count == 0)
    snprintf(out->gpu_reason, sizeof(out->gpu_reason),
             "nvidia-smi lists no GPU (%s, exit status %d)",
             headers ? "only its header" : "no output", exit_status);
  if (out->gpu_count == 0)
    lc__copy_str(out->gpu_source, sizeof(out->gpu_source), "none");
  return 0;
}
