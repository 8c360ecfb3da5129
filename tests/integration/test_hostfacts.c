/*
 * test_hostfacts.c - host facts in one round trip on real SSH test hosts: what lab1 reports
 * (its name, cores, memory, arch, the executables asked, its sshd's port, GPUs none with a
 * reason), the local runtime against lc_hostinfo_local, a host whose link is down (the timeout
 * and the host in the message), and a host whose sshd runs in a cgroup with a CPU quota of half a
 * core and a 512 MiB memory limit (v1 cpu.cfs_quota_us / memory.limit_in_bytes where those
 * controllers are mounted, else v2 cpu.max / memory.max), which a new connection reports and an
 * older one does not. The sshd is moved back and the cgroups removed even when a check fails.
 */
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#define MIB (UINT64_C(1) << 20)
#define CG_HOST 2 /* the host whose sshd goes into the cgroup */

static lc_engine *engine;

static int near(double a, double b) { return a > b - 1e-6 && a < b + 1e-6; }

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static lc_engine *eng(void) {
  if (engine == NULL && lc_engine_new(&engine, NULL) != 0) {
    fprintf(stderr, "FATAL: lc_engine_new: %s\n", lc_error_last());
    exit(2);
  }
  return engine;
}

static lc_runtime *connect_host(const char *name) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  if (lc_runtime_new_ssh(&rt, eng(), name, &o) != 0)
    fprintf(stderr, "  connect %s: %s\n", name, lc_error_last());
  return rt;
}

static lc_hostinfo *facts(lc_runtime *rt, const char *const *exes) {
  lc_hostinfo *info = NULL;
  uint64_t t0 = now_ms();
  int r = lc_runtime_hostinfo(&info, rt, exes, 0);
  if (r != 0) {
    fprintf(stderr, "  lc_runtime_hostinfo(%s): %s: %s\n", lc_runtime_name(rt), lc_err_name(r),
            lc_error_last());
    return NULL;
  }
  fprintf(stderr,
          "  %s in %llu ms: %s | %s | %s | %s | %g cores | %llu bytes | %zu listening | "
          "%zu GPU(s) from %s: %s\n",
          lc_runtime_name(rt), (unsigned long long)(now_ms() - t0), lc_hostinfo_hostname(info),
          lc_hostinfo_os(info), lc_hostinfo_kernel(info), lc_hostinfo_arch(info),
          lc_hostinfo_cores(info), (unsigned long long)lc_hostinfo_memory_bytes(info),
          lc_ports_count(lc_hostinfo_listening(info)), lc_hostinfo_gpu_count(info),
          lc_hostinfo_gpu_source(info), lc_hostinfo_gpu_reason(info));
  return info;
}

/* Whether name is in one of the directories of sshd's default PATH (the hosts share this
 * machine's file system). */
static int on_host_path(const char *name) {
  static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                     "/usr/bin",        "/sbin",          "/bin"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
    if (access(path, X_OK) == 0)
      return 1;
  }
  return 0;
}

