/*
 * hostinfo.c - what this machine offers: OS, CPU cores and memory (capped by cgroup v1/v2
 * limits), GPUs; and the JSON form that `lazyclusterctl probe --json` prints and that a remote
 * probe parses.
 */
#include "hostinfo_internal.h"

#include "gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define SMALL_FILE_MAX ((size_t)4096)
#define LIST_FILE_MAX ((size_t)256 * 1024)

/* Copies src into dst[n], cut to fit. */
static void copy_str(char *dst, size_t n, const char *src) {
  size_t l = strnlen(src, n - 1);
  memcpy(dst, src, l);
  dst[l] = '\0';
}

/* root + abs ("/proc/self/cgroup") without a doubled slash; -ENAMETOOLONG when it does not fit. */
static int path_join(char *dst, size_t n, const char *root, const char *abs) {
  size_t rl = strlen(root);
  int w;
  while (rl > 0 && root[rl - 1] == '/')
    rl--;
  w = snprintf(dst, n, "%.*s%s%s", (int)rl, root, abs[0] == '/' ? "" : "/", abs);
  return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* Reads at most max bytes of a file into a NUL-terminated heap string; NULL when unreadable. */
static char *read_text(const char *path, size_t max) {
  char *data = NULL;
  size_t len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  if ((data = lc__malloc(max + 1)) == NULL)
    goto out;
  while (len < max) {
    ssize_t r = read(fd, data + len, max - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      free(data);
      data = NULL;
      goto out;
    }
    if (r == 0)
      break;
    len += (size_t)r;
  }
  data[len] = '\0';
out:
  close(fd);
  return data;
}

/* ---- the file view over a directory tree on this machine ----------------------------------- */

static char *disk_read(const lc__fsview *fs, const char *abs, size_t max) {
  char path[PATH_MAX];
  if (path_join(path, sizeof(path), fs->root, abs) < 0)
    return NULL;
  return read_text(path, max);
}

static int disk_is_dir(const lc__fsview *fs, const char *abs) {
  char path[PATH_MAX];
  struct stat st;
  return path_join(path, sizeof(path), fs->root, abs) == 0 && stat(path, &st) == 0 &&
         S_ISDIR(st.st_mode);
}

static int disk_exists(const lc__fsview *fs, const char *abs) {
  char path[PATH_MAX];
  return path_join(path, sizeof(path), fs->root, abs) == 0 && access(path, F_OK) == 0;
}

void lc__fsview_disk(lc__fsview *fs, const char *root) {
  memset(fs, 0, sizeof(*fs));
  fs->read = disk_read;
  fs->is_dir = disk_is_dir;
  fs->exists = disk_exists;
  fs->root = root;
}

static char *trim(char *s) {
  char *e;
  while (*s == ' ' || *s == '\t')
    s++;
  e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
    *--e = '\0';
  return s;
}

/* Parses a decimal unsigned number that fills the whole (trimmed) string. */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0)
    return -ERANGE;
  while (*end == ' ' || *end == '\t' || *end == '\n')
    end++;
  if (*end != '\0')
    return -EINVAL;
  *out = (uint64_t)v;
  return 0;
}

/* ---- os-release ---------------------------------------------------------------------------- */

/* Unquotes an os-release value in place: "..." or '...' with \-escapes, or a bare word. */
static void os_release_unquote(char *v) {
  char *w = v, q = 0;
  if (*v == '"' || *v == '\'')
    q = *v++;
  for (; *v && *v != q; v++) {
    if (q == '"' && *v == '\\' && v[1] != '\0')
      v++;
    *w++ = *v;
  }
  *w = '\0';
}

static int os_release_value(const char *text, const char *key, char *buf, size_t n) {
  size_t kl = strlen(key);
  const char *line = text, *eol;
  for (; *line; line = eol ? eol + 1 : line + strlen(line)) {
    char tmp[512];
    size_t ll;
    char *v;
    eol = strchr(line, '\n');
    ll = eol ? (size_t)(eol - line) : strlen(line);
    while (ll > 0 && (*line == ' ' || *line == '\t')) {
      line++;
      ll--;
    }
    if (ll <= kl || strncmp(line, key, kl) != 0 || line[kl] != '=')
      continue;
    snprintf(tmp, sizeof(tmp), "%.*s", (int)(ll - kl - 1), line + kl + 1);
    v = trim(tmp);
    os_release_unquote(v);
    if (*v == '\0')
      continue;
    snprintf(buf, n, "%s", v);
    return 0;
  }
  return -ENOENT;
}

