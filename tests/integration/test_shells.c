/*
 * test_shells.c - everything that runs on a host works whatever the user's login shell is, and
 * whatever its rc files print. The test hosts have a plain user per login shell (bash, dash as
 * /bin/sh, zsh, ksh, busybox ash, fish, tcsh, csh) and greeting users whose rc files print to
 * stdout and stderr (tests/support/README.md). For each user, on lab1: exec with environment,
 * working directory, stderr and exit status; file write, send and get, byte for byte (a file
 * holding our own mark included); the listing of ports; host facts; the working directory; what
 * `ps` shows of a process (its label, never a value); a cluster of one worker; a cluster of 64
 * workers, whose context is large enough to go in gzip's format and be unpacked by the host's
 * gzip under that user; the lifeline after SIGKILL of the launcher; and afterwards, nothing of
 * that user left on the host.
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define HOST 1
#define HOST_NAME "lab1"

/* our mark (LC__COMMAND_MARK), inside a file's contents */
#define LC_TEST_MARK_BYTES "\036lc\n"

static lc_engine *engine;
static char ctl[4096];
static char master_tmpl[4200];

/* Processes in lab1's namespace whose uid is the user's, sshd's own left out. */
typedef struct owned {
  unsigned uid;
  int count;
} owned;

static int is_owned_not_sshd(long pid, const char *text, const void *arg) {
  const owned *o = arg;
  unsigned uid = 0;
  const char *u = strstr(text, "Uid:");
  const char *name = strstr(text, "Name:");
  if (u == NULL || name == NULL || sscanf(u + 4, "%u", &uid) != 1 || uid != o->uid)
    return 0;
  (void)pid;
  return strncmp(name + 5 + strspn(name + 5, " \t"), "sshd", 4) != 0;
}

static unsigned user_uid(lc_runtime *rt) {
  collect col;
  lc_exec_result res;
  unsigned uid = 0;
  if (collect_exec(&col, &res, rt, "id -u", NULL) == 0 && col.text[0] != NULL)
    uid = (unsigned)strtoul(col.text[0], NULL, 10);
  collect_free(&col);
  return uid;
}

/* How many processes of uid live on the host, waiting up to 20 s for them to go. */
static int left_of(unsigned uid) {
  owned o = {uid, 0};
  int n = -1;
  for (int i = 0; i < 200; i++) {
    if ((n = th_each_proc(HOST, "status", is_owned_not_sshd, &o)) == 0)
      break;
    usleep(100 * 1000);
  }
  return n;
}

static void check_exec(lc_runtime *rt, const char *user) {
  const char *env[] = {"A=it's $x \"q\" `id`", "B=", NULL};
  lc_exec_result res = {0};
  collect col;
  LC_CHECK_OK(collect_exec(&col, &res, rt,
                           "cd /tmp && printf '%s|%s|' \"$A\" \"$B\"; pwd; echo to-stderr >&2; "
                           "exit 3",
                           env));
  LC_CHECK_STR(col.text[0], "it's $x \"q\" `id`||/tmp\n");
  LC_CHECK_STR(col.text[1], "to-stderr\n");
  LC_CHECK(res.exit_status == 3);
  if (res.exit_status != 3 || col.text[0] == NULL)
    fprintf(stderr, "  %s: exit %d, stdout %s, stderr %s\n", user, res.exit_status,
            col.text[0] ? col.text[0] : "(none)", col.text[1] ? col.text[1] : "(none)");
  collect_free(&col);
  LC_CHECK_OK(collect_exec(&col, &res, rt, "whoami; echo \"$HOME\"", NULL));
  {
    char want[128];
    snprintf(want, sizeof(want), "%s\n/home/%s\n", user, user);
    LC_CHECK_STR(col.text[0], want);
  }
  collect_free(&col);
}

