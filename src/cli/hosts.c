/*
 * hosts.c - `lazyclusterctl hosts [--json]`: the discovered hosts with state, latency, cores,
 * memory and GPUs; unreachable ones with their reason.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static const char *state_name(lc_host_state s) {
  return s == LC_HOST_READY ? "ready" : s == LC_HOST_FILTERED ? "filtered" : "unreachable";
}

int cli_hosts(int argc, char **argv) {
  cli_hostopts h;
  lc_engine *engine = NULL;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  int json = 0, r, status = CLI_EXIT_OK;

  cli_hostopts_init(&h);
  for (int i = 1; i < argc; i++) {
    int took;
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " hosts [--json] [options]\n"
             "Checks every host at once and lists them: state, connect latency, usable cores,\n"
             "memory and GPUs; unreachable hosts with the reason.\n\n%s",
             cli_hostopts_help());
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
      continue;
    }
    if ((took = cli_hostopts_take(&h, "hosts", argc, argv, &i)) < 0)
      return CLI_EXIT_USAGE;
    if (took == 0)
      return cli_usage_error("hosts", "unknown option %s", argv[i]);
  }
  h.discover.facts = 1;
  if ((r = lc_engine_new(&engine, NULL)) < 0)
    return cli_fail("hosts", r, "cannot start the engine");
  cli_discovery_catch(1);
  r = lc_discover(&g, &d, engine, &h.discover);
  cli_discovery_catch(0);
  if (r < 0) {
    status = cli_discovery_fail("hosts", r, "discovery failed");
    goto out;
  }
  if (json)
    printf("[");
  else
    printf("%-20s %-12s %8s %6s %10s %5s  %s\n", "HOST", "STATE", "LATENCY", "CORES", "MEMORY",
           "GPUS", "NOTE");
  for (size_t i = 0; i < lc_discovery_count(d); i++) {
    const lc_hostinfo *info = lc_discovery_info(d, i);
    lc_host_state st = lc_discovery_state(d, i);
    if (st != LC_HOST_READY)
      status = CLI_EXIT_FAIL;
    if (json) {
      printf("%s\n  {\"host\": ", i ? "," : "");
      json_string(lc_discovery_host(d, i));
      printf(", \"state\": \"%s\", \"latency_s\": %.3f", state_name(st),
             lc_discovery_latency(d, i));
      if (info != NULL)
        printf(", \"cores\": %.2f, \"memory_bytes\": %llu, \"gpus\": %zu", lc_hostinfo_cores(info),
               (unsigned long long)lc_hostinfo_memory_bytes(info), lc_hostinfo_gpu_count(info));
      printf(", \"reason\": ");
      json_string(lc_discovery_reason(d, i));
      printf("}");
      continue;
    }
    if (info != NULL)
      printf("%-20s %-12s %7.0fms %6.1f %8.1fGi %5zu  %s\n", lc_discovery_host(d, i),
             state_name(st), lc_discovery_latency(d, i) * 1000.0, lc_hostinfo_cores(info),
             lc_hostinfo_memory_bytes(info) / 1073741824.0, lc_hostinfo_gpu_count(info),
             lc_discovery_reason(d, i));
    else
      printf("%-20s %-12s %8s %6s %10s %5s  %s\n", lc_discovery_host(d, i), state_name(st), "-",
             "-", "-", "-", lc_discovery_reason(d, i));
  }
  if (json)
    printf("\n]\n");
  else if (lc_discovery_count(d) == 0)
    printf("(no hosts: give --hosts or --inventory, or add Host entries to the ssh config)\n");
out:
  lc_discovery_free(d);
  lc_group_free(g);
  lc_engine_free(engine);
  return status;
}