int lc__hostinfo_os_release_in(const lc__fsview *fs, char *buf, size_t n) {
  static const char *const files[] = {"/etc/os-release", "/usr/lib/os-release"};
  int r = -ENOENT;
  for (size_t i = 0; i < LC_ARRAY_SIZE(files) && r < 0; i++) {
    char *text = fs->read(fs, files[i], SMALL_FILE_MAX * 4);
    if (text == NULL)
      continue;
    if ((r = os_release_value(text, "PRETTY_NAME", buf, n)) < 0)
      r = os_release_value(text, "NAME", buf, n);
    free(text);
  }
  return r;
}

int lc__hostinfo_os_release(const char *root, char *buf, size_t n) {
  lc__fsview fs;
  lc__fsview_disk(&fs, root);
  return lc__hostinfo_os_release_in(&fs, buf, n);
}

/* ---- memory and cores ---------------------------------------------------------------------- */

uint64_t lc__hostinfo_memtotal_in(const lc__fsview *fs) {
  char *text = fs->read(fs, "/proc/meminfo", SMALL_FILE_MAX * 2);
  uint64_t kib = 0;
  const char *p;
  if (text == NULL)
    return 0;
  if ((p = strstr(text, "MemTotal:")) != NULL) {
    char *end;
    unsigned long long v;
    errno = 0;
    v = strtoull(p + strlen("MemTotal:"), &end, 10);
    if (errno == 0 && end != p + strlen("MemTotal:"))
      kib = (uint64_t)v;
  }
  free(text);
  return kib * 1024u;
}

uint64_t lc__hostinfo_memtotal(const char *root) {
  lc__fsview fs;
  lc__fsview_disk(&fs, root);
  return lc__hostinfo_memtotal_in(&fs);
}

double lc__hostinfo_cores(long online, long affinity, double cgroup_limit) {
  double cores = online > 0 ? (double)online : 1.0;
  if (affinity > 0 && (double)affinity < cores)
    cores = (double)affinity;
  if (cgroup_limit > 0 && cgroup_limit < cores)
    cores = cgroup_limit;
  return cores;
}

uint64_t lc__hostinfo_memory(uint64_t memtotal, uint64_t cgroup_limit) {
  if (cgroup_limit > 0 && (memtotal == 0 || cgroup_limit < memtotal))
    return cgroup_limit;
  return memtotal;
}

long lc__hostinfo_affinity(void) {
  long count = 0;
  for (size_t ncpu = 1024; ncpu <= (size_t)1024 * 1024; ncpu *= 4) {
    size_t size = CPU_ALLOC_SIZE(ncpu);
    cpu_set_t *set = CPU_ALLOC(ncpu);
    int r;
    if (set == NULL)
      return 0;
    CPU_ZERO_S(size, set);
    r = sched_getaffinity(0, size, set);
    if (r == 0)
      count = CPU_COUNT_S(size, set);
    CPU_FREE(set);
    if (r == 0 || errno != EINVAL)
      break;
  }
  return count;
}

/* ---- cgroups ------------------------------------------------------------------------------- */

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void mountinfo_unescape(char *s) {
  char *w = s;
  for (; *s; s++) {
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
        s[3] <= '7') {
      *w++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
      s += 3;
    } else {
      *w++ = *s;
    }
  }
  *w = '\0';
}

/* Whether the comma-separated list contains word. */
static int list_has(const char *list, const char *word) {
  size_t wl = strlen(word);
  for (const char *p = list; p && *p; p = strchr(p, ','), p = p ? p + 1 : NULL) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == wl && strncmp(p, word, wl) == 0)
      return 1;
  }
  return 0;
}

/*
 * Finds the cgroup file system for controller (NULL: the v2 hierarchy) in /proc/self/mountinfo:
 * its mount point and the path inside the hierarchy that is mounted there.
 */
