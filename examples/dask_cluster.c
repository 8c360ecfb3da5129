/*
 * dask_cluster.c - start a Dask cluster from C with liblazycluster.
 *
 *   dask_cluster [-F SSH_CONFIG] [-n WORKERS] [HOST...]
 *
 * Connects to the hosts (aliases of the ssh config, or [user@]host[:port]; none: this machine
 * alone), starts a Dask scheduler on this machine and WORKERS Dask workers (default: one per
 * host) spread over the hosts, prints the scheduler's address, runs a tiny computation with a
 * Dask client, and tears everything down again.
 *
 * Everything meets on localhost: the scheduler listens on 127.0.0.1 here, and the library opens
 * SSH tunnels so that every worker reaches it as localhost:PORT on its own host, and every worker
 * reaches every other worker the same way (the worker mesh, for Dask's worker-to-worker data
 * transfers). No port of any host is opened to the network.
 *
 * And only its owner gets in: every Dask connection of the cluster is mutual TLS with a CA made
 * for this cluster alone (the dask type's default), so another user of a host who reaches a port
 * through the tunnels is refused. The client's certificate and key are in the cluster's client
 * directory (0700, removed with the cluster); the cluster's client env names them in Dask's own
 * config keys, so a plain Client() given that environment connects.
 *
 * Needs Dask on every machine involved (Debian: apt install python3-distributed), and python3
 * here able to `import distributed` (for the client).
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <lazycluster.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOSTS 256

/* Prints one line of the client's output (called on the library's engine thread). */
static void print_line(const char *line, size_t len, lc_stream stream, void *payload) {
  (void)payload;
  fprintf(stream == LC_STDERR ? stderr : stdout, "  %.*s\n", (int)len, line);
}

static int usage(const char *argv0) {
  fprintf(stderr, "usage: %s [-F SSH_CONFIG] [-n WORKERS] [HOST...]\n", argv0);
  return 2;
}

