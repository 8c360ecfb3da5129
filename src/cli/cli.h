/*
 * cli.h - what the subcommands of lazyclusterctl share. Internal to the tool.
 *
 * A subcommand is one file, src/cli/<name>.c, defining `int cli_<name>(int argc, char **argv)`
 * (argv[0] is the subcommand's name), declared below and listed with one line in the table in
 * main.c. It prints its own --help, returns a CLI_EXIT_* code, and is the only code that prints:
 * results to stdout, errors to stderr.
 */
#ifndef LC_CLI_H
#define LC_CLI_H

#include "lazycluster.h"

#define CLI_NAME "lazyclusterctl"

/* Exit codes. */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAIL = 1,  /* the operation failed */
  CLI_EXIT_USAGE = 2, /* bad command line */
};

/* One subcommand: its name, its entry point, and one line for `lazyclusterctl --help`. */
typedef struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} cli_command;

/* The subcommands, one line each (keep main.c's table in the same order). */
int cli_config(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_forward(int argc, char **argv);
int cli_hosts(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_start(int argc, char **argv);

/* The library's warning handler for the tool: "lazyclusterctl: warning: MESSAGE" on stderr. */
void cli_print_warning(const char *message, void *payload);
int cli_is_help(const char *arg);

/* malloc'd printf, or NULL. */
char *lc__cli_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_probe(int argc, char **argv);

/* Prints "lazyclusterctl CMD: MESSAGE" and a pointer to --help on stderr; returns CLI_EXIT_USAGE.
 */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Prints "lazyclusterctl CMD: WHAT: DETAIL" on stderr for a failed library call, where DETAIL is
 * lc_error_last(), else lc_strerror(err); returns CLI_EXIT_FAIL.
 */
int cli_fail(const char *cmd, int err, const char *what);

/* The host-selection options (hostopts.c): -F, --hosts, --inventory, --accept-new-host-keys,
 * --connect-timeout, --fanout. */
typedef struct cli_hostopts {
  lc_runtime_options runtime;
  lc_discover_options discover; /* .runtime points at runtime above */
} cli_hostopts;

void cli_hostopts_init(cli_hostopts *h);
/* Takes argv[*i] (and its value, advancing *i) when it is a host option: 1 taken, 0 not one,
 * -1 bad value (the message is printed). */
int cli_hostopts_take(cli_hostopts *h, const char *cmd, int argc, char **argv, int *i);
/* The options' help text. */
const char *cli_hostopts_help(void);

/* Whether arg is -h or --help. */
int cli_is_help(const char *arg);

#endif /* LC_CLI_H */