static int cgroup_mount(const lc__fsview *fs, const char *controller, char *point, size_t pn,
                        char *mroot, size_t mn) {
  char *text = fs->read(fs, "/proc/self/mountinfo", LIST_FILE_MAX);
  char *save = NULL;
  int r = -ENOENT;
  if (text == NULL)
    return -ENOENT;
  for (char *line = strtok_r(text, "\n", &save); line && r < 0;
       line = strtok_r(NULL, "\n", &save)) {
    char *f[6], *type = NULL, *super = NULL, *save2 = NULL, *tok;
    int nf = 0;
    for (tok = strtok_r(line, " ", &save2); tok && nf < 6; tok = strtok_r(NULL, " ", &save2))
      f[nf++] = tok;
    if (nf < 6)
      continue;
    while (tok && strcmp(tok, "-") != 0)
      tok = strtok_r(NULL, " ", &save2);
    if (tok == NULL || (type = strtok_r(NULL, " ", &save2)) == NULL ||
        strtok_r(NULL, " ", &save2) == NULL || (super = strtok_r(NULL, " ", &save2)) == NULL)
      continue;
    if (controller == NULL ? strcmp(type, "cgroup2") != 0
                           : strcmp(type, "cgroup") != 0 || !list_has(super, controller))
      continue;
    mountinfo_unescape(f[3]);
    mountinfo_unescape(f[4]);
    snprintf(mroot, mn, "%s", f[3]);
    snprintf(point, pn, "%s", f[4]);
    r = 0;
  }
  free(text);
  return r;
}

/* This process's path in the hierarchy of controller (NULL: v2) from /proc/self/cgroup. */
static int cgroup_path(const lc__fsview *fs, const char *controller, char *buf, size_t n) {
  char *text = fs->read(fs, "/proc/self/cgroup", LIST_FILE_MAX);
  char *save = NULL;
  int r = -ENOENT;
  if (text == NULL)
    return -ENOENT;
  for (char *line = strtok_r(text, "\n", &save); line && r < 0;
       line = strtok_r(NULL, "\n", &save)) {
    char *c1 = strchr(line, ':'), *c2;
    if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
      continue;
    *c1 = '\0';
    *c2 = '\0';
    if (controller == NULL ? strcmp(line, "0") != 0 || c2 != c1 + 1 : !list_has(c1 + 1, controller))
      continue;
    snprintf(buf, n, "%s", c2 + 1);
    r = 0;
  }
  free(text);
  return r;
}

/*
 * The directory of this process's cgroup for controller (NULL: v2), and the hierarchy's mount
 * point (base), as paths of fs. Without mountinfo, the usual places under /sys/fs/cgroup are
 * assumed.
 */
static int cgroup_dir(const lc__fsview *fs, const char *controller, char *dir, size_t dn,
                      char *base, size_t bn) {
  char path[PATH_MAX], point[PATH_MAX], mroot[PATH_MAX];
  const char *rel;
  size_t ml;
  if (cgroup_path(fs, controller, path, sizeof(path)) < 0)
    return -ENOENT;
  if (cgroup_mount(fs, controller, point, sizeof(point), mroot, sizeof(mroot)) < 0) {
    snprintf(mroot, sizeof(mroot), "/");
    if (controller == NULL) {
      /* v2 alone at /sys/fs/cgroup, or the hybrid layout's /sys/fs/cgroup/unified. */
      if (fs->exists(fs, "/sys/fs/cgroup/cgroup.controllers"))
        snprintf(point, sizeof(point), "/sys/fs/cgroup");
      else
        snprintf(point, sizeof(point), "/sys/fs/cgroup/unified");
    } else {
      snprintf(point, sizeof(point), "/sys/fs/cgroup/%s", controller);
      if (!fs->is_dir(fs, point) && strcmp(controller, "cpu") == 0)
        snprintf(point, sizeof(point), "/sys/fs/cgroup/cpu,cpuacct");
    }
  }
  if (snprintf(base, bn, "%s", point) >= (int)bn || !fs->is_dir(fs, base))
    return -ENOENT;
  /* The mount shows the hierarchy from mroot down; a path outside it (another namespace's view)
   * cannot be placed, so the mount point itself stands for this process's cgroup. */
  ml = strlen(mroot);
  while (ml > 0 && mroot[ml - 1] == '/')
    ml--;
  if (ml == 0)
    rel = path;
  else if (strncmp(path, mroot, ml) == 0 && (path[ml] == '/' || path[ml] == '\0'))
    rel = path + ml;
  else
    rel = "";
  if (strstr(rel, "/..") != NULL) /* outside this namespace's root: never climb above base */
    rel = "";
  if (snprintf(dir, dn, "%s%s", base, strcmp(rel, "/") == 0 ? "" : rel) >= (int)dn ||
      !fs->is_dir(fs, dir))
    snprintf(dir, dn, "%s", base);
  return 0;
}

