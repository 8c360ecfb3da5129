/*
 * hostfacts.c - a host's facts in one round trip: the script, the parser of its output (with
 * hostinfo.c's readers running on the files the host sent), nvidia-smi's CSV, the probe's JSON,
 * and lc_runtime_hostinfo, which runs the script on one runtime.
 */
#include "hostfacts.h"

#include "hostinfo_internal.h"
#include "ports_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARK "@@LCF"
#define STR_(x) #x
#define STR(x) STR_(x)
#define MAX_GPUS 1024                         /* more than any machine has */
#define MAX_OUTPUT ((size_t)64 * 1024 * 1024) /* a host's /proc/net/tcp can be large, not this */
#define ERR_TAIL_MAX 512

/* ---- the script ---------------------------------------------------------------------------- */

/*
 * Marker lines "@@LCF TAG VALUE" carry single values; "file PATH", "tcp" and "gpu KIND" are
 * followed by raw content up to the next marker. Only shell builtins read files (the shell's own
 * /proc/self is the cgroup of the command), so the script forks for uname, the listing of
 * listening ports (LC__LISTING_COMMAND) and the GPU tools only.
 *
 * The cgroup part mirrors what hostinfo.c reads: /proc/self/cgroup, the cgroup lines of
 * /proc/self/mountinfo, and for each v2 hierarchy and each v1 hierarchy with the cpu or memory
 * controller, the cgroup's directory and its parents up to the mount point (when one exists) with
 * the limit files found there. Where mountinfo names no hierarchy for a controller, the usual
 * places under /sys/fs/cgroup are walked, as hostinfo.c assumes them.
 */
static const char script_head[] =
    "m() { printf '" MARK " %s\\n' \"$*\"; }\n"
    "c() { while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done; }\n"
    "f() { [ -r \"$1\" ] && { m file \"$1\"; c <\"$1\"; }; }\n"
    /* w MOUNTROOT MOUNTPOINT CGROUPPATH FILES: the cgroup's directory and its parents */
    "w() {\n"
    "  wp=$2; wx=$3\n"
    "  case $1 in /) ;; *) case $wx in \"$1\"|\"$1\"/*) wx=${wx#\"$1\"} ;; *) wx= ;; esac ;; esac\n"
    "  case $wx in */..*) wx= ;; esac\n"
    "  wx=$wp${wx%/}\n"
    "  while [ -n \"$wx\" ]; do\n"
    "    if [ -d \"$wx\" ]; then m dir \"$wx\"; for wn in $4; do f \"$wx/$wn\"; done; fi\n"
    "    [ \"${#wx}\" -le \"${#wp}\" ] && break\n"
    "    wx=${wx%/*}\n"
    "  done\n"
    "}\n"
    /* v CONTROLLER(0: v2) MOUNTROOT MOUNTPOINT FILES: w for this process's cgroup there */
    "v() {\n"
    "  while IFS=: read -r vi vn vx; do\n"
    "    case $1 in\n"
    "      0) { [ \"$vi\" = 0 ] && [ -z \"$vn\" ]; } || continue ;;\n"
    "      *) case \",$vn,\" in *\",$1,\"*) ;; *) continue ;; esac ;;\n"
    "    esac\n"
    "    w \"$2\" \"$3\" \"$vx\" \"$4\"\n"
    "  done </proc/self/cgroup\n"
    "}\n"
    "m begin 1\n"
    "printf '" MARK " uname '; uname -snrm 2>/dev/null || echo\n"
    "if [ -r /sys/devices/system/cpu/online ] && read -r a </sys/devices/system/cpu/online; then\n"
    "  m online \"$a\"\n"
    "else\n"
    "  m nproc \"$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)\"\n"
    "fi\n"
    "[ -r /proc/self/status ] && while read -r a b; do\n"
    "  [ \"$a\" = Cpus_allowed_list: ] && { m allowed \"$b\"; break; }\n"
    "done </proc/self/status\n"
    "[ -r /proc/meminfo ] && while read -r a b u; do\n"
    "  [ \"$a\" = MemTotal: ] && { m file /proc/meminfo; printf '%s %s %s\\n' \"$a\" \"$b\" "
    "\"$u\"; "
    "break; }\n"
    "done </proc/meminfo\n"
    "if [ -r /etc/os-release ]; then f /etc/os-release; else f /usr/lib/os-release; fi\n"
    "if [ -r /proc/self/cgroup ]; then\n"
    "  f /proc/self/cgroup\n"
    "  m file /proc/self/mountinfo\n"
    "  [ -r /proc/self/mountinfo ] && while IFS= read -r a; do\n"
    "    case $a in *' - cgroup '*|*' - cgroup2 '*) printf '%s\\n' \"$a\" ;; esac\n"
    "  done </proc/self/mountinfo\n"
    "  k2=; kc=; km=\n"
    "  [ -r /proc/self/mountinfo ] && while read -r a b d r p o; do\n"
    "    t=${o#* - }; [ \"$t\" = \"$o\" ] && continue\n"
    "    y=${t%% *}; s=${t##* }\n"
    "    case $p in *\\\\*) p=$(printf '%b' \"$p\") ;; esac\n"
    "    case $r in *\\\\*) r=$(printf '%b' \"$r\") ;; esac\n"
    "    case $y in\n"
    "      cgroup2) k2=1; v 0 \"$r\" \"$p\" 'cpu.max memory.max' ;;\n"
    "      cgroup)\n"
    "        case \",$s,\" in *,cpu,*) kc=1; v cpu \"$r\" \"$p\" "
    "'cpu.cfs_quota_us cpu.cfs_period_us' ;; esac\n"
    "        case \",$s,\" in *,memory,*) km=1; v memory \"$r\" \"$p\" memory.limit_in_bytes ;; "
    "esac ;;\n"
    "    esac\n"
    "  done </proc/self/mountinfo\n"
    "  if [ -z \"$k2\" ]; then\n"
    "    f /sys/fs/cgroup/cgroup.controllers\n"
    "    if [ -e /sys/fs/cgroup/cgroup.controllers ]; then "
    "v 0 / /sys/fs/cgroup 'cpu.max memory.max'\n"
    "    else v 0 / /sys/fs/cgroup/unified 'cpu.max memory.max'; fi\n"
    "  fi\n"
    "  if [ -z \"$kc\" ]; then\n"
    "    if [ -d /sys/fs/cgroup/cpu ]; then "
    "v cpu / /sys/fs/cgroup/cpu 'cpu.cfs_quota_us cpu.cfs_period_us'\n"
    "    else v cpu / /sys/fs/cgroup/cpu,cpuacct 'cpu.cfs_quota_us cpu.cfs_period_us'; fi\n"
    "  fi\n"
    "  [ -z \"$km\" ] && v memory / /sys/fs/cgroup/memory memory.limit_in_bytes\n"
    "fi\n";

