/*
 * clusterenv.h - what the cluster tests share: the built-in command type made from two
 * templates, lazyclusterctl copied to each host's ~/lcbin (so that the build directory need not be
 * visible there), and lazyclusterctl run with its output collected.
 */
#ifndef LC_CLUSTERENV_H
#define LC_CLUSTERENV_H

#include "testenv.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The `command` type with master template mt and worker template wt. */
static inline int th_command_type(lc_master_launcher **m, lc_worker_launcher **w, const char *mt,
                                  const char *wt) {
  char a[4400], b[2048];
  const char *args[3] = {a, b, NULL};
  snprintf(a, sizeof(a), "master=%s", mt);
  snprintf(b, sizeof(b), "worker=%s", wt);
  return lc_cluster_type_find("command")->make(m, w, args);
}

static inline void th_command_type_free(lc_master_launcher *m, lc_worker_launcher *w) {
  lc_cluster_type_find("command")->release(m, w);
}

/* Copies the lazyclusterctl at ctl to ~/lcbin/lazyclusterctl on every runtime of g; 0 or -1. */
static inline int th_ship_ctl(lc_group *g, const char *ctl) {
  lc_exec_result res;
  for (size_t i = 0; g != NULL && i < lc_group_count(g); i++) {
    lc_runtime *rt = lc_group_at(g, i);
    if (lc_runtime_exec(&res, rt, "mkdir -p ~/lcbin", NULL) < 0 ||
        lc_runtime_send_file(rt, ctl, "~/lcbin/lazyclusterctl", 60000) < 0)
      return -1;
  }
  return g != NULL ? 0 : -1;
}

/*
 * Runs ctl with args (NULL-terminated) and its stdout and stderr into out; with stop_at_ready, a
 * SIGINT once it prints "ready: " (a start that holds its cluster). Returns its exit status, or
 * -1. The output is echoed to stderr, indented, for the test's log.
 */
static inline int th_run_ctl(const char *ctl, const char *const *args, int stop_at_ready, char *out,
                             size_t size) {
  const char *argv[64];
  int fds[2], st, n = 0;
  size_t used = 0;
  ssize_t k;
  pid_t pid;
  argv[n++] = ctl;
  for (; *args != NULL && n < 63; args++)
    argv[n++] = *args;
  argv[n] = NULL;
  if (pipe(fds) < 0)
    return -1;
  if ((pid = fork()) == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execv(ctl, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  while (used + 1 < size && (k = read(fds[0], out + used, size - used - 1)) > 0) {
    used += (size_t)k;
    out[used] = '\0';
    if (stop_at_ready && strstr(out, "ready: ") != NULL)
      kill(pid, SIGINT);
  }
  out[used] = '\0';
  close(fds[0]);
  if (waitpid(pid, &st, 0) != pid)
    return -1;
  if (used > 0)
    fprintf(stderr, "  | %s", out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* LC_CLUSTERENV_H */
