/*
 * status.c - `lazyclusterctl status [NAME] [--json]`: the master, every worker and every host of
 * a cluster, as its supervisor tells them.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_status(int argc, char **argv) {
  const char *name = NULL;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " status [NAME] [--json]\n"
             "Shows a cluster: its state, the master and every worker (host, port, GPU, state,\n"
             "pid, restarts, uptime, last exit), every host (connected, lost since), time left.\n"
             "NAME may be left out when one cluster runs.\n\n"
             "  --json    one JSON object: name, state, supervisor_pid, master, workers, hosts, "
             "...\n");
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else if (cli_take_name("status", argv[i], &name) < 0)
      return CLI_EXIT_USAGE;
  }
  return cli_request_print("status", name, json ? "status json" : "status", 15000);
}
