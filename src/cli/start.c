/*
 * start.c - `lazyclusterctl start --workers N ...`: starts a master and N workers across the
 * hosts (this machine alone when no host is configured), shows progress, prints where everything
 * runs, and holds the cluster until Ctrl-C or SIGTERM, then tears it down in order and exits 0.
 * A failure tears down what was started and exits 1 with the cause.
 */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Progress lines while the cluster starts. */
typedef struct progress {
  int color;
  int master_up;
  long workers, up;
} progress;

/* One line of a process, tagged "[HOST master]" or "[HOST worker-N]". */
static void debug_line(lc_cluster *c, int index, const char *host, const char *line, size_t len,
                       lc_stream stream, void *payload) {
  static char buf[1 << 16];
  int color = ((progress *)payload)->color;
  char tag[256];
  int n;
  (void)c;
  if (index < 0)
    snprintf(tag, sizeof(tag), "%s master", host);
  else
    snprintf(tag, sizeof(tag), "%s worker-%d", host, index);
  n = snprintf(buf, sizeof(buf), color ? "\033[%sm[%s]\033[0m " : "[%.0s%s] ",
               stream == LC_STDERR ? "33" : "36", tag);
  FILE *out = stderr;
  if (n < 0 || (size_t)n >= sizeof(buf))
    return;
  if ((size_t)n + len + 1 > sizeof(buf))
    len = sizeof(buf) - (size_t)n - 1;
  memcpy(buf + n, line, len);
  buf[(size_t)n + len] = '\n';
  fwrite(buf, 1, (size_t)n + len + 1, out); /* one write a line: never two tags on one line */
  fflush(out);
}

