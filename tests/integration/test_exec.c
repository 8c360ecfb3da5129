/*
 * test_exec.c - commands on real SSH test hosts: concurrency, output, exit codes, signals,
 * environment and quoting, timeouts, and the same checks on the local runtime.
 */
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

#define NVALUES(a) (sizeof(a) / sizeof((a)[0]))

#define HOSTS 8

static lc_engine *engine;

static lc_runtime *connect_host(int i) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  char name[16];
  int r;
  snprintf(name, sizeof(name), "lab%d", i);
  if ((r = lc_runtime_new_ssh(&rt, engine, name, &o)) < 0)
    fprintf(stderr, "  connect %s: %s: %s\n", name, lc_err_name(r), lc_error_last());
  return rt;
}

typedef struct {
  int index;
  lc_runtime *rt;
  int rc;
  lc_exec_result res;
  collect out;
} host_job;

static void *host_job_main(void *arg) {
  host_job *j = arg;
  j->rc = collect_exec(&j->out, &j->res, j->rt,
                       "echo \"$SSH_CONNECTION\"; hostname; touch /tmp/mark-$(hostname); ls /tmp | "
                       "grep -c '^mark-'; sleep 1",
                       NULL);
  return NULL;
}

/* Eight hosts at once from eight threads: each sees its own address, /tmp and one second each. */
static void test_concurrent_exec_on_8_hosts(void) {
  host_job jobs[HOSTS];
  pthread_t th[HOSTS];
  uint64_t t0;
  memset(jobs, 0, sizeof(jobs));
  for (int i = 0; i < HOSTS; i++) {
    jobs[i].index = i;
    LC_REQUIRE((jobs[i].rt = connect_host(i)) != NULL);
  }
  t0 = (uint64_t)time(NULL);
  for (int i = 0; i < HOSTS; i++)
    pthread_create(&th[i], NULL, host_job_main, &jobs[i]);
  for (int i = 0; i < HOSTS; i++)
    pthread_join(th[i], NULL);
  fprintf(stderr, "  8 hosts x 'sleep 1' took about %lu s\n", (unsigned long)(time(NULL) - t0));
  for (int i = 0; i < HOSTS; i++) {
    char want[64];
    LC_CHECK_OK(jobs[i].rc);
    LC_CHECK(jobs[i].res.exit_status == 0);
    snprintf(want, sizeof(want), " %s 22\n", th_addr(i));
    LC_CHECK_CONTAINS(jobs[i].out.text[0], want);
    snprintf(want, sizeof(want), "\nlab%d\n1\n", i); /* its own hostname, one mark in its /tmp */
    LC_CHECK_CONTAINS(jobs[i].out.text[0], want);
    collect_free(&jobs[i].out);
    lc_runtime_free(jobs[i].rt);
  }
}

/* Interleaved writes to both streams arrive complete and in order within each stream. */
static void run_stream_order(lc_runtime *rt) {
  collect c;
  lc_exec_result res;
  int ok_out = 1, ok_err = 1;
  char *p, *q;
  LC_REQUIRE_OK(collect_exec(&c, &res, rt,
                             "i=1; while [ $i -le 3000 ]; do echo out$i; echo err$i >&2; "
                             "i=$((i+1)); done",
                             NULL));
  LC_CHECK(c.lines[0] == 3000);
  LC_CHECK(c.lines[1] == 3000);
  p = c.text[0];
  q = c.text[1];
  for (int i = 1; i <= 3000 && p && q; i++) {
    char w[32];
    int n = snprintf(w, sizeof(w), "out%d\n", i);
    if (strncmp(p, w, (size_t)n) != 0)
      ok_out = 0;
    p = strchr(p, '\n');
    p = p ? p + 1 : NULL;
    n = snprintf(w, sizeof(w), "err%d\n", i);
    if (strncmp(q, w, (size_t)n) != 0)
      ok_err = 0;
    q = strchr(q, '\n');
    q = q ? q + 1 : NULL;
  }
  LC_CHECK(ok_out);
  LC_CHECK(ok_err);
  collect_free(&c);
}

