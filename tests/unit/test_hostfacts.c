/*
 * test_hostfacts.c - host facts in one round trip, without a host: the parser on recorded script
 * output (cgroup v1, v2, hybrid, unlimited; executables; listening ports; the probe's JSON;
 * nvidia-smi's CSV and its failures), the script itself run by this machine's /bin/sh (also with
 * fake lazyclusterctl and nvidia-smi on its PATH), declared GPUs, and inventory files and host
 * lists with every message they give.
 */
#include "hostfacts.h"
#include "hostinfo_internal.h"
#include "lazycluster/inventory.h"
#include "lc_test.h"
#include "ports_internal.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static int near(double a, double b) { return a > b - 1e-9 && a < b + 1e-9; }

/* Parses text (as the script's stdout) into a new hostinfo; NULL and *rc < 0 on failure. */
static lc_hostinfo *parse(const char *text, const char *const *exes, int *rc, lc__err *err) {
  lc_hostinfo *info = calloc(1, sizeof(*info));
  lc__err e = {0};
  int r = lc__hostfacts_parse(info, text, strlen(text), exes, err ? err : &e);
  if (rc)
    *rc = r;
  if (r < 0) {
    if (!err)
      fprintf(stderr, "  parse failed: %d %s\n", r, e.msg);
    lc_hostinfo_free(info);
    return NULL;
  }
  return info;
}

/* ---- recorded script output ---------------------------------------------------------------- */

#define HEAD                                                                                       \
  "@@LCF begin 1\n"                                                                                \
  "@@LCF uname Linux node7 6.1.0-18-amd64 x86_64\n"

#define OS_DEBIAN                                                                                  \
  "@@LCF file /etc/os-release\n"                                                                   \
  "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"                                               \
  "NAME=\"Debian GNU/Linux\"\n"                                                                    \
  "ID=debian\n"

#define MEM_64G                                                                                    \
  "@@LCF file /proc/meminfo\n"                                                                     \
  "MemTotal: 65831196 kB\n"

/* /proc/net/tcp and tcp6 as `cat` prints them: sshd on 22 (v4 and v6), a service on 127.0.0.1:5432,
 * an established connection from 22 (not listening) and a v6-only listener on 8786. */
#define TCP                                                                                        \
  "@@LCF tcp\n"                                                                                    \
  "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "    \
  "inode\n"                                                                                        \
  "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "    \
  "18424 1 0000000000000000 100 0 0 10 0\n"                                                        \
  "   1: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 "    \
  "21933 1 0000000000000000 100 0 0 10 0\n"                                                        \
  "   2: 0B0012C6:0016 010012C6:D2F4 01 00000000:00000000 02:0009C5B1 00000000     0        0 "    \
  "95123 4 0000000000000000 20 4 31 10 -1\n"                                                       \
  "  sl  local_address                         remote_address                        st tx_queue " \
  "rx_queue tr tm->when retrnsmt   uid  timeout inode\n"                                           \
  "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A "          \
  "00000000:00000000 00:00000000 00000000     0        0 18426 1 0000000000000000 100 0 0 10 0\n"  \
  "   1: 00000000000000000000000000000000:2252 00000000000000000000000000000000:0000 0A "          \
  "00000000:00000000 00:00000000 00000000  1000        0 40112 1 0000000000000000 100 0 0 10 0\n"

#define GPU_NONE "@@LCF gpu none\n"
#define END "@@LCF end\n"

/* cgroup v1 (CentOS 7, Debian 10): a Slurm-like job cgroup with 1.5 CPUs and 2 GiB. */
static const char v1_output[] =
    HEAD "@@LCF online 0-15\n"
         "@@LCF allowed 0-15\n" MEM_64G OS_DEBIAN "@@LCF file /proc/self/cgroup\n"
         "11:pids:/slurm/uid_1000/job_77\n"
         "4:cpu,cpuacct:/slurm/uid_1000/job_77\n"
         "3:memory:/slurm/uid_1000/job_77\n"
         "1:name=systemd:/user.slice\n"
         "@@LCF file /proc/self/mountinfo\n"
         "25 18 0:22 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd\n"
         "28 18 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
         "29 18 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_77\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_77/cpu.cfs_quota_us\n"
         "150000\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_77/cpu.cfs_period_us\n"
         "100000\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/cpu.cfs_quota_us\n"
         "-1\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/cpu.cfs_period_us\n"
         "100000\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct/slurm\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us\n"
         "-1\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us\n"
         "100000\n"
         "@@LCF dir /sys/fs/cgroup/memory/slurm/uid_1000/job_77\n"
         "@@LCF file /sys/fs/cgroup/memory/slurm/uid_1000/job_77/memory.limit_in_bytes\n"
         "2147483648\n"
         "@@LCF dir /sys/fs/cgroup/memory/slurm/uid_1000\n"
         "@@LCF file /sys/fs/cgroup/memory/slurm/uid_1000/memory.limit_in_bytes\n"
         "9223372036854771712\n"
         "@@LCF dir /sys/fs/cgroup/memory/slurm\n"
         "@@LCF dir /sys/fs/cgroup/memory\n"
         "@@LCF file /sys/fs/cgroup/memory/memory.limit_in_bytes\n"
         "9223372036854771712\n"
         "@@LCF exe 0 /usr/bin/python3\n"
         "@@LCF exe 1 \n" TCP GPU_NONE END;

static void test_parse_v1(void) {
  const char *exes[] = {"python3", "torchrun", NULL};
  lc_hostinfo *info = parse(v1_output, exes, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK_STR(info->hostname, "node7");
  LC_CHECK_STR(info->kernel, "6.1.0-18-amd64");
  LC_CHECK_STR(info->arch, "x86_64");
  LC_CHECK_STR(info->os, "Debian GNU/Linux 12 (bookworm)");
  LC_CHECK(near(info->cores, 1.5));
  LC_CHECK(info->memory_bytes == 2 * GIB);
  LC_REQUIRE(info->executable_count == 2);
  LC_CHECK_STR(info->executables[0], "python3");
  LC_CHECK_STR(info->executable_paths[0], "/usr/bin/python3");
  LC_CHECK_STR(info->executables[1], "torchrun");
  LC_CHECK(info->executable_paths[1] == NULL);
  LC_CHECK(lc_hostinfo_has_executable(info, "python3") == 1);
  LC_CHECK(lc_hostinfo_has_executable(info, "torchrun") == 0);
  LC_CHECK(lc_hostinfo_has_executable(info, "gcc") == -ENOENT);
  LC_CHECK(lc_hostinfo_has_executable(info, NULL) == -EINVAL);
  LC_REQUIRE(info->listening != NULL);
  LC_CHECK(lc_ports_count(info->listening) == 3);
  LC_CHECK(lc_ports_contains(info->listening, 22));
  LC_CHECK(lc_ports_contains(info->listening, 5432));
  LC_CHECK(lc_ports_contains(info->listening, 8786));
  LC_CHECK(!lc_ports_contains(info->listening, 53956));
  LC_CHECK(info->gpu_count == 0 && info->gpus == NULL);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "neither lazyclusterctl nor nvidia-smi");
  LC_CHECK(info->gpus_detected == 0 && !info->gpus_declared);
  lc_hostinfo_free(info);
}

/* cgroup v2 (Debian 12, Ubuntu 22.04 with systemd): a service with cpu.max and memory.max, and a
 * tighter parent slice for memory. */
static const char v2_output[] =
    HEAD "@@LCF online 0-7\n"
         "@@LCF allowed 0-7\n" MEM_64G OS_DEBIAN "@@LCF file /proc/self/cgroup\n"
         "0::/system.slice/lab.service\n"
         "@@LCF file /proc/self/mountinfo\n"
         "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
         "rw,nsdelegate,memory_recursiveprot\n"
         "@@LCF dir /sys/fs/cgroup/system.slice/lab.service\n"
         "@@LCF file /sys/fs/cgroup/system.slice/lab.service/cpu.max\n"
         "250000 100000\n"
         "@@LCF file /sys/fs/cgroup/system.slice/lab.service/memory.max\n"
         "8589934592\n"
         "@@LCF dir /sys/fs/cgroup/system.slice\n"
         "@@LCF file /sys/fs/cgroup/system.slice/cpu.max\n"
         "max 100000\n"
         "@@LCF file /sys/fs/cgroup/system.slice/memory.max\n"
         "4294967296\n"
         "@@LCF dir /sys/fs/cgroup\n" TCP GPU_NONE END;