typedef int (*limit_reader)(const lc__fsview *fs, const char *dir, double *out);

/* Applies read to dir and each parent up to base; the smallest limit found, 0 when none. */
static double cgroup_walk(const lc__fsview *fs, const char *dir, const char *base,
                          limit_reader read) {
  char cur[PATH_MAX];
  size_t bl = strlen(base);
  double best = 0;
  snprintf(cur, sizeof(cur), "%s", dir);
  for (;;) {
    double v = 0;
    char *slash;
    if (read(fs, cur, &v) == 0 && v > 0 && (best == 0 || v < best))
      best = v;
    if (strlen(cur) <= bl || (slash = strrchr(cur, '/')) == NULL || (size_t)(slash - cur) < bl)
      break;
    *slash = '\0';
  }
  return best;
}

static char *read_in(const lc__fsview *fs, const char *dir, const char *name) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return NULL;
  return fs->read(fs, path, SMALL_FILE_MAX);
}

/* cpu.max: "QUOTA PERIOD" or "max PERIOD". */
static int read_cpu_v2(const lc__fsview *fs, const char *dir, double *out) {
  char *text = read_in(fs, dir, "cpu.max"), *period;
  uint64_t q, p = 100000;
  int r = -ENOENT;
  if (text == NULL)
    return r;
  if ((period = strchr(text, ' ')) != NULL)
    *period++ = '\0';
  if (parse_u64(text, &q) == 0 && q > 0 && (period == NULL || parse_u64(period, &p) == 0) &&
      p > 0) {
    *out = (double)q / (double)p;
    r = 0;
  }
  free(text);
  return r;
}

/* cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us. */
static int read_cpu_v1(const lc__fsview *fs, const char *dir, double *out) {
  char *qt = read_in(fs, dir, "cpu.cfs_quota_us"), *pt = read_in(fs, dir, "cpu.cfs_period_us");
  uint64_t q, p;
  int r = -ENOENT;
  if (qt && pt && parse_u64(qt, &q) == 0 && parse_u64(pt, &p) == 0 && q > 0 && p > 0) {
    *out = (double)q / (double)p;
    r = 0;
  }
  free(qt);
  free(pt);
  return r;
}

static int read_mem_v2(const lc__fsview *fs, const char *dir, double *out) {
  char *text = read_in(fs, dir, "memory.max");
  uint64_t v;
  int r = -ENOENT;
  if (text && parse_u64(text, &v) == 0) {
    *out = (double)v;
    r = 0;
  }
  free(text);
  return r;
}

static int read_mem_v1(const lc__fsview *fs, const char *dir, double *out) {
  char *text = read_in(fs, dir, "memory.limit_in_bytes");
  uint64_t v;
  int r = -ENOENT;
  if (text && parse_u64(text, &v) == 0 && v < LC__CGROUP_V1_UNLIMITED) {
    *out = (double)v;
    r = 0;
  }
  free(text);
  return r;
}

static double min_limit(double a, double b) {
  if (a <= 0)
    return b;
  if (b <= 0)
    return a;
  return a < b ? a : b;
}

/* The smallest limit over the v1 controller and the v2 hierarchy; a controller is attached to only
 * one of them, so on a hybrid system the other finds nothing. */
static double cgroup_limit(const lc__fsview *fs, const char *controller, limit_reader v1,
                           limit_reader v2) {
  char dir[PATH_MAX], base[PATH_MAX];
  double limit = 0;
  if (cgroup_dir(fs, controller, dir, sizeof(dir), base, sizeof(base)) == 0)
    limit = cgroup_walk(fs, dir, base, v1);
  if (cgroup_dir(fs, NULL, dir, sizeof(dir), base, sizeof(base)) == 0)
    limit = min_limit(limit, cgroup_walk(fs, dir, base, v2));
  return limit;
}

double lc__cgroup_cpu_limit_in(const lc__fsview *fs) {
  return cgroup_limit(fs, "cpu", read_cpu_v1, read_cpu_v2);
}

uint64_t lc__cgroup_memory_limit_in(const lc__fsview *fs) {
  return (uint64_t)cgroup_limit(fs, "memory", read_mem_v1, read_mem_v2);
}

double lc__cgroup_cpu_limit(const char *root) {
  lc__fsview fs;
  lc__fsview_disk(&fs, root);
  return lc__cgroup_cpu_limit_in(&fs);
}

