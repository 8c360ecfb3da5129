/*
 * parse.c - the parser of the script's output (lc__hostfacts_parse): marker lines, the files the
 * host sent as a file view for hostinfo.c's readers, listening ports, GPUs; and lc__cpulist_count.
 */
#include "hostfacts_text.h"
#include "hostinfo_internal.h"
#include "ports_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

long lc__cpulist_count(const char *list) {
  const char *p = list;
  long count = 0;
  if (list == NULL)
    return 0;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p == '\0' || *p == '\n')
    return 0;
  for (;;) {
    char *end;
    long a, b;
    if (*p < '0' || *p > '9')
      return 0;
    a = b = strtol(p, &end, 10);
    p = end;
    if (*p == '-') {
      if (p[1] < '0' || p[1] > '9')
        return 0;
      b = strtol(p + 1, &end, 10);
      p = end;
    }
    if (a < 0 || b < a || b - a > 1 << 20)
      return 0;
    count += b - a + 1;
    if (*p == ',') {
      p++;
      continue;
    }
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
      p++;
    return *p == '\0' ? count : 0;
  }
}

/* ---- the files the host sent, as a file view ----------------------------------------------- */

typedef struct vfile {
  char *path;
  lc__buf text;
  int dir;
} vfile;

typedef struct vfs {
  vfile *v;
  size_t n, cap;
} vfs;

static vfile *vfs_find(const vfs *fs, const char *path, int dir) {
  for (size_t i = fs->n; i-- > 0;)
    if (fs->v[i].dir == dir && strcmp(fs->v[i].path, path) == 0)
      return &fs->v[i];
  return NULL;
}

/* The entry for path, emptied (a file sent twice keeps its last text). */
static int vfs_add(vfs *fs, const char *path, size_t len, int dir, vfile **out) {
  char *p = lc__strndup(path, len);
  vfile *f, *nv;
  if (p == NULL)
    return -ENOMEM;
  if ((f = vfs_find(fs, p, dir)) != NULL) {
    free(p);
    f->text.len = 0;
    *out = f;
    return 0;
  }
  if ((nv = lc__grow(fs->v, &fs->cap, fs->n + 1, sizeof(*nv), 16)) == NULL) {
    free(p);
    return -ENOMEM;
  }
  fs->v = nv;
  f = &fs->v[fs->n++];
  memset(f, 0, sizeof(*f));
  f->path = p;
  f->dir = dir;
  *out = f;
  return 0;
}

static void vfs_free(vfs *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    free(fs->v[i].path);
    lc__buf_free(&fs->v[i].text);
  }
  free(fs->v);
  memset(fs, 0, sizeof(*fs));
}

static char *vfs_read(const lc__fsview *view, const char *path, size_t max) {
  const vfile *f = vfs_find(view->data, path, 0);
  if (f == NULL)
    return NULL;
  return lc__strndup(f->text.data ? f->text.data : "", f->text.len < max ? f->text.len : max);
}

static int vfs_is_dir(const lc__fsview *view, const char *path) {
  return vfs_find(view->data, path, 1) != NULL;
}

static int vfs_exists(const lc__fsview *view, const char *path) {
  return vfs_find(view->data, path, 0) != NULL || vfs_find(view->data, path, 1) != NULL;
}

/* ---- the script's output ------------------------------------------------------------------- */

typedef enum section { S_NONE, S_FILE, S_TCP, S_GPU_PROBE, S_GPU_SMI } section;

typedef struct facts {
  vfs fs;
  lc__portscan *scan;
  int began, ended;
  char uname[4][256];
  int have_uname;
  long online, nproc, allowed;
  section sec;
  vfile *file;
  lc__buf probe, smi;
  int probe_ran, smi_ran, gpu_none;
  int probe_exit, smi_exit;
} facts;

/* Whether [line, line + len) is the marker TAG (followed by the end or a space); *value is what
 * follows the space. */
