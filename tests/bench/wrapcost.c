/*
 * wrapcost - what one command costs on a host: the CPU (user + sys of every process it made) and
 * the wall time from the login shell's start to the wrapper's exit, with `true` inside, as sshd
 * would run it: `SHELL -c LINE`, the script into stdin, stdin kept open (as the channel is) until
 * the wrapper exits. The text is the library's own (lc__command_compose). Prints a table: the
 * login shell alone (`SHELL -c true`), the lifeline around `true`, and the plain script (file
 * transfers, listings), each the mean over the runs.
 *
 * Usage: wrapcost [--shell PATH] [--argv0 NAME] [--runs N]
 *   --shell PATH   the login shell (default $SHELL, else /bin/sh)
 *   --argv0 NAME   its argv[0] (default: PATH's last part; busybox needs "ash")
 *   --runs N       runs of each row (default 200)
 * Run it on a host as the user whose login shell is measured (tests/bench/fanout.sh does).
 */
#include "runtime_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double children_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One run: SHELL -c line, script into stdin, output read to EOF, stdin closed after the exit. */
static int run_once(const char *shell, const char *argv0, const char *line, const lc__buf *script) {
  int in[2], out[2], status = -1;
  char buf[4096];
  pid_t pid;
  if (pipe(in) < 0 || pipe(out) < 0 || (pid = fork()) < 0)
    return -1;
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    execl(shell, argv0, "-c", line, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (script != NULL && write(in[1], script->data, script->len) != (ssize_t)script->len)
    fprintf(stderr, "wrapcost: short write of the script\n");
  while (read(out[0], buf, sizeof(buf)) > 0)
    ;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  close(in[1]);
  close(out[0]);
  return status;
}

static void row(const char *what, const char *shell, const char *argv0, const char *line,
                const lc__buf *script, int runs) {
  double c0 = children_cpu_s(), t0 = now_s();
  int bad = 0;
  for (int i = 0; i < runs; i++) {
    int st = run_once(shell, argv0, line, script);
    bad += !(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  printf("| %s | %.2f | %.2f |%s\n", what, (children_cpu_s() - c0) * 1000 / runs,
         (now_s() - t0) * 1000 / runs, bad ? " FAILED" : "");
  if (bad)
    fprintf(stderr, "wrapcost: %d of %d runs of '%s' did not exit 0\n", bad, runs, what);
}

int main(int argc, char **argv) {
  const char *shell = getenv("SHELL"), *argv0 = NULL;
  int runs = 200;
  lc__buf line = {0}, script = {0}, pline = {0}, pscript = {0};
  lc__err err = {0};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--shell") == 0 && i + 1 < argc)
      shell = argv[++i];
    else if (strcmp(argv[i], "--argv0") == 0 && i + 1 < argc)
      argv0 = argv[++i];
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: wrapcost [--shell PATH] [--argv0 NAME] [--runs N]\n");
      return 2;
    }
  }
  if (shell == NULL || shell[0] == '\0')
    shell = "/bin/sh";
  if (argv0 == NULL)
    argv0 = strrchr(shell, '/') ? strrchr(shell, '/') + 1 : shell;
  if (runs < 1)
    runs = 1;
  signal(SIGPIPE, SIG_IGN);
  eo.label = "worker-0";
  if (lc__command_compose(&line, &script, "true", &eo, 15, 3000, NULL, NULL, "bench", &err) < 0 ||
      lc__command_compose(&pline, &pscript, "true", &eo, -1, 0, NULL, NULL, "bench", &err) < 0) {
    fprintf(stderr, "wrapcost: %s\n", err.msg);
    return 1;
  }
  printf("| login shell %s (%s), %d runs each | CPU ms/run | wall ms/run |\n|---|---|---|\n", shell,
         argv0, runs);
  row("`SHELL -c true` (the login shell alone)", shell, argv0, "true", NULL, runs);
  row("lifeline around `true` (exec)", shell, argv0, line.data, &script, runs);
  row("plain script around `true` (transfers, listings)", shell, argv0, pline.data, &pscript, runs);
  lc__buf_free(&line);
  lc__buf_free(&script);
  lc__buf_free(&pline);
  lc__buf_free(&pscript);
  return 0;
}