static void test_parse_v2(void) {
  lc_hostinfo *info = parse(v2_output, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(near(info->cores, 2.5));
  LC_CHECK(info->memory_bytes == 4 * GIB);
  LC_CHECK(info->executable_count == 0 && info->executables == NULL);
  lc_hostinfo_free(info);
}

/* This machine's layout: v1 controllers one per mount, v2 at /sys/fs/cgroup/unified; memory
 * limited on v1, CPU limited on v2; affinity narrower than the online CPUs. */
static const char hybrid_output[] =
    HEAD "@@LCF online 0-15\n"
         "@@LCF allowed 0-1,4-5\n" MEM_64G "@@LCF file /proc/self/cgroup\n"
         "9:name=systemd:/\n"
         "4:memory:/process_api/db58\n"
         "2:cpuacct:/\n"
         "1:cpu:/\n"
         "0::/svc\n"
         "@@LCF file /proc/self/mountinfo\n"
         "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
         "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
         "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
         "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
         "@@LCF dir /sys/fs/cgroup/cpu\n"
         "@@LCF file /sys/fs/cgroup/cpu/cpu.cfs_quota_us\n"
         "-1\n"
         "@@LCF file /sys/fs/cgroup/cpu/cpu.cfs_period_us\n"
         "100000\n"
         "@@LCF dir /sys/fs/cgroup/memory/process_api/db58\n"
         "@@LCF file /sys/fs/cgroup/memory/process_api/db58/memory.limit_in_bytes\n"
         "3221225472\n"
         "@@LCF dir /sys/fs/cgroup/memory/process_api\n"
         "@@LCF file /sys/fs/cgroup/memory/process_api/memory.limit_in_bytes\n"
         "9223372036854771712\n"
         "@@LCF dir /sys/fs/cgroup/memory\n"
         "@@LCF dir /sys/fs/cgroup/unified/svc\n"
         "@@LCF file /sys/fs/cgroup/unified/svc/cpu.max\n"
         "125000 100000\n"
         "@@LCF dir /sys/fs/cgroup/unified\n" TCP GPU_NONE END;

static void test_parse_hybrid(void) {
  lc_hostinfo *info = parse(hybrid_output, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(near(info->cores, 1.25));
  LC_CHECK(info->memory_bytes == 3 * GIB);
  lc_hostinfo_free(info);
}

/* No limits anywhere: v1 "-1" and ~2^63, v2 "max"; affinity caps the cores. */
static const char unlimited_output[] =
    HEAD "@@LCF online 0-63\n"
         "@@LCF allowed 0-31\n" MEM_64G OS_DEBIAN "@@LCF file /proc/self/cgroup\n"
         "4:cpu,cpuacct:/user.slice\n"
         "3:memory:/user.slice\n"
         "0::/user.slice/user-1000.slice/session-3.scope\n"
         "@@LCF file /proc/self/mountinfo\n"
         "28 18 0:25 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
         "29 18 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
         "30 18 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct/user.slice\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_quota_us\n"
         "-1\n"
         "@@LCF file /sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_period_us\n"
         "100000\n"
         "@@LCF dir /sys/fs/cgroup/cpu,cpuacct\n"
         "@@LCF dir /sys/fs/cgroup/memory/user.slice\n"
         "@@LCF file /sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes\n"
         "9223372036854771712\n"
         "@@LCF dir /sys/fs/cgroup/memory\n"
         "@@LCF dir /sys/fs/cgroup/unified/user.slice/user-1000.slice/session-3.scope\n"
         "@@LCF file /sys/fs/cgroup/unified/user.slice/user-1000.slice/session-3.scope/cpu.max\n"
         "max 100000\n"
         "@@LCF file /sys/fs/cgroup/unified/user.slice/user-1000.slice/session-3.scope/memory.max\n"
         "max\n"
         "@@LCF dir /sys/fs/cgroup/unified/user.slice/user-1000.slice\n"
         "@@LCF dir /sys/fs/cgroup/unified/user.slice\n"
         "@@LCF dir /sys/fs/cgroup/unified\n" TCP GPU_NONE END;

static void test_parse_unlimited(void) {
  lc_hostinfo *info = parse(unlimited_output, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(near(info->cores, 32));
  LC_CHECK(info->memory_bytes == UINT64_C(65831196) * 1024);
  lc_hostinfo_free(info);
}

/* What a minimal host gives: no cgroup file system, no sysfs (getconf's count), no os-release,
 * no /proc/net/tcp (so the listening ports are unknown). */
static void test_parse_minimal(void) {
  lc_hostinfo *info = parse("@@LCF begin 1\n"
                            "@@LCF uname Linux tiny 5.10.0 aarch64\n"
                            "@@LCF nproc 4\n"
                            "@@LCF file /proc/meminfo\n"
                            "MemTotal: 1024000 kB\n"
                            "@@LCF tcp\n" GPU_NONE END,
                            NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK_STR(info->hostname, "tiny");
  LC_CHECK_STR(info->arch, "aarch64");
  LC_CHECK_STR(info->os, "Linux");
  LC_CHECK(near(info->cores, 4));
  LC_CHECK(info->memory_bytes == UINT64_C(1024000) * 1024);
  LC_CHECK(info->listening == NULL);
  lc_hostinfo_free(info);
}

/* A login banner on stdout before the script, blank lines, unknown tags from a newer script and
 * their content, exe lines for names not asked and a duplicate file: all harmless. */
static void test_parse_noise(void) {
  const char *exes[] = {"sh", NULL};
  lc_hostinfo *info = parse("Welcome to node7!\n"
                            "@@LCF uname Bogus before begin\n"
                            "\n" HEAD "@@LCF online 0-3\n"
                            "@@LCF future-tag something\n"
                            "content of a future section\n"
                            "@@LCF exe 0 /bin/sh\n"
                            "@@LCF exe 7 /bin/ghost\n"
                            "@@LCF exe x /bin/junk\n"
                            "@@LCF file /proc/meminfo\n"
                            "MemTotal: 1 kB\n"
                            "@@LCF file /proc/meminfo\n"
                            "MemTotal: 2048 kB\n"
                            "\n" TCP GPU_NONE END "trailing text after the end\n",
                            exes, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK_STR(info->hostname, "node7");
  LC_CHECK(near(info->cores, 4));
  LC_CHECK(info->memory_bytes == 2048 * 1024);
  LC_CHECK(lc_hostinfo_has_executable(info, "sh") == 1);
  LC_CHECK_STR(info->executable_paths[0], "/bin/sh");
  lc_hostinfo_free(info);
}

static void test_parse_failures(void) {
  lc__err err = {0};
  int rc = 0;
  LC_CHECK(parse("", NULL, &rc, &err) == NULL);
  LC_CHECK(rc == LC_EREMOTE);
  LC_CHECK_CONTAINS(err.msg, "printed nothing of its own");
  LC_CHECK(parse("sh: 1: Syntax error: \"(\" unexpected\n", NULL, &rc, &err) == NULL);
  LC_CHECK(rc == LC_EREMOTE);
  LC_CHECK_CONTAINS(err.msg, "POSIX shell");
  /* Cut before its end (the connection dropped, the command was killed). */
  LC_CHECK(parse(HEAD "@@LCF online 0-3\n@@LCF tcp\n  sl  local_address", NULL, &rc, &err) == NULL);
  LC_CHECK(rc == LC_EREMOTE);
  LC_CHECK_CONTAINS(err.msg, "ends early");
  /* "@@LCF end" inside another word is no end. */
  LC_CHECK(parse(HEAD "@@LCF endless\n", NULL, &rc, &err) == NULL);
  LC_CHECK(rc == LC_EREMOTE);
}

/* ---- GPUs: the probe's JSON ---------------------------------------------------------------- */

/* lc_hostinfo_to_json's output on a 2-GPU host (what `lazyclusterctl probe --json` prints). */
#define PROBE_JSON_2                                                                               \
  "{\"hostname\":\"gpu3\",\"os\":\"Ubuntu 22.04.4 LTS\",\"kernel\":\"5.15.0-105-generic\","        \
  "\"arch\":\"x86_64\",\"cores\":32,\"memory_bytes\":270421508096,\"gpus\":[{\"index\":0,"         \
  "\"uuid\":\"GPU-4f7a2d3c-91b0-6e1f-0c2a-8d5b3e7f1a90\",\"name\":\"NVIDIA H100 80GB HBM3\","      \
  "\"memory_bytes\":85520809984},{\"index\":1,\"uuid\":\"GPU-0b9e6c41-2d7f-58a3-b1c4-"             \
  "7e2f9a0d3c65\",\"name\":\"NVIDIA H100 80GB HBM3\",\"memory_bytes\":85520809984}],"              \
  "\"gpu_source\":\"cuda\",\"gpu_reason\":\"\"}"

static void test_probe_json(void) {
  lc_hostinfo info;
  memset(&info, 0, sizeof(info));
  LC_REQUIRE_OK(lc__probe_json_parse(&info, PROBE_JSON_2, strlen(PROBE_JSON_2)));
  LC_REQUIRE(info.gpu_count == 2);
  LC_CHECK(info.gpus[0].index == 0 && info.gpus[1].index == 1);
  LC_CHECK_STR(info.gpus[0].uuid, "GPU-4f7a2d3c-91b0-6e1f-0c2a-8d5b3e7f1a90");
  LC_CHECK_STR(info.gpus[1].name, "NVIDIA H100 80GB HBM3");
  LC_CHECK(info.gpus[1].memory_bytes == UINT64_C(85520809984));
  LC_CHECK_STR(info.gpu_source, "cuda");
  LC_CHECK_STR(info.gpu_reason, "");

  /* Escapes, unknown keys (a newer probe), nested values, a warning line before the JSON. */
  {
    const char *text =
        "warning: something on stderr\n"
        "  {\"future\":{\"a\":[1,2.5e3,-4,{\"b\":null}],\"c\":true},\"gpus\":[{\"name\":"
        "\"Caf\\u00e9 \\\"GPU\\\" \\ud83d\\ude80\\t\\\\\",\"index\":3,\"uuid\":\"\","
        "\"memory_bytes\":0,\"extra\":false}],\"gpu_source\":\"nvml\",\"gpu_reason\":\"listed by "
        "NVML; no CUDA runtime library found (libcudart.so)\"}\n";
    LC_REQUIRE_OK(lc__probe_json_parse(&info, text, strlen(text)));
    LC_REQUIRE(info.gpu_count == 1);
    LC_CHECK(info.gpus[0].index == 3);
    LC_CHECK_STR(info.gpus[0].name, "Caf\xc3\xa9 \"GPU\" \xf0\x9f\x9a\x80\t\\");
    LC_CHECK_STR(info.gpu_source, "nvml");
    LC_CHECK_CONTAINS(info.gpu_reason, "listed by NVML");
  }

  /* No GPU: an empty array and a reason. */
  {
    const char *text = "{\"gpus\":[],\"gpu_source\":\"none\",\"gpu_reason\":\"no CUDA device "
                       "(cudaErrorNoDevice: no CUDA-capable device is detected)\"}";
    LC_REQUIRE_OK(lc__probe_json_parse(&info, text, strlen(text)));
    LC_CHECK(info.gpu_count == 0 && info.gpus == NULL);
    LC_CHECK_STR(info.gpu_source, "none");
    LC_CHECK_CONTAINS(info.gpu_reason, "cudaErrorNoDevice");
  }

  /* Not the probe's JSON: each leaves the GPU fields empty. */
  {
    static const char *const bad[] = {
        "",
        "Usage: lazyclusterctl probe [--json]",
        "{\"gpus\":[],\"gpu_source\":\"none\"",                        /* cut */
        "{\"gpus\":[{\"index\":0}],\"gpu_source\":\"cuda\"} trailing", /* junk after it */
        "{\"gpus\":[{\"index\":-1}],\"gpu_source\":\"cuda\"}",         /* negative index */
        "{\"gpus\":[{\"index\":0,\"memory_bytes\":1.5}],\"gpu_source\":\"cuda\"}",
        "{\"gpus\":[],\"gpu_source\":\"bad\\q\"}", /* bad escape */
        "{\"gpus\":[],\"gpu_source\":\"\\ud83d\"", /* cut in a string */
        "{\"gpus\":{},\"gpu_source\":\"cuda\"}",   /* gpus not an array */
        "{\"gpu_source\":\"cuda\"}",               /* no gpus */
        "{\"gpus\":[]}",                           /* no source */
        "{\"gpus\":[],\"gpu_source\":\"x\",}",     /* trailing comma */
        "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
      int r = lc__probe_json_parse(&info, bad[i], strlen(bad[i]));
      if (r != -EINVAL)
        fprintf(stderr, "  accepted: %s\n", bad[i]);
      LC_CHECK(r == -EINVAL);
      LC_CHECK(info.gpu_count == 0 && info.gpus == NULL && info.gpu_source[0] == '\0');
    }
  }
  free(info.gpus);
}

/* The GPU sections as the script prints them, through the whole parser. */
static void test_parse_gpu_sections(void) {
  lc_hostinfo *info;

  info = parse(HEAD "@@LCF gpu probe\n" PROBE_JSON_2 "\n@@LCF gpu_exit 0\n" END, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 2 && info->gpus_detected == 2);
  LC_CHECK_STR(info->gpu_source, "cuda");
  lc_hostinfo_free(info);

  /* An old lazyclusterctl without probe --json: nvidia-smi is asked too. */
  info = parse(HEAD "@@LCF gpu probe\n"
                    "lazyclusterctl: unknown command 'probe'\n"
                    "@@LCF gpu_exit 2\n"
                    "@@LCF gpu nvidia-smi\n"
                    "0, GPU-4f7a2d3c-91b0-6e1f-0c2a-8d5b3e7f1a90, NVIDIA H100 80GB HBM3, 81559\n"
                    "@@LCF gpu_exit 0\n" END,
               NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 1);
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");
  LC_CHECK_CONTAINS(info->gpu_reason, "listed by nvidia-smi; lazyclusterctl probe failed (exit "
                                      "status 2): lazyclusterctl: unknown command 'probe'");
  lc_hostinfo_free(info);

  /* The probe hung (timeout's 124) and there is no nvidia-smi. */
  info = parse(HEAD "@@LCF gpu probe\n\n@@LCF gpu_exit 124\n" END, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "lazyclusterctl probe gave no answer within 20 s");
  LC_CHECK_CONTAINS(info->gpu_reason, "nvidia-smi is not on the PATH");
  lc_hostinfo_free(info);

  /* Both failed. */
  info = parse(HEAD "@@LCF gpu probe\n"
                    "Segmentation fault\n"
                    "@@LCF gpu_exit 139\n"
                    "@@LCF gpu nvidia-smi\n"
                    "No devices were found\n"
                    "@@LCF gpu_exit 6\n" END,
               NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason,
                    "lazyclusterctl probe failed (exit status 139): Segmentation");
  LC_CHECK_CONTAINS(info->gpu_reason, "nvidia-smi: No devices were found (exit status 6)");
  lc_hostinfo_free(info);
}

/* ---- GPUs: nvidia-smi ---------------------------------------------------------------------- */

/*
 * Written samples (real recordings follow in test_nvsmi_recorded): lines without a header, read
 * as index, uuid, name, memory.total. They follow the format NVIDIA documents for `nvidia-smi
 * --query-gpu=... --format=csv,noheader,nounits` (nvidia-smi(1), "--query-gpu"; `nvidia-smi
 * --help-query-gpu`): one line per GPU, the asked fields in order separated by ", ", memory.total
 * in MiB without its unit, "[N/A]" for a value the device does not report and bracketed text
 * ("[Unknown Error]", "[GPU requires reset]") for one that failed. The names and memory sizes are
 * those the drivers report for the products (e.g. 81920 MiB for an A100-SXM4-80GB, 81559 MiB for
 * an H100 80GB HBM3, 24564 MiB for a GeForce RTX 4090). The error texts are nvidia-smi's own
 * messages, printed on stdout with the exit status shown (9: driver not loaded, 6: no device,
 * 18: driver/library mismatch, 15: a GPU that fell off the bus). No GPU machine was lent to this
 * task, so none of them was captured here; the UUIDs are made up.
 */
static const char smi_a100x8[] =
    "0, GPU-1c4a1f4e-8b1e-2b55-3a8f-4c9f6f0c1e11, NVIDIA A100-SXM4-80GB, 81920\n"
    "1, GPU-6d2e0b7a-3f41-9c58-e2a7-51b8c0d4f922, NVIDIA A100-SXM4-80GB, 81920\n"
    "2, GPU-a8f3c915-7e2d-4b60-91fa-0c3e5d7b2a33, NVIDIA A100-SXM4-80GB, 81920\n"
    "3, GPU-2b7e4d60-c1a9-8f35-7d0e-93a6b1c5e844, NVIDIA A100-SXM4-80GB, 81920\n"
    "4, GPU-f09d3a2c-5b8e-61d7-a4c3-2e9f7b0d1c55, NVIDIA A100-SXM4-80GB, 81920\n"
    "5, GPU-47c1e8b9-0a6d-3e2f-b5d8-6f1a9c4e7d66, NVIDIA A100-SXM4-80GB, 81920\n"
    "6, GPU-9e5b2f17-d3c4-7a08-6c1b-8d2e0f5a3b77, NVIDIA A100-SXM4-80GB, 81920\n"
    "7, GPU-c36a0d84-1f7b-2e95-d8a6-4b3c7e9f0a88, NVIDIA A100-SXM4-80GB, 81920\n";

static lc_hostinfo *smi(const char *text, int exit_status) {
  static lc_hostinfo info;
  free(info.gpus);
  memset(&info, 0, sizeof(info));
  if (lc__nvsmi_parse(&info, text, strlen(text), exit_status) != 0)
    fprintf(stderr, "  lc__nvsmi_parse failed\n");
  return &info;
}

static void test_nvsmi_good(void) {
  lc_hostinfo *info = smi(smi_a100x8, 0);
  LC_REQUIRE(info->gpu_count == 8);
  for (int i = 0; i < 8; i++) {
    LC_CHECK(info->gpus[i].index == i);
    LC_CHECK_STR(info->gpus[i].name, "NVIDIA A100-SXM4-80GB");
    LC_CHECK(info->gpus[i].memory_bytes == 81920 * MIB);
    LC_CHECK(strncmp(info->gpus[i].uuid, "GPU-", 4) == 0 && strlen(info->gpus[i].uuid) == 40);
  }
  LC_CHECK_STR(info->gpus[7].uuid, "GPU-c36a0d84-1f7b-2e95-d8a6-4b3c7e9f0a88");
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");
  LC_CHECK_STR(info->gpu_reason, "");

  info = smi("0, GPU-4f7a2d3c-91b0-6e1f-0c2a-8d5b3e7f1a90, NVIDIA H100 80GB HBM3, 81559\n", 0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK_STR(info->gpus[0].name, "NVIDIA H100 80GB HBM3");
  LC_CHECK(info->gpus[0].memory_bytes == 81559 * MIB);

  /* A desktop: GeForce, older driver naming without "NVIDIA", CRLF and odd spacing. */
  info = smi("0, GPU-8e1d5c2a-44b7-09f3-6a2e-d1c7b9e05f10, NVIDIA GeForce RTX 4090, 24564\r\n"
             "  1 ,GPU-3a9c7e15-b2d0-8f46-1e5a-c7d3f9b20e41 ,  GeForce GTX 1080 Ti  ,11178  \r\n",
             0);
  LC_REQUIRE(info->gpu_count == 2);
  LC_CHECK_STR(info->gpus[0].name, "NVIDIA GeForce RTX 4090");
  LC_CHECK(info->gpus[0].memory_bytes == 24564 * MIB);
  LC_CHECK(info->gpus[1].index == 1);
  LC_CHECK_STR(info->gpus[1].uuid, "GPU-3a9c7e15-b2d0-8f46-1e5a-c7d3f9b20e41");
  LC_CHECK_STR(info->gpus[1].name, "GeForce GTX 1080 Ti");
  LC_CHECK(info->gpus[1].memory_bytes == 11178 * MIB);

  /* Values the device does not report, a unit that slipped through, a comma in a name. */
  info = smi("0, [N/A], Tesla V100-SXM2-16GB, 16160 MiB\n"
             "1, GPU-5d0c2b8e-7a31-4f96-b2e8-0a6c4d9f1e23, GRID A100D-4C, [N/A]\n"
             "2, GPU-e7b4a1c3-9d20-6f58-3c1e-7b5a2d0f8c34, Some, Name, With Commas, 4096\n"
             "3, MIG-0f3e8a1d-5c62-5b7e-9d4a-1e8c3b6f2a45, [Unknown Error], [Unknown Error]\n",
             0);
  LC_REQUIRE(info->gpu_count == 4);
  LC_CHECK_STR(info->gpus[0].uuid, "");
  LC_CHECK(info->gpus[0].memory_bytes == 16160 * MIB);
  LC_CHECK_STR(info->gpus[1].name, "GRID A100D-4C");
  LC_CHECK(info->gpus[1].memory_bytes == 0);
  LC_CHECK_STR(info->gpus[2].name, "Some, Name, With Commas");
  LC_CHECK(info->gpus[2].memory_bytes == 4096 * MIB);
  LC_CHECK_STR(info->gpus[3].uuid, "MIG-0f3e8a1d-5c62-5b7e-9d4a-1e8c3b6f2a45");
  LC_CHECK_STR(info->gpus[3].name, "");
  LC_CHECK_STR(info->gpu_reason, "");
  free(info->gpus);
  info->gpus = NULL;
}

static void test_nvsmi_failures(void) {
  lc_hostinfo *info;

  /* The driver is not loaded (exit status 9). */
  info = smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
             "sure that the latest NVIDIA driver is installed and running.\n\n",
             9);
  LC_CHECK(info->gpu_count == 0 && info->gpus == NULL);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_CONTAINS(info->gpu_reason, "nvidia-smi: NVIDIA-SMI has failed because it couldn't "
                                      "communicate with the NVIDIA driver");
  LC_CHECK_CONTAINS(info->gpu_reason, "(exit status 9)");

  /* A driver but no GPU (exit status 6). */
  info = smi("No devices were found\n", 6);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: No devices were found (exit status 6)");

  /* A driver upgraded under a loaded module (exit status 18). */
  info = smi("Failed to initialize NVML: Driver/library version mismatch\n"
             "NVML library version: 550.54\n",
             18);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: Failed to initialize NVML: Driver/library version "
                                 "mismatch (exit status 18)");

  /* No output at all. */
  info = smi("\n  \n", 0);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi lists no GPU (no output, exit status 0)");

  /* It hung and timeout ended it. */
  info = smi("", 124);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: no answer within 20 s");

  /* One GPU fell off the bus: its line is an error, the others are fine (exit status 15). */
  info = smi("0, GPU-1c4a1f4e-8b1e-2b55-3a8f-4c9f6f0c1e11, NVIDIA A100-SXM4-40GB, 40960\n"
             "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
             "2, GPU-a8f3c915-7e2d-4b60-91fa-0c3e5d7b2a33, NVIDIA A100-SXM4-40GB, 40960\n",
             15);
  LC_REQUIRE(info->gpu_count == 2);
  LC_CHECK(info->gpus[0].index == 0 && info->gpus[1].index == 2);
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");
  LC_CHECK_CONTAINS(info->gpu_reason, "skipped 1 line(s) it could not read, the first: 'Unable to "
                                      "determine the device handle");

  /* Garbled lines: cut short, a header (no noheader), junk in every field. */
  info = smi("0, GPU-1c4a1f4e-8b1e-2b55-3a8f-4c9f6f0c1e11, NVIDIA A100-SXM4-80GB, 81920\n"
             "1, GPU-6d2e0b7a-3f41\n"
             "index, uuid, name, memory.total [MiB]\n"
             "x, GPU-6d2e0b7a-3f41-9c58-e2a7-51b8c0d4f922, NVIDIA A100-SXM4-80GB, 81920\n"
             "2, not-a-uuid, NVIDIA A100-SXM4-80GB, 81920\n"
             "3, GPU-a8f3c915-7e2d-4b60-91fa-0c3e5d7b2a33, NVIDIA A100-SXM4-80GB, lots\n"
             "4, GPU-a8f3c915-7e2d-4b60-91fa-0c3e5d7b2a33, NVIDIA A100-SXM4-80GB, -5\n"
             "99999, GPU-a8f3c915-7e2d-4b60-91fa-0c3e5d7b2a33, NVIDIA A100-SXM4-80GB, 81920\n"
             "\xff\xfe\x01garbage\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK_CONTAINS(info->gpu_reason, "skipped 8 line(s)");
  LC_CHECK_CONTAINS(info->gpu_reason, "'1, GPU-6d2e0b7a-3f41'");
  free(info->gpus);
  info->gpus = NULL;
}

/*
 * Outputs recorded on real machines by users who pasted them into public GitHub issues (short
 * outputs of a tool, reproduced as they were printed). No GPU machine was lent to this task, so
 * none was captured here. Where a recording was made without a header (noheader), the header line
 * in front of it is the recorded command's field list, which is all the parser needs to know the
 * columns; the data lines are the recording. Exit statuses are not part of the recordings: the
 * ones given are those nvidia-smi(1) documents for the case (9 driver, 6 no device, 255 other).
 */
static void test_nvsmi_recorded(void) {
  lc_hostinfo *info;

  /* `nvidia-smi --query-gpu=index,uuid,name,temperature.gpu,utilization.gpu,memory.used,
   * memory.total --format=csv,noheader,nounits` on 8 GeForce GTX TITAN X, recorded in
   * https://github.com/wookayin/gpustat/issues/5 (the query gpustat ran; ours is its first three
   * fields and its last). */
  info =
      smi("index, uuid, name, temperature.gpu, utilization.gpu, memory.used, memory.total\n"
          "0, GPU-004f693d-767b-b215-b4a9-a18af0ffd643, GeForce GTX TITAN X, 25, 0, 802, 12206\n"
          "1, GPU-86fe97db-bf54-a056-4e8d-9b07e1a298e7, GeForce GTX TITAN X, 54, 86, 10032, "
          "12206\n"
          "2, GPU-2090c509-a97a-e2fe-68f4-cf9e874c36f2, GeForce GTX TITAN X, 55, 85, 6442, 12206\n"
          "3, GPU-f0e47078-b19f-a3ff-bf2e-03a4c5fe3c2a, GeForce GTX TITAN X, 58, 60, 6442, 12206\n"
          "4, GPU-637ac0be-f0e1-b056-bf28-b2c046e5e17e, GeForce GTX TITAN X, 55, 84, 6459, 12206\n"
          "5, GPU-4168500a-bee8-3b4d-ba1b-75289a4afdcd, GeForce GTX TITAN X, 54, 83, 6440, 12206\n"
          "6, GPU-92ce5025-17c0-7c83-d2eb-a697262d4c46, GeForce GTX TITAN X, 56, 83, 6451, 12206\n"
          "7, GPU-f199c9ea-65d8-5382-aefe-a9e8fb48057b, GeForce GTX TITAN X, 55, 82, 6442, "
          "12206\n",
          0);
  LC_REQUIRE(info->gpu_count == 8);
  LC_CHECK(info->gpus[7].index == 7);
  LC_CHECK_STR(info->gpus[7].uuid, "GPU-f199c9ea-65d8-5382-aefe-a9e8fb48057b");
  LC_CHECK_STR(info->gpus[0].name, "GeForce GTX TITAN X");
  LC_CHECK(info->gpus[0].memory_bytes == 12206 * MIB);
  LC_CHECK_STR(info->gpu_reason, "");

  /* `nvidia-smi --query-gpu=name,pci.bus,index,uuid --format=csv` (with its header) on five
   * GeForce cards, recorded in https://github.com/YoRyan/nuxhash/pull/10: another column order,
   * no memory column. */
  info = smi("name, pci.bus, index, uuid\n"
             "GeForce GTX 1060 6GB, 0x01, 0, GPU-f3da2e71-6e43-729a-e3ae-f731ed96d50c\n"
             "GeForce GTX 1080 Ti, 0x02, 1, GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1\n"
             "GeForce GTX 1060 6GB, 0x03, 2, GPU-3dc4f2b0-6e1b-c088-c342-4367c334795a\n"
             "GeForce GTX 1060 6GB, 0x09, 3, GPU-03ddeff3-19c4-6676-d02d-6942bd80630d\n"
             "GeForce GTX 1060 6GB, 0x0A, 4, GPU-ff3318a7-f0dd-dc57-1fb8-cc95ba35c56e\n",
             0);
  LC_REQUIRE(info->gpu_count == 5);
  LC_CHECK(info->gpus[1].index == 1);
  LC_CHECK_STR(info->gpus[1].name, "GeForce GTX 1080 Ti");
  LC_CHECK_STR(info->gpus[1].uuid, "GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1");
  LC_CHECK(info->gpus[4].memory_bytes == 0);
  LC_CHECK_STR(info->gpu_reason, "");

  /* DGX Spark: `nvidia-smi --query-gpu=index,name,memory.total,memory.free --format=csv` on its
   * GB10 (unified memory: no memory.total), recorded in
   * https://github.com/unslothai/unsloth/pull/10703. The GPU is listed, its memory unknown. */
  info = smi("index, name, memory.total [MiB], memory.free [MiB]\n"
             "0, NVIDIA GB10, [N/A], [N/A]\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK_STR(info->gpus[0].name, "NVIDIA GB10");
  LC_CHECK_STR(info->gpus[0].uuid, "");
  LC_CHECK(info->gpus[0].memory_bytes == 0);
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");

  /* The name in the middle, memory.total before it, a bare N/A, no index (the row gives it):
   * `nvidia-smi -i 0a:00.0 --query-gpu=power.limit,power.min_limit,power.max_limit,memory.total,
   * vbios_version,driver_version,name,gpu_uuid,power.draw,temperature.gpu,temperature.memory,
   * clocks.current.graphics,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,fan.speed,
   * pcie.link.width.current,pstate --format=csv,noheader,nounits` on a GeForce RTX 2080, recorded
   * in https://github.com/Ricks-Lab/gpu-utils/issues/83. */
  info = smi("power.limit, power.min_limit, power.max_limit, memory.total, vbios_version, "
             "driver_version, name, gpu_uuid, power.draw, temperature.gpu, temperature.memory, "
             "clocks.current.graphics, clocks.sm, clocks.mem, utilization.gpu, utilization.memory, "
             "fan.speed, pcie.link.width.current, pstate\n"
             "200.00, 105.00, 292.00, 7979, 90.04.23.00.5F, 440.64, GeForce RTX 2080, "
             "GPU-22b2c6ac-2d49-4863-197c-9c469071178a, 176.98, 45, N/A, 1965, 1965, 7199, 86, 55, "
             "100, 8, P2\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK(info->gpus[0].index == 0);
  LC_CHECK_STR(info->gpus[0].name, "GeForce RTX 2080");
  LC_CHECK_STR(info->gpus[0].uuid, "GPU-22b2c6ac-2d49-4863-197c-9c469071178a");
  LC_CHECK(info->gpus[0].memory_bytes == 7979 * MIB);

  /* A Tesla T4 with MIG mode [N/A]: `nvidia-smi --query-gpu=timestamp,serial,name,
   * mig.mode.current,utilization.gpu,memory.total,memory.used,utilization.memory
   * --format=csv,nounits,noheader`, recorded in the README of
   * https://github.com/jear/nvidia-metering. */
  info = smi("timestamp, serial, name, mig.mode.current, utilization.gpu, memory.total, "
             "memory.used, utilization.memory\n"
             "2023/07/03 10:33:55.204, 1562220007789, Tesla T4, [N/A], 0, 15360, 6, 0\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK_STR(info->gpus[0].name, "Tesla T4");
  LC_CHECK(info->gpus[0].memory_bytes == 15360 * MIB);

  /* "[N/A]" and, from older drivers, "[Not Supported]" where a value is missing: `nvidia-smi
   * --query-gpu=memory.total,memory.free,memory.used,temperature.gpu,fan.speed,utilization.gpu,
   * utilization.memory --format=csv,noheader,nounits`, both recorded in
   * https://github.com/enkore/i3pystatus/pull/776. Neither index nor name: the row gives the
   * index. */
  info = smi("memory.total, memory.free, memory.used, temperature.gpu, fan.speed, "
             "utilization.gpu, utilization.memory\n"
             "2004, 2004, 0, 44, [N/A], 0, 0\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK(info->gpus[0].memory_bytes == 2004 * MIB);
  info = smi("memory.total, memory.free, memory.used, temperature.gpu, fan.speed, "
             "utilization.gpu, utilization.memory\n"
             "2004, 2004, 0, 44, [Not Supported], 0, 0\n",
             0);
  LC_REQUIRE(info->gpu_count == 1);
  LC_CHECK(info->gpus[0].memory_bytes == 2004 * MIB);

  /* Error texts, as recorded. The driver not loaded:
   * https://github.com/mattshma/bigdata/issues/108 */
  info = smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
             "sure that the latest NVIDIA driver is installed and running.\n",
             9);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: NVIDIA-SMI has failed because it couldn't "
                                 "communicate with the NVIDIA driver. Make sure that the latest "
                                 "NVIDIA driver is installed and running. (exit status 9)");

  /* A driver upgraded under a loaded module, two lines:
   * https://github.com/tinygrad/open-gpu-kernel-modules/issues/47 */
  info = smi("Failed to initialize NVML: Driver/library version mismatch\n"
             "NVML library version: 570.124\n",
             255);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: Failed to initialize NVML: Driver/library version "
                                 "mismatch (exit status 255)");

  /* Inside a container that lost its device nodes:
   * https://github.com/NVIDIA/nvidia-container-toolkit/issues/115 */
  info = smi("Failed to initialize NVML: Unknown Error\n", 255);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: Failed to initialize NVML: Unknown Error (exit "
                                 "status 255)");

  /* A driver but no GPU it can drive: https://github.com/NVIDIA/open-gpu-kernel-modules/issues/862
   */
  info = smi("No devices were found\n", 6);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: No devices were found (exit status 6)");

  /* A GPU that fell off the bus, both spellings: "GPU0000:..." in
   * https://github.com/NVIDIA/nvidia-container-toolkit/issues/69, "GPU 0000:..." in
   * https://github.com/NVIDIA/open-gpu-kernel-modules/issues/387. */
  info = smi("Unable to determine the device handle for GPU0000:65:00.0: Unknown Error\n", 15);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: Unable to determine the device handle for "
                                 "GPU0000:65:00.0: Unknown Error (exit status 15)");
  info = smi("Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n", 15);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_CONTAINS(info->gpu_reason, "GPU 0000:0B:00.0: Unknown Error (exit status 15)");

  /* Only a header: nothing listed, and the reason says so. */
  info = smi("index, uuid, name, memory.total [MiB]\n", 0);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi lists no GPU (only its header, exit status 0)");
  free(info->gpus);
  info->gpus = NULL;
}

/* ---- the script, run by this machine's /bin/sh --------------------------------------------- */

static char tmpdir[PATH_MAX];

static void write_file(const char *path, const char *text, int mode) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
  chmod(path, (mode_t)mode);
}

/* A bin directory with the tools the script uses and nothing else, so that a real nvidia-smi or
 * lazyclusterctl of this machine stays out of the way. */
static void make_bin(void) {
  static const char *const tools[] = {"sh", "uname", "cat", "getconf", "nproc", "timeout"};
  char cmd[PATH_MAX * 2];
  snprintf(tmpdir, sizeof(tmpdir), "%s/lc_hostfacts_XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(cmd, sizeof(cmd), "mkdir -p '%s/bin'", tmpdir);
  if (system(cmd) != 0)
    exit(1);
  for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
    snprintf(cmd, sizeof(cmd), "p=$(command -v %s) && ln -s \"$p\" '%s/bin/%s'", tools[i], tmpdir,
             tools[i]);
    if (system(cmd) != 0)
      fprintf(stderr, "  (no %s on this machine)\n", tools[i]);
  }
}

static void drop_bin(void) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "  could not remove %s\n", tmpdir);
}

/* Runs the script with shell (an absolute path) and PATH=tmpdir/bin; returns its stdout. */
static char *run_script(const char *shell, const char *const *exes, size_t *len) {
  lc__buf script = {0}, out = {0};
  char path[PATH_MAX + 16], cmd[PATH_MAX * 3], chunk[4096];
  FILE *p;
  size_t n;
  if (lc__hostfacts_command(&script, exes) < 0 || lc__buf_append(&script, "", 1) < 0)
    return NULL;
  snprintf(path, sizeof(path), "%s/script.sh", tmpdir);
  write_file(path, script.data, 0644);
  lc__buf_free(&script);
  snprintf(cmd, sizeof(cmd), "PATH='%s/bin' %s '%s' </dev/null", tmpdir, shell, path);
  if ((p = popen(cmd, "r")) == NULL)
    return NULL;
  while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
    lc__buf_append(&out, chunk, n);
  pclose(p);
  lc__buf_append(&out, "", 1);
  *len = out.len - 1;
  return out.data;
}

static void check_against_local(const char *shell) {
  const char *exes[] = {
      "sh", "no-such-exe", "uname", "-n", "it's \"quoted\"; $(touch /tmp/lc-hostfacts-injected)",
      NULL};
  lc_hostinfo *local = NULL, *info = calloc(1, sizeof(*info));
  struct utsname u;
  lc__err err = {0};
  size_t len = 0;
  char *text = run_script(shell, exes, &len);
  LC_REQUIRE(text != NULL && info != NULL);
  LC_CHECK_OK(lc__hostfacts_parse(info, text, len, exes, &err));
  if (err.code)
    fprintf(stderr, "  %s\n  output:\n%s\n", err.msg, text);
  LC_REQUIRE_OK(lc_hostinfo_local(&local));
  LC_REQUIRE(uname(&u) == 0);
  fprintf(stderr, "  %s: %s | %s | %s | %g cores | %llu bytes | %zu listening | gpus: %s\n", shell,
          info->hostname, info->os, info->kernel, info->cores,
          (unsigned long long)info->memory_bytes, lc_ports_count(info->listening),
          info->gpu_reason);
  LC_CHECK_STR(info->hostname, u.nodename);
  LC_CHECK_STR(info->kernel, u.release);
  LC_CHECK_STR(info->arch, u.machine);
  LC_CHECK_STR(info->os, local->os);
  LC_CHECK(near(info->cores, local->cores));
  LC_CHECK(info->memory_bytes == local->memory_bytes);
  LC_CHECK(lc_hostinfo_has_executable(info, "sh") == 1);
  LC_CHECK(lc_hostinfo_has_executable(info, "uname") == 1);
  LC_CHECK(lc_hostinfo_has_executable(info, "no-such-exe") == 0);
  LC_CHECK(lc_hostinfo_has_executable(info, "-n") == 0);
  LC_CHECK(lc_hostinfo_has_executable(info, exes[4]) == 0);
  LC_CHECK(access("/tmp/lc-hostfacts-injected", F_OK) != 0);
  LC_CHECK(info->listening != NULL);
  LC_CHECK_STR(info->gpu_source, "none");
  LC_CHECK_STR(info->gpu_reason, "neither lazyclusterctl nor nvidia-smi is on the host's PATH");
  free(text);
  lc_hostinfo_free(info);
  lc_hostinfo_free(local);
}

static void test_script_matches_local(void) {
  static const char *const shells[] = {"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox sh"};
  make_bin();
  for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]); i++) {
    char exe[64];
    snprintf(exe, sizeof(exe), "%s", shells[i]);
    *strchrnul(exe, ' ') = '\0';
    if (access(exe, X_OK) != 0)
      continue;
    check_against_local(shells[i]);
  }
  drop_bin();
}