static int tag_is(const char *line, size_t len, const char *tag, const char **value, size_t *vlen) {
  size_t tl = strlen(tag);
  if (len < tl || memcmp(line, tag, tl) != 0 || (len > tl && line[tl] != ' '))
    return 0;
  *value = len > tl ? line + tl + 1 : line + len;
  *vlen = len > tl ? len - tl - 1 : 0;
  return 1;
}

static long span_long(const char *s, size_t len) {
  long long v;
  lc__trim_span(&s, &len);
  v = lc__span_number(s, len);
  return v < 0 || v > LONG_MAX ? 0 : (long)v;
}

static long span_cpulist(const char *s, size_t len) {
  char tmp[4096];
  if (len >= sizeof(tmp))
    return 0;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  return lc__cpulist_count(tmp);
}

/* A marker line (without "@@LCF "). */
static int facts_marker(facts *ft, const char *line, size_t len, lc_hostinfo *out) {
  const char *v;
  size_t vl;
  ft->sec = S_NONE;
  ft->file = NULL;
  if (tag_is(line, len, "end", &v, &vl)) {
    ft->ended = 1;
  } else if (tag_is(line, len, "uname", &v, &vl)) {
    /* "SYSNAME NODENAME RELEASE MACHINE" */
    size_t k = 0;
    while (vl > 0 && k < 4) {
      const char *sp;
      size_t fl;
      lc__trim_span(&v, &vl);
      if (vl == 0)
        break;
      sp = memchr(v, ' ', vl);
      fl = sp ? (size_t)(sp - v) : vl;
      lc__copy_mem(ft->uname[k++], sizeof(ft->uname[0]), v, fl);
      v += fl;
      vl -= fl;
    }
    ft->have_uname = k == 4;
  } else if (tag_is(line, len, "online", &v, &vl)) {
    ft->online = span_cpulist(v, vl);
  } else if (tag_is(line, len, "nproc", &v, &vl)) {
    ft->nproc = span_long(v, vl);
  } else if (tag_is(line, len, "allowed", &v, &vl)) {
    ft->allowed = span_cpulist(v, vl);
  } else if (tag_is(line, len, "file", &v, &vl) || tag_is(line, len, "dir", &v, &vl)) {
    int dir = line[0] == 'd';
    vfile *f;
    int r;
    if (vl == 0)
      return 0;
    if ((r = vfs_add(&ft->fs, v, vl, dir, &f)) < 0)
      return r;
    if (!dir) {
      ft->sec = S_FILE;
      ft->file = f;
    }
  } else if (tag_is(line, len, "exe", &v, &vl)) {
    const char *sp = memchr(v, ' ', vl);
    long long i = lc__span_number(v, sp ? (size_t)(sp - v) : vl);
    const char *path = sp ? sp + 1 : v + vl;
    size_t pl = sp ? vl - (size_t)(sp + 1 - v) : 0;
    lc__trim_span(&path, &pl);
    if (i >= 0 && (size_t)i < out->executable_count && pl > 0 && out->executable_paths[i] == NULL &&
        (out->executable_paths[i] = lc__strndup(path, pl)) == NULL)
      return -ENOMEM;
  } else if (tag_is(line, len, "tcp", &v, &vl)) {
    ft->sec = S_TCP;
  } else if (tag_is(line, len, "gpu", &v, &vl)) {
    if (vl == 5 && memcmp(v, "probe", 5) == 0) {
      ft->sec = S_GPU_PROBE;
      ft->probe_ran = 1;
      ft->probe.len = 0;
    } else if (vl == 10 && memcmp(v, "nvidia-smi", 10) == 0) {
      ft->sec = S_GPU_SMI;
      ft->smi_ran = 1;
      ft->smi.len = 0;
    } else if (vl == 4 && memcmp(v, "none", 4) == 0) {
      ft->gpu_none = 1;
    }
  } else if (tag_is(line, len, "gpu_exit", &v, &vl)) {
    /* belongs to the GPU section just before it */
    long code = span_long(v, vl);
    if (ft->smi_ran)
      ft->smi_exit = (int)code;
    else
      ft->probe_exit = (int)code;
  }
  /* unknown tags (a newer script) are skipped, with their content */
  return 0;
}

