/*
 * testenv.h - the integration tests' view of the test hosts made by tests/support/testhosts.
 *
 * ctest starts the hosts (fixture testhosts_up) and passes LC_TESTHOSTS_DIR and LC_TESTHOSTS.
 * Without them a test fails loudly: it never passes by skipping.
 */
#ifndef LC_TESTENV_H
#define LC_TESTENV_H

#include "lazycluster.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline const char *th_dir(void) {
  const char *d = getenv("LC_TESTHOSTS_DIR");
  if (d == NULL || access(d, R_OK) != 0) {
    fprintf(stderr, "FATAL: no test hosts: LC_TESTHOSTS_DIR is unset or missing (run through "
                    "ctest, or: tests/support/testhosts up 8 --dir DIR)\n");
    exit(2);
  }
  return d;
}

/* The testhosts script. */
static inline const char *th_script(void) {
  return getenv("LC_TESTHOSTS") ? getenv("LC_TESTHOSTS") : "tests/support/testhosts";
}

static inline const char *th_config(void) {
  static char path[4096];
  snprintf(path, sizeof(path), "%s/ssh_config", th_dir());
  return path;
}

/* Runs "testhosts ARGS --dir DIR"; returns its exit status. */
static inline int th_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int th_run(const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  int st;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "%s %s --dir %s", th_script(), args, th_dir());
  st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The address of host i, from hosts.txt ("labI ADDRESS NETNS"). */
static inline const char *th_addr(int i) {
  static char addrs[64][64];
  char path[4096], name[64], addr[64], ns[128];
  FILE *f;
  snprintf(path, sizeof(path), "%s/hosts.txt", th_dir());
  if ((f = fopen(path, "r")) == NULL)
    return "";
  while (fscanf(f, "%63s %63s %127s", name, addr, ns) == 3) {
    int n = atoi(name + 3);
    if (n >= 0 && n < 64)
      snprintf(addrs[n], sizeof(addrs[n]), "%s", addr);
  }
  fclose(f);
  return addrs[i];
}

/* A TCP socket in host i's network namespace (or here when i < 0), not yet connected; -1 on
 * failure. The calling thread goes into the host's namespace for the socket() call only. */
static inline int th_socket_in(int i) {
  char path[4096], name[64], addr[64], ns[128], want[16];
  FILE *f;
  int self, host = -1, fd;
  if (i < 0)
    return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  snprintf(path, sizeof(path), "%s/hosts.txt", th_dir());
  snprintf(want, sizeof(want), "lab%d", i);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  while (host < 0 && fscanf(f, "%63s %63s %127s", name, addr, ns) == 3)
    if (strcmp(name, want) == 0) {
      snprintf(path, sizeof(path), "/run/netns/%s", ns);
      host = open(path, O_RDONLY | O_CLOEXEC);
    }
  fclose(f);
  if (host < 0)
    return -1;
  if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
    close(host);
    return -1;
  }
  fd = setns(host, CLONE_NEWNET) == 0 ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  if (setns(self, CLONE_NEWNET) != 0) { /* cannot happen; never go on in the wrong namespace */
    fprintf(stderr, "FATAL: cannot return to our network namespace\n");
    exit(2);
  }
  close(self);
  close(host);
  return fd;
}

/*
 * Takes 127.0.0.1:port in host i as the local port of a connection, as an outgoing connection's
 * ephemeral port does (no SO_REUSEADDR): nothing listens there, yet nothing else can bind it.
 * fds gets the two ends: close fds[1] first, so that the TIME-WAIT lands on the other end's port.
 * Returns 0 or -1.
 */