/* Runs the script with fake GPU tools (stdout of the recorded samples) and parses the result. */
static lc_hostinfo *script_with_tools(const char *smi_body, const char *probe_body) {
  char path[PATH_MAX + 32];
  lc_hostinfo *info = calloc(1, sizeof(*info));
  lc__err err = {0};
  size_t len = 0;
  char *text;
  snprintf(path, sizeof(path), "%s/bin/nvidia-smi", tmpdir);
  unlink(path);
  if (smi_body)
    write_file(path, smi_body, 0755);
  snprintf(path, sizeof(path), "%s/bin/lazyclusterctl", tmpdir);
  unlink(path);
  if (probe_body)
    write_file(path, probe_body, 0755);
  text = run_script("/bin/sh", NULL, &len);
  if (text == NULL || lc__hostfacts_parse(info, text, len, NULL, &err) < 0) {
    fprintf(stderr, "  script failed: %s\n", err.msg);
    lc_hostinfo_free(info);
    info = NULL;
  }
  free(text);
  return info;
}

static void test_script_gpu_tools(void) {
  lc_hostinfo *info;
  char body[4096];
  make_bin();

  /* nvidia-smi alone, checking that it was asked the query the script runs; it answers with a
   * header and units, as `--format=csv` does. */
  snprintf(body, sizeof(body),
           "#!/bin/sh\n"
           "[ \"$*\" = '--query-gpu=index,uuid,name,memory.total --format=csv' ] "
           "|| { echo \"bad arguments: $*\"; exit 2; }\n"
           "echo 'index, uuid, name, memory.total [MiB]'\n"
           "while read -r l; do echo \"$l MiB\"; done <<'EOF'\n%sEOF\n",
           smi_a100x8);
  info = script_with_tools(body, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 8);
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");
  lc_hostinfo_free(info);

  /* nvidia-smi failing, with its message on stdout and without a final newline. */
  info = script_with_tools("#!/bin/sh\nprintf 'No devices were found'\nexit 6\n", NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_STR(info->gpu_reason, "nvidia-smi: No devices were found (exit status 6)");
  lc_hostinfo_free(info);

  /* lazyclusterctl wins over nvidia-smi. */
  snprintf(body, sizeof(body),
           "#!/bin/sh\n[ \"$*\" = 'probe --json' ] || exit 2\ncat <<'EOF'\n%s\nEOF\n",
           PROBE_JSON_2);
  info = script_with_tools("#!/bin/sh\necho 'must not run'\nexit 1\n", body);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 2);
  LC_CHECK_STR(info->gpu_source, "cuda");
  lc_hostinfo_free(info);

  /* A failing lazyclusterctl and no nvidia-smi. */
  info = script_with_tools(NULL, "#!/bin/sh\necho 'error while loading shared libraries' >&2\n"
                                 "exit 127\n");
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 0);
  LC_CHECK_CONTAINS(info->gpu_reason, "lazyclusterctl probe failed (exit status 127): error "
                                      "while loading shared libraries");
  lc_hostinfo_free(info);
  drop_bin();
}

