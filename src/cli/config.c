/*
 * config.c - `lazyclusterctl config HOST [-F FILE]`: what the ssh config says for a host, as the
 * SSH backend will use it, in `ssh -G`'s format (the keywords the backend uses).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void config_usage(FILE *f) {
  fprintf(f,
          "Usage: " CLI_NAME " config HOST [-F FILE]\n"
          "\n"
          "Print what the ssh config resolves to for HOST (an alias, or [user@]host[:port]), one\n"
          "'keyword value' line each, in the format of 'ssh -G', for the keywords lazycluster\n"
          "uses. Without -F: ~/.ssh/config, then /etc/ssh/ssh_config, as ssh reads them; with\n"
          "-F only FILE. Keywords that change how a host is reached and that lazycluster does\n"
          "not implement are named in a warning on stderr.\n"
          "\n"
          "Options:\n"
          "  -F FILE     ssh config file (default ~/.ssh/config and /etc/ssh/ssh_config)\n"
          "  -h, --help  this help\n");
}

/* Warnings of the library go to stderr. */
void cli_print_warning(const char *message, void *payload) {
  (void)payload;
  fprintf(stderr, CLI_NAME ": warning: %s\n", message);
}

int cli_config(int argc, char **argv) {
  const char *host = NULL, *file = NULL;
  char *text = NULL;
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      config_usage(stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "-F") == 0) {
      if (i + 1 >= argc)
        return cli_usage_error("config", "-F needs a value");
      file = argv[++i];
    } else if (argv[i][0] == '-') {
      return cli_usage_error("config", "unknown option '%s'", argv[i]);
    } else if (host == NULL) {
      host = argv[i];
    } else {
      return cli_usage_error("config", "one HOST only ('%s' is one too many)", argv[i]);
    }
  }
  if (host == NULL)
    return cli_usage_error("config", "which HOST?");
  lc_set_warning_handler(cli_print_warning, NULL);
  if ((r = lc_sshconfig_print(&text, file, host)) < 0)
    return cli_fail("config", r, host);
  fputs(text, stdout);
  lc_free(text);
  return CLI_EXIT_OK;
}
