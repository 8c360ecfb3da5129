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
             "LAZYCLUSTER_MASTER_PORT, LAZYCLUSTER_NAME and what the cluster's type gives its\n"
             "clients. For --type dask: DASK_SCHEDULER_ADDRESS (tls://127.0.0.1:PORT) and the\n"
             "Dask config keys that make a plain Client() use the cluster's TLS files\n"
             "(DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._TLS__CLIENT__CERT, ..._TLS__CLIENT__KEY,\n"
             "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION); with --insecure only a tcp://\n"
             "address. Use: eval \"$(" CLI_NAME " env NAME)\"\n");
      return CLI_EXIT_OK;
    }
    if (cli_take_name("env", argv[i], &name) < 0)
      return CLI_EXIT_USAGE;
  }
  return cli_request_print("env", name, "env", 15000);
}
