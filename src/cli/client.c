/*
 * client.c - what the commands that talk to a cluster's supervisor share (list, status, logs,
 * stop, env, scale): one request with its errors worded, and finding the cluster meant.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_request(const char *cmd, const char *name, const char *request, int timeout_ms,
                char **reply) {
  int r;
  *reply = NULL;
  lc_error_set(0, "%s", "");
  if ((r = lc_control_request(reply, NULL, name, request, timeout_ms)) == 0)
    return CLI_EXIT_OK;
  if (name != NULL) {
    const char *detail = lc_error_last();
    if (r == -ETIMEDOUT)
      fprintf(stderr,
              CLI_NAME " %s: cluster %s: no answer from its supervisor in %d s (it may be "
                       "starting or repairing: try again)\n",
              cmd, name, timeout_ms / 1000);
    else
      fprintf(stderr, CLI_NAME " %s: cluster %s: %s\n", cmd, name,
              detail[0] ? detail : lc_strerror(r));
    return CLI_EXIT_FAIL;
  }
  return cli_fail(cmd, r, "which cluster?");
}

int cli_request_print(const char *cmd, const char *name, const char *request, int timeout_ms) {
  char *reply = NULL;
  int r;
  if ((r = cli_request(cmd, name, request, timeout_ms, &reply)) != 0)
    return r;
  fputs(reply, stdout);
  if (reply[0] != '\0' && reply[strlen(reply) - 1] != '\n')
    fputc('\n', stdout);
  lc_free(reply);
  return CLI_EXIT_OK;
}

int cli_resolve_name(const char *cmd, const char *name, char **out) {
  lc_control_entry *e = NULL;
  size_t n = 0, alive = 0, at = 0;
  char names[1024] = "";
  int r;
  *out = NULL;
  if (name != NULL)
    return (*out = strdup(name)) != NULL ? CLI_EXIT_OK : cli_fail(cmd, -ENOMEM, "out of memory");
  if ((r = lc_control_list(&e, &n, NULL, 0)) < 0)
    return cli_fail(cmd, r, "the state directory");
  for (size_t i = 0; i < n; i++)
    if (e[i].alive) {
      size_t l = strlen(names);
      snprintf(names + l, sizeof(names) - l, "%s%s", alive ? ", " : "", e[i].name);
      alive++;
      at = i;
    }
  if (alive == 1)
    *out = strdup(e[at].name);
  lc_control_entries_free(e, n);
  if (alive == 0) {
    fprintf(stderr, CLI_NAME " %s: no cluster is running (see '" CLI_NAME " list')\n", cmd);
    return CLI_EXIT_FAIL;
  }
  if (alive > 1) {
    fprintf(stderr, CLI_NAME " %s: which cluster? %zu run: %s (give NAME)\n", cmd, alive, names);
    return CLI_EXIT_FAIL;
  }
  return *out != NULL ? CLI_EXIT_OK : cli_fail(cmd, -ENOMEM, "out of memory");
}

void cli_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s != NULL && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* Takes "NAME" or nothing as the one positional argument of a client command; 1 taken. */
int cli_take_name(const char *cmd, const char *arg, const char **name) {
  if (arg[0] == '-')
    return cli_usage_error(cmd, "unknown option %s", arg), -1;
  if (*name != NULL)
    return cli_usage_error(cmd, "one cluster name, not '%s' and '%s'", *name, arg), -1;
  *name = arg;
  return 1;
}
