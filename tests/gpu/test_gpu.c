/*
 * test_gpu.c - the GPU probe on the real machine, meaningful with and without a GPU.
 *
 * What the kernel driver has bound (/proc/driver/nvidia/gpus) says which answer is right: with
 * GPUs there, the probe must list at least one, each with a name, a UUID and its memory, the UUIDs
 * must be ones nvidia-smi knows, and `lazyclusterctl probe --json` (LC_CTL) must list the same;
 * without, the probe must list none and say why. Under CUDA_VISIBLE_DEVICES only the consistency
 * of the answer is checked.
 */
#include "lazycluster.h"
#include "lc_test.h"

#include <dirent.h>
#include <sys/wait.h>

/* GPUs the NVIDIA kernel driver has bound; 0 without the driver. */
static int driver_gpus(void) {
  DIR *d = opendir("/proc/driver/nvidia/gpus");
  struct dirent *e;
  int n = 0;
  if (d == NULL)
    return 0;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

/* Runs a shell command and returns its stdout (at most 64 KiB), or NULL; *status gets its exit. */
static char *run(const char *cmd, int *status) {
  FILE *p = popen(cmd, "r");
  char *out;
  size_t len = 0, n;
  if (p == NULL || (out = malloc(65536)) == NULL) {
    if (p)
      pclose(p);
    return NULL;
  }
  while (len < 65535 && (n = fread(out + len, 1, 65535 - len, p)) > 0)
    len += n;
  out[len] = '\0';
  *status = pclose(p);
  return out;
}

static void check_gpu_fields(const lc_hostinfo *info) {
  for (size_t i = 0; i < lc_hostinfo_gpu_count(info); i++) {
    const lc_gpu *g = lc_hostinfo_gpu(info, i);
    fprintf(stderr, "  gpu %d: %s, %llu bytes, %s\n", lc_gpu_index(g), lc_gpu_name(g),
            (unsigned long long)lc_gpu_memory_bytes(g), lc_gpu_uuid(g));
    LC_CHECK(lc_gpu_index(g) == (int)i);
    LC_CHECK(lc_gpu_name(g)[0] != '\0');
    LC_CHECK(lc_gpu_memory_bytes(g) > 0);
    LC_CHECK(strncmp(lc_gpu_uuid(g), "GPU-", 4) == 0);
  }
}

static void test_gpu_probe(void) {
  lc_hostinfo *info = NULL;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  int bound = driver_gpus();
  LC_REQUIRE_OK(lc_hostinfo_local(&info));
  fprintf(stderr,
          "  driver has %d GPU(s); CUDA_VISIBLE_DEVICES=%s; probe: %zu GPU(s) from %s (%s)\n",
          bound, cvd ? cvd : "(unset)", lc_hostinfo_gpu_count(info), lc_hostinfo_gpu_source(info),
          lc_hostinfo_gpu_reason(info));
  if (lc_hostinfo_gpu_count(info) > 0) {
    LC_CHECK(strcmp(lc_hostinfo_gpu_source(info), "cuda") == 0 ||
             strcmp(lc_hostinfo_gpu_source(info), "nvml") == 0);
    check_gpu_fields(info);
  } else {
    LC_CHECK_STR(lc_hostinfo_gpu_source(info), "none");
    LC_CHECK(lc_hostinfo_gpu_reason(info)[0] != '\0');
  }
  if (cvd == NULL) {
    if (bound > 0) {
      LC_CHECK(lc_hostinfo_gpu_count(info) >= 1);
      LC_CHECK(lc_hostinfo_gpu_count(info) <= (size_t)bound);
    } else {
      LC_CHECK(lc_hostinfo_gpu_count(info) == 0);
    }
  }
  lc_hostinfo_free(info);
}

/* nvidia-smi, where it is installed, knows every UUID the probe reports. */
static void test_gpu_matches_nvidia_smi(void) {
  lc_hostinfo *info = NULL;
  char *out;
  int status = -1;
  LC_REQUIRE_OK(lc_hostinfo_local(&info));
  out = run("nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits "
            "2>/dev/null",
            &status);
  if (out == NULL || status != 0) {
    fprintf(stderr, "  nvidia-smi not usable here (exit %d); nothing to compare\n",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    LC_CHECK(lc_hostinfo_gpu_count(info) == 0 || driver_gpus() > 0);
  } else {
    fprintf(stderr, "  nvidia-smi:\n%s", out);
    for (size_t i = 0; i < lc_hostinfo_gpu_count(info); i++)
      LC_CHECK_CONTAINS(out, lc_gpu_uuid(lc_hostinfo_gpu(info, i)));
  }
  free(out);
  lc_hostinfo_free(info);
}

/* lazyclusterctl probe --json reports what the library found. */
static void test_cli_probe_json(void) {
  lc_hostinfo *info = NULL;
  const char *ctl = getenv("LC_CTL");
  char cmd[4096], want[512], *out;
  int status = -1;
  LC_REQUIRE(ctl != NULL && ctl[0] != '\0'); /* set by tests/gpu.cmake */
  LC_REQUIRE_OK(lc_hostinfo_local(&info));
  snprintf(cmd, sizeof(cmd), "'%s' probe --json", ctl);
  out = run(cmd, &status);
  LC_REQUIRE(out != NULL);
  fprintf(stderr, "  %s\n", out);
  LC_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  LC_CHECK(out[0] == '{');
  snprintf(want, sizeof(want), "\"gpu_source\":\"%s\"", lc_hostinfo_gpu_source(info));
  LC_CHECK_CONTAINS(out, want);
  if (lc_hostinfo_gpu_count(info) == 0)
    LC_CHECK_CONTAINS(out, "\"gpus\":[]");
  for (size_t i = 0; i < lc_hostinfo_gpu_count(info); i++) {
    const lc_gpu *g = lc_hostinfo_gpu(info, i);
    snprintf(want, sizeof(want),
             "{\"index\":%d,\"uuid\":\"%s\",\"name\":\"%s\",\"memory_bytes\":%llu}",
             lc_gpu_index(g), lc_gpu_uuid(g), lc_gpu_name(g),
             (unsigned long long)lc_gpu_memory_bytes(g));
    LC_CHECK_CONTAINS(out, want);
  }
  free(out);
  snprintf(cmd, sizeof(cmd), "'%s' probe", ctl);
  out = run(cmd, &status);
  LC_REQUIRE(out != NULL);
  fprintf(stderr, "%s", out);
  LC_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  LC_CHECK_CONTAINS(out, "gpus");
  free(out);
  lc_hostinfo_free(info);
}

LC_TEST_MAIN(LC_TEST(test_gpu_probe), LC_TEST(test_gpu_matches_nvidia_smi),
             LC_TEST(test_cli_probe_json))
