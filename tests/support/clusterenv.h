/*
 * clusterenv.h - what the cluster tests share: the built-in command type made from two
 * templates, lazyclusterctl copied to each host's ~/lcbin (so that the build directory need not be
 * visible there), and lazyclusterctl run with its output collected.
 */
#ifndef LC_CLUSTERENV_H
#define LC_CLUSTERENV_H

#include "testenv.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The `command` type with master template mt and worker template wt, and one more of its options
 * (NULL: none; "expose=mesh": every worker's port on every host). */
static inline int th_command_type_with(lc_master_launcher **m, lc_worker_launcher **w,
                                       const char *mt, const char *wt, const char *extra) {
  char a[4400], b[2048];
  const char *args[4] = {a, b, extra, NULL};
  snprintf(a, sizeof(a), "master=%s", mt);
  snprintf(b, sizeof(b), "worker=%s", wt);
  return lc_cluster_type_find("command")->make(m, w, args);
}

static inline int th_command_type(lc_master_launcher **m, lc_worker_launcher **w, const char *mt,
                                  const char *wt) {
  return th_command_type_with(m, w, mt, wt, NULL);
}

/*
 * The cluster tests' start: SIGPIPE ignored, LC_CTL's real path into ctl (size 4096) and, when
 * master_tmpl is not NULL, the command type's master template that runs it ("exec 'CTL' serve
 * {master_port} master"). Exits 2 with a message when LC_CTL names nothing.
 */
static inline void th_ctl_setup(char *ctl, char *master_tmpl, size_t tmpl_size) {
  signal(SIGPIPE, SIG_IGN);
  if (getenv("LC_CTL") == NULL || realpath(getenv("LC_CTL"), ctl) == NULL) {
    fprintf(stderr, "FATAL: LC_CTL must name lazyclusterctl\n");
    exit(2);
  }
  if (master_tmpl != NULL)
    snprintf(master_tmpl, tmpl_size, "exec '%s' serve {master_port} master", ctl);
}

/* Processes whose command line starts with pattern ("^NAME ...") on hosts 0..nhosts-1 and, as
 * "lazyclusterctl NAME ...", here. */
static inline int th_count_everywhere(int nhosts, const char *pattern) {
  int n = 0;
  char cmd[256];
  FILE *p;
  for (int i = 0; i < nhosts; i++)
    n += th_count_procs(i, pattern);
  snprintf(cmd, sizeof(cmd), "pgrep -fc '^[^ ]*lazyclusterctl %s' || true", pattern + 1);
  if ((p = popen(cmd, "r")) != NULL) {
    int k = 0;
    if (fscanf(p, "%d", &k) == 1)
      n += k;
    pclose(p);
  }
  return n;
}

/* The line a service on 127.0.0.1:port of this machine answers, or "". */
static inline void th_answer_here(char *out, size_t size, int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ssize_t k = 0;
  out[0] = '\0';
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
    k = read(fd, out, size - 1);
  out[k > 0 ? k : 0] = '\0';
  if (fd >= 0)
    close(fd);
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

/* An engine and a group connected to hosts[0..n-1] (th_options), with lazyclusterctl from ctl
 * copied to each (ctl NULL: not). Exits 2 naming what failed. */
static inline void th_group_setup(lc_engine **engine, lc_group **group, const char *const *hosts,
                                  size_t n, const char *ctl) {
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  if (lc_engine_new(engine, NULL) < 0 || lc_group_new(group, *engine, NULL) < 0 ||
      lc_group_connect(&rep, *group, hosts, n, &ro) < 0 || lc_group_report_failures(rep) != 0 ||
      (ctl != NULL && th_ship_ctl(*group, ctl) < 0)) {
    fprintf(stderr, "FATAL: setup failed: %s %s\n", lc_error_last(),
            rep ? lc_group_report_message(rep, 0) : "");
    exit(2);
  }
  lc_group_report_free(rep);
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