static void test_facts_lab1(void) {
  const char *exes[] = {"sh", "no-such-exe", NULL};
  lc_runtime *rt = connect_host("lab1");
  lc_hostinfo *info = NULL;
  struct utsname u;
  LC_REQUIRE(rt != NULL);
  info = facts(rt, exes);
  LC_CHECK(info != NULL);
  if (info == NULL)
    goto out;
  LC_CHECK(uname(&u) == 0);
  LC_CHECK_STR(lc_hostinfo_hostname(info), "lab1");
  LC_CHECK_STR(lc_hostinfo_arch(info), u.machine);
  LC_CHECK_STR(lc_hostinfo_kernel(info), u.release); /* the hosts share this machine's kernel */
  LC_CHECK(lc_hostinfo_os(info)[0] != '\0');
  LC_CHECK(lc_hostinfo_cores(info) >= 1);
  LC_CHECK(lc_hostinfo_memory_bytes(info) > 0);
  LC_CHECK(lc_hostinfo_has_executable(info, "sh") == 1);
  LC_CHECK(lc_hostinfo_executable_count(info) == 2 &&
           lc_hostinfo_executable_path(info, 0) != NULL &&
           lc_hostinfo_executable_path(info, 0)[0] == '/');
  LC_CHECK(lc_hostinfo_has_executable(info, "no-such-exe") == 0);
  LC_CHECK(lc_hostinfo_listening(info) != NULL);
  LC_CHECK(lc_ports_contains(lc_hostinfo_listening(info), 22));
  if (!on_host_path("lazyclusterctl") && !on_host_path("nvidia-smi")) {
    LC_CHECK(lc_hostinfo_gpu_count(info) == 0 && lc_hostinfo_gpu(info, 0) == NULL);
    LC_CHECK_STR(lc_hostinfo_gpu_source(info), "none");
    LC_CHECK_STR(lc_hostinfo_gpu_reason(info),
                 "neither lazyclusterctl nor nvidia-smi is on the host's PATH");
  } else {
    /* a GPU machine: whatever its tools say, with a reason when there is no GPU */
    LC_CHECK(lc_hostinfo_gpu_source(info)[0] != '\0');
    LC_CHECK(lc_hostinfo_gpu_count(info) > 0 || lc_hostinfo_gpu_reason(info)[0] != '\0');
  }
out:
  lc_hostinfo_free(info);
  lc_runtime_free(rt);
}

/* The script through the local runtime says what lc_hostinfo_local says. */
static void test_facts_local(void) {
  lc_runtime *rt = NULL;
  lc_hostinfo *info = NULL, *local = NULL;
  LC_REQUIRE_OK(lc_runtime_new_local(&rt, eng(), NULL));
  info = facts(rt, NULL);
  LC_CHECK(info != NULL);
  LC_CHECK_OK(lc_hostinfo_local(&local));
  if (info && local) {
    LC_CHECK_STR(lc_hostinfo_hostname(info), lc_hostinfo_hostname(local));
    LC_CHECK_STR(lc_hostinfo_os(info), lc_hostinfo_os(local));
    LC_CHECK(near(lc_hostinfo_cores(info), lc_hostinfo_cores(local)));
    LC_CHECK(lc_hostinfo_memory_bytes(info) == lc_hostinfo_memory_bytes(local));
    LC_CHECK(lc_hostinfo_executable_count(info) == 0);
  }
  lc_hostinfo_free(info);
  lc_hostinfo_free(local);
  lc_runtime_free(rt);
  LC_CHECK(lc_runtime_hostinfo(NULL, NULL, NULL, 0) == -EINVAL);
  LC_CHECK(lc_runtime_hostinfo(&info, NULL, NULL, 0) == -EINVAL);
}

/* The link goes down under an open connection: -ETIMEDOUT within the timeout, naming the host. */
static void test_facts_timeout(void) {
  lc_runtime *rt = connect_host("lab3");
  lc_hostinfo *info = NULL;
  uint64_t t0, took;
  int r;
  LC_REQUIRE(rt != NULL);
  LC_REQUIRE(th_run("link-down 3") == 0);
  t0 = now_ms();
  r = lc_runtime_hostinfo(&info, rt, NULL, 1500);
  took = now_ms() - t0;
  LC_CHECK(th_run("link-up 3") == 0);
  fprintf(stderr, "  link down: %s after %llu ms: %s\n", lc_err_name(r), (unsigned long long)took,
          lc_error_last());
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK(info == NULL);
  LC_CHECK(took >= 1400 && took < 6000);
  LC_CHECK_CONTAINS(lc_error_last(), "lab3: host facts: no answer within 1.5 s");
  lc_runtime_free(rt);
}

/* ---- a host in a cgroup -------------------------------------------------------------------- */

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;
  size_t len = strlen(text);
  if (fd < 0)
    return -errno;
  if (write(fd, text, len) != (ssize_t)len)
    r = -errno;
  close(fd);
  if (r < 0)
    fprintf(stderr, "  writing '%s' to %s: %s\n", text, path, strerror(-r));
  return r;
}

