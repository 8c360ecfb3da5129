/*
 * test_control.c - the control layer without a network: the state directory, claiming names,
 * stale entries, the lock not kept by children, the socket and its peer check, requests from
 * another thread, logs and their rotation, the client calls. Each test uses a state directory of
 * its own in a temporary directory.
 */
#include "lazycluster.h"
#include "lc_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_state[256];

/* A fresh state directory (0700) for one test. */
static const char *fresh_state(void) {
  snprintf(g_state, sizeof(g_state), "/tmp/lc-test-control-XXXXXX");
  if (mkdtemp(g_state) == NULL)
    return NULL;
  return g_state;
}

static void rm_rf(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
  if (system(cmd) != 0)
    fprintf(stderr, "  cannot remove %s\n", path);
}

static int mode_of(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf;
  size_t n;
  if (f == NULL)
    return NULL;
  buf = calloc(1, 1 << 20);
  n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static lc_control *claim(const char *state, const char *name) {
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  lc_control *ctl = NULL;
  o.name = name;
  o.state_dir = state;
  o.type_name = "command";
  if (lc_control_new(&ctl, &o) != 0)
    fprintf(stderr, "  lc_control_new(%s): %s\n", name ? name : "NULL", lc_error_last());
  return ctl;
}

static lc_control_entry *find_entry(lc_control_entry *v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].name, name) == 0)
      return &v[i];
  return NULL;
}

/* ---- the state directory ---- */

static void test_state_dir_xdg_and_home(void) {
  const char *tmp = fresh_state();
  char *dir = NULL, want[512], *old_xdg = getenv("XDG_RUNTIME_DIR"), *old_home = getenv("HOME");
  char *keep_xdg = old_xdg ? strdup(old_xdg) : NULL,
       *keep_home = old_home ? strdup(old_home) : NULL;
  mode_t um = umask(0); /* a careless umask must not open the directory */
  LC_REQUIRE(tmp != NULL);
  setenv("XDG_RUNTIME_DIR", tmp, 1);
  LC_CHECK_OK(lc_state_dir(&dir));
  snprintf(want, sizeof(want), "%s/lazycluster", tmp);
  LC_CHECK_STR(dir, want);
  LC_CHECK(mode_of(want) == 0700);
  lc_free(dir);
  dir = NULL;

  unsetenv("XDG_RUNTIME_DIR");
  setenv("HOME", tmp, 1);
  umask(0777); /* and one that closes everything must not make it unusable */
  LC_CHECK_OK(lc_state_dir(&dir));
  snprintf(want, sizeof(want), "%s/.cache/lazycluster/run", tmp);
  LC_CHECK_STR(dir, want);
  LC_CHECK(mode_of(want) == 0700);
  lc_free(dir);
  dir = NULL;
  umask(um);

  /* one open to others is refused, naming it and its mode */
  chmod(want, 0755);
  LC_CHECK(lc_state_dir(&dir) == -EACCES);
  LC_CHECK(dir == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), "0755");
  /* and so is a state directory given to the calls */
  {
    lc_control_options o = LC_CONTROL_OPTIONS_INIT;
    lc_control *ctl = NULL;
    o.state_dir = want;
    LC_CHECK(lc_control_new(&ctl, &o) == -EACCES);
    LC_CHECK(ctl == NULL);
  }
  /* one of another user's too */
  chmod(want, 0700);
  LC_CHECK(chown(want, 65534, 65534) == 0);
  LC_CHECK(lc_state_dir(&dir) == -EACCES);
  LC_CHECK_CONTAINS(lc_error_last(), "uid 65534");

  if (keep_xdg)
    setenv("XDG_RUNTIME_DIR", keep_xdg, 1);
  if (keep_home)
    setenv("HOME", keep_home, 1);
  else
    unsetenv("HOME");
  free(keep_xdg);
  free(keep_home);
  rm_rf(tmp);
}

