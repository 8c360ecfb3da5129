/*
 * exec.c - `lazyclusterctl exec [options] -- COMMAND`: runs COMMAND on every host at once, every
 * output line prefixed with its host, a summary of failures at the end, and a non-zero exit when
 * any host failed or could not be reached.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Engine thread only, so lines are whole and never mixed: one write per line. */
static void print_line(const char *host, const char *line, size_t len, lc_stream stream,
                       void *payload) {
  static char buf[1 << 16];
  FILE *out = stream == LC_STDERR ? stderr : stdout;
  int color = *(int *)payload;
  int n = snprintf(buf, sizeof(buf), color ? "\033[36m[%s]\033[0m " : "[%s] ", host);
  (void)n;
  if (n < 0 || (size_t)n >= sizeof(buf))
    return;
  if (len + (size_t)n + 1 > sizeof(buf)) { /* a long line: prefix, then the line as it is */
    fwrite(buf, 1, (size_t)n, out);
    fwrite(line, 1, len, out);
    fputc('\n', out);
    fflush(out);
    return;
  }
  memcpy(buf + n, line, len);
  buf[(size_t)n + len] = '\n';
  fwrite(buf, 1, (size_t)n + len + 1, out);
  fflush(out);
}

/*
 * The words after --, joined with single blanks as ssh, pdsh and clush join them; the host's
 * shell parses the result. malloc'd; NULL when out of memory.
 */
static char *join_words(char **words, int n) {
  size_t len = 1, at = 0;
  char *s;
  for (int i = 0; i < n; i++)
    len += strlen(words[i]) + 1;
  if ((s = malloc(len)) == NULL)
    return NULL;
  for (int i = 0; i < n; i++) {
    size_t l = strlen(words[i]);
    if (i > 0)
      s[at++] = ' ';
    memcpy(s + at, words[i], l);
    at += l;
  }
  s[at] = '\0';
  return s;
}

int cli_exec(int argc, char **argv) {
  cli_hostopts h;
  lc_engine *engine = NULL;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  lc_group_report *rep = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  char *command = NULL, **words = NULL;
  int r, nwords = 0, status = CLI_EXIT_OK, color = isatty(1);
  size_t failed = 0;

  cli_hostopts_init(&h);
  for (int i = 1; i < argc; i++) {
    int took;
    if (strcmp(argv[i], "--") == 0) {
      words = argv + i + 1;
      nwords = argc - i - 1;
      break;
    }
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " exec [options] -- COMMAND [ARG...]\n"
             "Runs COMMAND with sh on every host at once; each output line is prefixed with its\n"
             "host. Exits 1 when any host failed or was unreachable.\n"
             "As ssh, pdsh and clush do, the words after -- are joined with single blanks and\n"
             "the host's shell reads the result: -- hostname -I is -- 'hostname -I'. Quote what\n"
             "this shell must not expand: -- 'echo $HOME' prints each host's $HOME.\n\n"
             "  --timeout S             per host: a command still running after S seconds is\n"
             "                          stopped (its whole process group) and the host reported\n"
             "                          as timed out (default none: no limit)\n%s",
             cli_hostopts_help());
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--timeout") == 0) {
      char *end;
      double s;
      if (i + 1 >= argc)
        return cli_usage_error("exec", "--timeout needs a value");
      s = strtod(argv[++i], &end);
      if (*end != '\0' || end == argv[i] || !(s > 0) || s > 2000000)
        return cli_usage_error("exec", "--timeout %s: want seconds, e.g. 60 or 0.5", argv[i]);
      eo.timeout_ms = (int)(s * 1000);
      continue;
    }
    if ((took = cli_hostopts_take(&h, "exec", argc, argv, &i)) < 0)
      return CLI_EXIT_USAGE;
    if (took == 0)
      return cli_usage_error("exec", "unknown option %s (the command goes after --)", argv[i]);
  }
  if (words == NULL)
    return cli_usage_error("exec", "no command: " CLI_NAME " exec [options] -- COMMAND [ARG...]");
  if (nwords == 0)
    return cli_usage_error("exec",
                           "no command after --: " CLI_NAME " exec [options] -- COMMAND [ARG...]");
  if ((command = join_words(words, nwords)) == NULL)
    return cli_fail("exec", -ENOMEM, "cannot join the command's words");
  if (command[strspn(command, " \t\n")] == '\0') {
    status = cli_usage_error("exec", "the command after -- is empty");
    goto out;
  }
  if ((r = lc_engine_new(&engine, NULL)) < 0) {
    status = cli_fail("exec", r, "cannot start the engine");
    goto out;
  }
  cli_discovery_catch(1);
  r = lc_discover(&g, &d, engine, &h.discover);
  cli_discovery_catch(0);
  if (r < 0) {
    status = cli_discovery_fail("exec", r, "cannot find the hosts");
    goto out;
  }
  if (lc_discovery_count(d) == 0) {
    status = cli_usage_error("exec", "no hosts: give --hosts or --inventory, or add Host "
                                     "entries to the ssh config");
    goto out;
  }
  if ((r = lc_group_exec(&rep, g, command, &eo, print_line, &color)) < 0) {
    status = cli_fail("exec", r, "cannot run the command");
    goto out;
  }
  for (size_t i = 0; i < lc_discovery_count(d); i++) {
    if (lc_discovery_state(d, i) == LC_HOST_READY)
      continue;
    fprintf(stderr, "%s: %s\n", lc_discovery_host(d, i), lc_discovery_reason(d, i));
    failed++;
  }
  for (size_t i = 0; i < lc_group_report_count(rep); i++) {
    if (lc_group_report_error(rep, i) == 0)
      continue;
    fprintf(stderr, "%s\n", lc_group_report_message(rep, i)); /* it names the host */
    failed++;
  }
  if (failed > 0) {
    fprintf(stderr, "%zu of %zu hosts failed\n", failed, lc_discovery_count(d));
    status = CLI_EXIT_FAIL;
  }
out:
  lc_group_report_free(rep);
  lc_discovery_free(d);
  lc_group_free(g);
  lc_engine_free(engine);
  free(command);
  return status;
}