int main(int argc, char **argv) {
  const char *hosts[MAX_HOSTS];
  size_t nhosts = 0;
  int workers = 0, status = 1, r;
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_cluster_options co = LC_CLUSTER_OPTIONS_INIT;
  lc_engine *engine = NULL;
  lc_group *group = NULL;
  lc_group_report *report = NULL;
  lc_runtime *here = NULL;
  lc_cluster *cluster = NULL;
  const lc_cluster_type *dask = NULL;
  lc_master_launcher *master = NULL;
  lc_worker_launcher *worker = NULL;
  const char *dask_args[] = {"nthreads=1", NULL};

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-F") == 0 && i + 1 < argc)
      ro.ssh_config = argv[++i];
    else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      workers = atoi(argv[++i]);
    else if (argv[i][0] == '-' || nhosts == MAX_HOSTS)
      return usage(argv[0]);
    else
      hosts[nhosts++] = argv[i];
  }
  signal(SIGPIPE, SIG_IGN); /* a closed connection is an error code, not the end of us */

  /* 1. The engine: one thread with one event loop that drives every connection. */
  if ((r = lc_engine_new(&engine, NULL)) < 0) {
    fprintf(stderr, "engine: %s\n", lc_error_last());
    return 1;
  }

  /* 2. The group of runtimes the workers go to: the hosts, all connected at once; or, with no
   *    host given, this machine (a local runtime needs no sshd). */
  if ((r = lc_group_new(&group, engine, NULL)) < 0)
    goto fail;
  if (nhosts > 0) {
    if ((r = lc_group_connect(&report, group, hosts, nhosts, &ro)) < 0)
      goto fail;
    for (size_t i = 0; i < lc_group_report_count(report); i++)
      if (lc_group_report_error(report, i) != 0)
        fprintf(stderr, "%s: not used: %s\n", lc_group_report_host(report, i),
                lc_group_report_message(report, i));
    lc_group_report_free(report);
    if (lc_group_count(group) == 0) {
      fprintf(stderr, "no host is reachable\n");
      goto out;
    }
  } else {
    lc_runtime *local = NULL;
    if ((r = lc_runtime_new_local(&local, engine, NULL)) < 0)
      goto fail;
    if ((r = lc_group_add(group, local)) < 0) { /* the group owns it from now on */
      lc_runtime_free(local);
      goto fail;
    }
  }
  if (workers <= 0)
    workers = (int)lc_group_count(group);

  /* 3. The cluster: the built-in "dask" type makes the two launchers (what to run as the master
   *    and as each worker, and how to tell they are ready); the cluster does the rest: free
   *    ports, placement (round-robin over the hosts here), tunnels, readiness, cleanup. */
  if ((dask = lc_cluster_type_find("dask")) == NULL) {
    fprintf(stderr, "this liblazycluster has no dask cluster type\n");
    goto out;
  }
  if ((r = dask->make(&master, &worker, dask_args)) < 0)
    goto fail;
  /* No start limits set: the dask type states its own (30 s for the scheduler, 60 s for all
   * workers), which hold where Python takes seconds to start. co.master_timeout_ms and
   * co.worker_timeout_ms, set, win over them. */
  if ((r = lc_cluster_new(&cluster, group, master, worker, &co)) < 0)
    goto fail;
  printf("starting a Dask scheduler here and %d workers on %zu %s...\n", workers,
         lc_group_count(group), nhosts > 0 ? "hosts" : "machine");
  fflush(stdout);
  if ((r = lc_cluster_start(cluster, workers)) < 0)
    goto fail;

  /* 4. Where everything is. The scheduler's port is also localhost:PORT on every host; its
   *    address (tls://) is in the client env, with the client's TLS files. */
  for (const char *const *e = lc_cluster_client_env(cluster); *e != NULL; e++)
    if (strncmp(*e, "DASK_SCHEDULER_ADDRESS=", 23) == 0)
      printf("scheduler: %s\n", *e + 23);
  printf("client files: %s\n", lc_cluster_client_dir(cluster));
  for (size_t i = 0; i < lc_cluster_worker_count(cluster); i++) {
    const lc_worker_info *w = lc_cluster_worker(cluster, i);
    printf("worker %d: on %s, port %d (nanny %d)\n", w->index, w->host, w->port, w->aux_port);
  }
  fflush(stdout);

  /* 5. A tiny computation through a Dask client on this machine, run with the library too (a
   *    local runtime; its output comes back line by line). The cluster's client env is the
   *    client's environment: Client() with no address and no security finds both there. */
  {
    const char *cmd = "exec python3 -c '\n"
                      "import socket, distributed\n"
                      "client = distributed.Client(timeout=60)\n"
                      "print(\"client connected to\", client.scheduler.address)\n"
                      "squares = client.map(lambda x: x * x, range(10))\n"
                      "print(\"sum of squares 0..9:\", client.submit(sum, squares).result())\n"
                      "hosts = sorted(set(client.run(socket.gethostname).values()))\n"
                      "print(\"workers run on:\", \" \".join(hosts))\n"
                      "client.close()'";
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    lc_exec_result res;
    eo.env = lc_cluster_client_env(cluster);
    eo.on_line = print_line;
    eo.timeout_ms = 120000;
    if ((r = lc_runtime_new_local(&here, engine, NULL)) < 0 ||
        (r = lc_runtime_exec(&res, here, cmd, &eo)) < 0)
      goto fail;
    if (res.exit_status != 0) {
      fprintf(stderr, "the Dask client failed (exit status %d)\n", res.exit_status);
      goto out;
    }
  }
  printf("done: stopping the cluster\n");
  status = 0;
  goto out;

fail:
  fprintf(stderr, "error: %s (%s)\n", lc_error_last(), lc_err_name(r));
  if (cluster != NULL && lc_cluster_log(cluster)[0] != '\0')
    fprintf(stderr, "what the cluster did:\n%s", lc_cluster_log(cluster));
out:
  /* 6. Teardown, in order: the workers and the scheduler end and their tunnels close (cluster),
   *    then the connections close and the working directories go (group). */
  lc_runtime_free(here);
  lc_cluster_free(cluster);
  if (master != NULL || worker != NULL)
    dask->release(master, worker);
  lc_group_free(group);
  lc_engine_free(engine);
  return status;
}