static void check_files(lc_runtime *rt) {
  unsigned char data[600];
  char local[] = "/tmp/lc-shells-XXXXXX", back[64];
  FILE *f;
  size_t n = 0;
  int fd;
  /* every byte value, our own mark and a line that looks like a greeting */
  for (size_t i = 0; i < 256; i++)
    data[n++] = (unsigned char)i;
  memcpy(data + n, LC_TEST_MARK_BYTES, sizeof(LC_TEST_MARK_BYTES) - 1);
  n += sizeof(LC_TEST_MARK_BYTES) - 1;
  memcpy(data + n, "hello from .bashrc\n", 19);
  n += 19;
  LC_CHECK_OK(lc_runtime_write_file(rt, "~/written.bin", data, n, 0600, 10000));
  snprintf(back, sizeof(back), "%s.back", local);
  LC_CHECK_OK(lc_runtime_get_file(rt, "~/written.bin", back, 10000));
  if ((f = fopen(back, "rb")) != NULL) {
    unsigned char got[1024];
    size_t k = fread(got, 1, sizeof(got), f);
    fclose(f);
    LC_CHECK(k == n && memcmp(got, data, n) == 0);
  } else {
    LC_CHECK(!"the fetched file is missing");
  }
  unlink(back);
  LC_REQUIRE((fd = mkstemp(local)) >= 0);
  LC_CHECK(write(fd, data, n) == (ssize_t)n);
  close(fd);
  LC_CHECK_OK(lc_runtime_send_file(rt, local, "~/sent.bin", 10000));
  {
    collect col;
    lc_exec_result res;
    LC_CHECK_OK(collect_exec(&col, &res, rt, "cmp ~/sent.bin ~/written.bin && echo same", NULL));
    LC_CHECK_STR(col.text[0], "same\n");
    collect_free(&col);
  }
  unlink(local);
}

static void check_listing_facts_workdir(lc_runtime *rt, const char *user) {
  lc_ports *ports = NULL;
  lc_hostinfo *info = NULL;
  const char *exes[] = {"sh", "no-such-tool-here", NULL};
  const char *wd = NULL;
  char want[256];
  LC_CHECK_OK(lc_ports_listening(&ports, rt, 10000));
  LC_CHECK(ports != NULL && lc_ports_contains(ports, 22));
  lc_ports_free(ports);
  LC_CHECK_OK(lc_runtime_hostinfo(&info, rt, exes, 20000));
  if (info != NULL) {
    LC_CHECK_STR(lc_hostinfo_hostname(info), HOST_NAME);
    LC_CHECK(lc_hostinfo_cores(info) > 0 && lc_hostinfo_memory_bytes(info) > 0);
    LC_CHECK(lc_hostinfo_has_executable(info, "sh") == 1);
    LC_CHECK(lc_hostinfo_has_executable(info, "no-such-tool-here") == 0);
    LC_CHECK(lc_hostinfo_listening(info) != NULL &&
             lc_ports_contains(lc_hostinfo_listening(info), 22));
  }
  lc_hostinfo_free(info);
  LC_CHECK_OK(lc_runtime_workdir(&wd, rt));
  snprintf(want, sizeof(want), "/home/%s/.cache/lazycluster/", user);
  LC_CHECK(wd != NULL && strncmp(wd, want, strlen(want)) == 0);
}

/* What the host's process list shows while a process runs: its label, never a value. */
typedef struct seen {
  const char *needle;
  char line[512];
} seen;

/* needle found anywhere, or at the start when it begins with '^' */
static int cmdline_has(long pid, const char *text, const void *arg) {
  seen *s = (seen *)arg;
  (void)pid;
  if (s->needle[0] == '^' ? strncmp(text, s->needle + 1, strlen(s->needle + 1)) != 0
                          : strstr(text, s->needle) == NULL)
    return 0;
  snprintf(s->line, sizeof(s->line), "%s", text);
  return 1;
}

static void check_ps(lc_runtime *rt, const char *user) {
  char secret[64], env_secret[96], want[128];
  const char *env[] = {env_secret, NULL};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_process *p = NULL;
  seen s;
  int n = 0;
  snprintf(secret, sizeof(secret), "tok-%ld-%s", (long)getpid(), user);
  snprintf(env_secret, sizeof(env_secret), "API_TOKEN=%s", secret);
  eo.env = env;
  eo.label = "probe-7";
  LC_REQUIRE_OK(lc_runtime_spawn(&p, rt, "exec sleep 4711", &eo));
  s.needle = "^sleep 4711";
  for (int i = 0; i < 100 && (n = th_each_proc(HOST, "cmdline", cmdline_has, &s)) < 1; i++)
    usleep(100 * 1000);
  LC_CHECK(n == 1);
  /* the wrapper, and its reader and watchdog (subshells: the same line) */
  snprintf(want, sizeof(want), "/bin/sh -s lc-lifeline %s@%s probe-7 lc-id=", user, HOST_NAME);
  s.needle = "probe-7";
  LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) >= 1);
  /* and the lifeline's id (16 hex digits), by which a sweep after a lost connection finds it */
  LC_CHECK(strncmp(s.line, want, strlen(want)) == 0 &&
           strspn(s.line + strlen(want), "0123456789abcdef") == 16 &&
           strcmp(s.line + strlen(want) + 16, " ") == 0);
  if (strncmp(s.line, want, strlen(want)) != 0)
    fprintf(stderr, "  the wrapper's command line: \"%s\"\n", s.line);
  s.needle = secret;
  LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) == 0);
  lc_process_free(p);
}