static int read_text(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t got;
  if (f == NULL)
    return -errno;
  got = fread(buf, 1, n - 1, f);
  buf[got] = '\0';
  fclose(f);
  return 0;
}

/* The mount point of the v1 hierarchy with controller, or of the v2 one (controller NULL). */
static int cgroup_mount(const char *controller, char *out, size_t n) {
  char line[4096];
  FILE *f = fopen("/proc/self/mountinfo", "r");
  int r = -ENOENT;
  if (f == NULL)
    return -errno;
  while (r < 0 && fgets(line, sizeof(line), f) != NULL) {
    char point[PATH_MAX], *sep = strstr(line, " - "), type[64], super[1024];
    if (sep == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
        sscanf(sep + 3, "%63s %*s %1023s", type, super) != 2)
      continue;
    if (controller == NULL ? strcmp(type, "cgroup2") == 0 : strcmp(type, "cgroup") == 0) {
      char list[1100];
      snprintf(list, sizeof(list), ",%s,", super);
      if (controller != NULL) {
        char want[64];
        snprintf(want, sizeof(want), ",%s,", controller);
        if (strstr(list, want) == NULL)
          continue;
      }
      snprintf(out, n, "%s", point);
      r = 0;
    }
  }
  fclose(f);
  return r;
}

/* pid's cgroup path in the v1 hierarchy with controller, or in v2 (controller NULL). */
static int cgroup_of(pid_t pid, const char *controller, char *out, size_t n) {
  char path[64], line[4096];
  FILE *f;
  int r = -ENOENT;
  snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    return -errno;
  while (r < 0 && fgets(line, sizeof(line), f) != NULL) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, list[1100], want[64];
    if (c2 == NULL)
      continue;
    *c2 = '\0';
    line[strcspn(line, ":")] = '\0';
    c2[1 + strcspn(c2 + 1, "\n")] = '\0';
    snprintf(list, sizeof(list), ",%s,", c1 + 1);
    snprintf(want, sizeof(want), ",%s,", controller ? controller : "");
    if (controller == NULL ? strcmp(line, "0") == 0 && c1[1] == '\0' : strstr(list, want) != NULL) {
      snprintf(out, n, "%s", c2 + 1);
      r = 0;
    }
  }
  fclose(f);
  return r;
}

/* Where sshd lived, and what the test made. */
typedef struct cg_setup {
  pid_t pid;
  int ndirs;
  char home[2][PATH_MAX]; /* the cgroups sshd came from: v1 cpu and memory, or v2 alone */
  char dir[2][PATH_MAX];  /* the cgroups made (under home) */
  int moved[2];
} cg_setup;

/* Removes leftovers of a run that crashed (empty lc-test-facts-* cgroups under home). */
static void remove_stale(const char *home) {
  char cmd[PATH_MAX + 128];
  snprintf(cmd, sizeof(cmd),
           "for d in '%s'/lc-test-facts-*; do [ -d \"$d\" ] && rmdir \"$d\"; "
           "done 2>/dev/null; true",
           home);
  if (system(cmd) != 0)
    fprintf(stderr, "  could not look for stale cgroups under %s\n", home);
}

