/*
 * probe.c - `lazyclusterctl probe [--json]`: this machine's facts, as a table or one JSON object.
 *
 * The JSON form is what a launcher reads back when it runs the probe on a remote host.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void probe_usage(FILE *f) {
  fprintf(f,
          "Usage: " CLI_NAME " probe [--json]\n"
          "\n"
          "Print this machine's facts: host name, OS, kernel, architecture, usable CPU cores and\n"
          "memory (capped by the cgroup limits of this process), and GPUs as the CUDA runtime\n"
          "(or NVML) sees them.\n"
          "\n"
          "Options:\n"
          "  --json      one JSON object on one line\n"
          "  -h, --help  this help\n");
}

/* "23.5 GiB"; the exact byte count goes into the JSON form. */
static const char *human_bytes(char *buf, size_t n, uint64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024;
    u++;
  }
  snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

static void print_table(const lc_hostinfo *info) {
  char mem[32];
  printf("%-10s %s\n", "hostname", lc_hostinfo_hostname(info));
  printf("%-10s %s\n", "os", lc_hostinfo_os(info));
  printf("%-10s %s\n", "kernel", lc_hostinfo_kernel(info));
  printf("%-10s %s\n", "arch", lc_hostinfo_arch(info));
  printf("%-10s %g\n", "cores", lc_hostinfo_cores(info));
  printf("%-10s %s (%llu bytes)\n", "memory",
         human_bytes(mem, sizeof(mem), lc_hostinfo_memory_bytes(info)),
         (unsigned long long)lc_hostinfo_memory_bytes(info));
  if (lc_hostinfo_gpu_count(info) == 0) {
    printf("%-10s none (%s)\n", "gpus",
           lc_hostinfo_gpu_reason(info)[0] ? lc_hostinfo_gpu_reason(info) : "no reason given");
    return;
  }
  printf("%-10s %zu (from %s%s%s)\n", "gpus", lc_hostinfo_gpu_count(info),
         lc_hostinfo_gpu_source(info), lc_hostinfo_gpu_reason(info)[0] ? "; " : "",
         lc_hostinfo_gpu_reason(info));
  for (size_t i = 0; i < lc_hostinfo_gpu_count(info); i++) {
    const lc_gpu *g = lc_hostinfo_gpu(info, i);
    printf("  %-3d %-32s %10s  %s\n", lc_gpu_index(g),
           lc_gpu_name(g)[0] ? lc_gpu_name(g) : "(unnamed)",
           human_bytes(mem, sizeof(mem), lc_gpu_memory_bytes(g)),
           lc_gpu_uuid(g)[0] ? lc_gpu_uuid(g) : "(no uuid)");
  }
}

int cli_probe(int argc, char **argv) {
  lc_hostinfo *info = NULL;
  char *json = NULL;
  int as_json = 0, r, rc = CLI_EXIT_FAIL;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      probe_usage(stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0)
      as_json = 1;
    else
      return cli_usage_error("probe", "unknown argument '%s'", argv[i]);
  }
  if ((r = lc_hostinfo_local(&info)) < 0) {
    rc = cli_fail("probe", r, "reading this machine's facts");
    goto out;
  }
  if (as_json) {
    if ((r = lc_hostinfo_to_json(&json, info)) < 0) {
      rc = cli_fail("probe", r, "rendering JSON");
      goto out;
    }
    printf("%s\n", json);
  } else {
    print_table(info);
  }
  rc = fflush(stdout) == 0 && !ferror(stdout) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
out:
  lc_free(json);
  lc_hostinfo_free(info);
  return rc;
}