/* A group of the one host (user@alias), connected. */
static lc_group *group_of_one(const char *host) {
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  if (lc_group_new(&g, engine, NULL) < 0 || lc_group_connect(&rep, g, &host, 1, &ro) < 0) {
    fprintf(stderr, "  %s: %s\n", host, lc_error_last());
    lc_group_free(g);
    return NULL;
  }
  LC_CHECK(lc_group_report_failures(rep) == 0);
  lc_group_report_free(rep);
  return g;
}

/* c started with n workers on host; otherwise the error, and a failed check. */
static int started(lc_cluster *c, size_t n, const char *host) {
  if (lc_cluster_start(c, n) == 0)
    return 1;
  fprintf(stderr, "  %s: %s\n", host, lc_error_last());
  LC_CHECK(!"the cluster started");
  return 0;
}

/* A cluster of one worker on this user's host, its master here; stopped and counted. */
static void check_cluster(const char *host) {
  const lc_cluster_type *t = lc_cluster_type_find("command");
  const char *args[] = {"master=exec python3 -m http.server {master_port} --bind 127.0.0.1",
                        "worker=env | grep ^LAZYCLUSTER_ > ctx.txt; exec python3 -m http.server "
                        "{worker_port} --bind 127.0.0.1",
                        NULL};
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_group *g = group_of_one(host);
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL);
  LC_REQUIRE_OK(t->make(&m, &w, args));
  o.master_port = 61700;
  o.worker_ports = "61701-61799";
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  if (started(c, 1, host)) {
    const lc_worker_info *wi = lc_cluster_worker(c, 0);
    collect col;
    lc_exec_result res;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "cat '%s/ctx.txt' '%s/cluster.json'", wi->workdir, wi->workdir);
    LC_CHECK_OK(collect_exec(&col, &res, lc_group_at(g, 0), cmd, NULL));
    LC_CHECK_CONTAINS(col.text[0], "LAZYCLUSTER_WORKER_INDEX=0\n");
    LC_CHECK_CONTAINS(col.text[0], "LAZYCLUSTER_MASTER_PORT=61700\n");
    LC_CHECK_CONTAINS(col.text[0], "\"master\"");
    collect_free(&col);
    /* no context value in any command line on the host: the worker shows as its command */
    {
      seen s = {.needle = "LAZYCLUSTER_"};
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) == 0);
      s.needle = "TF_CONFIG";
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) == 0);
      s.needle = "cluster.json";
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) == 0);
      s.needle = "^python3 -m http.server";
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) == 1);
      s.needle = "lc-lifeline";
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) >= 1);
      /* the label, then the lifeline's id (any order of pids: they wrap around) */
      s.needle = " worker-0 lc-id=";
      LC_CHECK(th_each_proc(HOST, "cmdline", cmdline_has, &s) >= 1);
    }
  }
  lc_cluster_free(c);
  lc_group_free(g);
  t->release(m, w);
}

/* A cluster of 64 workers on this user's host: its context (~4 KB) goes packed in gzip's format
 * and the host unpacks it as this user, whatever the login shell. Every worker sees the whole
 * cluster; nothing of it is left after the free. */
static void check_packed_context(const char *host) {
  const char *worker = "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_group *g = group_of_one(host);
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL);
  LC_REQUIRE(th_ship_ctl(g, ctl) == 0);
  lc_runtime_set_resources(lc_group_at(g, 0), 0, 64);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker));
  o.master_port = 61800;
  o.worker_ports = "61801-61899";
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  if (started(c, 64, host)) {
    const lc_worker_info *last = lc_cluster_worker(c, 63);
    char want[128], cmd[4200];
    LC_CHECK_CONTAINS(lc_cluster_log(c), "sent in gzip's format) written on 1 host");
    LC_CHECK(strstr(lc_cluster_log(c), "gzip cannot run") == NULL);
    snprintf(want, sizeof(want), "{\"index\":63,\"host\":\"%s\",\"port\":%d,", last->host,
             last->port);
    for (size_t i = 0; i < lc_cluster_worker_count(c); i += 21) { /* 0, 21, 42, 63 */
      collect col;
      lc_exec_result res;
      snprintf(cmd, sizeof(cmd), "cat '%s/cluster.json'", lc_cluster_worker(c, i)->workdir);
      LC_CHECK_OK(collect_exec(&col, &res, lc_group_at(g, 0), cmd, NULL));
      LC_CHECK(res.exit_status == 0);
      LC_CHECK_CONTAINS(col.text[0], "\"worker_count\":64");
      LC_CHECK_CONTAINS(col.text[0], want);
      collect_free(&col);
    }
    LC_CHECK(th_count_procs(HOST, "lcbin/lazyclusterctl serve 618") == 64);
  }
  lc_cluster_free(c);
  LC_CHECK(th_count_procs(HOST, "lcbin/lazyclusterctl serve 618") == 0);
  lc_group_free(g);
  th_command_type_free(m, w);
}