static void test_command_quoting(void) {
  const char *exes[] = {"a'b", "$(reboot)", NULL};
  lc__buf b = {0};
  LC_REQUIRE_OK(lc__hostfacts_command(&b, exes));
  LC_REQUIRE_OK(lc__buf_append(&b, "", 1));
  LC_CHECK_CONTAINS(b.data, "command -v -- 'a'\\''b' 2>/dev/null");
  LC_CHECK_CONTAINS(b.data, "command -v -- '$(reboot)' 2>/dev/null");
  LC_CHECK_CONTAINS(b.data, "@@LCF exe 1 ");
  LC_CHECK(strstr(b.data, "@@LCF exe 2") == NULL);
  lc__buf_free(&b);
}

/* ---- small pieces -------------------------------------------------------------------------- */

static void test_cpulist(void) {
  LC_CHECK(lc__cpulist_count("0") == 1);
  LC_CHECK(lc__cpulist_count("0-3\n") == 4);
  LC_CHECK(lc__cpulist_count("0-3,8,10-11") == 7);
  LC_CHECK(lc__cpulist_count(" 0-63 ") == 64);
  LC_CHECK(lc__cpulist_count("") == 0);
  LC_CHECK(lc__cpulist_count(NULL) == 0);
  LC_CHECK(lc__cpulist_count("3-1") == 0);
  LC_CHECK(lc__cpulist_count("0-") == 0);
  LC_CHECK(lc__cpulist_count("0,,1") == 0);
  LC_CHECK(lc__cpulist_count("a-b") == 0);
  LC_CHECK(lc__cpulist_count("0-3 junk") == 0);
}