uint64_t lc__cgroup_memory_limit(const char *root) {
  lc__fsview fs;
  lc__fsview_disk(&fs, root);
  return lc__cgroup_memory_limit_in(&fs);
}

/* ---- the public calls ---------------------------------------------------------------------- */

int lc_hostinfo_local(lc_hostinfo **out) {
  lc_hostinfo *info = NULL;
  struct utsname u;
  int r = -ENOMEM;
  if (out == NULL)
    return lc__error_set(-EINVAL, "lc_hostinfo_local: out is NULL");
  *out = NULL;
  if ((info = lc__calloc(1, sizeof(*info))) == NULL) {
    lc__error_set(r, "out of memory reading host facts");
    goto out;
  }
  if (uname(&u) == 0) {
    copy_str(info->hostname, sizeof(info->hostname), u.nodename);
    copy_str(info->kernel, sizeof(info->kernel), u.release);
    copy_str(info->arch, sizeof(info->arch), u.machine);
  }
  if (lc__hostinfo_os_release("/", info->os, sizeof(info->os)) < 0)
    copy_str(info->os, sizeof(info->os), uname(&u) == 0 ? u.sysname : "unknown");
  info->cores = lc__hostinfo_cores(sysconf(_SC_NPROCESSORS_ONLN), lc__hostinfo_affinity(),
                                   lc__cgroup_cpu_limit("/"));
  info->memory_bytes =
      lc__hostinfo_memory(lc__hostinfo_memtotal("/"), lc__cgroup_memory_limit("/"));
  if ((r = lc__gpu_probe(info)) < 0) {
    lc__error_set(r, "out of memory listing GPUs");
    goto out;
  }
  info->gpus_detected = info->gpu_count;
  *out = info;
  info = NULL;
  r = 0;
out:
  lc_hostinfo_free(info);
  return r;
}

void lc_hostinfo_free(lc_hostinfo *info) {
  if (info == NULL)
    return;
  free(info->gpus);
  for (size_t i = 0; i < info->executable_count; i++) {
    if (info->executables)
      free(info->executables[i]);
    if (info->executable_paths)
      free(info->executable_paths[i]);
  }
  free(info->executables);
  free(info->executable_paths);
  lc_ports_free(info->listening);
  lc_ports_free(info->held);
  free(info);
}

const char *lc_hostinfo_hostname(const lc_hostinfo *info) { return info ? info->hostname : ""; }
const char *lc_hostinfo_os(const lc_hostinfo *info) { return info ? info->os : ""; }
const char *lc_hostinfo_kernel(const lc_hostinfo *info) { return info ? info->kernel : ""; }
const char *lc_hostinfo_arch(const lc_hostinfo *info) { return info ? info->arch : ""; }
double lc_hostinfo_cores(const lc_hostinfo *info) { return info ? info->cores : 0.0; }
uint64_t lc_hostinfo_memory_bytes(const lc_hostinfo *info) { return info ? info->memory_bytes : 0; }
size_t lc_hostinfo_gpu_count(const lc_hostinfo *info) {
  return info && info->gpus ? info->gpu_count : 0;
}
const lc_gpu *lc_hostinfo_gpu(const lc_hostinfo *info, size_t i) {
  return i < lc_hostinfo_gpu_count(info) ? &info->gpus[i] : NULL;
}
const char *lc_hostinfo_gpu_source(const lc_hostinfo *info) { return info ? info->gpu_source : ""; }
const char *lc_hostinfo_gpu_reason(const lc_hostinfo *info) { return info ? info->gpu_reason : ""; }
size_t lc_hostinfo_gpus_detected(const lc_hostinfo *info) { return info ? info->gpus_detected : 0; }
int lc_hostinfo_gpus_declared(const lc_hostinfo *info) { return info ? info->gpus_declared : 0; }

int lc_gpu_index(const lc_gpu *gpu) { return gpu ? gpu->index : -1; }
const char *lc_gpu_uuid(const lc_gpu *gpu) { return gpu ? gpu->uuid : ""; }
const char *lc_gpu_name(const lc_gpu *gpu) { return gpu ? gpu->name : ""; }
uint64_t lc_gpu_memory_bytes(const lc_gpu *gpu) { return gpu ? gpu->memory_bytes : 0; }