/* The launcher killed with SIGKILL: the host's processes go with the channel. */
static void check_sigkill(const char *host) {
  int fds[2], status, n = -1;
  char c, pattern[32];
  pid_t pid;
  snprintf(pattern, sizeof(pattern), "^sleep 48%02d", (int)(getpid() % 100));
  LC_REQUIRE(pipe(fds) == 0);
  if ((pid = fork()) == 0) {
    lc_engine *e = NULL;
    lc_runtime *rt = NULL;
    lc_process *p = NULL;
    lc_runtime_options o = th_options();
    close(fds[0]);
    if (lc_engine_new(&e, NULL) < 0 || lc_runtime_new_ssh(&rt, e, host, &o) < 0 ||
        lc_runtime_spawn(&p, rt, pattern + 1, NULL) < 0 || write(fds[1], "r", 1) != 1)
      _exit(3);
    for (;;)
      pause();
  }
  close(fds[1]);
  LC_REQUIRE(read(fds[0], &c, 1) == 1);
  close(fds[0]);
  for (int i = 0; i < 100 && th_count_procs(HOST, pattern) < 1; i++)
    usleep(100 * 1000);
  LC_CHECK(th_count_procs(HOST, pattern) == 1);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  for (int i = 0; i < 200 && (n = th_count_procs(HOST, pattern)) != 0; i++)
    usleep(100 * 1000);
  LC_CHECK(n == 0);
}

/* Everything above as one user, then a count of what that user left on the host. */
static void as_user(const char *user) {
  char host[64];
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  unsigned uid;
  snprintf(host, sizeof(host), "%s@%s", user, HOST_NAME);
  if (lc_runtime_new_ssh(&rt, engine, host, &o) < 0) {
    fprintf(stderr, "  %s: %s\n", host, lc_error_last());
    LC_REQUIRE(!"connected");
  }
  uid = user_uid(rt);
  LC_CHECK(uid != 0);
  check_exec(rt, user);
  check_files(rt);
  check_listing_facts_workdir(rt, user);
  check_ps(rt, user);
  lc_runtime_free(rt);
  check_cluster(host);
  check_packed_context(host);
  check_sigkill(host);
  LC_CHECK(uid != 0 && left_of(uid) == 0);
}

#define AS(user)                                                                                   \
  static void test_##user(void) { as_user(#user); }
AS(lcbash)
AS(lcsh)
AS(lczsh)
AS(lcksh)
AS(lcash)
AS(lcfish)
AS(lctcsh)
AS(lccsh)
AS(lcgreet)
AS(lcgreetfish)
AS(lcgreetcsh)

/*
 * A login shell that never runs the command (here an rc file that exits first, as a broken
 * .bashrc or a nologin shell does): the error says so, with what it printed, and the exit status.
 */
static void test_login_shell_that_never_runs_the_command(void) {
  char path[4096], saved[4096];
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  lc_exec_result res = {0};
  FILE *f;
  snprintf(path, sizeof(path), "%s/hosts/%d/users/lcgreet/.bashrc", th_dir(), HOST);
  snprintf(saved, sizeof(saved), "%s.saved", path);
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lcgreet@" HOST_NAME, &o));
  LC_REQUIRE(rename(path, saved) == 0);
  if ((f = fopen(path, "w")) != NULL) {
    fputs("echo 'this host is closed for maintenance' >&2\nexit 7\n", f);
    fclose(f);
  }
  LC_CHECK(lc_runtime_exec(&res, rt, "echo never", NULL) == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "lcgreet@lab1: the login shell did not run the command "
                                     "(exit status 7): it said \"this host is closed for "
                                     "maintenance\"");
  LC_CHECK(rename(saved, path) == 0);
  LC_CHECK(lc_runtime_exec(&res, rt, "true", NULL) == 0 && res.exit_status == 0);
  lc_runtime_free(rt);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_lcbash),     LC_TEST(test_lcsh),
      LC_TEST(test_lczsh),      LC_TEST(test_lcksh),
      LC_TEST(test_lcash),      LC_TEST(test_lcfish),
      LC_TEST(test_lctcsh),     LC_TEST(test_lccsh),
      LC_TEST(test_lcgreet),    LC_TEST(test_lcgreetfish),
      LC_TEST(test_lcgreetcsh), LC_TEST(test_login_shell_that_never_runs_the_command)};
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