/* Makes the cgroup(s) with the limits and moves sshd there. */
static int cg_enter(cg_setup *cg) {
  char mcpu[PATH_MAX], mmem[PATH_MAX], m2[PATH_MAX], rel[PATH_MAX], path[PATH_MAX * 2 + 64];
  char name[64];
  int r;
  snprintf(name, sizeof(name), "lc-test-facts-%d", (int)getpid());
  if (cgroup_mount("cpu", mcpu, sizeof(mcpu)) == 0 &&
      cgroup_mount("memory", mmem, sizeof(mmem)) == 0) {
    /* v1: one cgroup in each hierarchy, below sshd's own */
    const char *mounts[2] = {mcpu, mmem}, *controllers[2] = {"cpu", "memory"};
    fprintf(stderr, "  cgroup v1: cpu at %s, memory at %s\n", mcpu, mmem);
    for (int i = 0; i < 2; i++) {
      if ((r = cgroup_of(cg->pid, controllers[i], rel, sizeof(rel))) < 0)
        return r;
      snprintf(cg->home[i], sizeof(cg->home[i]), "%s%s", mounts[i], strcmp(rel, "/") ? rel : "");
      remove_stale(cg->home[i]);
      snprintf(cg->dir[i], sizeof(cg->dir[i]), "%s/%s", cg->home[i], name);
      if (mkdir(cg->dir[i], 0755) < 0) {
        fprintf(stderr, "  mkdir %s: %s\n", cg->dir[i], strerror(errno));
        return -errno;
      }
      cg->ndirs = i + 1;
    }
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", cg->dir[0]);
    if ((r = write_text(path, "100000")) < 0)
      return r;
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", cg->dir[0]);
    if ((r = write_text(path, "50000")) < 0)
      return r;
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", cg->dir[1]);
    if ((r = write_text(path, "536870912")) < 0)
      return r;
  } else if (cgroup_mount(NULL, m2, sizeof(m2)) == 0) {
    /* v2: a cgroup at the top, where the no-internal-process rule does not apply */
    char controllers[1024] = "";
    fprintf(stderr, "  cgroup v2 at %s\n", m2);
    snprintf(path, sizeof(path), "%s/cgroup.controllers", m2);
    read_text(path, controllers, sizeof(controllers));
    if (strstr(controllers, "cpu") == NULL || strstr(controllers, "memory") == NULL) {
      fprintf(stderr, "  FATAL: no cpu and memory controllers in v1 or v2 (v2 has '%s')\n",
              controllers);
      return -ENOTSUP;
    }
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", m2);
    write_text(path, "+cpu +memory"); /* usually on already */
    if ((r = cgroup_of(cg->pid, NULL, rel, sizeof(rel))) < 0)
      return r;
    snprintf(cg->home[0], sizeof(cg->home[0]), "%s%s", m2, strcmp(rel, "/") ? rel : "");
    remove_stale(m2);
    snprintf(cg->dir[0], sizeof(cg->dir[0]), "%s/%s", m2, name);
    if (mkdir(cg->dir[0], 0755) < 0) {
      fprintf(stderr, "  mkdir %s: %s\n", cg->dir[0], strerror(errno));
      return -errno;
    }
    cg->ndirs = 1;
    snprintf(path, sizeof(path), "%s/cpu.max", cg->dir[0]);
    if ((r = write_text(path, "50000 100000")) < 0)
      return r;
    snprintf(path, sizeof(path), "%s/memory.max", cg->dir[0]);
    if ((r = write_text(path, "536870912")) < 0)
      return r;
  } else {
    fprintf(stderr, "  FATAL: no cgroup file system mounted\n");
    return -ENOTSUP;
  }
  for (int i = 0; i < cg->ndirs; i++) {
    char pid[32];
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dir[i]);
    snprintf(pid, sizeof(pid), "%d", (int)cg->pid);
    if ((r = write_text(path, pid)) < 0)
      return r;
    cg->moved[i] = 1;
  }
  return 0;
}

/* Moves sshd (and whatever else is left in the test's cgroups) back and removes them. */
static int cg_leave(cg_setup *cg) {
  char path[PATH_MAX + 32], pid[32];
  int ok = 1;
  for (int i = 0; i < cg->ndirs; i++) {
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->home[i]);
    snprintf(pid, sizeof(pid), "%d", (int)cg->pid);
    if (cg->moved[i] && write_text(path, pid) < 0)
      ok = 0;
  }
  for (int i = 0; i < cg->ndirs; i++) {
    int removed = 0;
    for (int k = 0; k < 100 && !removed; k++) {
      char procs[8192] = "", inner[PATH_MAX + 32], *save = NULL;
      snprintf(inner, sizeof(inner), "%s/cgroup.procs", cg->dir[i]);
      read_text(inner, procs, sizeof(procs));
      for (char *t = strtok_r(procs, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
        snprintf(path, sizeof(path), "%s/cgroup.procs", cg->home[i]);
        write_text(path, t); /* a session process that is still ending */
      }
      if (rmdir(cg->dir[i]) == 0)
        removed = 1;
      else
        usleep(100000);
    }
    if (!removed) {
      fprintf(stderr, "  could not remove %s: %s\n", cg->dir[i], strerror(errno));
      ok = 0;
    }
  }
  return ok ? 0 : -EBUSY;
}