static void on_event(lc_cluster *c, lc_cluster_event ev, int index, void *payload) {
  progress *p = payload;
  (void)index;
  if (ev == LC_CLUSTER_MASTER_UP && (p->master_up = 1))
    fprintf(stderr, "master up: localhost:%d (on %s)\n", lc_cluster_master_port(c),
            lc_cluster_master_host(c));
  else if (ev == LC_CLUSTER_WORKER_UP && ++p->up == p->workers)
    fprintf(stderr, "workers up: %ld/%ld\n", p->up, p->workers);
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

static int usage(void) {
  char command_limits[64], dask_limits[64];
  type_limits("command", command_limits, sizeof(command_limits));
  type_limits("dask", dask_limits, sizeof(dask_limits));
  printf("usage: " CLI_NAME " start --workers N [options]\n"
         "Starts a master and N workers and holds them until Ctrl-C; every process reaches the\n"
         "master on localhost:PORT through SSH tunnels. With no host configured, this machine\n"
         "is the one runtime.\n\n"
         "  --workers N             workers to start (required)\n"
         "  --type T                command (default), dask, or PATH.so (a cluster type in C)\n"
         "  --master-cmd TEMPLATE   the master's command ({master_port} {host})\n"
         "  --worker-cmd TEMPLATE   each worker's command ({master_port} {worker_port}\n"
         "                          {worker_index} {worker_count} {gpu} {host} {workdir})\n"
         "  --type-arg KEY=VALUE    an option of the type (dask: nthreads=N, worker_args=...)\n"
         "  --master-host HOST      run the master on HOST (default: this machine)\n"
         "  --master-port P         the master's port (default 60000; another when taken)\n"
         "  --fixed-master-port     fail instead of taking another port\n"
         "  --ports RANGES          worker ports (default 60001-60199)\n"
         "  --timeout S             worker start limit in seconds, all workers together\n"
         "                          (default: the type's, below)\n"
         "  --master-timeout S      master start limit in seconds (default: the type's, below)\n"
         "  --placement P           spread (default: each worker to the host with the fewest)\n"
         "                          or pack (fill each host's GPUs/slots before the next)\n"
         "  --max-workers-per-host N  at most N workers on one host (default: no cap)\n"
         "  --no-worker-on-master-host  no worker on the master's host (default: it may take some)\n"
         "  --debug                 show every process's output, tagged [host worker-N]\n"
         "%s\n"
         "Start limits when none is given, per type:\n"
         "  command                 %s\n"
         "  dask                    %s\n"
         "  PATH.so                 the type's own, else master %g s, workers %g s\n",
         cli_hostopts_help(), command_limits, dask_limits, LC_CLUSTER_MASTER_TIMEOUT_MS / 1000.0,
         LC_CLUSTER_WORKER_TIMEOUT_MS / 1000.0);
  return CLI_EXIT_OK;
}

static int parse_seconds(const char *v, int *ms) {
  char *end;
  double s = strtod(v, &end);
  if (*end != '\0' || s <= 0 || s > 86400)
    return -1;
  *ms = (int)(s * 1000);
  return 0;
}

int cli_start(int argc, char **argv) {
  cli_hostopts h;
  lc_cluster_options co = LC_CLUSTER_OPTIONS_INIT;
  const lc_cluster_type *type = NULL;
  const char *type_name = "command", *master_cmd = NULL, *worker_cmd = NULL;
  const char *type_args[34];
  size_t ntype_args = 0;
  char *def_master = NULL, *def_worker = NULL, *q_self = NULL, self[4096];
  lc_master_launcher *ml = NULL;
  lc_worker_launcher *wl = NULL;
  lc_engine *engine = NULL;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  lc_cluster *c = NULL;
  sigset_t sigs;
  long workers = -1;
  progress prog = {.color = isatty(2)};
  int debug = 0, r, status = CLI_EXIT_OK, have_hosts;
  char *end;

  cli_hostopts_init(&h);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int took;
    if (cli_is_help(a))
      return usage();
    if (strcmp(a, "--debug") == 0) {
      debug = 1;
      continue;
    }
    if (strcmp(a, "--fixed-master-port") == 0) {
      co.master_port_fixed = 1;
      continue;
    }
    if (strcmp(a, "--no-worker-on-master-host") == 0) {
      co.exclude_master_host = 1;
      continue;
    }
    if ((took = cli_hostopts_take(&h, "start", argc, argv, &i)) < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if (v == NULL)
      return cli_usage_error("start", "%s: unknown option, or it needs a value", a);
    i++;
    if (strcmp(a, "--workers") == 0) {
      workers = strtol(v, &end, 10);
      if (*end != '\0' || workers < 1 || workers > 100000)
        return cli_usage_error("start", "--workers %s: want a number, 1 or more", v);
    } else if (strcmp(a, "--type") == 0) {
      type_name = v;
    } else if (strcmp(a, "--master-cmd") == 0) {
      master_cmd = v;
    } else if (strcmp(a, "--worker-cmd") == 0) {
      worker_cmd = v;
    } else if (strcmp(a, "--type-arg") == 0) {
      if (strchr(v, '=') == NULL || ntype_args >= 30)
        return cli_usage_error("start", "--type-arg %s: want KEY=VALUE", v);
      type_args[ntype_args++] = v;
    } else if (strcmp(a, "--master-host") == 0) {
      co.master_host = v;
    } else if (strcmp(a, "--master-port") == 0) {
      co.master_port = (int)strtol(v, &end, 10);
      if (*end != '\0' || co.master_port < 1 || co.master_port > 65535)
        return cli_usage_error("start", "--master-port %s: want a port, 1-65535", v);
    } else if (strcmp(a, "--ports") == 0) {
      lc_ports *p = NULL;
      if (lc_ports_parse(&p, v) < 0)
        return cli_usage_error("start", "%s", lc_error_last());
      lc_ports_free(p);
      co.worker_ports = v;
    } else if (strcmp(a, "--timeout") == 0) {
      if (parse_seconds(v, &co.worker_timeout_ms) < 0)
        return cli_usage_error("start", "--timeout %s: want seconds", v);
    } else if (strcmp(a, "--placement") == 0) {
      if (strcmp(v, "spread") != 0 && strcmp(v, "pack") != 0)
        return cli_usage_error("start", "--placement %s: want spread or pack", v);
      co.placement = strcmp(v, "pack") == 0 ? LC_PLACE_PACK : LC_PLACE_SPREAD;
    } else if (strcmp(a, "--max-workers-per-host") == 0) {
      long cap = strtol(v, &end, 10);
      if (*end != '\0' || end == v || cap < 1 || cap > 100000)
        return cli_usage_error("start", "--max-workers-per-host %s: want a number, 1 or more", v);
      co.max_workers_per_host = (int)cap;
    } else if (strcmp(a, "--master-timeout") == 0) {
      if (parse_seconds(v, &co.master_timeout_ms) < 0)
        return cli_usage_error("start", "--master-timeout %s: want seconds", v);
    } else {
      return cli_usage_error("start", "unknown option %s", a);
    }
  }
  if (workers < 0)
    return cli_usage_error("start", "how many workers? give --workers N");

  /* the cluster type and its launchers */
  if (strchr(type_name, '/') != NULL || strstr(type_name, ".so") != NULL) {
    if ((r = lc_cluster_type_load(&type, type_name)) < 0)
      return cli_fail("start", r, "--type");
  } else if ((type = lc_cluster_type_find(type_name)) == NULL) {
    return cli_usage_error("start", "--type %s: unknown (command, dask, or PATH.so)", type_name);
  }
  if (strcmp(type->name, "command") == 0) {
    /* by default a tiny service of our own, which exists wherever this binary does */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    if (lc_shell_quote(&q_self, self) < 0)
      return cli_fail("start", -ENOMEM, "out of memory");
    def_master = lc__cli_sprintf("exec %s serve {master_port} master", q_self);
    def_worker = lc__cli_sprintf("exec %s serve {worker_port} worker-{worker_index}", q_self);
    type_args[ntype_args++] = lc__cli_sprintf("master=%s", master_cmd ? master_cmd : def_master);
    type_args[ntype_args++] = lc__cli_sprintf("worker=%s", worker_cmd ? worker_cmd : def_worker);
  } else if (master_cmd || worker_cmd) {
    return cli_usage_error("start", "--master-cmd and --worker-cmd are for --type command");
  }
  type_args[ntype_args] = NULL;
  lc_error_set(0, "%s", ""); /* a type that fails without a detail leaves none behind */
  if ((r = type->make(&ml, &wl, type_args)) < 0) {
    const char *detail = lc_error_last();
    fprintf(stderr, CLI_NAME " start: --type %s: the %s type could not make its launchers: %s%s\n",
            type_name, type->name, detail[0] ? detail : lc_strerror(r),
            detail[0] ? "" : " (the type gave no detail)");
    status = r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    ml = NULL;
    wl = NULL;
    goto out;
  }

  /* signals are taken by sigwait below: block them in every thread before any starts */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  if ((r = lc_engine_new(&engine, NULL)) < 0) {
    status = cli_fail("start", r, "cannot start the engine");
    goto out;
  }
  have_hosts = h.discover.hosts || h.discover.inventory;
  h.discover.facts = 1;
  if ((r = lc_discover(&g, &d, engine, &h.discover)) < 0) {
    status = cli_fail("start", r, "cannot find the hosts");
    goto out;
  }
  if (!have_hosts && lc_discovery_count(d) == 0) { /* no host configured: this machine */
    lc_runtime *local = NULL;
    if ((r = lc_runtime_new_local(&local, engine, &h.runtime)) < 0 ||
        (r = lc_group_add(g, local)) < 0) {
      lc_runtime_free(local);
      status = cli_fail("start", r, "cannot use this machine");
      goto out;
    }
    fprintf(stderr, "no hosts configured: using this machine\n");
  } else {
    size_t ready = lc_group_count(g);
    fprintf(stderr, "hosts connected: %zu/%zu\n", ready, lc_discovery_count(d));
    for (size_t i = 0; i < lc_discovery_count(d); i++)
      if (lc_discovery_state(d, i) != LC_HOST_READY)
        fprintf(stderr, "  %s: %s\n", lc_discovery_host(d, i), lc_discovery_reason(d, i));
    if (ready == 0) {
      status = cli_fail("start", LC_ECLOSED, "no host is reachable");
      goto out;
    }
  }
  co.on_output = debug ? debug_line : NULL;
  co.master_timeout_option = "--master-timeout S";
  co.worker_timeout_option = "--timeout S";
  co.on_event = on_event;
  co.payload = &prog;
  prog.workers = workers;
  if ((r = lc_cluster_new(&c, g, ml, wl, &co)) < 0) {
    status = cli_fail("start", r, "cannot make the cluster");
    goto out;
  }
  /* the master and the workers together: what the workers need is made while the master starts */
  if ((r = lc_cluster_start(c, (int)workers)) < 0) {
    status = cli_fail("start", r,
                      prog.master_up ? "the workers did not start" : "the cluster did not start");
    goto out;
  }
  printf("master    localhost:%d on %s\n", lc_cluster_master_port(c), lc_cluster_master_host(c));
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *w = lc_cluster_worker(c, i);
    char gpu[16] = "-";
    if (w->gpu >= 0)
      snprintf(gpu, sizeof(gpu), "%d", w->gpu);
    printf("worker-%-3d localhost:%d on %s gpu %s\n", w->index, w->port, w->host, gpu);
  }
  printf("ready: Ctrl-C stops everything\n");
  fflush(stdout);

  /* hold until a signal, or until a process of the cluster ends */
  for (;;) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&sigs, NULL, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      fprintf(stderr, "stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if ((r = lc_cluster_wait(c, 0)) != -ETIMEDOUT) {
      status = cli_fail("start", r, "the cluster broke");
      break;
    }
  }
out:
  lc_cluster_free(c); /* workers, then the master, then the tunnels */
  lc_discovery_free(d);
  lc_group_free(g);
  lc_engine_free(engine);
  if (type != NULL && type->release != NULL && (ml != NULL || wl != NULL))
    type->release(ml, wl);
  if (strcmp(type_name, "command") == 0 && type_args[0] != NULL) {
    free((char *)type_args[ntype_args - 1]);
    free((char *)type_args[ntype_args - 2]);
  }
  lc_free(q_self);
  free(def_master);
  free(def_worker);
  return status;
}
