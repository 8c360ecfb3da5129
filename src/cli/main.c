/*
 * main.c - lazyclusterctl: the global options and the table of subcommands.
 *
 * A new subcommand is one file, src/cli/<name>.c, one declaration in cli.h and one line in
 * `commands` below.
 */
#include "cli.h"

#include <libssh/libssh.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#ifndef LC_VERSION_STRING
#define LC_VERSION_STRING "unknown"
#endif

static const cli_command commands[] = {
    {"config", cli_config, "print what the ssh config says for a host, as 'ssh -G' does"},
    {"env", cli_env, "print shell export lines that point a client at a cluster"},
    {"exec", cli_exec, "run a command on every host at once, output prefixed with its host"},
    {"forward", cli_forward, "hold -L and -R port forwards through a host until Ctrl-C"},
    {"hosts", cli_hosts, "list the hosts: reachable or why not, cores, memory, GPUs"},
    {"list", cli_list, "list this user's clusters: state, workers, master, age, time left"},
    {"logs", cli_logs, "show (-f: follow) a cluster's output and events, merged by time"},
    {"map", cli_map,
     "run many jobs over the hosts' GPU slots (GNU parallel's ::: syntax), or a pool"},
    {"probe", cli_probe, "print this machine's facts: OS, CPU cores, memory, GPUs"},
    {"run", cli_run, "start a cluster, run a driver here against it, stop it when it ends"},
    {"scale", cli_scale, "set a running cluster's number of workers"},
    {"serve", cli_serve, "answer connections on 127.0.0.1:PORT (the default command cluster)"},
    {"start", cli_start, "start a named cluster (master, N workers, tunnels); --detach: leave it"},
    {"status", cli_status, "show a cluster's master, workers and hosts"},
    {"stop", cli_stop, "stop a cluster (or --all) and wait until nothing of it is left"},
};

static void usage(FILE *f) {
  size_t width = 4;
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    if (strlen(commands[i].name) > width)
      width = strlen(commands[i].name);
  fprintf(f, "Usage: " CLI_NAME " COMMAND [OPTIONS]\n"
             "       " CLI_NAME " --version | --help\n"
             "\n"
             "Start distributed programs over SSH.\n"
             "\n"
             "Commands:\n");
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    fprintf(f, "  %-*s  %s\n", (int)width, commands[i].name, commands[i].summary);
  fprintf(f, "  %-*s  %s\n", (int)width, "help", "show this help, or a command's: help COMMAND");
  fprintf(f, "\nRun '" CLI_NAME " COMMAND --help' for a command's options.\n");
}

static void version(void) {
  const char *ssh = ssh_version(0);
  size_t sl = ssh ? strcspn(ssh, "/") : 0;
  printf(CLI_NAME " %s (liblazycluster %s, libssh %.*s, libuv %s)\n", LC_VERSION_STRING,
         lc_version(), (int)sl, ssh ? ssh : "", uv_version_string());
}

static const cli_command *find(const char *name) {
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

int cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, CLI_NAME "%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '" CLI_NAME "%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
  return CLI_EXIT_USAGE;
}

int cli_fail(const char *cmd, int err, const char *what) {
  const char *detail = lc_error_last();
  fprintf(stderr, CLI_NAME "%s%s: %s: %s\n", cmd ? " " : "", cmd ? cmd : "", what,
          detail[0] ? detail : lc_strerror(err));
  return CLI_EXIT_FAIL;
}

/* The tool opens a socket per host and per tunnel connection, a listener per worker port: it
 * takes every descriptor it may (its soft RLIMIT_NOFILE raised to the hard one); the library
 * says how far short that falls when a start needs more. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
      rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl); /* a failure leaves the start to say what it needs */
  }
}

int main(int argc, char **argv) {
  const cli_command *cmd;
  raise_nofile();
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (cli_is_help(argv[1]) || (strcmp(argv[1], "help") == 0 && argc == 2)) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
    version();
    return CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "help") == 0) {
    char help[] = "--help";
    char *sub[3] = {argv[2], help, NULL};
    if ((cmd = find(argv[2])) == NULL)
      return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
    return cmd->run(2, sub);
  }
  if (argv[1][0] == '-')
    return cli_usage_error(NULL, "unknown option '%s'", argv[1]);
  lc_set_warning_handler(cli_print_warning, NULL);
  if ((cmd = find(argv[1])) == NULL)
    return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
  return cmd->run(argc - 1, argv + 1);
}
