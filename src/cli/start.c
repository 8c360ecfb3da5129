/*
 * start.c - `lazyclusterctl start --workers N ...`: starts a master and N workers across the
 * hosts (this machine alone when no host is configured) under a name, shows progress, prints
 * where everything runs, and holds the cluster: it serves the cluster's control socket (status,
 * logs, env, scale, stop from any shell of the user), repairs it (lc_cluster_wait), and ends it on
 * Ctrl-C, SIGTERM, a stop request or its ttl, tearing it down in order. A failure tears down what
 * was started and exits 1 with the cause.
 *
 * With --detach the work is done by a supervisor process (setsid, double fork, no terminal) that
 * reports to the starting process through a pipe once the cluster is ready or has failed.
 *
 * The parts (parse, up, hold, down) are shared with `run` (run.c).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The record a supervisor sends to the process that started it: "ready\tNAME\tPORT\tHOST\tLOGS\n"
 * or "failed\n" followed by what it wrote to stderr. */
#define REPORT_READY "ready\t"
#define REPORT_FAILED "failed\n"

/* One line of a process, tagged "[HOST master]" or "[HOST worker-N]"; also into its log. */
static void output_line(lc_cluster *c, int index, const char *host, const char *line, size_t len,
                        lc_stream stream, void *payload) {
  static char buf[1 << 16];
  cli_launch *s = payload;
  char tag[256];
  int n;
  (void)c;
  if (s->ctl != NULL)
    lc_control_log_line(s->ctl, index, host, line, len, stream);
  if (!s->debug)
    return;
  if (index < 0)
    snprintf(tag, sizeof(tag), "%s master", host);
  else
    snprintf(tag, sizeof(tag), "%s worker-%d", host, index);
  n = snprintf(buf, sizeof(buf), s->color ? "\033[%sm[%s]\033[0m " : "[%.0s%s] ",
               stream == LC_STDERR ? "33" : "36", tag);
  if (n < 0 || (size_t)n >= sizeof(buf))
    return;
  if ((size_t)n + len + 1 > sizeof(buf))
    len = sizeof(buf) - (size_t)n - 1;
  memcpy(buf + n, line, len);
  buf[(size_t)n + len] = '\n';
  fwrite(buf, 1, (size_t)n + len + 1, stderr); /* one write a line: never two tags on one line */
  fflush(stderr);
}