size_t lc_hostinfo_executable_count(const lc_hostinfo *info) {
  return info && info->executables ? info->executable_count : 0;
}
const char *lc_hostinfo_executable(const lc_hostinfo *info, size_t i) {
  return i < lc_hostinfo_executable_count(info) ? info->executables[i] : NULL;
}
const char *lc_hostinfo_executable_path(const lc_hostinfo *info, size_t i) {
  if (i >= lc_hostinfo_executable_count(info) || info->executable_paths == NULL)
    return NULL;
  return info->executable_paths[i];
}
const lc_ports *lc_hostinfo_listening(const lc_hostinfo *info) {
  return info ? info->listening : NULL;
}

int lc_hostinfo_has_executable(const lc_hostinfo *info, const char *name) {
  if (info == NULL || name == NULL)
    return lc__error_set(-EINVAL, "lc_hostinfo_has_executable: %s is NULL", info ? "name" : "info");
  for (size_t i = 0; i < info->executable_count && info->executables; i++)
    if (info->executables[i] && strcmp(info->executables[i], name) == 0)
      return info->executable_paths && info->executable_paths[i] ? 1 : 0;
  return lc__error_set(-ENOENT, "%s: the executable '%s' was not asked about", info->hostname,
                       name);
}

int lc_hostinfo_declare_gpus(lc_hostinfo *info, int n) {
  size_t want = (size_t)n;
  char why[sizeof(info->gpu_reason)];
  if (info == NULL)
    return lc__error_set(-EINVAL, "lc_hostinfo_declare_gpus: info is NULL");
  if (n < 0)
    return 0;
  if (!info->gpus_declared)
    info->gpus_detected = info->gpu_count;
  if (want > info->gpu_count) {
    lc_gpu *g = lc__realloc(info->gpus, want * sizeof(*g));
    if (g == NULL)
      return lc__error_set(-ENOMEM, "out of memory declaring %d GPUs", n);
    memset(g + info->gpu_count, 0, (want - info->gpu_count) * sizeof(*g));
    for (size_t i = info->gpu_count; i < want; i++)
      g[i].index = i > 0 ? g[i - 1].index + 1 : 0;
    info->gpus = g;
  }
  info->gpu_count = want;
  if (want == 0) {
    free(info->gpus);
    info->gpus = NULL;
  }
  if (want != info->gpus_detected) {
    const char *rest = strchr(info->gpu_reason, ';');
    if (strcmp(info->gpu_source, "declared") == 0)
      snprintf(why, sizeof(why), "gpus=%d declared%s", n, rest ? rest : "");
    else
      snprintf(why, sizeof(why), "gpus=%d declared; the host reported %zu (%s%s%.180s)", n,
               info->gpus_detected, info->gpu_source[0] ? info->gpu_source : "none",
               info->gpu_reason[0] ? ": " : "", info->gpu_reason);
    copy_str(info->gpu_reason, sizeof(info->gpu_reason), why);
    copy_str(info->gpu_source, sizeof(info->gpu_source), "declared");
  }
  info->gpus_declared = 1;
  return 0;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s) {
  size_t n;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1fu;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0fu;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07u;
  else
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

int lc__json_append_string(lc__buf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  int r;
  if ((r = lc__buf_append(b, "\"", 1)) < 0)
    return r;
  while (*p) {
    static const char from[] = "\"\\\n\r\t\b\f", to[] = "\"\\nrtbf";
    const char *e = strchr(from, *p);
    size_t n = utf8_len(p);
    if (e != NULL) {
      char esc[2] = {'\\', to[e - from]};
      r = lc__buf_append(b, esc, 2);
    } else if (*p < 0x20) {
      r = lc__buf_printf(b, "\\u%04x", (unsigned)*p);
    } else if (n == 0) {
      r = lc__buf_append(b, "\\ufffd", 6);
    } else {
      r = lc__buf_append(b, p, n);
    }
    if (r < 0)
      return r;
    p += n ? n : 1;
  }
  return lc__buf_append(b, "\"", 1);
}

/* A non-negative number with up to three decimals ("2", "1.5"), independent of the C locale. */
static int json_append_cores(lc__buf *b, double v) {
  unsigned long long milli;
  char tmp[48];
  int n;
  if (!(v >= 0) || v > 1e12)
    v = 0;
  milli = (unsigned long long)(v * 1000.0 + 0.5);
  n = snprintf(tmp, sizeof(tmp), "%llu.%03u", milli / 1000, (unsigned)(milli % 1000));
  while (n > 0 && tmp[n - 1] == '0')
    tmp[--n] = '\0';
  if (n > 0 && tmp[n - 1] == '.')
    tmp[--n] = '\0';
  return lc__buf_append(b, tmp, (size_t)n);
}

/* The fields only lc_runtime_hostinfo and lc_hostinfo_declare_gpus set, where they are set. */
static int json_append_remote(lc__buf *b, const lc_hostinfo *info) {
  int r = 0;
  if (info->executable_count > 0 && info->executables) {
    if ((r = lc__buf_puts(b, ",\"executables\":{")) < 0)
      return r;
    for (size_t i = 0; i < info->executable_count; i++) {
      const char *path = info->executable_paths ? info->executable_paths[i] : NULL;
      if ((i > 0 && (r = lc__buf_append(b, ",", 1)) < 0) ||
          (r = lc__json_append_string(b, info->executables[i])) < 0 ||
          (r = lc__buf_append(b, ":", 1)) < 0 ||
          (r = path ? lc__json_append_string(b, path) : lc__buf_puts(b, "null")) < 0)
        return r;
    }
    if ((r = lc__buf_append(b, "}", 1)) < 0)
      return r;
  }
  if (info->listening) {
    size_t n = lc_ports_count(info->listening);
    if ((r = lc__buf_puts(b, ",\"listening\":[")) < 0)
      return r;
    for (size_t i = 0; i < n; i++)
      if ((r = lc__buf_printf(b, "%s%d", i ? "," : "", lc_ports_at(info->listening, i))) < 0)
        return r;
    if ((r = lc__buf_append(b, "]", 1)) < 0)
      return r;
  }
  if (info->gpus_declared)
    r = lc__buf_printf(b, ",\"gpus_detected\":%zu,\"gpus_declared\":true", info->gpus_detected);
  return r;
}

int lc_hostinfo_to_json(char **out, const lc_hostinfo *info) {
  lc__buf b = {0};
  int r;
  if (out == NULL || info == NULL)
    return lc__error_set(-EINVAL, "lc_hostinfo_to_json: %s is NULL", out ? "info" : "out");
  *out = NULL;
  if ((r = lc__buf_append(&b, "{\"hostname\":", 12)) < 0 ||
      (r = lc__json_append_string(&b, info->hostname)) < 0 ||
      (r = lc__buf_append(&b, ",\"os\":", 6)) < 0 ||
      (r = lc__json_append_string(&b, info->os)) < 0 ||
      (r = lc__buf_append(&b, ",\"kernel\":", 10)) < 0 ||
      (r = lc__json_append_string(&b, info->kernel)) < 0 ||
      (r = lc__buf_append(&b, ",\"arch\":", 8)) < 0 ||
      (r = lc__json_append_string(&b, info->arch)) < 0 ||
      (r = lc__buf_append(&b, ",\"cores\":", 9)) < 0 ||
      (r = json_append_cores(&b, info->cores)) < 0 ||
      (r = lc__buf_printf(&b, ",\"memory_bytes\":%llu,\"gpus\":[",
                          (unsigned long long)info->memory_bytes)) < 0)
    goto out;
  for (size_t i = 0; i < info->gpu_count && info->gpus; i++) {
    const lc_gpu *g = &info->gpus[i];
    if ((r = lc__buf_printf(&b, "%s{\"index\":%d,\"uuid\":", i ? "," : "", g->index)) < 0 ||
        (r = lc__json_append_string(&b, g->uuid)) < 0 ||
        (r = lc__buf_append(&b, ",\"name\":", 8)) < 0 ||
        (r = lc__json_append_string(&b, g->name)) < 0 ||
        (r = lc__buf_printf(&b, ",\"memory_bytes\":%llu}", (unsigned long long)g->memory_bytes)) <
            0)
      goto out;
  }
  if ((r = lc__buf_append(&b, "],\"gpu_source\":", 15)) < 0 ||
      (r = lc__json_append_string(&b, info->gpu_source)) < 0 ||
      (r = lc__buf_append(&b, ",\"gpu_reason\":", 14)) < 0 ||
      (r = lc__json_append_string(&b, info->gpu_reason)) < 0 ||
      (r = json_append_remote(&b, info)) < 0 || (r = lc__buf_append(&b, "}", 1)) < 0)
    goto out;
  *out = b.data;
  b.data = NULL;
out:
  if (r < 0)
    lc__error_set(r, "out of memory rendering host facts as JSON");
  lc__buf_free(&b);
  return r;
}
