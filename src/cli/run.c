/*
 * run.c - `lazyclusterctl run --workers N [start options] -- DRIVER ARGS...`: starts a cluster as
 * `start` does, runs DRIVER on this machine with the cluster's context in its environment, tears
 * the cluster down when the driver ends and exits with the driver's status (128+N for signal N).
 * Ctrl-C reaches both; a SIGTERM or a `stop` is passed on to the driver.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void) {
  printf("usage: " CLI_NAME " run --workers N [start options] -- DRIVER [ARGS...]\n"
         "Starts a cluster, runs DRIVER on this machine with LAZYCLUSTER_MASTER_ADDR,\n"
         "LAZYCLUSTER_MASTER_PORT, LAZYCLUSTER_NAME and what `" CLI_NAME " env` prints (for\n"
         "--type dask: DASK_SCHEDULER_ADDRESS and the TLS config keys, so that a plain\n"
         "Client() connects) in its environment and the terminal as its stdin, stdout and\n"
         "stderr, stops the cluster when it ends and exits with its status (128+N when signal\n"
         "N ended it). Ctrl-C stops both. The cluster has a name as with start, so status,\n"
         "logs and stop work on it meanwhile.\n\n"
         "Start options:\n");
  cli_start_help(stdout);
  return CLI_EXIT_OK;
}

/* The driver, in the child: the cluster's context in its environment, signals as they were. */
static void exec_driver(cli_launch *s, char **driver) {
  sigset_t none;
  char port[16];
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  snprintf(port, sizeof(port), "%d", lc_cluster_master_port(s->c));
  setenv("LAZYCLUSTER_MASTER_ADDR", "localhost", 1);
  setenv("LAZYCLUSTER_MASTER_PORT", port, 1);
  for (size_t i = 0; s->env[i] != NULL; i++)
    putenv(s->env[i]);
  execvp(driver[0], driver);
  fprintf(stderr, CLI_NAME " run: cannot run %s: %s\n", driver[0], strerror(errno));
  _exit(127);
}

int cli_run(int argc, char **argv) {
  cli_launch s;
  int dashes = -1, r;
  pid_t pid;
  for (int i = 1; i < argc && dashes < 0; i++)
    if (strcmp(argv[i], "--") == 0)
      dashes = i;
  cli_start_init(&s, "run");
  s.run = 1;
  if ((r = cli_start_parse(&s, dashes < 0 ? argc : dashes, argv)) >= 0)
    return r == CLI_START_HELP ? usage() : r;
  if (dashes < 0 || dashes + 1 >= argc)
    return cli_usage_error("run", "what to run? give it after --: run --workers N -- DRIVER ARGS");
  if ((r = cli_start_up(&s)) == CLI_EXIT_OK) {
    fflush(stdout);
    fflush(stderr);
    if ((pid = fork()) < 0) {
      fprintf(stderr, CLI_NAME " run: fork: %s\n", strerror(errno));
      r = CLI_EXIT_FAIL;
    } else if (pid == 0) {
      exec_driver(&s, argv + dashes + 1);
    } else {
      r = cli_start_hold(&s, pid);
    }
  }
  cli_start_down(&s);
  return r;
}
