/*
 * hostinfo_internal.h - the hostinfo's fields, and the parsers behind lc_hostinfo_local, shared
 * with the remote host facts (src/hostfacts/parse.c) and the unit tests.
 *
 * Every reader takes root, the directory that stands for "/": "/" on a live system, a fixture
 * tree in the tests. Paths read below it: etc/os-release, usr/lib/os-release, proc/meminfo,
 * proc/self/cgroup, proc/self/mountinfo and the cgroup file systems that mountinfo names (or
 * sys/fs/cgroup when mountinfo says nothing). The _in variants read the same paths through a
 * file view instead: a tree on this machine, or the files a remote host sent back.
 */
#ifndef LC_HOSTINFO_INTERNAL_H
#define LC_HOSTINFO_INTERNAL_H

#include "internal.h"

#include "lazycluster/hostinfo.h"

/* One GPU (opaque in lazycluster/hostinfo.h). */
struct lc_gpu {
  int index;
  char uuid[64]; /* "GPU-..." or "" when unknown */
  char name[128];
  uint64_t memory_bytes;
};

/* Facts about one machine (opaque in lazycluster/hostinfo.h; its accessors say what each is). */
struct lc_hostinfo {
  char hostname[256];
  char os[128];
  char kernel[128];
  char arch[32];
  double cores;
  uint64_t memory_bytes;
  size_t gpu_count;
  lc_gpu *gpus; /* gpu_count entries */
  char gpu_source[16];
  char gpu_reason[256];
  /* lc_runtime_hostinfo only */
  size_t executable_count;
  char **executables;      /* their names, as asked */
  char **executable_paths; /* NULL where absent */
  lc_ports *listening;     /* NULL when unknown */
  lc_ports *held;          /* ports its connections hold (ports_internal.h); NULL when unknown */
  uint64_t loopback;       /* its loopback's id (ports_internal.h), 0 when unknown */
  size_t gpus_detected;
  int gpus_declared;
};

/* v1 memory limits at or above this mean "no limit" (the kernel shows ~2^63 rounded to a page). */
#define LC__CGROUP_V1_UNLIMITED (UINT64_C(1) << 60)

/*
 * Where the readers find files. Paths are absolute, as on the machine the facts are about.
 */
typedef struct lc__fsview lc__fsview;
struct lc__fsview {
  /* The file's first max bytes as a NUL-terminated heap string; NULL when it cannot be read. */
  char *(*read)(const lc__fsview *fs, const char *path, size_t max);
  /* Non-zero when path is a directory. */
  int (*is_dir)(const lc__fsview *fs, const char *path);
  /* Non-zero when path exists (a file or a directory). */
  int (*exists)(const lc__fsview *fs, const char *path);
  const char *root; /* lc__fsview_disk: the directory that stands for "/" */
  const void *data; /* other views: their own state */
};

/* A view of the tree under root on this machine (root is borrowed). */
void lc__fsview_disk(lc__fsview *fs, const char *root);

/* The readers below, through a view. */
int lc__hostinfo_os_release_in(const lc__fsview *fs, char *buf, size_t n);
uint64_t lc__hostinfo_memtotal_in(const lc__fsview *fs);
double lc__cgroup_cpu_limit_in(const lc__fsview *fs);
uint64_t lc__cgroup_memory_limit_in(const lc__fsview *fs);

/*
 * PRETTY_NAME of root/etc/os-release (else root/usr/lib/os-release), quotes and escapes removed;
 * NAME when PRETTY_NAME is missing. Returns 0, or -ENOENT when neither file names the system.
 */
int lc__hostinfo_os_release(const char *root, char *buf, size_t n);

/* MemTotal of root/proc/meminfo in bytes; 0 when it cannot be read. */
uint64_t lc__hostinfo_memtotal(const char *root);

/*
 * The CPU limit of this process's cgroup in CPUs (quota / period): cgroup v2 cpu.max or v1
 * cpu.cfs_quota_us / cpu.cfs_period_us, the smallest along the path up to the hierarchy's root.
 * 0 when there is no limit or no cgroup file system.
 */
double lc__cgroup_cpu_limit(const char *root);

/* The memory limit of this process's cgroup in bytes (v2 memory.max, v1 memory.limit_in_bytes,
 * smallest along the path); 0 when there is none. */
uint64_t lc__cgroup_memory_limit(const char *root);

/* Usable CPUs: online capped by affinity (0: unknown) and by a cgroup limit (0: none). */
double lc__hostinfo_cores(long online, long affinity, double cgroup_limit);

/* Usable memory: memtotal capped by a cgroup limit (0: none). */
uint64_t lc__hostinfo_memory(uint64_t memtotal, uint64_t cgroup_limit);

/* The CPUs this process may run on (sched_getaffinity); 0 when unknown. */
long lc__hostinfo_affinity(void);

/* Appends s as a JSON string literal: quotes, backslashes and control characters escaped,
 * invalid UTF-8 replaced by U+FFFD. Returns 0 or -ENOMEM. */
int lc__json_append_string(lc__buf *b, const char *s);

#endif /* LC_HOSTINFO_INTERNAL_H */