/* 10 MB on stdout and 10 MB nobody reads on stderr: the process never stalls. */
static void run_big_output(lc_runtime *rt) {
  collect c;
  lc_exec_result res;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  LC_REQUIRE_OK(collect_exec(&c, &res, rt,
                             "head -c 10000000 /dev/zero | tr '\\0' x | fold -w 100; "
                             "head -c 10000000 /dev/zero | tr '\\0' y | fold -w 1000 >&2",
                             NULL));
  LC_CHECK(res.exit_status == 0);
  LC_CHECK(c.bytes[0] == 10000000);
  LC_CHECK(c.lines[0] == 100000);
  LC_CHECK(c.bytes[1] == 10000000);
  collect_free(&c);
  /* nobody listening at all */
  eo.timeout_ms = 60000;
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "head -c 10000000 /dev/urandom", &eo));
  LC_CHECK(res.exit_status == 0);
}

/* A last line without a newline arrives at the end; a partial line is never split. */
static void run_partial_line(lc_runtime *rt) {
  collect c;
  lc_exec_result res;
  LC_REQUIRE_OK(collect_exec(&c, &res, rt, "printf 'one\\ntwo'; printf 'e1\\ne2' >&2", NULL));
  LC_CHECK_STR(c.text[0], "one\ntwo\n");
  LC_CHECK_STR(c.text[1], "e1\ne2\n");
  collect_free(&c);
}

static void run_exit_and_signals(lc_runtime *rt) {
  lc_exec_result res;
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "exit 7", NULL));
  LC_CHECK(res.exit_status == 7 && res.signal == 0);
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "true", NULL));
  LC_CHECK(res.exit_status == 0 && res.signal == 0);
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "kill -TERM $$", NULL));
  LC_CHECK(res.exit_status == -1 && res.signal == SIGTERM);
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "kill -KILL $$", NULL));
  LC_CHECK(res.exit_status == -1 && res.signal == SIGKILL);
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "no-such-command-xyz", NULL));
  LC_CHECK(res.exit_status == 127);
}

/* Values with spaces, quotes, $, backslashes, newlines and UTF-8 arrive byte for byte, both as
 * environment values and as quoted arguments. */
static void run_env_and_quoting(lc_runtime *rt) {
  static const char *values[] = {
      "two words",          "it's \"quoted\"", "$HOME and `id` and $(id)",
      "back\\slash\\\\n",   "line1\nline2\n",  "grüße ∑ 日本",
      "  lead and trail  ", "*?[glob]",        ""};
  char env_entries[NVALUES(values)][256];
  const char *env[NVALUES(values) + 1];
  for (size_t i = 0; i < NVALUES(values); i++) {
    snprintf(env_entries[i], sizeof(env_entries[i]), "V%zu=%s", i, values[i]);
    env[i] = env_entries[i];
  }
  env[NVALUES(values)] = NULL;
  for (size_t i = 0; i < NVALUES(values); i++) {
    collect c;
    lc_exec_result res;
    char cmd[512], want[1024] = "", *quoted = NULL;
    /* as hex, so that newlines and spaces are compared exactly */
    for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
      snprintf(want + strlen(want), sizeof(want) - strlen(want), "%02x", *p);
    strcat(want, "|\n");
    snprintf(cmd, sizeof(cmd), "printf '%%s' \"$V%zu\" | od -An -v -tx1 | tr -d ' \\n'; echo '|'",
             i);
    LC_CHECK_OK(collect_exec(&c, &res, rt, cmd, env));
    LC_CHECK_STR(c.text[0] ? c.text[0] : "|\n", want);
    collect_free(&c);
    LC_REQUIRE_OK(lc_shell_quote(&quoted, values[i]));
    snprintf(cmd, sizeof(cmd), "printf '%%s' %s | od -An -v -tx1 | tr -d ' \\n'; echo '|'", quoted);
    lc_free(quoted);
    LC_CHECK_OK(collect_exec(&c, &res, rt, cmd, NULL));
    LC_CHECK_STR(c.text[0] ? c.text[0] : "|\n", want);
    collect_free(&c);
  }
  {
    const char *bad[] = {"1BAD=x", NULL};
    lc_exec_result res;
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    eo.env = bad;
    LC_CHECK(lc_runtime_exec(&res, rt, "true", &eo) == -EINVAL);
    LC_CHECK_CONTAINS(lc_error_last(), "1BAD=x");
  }
}