/* ---- names ---- */

static void test_claim_and_names(void) {
  const char *state = fresh_state();
  char path[512], *info;
  lc_control *a, *b = NULL, *m1, *m2;
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  static const char *const bad[] = {
      "",
      "-x",
      ".x",
      "a/b",
      "a b",
      "x\n",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((a = claim(state, "alpha")) != NULL);
  LC_CHECK_STR(lc_control_name(a), "alpha");
  snprintf(path, sizeof(path), "%s/alpha", state);
  LC_CHECK_STR(lc_control_dir(a), path);
  LC_CHECK(mode_of(path) == 0700);
  snprintf(path, sizeof(path), "%s/alpha/control.sock", state);
  LC_CHECK(mode_of(path) == 0600);
  snprintf(path, sizeof(path), "%s/alpha/logs", state);
  LC_CHECK_STR(lc_control_logs_dir(a), path);
  LC_CHECK(mode_of(path) == 0700);
  snprintf(path, sizeof(path), "%s/alpha/info", state);
  info = slurp(path);
  {
    char want[64];
    snprintf(want, sizeof(want), "pid %ld\n", (long)getpid());
    LC_CHECK(info != NULL && strncmp(info, want, strlen(want)) == 0);
    LC_CHECK(info != NULL && strstr(info, "type command\n") != NULL);
  }
  free(info);

  /* the same name again: taken, naming the pid that holds it */
  o.name = "alpha";
  o.state_dir = state;
  LC_CHECK(lc_control_new(&b, &o) == -EEXIST);
  LC_CHECK(b == NULL);
  {
    char want[64];
    snprintf(want, sizeof(want), "pid %ld", (long)getpid());
    LC_CHECK_CONTAINS(lc_error_last(), want);
    LC_CHECK_CONTAINS(lc_error_last(), "'alpha'");
  }
  /* and the live one is untouched */
  LC_CHECK(mode_of(lc_control_dir(a)) == 0700);
  snprintf(path, sizeof(path), "%s/alpha/control.sock", state);
  LC_CHECK(exists(path));

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    o.name = bad[i];
    LC_CHECK(lc_control_new(&b, &o) == -EINVAL);
    if (bad[i][0] != '\0' && strchr(bad[i], '\n') == NULL && strlen(bad[i]) < 60) {
      char quoted[128];
      snprintf(quoted, sizeof(quoted), "'%s'", bad[i]);
      LC_CHECK_CONTAINS(lc_error_last(), quoted);
    }
  }

  /* made-up names: short, readable, different */
  LC_REQUIRE((m1 = claim(state, NULL)) != NULL);
  LC_REQUIRE((m2 = claim(state, NULL)) != NULL);
  LC_CHECK(strcmp(lc_control_name(m1), lc_control_name(m2)) != 0);
  for (int k = 0; k < 2; k++) {
    const char *n = lc_control_name(k ? m2 : m1), *dash = strrchr(n, '-');
    LC_CHECK(strncmp(n, "lc-", 3) == 0);
    LC_CHECK(dash != NULL && strlen(dash + 1) == 4 && strspn(dash + 1, "0123456789abcdef") == 4);
    LC_CHECK(strlen(n) <= 20);
  }
  lc_control_free(m1, NULL);
  lc_control_free(m2, NULL);
  lc_control_free(a, NULL);
  LC_CHECK(!exists(path));
  {
    lc_control_entry *v = NULL;
    size_t n = 9;
    LC_CHECK_OK(lc_control_list(&v, &n, state, 0));
    LC_CHECK(n == 0);
    lc_control_entries_free(v, n);
  }
  rm_rf(state);
}

/* A child claims name (and, when spawn, starts `sleep 30` after the claim); the pid of that
 * sleep comes back through fd. Then it waits to be killed. */