static void test_declare_gpus(void) {
  lc_hostinfo *info = parse(HEAD "@@LCF gpu nvidia-smi\n"
                                 "0, GPU-1c4a1f4e-8b1e-2b55-3a8f-4c9f6f0c1e11, "
                                 "NVIDIA A100-SXM4-80GB, 81920\n"
                                 "1, GPU-6d2e0b7a-3f41-9c58-e2a7-51b8c0d4f922, "
                                 "NVIDIA A100-SXM4-80GB, 81920\n"
                                 "@@LCF gpu_exit 0\n" END,
                            NULL, NULL, NULL);
  char *json = NULL;
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->gpu_count == 2 && info->gpus_detected == 2);
  /* Nothing declared. */
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, -1));
  LC_CHECK(info->gpu_count == 2 && !info->gpus_declared);
  /* The same count: the host's view stays. */
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, 2));
  LC_CHECK(info->gpu_count == 2 && info->gpus_declared);
  LC_CHECK_STR(info->gpu_source, "nvidia-smi");
  /* More than the host reports: added with their index only. */
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, 4));
  LC_REQUIRE(info->gpu_count == 4);
  LC_CHECK_STR(info->gpus[1].name, "NVIDIA A100-SXM4-80GB");
  LC_CHECK(info->gpus[3].index == 3 && info->gpus[3].name[0] == '\0');
  LC_CHECK(info->gpus_detected == 2);
  /* Fewer. */
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, 1));
  LC_CHECK(info->gpu_count == 1 && info->gpus_detected == 2);
  LC_CHECK_OK(lc_hostinfo_to_json(&json, info));
  LC_CHECK_CONTAINS(json, "\"gpus_detected\":2,\"gpus_declared\":true}");
  lc_free(json);
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, 0));
  LC_CHECK(info->gpu_count == 0 && info->gpus == NULL);
  lc_hostinfo_free(info);

  /* A host without GPUs that is declared to have some. */
  info = parse(HEAD GPU_NONE END, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK_OK(lc_hostinfo_declare_gpus(info, 2));
  LC_CHECK(info->gpu_count == 2 && info->gpus[0].index == 0 && info->gpus[1].index == 1);
  LC_CHECK_STR(info->gpu_source, "declared");
  LC_CHECK_CONTAINS(info->gpu_reason, "gpus=2 declared; the host reported 0 (none: neither");
  lc_hostinfo_free(info);
  LC_CHECK(lc_hostinfo_declare_gpus(NULL, 1) == -EINVAL);
}