static void run_cwd(lc_runtime *rt) {
  collect c;
  lc_exec_result res;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  memset(&c, 0, sizeof(c));
  c.keep = 1;
  eo.on_line = collect_line;
  eo.payload = &c;
  eo.cwd = "/tmp";
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "pwd", &eo));
  LC_CHECK_STR(c.text[0], "/tmp\n");
  collect_free(&c);
  c.keep = 1;
  eo.cwd = "/no/such/dir";
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "pwd", &eo));
  LC_CHECK(res.exit_status == 126);
  LC_CHECK_CONTAINS(c.text[1], "/no/such/dir");
  collect_free(&c);
}

/* A timeout ends the command and its children on the host; no process is left. */
static void run_timeout(lc_runtime *rt, int host) {
  lc_exec_result res;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  eo.timeout_ms = 500;
  LC_CHECK(lc_runtime_exec(&res, rt, "sleep 4242 & sleep 4243", &eo) == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_error_last(), "timed out");
  LC_CHECK_CONTAINS(lc_error_last(), lc_runtime_name(rt));
  if (host >= 0) {
    LC_CHECK(th_count_procs(host, "sleep 424") == 0);
  }
}

/* spawn, wait with a limit, stop, and a process freed while running. */
static void run_spawn_stop(lc_runtime *rt, int host) {
  lc_process *p = NULL;
  lc_exec_result res;
  LC_REQUIRE_OK(
      lc_runtime_spawn(&p, rt, "trap 'echo got TERM; exit 3' TERM; sleep 4244 & wait", NULL));
  LC_CHECK(lc_process_wait(&res, p, 300) == -ETIMEDOUT);
  LC_CHECK_OK(lc_process_stop(p));
  LC_CHECK_OK(lc_process_wait(&res, p, 10000));
  LC_CHECK(res.exit_status == 3);
  lc_process_free(p);
  LC_REQUIRE_OK(lc_runtime_spawn(&p, rt, "sleep 4245", NULL));
  lc_process_free(p); /* still running: freed means ended */
  if (host >= 0) {
    int n = 1;
    for (int i = 0; i < 100 && n > 0; i++) { /* the group ends within the grace period */
      n = th_count_procs(host, "sleep 424");
      if (n > 0)
        usleep(100 * 1000);
    }
    LC_CHECK(n == 0);
  }
}

/* A command that ends by itself but left a process outside its group (setsid): the lifeline
 * finds it by LC_LIFELINE and ends it. At once (the wrapper reads only the PIDs made since it
 * started) and after a while (it reads every process). */
static void run_left_behind(lc_runtime *rt, int host) {
  static const char *const cmds[] = {
      "setsid sleep 4246 </dev/null >/dev/null 2>&1 & exit 0",
      "setsid sleep 4247 </dev/null >/dev/null 2>&1 & sleep 0.5; exit 0",
  };
  for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
    lc_exec_result res;
    LC_CHECK_OK(lc_runtime_exec(&res, rt, cmds[k], NULL));
    LC_CHECK(res.exit_status == 0);
    if (host >= 0) {
      int n = 1;
      for (int i = 0; i < 50 && n > 0; i++) { /* TERM was sent before the wrapper exited */
        n = th_count_procs(host, k == 0 ? "sleep 4246" : "sleep 4247");
        if (n > 0)
          usleep(100 * 1000);
      }
      LC_CHECK(n == 0);
    }
  }
}

/* More processes than sshd's MaxSessions (10) on one connection: they queue, all complete. */
static void run_many_channels(lc_runtime *rt) {
  lc_process *p[25];
  for (int i = 0; i < 25; i++)
    LC_REQUIRE_OK(lc_runtime_spawn(&p[i], rt, "sleep 0.2; exit 5", NULL));
  for (int i = 0; i < 25; i++) {
    lc_exec_result res = {0};
    LC_CHECK_OK(lc_process_wait(&res, p[i], 60000));
    LC_CHECK(res.exit_status == 5);
    lc_process_free(p[i]);
  }
}

