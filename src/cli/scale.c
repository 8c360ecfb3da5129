/*
 * scale.c - `lazyclusterctl scale NAME --workers N`: more workers start as at the start; fewer
 * stop the highest indices (after the type's graceful retire, where it has one).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_scale(int argc, char **argv) {
  const char *name = NULL;
  char *end, request[32];
  long workers = -1;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " scale NAME --workers N\n"
             "Sets the cluster's number of workers to N: more start as at the start, fewer stop\n"
             "the highest indices (Dask retires them first, so their data moves). Returns when\n"
             "it is done. NAME may be left out when one cluster runs.\n");
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--workers") == 0) {
      if (i + 1 >= argc)
        return cli_usage_error("scale", "--workers needs a value");
      workers = strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || workers < 0 || workers > 100000)
        return cli_usage_error("scale", "--workers %s: want a number, 0 or more", argv[i]);
    } else if (cli_take_name("scale", argv[i], &name) < 0) {
      return CLI_EXIT_USAGE;
    }
  }
  if (workers < 0)
    return cli_usage_error("scale", "to how many workers? give --workers N");
  snprintf(request, sizeof(request), "scale %ld", workers);
  return cli_request_print("scale", name, request, 15 * 60 * 1000);
}