static void test_json_remote_fields(void) {
  const char *exes[] = {"python3", "torchrun", NULL};
  lc_hostinfo *info = parse(v1_output, exes, NULL, NULL);
  char *json = NULL;
  LC_REQUIRE(info != NULL);
  LC_REQUIRE_OK(lc_hostinfo_to_json(&json, info));
  LC_CHECK_CONTAINS(json, ",\"executables\":{\"python3\":\"/usr/bin/python3\",\"torchrun\":null},"
                          "\"listening\":[22,5432,8786]}");
  /* The probe's parser reads it back (the keys it does not know are skipped). */
  LC_CHECK_OK(lc__probe_json_parse(info, json, strlen(json)));
  LC_CHECK_STR(info->gpu_source, "none");
  lc_free(json);
  lc_hostinfo_free(info);
}

/* ---- inventory ----------------------------------------------------------------------------- */

static void test_inventory_file(void) {
  char path[PATH_MAX + 32];
  lc_inventory *inv = NULL;
  size_t at = 99;
  make_bin();
  snprintf(path, sizeof(path), "%s/hosts", tmpdir);
  write_file(path,
             "# the lab\n"
             "\n"
             "lab1 gpus=8 slots=8\n"
             "  root@10.0.0.3:2222   gpus=0   # no GPU there\n"
             "lab2\r\n"
             "\tuser@[fe80::1]:2200 slots=4\n"
             "fe80::2\n"
             "node-7.example.org slots=2 gpus=2\n"
             "last-line-without-newline",
             0644);
  LC_REQUIRE_OK(lc_inventory_parse(&inv, path));
  LC_REQUIRE(lc_inventory_count(inv) == 7);
  LC_CHECK_STR(lc_inventory_host(inv, 0), "lab1");
  LC_CHECK(lc_inventory_gpus(inv, 0) == 8 && lc_inventory_slots(inv, 0) == 8);
  LC_CHECK(lc_inventory_line(inv, 0) == 3);
  LC_CHECK_STR(lc_inventory_host(inv, 1), "root@10.0.0.3:2222");
  LC_CHECK(lc_inventory_gpus(inv, 1) == 0 && lc_inventory_slots(inv, 1) == 0);
  LC_CHECK_STR(lc_inventory_host(inv, 2), "lab2");
  LC_CHECK(lc_inventory_gpus(inv, 2) == -1 && lc_inventory_slots(inv, 2) == 0);
  LC_CHECK_STR(lc_inventory_host(inv, 3), "user@[fe80::1]:2200");
  LC_CHECK(lc_inventory_slots(inv, 3) == 4);
  LC_CHECK_STR(lc_inventory_host(inv, 4), "fe80::2");
  LC_CHECK_STR(lc_inventory_host(inv, 5), "node-7.example.org");
  LC_CHECK(lc_inventory_gpus(inv, 5) == 2 && lc_inventory_slots(inv, 5) == 2);
  LC_CHECK_STR(lc_inventory_host(inv, 6), "last-line-without-newline");
  LC_CHECK(lc_inventory_line(inv, 6) == 9);
  /* Out of range. */
  LC_CHECK(lc_inventory_host(inv, 7) == NULL);
  LC_CHECK(lc_inventory_gpus(inv, 7) == -1 && lc_inventory_slots(inv, 7) == 0);
  LC_CHECK(lc_inventory_line(inv, 7) == 0);
  LC_CHECK(lc_inventory_count(NULL) == 0 && lc_inventory_host(NULL, 0) == NULL);
  /* find and add */
  LC_CHECK_OK(lc_inventory_find(&at, inv, "lab2"));
  LC_CHECK(at == 2);
  LC_CHECK(lc_inventory_find(&at, inv, "lab9") == -ENOENT);
  LC_CHECK(lc_inventory_add(inv, "lab2", -1, 0) == -EEXIST);
  LC_CHECK(lc_inventory_add(inv, "bad host", -1, 0) == LC_ECONFIG);
  LC_CHECK_CONTAINS(lc_error_last(), "bad host 'bad host': a blank or control character");
  LC_CHECK(lc_inventory_add(inv, "lab9", -2, 0) == LC_ECONFIG);
  LC_CHECK_OK(lc_inventory_add(inv, "lab9", 4, 0));
  LC_CHECK(lc_inventory_count(inv) == 8 && lc_inventory_gpus(inv, 7) == 4);
  LC_CHECK(lc_inventory_line(inv, 7) == 0);
  lc_inventory_free(inv);
  lc_inventory_free(NULL);

  /* A file that cannot be read. */
  snprintf(path, sizeof(path), "%s/missing", tmpdir);
  LC_CHECK(lc_inventory_parse(&inv, path) == -ENOENT);
  LC_CHECK(inv == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "missing: cannot read the inventory: ");
  LC_CHECK(lc_inventory_parse(&inv, tmpdir) == -EISDIR);
  LC_CHECK(lc_inventory_parse(NULL, path) == -EINVAL);
  LC_CHECK(lc_inventory_parse(&inv, NULL) == -EINVAL);
  drop_bin();
}

