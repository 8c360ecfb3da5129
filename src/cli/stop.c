/*
 * stop.c - `lazyclusterctl stop [NAME | --all]`: asks a cluster's supervisor to tear it down in
 * order (workers, master, tunnels, working directories) and returns once it is gone.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* How long stop waits for a supervisor that answered "stopped" and gave its name back to exit:
 * it has only its own memory left to free by then. */
#define STOP_EXIT_WAIT_MS 60000

/* The pid of name's supervisor when it is a lazyclusterctl like this one (which exits once its
 * cluster is down), else 0: a program that holds its cluster through the C API lives on. */
static long our_supervisor(const char *name) {
  lc_control_entry *e = NULL;
  char self[PATH_MAX], exe[PATH_MAX], path[64];
  ssize_t n, m;
  size_t count = 0;
  long pid = 0;
  if (lc_control_list(&e, &count, NULL, 0) < 0)
    return 0;
  for (size_t i = 0; i < count; i++)
    if (e[i].alive && strcmp(e[i].name, name) == 0)
      pid = e[i].pid;
  lc_control_entries_free(e, count);
  if (pid <= 0 || pid == (long)getpid())
    return 0;
  snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
  if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0 ||
      (m = readlink(path, exe, sizeof(exe) - 1)) <= 0 || n != m ||
      memcmp(self, exe, (size_t)n) != 0)
    return 0;
  return pid;
}

/* pid has exited: gone, or a zombie that its parent has yet to reap. */
static int exited(long pid) {
  char path[64], buf[512], *paren;
  FILE *f;
  int z = 0;
  if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
    return 1;
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  if ((f = fopen(path, "re")) == NULL)
    return 1;
  if (fgets(buf, sizeof(buf), f) != NULL && (paren = strrchr(buf, ')')) != NULL)
    z = paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
  fclose(f);
  return z;
}

/* Stops one cluster; CLI_EXIT_*. */
static int stop_one(const char *name) {
  char *reply = NULL;
  long sup = our_supervisor(name);
  int r = lc_control_request(&reply, NULL, name, "stop", 15 * 60 * 1000);
  lc_free(reply);
  if (r == LC_ECLOSED) { /* its supervisor is gone already, and with it (the lifeline) the rest */
    printf("%s: already gone (%s)\n", name, lc_error_last());
    return CLI_EXIT_OK;
  }
  if (r < 0) {
    fprintf(stderr, CLI_NAME " stop: cluster %s: %s\n", name,
            lc_error_last()[0] ? lc_error_last() : lc_strerror(r));
    return CLI_EXIT_FAIL;
  }
  if (lc_control_wait_gone(NULL, name, 60000) < 0) {
    fprintf(stderr,
            CLI_NAME " stop: cluster %s: its supervisor said stopped, but still runs after "
                     "60 s\n",
            name);
    return CLI_EXIT_FAIL;
  }
  /* its cluster is down; the supervisor's own end is a bounded poll (it is no child of ours) */
  for (int waited = 0; sup > 0 && !exited(sup); waited += 20) {
    if (waited >= STOP_EXIT_WAIT_MS) {
      fprintf(stderr,
              CLI_NAME " stop: cluster %s: its supervisor (pid %ld) said stopped, but still runs "
                       "after %d s\n",
              name, sup, STOP_EXIT_WAIT_MS / 1000);
      return CLI_EXIT_FAIL;
    }
    poll(NULL, 0, 20);
  }
  printf("%s: stopped\n", name);
  return CLI_EXIT_OK;
}

int cli_stop(int argc, char **argv) {
  const char *name = NULL;
  char *one = NULL;
  int all = 0, r = CLI_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf("usage: " CLI_NAME " stop [NAME | --all]\n"
             "Stops a cluster in order (workers, master, tunnels, working directories) and\n"
             "returns when nothing of it is left on any host. NAME may be left out when one\n"
             "cluster runs.\n\n"
             "  --all     every cluster of this user\n");
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--all") == 0)
      all = 1;
    else if (cli_take_name("stop", argv[i], &name) < 0)
      return CLI_EXIT_USAGE;
  }
  if (all && name != NULL)
    return cli_usage_error("stop", "NAME or --all, not both");
  if (all) {
    lc_control_entry *e = NULL;
    size_t n = 0;
    if ((r = lc_control_list(&e, &n, NULL, 0)) < 0)
      return cli_fail("stop", r, "the state directory");
    r = CLI_EXIT_OK;
    for (size_t i = 0; i < n; i++)
      if (e[i].alive && stop_one(e[i].name) != CLI_EXIT_OK)
        r = CLI_EXIT_FAIL;
    lc_control_entries_free(e, n);
    return r;
  }
  if ((r = cli_resolve_name("stop", name, &one)) != CLI_EXIT_OK)
    return r;
  r = stop_one(one);
  free(one);
  return r;
}
