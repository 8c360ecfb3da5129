/*
 * master.c - the master: its runtime, its port (the asked one, else one from the ranges, again
 * when it turns out taken), its start, readiness, and its port exposed on every host.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Starts making the working directory of every runtime the cluster uses, all at once (each is
 * awaited where it is needed); a failure shows again there. */
void lc__cluster_workdirs_begin(lc_cluster *c) {
  size_t n;
  lc_runtime **rts = lc__cluster_runtimes(c, &n);
  for (size_t i = 0; rts != NULL && i < n; i++)
    if (rts[i] == c->master_rt || lc_runtime_is_connected(rts[i]))
      lc__runtime_workdir_begin(rts[i]);
  free(rts); /* out of memory: each directory is made where it is awaited */
}

/* The umask of a master on our own runtime: as strict as every runtime of the group's (the union
 * of their masks), so that --umask reaches it as it reaches the workers; 077 in an empty group. */
static int local_umask(const lc_cluster *c) {
  unsigned int mask = 0;
  size_t n = lc_group_count(c->group);
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    mask |= lc__runtime_umask(lc_group_at(c->group, i));
  return LC_UMASK_SET | (int)mask;
}

/* The runtime that runs the master: the named host, the group's localhost, or our own. */
int lc__master_runtime(lc_cluster *c) {
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  int r;
  if (c->master_proc != NULL)
    return lc__error_set(-EINVAL, "cluster: the master already runs on port %d", c->master_port);
  if (c->opts.master_host != NULL) {
    if ((c->master_rt = lc_group_find(c->group, c->opts.master_host)) == NULL)
      return lc__error_set(-ENOENT, "cluster: the master's host %s is not in the group",
                           c->opts.master_host);
  } else if ((c->master_rt = lc_group_find(c->group, "localhost")) == NULL) {
    ro.umask = local_umask(c);
    if (c->local == NULL &&
        (r = lc_runtime_new_local(&c->local, lc__group_engine(c->group), &ro)) < 0)
      return r;
    c->master_rt = c->local;
  }
  return 0;
}

/* Spawns the master on port, once its working directory is there; its secret is written there
 * (0600) by the command that runs it. */