static pid_t claiming_child(const char *state, const char *name, int spawn, pid_t *sleeper) {
  int p[2];
  pid_t pid;
  *sleeper = 0;
  if (pipe(p) < 0)
    return -1;
  if ((pid = fork()) == 0) {
    lc_control *ctl = claim(state, name);
    pid_t s = 0;
    close(p[0]);
    if (ctl == NULL)
      _exit(1);
    if (spawn && (s = fork()) == 0) {
      execlp("sleep", "sleep", "30", (char *)NULL);
      _exit(127);
    }
    if (write(p[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
      _exit(1);
    for (;;)
      pause();
  }
  close(p[1]);
  if (read(p[0], sleeper, sizeof(*sleeper)) != (ssize_t)sizeof(*sleeper)) {
    close(p[0]);
    return -1;
  }
  close(p[0]);
  return pid;
}

static void test_stale_entry_taken_over(void) {
  const char *state = fresh_state();
  lc_control_entry *v = NULL, *e;
  lc_control *ctl = NULL;
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  size_t n = 0;
  pid_t child, sleeper;
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((child = claiming_child(state, "beta", 0, &sleeper)) > 0);
  /* while it lives, the name is its */
  o.name = "beta";
  o.state_dir = state;
  LC_CHECK(lc_control_new(&ctl, &o) == -EEXIST);
  {
    char want[64];
    snprintf(want, sizeof(want), "pid %ld", (long)child);
    LC_CHECK_CONTAINS(lc_error_last(), want);
  }
  LC_CHECK_OK(lc_control_list(&v, &n, state, 0));
  LC_CHECK((e = find_entry(v, n, "beta")) != NULL && e->alive && e->pid == child);
  lc_control_entries_free(v, n);

  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  LC_CHECK_OK(lc_control_list(&v, &n, state, 0));
  LC_CHECK((e = find_entry(v, n, "beta")) != NULL && !e->alive && e->ended == NULL);
  lc_control_entries_free(v, n);
  {
    char *reply = NULL;
    LC_CHECK(lc_control_request(&reply, state, "beta", "status", 1000) == LC_ECLOSED);
    LC_CHECK_CONTAINS(lc_error_last(), "supervisor of beta is gone");
  }
  /* a dead supervisor's name is taken over */
  LC_REQUIRE((ctl = claim(state, "beta")) != NULL);
  LC_CHECK_OK(lc_control_list(&v, &n, state, 0));
  LC_CHECK((e = find_entry(v, n, "beta")) != NULL && e->alive && e->pid == getpid());
  lc_control_entries_free(v, n);
  lc_control_free(ctl, NULL);
  rm_rf(state);
}

static void test_lock_not_inherited(void) {
  const char *state = fresh_state();
  lc_control_entry *v = NULL, *e;
  size_t n = 0;
  pid_t child, sleeper;
  lc_control *ctl;
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((child = claiming_child(state, "gamma", 1, &sleeper)) > 0);
  LC_REQUIRE(sleeper > 0);
  /* once it is `sleep` (exec'd: between fork and exec it has the fds of its parent) */
  for (int i = 0; i < 200; i++) {
    char comm_path[64], comm[32] = "";
    FILE *f;
    snprintf(comm_path, sizeof(comm_path), "/proc/%ld/comm", (long)sleeper);
    if ((f = fopen(comm_path, "r")) != NULL) {
      if (fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
      fclose(f);
    }
    if (strcmp(comm, "sleep\n") == 0)
      break;
    poll(NULL, 0, 10);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  /* the holder is gone, the process it started lives on: the entry must be dead all the same */
  LC_CHECK(kill(sleeper, 0) == 0);
  LC_CHECK_OK(lc_control_list(&v, &n, state, 0));
  LC_CHECK((e = find_entry(v, n, "gamma")) != NULL && !e->alive);
  lc_control_entries_free(v, n);
  LC_CHECK_OK(lc_control_wait_gone(state, "gamma", 100));
  LC_CHECK((ctl = claim(state, "gamma")) != NULL);
  lc_control_free(ctl, NULL);
  kill(sleeper, SIGKILL);
  /* the sleeper was the killed child's: init reaps it */
  rm_rf(state);
}

/* ---- requests ---- */

typedef struct asker {
  const char *state, *name, *request;
  int timeout_ms, rc, done;
  char *reply, error[1024];
} asker;

static void *ask(void *arg) {
  asker *a = arg;
  a->rc = lc_control_request(&a->reply, a->state, a->name, a->request, a->timeout_ms);
  snprintf(a->error, sizeof(a->error), "%s", lc_error_last());
  __atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Serves ctl until the asker is done (or 10 s): the last lc_control_serve's return. */
static int serve_while(lc_control *ctl, asker *a) {
  int r = 0;
  pthread_t t;
  time_t start = time(NULL);
  pthread_create(&t, NULL, ask, a);
  while (!__atomic_load_n(&a->done, __ATOMIC_SEQ_CST) && time(NULL) - start < 10) {
    int s = lc_control_serve(ctl, 50);
    if (s != 0)
      r = s;
    if (s == LC_CONTROL_STOP)
      break;
  }
  if (r == LC_CONTROL_STOP)
    return r; /* the caller frees ctl, then joins */
  pthread_join(t, NULL);
  return r;
}

static int json_valid(const char *text) {
  FILE *p = popen("python3 -m json.tool >/dev/null", "w");
  if (p == NULL)
    return 0;
  fputs(text, p);
  return pclose(p) == 0;
}

static void test_requests(void) {
  const char *state = fresh_state();
  const char *env[] = {"DASK_SCHEDULER_ADDRESS=tcp://localhost:60000", "QUOTE=it's \"x\"", NULL};
  lc_control *ctl;
  asker a = {0};
  char path[512];
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((ctl = claim(state, "delta")) != NULL);
  LC_CHECK_OK(lc_control_set_env(ctl, env));
  lc_control_log_event(ctl, "an \"event\" with a\ttab and a \\ backslash");

  /* no cluster yet: status says so */
  a = (asker){.state = state, .name = "delta", .request = "status json", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0);
  LC_REQUIRE(a.reply != NULL);
  LC_CHECK(json_valid(a.reply));
  LC_CHECK_CONTAINS(a.reply, "\"name\":\"delta\"");
  LC_CHECK_CONTAINS(a.reply, "\"state\":\"starting\"");
  LC_CHECK_CONTAINS(a.reply, "\"type\":\"command\"");
  LC_CHECK_CONTAINS(a.reply, "\"workers\":[]");
  LC_CHECK_CONTAINS(a.reply, "with a\\ttab and a \\\\ backslash");
  {
    char want[64];
    snprintf(want, sizeof(want), "\"supervisor_pid\":%ld", (long)getpid());
    LC_CHECK_CONTAINS(a.reply, want);
  }
  free(a.reply);

  lc_control_set_state(ctl, "degraded", "lab2 lost");
  a = (asker){.state = state, .name = NULL, .request = "status", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0);
  LC_CHECK(a.reply != NULL && strstr(a.reply, "delta") && strstr(a.reply, "degraded: lab2 lost"));
  LC_CHECK(a.reply != NULL && strstr(a.reply, "[cluster] an \"event\""));
  free(a.reply);

  a = (asker){.state = state, .name = "delta", .request = "summary json", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0 && a.reply && json_valid(a.reply));
  LC_CHECK(a.reply && strstr(a.reply, "\"workers_wanted\":0") &&
           strstr(a.reply, "\"state\":\"degraded\""));
  free(a.reply);

  a = (asker){.state = state, .name = "delta", .request = "summary", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0 && a.reply && strncmp(a.reply, "delta degraded 0/0 0 - ", 23) == 0);
  free(a.reply);

  a = (asker){.state = state, .name = "delta", .request = "env", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0);
  LC_CHECK_STR(a.reply, "export DASK_SCHEDULER_ADDRESS='tcp://localhost:60000'\n"
                        "export QUOTE='it'\\''s \"x\"'\n");
  free(a.reply);

  a = (asker){.state = state, .name = "delta", .request = "bogus thing", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == LC_EREMOTE);
  LC_CHECK_CONTAINS(a.error, "unknown request 'bogus thing' (want: status");

  a = (asker){.state = state, .name = "delta", .request = "scale x", .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == LC_EREMOTE);
  LC_CHECK_CONTAINS(a.error, "not 'x'");

  /* the wrong name: the detail names those there */
  {
    char *reply = NULL;
    LC_CHECK(lc_control_request(&reply, state, "nosuch", "status", 1000) == -ENOENT);
    LC_CHECK_CONTAINS(lc_error_last(), "delta");
  }

  /* a client that sends nothing holds the supervisor about 1 s, not more (bound: 5 s) */
  {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    char buf[256] = "";
    ssize_t got;
    time_t t0;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/delta/control.sock", state);
    LC_REQUIRE(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    t0 = time(NULL);
    LC_CHECK(lc_control_serve(ctl, 1000) == 0);
    LC_CHECK(time(NULL) - t0 <= 5);
    got = read(fd, buf, sizeof(buf) - 1);
    LC_CHECK(got > 0 && strncmp(buf, "error ", 6) == 0);
    close(fd);
  }

  /* stop: answered once the supervisor let go of everything */
  a = (asker){.state = state, .name = "delta", .request = "stop", .timeout_ms = 5000};
  {
    pthread_t t;
    int r = 0;
    time_t start = time(NULL);
    pthread_create(&t, NULL, ask, &a);
    while (r != LC_CONTROL_STOP && time(NULL) - start < 10)
      r = lc_control_serve(ctl, 50);
    LC_CHECK(r == LC_CONTROL_STOP);
    LC_CHECK(!__atomic_load_n(&a.done, __ATOMIC_SEQ_CST)); /* no answer before the teardown */
    lc_control_free(ctl, NULL);
    pthread_join(t, NULL);
    LC_CHECK(a.rc == 0);
    LC_CHECK_STR(a.reply, "stopped\n");
    free(a.reply);
  }
  snprintf(path, sizeof(path), "%s/delta", state);
  LC_CHECK(!exists(path));
  LC_CHECK_OK(lc_control_wait_gone(state, "delta", 0));
  rm_rf(state);
}

/* A peer of another uid: the kernel keeps it from the socket (0700 directories, a 0600 socket);
 * opened up for the test, the supervisor itself refuses it (SO_PEERCRED) and logs that. */
static void test_peer_of_another_uid(void) {
  const char *state = fresh_state();
  char sock[512], dir[512], log[512], *text;
  lc_control *ctl;
  LC_REQUIRE(state != NULL);
  LC_REQUIRE(geteuid() == 0); /* setuid to nobody needs root; CI runs as root */
  LC_REQUIRE((ctl = claim(state, "epsilon")) != NULL);
  snprintf(dir, sizeof(dir), "%s/epsilon", state);
  snprintf(sock, sizeof(sock), "%s/epsilon/control.sock", state);
  snprintf(log, sizeof(log), "%s/epsilon/logs/cluster.log", state);
  for (int opened = 0; opened < 2; opened++) {
    int p[2];
    pid_t pid;
    char result[64] = "";
    if (opened) {
      chmod(state, 0711);
      chmod(dir, 0711);
      chmod(sock, 0666);
    }
    LC_REQUIRE(pipe(p) == 0);
    if ((pid = fork()) == 0) {
      struct sockaddr_un sa = {.sun_family = AF_UNIX};
      char buf[64];
      int fd, n;
      close(p[0]);
      if (setgid(65534) != 0 || setuid(65534) != 0)
        _exit(1);
      snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
      fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        n = snprintf(buf, sizeof(buf), "connect %s", strerror(errno));
      } else {
        ssize_t got;
        /* the supervisor may have closed already: no SIGPIPE, and a reset is a close */
        (void)send(fd, "status\n", 7, MSG_NOSIGNAL);
        got = read(fd, buf, sizeof(buf) - 1);
        n = snprintf(buf, sizeof(buf), got <= 0 ? "closed" : "answered");
      }
      if (write(p[1], buf, (size_t)n) < 0)
        _exit(1);
      _exit(0);
    }
    close(p[1]);
    for (int i = 0; i < 100 && waitpid(pid, NULL, WNOHANG) == 0; i++)
      lc_control_serve(ctl, 50);
    if (read(p[0], result, sizeof(result) - 1) < 0)
      result[0] = '\0';
    close(p[0]);
    if (!opened)
      LC_CHECK_STR(result, "connect Permission denied");
    else
      LC_CHECK_STR(result, "closed"); /* without a word */
  }
  text = slurp(log);
  LC_CHECK(text != NULL && strstr(text, "refused a connection from uid 65534 (pid ") != NULL);
  free(text);
  lc_control_free(ctl, NULL);
  rm_rf(state);
}

static void test_ended_and_clean(void) {
  const char *state = fresh_state();
  lc_control_entry *v = NULL, *e;
  lc_control *ctl, *other;
  size_t n = 0;
  char *reply = NULL, *logs = NULL, want[512];
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((ctl = claim(state, "zeta")) != NULL);
  LC_REQUIRE((other = claim(state, "eta")) != NULL);
  /* two alive: a request without a name is ambiguous */
  LC_CHECK(lc_control_request(&reply, state, NULL, "status", 1000) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "eta, zeta");
  LC_CHECK_OK(lc_control_logs_path(&logs, state, "zeta"));
  snprintf(want, sizeof(want), "%s/zeta/logs", state);
  LC_CHECK_STR(logs, want);
  lc_free(logs);
  LC_CHECK(lc_control_wait_gone(state, "zeta", 60) == -ETIMEDOUT);
  lc_control_free(ctl, "the master ended: it exited with status 3");
  LC_CHECK_OK(lc_control_wait_gone(state, "zeta", 1000));

  LC_CHECK(lc_control_request(&reply, state, "zeta", "status", 1000) == LC_ECLOSED);
  LC_CHECK_CONTAINS(lc_error_last(), "the master ended: it exited with status 3");
  LC_CHECK_OK(lc_control_list(&v, &n, state, 1));
  LC_CHECK(n == 2);
  LC_CHECK((e = find_entry(v, n, "zeta")) != NULL && !e->alive && e->ended &&
           strcmp(e->ended, "the master ended: it exited with status 3") == 0);
  LC_CHECK((e = find_entry(v, n, "eta")) != NULL && e->alive && e->ended == NULL);
  LC_CHECK(n == 2 && strcmp(v[0].name, "eta") == 0); /* sorted */
  lc_control_entries_free(v, n);
  /* cleaned: once shown, the dead one is gone */
  LC_CHECK_OK(lc_control_list(&v, &n, state, 1));
  LC_CHECK(n == 1 && find_entry(v, n, "eta") != NULL);
  lc_control_entries_free(v, n);
  snprintf(want, sizeof(want), "%s/zeta", state);
  LC_CHECK(!exists(want));
  lc_control_free(other, NULL);
  rm_rf(state);
}

/* A state directory whose socket path is longer than sun_path takes is reached all the same. */
static void test_long_path(void) {
  const char *state = fresh_state();
  char deep[512];
  lc_control *ctl;
  asker a;
  LC_REQUIRE(state != NULL);
  snprintf(deep, sizeof(deep), "%s/%s", state,
           "a-directory-whose-name-is-long-enough/to-push-the-socket-path-over-the-limit");
  LC_REQUIRE(system("true") == 0);
  {
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p -m 700 '%s'", deep);
    LC_REQUIRE(system(cmd) == 0);
  }
  LC_REQUIRE((ctl = claim(deep, "a-rather-long-cluster-name-too")) != NULL);
  LC_CHECK(strlen(lc_control_dir(ctl)) + strlen("/control.sock") >= 108);
  a = (asker){.state = deep,
              .name = "a-rather-long-cluster-name-too",
              .request = "summary",
              .timeout_ms = 5000};
  LC_CHECK(serve_while(ctl, &a) == 0);
  LC_CHECK(a.rc == 0 && a.reply && strncmp(a.reply, "a-rather-long-cluster-name-too ", 31) == 0);
  free(a.reply);
  lc_control_free(ctl, NULL);
  rm_rf(state);
}

/* ---- logs ---- */

static void test_log_format(void) {
  const char *state = fresh_state();
  lc_control *ctl;
  char path[512], out[512], st = 0, *text, *line;
  LC_REQUIRE(state != NULL);
  LC_REQUIRE((ctl = claim(state, "theta")) != NULL);
  lc_control_log_line(ctl, -1, "lab1", "hello world", 11, LC_STDERR);
  lc_control_log_line(ctl, 2, "lab2", "two\nlines", 9, LC_STDOUT);
  lc_control_log_event(ctl, "lab2 lost: no answer for %d s", 30);

  snprintf(path, sizeof(path), "%s/master.log", lc_control_logs_dir(ctl));
  LC_CHECK(mode_of(path) == 0600);
  text = slurp(path);
  LC_REQUIRE(text != NULL);
  LC_CHECK(strspn(text, "0123456789") == 13);
  LC_CHECK_CONTAINS(text, " e [lab1 master] hello world\n");
  line = text;
  LC_CHECK(lc_control_log_format(out, sizeof(out), line, strcspn(line, "\n"), 0, 0, &st) ==
           (int)strlen("[lab1 master] hello world"));
  LC_CHECK_STR(out, "[lab1 master] hello world");
  LC_CHECK(st == 'e');
  LC_CHECK(lc_control_log_format(out, sizeof(out), line, strcspn(line, "\n"), 0, 1, &st) > 0);
  LC_CHECK_STR(out, "\033[33m[lab1 master]\033[0m hello world");
  LC_CHECK(lc_control_log_format(out, sizeof(out), line, strcspn(line, "\n"), 1, 0, &st) > 0);
  LC_CHECK(strlen(out) > 13 && out[2] == ':' && out[5] == ':' && out[8] == '.' && out[12] == ' ');
  LC_CHECK_STR(out + 13, "[lab1 master] hello world");
  /* a short buffer: cut and terminated */
  LC_CHECK(lc_control_log_format(out, 8, line, strcspn(line, "\n"), 0, 0, &st) == 7);
  LC_CHECK_STR(out, "[lab1 m");
  free(text);

  snprintf(path, sizeof(path), "%s/worker-2.log", lc_control_logs_dir(ctl));
  text = slurp(path);
  LC_CHECK(text != NULL && strstr(text, " o [lab2 worker-2] two lines\n") != NULL);
  LC_CHECK(text && lc_control_log_format(out, sizeof(out), text, strlen(text), 0, 1, &st) > 0);
  LC_CHECK_STR(out, "\033[36m[lab2 worker-2]\033[0m two lines");
  LC_CHECK(st == 'o');
  free(text);

  snprintf(path, sizeof(path), "%s/cluster.log", lc_control_logs_dir(ctl));
  text = slurp(path);
  LC_CHECK(text != NULL && strstr(text, " c [- cluster] lab2 lost: no answer for 30 s\n") != NULL);
  LC_CHECK(text && lc_control_log_format(out, sizeof(out), text, strlen(text), 0, 0, &st) > 0);
  LC_CHECK_STR(out, "[cluster] lab2 lost: no answer for 30 s");
  LC_CHECK(st == 'c');
  free(text);

  LC_CHECK(lc_control_log_format(out, sizeof(out), "hello", 5, 0, 0, &st) == -EINVAL);
  LC_CHECK(lc_control_log_format(out, sizeof(out), "123 x [a] b", 11, 0, 0, &st) == -EINVAL);
  LC_CHECK(lc_control_log_format(out, sizeof(out), "123 o [a b", 10, 0, 0, &st) == -EINVAL);
  lc_control_free(ctl, NULL);
  rm_rf(state);
}

typedef struct writer {
  lc_control *ctl;
  int index;
} writer;

static void *write_lines(void *arg) {
  writer *w = arg;
  char line[64];
  for (int i = 0; i < 300; i++) {
    int n = snprintf(line, sizeof(line), "line %03d of writer %d", i, w->index);
    lc_control_log_line(w->ctl, 3, "lab1", line, (size_t)n, LC_STDOUT);
  }
  return NULL;
}

static void test_log_rotation(void) {
  const char *state = fresh_state();
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  lc_control *ctl = NULL;
  char path[512], *text;
  pthread_t t[2];
  writer w[2];
  DIR *d;
  struct dirent *de;
  int files = 0;
  char big[1000];
  LC_REQUIRE(state != NULL);
  o.name = "iota";
  o.state_dir = state;
  o.log_max_bytes = 400;
  LC_REQUIRE_OK(lc_control_new(&ctl, &o));
  /* two threads at once: lines stay whole */
  for (int i = 0; i < 2; i++) {
    w[i] = (writer){ctl, i};
    pthread_create(&t[i], NULL, write_lines, &w[i]);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  memset(big, 'x', sizeof(big));
  lc_control_log_line(ctl, 3, "lab1", big, sizeof(big), LC_STDOUT); /* longer than the limit */
  lc_control_log_line(ctl, 3, "lab1", "the last line", 13, LC_STDOUT);

  LC_REQUIRE((d = opendir(lc_control_logs_dir(ctl))) != NULL);
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') {
      files++;
      LC_CHECK(strcmp(de->d_name, "worker-3.log") == 0 ||
               strcmp(de->d_name, "worker-3.log.1") == 0);
    }
  closedir(d);
  LC_CHECK(files == 2);
  snprintf(path, sizeof(path), "%s/worker-3.log", lc_control_logs_dir(ctl));
  LC_CHECK(file_size(path) > 0 && file_size(path) <= 400);
  text = slurp(path);
  LC_CHECK(text != NULL && strstr(text, "the last line\n") != NULL);
  /* every line whole */
  for (char *l = text; l && *l; l = strchr(l, '\n') + 1) {
    char out[600], st;
    LC_CHECK(lc_control_log_format(out, sizeof(out), l, strcspn(l, "\n"), 0, 0, &st) > 0);
    if (strchr(l, '\n') == NULL)
      break;
  }
  free(text);
  snprintf(path, sizeof(path), "%s/worker-3.log.1", lc_control_logs_dir(ctl));
  LC_CHECK(file_size(path) > 0 && file_size(path) <= 400);
  text = slurp(path);
  LC_CHECK(text != NULL && text[strlen(text) - 1] == '\n' && strstr(text, "xxxxxxxx") != NULL);
  free(text);
  lc_control_free(ctl, NULL);
  rm_rf(state);
}

LC_TEST_MAIN(LC_TEST(test_state_dir_xdg_and_home), LC_TEST(test_claim_and_names),
             LC_TEST(test_stale_entry_taken_over), LC_TEST(test_lock_not_inherited),
             LC_TEST(test_requests), LC_TEST(test_peer_of_another_uid),
             LC_TEST(test_ended_and_clean), LC_TEST(test_long_path), LC_TEST(test_log_format),
             LC_TEST(test_log_rotation))
