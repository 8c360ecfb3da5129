/*
 * test_hostinfo.c - host facts: os-release, cgroup v1/v2/hybrid limits from fixture trees,
 * affinity, the JSON form, and the GPU probe's answers without a GPU (no library, a library that
 * is not CUDA, a fake runtime in each of its moods).
 */
#include "gpu.h"
#include "hostinfo_internal.h"
#include "lc_test.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIB (UINT64_C(1) << 30)

/* ---- fixture trees ------------------------------------------------------------------------- */

static char fx_root[1024];

static void fx_rm(const char *path) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
  if (system(cmd) != 0)
    fprintf(stderr, "  could not remove %s\n", path);
}

/* A fresh, empty fixture tree; its path stays in fx_root until fx_done. */
static const char *fx_new(void) {
  snprintf(fx_root, sizeof(fx_root), "%s/lc_hostinfo_XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(fx_root) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  return fx_root;
}

static void fx_done(void) { fx_rm(fx_root); }

static void fx_mkdirs(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof(tmp), "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    mkdir(tmp, 0755);
    *p = '/';
  }
  mkdir(tmp, 0755);
}

/* Writes text to root/rel, creating the directories on the way. */
static void fx_write(const char *rel, const char *text) {
  char path[PATH_MAX], dir[PATH_MAX];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", fx_root, rel);
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  fx_mkdirs(dir);
  if ((f = fopen(path, "w")) == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

static void fx_dir(const char *rel) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", fx_root, rel);
  fx_mkdirs(path);
}

static int near(double a, double b) { return a > b - 1e-9 && a < b + 1e-9; }

/* ---- os-release and meminfo ---------------------------------------------------------------- */

static void test_os_release(void) {
  char buf[128];
  const char *root = fx_new();
  fx_write("etc/os-release", "NAME=\"Debian GNU/Linux\"\n"
                             "# PRETTY_NAME=\"commented out\"\n"
                             "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
                             "VERSION_ID=\"12\"\n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "Debian GNU/Linux 12 (bookworm)");
  fx_done();
}

static void test_os_release_quoting(void) {
  char buf[128];
  const char *root = fx_new();
  fx_write("etc/os-release", "  PRETTY_NAME=\"Say \\\"hi\\\" \\\\ \\$HOME\"  \n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "Say \"hi\" \\ $HOME");
  fx_write("etc/os-release", "PRETTY_NAME='Single quoted'\n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "Single quoted");
  fx_write("etc/os-release", "PRETTY_NAME=Bare\n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "Bare");
  /* A key that only begins like PRETTY_NAME, an empty PRETTY_NAME: NAME is used. */
  fx_write("etc/os-release", "PRETTY_NAMES=x\nPRETTY_NAME=\"\"\nNAME=Alpine Linux");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "Alpine Linux");
  /* Cut to the buffer. */
  fx_write("etc/os-release", "PRETTY_NAME=\"abcdefghij\"\n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, 5));
  LC_CHECK_STR(buf, "abcd");
  fx_done();
}

static void test_os_release_fallbacks(void) {
  char buf[128] = "untouched";
  const char *root = fx_new();
  LC_CHECK(lc__hostinfo_os_release(root, buf, sizeof(buf)) == -ENOENT);
  fx_write("etc/os-release", "ID=nothing\n");
  LC_CHECK(lc__hostinfo_os_release(root, buf, sizeof(buf)) == -ENOENT);
  fx_write("usr/lib/os-release", "PRETTY_NAME=\"From usr/lib\"\n");
  LC_CHECK_OK(lc__hostinfo_os_release(root, buf, sizeof(buf)));
  LC_CHECK_STR(buf, "From usr/lib");
  fx_done();
}

static void test_meminfo(void) {
  const char *root = fx_new();
  LC_CHECK(lc__hostinfo_memtotal(root) == 0);
  fx_write("proc/meminfo", "MemTotal:       24683656 kB\nMemFree:         1000 kB\n");
  LC_CHECK(lc__hostinfo_memtotal(root) == UINT64_C(24683656) * 1024);
  fx_done();
}

/* ---- cgroups ------------------------------------------------------------------------------- */

/* The mountinfo of a v1 machine with a hybrid unified mount, like Debian 10 or this test's CI. */
#define MOUNTINFO_V1                                                                               \
  "22 1 0:20 / / rw,relatime - ext4 /dev/vda1 rw\n"                                                \
  "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"                            \
  "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"  \
  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"                     \
  "36 31 0:33 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"                         \
  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"

static void test_cgroup_v1(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", MOUNTINFO_V1);
  fx_write("proc/self/cgroup", "9:pids:/\n4:cpu,cpuacct:/batch/job7\n3:memory:/batch/job7\n0::/\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_quota_us", "150000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  fx_write("sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes", "2147483648\n");
  fx_dir("sys/fs/cgroup/unified");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 1.5));
  LC_CHECK(lc__cgroup_memory_limit(root) == 2 * GIB);
  fx_done();
}

static void test_cgroup_v1_unlimited(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", MOUNTINFO_V1);
  fx_write("proc/self/cgroup", "4:cpu,cpuacct:/a\n3:memory:/a\n0::/\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us", "-1\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "9223372036854771712\n");
  fx_write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854775807\n");
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 0);
  fx_done();
}

/* A limit on a parent cgroup binds its children: the smallest along the path wins. */
static void test_cgroup_v1_parent_limit(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", MOUNTINFO_V1);
  fx_write("proc/self/cgroup", "4:cpu,cpuacct:/outer/inner\n3:memory:/outer/inner\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/outer/cpu.cfs_quota_us", "50000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/outer/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/outer/inner/cpu.cfs_quota_us", "400000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/outer/inner/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/memory/outer/memory.limit_in_bytes", "1073741824\n");
  fx_write("sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes", "4294967296\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 0.5));
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  fx_done();
}

/* Docker without a cgroup namespace: the container's own cgroup is mounted at the usual place,
 * and mountinfo's root field says which one it is. */
static void test_cgroup_v1_container_mount(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo",
           "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
           "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
           "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpuacct,cpu\n");
  fx_write("proc/self/cgroup", "4:cpuacct,cpu:/docker/abc\n3:memory:/docker/abc\n");
  fx_write("sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  LC_CHECK(lc__cgroup_memory_limit(root) == 512u * 1024 * 1024);
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 3.0));
  fx_done();
}

/* A path that the mount does not show (another namespace's view) falls back to the mount point. */
static void test_cgroup_v1_foreign_path(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo",
           "35 31 0:32 /kubepods/pod1 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
  fx_write("proc/self/cgroup", "3:memory:/elsewhere/x\n");
  fx_write("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  /* A cgroup namespace shows cgroups outside it as "/.."; they are never looked up. */
  fx_write("proc/self/mountinfo",
           "35 31 0:32 / /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
  fx_write("proc/self/cgroup", "3:memory:/../other\n");
  fx_write("sys/fs/cgroup/other/memory.limit_in_bytes", "1024\n");
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  fx_done();
}

/* This machine's layout: v1 controllers each at /sys/fs/cgroup/NAME, an empty v2 hierarchy at
 * /sys/fs/cgroup/unified, and the process in a v1 memory cgroup but at the v2 root. */
static void test_cgroup_hybrid(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo",
           "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
           "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
           "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
           "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  fx_write("proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/647c\n2:cpuacct:/\n"
                               "1:cpu:/\n0::/\n");
  fx_write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  fx_write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  fx_write("sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
  fx_write("sys/fs/cgroup/memory/process_api/647c/memory.limit_in_bytes", "3221225472\n");
  fx_write("sys/fs/cgroup/unified/cgroup.controllers", "\n");
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 3 * GIB);
  /* A v2 hierarchy that has the cpu controller while memory stays on v1. */
  fx_write("proc/self/cgroup", "4:memory:/process_api/647c\n0::/svc\n");
  fx_write("sys/fs/cgroup/unified/svc/cpu.max", "250000 100000\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 2.5));
  LC_CHECK(lc__cgroup_memory_limit(root) == 3 * GIB);
  fx_done();
}

static void test_cgroup_v2(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo",
           "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
           "rw,nsdelegate,memory_recursiveprot\n");
  fx_write("proc/self/cgroup", "0::/system.slice/app.service\n");
  fx_write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  fx_write("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n");
  fx_write("sys/fs/cgroup/system.slice/memory.max", "max\n");
  fx_write("sys/fs/cgroup/system.slice/app.service/cpu.max", "200000 100000\n");
  fx_write("sys/fs/cgroup/system.slice/app.service/memory.max", "1073741824\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 2.0));
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  /* A tighter parent. */
  fx_write("sys/fs/cgroup/system.slice/cpu.max", "75000 100000\n");
  fx_write("sys/fs/cgroup/system.slice/memory.max", "536870912\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 0.75));
  LC_CHECK(lc__cgroup_memory_limit(root) == 512u * 1024 * 1024);
  fx_done();
}

static void test_cgroup_v2_max(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  fx_write("proc/self/cgroup", "0::/user.slice\n");
  fx_write("sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
  fx_write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 0);
  /* Junk is not a limit. */
  fx_write("sys/fs/cgroup/user.slice/cpu.max", "lots 100000\n");
  fx_write("sys/fs/cgroup/user.slice/memory.max", "12abc\n");
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 0);
  fx_done();
}

/* A cgroup namespace: the process sees itself at "/" of a hierarchy mounted at its own root. */
static void test_cgroup_v2_namespace_root(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
  fx_write("proc/self/cgroup", "0::/\n");
  fx_write("sys/fs/cgroup/cpu.max", "100000 100000\n");
  fx_write("sys/fs/cgroup/memory.max", "268435456\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 1.0));
  LC_CHECK(lc__cgroup_memory_limit(root) == 256u * 1024 * 1024);
  fx_done();
}

static void test_cgroup_mount_with_space(void) {
  const char *root = fx_new();
  fx_write("proc/self/mountinfo", "30 23 0:26 / /srv/my\\040cgroups rw - cgroup2 cgroup2 rw\n");
  fx_write("proc/self/cgroup", "0::/job\n");
  fx_write("srv/my cgroups/job/memory.max", "1073741824\n");
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  fx_done();
}

/* Without mountinfo the usual places are assumed. */
static void test_cgroup_no_mountinfo(void) {
  const char *root = fx_new();
  fx_write("proc/self/cgroup", "0::/job\n");
  fx_write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  fx_write("sys/fs/cgroup/job/cpu.max", "50000 100000\n");
  fx_write("sys/fs/cgroup/job/memory.max", "1073741824\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 0.5));
  LC_CHECK(lc__cgroup_memory_limit(root) == 1 * GIB);
  fx_done();

  root = fx_new();
  fx_write("proc/self/cgroup", "4:cpu,cpuacct:/j\n3:memory:/j\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/j/cpu.cfs_quota_us", "200000\n");
  fx_write("sys/fs/cgroup/cpu,cpuacct/j/cpu.cfs_period_us", "100000\n");
  fx_write("sys/fs/cgroup/memory/j/memory.limit_in_bytes", "2147483648\n");
  LC_CHECK(near(lc__cgroup_cpu_limit(root), 2.0));
  LC_CHECK(lc__cgroup_memory_limit(root) == 2 * GIB);
  fx_done();
}

static void test_cgroup_none(void) {
  const char *root = fx_new();
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 0);
  fx_write("proc/self/cgroup", "garbage\n::\n0:\n");
  fx_write("proc/self/mountinfo", "short line\n1 2 3 4 5 6 7\n");
  LC_CHECK(lc__cgroup_cpu_limit(root) == 0);
  LC_CHECK(lc__cgroup_memory_limit(root) == 0);
  fx_done();
}

/* ---- cores, memory, affinity --------------------------------------------------------------- */

static void test_cores_and_memory_caps(void) {
  LC_CHECK(near(lc__hostinfo_cores(8, 0, 0), 8));
  LC_CHECK(near(lc__hostinfo_cores(8, 4, 0), 4));
  LC_CHECK(near(lc__hostinfo_cores(8, 16, 0), 8));
  LC_CHECK(near(lc__hostinfo_cores(8, 4, 1.5), 1.5));
  LC_CHECK(near(lc__hostinfo_cores(8, 2, 6), 2));
  LC_CHECK(near(lc__hostinfo_cores(-1, 0, 0), 1));
  LC_CHECK(lc__hostinfo_memory(16 * GIB, 0) == 16 * GIB);
  LC_CHECK(lc__hostinfo_memory(16 * GIB, 4 * GIB) == 4 * GIB);
  LC_CHECK(lc__hostinfo_memory(16 * GIB, 32 * GIB) == 16 * GIB);
  LC_CHECK(lc__hostinfo_memory(0, 4 * GIB) == 4 * GIB);
}

/* Pins this process to one CPU: the usable cores follow. */
static void test_affinity(void) {
  cpu_set_t saved, one;
  lc_hostinfo *info = NULL;
  int first = -1;
  LC_REQUIRE(sched_getaffinity(0, sizeof(saved), &saved) == 0);
  LC_CHECK(lc__hostinfo_affinity() == CPU_COUNT(&saved));
  for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
    if (CPU_ISSET(i, &saved))
      first = i;
  LC_REQUIRE(first >= 0);
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  LC_REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  LC_CHECK(lc__hostinfo_affinity() == 1);
  LC_CHECK_OK(lc_hostinfo_local(&info));
  LC_CHECK(info != NULL && info->cores <= 1.0);
  lc_hostinfo_free(info);
  LC_CHECK(sched_setaffinity(0, sizeof(saved), &saved) == 0);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void check_json_string(const char *in, const char *want) {
  lc__buf b = {0};
  LC_CHECK_OK(lc__json_append_string(&b, in));
  LC_CHECK_STR(b.data, want);
  lc__buf_free(&b);
}

static void test_json_escaping(void) {
  check_json_string("", "\"\"");
  check_json_string("plain", "\"plain\"");
  check_json_string("say \"hi\"", "\"say \\\"hi\\\"\"");
  check_json_string("C:\\dir\\", "\"C:\\\\dir\\\\\"");
  check_json_string("a\nb\tc\rd\be\ff", "\"a\\nb\\tc\\rd\\be\\ff\"");
  check_json_string("\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"");
  check_json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  /* Bytes that are not UTF-8: a stray byte, a cut sequence, an overlong form, a surrogate. */
  check_json_string("a\xff"
                    "b",
                    "\"a\\ufffdb\"");
  check_json_string("x\xc3", "\"x\\ufffd\"");
  check_json_string("\xc0\xaf", "\"\\ufffd\\ufffd\"");
  check_json_string("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
  check_json_string(NULL, "\"\"");
}

static void test_json_object(void) {
  lc_hostinfo info;
  lc_gpu gpus[2];
  char *json = NULL;
  memset(&info, 0, sizeof(info));
  memset(gpus, 0, sizeof(gpus));
  strcpy(info.hostname, "lab\"1");
  strcpy(info.os, "Debian GNU/Linux 12 (bookworm)");
  strcpy(info.kernel, "6.1.0-18-amd64");
  strcpy(info.arch, "x86_64");
  info.cores = 1.5;
  info.memory_bytes = 25276063744u;
  strcpy(info.gpu_source, "none");
  strcpy(info.gpu_reason, "no CUDA device (cudaErrorNoDevice: no CUDA-capable device is detected)");
  LC_REQUIRE_OK(lc_hostinfo_to_json(&json, &info));
  LC_CHECK_STR(json, "{\"hostname\":\"lab\\\"1\",\"os\":\"Debian GNU/Linux 12 (bookworm)\","
                     "\"kernel\":\"6.1.0-18-amd64\",\"arch\":\"x86_64\",\"cores\":1.5,"
                     "\"memory_bytes\":25276063744,\"gpus\":[],\"gpu_source\":\"none\","
                     "\"gpu_reason\":\"no CUDA device (cudaErrorNoDevice: no CUDA-capable device "
                     "is detected)\"}");
  lc_free(json);

  gpus[0].index = 0;
  strcpy(gpus[0].uuid, "GPU-01234567-89ab-cdef-0123-456789abcdef");
  strcpy(gpus[0].name, "NVIDIA H100 80GB HBM3");
  gpus[0].memory_bytes = 85031714816u;
  gpus[1].index = 1;
  strcpy(gpus[1].name, "back\\slash");
  info.gpus = gpus;
  info.gpu_count = 2;
  info.cores = 16;
  strcpy(info.gpu_source, "cuda");
  info.gpu_reason[0] = '\0';
  LC_REQUIRE_OK(lc_hostinfo_to_json(&json, &info));
  LC_CHECK_CONTAINS(json, "\"cores\":16,");
  LC_CHECK_CONTAINS(json,
                    "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-01234567-89ab-cdef-0123-456789abcdef\","
                    "\"name\":\"NVIDIA H100 80GB HBM3\",\"memory_bytes\":85031714816},"
                    "{\"index\":1,\"uuid\":\"\",\"name\":\"back\\\\slash\",\"memory_bytes\":0}],"
                    "\"gpu_source\":\"cuda\",\"gpu_reason\":\"\"}");
  lc_free(json);

  info.cores = 0.25;
  LC_REQUIRE_OK(lc_hostinfo_to_json(&json, &info));
  LC_CHECK_CONTAINS(json, "\"cores\":0.25,");
  lc_free(json);
  info.cores = 2.0 / 3.0;
  LC_REQUIRE_OK(lc_hostinfo_to_json(&json, &info));
  LC_CHECK_CONTAINS(json, "\"cores\":0.667,");
  lc_free(json);

  LC_CHECK(lc_hostinfo_to_json(NULL, &info) == -EINVAL);
  LC_CHECK(lc_hostinfo_to_json(&json, NULL) == -EINVAL);
}

/* lc_hostinfo is opaque: what the library fills comes out through the accessors, NULL is safe. */
static void test_accessors(void) {
  lc_hostinfo info;
  lc_gpu gpus[2];
  char *exes[] = {"python3", "nvcc"}, *paths[] = {"/usr/bin/python3", NULL};
  lc_ports *listening = NULL;
  memset(&info, 0, sizeof(info));
  memset(gpus, 0, sizeof(gpus));
  strcpy(info.hostname, "lab1");
  strcpy(info.os, "Debian GNU/Linux 12 (bookworm)");
  strcpy(info.kernel, "6.1.0-18-amd64");
  strcpy(info.arch, "x86_64");
  info.cores = 1.5;
  info.memory_bytes = 25276063744u;
  gpus[0].index = 0;
  strcpy(gpus[0].uuid, "GPU-0123");
  strcpy(gpus[0].name, "NVIDIA H100 80GB HBM3");
  gpus[0].memory_bytes = 85031714816u;
  gpus[1].index = 1;
  info.gpus = gpus;
  info.gpu_count = 2;
  info.gpus_detected = 1;
  info.gpus_declared = 1;
  strcpy(info.gpu_source, "declared");
  strcpy(info.gpu_reason, "gpus=2 declared; the host reported 1");
  info.executable_count = 2;
  info.executables = exes;
  info.executable_paths = paths;
  LC_REQUIRE_OK(lc_ports_parse(&listening, "22,8786"));
  info.listening = listening;

  LC_CHECK_STR(lc_hostinfo_hostname(&info), "lab1");
  LC_CHECK_STR(lc_hostinfo_os(&info), "Debian GNU/Linux 12 (bookworm)");
  LC_CHECK_STR(lc_hostinfo_kernel(&info), "6.1.0-18-amd64");
  LC_CHECK_STR(lc_hostinfo_arch(&info), "x86_64");
  LC_CHECK(lc_hostinfo_cores(&info) == 1.5);
  LC_CHECK(lc_hostinfo_memory_bytes(&info) == 25276063744u);
  LC_CHECK(lc_hostinfo_gpu_count(&info) == 2);
  LC_CHECK(lc_gpu_index(lc_hostinfo_gpu(&info, 1)) == 1);
  LC_CHECK_STR(lc_gpu_uuid(lc_hostinfo_gpu(&info, 0)), "GPU-0123");
  LC_CHECK_STR(lc_gpu_name(lc_hostinfo_gpu(&info, 0)), "NVIDIA H100 80GB HBM3");
  LC_CHECK(lc_gpu_memory_bytes(lc_hostinfo_gpu(&info, 0)) == 85031714816u);
  LC_CHECK_STR(lc_gpu_name(lc_hostinfo_gpu(&info, 1)), "");
  LC_CHECK(lc_hostinfo_gpu(&info, 2) == NULL);
  LC_CHECK_STR(lc_hostinfo_gpu_source(&info), "declared");
  LC_CHECK_STR(lc_hostinfo_gpu_reason(&info), "gpus=2 declared; the host reported 1");
  LC_CHECK(lc_hostinfo_gpus_detected(&info) == 1);
  LC_CHECK(lc_hostinfo_gpus_declared(&info) == 1);
  LC_CHECK(lc_hostinfo_executable_count(&info) == 2);
  LC_CHECK_STR(lc_hostinfo_executable(&info, 1), "nvcc");
  LC_CHECK_STR(lc_hostinfo_executable_path(&info, 0), "/usr/bin/python3");
  LC_CHECK(lc_hostinfo_executable_path(&info, 1) == NULL);
  LC_CHECK(lc_hostinfo_executable(&info, 2) == NULL &&
           lc_hostinfo_executable_path(&info, 2) == NULL);
  LC_CHECK(lc_hostinfo_listening(&info) == listening);
  LC_CHECK(lc_ports_contains(lc_hostinfo_listening(&info), 8786));

  /* NULL: zero, "" or NULL, never a crash */
  LC_CHECK_STR(lc_hostinfo_hostname(NULL), "");
  LC_CHECK_STR(lc_hostinfo_gpu_reason(NULL), "");
  LC_CHECK(lc_hostinfo_cores(NULL) == 0.0 && lc_hostinfo_memory_bytes(NULL) == 0);
  LC_CHECK(lc_hostinfo_gpu_count(NULL) == 0 && lc_hostinfo_gpu(NULL, 0) == NULL);
  LC_CHECK(lc_gpu_index(NULL) == -1 && lc_gpu_memory_bytes(NULL) == 0);
  LC_CHECK_STR(lc_gpu_uuid(NULL), "");
  LC_CHECK(lc_hostinfo_executable_count(NULL) == 0 && lc_hostinfo_executable(NULL, 0) == NULL);
  LC_CHECK(lc_hostinfo_listening(NULL) == NULL);
  lc_ports_free(listening);
}

/* ---- the real machine ---------------------------------------------------------------------- */

static void test_local(void) {
  lc_hostinfo *info = NULL;
  char *json = NULL;
  double cg = lc__cgroup_cpu_limit("/");
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  LC_REQUIRE_OK(lc_hostinfo_local(&info));
  LC_REQUIRE(info != NULL);
  fprintf(stderr, "  %s | %s | %s | %s | %g cores | %llu bytes | %zu GPU(s) from %s: %s\n",
          info->hostname, info->os, info->kernel, info->arch, info->cores,
          (unsigned long long)info->memory_bytes, info->gpu_count, info->gpu_source,
          info->gpu_reason);
  LC_CHECK(info->hostname[0] != '\0');
  LC_CHECK(info->os[0] != '\0');
  LC_CHECK(info->kernel[0] != '\0');
  LC_CHECK(info->arch[0] != '\0');
  /* Below one core only where a cgroup quota says so. */
  LC_CHECK(info->cores >= 1 || (cg > 0 && near(info->cores, cg)));
  LC_CHECK(info->cores > 0 && info->cores <= (double)online);
  LC_CHECK(info->memory_bytes > 0);
  LC_CHECK(info->memory_bytes <= lc__hostinfo_memtotal("/"));
  LC_CHECK(strcmp(info->gpu_source, "cuda") == 0 || strcmp(info->gpu_source, "nvml") == 0 ||
           strcmp(info->gpu_source, "none") == 0);
  LC_CHECK(info->gpu_count > 0 || info->gpu_reason[0] != '\0');
  LC_CHECK((info->gpu_count == 0) == (strcmp(info->gpu_source, "none") == 0));
  LC_CHECK_OK(lc_hostinfo_to_json(&json, info));
  LC_CHECK_CONTAINS(json, "\"arch\":\"");
  LC_CHECK_CONTAINS(json, info->arch);
  LC_CHECK(json && json[0] == '{' && json[strlen(json) - 1] == '}');
  lc_free(json);
  lc_hostinfo_free(info);
  lc_hostinfo_free(NULL);
  LC_CHECK(lc_hostinfo_local(NULL) == -EINVAL);
}

/* ---- GPUs without a GPU -------------------------------------------------------------------- */

/* Probes with the given CUDA runtime and NVML (NULL: none) in the given moods (NULL: default). */
static lc_hostinfo *probe_with_nvml(const char *cudart, const char *cuda_mode, const char *nvml,
                                    const char *nvml_mode) {
  lc_hostinfo *info = NULL;
  setenv("LC_CUDART_PATH", cudart, 1);
  setenv("LC_NVML_PATH", nvml ? nvml : "/nonexistent/libnvidia-ml.so.1", 1);
  if (cuda_mode)
    setenv("LC_FAKE_CUDA", cuda_mode, 1);
  if (nvml_mode)
    setenv("LC_FAKE_NVML", nvml_mode, 1);
  if (lc_hostinfo_local(&info) != 0)
    fprintf(stderr, "  lc_hostinfo_local failed: %s\n", lc_error_last());
  unsetenv("LC_CUDART_PATH");
  unsetenv("LC_NVML_PATH");
  unsetenv("LC_FAKE_CUDA");
  unsetenv("LC_FAKE_NVML");
  if (info)
    fprintf(stderr, "  %s -> %zu GPU(s), source %s, reason: %s\n", cudart, info->gpu_count,
            info->gpu_source, info->gpu_reason);
  return info;
}

static lc_hostinfo *probe_with(const char *cudart, const char *fake_mode) {
  return probe_with_nvml(cudart, fake_mode, NULL, NULL);
}

static void test_gpu_no_library(void) {
  lc_hostinfo *info = probe_with("/nonexistent/libcudart.so.99", NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0 && info->gpus == NULL);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "cannot load the CUDA runtime");
  LC_CHECK_CONTAINS(info->gpu_reason, "/nonexistent/libcudart.so.99");
  lc_hostinfo_free(info);
}

static void test_gpu_not_cuda(void) {
  lc_hostinfo *info = probe_with("libm.so.6", NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "libm.so.6 is not a CUDA runtime library");
  lc_hostinfo_free(info);
}

static const char *fake_cudart(void) {
  const char *p = getenv("LC_FAKE_CUDART");
#ifdef LC_FAKE_CUDART
  if (p == NULL)
    p = LC_FAKE_CUDART;
#endif
  return p;
}

static const char *fake_nvml(void) {
  const char *p = getenv("LC_FAKE_NVML_LIB");
#ifdef LC_FAKE_NVML
  if (p == NULL)
    p = LC_FAKE_NVML;
#endif
  return p;
}

static void test_gpu_fake_devices(void) {
  lc_hostinfo *info;
  char *json = NULL;
  LC_REQUIRE(fake_cudart() != NULL);
  info = probe_with(fake_cudart(), "2");
  LC_REQUIRE(info != NULL);
  LC_REQUIRE(info->gpu_count == 2);
  LC_CHECK_STR(info->gpu_source, "cuda");
  LC_CHECK_STR(info->gpu_reason, "");
  LC_CHECK(info->gpus[0].index == 0 && info->gpus[1].index == 1);
  LC_CHECK_STR(info->gpus[0].name, "Fake GPU \"Zero\"");
  LC_CHECK_STR(info->gpus[1].name, "Fake GPU One");
  LC_CHECK_STR(info->gpus[0].uuid, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  LC_CHECK_STR(info->gpus[1].uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
  LC_CHECK(info->gpus[0].memory_bytes == 16 * GIB);
  LC_CHECK(info->gpus[1].memory_bytes == 32 * GIB);
  LC_CHECK_OK(lc_hostinfo_to_json(&json, info));
  LC_CHECK_CONTAINS(json, "{\"index\":0,\"uuid\":\"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f\","
                          "\"name\":\"Fake GPU \\\"Zero\\\"\",\"memory_bytes\":17179869184}");
  LC_CHECK_CONTAINS(json, "\"gpu_source\":\"cuda\"");
  lc_free(json);
  lc_hostinfo_free(info);
}

/* Runtimes whose cudaDeviceProp layout is not known: the name only. */
static void test_gpu_fake_unknown_layout(void) {
  static const char *const versions[] = {"9020", "14000"};
  for (size_t i = 0; i < LC_ARRAY_SIZE(versions); i++) {
    lc_hostinfo *info;
    LC_REQUIRE(fake_cudart() != NULL);
    setenv("LC_FAKE_CUDA_VERSION", versions[i], 1);
    info = probe_with(fake_cudart(), "2");
    unsetenv("LC_FAKE_CUDA_VERSION");
    LC_REQUIRE(info != NULL && info->gpu_count == 2);
    LC_CHECK_STR(info->gpus[1].name, "Fake GPU One");
    LC_CHECK_STR(info->gpus[1].uuid, "");
    LC_CHECK(info->gpus[1].memory_bytes == 0);
    lc_hostinfo_free(info);
  }
}

static void test_gpu_fake_errors(void) {
  static const struct {
    const char *mode, *want1, *want2;
  } cases[] = {
      {"35", "CUDA driver is missing or older than the runtime",
       "(cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime "
       "version)"},
      {"100", "no CUDA device", "(cudaErrorNoDevice: no CUDA-capable device is detected)"},
      {"0", "no CUDA device", "cudaErrorNoDevice"},
      {"999", "CUDA runtime failed", "(cudaErrorUnknown: unrecognized error code)"},
  };
  LC_REQUIRE(fake_cudart() != NULL);
  for (size_t i = 0; i < LC_ARRAY_SIZE(cases); i++) {
    lc_hostinfo *info = probe_with(fake_cudart(), cases[i].mode);
    LC_REQUIRE(info != NULL);
    LC_CHECK(info->gpu_count == 0 && info->gpus == NULL);
    LC_CHECK_STR(info->gpu_source, "none");
    LC_CHECK_CONTAINS(info->gpu_reason, cases[i].want1);
    LC_CHECK_CONTAINS(info->gpu_reason, cases[i].want2);
    lc_hostinfo_free(info);
  }
}

/* With a working runtime, NVML (matched by PCI bus id) supplies the UUID and fills only what the
 * runtime left empty. */
static void test_gpu_nvml_enriches_cuda(void) {
  lc_hostinfo *info;
  LC_REQUIRE(fake_cudart() != NULL && fake_nvml() != NULL);
  info = probe_with_nvml(fake_cudart(), "2", fake_nvml(), "3");
  LC_REQUIRE(info != NULL && info->gpu_count == 2);
  LC_CHECK_STR(info->gpu_source, "cuda");
  LC_CHECK_STR(info->gpus[1].name, "Fake GPU One");
  LC_CHECK_STR(info->gpus[1].uuid, "GPU-f0000001-0000-0000-0000-000000000001");
  LC_CHECK(info->gpus[1].memory_bytes == 32 * GIB);
  lc_hostinfo_free(info);
  /* A runtime whose layout is unknown gives only names; NVML gives the rest. */
  setenv("LC_FAKE_CUDA_VERSION", "14000", 1);
  info = probe_with_nvml(fake_cudart(), "2", fake_nvml(), "3");
  unsetenv("LC_FAKE_CUDA_VERSION");
  LC_REQUIRE(info != NULL && info->gpu_count == 2);
  LC_CHECK_STR(info->gpus[0].name, "Fake GPU \"Zero\"");
  LC_CHECK_STR(info->gpus[0].uuid, "GPU-f0000000-0000-0000-0000-000000000000");
  LC_CHECK(info->gpus[0].memory_bytes == 10 * GIB);
  lc_hostinfo_free(info);
}

/* No working runtime: NVML lists the GPUs, and says why CUDA did not. */
static void test_gpu_nvml_fallback(void) {
  lc_hostinfo *info;
  LC_REQUIRE(fake_cudart() != NULL && fake_nvml() != NULL);
  info = probe_with_nvml(fake_cudart(), "35", fake_nvml(), "3");
  LC_REQUIRE(info != NULL && info->gpu_count == 3);
  LC_CHECK_STR(info->gpu_source, "nvml");
  LC_CHECK_CONTAINS(info->gpu_reason, "listed by NVML; CUDA driver is missing or older");
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof(name), "Fake NVML %d", i);
    LC_CHECK(info->gpus[i].index == i);
    LC_CHECK_STR(info->gpus[i].name, name);
    LC_CHECK(info->gpus[i].memory_bytes == (uint64_t)(i + 1) * 10 * GIB);
  }
  lc_hostinfo_free(info);

  /* CUDA_VISIBLE_DEVICES picks and renumbers, as CUDA would. */
  setenv("CUDA_VISIBLE_DEVICES", "2,GPU-f0000000", 1);
  info = probe_with_nvml("/nonexistent/libcudart.so", NULL, fake_nvml(), "3");
  unsetenv("CUDA_VISIBLE_DEVICES");
  LC_REQUIRE(info != NULL && info->gpu_count == 2);
  LC_CHECK_STR(info->gpu_source, "nvml");
  LC_CHECK(info->gpus[0].index == 0 && info->gpus[1].index == 1);
  LC_CHECK_STR(info->gpus[0].name, "Fake NVML 2");
  LC_CHECK_STR(info->gpus[1].name, "Fake NVML 0");
  lc_hostinfo_free(info);

  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  info = probe_with_nvml("/nonexistent/libcudart.so", NULL, fake_nvml(), "3");
  unsetenv("CUDA_VISIBLE_DEVICES");
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "none of them in CUDA_VISIBLE_DEVICES");
  lc_hostinfo_free(info);
}

static void test_gpu_nvml_failures(void) {
  lc_hostinfo *info;
  LC_REQUIRE(fake_cudart() != NULL && fake_nvml() != NULL);
  info = probe_with_nvml(fake_cudart(), "35", fake_nvml(), "9");
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "cudaErrorInsufficientDriver");
  LC_CHECK_CONTAINS(info->gpu_reason, "; NVML error 9: Driver Not Loaded");
  lc_hostinfo_free(info);

  info = probe_with_nvml(fake_cudart(), "35", fake_nvml(), "0");
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_CONTAINS(info->gpu_reason, "; NVML lists no GPU");
  lc_hostinfo_free(info);

  info = probe_with_nvml("/nonexistent/libcudart.so", NULL, "libm.so.6", NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_CONTAINS(info->gpu_reason, "; libm.so.6 is not an NVML library");
  lc_hostinfo_free(info);
}

static void test_gpu_uuid_format(void) {
  unsigned char zero[16] = {0}, b[16];
  char buf[64] = "x";
  for (int i = 0; i < 16; i++)
    b[i] = (unsigned char)(0xf0 + i);
  lc__gpu_uuid_format(buf, sizeof(buf), zero);
  LC_CHECK_STR(buf, "");
  lc__gpu_uuid_format(buf, sizeof(buf), b);
  LC_CHECK_STR(buf, "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
}

static void test_gpu_visible_devices(void) {
  const char *uuids[] = {"GPU-aa11-0000", "GPU-bb22-0000", "GPU-bb33-0000"};
  size_t out[3], n;
  n = lc__gpu_visible_select(NULL, uuids, 3, out);
  LC_CHECK(n == 3 && out[0] == 0 && out[1] == 1 && out[2] == 2);
  n = lc__gpu_visible_select("2,0", uuids, 3, out);
  LC_CHECK(n == 2 && out[0] == 2 && out[1] == 0);
  n = lc__gpu_visible_select(" 1 , 2", uuids, 3, out);
  LC_CHECK(n == 2 && out[0] == 1 && out[1] == 2);
  LC_CHECK(lc__gpu_visible_select("", uuids, 3, out) == 0);
  LC_CHECK(lc__gpu_visible_select("-1", uuids, 3, out) == 0);
  LC_CHECK(lc__gpu_visible_select("NoDevFiles", uuids, 3, out) == 0);
  /* The list ends at the first entry that names no device, or one already named. */
  n = lc__gpu_visible_select("0,7,1", uuids, 3, out);
  LC_CHECK(n == 1 && out[0] == 0);
  n = lc__gpu_visible_select("1,1,0", uuids, 3, out);
  LC_CHECK(n == 1 && out[0] == 1);
  /* UUID prefixes, with or without "GPU-"; an ambiguous prefix names nothing. */
  n = lc__gpu_visible_select("GPU-bb33,aa", uuids, 3, out);
  LC_CHECK(n == 2 && out[0] == 2 && out[1] == 0);
  n = lc__gpu_visible_select("0,GPU-bb", uuids, 3, out);
  LC_CHECK(n == 1 && out[0] == 0);
}

/* The entry that names the device a process under the list numbers k, as the list names it. */
static void test_gpu_visible_entry(void) {
  char e[16];
  LC_CHECK(lc__gpu_visible_entry(" 3 , GPU-bb33,1", 0, e, sizeof(e)) == 0);
  LC_CHECK_STR(e, "3");
  LC_CHECK(lc__gpu_visible_entry(" 3 , GPU-bb33,1", 1, e, sizeof(e)) == 0);
  LC_CHECK_STR(e, "GPU-bb33");
  LC_CHECK(lc__gpu_visible_entry(" 3 , GPU-bb33,1", 2, e, sizeof(e)) == 0);
  LC_CHECK_STR(e, "1");
  LC_CHECK(lc__gpu_visible_entry(" 3 , GPU-bb33,1", 3, e, sizeof(e)) == -1);
  LC_CHECK(lc__gpu_visible_entry("3", -1, e, sizeof(e)) == -1);
  LC_CHECK(lc__gpu_visible_entry("", 0, e, sizeof(e)) == -1);
  LC_CHECK(lc__gpu_visible_entry("0,,1", 1, e, sizeof(e)) == -1); /* an empty entry names none */
  LC_CHECK(lc__gpu_visible_entry("GPU-0123456789abcdef", 0, e, sizeof(e)) == -1); /* no room */
  LC_CHECK(lc__gpu_visible_entry(NULL, 0, e, sizeof(e)) == -1);
}

LC_TEST_MAIN(LC_TEST(test_os_release), LC_TEST(test_os_release_quoting),
             LC_TEST(test_os_release_fallbacks), LC_TEST(test_meminfo), LC_TEST(test_cgroup_v1),
             LC_TEST(test_cgroup_v1_unlimited), LC_TEST(test_cgroup_v1_parent_limit),
             LC_TEST(test_cgroup_v1_container_mount), LC_TEST(test_cgroup_v1_foreign_path),
             LC_TEST(test_cgroup_hybrid), LC_TEST(test_cgroup_v2), LC_TEST(test_cgroup_v2_max),
             LC_TEST(test_cgroup_v2_namespace_root), LC_TEST(test_cgroup_mount_with_space),
             LC_TEST(test_cgroup_no_mountinfo), LC_TEST(test_cgroup_none),
             LC_TEST(test_cores_and_memory_caps), LC_TEST(test_affinity),
             LC_TEST(test_json_escaping), LC_TEST(test_json_object), LC_TEST(test_accessors),
             LC_TEST(test_local), LC_TEST(test_gpu_no_library), LC_TEST(test_gpu_not_cuda),
             LC_TEST(test_gpu_fake_devices), LC_TEST(test_gpu_fake_unknown_layout),
             LC_TEST(test_gpu_fake_errors), LC_TEST(test_gpu_nvml_enriches_cuda),
             LC_TEST(test_gpu_nvml_fallback), LC_TEST(test_gpu_nvml_failures),
             LC_TEST(test_gpu_uuid_format), LC_TEST(test_gpu_visible_devices),
             LC_TEST(test_gpu_visible_entry))