static const char script_tail[] =
    "m tcp\n" LC__LISTING_COMMAND "\n"
    "t=; command -v timeout >/dev/null 2>&1 && t='timeout " STR(
        LC__HOSTFACTS_GPU_WAIT_S) "'\n"
                                  "g=0\n"
                                  "if command -v lazyclusterctl >/dev/null 2>&1; then\n"
                                  "  m gpu probe\n"
                                  "  o=$($t lazyclusterctl probe --json </dev/null 2>&1); s=$?\n"
                                  "  printf '%s\\n' \"$o\"; m gpu_exit \"$s\"\n"
                                  "  g=1; [ \"$s\" = 0 ] && g=2\n"
                                  "fi\n"
                                  "if [ \"$g\" != 2 ] && command -v nvidia-smi >/dev/null 2>&1; "
                                  "then\n"
                                  "  m gpu nvidia-smi\n"
                                  "  o=$($t nvidia-smi --query-gpu=index,uuid,name,memory.total "
                                  "--format=csv "
                                  "</dev/null 2>&1); s=$?\n"
                                  "  printf '%s\\n' \"$o\"; m gpu_exit \"$s\"\n"
                                  "  g=2\n"
                                  "fi\n"
                                  "[ \"$g\" = 0 ] && m gpu none\n"
                                  "m end\n";

int lc__hostfacts_command(lc__buf *out, const char *const *executables) {
  int r;
  if ((r = lc__buf_append(out, script_head, sizeof(script_head) - 1)) < 0)
    return r;
  for (size_t i = 0; executables && executables[i]; i++) {
    if ((r = lc__buf_printf(out, "printf '" MARK " exe %zu '; command -v -- ", i)) < 0 ||
        (r = lc__buf_shell_quote(out, executables[i])) < 0 ||
        (r = lc__buf_puts(out, " 2>/dev/null || echo\n")) < 0)
      return r;
  }
  return lc__buf_append(out, script_tail, sizeof(script_tail) - 1);
}