/* 15 long-running processes on one host at once, more than one connection's MaxSessions: a
 * barrier that every one of them must reach proves they run at the same time. */
static void run_concurrent_beyond_max_sessions(lc_runtime *rt, const char *dir) {
  lc_process *p[15];
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "mkdir -p %s; touch %s/$$; n=0; while [ $(ls %s | wc -l) -lt 15 ]; do sleep 0.1; "
           "n=$((n+1)); [ $n -gt 300 ] && exit 9; done; exit 0",
           dir, dir, dir);
  for (int i = 0; i < 15; i++)
    LC_REQUIRE_OK(lc_runtime_spawn(&p[i], rt, cmd, NULL));
  for (int i = 0; i < 15; i++) {
    lc_exec_result res = {0};
    LC_CHECK_OK(lc_process_wait(&res, p[i], 60000));
    LC_CHECK(res.exit_status == 0);
    lc_process_free(p[i]);
  }
}

static lc_runtime *ssh_rt;
static lc_runtime *local_rt;

static void test_stream_order(void) {
  run_stream_order(ssh_rt);
  run_stream_order(local_rt);
}
static void test_big_output_no_stall(void) {
  run_big_output(ssh_rt);
  run_big_output(local_rt);
}
static void test_partial_last_line(void) {
  run_partial_line(ssh_rt);
  run_partial_line(local_rt);
}
static void test_exit_codes_and_signals(void) {
  run_exit_and_signals(ssh_rt);
  run_exit_and_signals(local_rt);
}
static void test_env_and_quoting(void) {
  run_env_and_quoting(ssh_rt);
  run_env_and_quoting(local_rt);
}
static void test_cwd(void) {
  run_cwd(ssh_rt);
  run_cwd(local_rt);
}
static void test_timeout_ends_process(void) {
  run_timeout(ssh_rt, 0);
  run_timeout(local_rt, -1);
}
static void test_spawn_stop_free(void) {
  run_spawn_stop(ssh_rt, 0);
  run_spawn_stop(local_rt, -1);
}
static void test_left_behind_ended(void) {
  run_left_behind(ssh_rt, 0);
  run_left_behind(local_rt, -1);
}
static void test_more_processes_than_max_sessions(void) {
  run_many_channels(ssh_rt);
  run_many_channels(local_rt);
}
static void test_concurrent_beyond_max_sessions(void) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/tmp/lc-barrier-%d", (int)getpid());
  run_concurrent_beyond_max_sessions(ssh_rt, dir);
  snprintf(dir, sizeof(dir), "/tmp/lc-barrier-local-%d", (int)getpid());
  run_concurrent_beyond_max_sessions(local_rt, dir);
  {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf /tmp/lc-barrier-local-%d", (int)getpid());
    if (system(cmd) != 0)
      fprintf(stderr, "  cannot remove the barrier directory\n");
  }
}

static void setup(void) {
  signal(SIGPIPE, SIG_IGN);
  if (lc_engine_new(&engine, NULL) < 0 || (ssh_rt = connect_host(0)) == NULL ||
      lc_runtime_new_local(&local_rt, engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    exit(2);
  }
}

static void teardown(void) {
  lc_runtime_free(ssh_rt);
  lc_runtime_free(local_rt);
  lc_engine_free(engine);
}

static const lc_test_case tests[] = {
    LC_TEST(test_concurrent_exec_on_8_hosts),
    LC_TEST(test_stream_order),
    LC_TEST(test_big_output_no_stall),
    LC_TEST(test_partial_last_line),
    LC_TEST(test_exit_codes_and_signals),
    LC_TEST(test_env_and_quoting),
    LC_TEST(test_cwd),
    LC_TEST(test_timeout_ends_process),
    LC_TEST(test_spawn_stop_free),
    LC_TEST(test_left_behind_ended),
    LC_TEST(test_more_processes_than_max_sessions),
    LC_TEST(test_concurrent_beyond_max_sessions),
};

int main(int argc, char **argv) {
  int r;
  setup();
  r = lc_test_run(tests, NVALUES(tests), argc, argv);
  teardown();
  return r;
}
