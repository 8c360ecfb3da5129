/*
 * env.c - `lazyclusterctl env [NAME]`: shell export lines that point a client at a cluster:
 * eval "$(lazyclusterctl env NAME)".
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_env(int argc, char **argv) {
  const char *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " env [NAME]\n"
             "Prints shell export lines for a client of the cluster: LAZYCLUSTER_MASTER_ADDR,\n"
             "LAZYCLUSTER_MASTER_PORT, LAZYCLUSTER_NAME and, for --type dask,\n"
             "DASK_SCHEDULER_ADDRESS. Use: eval \"$(" CLI_NAME " env NAME)\"\n");
      return CLI_EXIT_OK;
    }
    if (cli_take_name("env", argv[i], &name) < 0)
      return CLI_EXIT_USAGE;
  }
  return cli_request_print("env", name, "env", 15000);
}