/* Each bad inventory text and the message it must give ("hosts:LINE: ..."). */
static void test_inventory_errors(void) {
  static const struct {
    const char *text, *message;
  } cases[] = {
      {"lab1\nlab2 gpu=2\n", "hosts:2: unknown key 'gpu' (expected gpus or slots)"},
      {"lab1 cpus=4\n", "hosts:1: unknown key 'cpus' (expected gpus or slots)"},
      {"lab1 =4\n", "hosts:1: unknown key '' (expected gpus or slots)"},
      {"lab1 gpus=two\n", "hosts:1: bad gpus value 'two' (a whole number, 0 to 4096)"},
      {"lab1 gpus=\n", "hosts:1: bad gpus value '' (a whole number, 0 to 4096)"},
      {"lab1 gpus=-1\n", "hosts:1: bad gpus value '-1' (a whole number, 0 to 4096)"},
      {"lab1 gpus=4097\n", "hosts:1: bad gpus value '4097' (a whole number, 0 to 4096)"},
      {"lab1 gpus=99999999999\n", "hosts:1: bad gpus value '99999999999'"},
      {"lab1 gpus=2.5\n", "hosts:1: bad gpus value '2.5'"},
      {"lab1 slots=0\n", "hosts:1: bad slots value '0' (a whole number, 1 to 1000000)"},
      {"lab1 slots=4x\n", "hosts:1: bad slots value '4x' (a whole number, 1 to 1000000)"},
      {"lab1 gpus=1 gpus=2\n", "hosts:1: gpus is given twice"},
      {"lab1 slots=1 slots=1\n", "hosts:1: slots is given twice"},
      {"# hosts\nlab1\n\nlab2\nlab1 gpus=2\n",
       "hosts:5: host 'lab1' is listed twice (first as line 2)"},
      {"lab1 lab2\n", "hosts:1: unexpected 'lab2' after the host (expected gpus=N or slots=N)"},
      {"gpus=2 lab1\n", "hosts:1: expected a host before 'gpus=2'"},
      {"lab1:0\n", "hosts:1: bad host 'lab1:0': bad port '0' (1 to 65535)"},
      {"lab1:65536\n", "hosts:1: bad host 'lab1:65536': bad port '65536' (1 to 65535)"},
      {"lab1:ssh\n", "hosts:1: bad host 'lab1:ssh': bad port 'ssh' (1 to 65535)"},
      {"lab1:\n", "hosts:1: bad host 'lab1:': empty port"},
      {":22\n", "hosts:1: bad host ':22': no host"},
      {"@lab1\n", "hosts:1: bad host '@lab1': empty user"},
      {"root@\n", "hosts:1: bad host 'root@': no host"},
      {"-oProxyCommand=x\n", "hosts:1: expected a host before '-oProxyCommand=x'"},
      {"-lab1\n", "hosts:1: bad host '-lab1': a user or host cannot start with '-'"},
      {"root@-lab1\n", "hosts:1: bad host 'root@-lab1': a user or host cannot start with '-'"},
      {"lab*\n", "hosts:1: bad host 'lab*': '*' cannot be part of a host"},
      {"lab1,lab2\n", "hosts:1: bad host 'lab1,lab2': ',' cannot be part of a host"},
      {"\"lab1\"\n", "hosts:1: bad host '\"lab1\"': '\"' cannot be part of a host"},
      {"[fe80::1\n", "hosts:1: bad host '[fe80::1': expected [address] or [address]:port"},
      {"[fe80::1]x\n", "hosts:1: bad host '[fe80::1]x': expected [address] or [address]:port"},
      {"[]:22\n", "hosts:1: bad host '[]:22': expected [address] or [address]:port"},
      {"[fe80::1]:\n", "hosts:1: bad host '[fe80::1]:': empty port"},
      {"", "hosts: lists no host"},
      {"# only comments\n\n   \n", "hosts: lists no host"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    lc_inventory *inv = NULL;
    int r = lc_inventory_parse_text(&inv, cases[i].text, strlen(cases[i].text), "hosts");
    if (r != LC_ECONFIG || strstr(lc_error_last(), cases[i].message) == NULL)
      fprintf(stderr, "  case %zu: %d '%s'\n", i, r, lc_error_last());
    LC_CHECK(r == LC_ECONFIG);
    LC_CHECK(inv == NULL);
    LC_CHECK_CONTAINS(lc_error_last(), cases[i].message);
    lc_inventory_free(inv);
  }
  /* A NUL byte: not a text file. */
  {
    lc_inventory *inv = NULL;
    LC_CHECK(lc_inventory_parse_text(&inv, "lab1\nla\0b2\n", 11, NULL) == LC_ECONFIG);
    LC_CHECK_CONTAINS(lc_error_last(), "inventory:2: a NUL byte");
  }
}

static void test_inventory_list(void) {
  lc_inventory *inv = NULL;
  LC_REQUIRE_OK(lc_inventory_from_list(&inv, "lab1,lab2, root@10.0.0.3:2222 ,lab4 gpus=2 slots=3"));
  LC_REQUIRE(lc_inventory_count(inv) == 4);
  LC_CHECK_STR(lc_inventory_host(inv, 0), "lab1");
  LC_CHECK_STR(lc_inventory_host(inv, 2), "root@10.0.0.3:2222");
  LC_CHECK(lc_inventory_line(inv, 2) == 3);
  LC_CHECK(lc_inventory_gpus(inv, 2) == -1);
  LC_CHECK(lc_inventory_gpus(inv, 3) == 2 && lc_inventory_slots(inv, 3) == 3);
  lc_inventory_free(inv);

  LC_REQUIRE_OK(lc_inventory_from_list(&inv, "[::1]:2222"));
  LC_CHECK(lc_inventory_count(inv) == 1);
  lc_inventory_free(inv);

  {
    static const struct {
      const char *list, *message;
    } cases[] = {
        {"", "the host list is empty"},
        {"  ", "the host list is empty"},
        {"lab1,,lab2", "host list 'lab1,,lab2': item 2 is empty"},
        {"lab1,", "host list 'lab1,': item 2 is empty"},
        {",lab1", "host list ',lab1': item 1 is empty"},
        {"lab1, ,lab2", "host list 'lab1, ,lab2': item 2 is empty"},
        {"lab1,lab2,lab1 gpus=2", "host list 'lab1,lab2,lab1 gpus=2': item 3: host 'lab1' is "
                                  "listed twice (first as item 1), with other gpus or slots"},
        {"lab1:99999", "host list 'lab1:99999': item 1: bad host 'lab1:99999': bad port"},
        {"lab1 lab2", "host list 'lab1 lab2': item 1: unexpected 'lab2' after the host"},
        {"lab1 gpus=x", "host list 'lab1 gpus=x': item 1: bad gpus value 'x'"},
        {"lab1#2", "host list 'lab1#2': item 1: '#' cannot be part of a host"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      int r = lc_inventory_from_list(&inv, cases[i].list);
      if (r != LC_ECONFIG || strstr(lc_error_last(), cases[i].message) == NULL)
        fprintf(stderr, "  case %zu: %d '%s'\n", i, r, lc_error_last());
      LC_CHECK(r == LC_ECONFIG);
      LC_CHECK(inv == NULL);
      LC_CHECK_CONTAINS(lc_error_last(), cases[i].message);
    }
  }
  LC_CHECK(lc_inventory_from_list(NULL, "a") == -EINVAL);
  LC_CHECK(lc_inventory_from_list(&inv, NULL) == -EINVAL);
}

/*
 * The real script, run here by sh: it parses, lists this machine's listening ports, and tells its
 * loopback (boot id and network namespace) as this process knows it, so that discovery can tell
 * an SSH host that is this very machine; a text without that line tells none (0).
 */
static void test_script_here_loopback(void) {
  lc__buf script = {0}, out = {0};
  lc_hostinfo *info;
  char tmpl[] = "/tmp/lc-facts-XXXXXX", cmd[64], chunk[4096];
  size_t n;
  FILE *f;
  int fd = mkstemp(tmpl);
  LC_REQUIRE(fd >= 0);
  LC_REQUIRE(lc__hostfacts_command(&script, NULL) == 0);
  LC_REQUIRE(write(fd, script.data, script.len) == (ssize_t)script.len);
  close(fd);
  snprintf(cmd, sizeof(cmd), "sh %s </dev/null 2>/dev/null", tmpl);
  LC_REQUIRE((f = popen(cmd, "r")) != NULL);
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
    LC_REQUIRE(lc__buf_append(&out, chunk, n) == 0);
  pclose(f);
  unlink(tmpl);
  LC_REQUIRE(lc__buf_append(&out, "", 1) == 0);
  info = parse(out.data, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->listening != NULL);
  LC_CHECK(info->loopback > LC__LOOPBACK_UNTOLD);
  LC_CHECK(info->loopback == lc__loopback_here());
  lc_hostinfo_free(info);
  info = parse(HEAD TCP GPU_NONE END, NULL, NULL, NULL);
  LC_REQUIRE(info != NULL);
  LC_CHECK(info->loopback == 0);
  lc_hostinfo_free(info);
  lc__buf_free(&script);
  lc__buf_free(&out);
}

LC_TEST_MAIN(LC_TEST(test_script_here_loopback), LC_TEST(test_parse_v1), LC_TEST(test_parse_v2),
             LC_TEST(test_parse_hybrid), LC_TEST(test_parse_unlimited), LC_TEST(test_parse_minimal),
             LC_TEST(test_parse_noise), LC_TEST(test_parse_failures), LC_TEST(test_probe_json),
             LC_TEST(test_parse_gpu_sections), LC_TEST(test_nvsmi_good),
             LC_TEST(test_nvsmi_failures), LC_TEST(test_nvsmi_recorded),
             LC_TEST(test_script_matches_local), LC_TEST(test_script_gpu_tools),
             LC_TEST(test_command_quoting), LC_TEST(test_cpulist), LC_TEST(test_declare_gpus),
             LC_TEST(test_json_remote_fields), LC_TEST(test_inventory_file),
             LC_TEST(test_inventory_errors), LC_TEST(test_inventory_list))