/* ---- small text helpers -------------------------------------------------------------------- */

static void copy_str(char *dst, size_t n, const char *src) {
  size_t l = strnlen(src, n - 1);
  memcpy(dst, src, l);
  dst[l] = '\0';
}

static void copy_mem(char *dst, size_t n, const char *src, size_t len) {
  if (len > n - 1)
    len = n - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Trims blanks from both ends of [*s, *s + *len). */
static void trim_span(const char **s, size_t *len) {
  while (*len > 0 && is_blank(**s)) {
    (*s)++;
    (*len)--;
  }
  while (*len > 0 && is_blank((*s)[*len - 1]))
    (*len)--;
}

/* Parses all of [s, s + len) as a decimal number; -1 when it is not one (or too large). */
static long long span_number(const char *s, size_t len) { return lc__decimal(s, len, 18); }

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

/* ---- nvidia-smi ---------------------------------------------------------------------------- */

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
    trim_span(&f[n], &fl[n]);
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
    if ((num = span_number(v, vl)) < 0 || num >= MAX_GPUS)
      return -1;
    g->index = (int)num;
  } else {
    if (row >= MAX_GPUS)
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
      copy_mem(g->uuid, sizeof(g->uuid), v, vl);
    }
  }
  /* name: from its first field to the end of its last */
  if (cols->name >= 0) {
    v = f[cols->name];
    vl = (size_t)(f[cols->name + extra] + fl[cols->name + extra] - v);
    if (!smi_unknown(v, vl))
      copy_mem(g->name, sizeof(g->name), v, vl);
  }
  /* memory.total in MiB, with or without its unit; unknown on unified-memory parts (GB10) */
  if (cols->memory >= 0) {
    v = f[SMI_AT(cols->memory)];
    vl = fl[SMI_AT(cols->memory)];
    if (vl > 3 && memcmp(v + vl - 3, "MiB", 3) == 0) {
      vl -= 3;
      trim_span(&v, &vl);
    }
    if (!smi_unknown(v, vl)) {
      if ((num = span_number(v, vl)) < 0)
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
  lc_gpu g;
  free(out->gpus);
  out->gpus = NULL;
  out->gpu_count = 0;
  copy_str(out->gpu_source, sizeof(out->gpu_source), "nvidia-smi");
  out->gpu_reason[0] = '\0';
  for (size_t i = 0; i <= len; i++) {
    const char *line = text + start;
    size_t ll = i - start;
    if (i < len && text[i] != '\n')
      continue;
    start = i + 1;
    trim_span(&line, &ll);
    if (ll == 0)
      continue;
    if (out->gpu_count == 0 && smi_header(&cols, line, ll) == 0) {
      headers++;
      continue;
    }
    if (smi_line(&g, &cols, line, ll, rows++) < 0) {
      if (bad++ == 0)
        copy_mem(first_bad, sizeof(first_bad), line, ll);
      continue;
    }
    if (out->gpu_count == MAX_GPUS)
      continue;
    if (out->gpu_count == cap) {
      size_t ncap = cap ? cap * 2 : 8;
      lc_gpu *n = lc__realloc(out->gpus, ncap * sizeof(*n));
      if (n == NULL)
        return -ENOMEM;
      out->gpus = n;
      cap = ncap;
    }
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
    copy_str(out->gpu_source, sizeof(out->gpu_source), "none");
  return 0;
}

/* ---- the probe's JSON ---------------------------------------------------------------------- */

typedef struct jin {
  const char *p, *end;
  int depth;
} jin;

#define JSON_DEPTH_MAX 32

static void j_ws(jin *j) {
  while (j->p < j->end && is_blank(*j->p))
    j->p++;
}

static int j_peek(jin *j) {
  j_ws(j);
  return j->p < j->end ? (unsigned char)*j->p : -1;
}

static int j_eat(jin *j, char c) {
  if (j_peek(j) != (unsigned char)c)
    return -EINVAL;
  j->p++;
  return 0;
}

static int hex4(const char *p, const char *end, unsigned *out) {
  unsigned v = 0;
  if (end - p < 4)
    return -EINVAL;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -EINVAL;
  }
  *out = v;
  return 0;
}

/* Appends one byte to buf[n] at *w, dropping what does not fit. */
static void put(char *buf, size_t n, size_t *w, char c) {
  if (buf && *w + 1 < n)
    buf[(*w)++] = c;
}

static void put_utf8(char *buf, size_t n, size_t *w, unsigned cp) {
  if (cp < 0x80) {
    put(buf, n, w, (char)cp);
  } else if (cp < 0x800) {
    put(buf, n, w, (char)(0xc0 | (cp >> 6)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    put(buf, n, w, (char)(0xe0 | (cp >> 12)));
    put(buf, n, w, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  } else {
    put(buf, n, w, (char)(0xf0 | (cp >> 18)));
    put(buf, n, w, (char)(0x80 | ((cp >> 12) & 0x3f)));
    put(buf, n, w, (char)(0x80 | ((cp >> 6) & 0x3f)));
    put(buf, n, w, (char)(0x80 | (cp & 0x3f)));
  }
}

/* A JSON string into buf[n] (cut to fit; NULL: skipped). */
static int j_string(jin *j, char *buf, size_t n) {
  size_t w = 0;
  if (j_eat(j, '"') < 0)
    return -EINVAL;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p++;
    unsigned cp, lo;
    if (c < 0x20)
      return -EINVAL;
    if (c != '\\') {
      put(buf, n, &w, (char)c);
      continue;
    }
    if (j->p >= j->end)
      return -EINVAL;
    switch (*j->p++) {
    case '"':
      put(buf, n, &w, '"');
      break;
    case '\\':
      put(buf, n, &w, '\\');
      break;
    case '/':
      put(buf, n, &w, '/');
      break;
    case 'b':
      put(buf, n, &w, '\b');
      break;
    case 'f':
      put(buf, n, &w, '\f');
      break;
    case 'n':
      put(buf, n, &w, '\n');
      break;
    case 'r':
      put(buf, n, &w, '\r');
      break;
    case 't':
      put(buf, n, &w, '\t');
      break;
    case 'u':
      if (hex4(j->p, j->end, &cp) < 0)
        return -EINVAL;
      j->p += 4;
      if (cp >= 0xd800 && cp <= 0xdbff && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
          hex4(j->p + 2, j->end, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        j->p += 6;
      } else if (cp >= 0xd800 && cp <= 0xdfff) {
        cp = 0xfffd;
      }
      put_utf8(buf, n, &w, cp);
      break;
    default:
      return -EINVAL;
    }
  }
  if (j->p >= j->end)
    return -EINVAL;
  j->p++;
  if (buf && n > 0)
    buf[w] = '\0';
  return 0;
}

/* A JSON number; *u holds it when it is a non-negative integer below 2^63 (*is_u set). */
static int j_number(jin *j, uint64_t *u, int *is_u) {
  int digits = 0, neg = 0, frac = 0;
  uint64_t v = 0;
  j_ws(j);
  if (j->p < j->end && *j->p == '-') {
    neg = 1;
    j->p++;
  }
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (v < (UINT64_C(1) << 59))
      v = v * 10 + (uint64_t)(*j->p - '0');
    else
      frac = 1; /* too large to keep */
    j->p++;
    digits++;
  }
  if (digits == 0)
    return -EINVAL;
  if (j->p < j->end && *j->p == '.') {
    frac = 1;
    j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return -EINVAL;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    frac = 1;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return -EINVAL;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  *is_u = !neg && !frac;
  *u = v;
  return 0;
}

static int j_literal(jin *j, const char *lit) {
  size_t l = strlen(lit);
  j_ws(j);
  if ((size_t)(j->end - j->p) < l || memcmp(j->p, lit, l) != 0)
    return -EINVAL;
  j->p += l;
  return 0;
}

static int j_skip(jin *j);

/* Calls member(key) for each member of an object; member consumes the value. */
typedef int (*j_member_fn)(jin *j, const char *key, void *arg);

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_object(jin *j, j_member_fn member, void *arg) {
  int r;
  if (++j->depth > JSON_DEPTH_MAX || j_eat(j, '{') < 0)
    return -EINVAL;
  if (j_peek(j) == '}') {
    j->p++;
    j->depth--;
    return 0;
  }
  for (;;) {
    char key[64];
    if ((r = j_string(j, key, sizeof(key))) < 0 || (r = j_eat(j, ':')) < 0 ||
        (r = member ? member(j, key, arg) : j_skip(j)) < 0)
      return r;
    if (j_peek(j) == ',') {
      j->p++;
      continue;
    }
    if (j_eat(j, '}') < 0)
      return -EINVAL;
    j->depth--;
    return 0;
  }
}

/* Calls element(index) for each element of an array; element consumes the value. */
typedef int (*j_element_fn)(jin *j, size_t i, void *arg);

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_array(jin *j, j_element_fn element, void *arg) {
  int r;
  if (++j->depth > JSON_DEPTH_MAX || j_eat(j, '[') < 0)
    return -EINVAL;
  if (j_peek(j) == ']') {
    j->p++;
    j->depth--;
    return 0;
  }
  for (size_t i = 0;; i++) {
    if ((r = element ? element(j, i, arg) : j_skip(j)) < 0)
      return r;
    if (j_peek(j) == ',') {
      j->p++;
      continue;
    }
    if (j_eat(j, ']') < 0)
      return -EINVAL;
    j->depth--;
    return 0;
  }
}

/* NOLINTNEXTLINE(misc-no-recursion): JSON_DEPTH_MAX bounds the depth */
static int j_skip(jin *j) {
  uint64_t u;
  int is_u;
  switch (j_peek(j)) {
  case '{':
    return j_object(j, NULL, NULL);
  case '[':
    return j_array(j, NULL, NULL);
  case '"':
    return j_string(j, NULL, 0);
  case 't':
    return j_literal(j, "true");
  case 'f':
    return j_literal(j, "false");
  case 'n':
    return j_literal(j, "null");
  default:
    return j_number(j, &u, &is_u);
  }
}

static int j_uint(jin *j, uint64_t *out) {
  int is_u;
  int r = j_number(j, out, &is_u);
  return r < 0 ? r : is_u ? 0 : -EINVAL;
}

static int gpu_member(jin *j, const char *key, void *arg) {
  lc_gpu *g = arg;
  uint64_t v;
  if (strcmp(key, "index") == 0) {
    if (j_uint(j, &v) < 0 || v >= MAX_GPUS)
      return -EINVAL;
    g->index = (int)v;
    return 0;
  }
  if (strcmp(key, "uuid") == 0)
    return j_string(j, g->uuid, sizeof(g->uuid));
  if (strcmp(key, "name") == 0)
    return j_string(j, g->name, sizeof(g->name));
  if (strcmp(key, "memory_bytes") == 0)
    return j_uint(j, &g->memory_bytes);
  return j_skip(j);
}

typedef struct probe_state {
  lc_hostinfo *info;
  size_t cap;
  int have_gpus, have_source;
} probe_state;

static int gpu_element(jin *j, size_t i, void *arg) {
  probe_state *ps = arg;
  lc_hostinfo *info = ps->info;
  lc_gpu g;
  int r;
  memset(&g, 0, sizeof(g));
  g.index = (int)(i < MAX_GPUS ? i : 0);
  if ((r = j_object(j, gpu_member, &g)) < 0)
    return r;
  if (info->gpu_count == MAX_GPUS)
    return 0;
  if (info->gpu_count == ps->cap) {
    size_t ncap = ps->cap ? ps->cap * 2 : 8;
    lc_gpu *n = lc__realloc(info->gpus, ncap * sizeof(*n));
    if (n == NULL)
      return -ENOMEM;
    info->gpus = n;
    ps->cap = ncap;
  }
  info->gpus[info->gpu_count++] = g;
  return 0;
}

static int probe_member(jin *j, const char *key, void *arg) {
  probe_state *ps = arg;
  if (strcmp(key, "gpus") == 0) {
    ps->have_gpus = 1;
    return j_array(j, gpu_element, ps);
  }
  if (strcmp(key, "gpu_source") == 0) {
    ps->have_source = 1;
    return j_string(j, ps->info->gpu_source, sizeof(ps->info->gpu_source));
  }
  if (strcmp(key, "gpu_reason") == 0)
    return j_string(j, ps->info->gpu_reason, sizeof(ps->info->gpu_reason));
  return j_skip(j);
}

int lc__probe_json_parse(lc_hostinfo *out, const char *text, size_t len) {
  const char *line = NULL, *p = text, *end = text + len;
  probe_state ps = {out, 0, 0, 0};
  jin j;
  int r;
  while (p < end && line == NULL) {
    const char *eol = memchr(p, '\n', (size_t)(end - p)), *s = p;
    while (s < (eol ? eol : end) && is_blank(*s))
      s++;
    if (s < end && *s == '{')
      line = s;
    p = eol ? eol + 1 : end;
  }
  free(out->gpus);
  out->gpus = NULL;
  out->gpu_count = 0;
  out->gpu_source[0] = out->gpu_reason[0] = '\0';
  if (line == NULL)
    return -EINVAL;
  j.p = line;
  j.end = memchr(line, '\n', (size_t)(end - line));
  if (j.end == NULL)
    j.end = end;
  j.depth = 0;
  if ((r = j_object(&j, probe_member, &ps)) == 0 && (!ps.have_gpus || !ps.have_source))
    r = -EINVAL;
  if (r == 0 && j_peek(&j) != -1)
    r = -EINVAL;
  if (r < 0) {
    free(out->gpus);
    out->gpus = NULL;
    out->gpu_count = 0;
    out->gpu_source[0] = out->gpu_reason[0] = '\0';
  }
  return r;
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
  vfile *f;
  if (p == NULL)
    return -ENOMEM;
  if ((f = vfs_find(fs, p, dir)) != NULL) {
    free(p);
    f->text.len = 0;
    *out = f;
    return 0;
  }
  if (fs->n == fs->cap) {
    size_t ncap = fs->cap ? fs->cap * 2 : 16;
    vfile *nv = lc__realloc(fs->v, ncap * sizeof(*nv));
    if (nv == NULL) {
      free(p);
      return -ENOMEM;
    }
    fs->v = nv;
    fs->cap = ncap;
  }
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
  trim_span(&s, &len);
  v = span_number(s, len);
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
      trim_span(&v, &vl);
      if (vl == 0)
        break;
      sp = memchr(v, ' ', vl);
      fl = sp ? (size_t)(sp - v) : vl;
      copy_mem(ft->uname[k++], sizeof(ft->uname[0]), v, fl);
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
    long long i = span_number(v, sp ? (size_t)(sp - v) : vl);
    const char *path = sp ? sp + 1 : v + vl;
    size_t pl = sp ? vl - (size_t)(sp + 1 - v) : 0;
    trim_span(&path, &pl);
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
    trim_span(&s, &l);
    if (l > 0) {
      copy_mem(dst, n, s, l);
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
      copy_str(smi, sizeof(smi), out->gpu_reason);
      snprintf(out->gpu_reason, sizeof(out->gpu_reason), "%.120s; %.130s", why, smi);
    }
    return 0;
  }
  copy_str(out->gpu_source, sizeof(out->gpu_source), "none");
  if (why[0])
    snprintf(out->gpu_reason, sizeof(out->gpu_reason), "%.200s; nvidia-smi is not on the PATH",
             why);
  else
    copy_str(out->gpu_reason, sizeof(out->gpu_reason),
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
    if (ll >= sizeof(MARK) - 1 && memcmp(line, MARK, sizeof(MARK) - 1) == 0 &&
        (ll == sizeof(MARK) - 1 || line[sizeof(MARK) - 1] == ' ')) {
      const char *tag = line + sizeof(MARK), *v;
      size_t tl = ll > sizeof(MARK) - 1 ? ll - sizeof(MARK) : 0, vl;
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
    copy_str(out->hostname, sizeof(out->hostname), ft.uname[1]);
    copy_str(out->kernel, sizeof(out->kernel), ft.uname[2]);
    copy_str(out->arch, sizeof(out->arch), ft.uname[3]);
  }
  if (lc__hostinfo_os_release_in(&view, out->os, sizeof(out->os)) < 0)
    copy_str(out->os, sizeof(out->os), ft.have_uname ? ft.uname[0] : "unknown");
  out->cores = lc__hostinfo_cores(ft.online > 0 ? ft.online : ft.nproc, ft.allowed,
                                  lc__cgroup_cpu_limit_in(&view));
  out->memory_bytes =
      lc__hostinfo_memory(lc__hostinfo_memtotal_in(&view), lc__cgroup_memory_limit_in(&view));
  if (ft.scan->headers > 0 && (r = lc__portscan_to_ports(&out->listening, ft.scan)) < 0)
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
  free(ft.scan);
  return r;
}

/* ---- one runtime --------------------------------------------------------------------------- */

typedef struct collected {
  lc__buf out;
  char err_tail[ERR_TAIL_MAX];
  int too_long, oom;
} collected;

static void collect_line(const char *line, size_t len, lc_stream stream, void *payload) {
  collected *c = payload;
  if (stream == LC_STDERR) {
    copy_mem(c->err_tail, sizeof(c->err_tail), line, len);
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
