/*
 * stop.c - `lazyclusterctl stop [NAME | --all]`: asks a cluster's supervisor to tear it down in
 * order (workers, master, tunnels, working directories) and returns once it is gone.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stops one cluster; CLI_EXIT_*. */
static int stop_one(const char *name) {
  char *reply = NULL;
  int r = lc_control_request(&reply, NULL, name, "stop", 15 * 60 * 1000);
  lc_free(reply);
  if (r == LC_ECLOSED) { /* its supervisor is gone already, and with it (the lifeline) the rest */
    printf("%s: already gone (%s)\n", name, lc_error_last());
    return CLI_EXIT_OK;
  }
  if (r < 0) {
    fprintf(stderr, CLI_NAME " stop: cluster %s: %s\n", name,
            lc_error_last()[0] ? lc_error_last() : lc_strerror(r));
    return CLI_EXIT_FAIL;
  }
  if (lc_control_wait_gone(NULL, name, 60000) < 0) {
    fprintf(stderr,
            CLI_NAME " stop: cluster %s: its supervisor said stopped, but still runs after "
                     "60 s\n",
            name);
    return CLI_EXIT_FAIL;
  }
  printf("%s: stopped\n", name);
  return CLI_EXIT_OK;
}

int cli_stop(int argc, char **argv) {
  const char *name = NULL;
  char *one = NULL;
  int all = 0, r = CLI_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " stop [NAME | --all]\n"
             "Stops a cluster in order (workers, master, tunnels, working directories) and\n"
             "returns when nothing of it is left on any host. NAME may be left out when one\n"
             "cluster runs.\n\n"
             "  --all     every cluster of this user\n");
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--all") == 0)
      all = 1;
    else if (cli_take_name("stop", argv[i], &name) < 0)
      return CLI_EXIT_USAGE;
  }
  if (all && name != NULL)
    return cli_usage_error("stop", "NAME or --all, not both");
  if (all) {
    lc_control_entry *e = NULL;
    size_t n = 0;
    if ((r = lc_control_list(&e, &n, NULL, 0)) < 0)
      return cli_fail("stop", r, "the state directory");
    r = CLI_EXIT_OK;
    for (size_t i = 0; i < n; i++)
      if (e[i].alive && stop_one(e[i].name) != CLI_EXIT_OK)
        r = CLI_EXIT_FAIL;
    lc_control_entries_free(e, n);
    return r;
  }
  if ((r = cli_resolve_name("stop", name, &one)) != CLI_EXIT_OK)
    return r;
  r = stop_one(one);
  free(one);
  return r;
}