static int facts_content(facts *ft, const char *line, size_t len) {
  int r = 0;
  switch (ft->sec) {
  case S_FILE:
    if ((r = lc__buf_append(&ft->file->text, line, len)) == 0)
      r = lc__buf_append(&ft->file->text, "\n", 1);
    break;
  case S_TCP:
    lc__portscan_line(ft->scan, line, len);
    break;
  case S_GPU_PROBE:
  case S_GPU_SMI: {
    lc__buf *b = ft->sec == S_GPU_PROBE ? &ft->probe : &ft->smi;
    if ((r = lc__buf_append(b, line, len)) == 0)
      r = lc__buf_append(b, "\n", 1);
    break;
  }
  case S_NONE:
    break;
  }
  return r;
}

/* The first non-blank line of b, for a reason. */
static void first_line(char *dst, size_t n, const lc__buf *b) {
  const char *p = b->data ? b->data : "", *end = p + b->len;
  dst[0] = '\0';
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p)), *s = p;
    size_t l = (size_t)((eol ? eol : end) - p);
    lc__trim_span(&s, &l);
    if (l > 0) {
      lc__copy_mem(dst, n, s, l);
      return;
    }
    p = eol ? eol + 1 : end;
  }
}

/* The GPUs: the probe's JSON when it gave one, else nvidia-smi's CSV, else none with a reason. */
static int facts_gpus(facts *ft, lc_hostinfo *out) {
  char why[sizeof(out->gpu_reason)] = "", line[160];
  int r;
  if (ft->probe_ran) {
    if ((r = lc__probe_json_parse(out, ft->probe.data ? ft->probe.data : "", ft->probe.len)) == 0)
      return 0;
    if (r == -ENOMEM)
      return r;
    first_line(line, sizeof(line), &ft->probe);
    if (ft->probe_exit == 124)
      snprintf(why, sizeof(why), "lazyclusterctl probe gave no answer within %d s",
               LC__HOSTFACTS_GPU_WAIT_S);
    else
      snprintf(why, sizeof(why), "lazyclusterctl probe failed (exit status %d)%s%s", ft->probe_exit,
               line[0] ? ": " : "", line);
  }
  if (ft->smi_ran) {
    if ((r = lc__nvsmi_parse(out, ft->smi.data ? ft->smi.data : "", ft->smi.len, ft->smi_exit)) < 0)
      return r;
    if (why[0] && out->gpu_count > 0 && out->gpu_reason[0] == '\0')
      snprintf(out->gpu_reason, sizeof(out->gpu_reason), "listed by nvidia-smi; %.220s", why);
    else if (why[0] && out->gpu_count == 0) {
      char smi[sizeof(out->gpu_reason)];
      lc__copy_str(smi, sizeof(smi), out->gpu_reason);
      snprintf(out->gpu_reason, sizeof(out->gpu_reason), "%.120s; %.130s", why, smi);
    }
    return 0;
  }
  lc__copy_str(out->gpu_source, sizeof(out->gpu_source), "none");
  if (why[0])
    snprintf(out->gpu_reason, sizeof(out->gpu_reason), "%.200s; nvidia-smi is not on the PATH",
             why);
  else
    lc__copy_str(out->gpu_reason, sizeof(out->gpu_reason),
                 "neither lazyclusterctl nor nvidia-smi is on the host's PATH");
  return 0;
}