static inline int th_hold_port_by_connection(int i, int port, int fds[2]) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  int l = th_socket_in(i), c = th_socket_in(i);
  fds[0] = fds[1] = -1;
  if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
      getsockname(l, (struct sockaddr *)&sa, &len) < 0)
    goto fail;
  {
    struct sockaddr_in mine = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(c, (struct sockaddr *)&mine, sizeof(mine)) < 0 ||
        connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (fds[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
      goto fail;
  }
  close(l);
  fds[0] = c;
  return 0;
fail:
  if (l >= 0)
    close(l);
  if (c >= 0)
    close(c);
  return -1;
}

/* Lines of the file at path that contain text (an sshd's log: appended to, never cut); -1 when
 * it cannot be read. */
static inline int th_lines_with(const char *path, const char *text) {
  char line[2048];
  int n = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    n += strstr(line, text) != NULL;
  fclose(f);
  return n;
}

typedef int (*th_proc_fn)(long pid, const char *text, const void *arg);

/* Reads /proc/PID/NAME into buf (NULs turned into spaces) and returns what fn counts; 0 when the
 * process is gone. */
static inline int th_proc_apply(long pid, const char *name, th_proc_fn fn, const void *arg) {
  char path[128], buf[8192];
  FILE *c;
  size_t n;
  snprintf(path, sizeof(path), "/proc/%ld/%s", pid, name);
  if (pid <= 1 || (c = fopen(path, "r")) == NULL)
    return 0;
  n = fread(buf, 1, sizeof(buf) - 1, c);
  fclose(c);
  for (size_t k = 0; k < n; k++)
    if (buf[k] == '\0')
      buf[k] = ' ';
  buf[n] = '\0';
  return fn(pid, buf, arg);
}

/* Calls fn on /proc/PID/NAME of each process in host i's network namespace (as th_proc_apply;
 * with --pid-ns, those of its PID namespace); returns how many fn counted, or -1. Without
 * --pid-ns the hosts share this machine's pid namespace: never pkill by name, other test hosts'
 * processes would be hit too. */
static inline int th_each_proc(int i, const char *name, th_proc_fn fn, const void *arg) {
  char cmd[4096], line[64];
  FILE *p;
  int count = 0;
  snprintf(cmd, sizeof(cmd), "%s pids %d --dir %s", th_script(), i, th_dir());
  if ((p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the testhosts script */
    return -1;
  while (fgets(line, sizeof(line), p) != NULL)
    count += th_proc_apply(strtol(line, NULL, 10), name, fn, arg);
  pclose(p);
  return count;
}

/* The pid on this machine of the process that host i counts as pid (what lc_process_pid gives,
 * or a pid file written there): the same number unless the hosts have PID namespaces of their
 * own (testhosts up --pid-ns); 0 when host i has no such process (any more). */
static inline long th_pid_here(int i, long pid) {
  char cmd[4096], line[64] = "";
  FILE *p;
  snprintf(cmd, sizeof(cmd), "%s pid-here %d %ld --dir %s 2>/dev/null", th_script(), i, pid,
           th_dir());
  if (pid <= 1 || (p = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the testhosts script */
    return 0;
  if (fgets(line, sizeof(line), p) == NULL)
    line[0] = '\0';
  pclose(p);
  return strtol(line, NULL, 10);
}

/* th_proc_apply on the process that host i counts as pid. */
static inline int th_host_proc_apply(int i, long pid, const char *name, th_proc_fn fn,
                                     const void *arg) {
  return th_proc_apply(th_pid_here(i, pid), name, fn, arg);
}

/* The same for every process of this machine (test hosts' included). */
static inline int th_each_local_proc(const char *name, th_proc_fn fn, const void *arg) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  int count = 0;
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
      count += th_proc_apply(atol(e->d_name), name, fn, arg);
  closedir(d);
  return count;
}

static inline int th_cmdline_matches(long pid, const char *text, const void *arg) {
  const char *pattern = arg;
  (void)pid;
  return pattern[0] == '^' ? strncmp(text, pattern + 1, strlen(pattern + 1)) == 0
                           : strstr(text, pattern) != NULL;
}

/* How many processes in host i's network namespace have a command line containing pattern
 * (starting with it, when pattern begins with '^'). */
static inline int th_count_procs(int i, const char *pattern) {
  return th_each_proc(i, "cmdline", th_cmdline_matches, pattern);
}

typedef struct th_kill_arg {
  const char *prefix;
  int sig;
} th_kill_arg;

static inline int th_kill_if_named(long pid, const char *comm, const void *arg) {
  const th_kill_arg *k = arg;
  return strncmp(comm, k->prefix, strlen(k->prefix)) == 0 && kill((pid_t)pid, k->sig) == 0;
}

/* Sends sig to the processes in host i's network namespace whose name starts with prefix;
 * returns how many got it. */
static inline int th_kill_procs(int i, const char *prefix, int sig) {
  th_kill_arg k = {prefix, sig};
  return th_each_proc(i, "comm", th_kill_if_named, &k);
}

/* Sends the signal *arg (an int) to a process unless it is an sshd (comm): for th_each_proc, to
 * stop, resume or kill everything of ours on a host while it still answers. */
static inline int th_signal_unless_sshd(long pid, const char *comm, const void *arg) {
  return strncmp(comm, "sshd", 4) != 0 && kill((pid_t)pid, *(const int *)arg) == 0;
}

/* Options for the test hosts' config. */
static inline lc_runtime_options th_options(void) {
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  o.ssh_config = th_config();
  return o;
}

#endif /* LC_TESTENV_H */