static void test_facts_cgroup(void) {
  char pidfile[PATH_MAX], text[64], host[16];
  cg_setup cg;
  lc_runtime *before_rt = NULL, *rt = NULL, *after_rt = NULL;
  lc_hostinfo *before = NULL, *inside = NULL, *old_conn = NULL, *after = NULL;
  double want_cores;
  uint64_t want_memory;
  memset(&cg, 0, sizeof(cg));
  snprintf(host, sizeof(host), "lab%d", CG_HOST);
  snprintf(pidfile, sizeof(pidfile), "%s/hosts/%d/sshd.pid", th_dir(), CG_HOST);
  LC_REQUIRE(read_text(pidfile, text, sizeof(text)) == 0);
  cg.pid = (pid_t)th_pid_here(CG_HOST, atol(text)); /* sshd.pid holds the host's own count */
  LC_REQUIRE(cg.pid > 1);

  before_rt = connect_host(host);
  LC_REQUIRE(before_rt != NULL);
  before = facts(before_rt, NULL);
  LC_CHECK(before != NULL);
  if (before == NULL)
    goto out;
  want_cores = lc_hostinfo_cores(before) < 0.5 ? lc_hostinfo_cores(before) : 0.5;
  want_memory =
      lc_hostinfo_memory_bytes(before) < 512 * MIB ? lc_hostinfo_memory_bytes(before) : 512 * MIB;

  if (cg_enter(&cg) < 0) {
    LC_CHECK(!"the cgroup could be set up");
    goto out;
  }
  /* A new connection: its session is forked from the sshd, in the cgroup. */
  rt = connect_host(host);
  LC_CHECK(rt != NULL);
  if (rt && (inside = facts(rt, NULL)) != NULL) {
    LC_CHECK(near(lc_hostinfo_cores(inside), want_cores));
    LC_CHECK(lc_hostinfo_memory_bytes(inside) == want_memory);
    LC_CHECK(lc_hostinfo_memory_bytes(inside) == 512 * MIB);
    LC_CHECK(near(lc_hostinfo_cores(inside), 0.5));
  }
  LC_CHECK(inside != NULL);
  /* The connection made before keeps its session where it was. */
  old_conn = facts(before_rt, NULL);
  LC_CHECK(old_conn != NULL);
  if (old_conn) {
    LC_CHECK(near(lc_hostinfo_cores(old_conn), lc_hostinfo_cores(before)));
    LC_CHECK(lc_hostinfo_memory_bytes(old_conn) == lc_hostinfo_memory_bytes(before));
  }

out:
  lc_runtime_free(rt);
  lc_runtime_free(before_rt);
  if (cg.ndirs > 0)
    LC_CHECK(cg_leave(&cg) == 0);
  /* Back as it was, for the tests after this one. */
  if (before) {
    after_rt = connect_host(host);
    LC_CHECK(after_rt != NULL);
    if (after_rt && (after = facts(after_rt, NULL)) != NULL) {
      LC_CHECK(near(lc_hostinfo_cores(after), lc_hostinfo_cores(before)));
      LC_CHECK(lc_hostinfo_memory_bytes(after) == lc_hostinfo_memory_bytes(before));
    }
    lc_runtime_free(after_rt);
  }
  lc_hostinfo_free(before);
  lc_hostinfo_free(inside);
  lc_hostinfo_free(old_conn);
  lc_hostinfo_free(after);
}

static void test_done(void) {
  lc_engine_free(engine);
  engine = NULL;
}

LC_TEST_MAIN(LC_TEST(test_facts_lab1), LC_TEST(test_facts_local), LC_TEST(test_facts_timeout),
             LC_TEST(test_facts_cgroup), LC_TEST(test_done))
