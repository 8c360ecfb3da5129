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

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include <stdio.h>
#include <sys/types.h>

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
int cli_env(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_forward(int argc, char **argv);
int cli_hosts(int argc, char **argv);
int cli_list(int argc, char **argv);
int cli_logs(int argc, char **argv);
int cli_map(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_scale(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_start(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_stop(int argc, char **argv);

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

/* --peers VALUE (hostopts.c): owner, owner+root or any into *out (an lc_peers); 0, or -1 with
 * the usage error printed. */
int cli_parse_peers(const char *cmd, const char *value, int *out);
/* The --peers help lines. */
#define CLI_PEERS_HELP                                                                             \
  "  --peers WHO             who may connect to our listeners on this machine (the master's\n"     \
  "                          and workers' ports here, forwards): owner (default: only you),\n"     \
  "                          owner+root, or any (every local user); others are refused at\n"       \
  "                          once, and each refusal is logged\n"

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
/*
 * The hosts of a command that works on hosts (start, run, map): those discovery finds, with their
 * facts, or this machine alone when no host is configured (no --hosts, no --inventory, no Host
 * alias in the ssh config) with its GPUs, and with slots its cores as slots (cli_local_resources).
 * Says on stderr which (and why a host is not there). Returns CLI_EXIT_OK with *g and *d set (the
 * caller frees both, also on failure), or an exit code with the error printed: no host reachable,
 * discovery failed.
 */
int cli_hosts_connect(const char *cmd, cli_hostopts *h, lc_engine *engine, int slots, lc_group **g,
                      lc_discovery **d);
/* Gives rt, a runtime of this machine, its GPUs as this machine's host info reports them (the
 * CUDA runtime, NVML; CUDA_VISIBLE_DEVICES honoured), as discovery does for a host, so that each
 * worker or job gets a GPU of its own; with slots, its cores as slots too (map). */
void cli_local_resources(lc_runtime *rt, int slots);
/* The signal that canceled discovery (0: none): cli_hostopts_init points every discovery's cancel
 * flag here; a command's signal handler or watcher sets it (async-signal-safe). */
extern volatile sig_atomic_t cli_discovery_signal;
/* on: SIGINT and SIGTERM set cli_discovery_signal (hosts, exec: while discovery runs); 0: back to
 * the default. */
void cli_discovery_catch(int on);
/* cli_fail, except for a discovery stopped by a signal: says so and returns 128+N. */
int cli_discovery_fail(const char *cmd, int err, const char *what);

/*
 * The start path that `start` and `run` share (start.c): parse the options, bring the cluster up
 * under its name (the name is claimed first), hold it (serve its control socket, repair it, end it
 * on a signal, a stop request, its ttl or its failure), tear it down.
 */
/* The client env's entries a cluster may hand its clients (the dask type sets 5). */
#define CLI_ENV_MAX 30

typedef struct cli_launch {
  const char *cmd; /* "start" or "run", for messages */
  /* the options */
  cli_hostopts h;
  lc_cluster_options co;
  const char *name, *type_name, *master_cmd, *worker_cmd, *ttl_text;
  const char *type_args[34];
  size_t ntype_args;
  char *proc_env[33]; /* --env: "NAME=VALUE" for every process of the cluster, NULL-terminated */
  size_t nproc_env;
  long workers;
  int debug, detach, no_restarts, run, color;
  int peers; /* --peers: an lc_peers */
  /* what up made */
  const lc_cluster_type *type;
  lc_master_launcher *ml;
  lc_worker_launcher *wl;
  char *q_self, *def_master, *def_worker, *arg_master, *arg_worker;
  lc_engine *engine;
  lc_group *g;
  lc_discovery *d;
  lc_cluster *c;
  lc_control *ctl;
  char *env[CLI_ENV_MAX + 2]; /* "NAME=VALUE" for clients besides the master's address:
                                LAZYCLUSTER_NAME and the cluster's client env; NULL-terminated */
  char *client_dir; /* NAME/client: the client's files (Dask's TLS files), 0700; goes at down */
  char *why;        /* why the cluster ended, when not by a stop (NAME/ended) */
  int sigfd;
  /* while cli_start_up runs, a thread takes the signals: it cancels the start (watch.c) */
  pthread_t watcher;
  int watching, watch_pipe[2];
  atomic_int interrupted;     /* the signal that stopped the start, 0 while none */
  _Atomic(lc_cluster *) live; /* the cluster the watcher cancels, once it exists */
  /* progress */
  int master_up, master_down, ready;
  long up;
  /* a detached start's supervisor */
  int supervised, report_fd, start_log;
} cli_launch;

/* cli_start_parse's return for -h/--help (the caller prints its usage). */
#define CLI_START_HELP 100

void cli_start_init(cli_launch *s, const char *cmd);
/* Parses argv[1..argc) (a start's options). Returns -1 to go on, else an exit code or
 * CLI_START_HELP (a bad option's message is printed). */
int cli_start_parse(cli_launch *s, int argc, char **argv);
/* The start options' help lines. */
void cli_start_help(FILE *f);
/* Claims the name, starts the cluster, prints where it runs. Returns CLI_EXIT_*. */
int cli_start_up(cli_launch *s);
/* Holds the cluster until a signal, a stop request, its ttl or its failure, or (driver > 0)
 * until the driver ends (which is then waited for). Returns the exit code: the driver's. */
int cli_start_hold(cli_launch *s, pid_t driver);
/* Tears down what up made, gives the name back. */
void cli_start_down(cli_launch *s);
/* "20s", "90m", "2h", "1d" into *ms; -1 for anything else. */
int cli_parse_duration(const char *v, long long *ms);

/* A request to the supervisor of name (NULL: the one cluster there is); prints the error naming
 * the cluster. Returns CLI_EXIT_OK with *reply set (free with lc_free), or CLI_EXIT_FAIL. */
int cli_request(const char *cmd, const char *name, const char *request, int timeout_ms,
                char **reply);
/* cli_request, then its reply on stdout (ending in a newline). Returns CLI_EXIT_*. */
int cli_request_print(const char *cmd, const char *name, const char *request, int timeout_ms);
/* The cluster meant (client.c): name when given, else the one that runs (an error names them
 * when there are several, or says there is none). *out is free'd. Returns CLI_EXIT_*. */
int cli_resolve_name(const char *cmd, const char *name, char **out);
/* A JSON string, quoted and escaped. */
void cli_json_string(FILE *f, const char *s);
/* The optional NAME of a client command: 1 taken, -1 a bad argument (printed). */
int cli_take_name(const char *cmd, const char *arg, const char **name);

#endif /* LC_CLI_H */