static int master_spawn(lc_cluster *c, int port) {
  char *cmd = NULL, *secret_env = NULL, penv[64];
  const char *more[3] = {penv, "LAZYCLUSTER_MASTER_ADDR=localhost", NULL};
  char **env = NULL;
  lc__buf setup = {0};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const char *wd = NULL;
  int r;

  snprintf(penv, sizeof(penv), "LAZYCLUSTER_MASTER_PORT=%d", port);
  if ((r = c->m->command(c->m, c, port, &cmd)) < 0)
    return r;
  if ((r = lc_runtime_workdir(&wd, c->master_rt)) < 0)
    goto out;
  if ((secret_env = lc__sprintf("LAZYCLUSTER_SECRET_FILE=%s/secret", wd)) == NULL ||
      (more[2] = secret_env, env = lc__cluster_env(c, more, 3)) == NULL ||
      lc__cluster_secret_setup(c, &setup, NULL) < 0 || lc__buf_puts(&setup, ") || exit 125") < 0 ||
      (c->master_out = lc__output_new(c, -1, lc_runtime_name(c->master_rt))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  pthread_mutex_lock(&c->mu);
  c->count = 0;
  c->changes = 0;
  pthread_mutex_unlock(&c->mu);
  eo.env = (const char *const *)env;
  eo.cwd = wd;
  eo.on_line = lc__cluster_on_line;
  eo.payload = c->master_out;
  eo.label = "master";
  if ((r = lc__runtime_spawn_setup(&c->master_proc, c->master_rt, cmd, &eo, setup.data)) < 0)
    goto out;
  c->master_port = port;
  lc__cluster_note(c, "%s master starting on port %d: %s", lc_runtime_name(c->master_rt), port,
                   cmd);
out:
  if (r < 0) {
    lc__output_free(c->master_out);
    c->master_out = NULL;
  }
  lc_free(cmd);
  free(secret_env);
  free(env);
  lc__buf_free(&setup);
  return r;
}

void lc__master_drop(lc_cluster *c) {
  lc_process_free(c->master_proc);
  c->master_proc = NULL;
  lc__output_free(c->master_out);
  c->master_out = NULL;
  c->master_port = 0;
  c->master_reported = 0;
}

/* Picks the port of this attempt (the asked one first; unless it is fixed, then the worker
 * ranges) and spawns the master there. */
int lc__master_attempt(lc_cluster *c, int attempt, const lc__hostscan *sc, int *port) {
  lc_ports *ranges = NULL;
  int r = LC_ENOPORTS;
  if (attempt == 0) {
    if ((r = lc_ports_new(&ranges)) < 0 ||
        (r = lc_ports_add(ranges, c->opts.master_port, c->opts.master_port)) < 0) {
      lc_ports_free(ranges);
      return r;
    }
    r = sc != NULL ? lc__cluster_pick_from_scan(c, sc, ranges, port, 1)
                   : lc__cluster_pick_port(c, port, ranges);
    lc_ports_free(ranges);
    if (r == LC_ENOPORTS && c->opts.master_port_fixed) {
      const char *where = lc__cluster_port_taken_where(c, c->opts.master_port);
      return lc__error_set(-EADDRINUSE, "port %d is in use on %s", c->opts.master_port,
                           where ? where : "a host");
    }
  }
  if (r == LC_ENOPORTS && !c->opts.master_port_fixed)
    r = sc != NULL ? lc__cluster_pick_from_scan(c, sc, c->worker_ports, port, 1)
                   : lc__cluster_pick_port(c, port, c->worker_ports);
  if (r < 0)
    return r;
  return master_spawn(c, *port);
}

/* Waits until the spawned master is ready; when it is not, it is gone and *retry says whether
 * another port may do (it died of "address in use" on a port it was not held to). */
int lc__master_await(lc_cluster *c, int port, int *retry) {
  char msg[4096];
  int r;
  *retry = 0;
  if (c->m->wait_ready != NULL)
    r = c->m->wait_ready(c->m, c, port, c->opts.master_timeout_ms);
  else
    r = lc_ports_wait_listening(c->master_rt, port, c->master_proc, c->opts.master_timeout_ms);
  if (r == -EADDRINUSE) { /* another user listens on the port there: another port may do */
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    lc__master_drop(c);
    *retry = !c->opts.master_port_fixed;
    if (*retry)
      lc__cluster_note(c, "port %d was taken after all (%s): trying another", port, saved);
    return lc__error_set(r, "%s", saved);
  }
  if (r < 0) {
    lc__cluster_how_ended(c, c->master_out, c->master_proc, msg, sizeof(msg));
    *retry = r == LC_EREMOTE && !c->opts.master_port_fixed &&
             (strstr(msg, "in use") != NULL || strstr(msg, "EADDRINUSE") != NULL);
    char limit[640] = "(it died)";
    if (r != LC_EREMOTE) {
      snprintf(limit, sizeof(limit), "within ");
      lc__cluster_limit_text(c, 1, limit + strlen(limit), sizeof(limit) - strlen(limit));
    }
    r = lc__error_set(r == LC_EREMOTE ? LC_EREMOTE : -ETIMEDOUT,
                      "%s: the master did not start on port %d %s: %s",
                      lc_runtime_name(c->master_rt), port, limit, msg);
    lc__master_drop(c);
    if (*retry)
      lc__cluster_note(c, "port %d was taken after all: trying another", port);
  }
  return r;
}

/*
 * The master is ready: its port goes to every host. Where a host's tunnel cannot listen because
 * the port was taken there after the listing (an outgoing connection's port, which the listing of
 * listeners does not show), the master and its tunnels (those after fwd_mark) are dropped and
 * *retry says another port may do; otherwise *retry is 0.
 */
int lc__master_finish(lc_cluster *c, size_t fwd_mark, int *retry) {
  int r, port = c->master_port;
  *retry = 0;
  if ((r = lc__group_expose(c->group, c->master_rt == c->local ? NULL : c->master_rt,
                            c->master_port, &c->fwds)) < 0) {
    if (r == -EADDRINUSE && !c->opts.master_port_fixed) {
      char saved[LC_ERRMSG_MAX];
      snprintf(saved, sizeof(saved), "%s", lc_error_last());
      lc__cluster_drop_forwards(c, fwd_mark);
      lc__master_drop(c);
      *retry = 1;
      lc__cluster_note(c, "port %d was taken after all (%s): trying another", port, saved);
      lc__error_set(r, "%s", saved);
    }
    return r;
  }
  lc__cluster_note(c, "%s master ready on port %d", lc_runtime_name(c->master_rt), c->master_port);
  lc__cluster_emit(c, LC_CLUSTER_MASTER_UP, -1);
  return 0;
}

int lc_cluster_start_master(lc_cluster *c) {
  size_t mark = c->nports, fwd_mark = c->fwds.n;
  int port = 0, r, retry = 1;

  if ((r = lc__master_runtime(c)) < 0)
    return r;
  lc__cluster_workdirs_begin(c);
  for (int attempt = 0; attempt < 5 && retry; attempt++) {
    if ((r = lc__master_attempt(c, attempt, NULL, &port)) < 0)
      break;
    if ((r = lc__master_await(c, port, &retry)) == 0 &&
        (r = lc__master_finish(c, fwd_mark, &retry)) == 0)
      break;
  }
  if (r < 0) {
    char saved[LC_ERRMSG_MAX];
    snprintf(saved, sizeof(saved), "%s", lc_error_last());
    lc__master_drop(c);
    lc__cluster_drop_forwards(c, fwd_mark);
    lc__cluster_release_ports(c, mark);
    return lc__error_set(r, "%s", saved);
  }
  return 0;
}

int lc__master_respawn(lc_cluster *c, lc_exec_result *res) {
  lc_process *old = c->master_proc;
  lc__output *old_out = c->master_out;
  int r, port = c->master_port;

  res->exit_status = -1;
  res->signal = 0;
  c->master_proc = NULL;
  c->master_out = NULL;
  if ((r = master_spawn(c, port)) < 0) { /* the ended one stays the cluster's master */
    c->master_proc = old;
    c->master_out = old_out;
    c->master_port = port;
    return r;
  }
  lc_process_free(old);
  lc__output_free(old_out);
  c->master_reported = 0;
  if (c->m->wait_ready != NULL)
    r = c->m->wait_ready(c->m, c, port, c->opts.master_timeout_ms);
  else
    r = lc_ports_wait_listening(c->master_rt, port, c->master_proc, c->opts.master_timeout_ms);
  if (r < 0) {
    char msg[4096], limit[640] = "(it died)";
    if (lc_process_wait(NULL, c->master_proc, 0) == -ETIMEDOUT) {
      snprintf(limit, sizeof(limit), "within ");
      lc__cluster_limit_text(c, 1, limit + strlen(limit), sizeof(limit) - strlen(limit));
      lc_process_stop(c->master_proc);
      lc_process_wait(NULL, c->master_proc, 30000);
    } else {
      lc_process_wait(res, c->master_proc, 0);
    }
    lc__cluster_how_ended(c, c->master_out, c->master_proc, msg, sizeof(msg));
    return lc__error_set(r == LC_EREMOTE ? LC_EREMOTE : -ETIMEDOUT,
                         "%s: the master did not start again on port %d %s: %s",
                         lc_runtime_name(c->master_rt), port, limit, msg);
  }
  lc__cluster_note(c, "%s master ready again on port %d", lc_runtime_name(c->master_rt), port);
  return 0;
}