/* An event of a running cluster: into cluster.log and, in the foreground, on stderr. */
static void note(cli_launch *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(cli_launch *s, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (s->ctl != NULL)
    lc_control_log_event(s->ctl, "%s", msg);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

/* A notice of the engine (a refused connection to one of our listeners): as an event. Engine
 * thread. */
static void on_notice(const char *message, void *payload) { note(payload, "%s", message); }

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  cli_launch *s = payload;
  lc_worker_status ws = {.version = LC_WORKER_STATUS_VERSION};
  lc_host_status hs = {.version = LC_HOST_STATUS_VERSION};
  const char *wh = "?", *hn = "?";
  if (index >= 0 && lc_cluster_worker_status(c, (size_t)index, &ws) == 0 && ws.host != NULL)
    wh = ws.host;
  if (index >= 0 && lc_cluster_host_status(c, (size_t)index, &hs) == 0 && hs.name != NULL)
    hn = hs.name;
  switch (ev) {
  case LC_CLUSTER_MASTER_UP:
    s->master_up = 1;
    note(s, "master up: localhost:%d (on %s)", lc_cluster_master_port(c),
         lc_cluster_master_host(c));
    break;
  case LC_CLUSTER_WORKER_UP:
    if (!s->ready && ++s->up == s->workers)
      note(s, "workers up: %ld/%ld", s->up, s->workers);
    else if (s->ready)
      note(s, "%s worker-%d up (port %d)", wh, index, ws.port);
    break;
  case LC_CLUSTER_MASTER_DOWN:
    s->master_down = 1;
    note(s, "%s master ended", lc_cluster_master_host(c));
    break;
  case LC_CLUSTER_WORKER_DOWN:
    note(s, "%s worker-%d ended%s%s", wh, index, ws.last_end && ws.last_end[0] ? ": " : "",
         ws.last_end ? ws.last_end : "");
    break;
  case LC_CLUSTER_WORKER_RESTARTED:
    note(s, "%s worker-%d restarted (restart %d, port %d)", wh, index, ws.restarts, ws.port);
    break;
  case LC_CLUSTER_WORKER_FAILED:
    note(s, "%s worker-%d failed: given up%s%s", wh, index,
         ws.last_end && ws.last_end[0] ? " after " : "", ws.last_end ? ws.last_end : "");
    break;
  case LC_CLUSTER_HOST_LOST:
    note(s, "%s lost: it does not answer", hn);
    break;
  case LC_CLUSTER_HOST_BACK:
    note(s, "%s back", hn);
    break;
  case LC_CLUSTER_WORKER_MOVED:
    note(s, "worker-%d moved to %s (port %d)", index, wh, ws.port);
    break;
  case LC_CLUSTER_MASTER_RESTARTED:
    s->master_down = 0;
    note(s, "%s master restarted (restart %d)", lc_cluster_master_host(c),
         lc_cluster_master_restarts(c));
    break;
  case LC_CLUSTER_EXPIRED:
    note(s, "time is up (--ttl)");
    break;
  case LC_CLUSTER_WORKER_REMOVED:
    note(s, "%s worker-%d removed (scale)", wh, index);
    break;
  default:
    break;
  }
}

/* "master 30 s, workers 60 s": the start limits of a built-in type when none is given, read from
 * the launchers it makes (their timeout_ms, else the library's). */
static void type_limits(const char *name, char *out, size_t size) {
  const lc_cluster_type *t = lc_cluster_type_find(name);
  const char *args[] = {"master=:", "worker=:", NULL};
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  int master_ms = LC_CLUSTER_MASTER_TIMEOUT_MS, worker_ms = LC_CLUSTER_WORKER_TIMEOUT_MS;
  if (t != NULL && t->make(&m, &w, args) == 0) {
    if (m->version >= 2 && m->timeout_ms > 0)
      master_ms = m->timeout_ms;
    if (w->version >= 3 && w->timeout_ms > 0)
      worker_ms = w->timeout_ms;
    if (t->release != NULL)
      t->release(m, w);
  }
  snprintf(out, size, "master %g s, workers %g s", master_ms / 1000.0, worker_ms / 1000.0);
}

void cli_start_help(FILE *f) {
  char command_limits[64], dask_limits[64];
  type_limits("command", command_limits, sizeof(command_limits));
  type_limits("dask", dask_limits, sizeof(dask_limits));
  fprintf(
      f,
      "  --workers N             workers to start (required)\n"
      "  --name NAME             the cluster's name (letters, digits, . _ -; default: one is\n"
      "                          made up and printed); other commands find it by this name\n"
      "  --type T                command (default), dask, or PATH.so (a cluster type in C)\n"
      "  --master-cmd TEMPLATE   the master's command ({master_port} {host})\n"
      "  --worker-cmd TEMPLATE   each worker's command ({master_port} {worker_port}\n"
      "                          {worker_index} {worker_count} {gpu} {host} {workdir})\n"
      "  --type-arg KEY=VALUE    an option of the type (dask: nthreads=N, worker_args=...)\n"
      "  --env NAME=VALUE        a variable for every process of the cluster; --env NAME\n"
      "                          takes its value from here. Values go through the SSH\n"
      "                          channels, never into a command line\n"
      "  --master-host HOST      run the master on HOST (default: this machine)\n"
      "  --master-port P         the master's port (default 61000; another when taken)\n"
      "  --fixed-master-port     fail instead of taking another port\n"
      "  --ports RANGES          worker ports (default 61001-61199)\n"
      "  --timeout S             worker start limit in seconds, all workers together\n"
      "                          (default: the type's, below)\n"
      "  --master-timeout S      master start limit in seconds (default: the type's, below)\n"
      "  --placement P           spread (default: each worker to the host with the fewest)\n"
      "                          or pack (fill each host's GPUs/slots before the next)\n"
      "  --max-workers-per-host N  at most N workers on one host (default: no cap)\n"
      "  --no-worker-on-master-host  no worker on the master's host (default: it may take "
      "some)\n"
      "  --restart P             a worker that ends: never, on-failure (default: again when it\n"
      "                          failed, not when it exited 0) or always\n"
      "  --max-restarts N        at most N restarts of one worker in 10 minutes, then it is\n"
      "                          given up (default 5; 0: never restart; unlimited)\n"
      "  --ttl DURATION          stop the cluster by itself after DURATION: 20s, 90m, 2h, 1d\n"
      "                          (default: no limit)\n"
      "  --debug                 show every process's output, tagged [host worker-N] (it is\n"
      "                          in the logs in any case: " CLI_NAME " logs NAME)\n"
      "  --insecure              let the type leave its own connections unauthenticated\n"
      "                          (dask: plain tcp:// instead of mutual TLS with the cluster's\n"
      "                          own CA): then any user who can reach the scheduler's port on\n"
      "                          any host runs code as you. Default: secure\n" CLI_PEERS_HELP "%s\n"
      "Start limits when none is given, per type:\n"
      "  command                 %s\n"
      "  dask                    %s\n"
      "  PATH.so                 the type's own, else master %g s, workers %g s\n",
      cli_hostopts_help(), command_limits, dask_limits, LC_CLUSTER_MASTER_TIMEOUT_MS / 1000.0,
      LC_CLUSTER_WORKER_TIMEOUT_MS / 1000.0);
}

static int usage(void) {
  printf("usage: " CLI_NAME " start --workers N [--name NAME] [--detach] [options]\n"
         "Starts a master and N workers under a name and holds them until Ctrl-C, SIGTERM,\n"
         "'" CLI_NAME " stop NAME' or its --ttl; every process reaches the master on\n"
         "localhost:PORT through SSH tunnels. A worker that ends is started again as --restart\n"
         "says. With no host configured, this machine is the one runtime.\n\n"
         "  --detach                return once the cluster is ready, leaving it to a supervisor\n"
         "                          process; prints its name, master and logs directory\n"
         "                          (default: hold it in the foreground)\n");
  cli_start_help(stdout);
  return CLI_EXIT_OK;
}

static int parse_seconds(const char *v, int *ms) {
  char *end;
  double s = strtod(v, &end);
  if (end == v || *end != '\0' || s <= 0 || s > 86400)
    return -1;
  *ms = (int)(s * 1000);
  return 0;
}

int cli_parse_duration(const char *v, long long *ms) {
  char *end;
  double n = strtod(v, &end), unit;
  if (end == v || n <= 0 || end[0] == '\0' || end[1] != '\0')
    return -1;
  switch (end[0]) {
  case 's':
    unit = 1e3;
    break;
  case 'm':
    unit = 60e3;
    break;
  case 'h':
    unit = 3600e3;
    break;
  case 'd':
    unit = 86400e3;
    break;
  default:
    return -1;
  }
  if (n * unit < 1000 || n * unit > 366 * 86400e3)
    return -1;
  *ms = (long long)(n * unit);
  return 0;
}

void cli_start_init(cli_launch *s, const char *cmd) {
  memset(s, 0, sizeof(*s));
  cli_hostopts_init(&s->h);
  s->co = (lc_cluster_options)LC_CLUSTER_OPTIONS_INIT;
  s->cmd = cmd;
  s->type_name = "command";
  s->workers = -1;
  s->sigfd = -1;
  s->report_fd = -1;
  s->color = isatty(2);
}

int cli_start_parse(cli_launch *s, int argc, char **argv) {
  const char *cmd = s->cmd;
  char *end;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int took;
    if (cli_is_help(a))
      return CLI_START_HELP;
    if (strcmp(a, "--debug") == 0) {
      s->debug = 1;
      continue;
    }
    if (strcmp(a, "--detach") == 0 && strcmp(cmd, "start") == 0) {
      s->detach = 1;
      continue;
    }
    if (strcmp(a, "--insecure") == 0) {
      s->co.insecure = 1;
      continue;
    }
    if (strcmp(a, "--fixed-master-port") == 0) {
      s->co.master_port_fixed = 1;
      continue;
    }
    if (strcmp(a, "--no-worker-on-master-host") == 0) {
      s->co.exclude_master_host = 1;
      continue;
    }
    if ((took = cli_hostopts_take(&s->h, cmd, argc, argv, &i)) < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if (v == NULL)
      return cli_usage_error(cmd, "%s: unknown option, or it needs a value", a);
    i++;
    if (strcmp(a, "--workers") == 0) {
      s->workers = strtol(v, &end, 10);
      if (end == v || *end != '\0' || s->workers < 1 || s->workers > 100000)
        return cli_usage_error(cmd, "--workers %s: want a number, 1 or more", v);
    } else if (strcmp(a, "--name") == 0) {
      s->name = v;
    } else if (strcmp(a, "--type") == 0) {
      s->type_name = v;
    } else if (strcmp(a, "--master-cmd") == 0) {
      s->master_cmd = v;
    } else if (strcmp(a, "--worker-cmd") == 0) {
      s->worker_cmd = v;
    } else if (strcmp(a, "--type-arg") == 0) {
      if (strchr(v, '=') == NULL || s->ntype_args >= 30)
        return cli_usage_error(cmd, "--type-arg %s: want KEY=VALUE", v);
      s->type_args[s->ntype_args++] = v;
    } else if (strcmp(a, "--env") == 0) {
      /* NAME=VALUE, or NAME: its value here, so that it shows in no command line at all */
      const char *eq = strchr(v, '='), *val = eq ? NULL : getenv(v);
      size_t n = eq ? (size_t)(eq - v) : strlen(v);
      if (n == 0 ||
          strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n ||
          (v[0] >= '0' && v[0] <= '9') || s->nproc_env >= 32)
        return cli_usage_error(cmd, "--env %.*s: want NAME=VALUE or NAME (letters, digits, _)",
                               (int)n, v);
      if (eq == NULL && val == NULL)
        return cli_usage_error(cmd, "--env %s: %s is not set here (give NAME=VALUE)", v, v);
      if ((s->proc_env[s->nproc_env] = eq ? strdup(v) : lc__cli_sprintf("%s=%s", v, val)) == NULL)
        return cli_usage_error(cmd, "out of memory");
      s->co.env = (const char *const *)s->proc_env;
      s->nproc_env++;
    } else if (strcmp(a, "--master-host") == 0) {
      s->co.master_host = v;
    } else if (strcmp(a, "--master-port") == 0) {
      s->co.master_port = (int)strtol(v, &end, 10);
      if (end == v || *end != '\0' || s->co.master_port < 1 || s->co.master_port > 65535)
        return cli_usage_error(cmd, "--master-port %s: want a port, 1-65535", v);
    } else if (strcmp(a, "--ports") == 0) {
      lc_ports *p = NULL;
      if (lc_ports_parse(&p, v) < 0)
        return cli_usage_error(cmd, "%s", lc_error_last());
      lc_ports_free(p);
      s->co.worker_ports = v;
    } else if (strcmp(a, "--timeout") == 0) {
      if (parse_seconds(v, &s->co.worker_timeout_ms) < 0)
        return cli_usage_error(cmd, "--timeout %s: want seconds", v);
    } else if (strcmp(a, "--placement") == 0) {
      if (strcmp(v, "spread") != 0 && strcmp(v, "pack") != 0)
        return cli_usage_error(cmd, "--placement %s: want spread or pack", v);
      s->co.placement = strcmp(v, "pack") == 0 ? LC_PLACE_PACK : LC_PLACE_SPREAD;
    } else if (strcmp(a, "--max-workers-per-host") == 0) {
      long cap = strtol(v, &end, 10);
      if (*end != '\0' || end == v || cap < 1 || cap > 100000)
        return cli_usage_error(cmd, "--max-workers-per-host %s: want a number, 1 or more", v);
      s->co.max_workers_per_host = (int)cap;
    } else if (strcmp(a, "--master-timeout") == 0) {
      if (parse_seconds(v, &s->co.master_timeout_ms) < 0)
        return cli_usage_error(cmd, "--master-timeout %s: want seconds", v);
    } else if (strcmp(a, "--restart") == 0) {
      if (strcmp(v, "never") == 0)
        s->co.restart = LC_RESTART_NEVER;
      else if (strcmp(v, "on-failure") == 0)
        s->co.restart = LC_RESTART_ON_FAILURE;
      else if (strcmp(v, "always") == 0)
        s->co.restart = LC_RESTART_ALWAYS;
      else
        return cli_usage_error(cmd, "--restart '%s': want never, on-failure or always", v);
    } else if (strcmp(a, "--max-restarts") == 0) {
      long n = strtol(v, &end, 10);
      if (strcmp(v, "unlimited") == 0) {
        s->co.max_restarts = -1;
      } else if (end == v || *end != '\0' || n < 0 || n > 1000000) {
        return cli_usage_error(cmd, "--max-restarts '%s': want a number, 0 or more, or unlimited",
                               v);
      } else if (n == 0) {
        s->no_restarts = 1; /* the options' 0 is the default (5): say never instead */
      } else {
        s->co.max_restarts = (int)n;
      }
    } else if (strcmp(a, "--peers") == 0) {
      if (cli_parse_peers(cmd, v, &s->peers) < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--ttl") == 0) {
      if (cli_parse_duration(v, &s->co.ttl_ms) < 0)
        return cli_usage_error(cmd,
                               "--ttl '%s': want a duration such as 20s, 90m, 2h or 1d "
                               "(1 s to 366 days)",
                               v);
      s->ttl_text = v;
    } else {
      return cli_usage_error(cmd, "unknown option %s", a);
    }
  }
  if (s->no_restarts)
    s->co.restart = LC_RESTART_NEVER;
  if (s->workers < 0)
    return cli_usage_error(cmd, "how many workers? give --workers N");
  return -1;
}

/* The cluster type and its launchers. */
static int make_type(cli_launch *s) {
  int r;
  if (strchr(s->type_name, '/') != NULL || strstr(s->type_name, ".so") != NULL) {
    if ((r = lc_cluster_type_load(&s->type, s->type_name)) < 0)
      return cli_fail(s->cmd, r, "--type");
  } else if ((s->type = lc_cluster_type_find(s->type_name)) == NULL) {
    return cli_usage_error(s->cmd, "--type %s: unknown (command, dask, or PATH.so)", s->type_name);
  }
  if (strcmp(s->type->name, "command") == 0) {
    /* by default a tiny service of our own, which exists wherever this binary does */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    if (lc_shell_quote(&s->q_self, self) < 0)
      return cli_fail(s->cmd, -ENOMEM, "out of memory");
    s->def_master = lc__cli_sprintf("exec %s serve {master_port} master", s->q_self);
    s->def_worker = lc__cli_sprintf("exec %s serve {worker_port} worker-{worker_index}", s->q_self);
    s->arg_master = lc__cli_sprintf("master=%s", s->master_cmd ? s->master_cmd : s->def_master);
    s->arg_worker = lc__cli_sprintf("worker=%s", s->worker_cmd ? s->worker_cmd : s->def_worker);
    if (s->arg_master == NULL || s->arg_worker == NULL)
      return cli_fail(s->cmd, -ENOMEM, "out of memory");
    s->type_args[s->ntype_args++] = s->arg_master;
    s->type_args[s->ntype_args++] = s->arg_worker;
  } else if (s->master_cmd || s->worker_cmd) {
    return cli_usage_error(s->cmd, "--master-cmd and --worker-cmd are for --type command");
  }
  s->type_args[s->ntype_args] = NULL;
  lc_error_set(0, "%s", ""); /* a type that fails without a detail leaves none behind */
  if ((r = s->type->make(&s->ml, &s->wl, s->type_args)) < 0) {
    const char *detail = lc_error_last();
    fprintf(stderr, CLI_NAME " %s: --type %s: the %s type could not make its launchers: %s%s\n",
            s->cmd, s->type_name, s->type->name, detail[0] ? detail : lc_strerror(r),
            detail[0] ? "" : " (the type gave no detail)");
    s->ml = NULL;
    s->wl = NULL;
    return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

/* Removes the client directory and the plain files in it (no symlink is followed). */
static void remove_client_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  if (d == NULL && fd >= 0)
    close(fd);
  while (d != NULL && (de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      unlinkat(dirfd(d), de->d_name, 0);
  if (d != NULL)
    closedir(d);
  rmdir(dir);
}

/* What a client of the cluster needs besides LAZYCLUSTER_MASTER_ADDR and _PORT (those the control
 * socket's env gives by itself): the name, and what the cluster's type set for its clients
 * (Dask: the scheduler's address and the client's TLS files). */
static int make_env(cli_launch *s) {
  const char *const *more = lc_cluster_client_env(s->c);
  size_t n = 0;
  if ((s->env[n++] = lc__cli_sprintf("LAZYCLUSTER_NAME=%s", lc_control_name(s->ctl))) == NULL)
    return -ENOMEM;
  for (; *more != NULL; more++) {
    if (n >= CLI_ENV_MAX)
      return lc_error_set(-E2BIG, "the cluster's type set more than %d client variables",
                          CLI_ENV_MAX);
    if ((s->env[n++] = lc__cli_sprintf("%s", *more)) == NULL)
      return -ENOMEM;
  }
  s->env[n] = NULL;
  return lc_control_set_env(s->ctl, (const char *const *)s->env);
}

/* The directory of the client's files: NAME/client, 0700 (in NAME/, which is 0700 too). A
 * stale one (a supervisor killed before it cleaned up) is emptied first. */
static int make_client_dir(cli_launch *s) {
  if ((s->client_dir = lc__cli_sprintf("%s/client", lc_control_dir(s->ctl))) == NULL)
    return -ENOMEM;
  remove_client_dir(s->client_dir);
  if (mkdir(s->client_dir, 0700) < 0 || chmod(s->client_dir, 0700) < 0)
    return lc_error_set(-errno, "cannot make %s: %s", s->client_dir, strerror(errno));
  s->co.client_dir = s->client_dir;
  return 0;
}

/* The supervisor's stdout and stderr from now on: NAME/supervisor.log, with what it wrote while
 * the cluster started (the start log, a file of its own until the name was known). */
static void supervisor_log(cli_launch *s) {
  char *path = lc__cli_sprintf("%s/supervisor.log", lc_control_dir(s->ctl));
  char buf[8192];
  ssize_t n;
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
  free(path);
  if (fd < 0)
    fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  fflush(stdout);
  fflush(stderr);
  if (s->start_log >= 0 && lseek(s->start_log, 0, SEEK_SET) == 0)
    while ((n = read(s->start_log, buf, sizeof(buf))) > 0)
      if (write(fd, buf, (size_t)n) != n)
        break;
  dup2(fd, 1);
  dup2(fd, 2);
  close(fd);
  if (s->start_log >= 0)
    close(s->start_log);
  s->start_log = -1;
}

static void report(cli_launch *s, const char *text, size_t len) {
  while (len > 0) {
    ssize_t w = write(s->report_fd, text, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    text += w;
    len -= (size_t)w;
  }
}

/* Tells the starting process that the cluster is ready, then leaves it. */
static void report_ready(cli_launch *s) {
  char *msg = lc__cli_sprintf(REPORT_READY "%s\t%d\t%s\t%s\n", lc_control_name(s->ctl),
                              lc_cluster_master_port(s->c), lc_cluster_master_host(s->c),
                              lc_control_logs_dir(s->ctl));
  supervisor_log(s);
  if (msg != NULL)
    report(s, msg, strlen(msg));
  free(msg);
  close(s->report_fd);
  s->report_fd = -1;
}

/* Tells the starting process why the start failed: what the supervisor wrote to stderr. */
static void report_failed(cli_launch *s) {
  char buf[8192];
  ssize_t n;
  fflush(stdout);
  fflush(stderr);
  report(s, REPORT_FAILED, strlen(REPORT_FAILED));
  if (s->start_log >= 0 && lseek(s->start_log, 0, SEEK_SET) == 0)
    while ((n = read(s->start_log, buf, sizeof(buf))) > 0)
      report(s, buf, (size_t)n);
  close(s->report_fd);
  s->report_fd = -1;
}

/*
 * Forks the supervisor: returns an exit code in the starting process (once the supervisor
 * reported), or -1 in the supervisor, which goes on to start the cluster. Called before any
 * thread of the library exists: only the calling thread survives a fork.
 */
static int detach(cli_launch *s) {
  int p[2], st;
  pid_t pid;
  char *got = NULL;
  size_t len = 0, cap = 0;
  ssize_t n;
  if (pipe2(p, O_CLOEXEC) < 0) {
    fprintf(stderr, CLI_NAME " start: --detach: pipe: %s\n", strerror(errno));
    return CLI_EXIT_FAIL;
  }
  fflush(stdout);
  fflush(stderr);
  if ((pid = fork()) < 0) {
    fprintf(stderr, CLI_NAME " start: --detach: fork: %s\n", strerror(errno));
    close(p[0]);
    close(p[1]);
    return CLI_EXIT_FAIL;
  }
  if (pid == 0) {
    FILE *log;
    int null;
    close(p[0]);
    if (setsid() < 0 || (pid = fork()) < 0)
      _exit(1);
    if (pid > 0)
      _exit(0); /* the supervisor is nobody's child and no session leader: no terminal, ever */
    signal(SIGHUP, SIG_IGN);
    null = open("/dev/null", O_RDWR);
    log = tmpfile();
    if (null < 0 || log == NULL) {
      static const char msg[] = REPORT_FAILED CLI_NAME " start: --detach: no /dev/null or no "
                                                       "temporary file\n";
      if (write(p[1], msg, sizeof(msg) - 1) < 0)
        _exit(2);
      _exit(1);
    }
    s->start_log = dup(fileno(log));
    fcntl(s->start_log, F_SETFD, FD_CLOEXEC);
    dup2(null, 0);
    dup2(fileno(log), 1);
    dup2(fileno(log), 2);
    fclose(log);
    close(null);
    s->report_fd = p[1];
    s->color = 0;
    return -1;
  }
  close(p[1]);
  for (;;) {
    if (len + 4096 > cap) {
      char *more = realloc(got, cap = cap * 2 + 8192);
      if (more == NULL)
        break;
      got = more;
    }
    n = read(p[0], got + len, cap - len - 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(p[0]);
  waitpid(pid, &st, 0);
  if (got != NULL)
    got[len] = '\0';
  if (got != NULL && strncmp(got, REPORT_READY, strlen(REPORT_READY)) == 0) {
    char *f[4], *save = NULL, *line = got + strlen(REPORT_READY);
    line[strcspn(line, "\n")] = '\0';
    for (int i = 0; i < 4; i++)
      f[i] = strtok_r(i == 0 ? line : NULL, "\t", &save);
    printf("name %s\nmaster localhost:%s on %s\nlogs %s\n", f[0] ? f[0] : "?", f[1] ? f[1] : "?",
           f[2] ? f[2] : "?", f[3] ? f[3] : "?");
    free(got);
    return CLI_EXIT_OK;
  }
  if (got != NULL && strncmp(got, REPORT_FAILED, strlen(REPORT_FAILED)) == 0)
    fputs(got + strlen(REPORT_FAILED), stderr);
  else
    fprintf(stderr, CLI_NAME " start: --detach: the supervisor ended before it said whether the "
                             "cluster started\n");
  free(got);
  return CLI_EXIT_FAIL;
}

/* What --insecure means, said at every start that asks for it (a detached one: before it
 * detaches, where the user sees it). */
static void insecure_warning(const cli_launch *s) {
  int dask = strcmp(s->type_name, "dask") == 0;
  if (s->co.insecure)
    fprintf(stderr,
            "warning: --insecure: the cluster's own connections are not authenticated%s: any "
            "user who can reach the %s's port on any host runs code as you\n",
            dask ? " (Dask over plain tcp://, no TLS)" : "", dask ? "scheduler" : "master");
}

/*
 * The watcher: while a start runs (discovery, the master, the workers), SIGINT, SIGTERM and
 * SIGHUP (not in a supervisor) cancel it; lc_cluster_start then undoes what it made and returns,
 * and cli_start_up returns 128+N. Discovery stops through its cancel flag (cli_discovery_signal):
 * no more connects, its facts steps told to stop.
 */
static void *watch_signals(void *arg) {
  cli_launch *s = arg;
  for (;;) {
    struct pollfd p[2] = {{.fd = s->sigfd, .events = POLLIN},
                          {.fd = s->watch_pipe[0], .events = POLLIN}};
    struct signalfd_siginfo si;
    lc_cluster *c;
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      return NULL;
    if (p[1].revents != 0)
      return NULL; /* the start is over: cli_start_hold takes the signals */
    if (!(p[0].revents & POLLIN) || read(s->sigfd, &si, sizeof(si)) != sizeof(si))
      continue;
    if (si.ssi_signo == SIGHUP && s->supervised)
      continue;
    fprintf(stderr, "stopping (%s): undoing what the start made\n",
            si.ssi_signo == SIGINT    ? "SIGINT"
            : si.ssi_signo == SIGTERM ? "SIGTERM"
                                      : "SIGHUP");
    atomic_store(&s->interrupted, (int)si.ssi_signo);
    /* discovery stops within 100 ms; an atomic store: the engine thread reads it */
    __atomic_store_n(&cli_discovery_signal, (sig_atomic_t)si.ssi_signo, __ATOMIC_RELAXED);
    if ((c = atomic_load(&s->live)) != NULL)
      lc_cluster_cancel(c);
    return NULL;
  }
}

static int start_up(cli_launch *s);
static void announce_ready(cli_launch *s);

int cli_start_up(cli_launch *s) {
  sigset_t sigs;
  int r, sig;

  /* signals arrive through sigfd: block them in every thread before any starts */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  if ((s->sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
    fprintf(stderr, CLI_NAME " %s: signalfd: %s\n", s->cmd, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  if (pipe2(s->watch_pipe, O_CLOEXEC) < 0 ||
      pthread_create(&s->watcher, NULL, watch_signals, s) != 0) {
    fprintf(stderr, CLI_NAME " %s: cannot watch for signals: %s\n", s->cmd, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  s->watching = 1;
  r = start_up(s);
  if (write(s->watch_pipe[1], "", 1) < 0) /* the watcher ends; a signal now is hold's */
    fprintf(stderr, CLI_NAME " %s: cannot stop the signal watcher\n", s->cmd);
  pthread_join(s->watcher, NULL);
  s->watching = 0;
  close(s->watch_pipe[0]);
  close(s->watch_pipe[1]);
  if ((sig = atomic_load(&s->interrupted)) != 0) {
    if (s->why == NULL)
      s->why = lc__cli_sprintf("stopped by %s while it started", sig == SIGINT    ? "SIGINT"
                                                                 : sig == SIGTERM ? "SIGTERM"
                                                                                  : "SIGHUP");
    return 128 + sig;
  }
  if (r == CLI_EXIT_OK)
    announce_ready(s);
  return r;
}

static int start_up(cli_launch *s) {
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  int r;

  /* the name first: a taken one is refused before anything starts */
  o.name = s->name;
  o.type_name = s->type_name;
  if ((r = lc_control_new(&s->ctl, &o)) < 0)
    return r == -EINVAL ? (cli_fail(s->cmd, r, "--name"), CLI_EXIT_USAGE)
                        : cli_fail(s->cmd, r, "cannot claim the cluster's name");
  fprintf(stderr, "name: %s\n", lc_control_name(s->ctl));
  lc_control_set_state(s->ctl, "starting", NULL);

  if ((r = make_type(s)) != CLI_EXIT_OK)
    return r;
  eo.peers = s->peers;
  eo.on_notice = on_notice;
  eo.payload = s;
  if ((r = lc_engine_new(&s->engine, &eo)) < 0)
    return cli_fail(s->cmd, r, "cannot start the engine");
  if ((r = cli_hosts_connect(s->cmd, &s->h, s->engine, 0, &s->g, &s->d)) != CLI_EXIT_OK)
    return r;
  if (atomic_load(&s->interrupted))
    return CLI_EXIT_FAIL; /* after discovery, before anything started on the hosts */
  if (!s->supervised)
    insecure_warning(s);
  if ((r = make_client_dir(s)) < 0)
    return cli_fail(s->cmd, r, "cannot make the directory of the client's files");
  s->co.on_output = output_line; /* into the logs always; on stderr with --debug */
  s->co.master_timeout_option = "--master-timeout S";
  s->co.worker_timeout_option = "--timeout S";
  s->co.on_event = on_event;
  s->co.payload = s;
  if ((r = lc_cluster_new(&s->c, s->g, s->ml, s->wl, &s->co)) < 0)
    return cli_fail(s->cmd, r, "cannot make the cluster");
  atomic_store(&s->live, s->c);
  if (atomic_load(&s->interrupted)) /* it came before the watcher could see the cluster */
    lc_cluster_cancel(s->c);
  lc_control_attach(s->ctl, s->c);
  /* the master and the workers together: what the workers need is made while the master starts */
  if ((r = lc_cluster_start(s->c, (int)s->workers)) == LC_ECANCELED)
    return CLI_EXIT_FAIL; /* the watcher said why */
  if (r < 0)
    return cli_fail(s->cmd, r,
                    s->master_up ? "the workers did not start" : "the cluster did not start");
  if ((r = make_env(s)) < 0)
    return cli_fail(s->cmd, r, "cannot set the cluster's environment");
  lc_control_set_state(s->ctl, "running", NULL);
  s->ready = 1;
  return CLI_EXIT_OK;
}

/* The cluster's table and "ready:", said once the watcher has handed the signals to
 * cli_start_hold: a Ctrl-C after "ready:" stops a running cluster (exit 0), never a start. */
static void announce_ready(cli_launch *s) {
  FILE *table = s->run ? stderr : stdout; /* run: stdout is the driver's */
  fprintf(table, "name      %s\n", lc_control_name(s->ctl));
  fprintf(table, "logs      %s\n", lc_control_logs_dir(s->ctl));
  fprintf(table, "master    localhost:%d on %s\n", lc_cluster_master_port(s->c),
          lc_cluster_master_host(s->c));
  for (size_t i = 0; i < lc_cluster_worker_count(s->c); i++) {
    const lc_worker_info *w = lc_cluster_worker(s->c, i);
    char gpu[16] = "-";
    if (w->gpu >= 0)
      snprintf(gpu, sizeof(gpu), "%d", w->gpu);
    fprintf(table, "worker-%-3d localhost:%d on %s gpu %s\n", w->index, w->port, w->host, gpu);
  }
  if (!s->run)
    fprintf(table, "ready: Ctrl-C or '" CLI_NAME " stop %s' stops everything\n",
            lc_control_name(s->ctl));
  fflush(table);
  if (s->report_fd >= 0)
    report_ready(s);
}

/* The driver's end as an exit code: its status, or 128+N for signal N. */
static int driver_code(int st) {
  if (WIFEXITED(st))
    return WEXITSTATUS(st);
  if (WIFSIGNALED(st))
    return 128 + WTERMSIG(st);
  return CLI_EXIT_FAIL;
}

/* Ends the driver: it may be ending already (a Ctrl-C reached it too); else SIGTERM, then
 * SIGKILL. Returns its exit code. */
static int stop_driver(pid_t driver, int signaled_too) {
  int st, waited = 0;
  if (!signaled_too)
    kill(driver, SIGTERM);
  for (;;) {
    pid_t w = waitpid(driver, &st, WNOHANG);
    if (w == driver || (w < 0 && errno != EINTR))
      return w == driver ? driver_code(st) : CLI_EXIT_FAIL;
    if (waited == 10000)
      kill(driver, SIGTERM);
    if (waited == 20000)
      kill(driver, SIGKILL);
    poll(NULL, 0, 50);
    waited += 50;
  }
}

int cli_start_hold(cli_launch *s, pid_t driver) {
  const char *name = lc_control_name(s->ctl);
  int status = CLI_EXIT_OK, r, st, driver_gone = 0, from_tty = 0;
  for (;;) {
    struct pollfd p[2] = {{.fd = s->sigfd, .events = POLLIN},
                          {.fd = lc_control_fd(s->ctl), .events = POLLIN}};
    if (poll(p, 2, 100) > 0) {
      struct signalfd_siginfo si;
      if ((p[0].revents & POLLIN) && read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP && s->supervised)
          continue; /* a supervisor has no terminal to lose */
        note(s, "stopping (%s)",
             si.ssi_signo == SIGINT    ? "SIGINT"
             : si.ssi_signo == SIGTERM ? "SIGTERM"
                                       : "SIGHUP");
        from_tty = si.ssi_code == SI_KERNEL || si.ssi_pid == 0;
        if (driver > 0) {
          if (!from_tty)
            kill(driver, (int)si.ssi_signo);
          from_tty = 1; /* it has the signal now, one way or the other */
        }
        break;
      }
      if (p[1].revents & POLLIN) {
        r = lc_control_serve(s->ctl, 0);
        if (r == LC_CONTROL_STOP) {
          note(s, "stopping (asked by '" CLI_NAME " stop %s')", name);
          break;
        }
        if (r < 0)
          fprintf(stderr, CLI_NAME " %s: the control socket of %s: %s\n", s->cmd, name,
                  lc_error_last()[0] ? lc_error_last() : lc_strerror(r));
      }
    }
    if (driver > 0 && waitpid(driver, &st, WNOHANG) == driver) {
      driver_gone = 1;
      status = driver_code(st);
      break;
    }
    r = lc_cluster_wait(s->c, 50);
    if (r == -ETIMEDOUT)
      continue;
    if (r == -ETIME) {
      note(s, "time is up: %s ran its --ttl %s; stopping", name, s->ttl_text ? s->ttl_text : "");
      s->why = lc__cli_sprintf("its time was up (--ttl %s)", s->ttl_text ? s->ttl_text : "");
      break;
    }
    if (r == LC_EREMOTE && !s->master_down) { /* a worker given up: the rest run on */
      char *detail = lc__cli_sprintf("%s", lc_error_last());
      fprintf(stderr, CLI_NAME " %s: %s: %s\n", s->cmd, name, detail ? detail : "a worker ended");
      lc_control_set_state(s->ctl, "degraded", detail);
      free(detail);
      continue;
    }
    /* the master ended, or nothing runs any more: the cluster failed */
    status = cli_fail(s->cmd, r, r == LC_EREMOTE ? "the cluster failed" : "the cluster broke");
    s->why = lc__cli_sprintf("%s", lc_error_last()[0] ? lc_error_last() : lc_strerror(r));
    break;
  }
  lc_control_set_state(s->ctl, s->why != NULL && s->master_down ? "failed" : "stopping", NULL);
  if (driver > 0 && !driver_gone) {
    int code = stop_driver(driver, from_tty);
    if (status == CLI_EXIT_OK)
      status = code;
  }
  return status;
}

void cli_start_down(cli_launch *s) {
  lc_cluster_free(s->c); /* workers, then the master, then the tunnels */
  s->c = NULL;
  lc_discovery_free(s->d);
  lc_group_free(s->g);
  lc_engine_free(s->engine);
  if (s->type != NULL && s->type->release != NULL && (s->ml != NULL || s->wl != NULL))
    s->type->release(s->ml, s->wl);
  if (s->client_dir != NULL) /* the client's keys go with the cluster, however it ended */
    remove_client_dir(s->client_dir);
  free(s->client_dir);
  lc_control_free(s->ctl, s->why); /* answers a stop request: now nothing is left */
  s->ctl = NULL;
  if (s->report_fd >= 0)
    report_failed(s);
  for (size_t i = 0; s->env[i] != NULL; i++)
    free(s->env[i]);
  if (s->sigfd >= 0)
    close(s->sigfd);
  for (size_t i = 0; i < s->nproc_env; i++)
    free(s->proc_env[i]);
  lc_free(s->q_self);
  free(s->def_master);
  free(s->def_worker);
  free(s->arg_master);
  free(s->arg_worker);
  free(s->why);
}

int cli_start(int argc, char **argv) {
  cli_launch s;
  int r;
  cli_start_init(&s, "start");
  if ((r = cli_start_parse(&s, argc, argv)) >= 0)
    return r == CLI_START_HELP ? usage() : r;
  if (s.detach) {
    insecure_warning(&s);
    if ((r = detach(&s)) >= 0)
      return r;
    s.supervised = 1;
  }
  if ((r = cli_start_up(&s)) == CLI_EXIT_OK)
    r = cli_start_hold(&s, -1);
  cli_start_down(&s);
  return r;
}