int lc__hostfacts_parse(lc_hostinfo *out, const char *text, size_t len,
                        const char *const *executables, lc__err *err) {
  facts ft;
  lc__fsview view;
  size_t start = 0, nexe = 0;
  int r = -ENOMEM;
  memset(&ft, 0, sizeof(ft));
  if ((ft.scan = lc__calloc(1, sizeof(*ft.scan))) == NULL)
    goto out;
  while (executables && executables[nexe])
    nexe++;
  if (nexe > 0) {
    if ((out->executables = lc__calloc(nexe, sizeof(char *))) == NULL ||
        (out->executable_paths = lc__calloc(nexe, sizeof(char *))) == NULL)
      goto out;
    out->executable_count = nexe;
    for (size_t i = 0; i < nexe; i++)
      if ((out->executables[i] = lc__strdup(executables[i])) == NULL)
        goto out;
  }

  for (size_t i = 0; i <= len && !ft.ended; i++) {
    const char *line = text + start;
    size_t ll = i - start;
    if (i < len && text[i] != '\n')
      continue;
    start = i + 1;
    if (ll >= sizeof(LC__HOSTFACTS_MARK) - 1 &&
        memcmp(line, LC__HOSTFACTS_MARK, sizeof(LC__HOSTFACTS_MARK) - 1) == 0 &&
        (ll == sizeof(LC__HOSTFACTS_MARK) - 1 || line[sizeof(LC__HOSTFACTS_MARK) - 1] == ' ')) {
      const char *tag = line + sizeof(LC__HOSTFACTS_MARK), *v;
      size_t tl = ll > sizeof(LC__HOSTFACTS_MARK) - 1 ? ll - sizeof(LC__HOSTFACTS_MARK) : 0, vl;
      if (!ft.began) {
        ft.began = tag_is(tag, tl, "begin", &v, &vl);
        continue;
      }
      if ((r = facts_marker(&ft, tag, tl, out)) < 0)
        goto out;
    } else if (ft.began && (r = facts_content(&ft, line, ll)) < 0) {
      goto out;
    }
  }
  if (!ft.began) {
    r = lc__err_set(err, LC_EREMOTE,
                    "the host facts script printed nothing of its own (%zu "
                    "bytes of other output); is /bin/sh a POSIX shell?",
                    len);
    goto out;
  }
  if (!ft.ended) {
    r = lc__err_set(err, LC_EREMOTE, "the host facts output ends early, after %zu bytes", len);
    goto out;
  }

  view.read = vfs_read;
  view.is_dir = vfs_is_dir;
  view.exists = vfs_exists;
  view.root = NULL;
  view.data = &ft.fs;
  if (ft.have_uname) {
    lc__copy_str(out->hostname, sizeof(out->hostname), ft.uname[1]);
    lc__copy_str(out->kernel, sizeof(out->kernel), ft.uname[2]);
    lc__copy_str(out->arch, sizeof(out->arch), ft.uname[3]);
  }
  if (lc__hostinfo_os_release_in(&view, out->os, sizeof(out->os)) < 0)
    lc__copy_str(out->os, sizeof(out->os), ft.have_uname ? ft.uname[0] : "unknown");
  out->cores = lc__hostinfo_cores(ft.online > 0 ? ft.online : ft.nproc, ft.allowed,
                                  lc__cgroup_cpu_limit_in(&view));
  out->memory_bytes =
      lc__hostinfo_memory(lc__hostinfo_memtotal_in(&view), lc__cgroup_memory_limit_in(&view));
  if (ft.scan->has_uid)
    out->loopback = ft.scan->loopback;
  if (ft.scan->headers > 0 && ((r = lc__portscan_to_ports(&out->listening, ft.scan)) < 0 ||
                               (r = lc__portscan_held_to_ports(&out->held, ft.scan)) < 0))
    goto out;
  if ((r = facts_gpus(&ft, out)) < 0)
    goto out;
  out->gpus_detected = out->gpu_count;
  r = 0;
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory reading host facts");
  vfs_free(&ft.fs);
  lc__buf_free(&ft.probe);
  lc__buf_free(&ft.smi);
  lc__portscan_free(ft.scan);
  return r;
}
