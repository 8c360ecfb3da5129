/*
 * test_input.c - a spawned command's stdin (lc_exec_options.input): lines written with
 * lc_process_write_line reach a `while read` worker through its lifeline's channel and come back
 * in order, byte for byte, on this machine and on an SSH host as root and as the plain users
 * whose login shells are bash, dash, zsh, fish and tcsh; lc_process_close_input gives the worker
 * EOF after everything before it; bad calls are refused with their codes; and nothing is left on
 * the host (no process, no FIFO directory in its /tmp) after a normal end, a stop, a free, and a
 * cut link (the lifeline's heartbeat ends it).
 */
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define HOST 1      /* the host of the round trips */
#define LOSS_HOST 2 /* the host whose link is cut */
#define LINES 1000
#define BIG_LINE (200 * 1024)

static lc_engine *engine;
static char local_tmp[] = "/tmp/lc-test-input-XXXXXX"; /* TMPDIR of the local runtime */

/* The worker: one "got LINE" per line read, "eof N" at EOF. TAG names it in the process list. */
#define WORKER(tag)                                                                                \
  ": " tag "; n=0; while IFS= read -r l; do n=$((n+1)); printf 'got %s\\n' \"$l\"; done; "         \
  "echo \"eof $n\""

/* stdout lines of a process, kept in order (the callback runs on the engine thread) */
typedef struct replies {
  pthread_mutex_t mu;
  char **v;
  size_t n, cap;
} replies;

static void on_line(const char *line, size_t len, lc_stream stream, void *payload) {
  replies *r = payload;
  if (stream == LC_STDERR) {
    fprintf(stderr, "  stderr: %.*s\n", (int)(len < 300 ? len : 300), line);
    return;
  }
  pthread_mutex_lock(&r->mu);
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->v = realloc(r->v, r->cap * sizeof(*r->v));
  }
  r->v[r->n] = malloc(len + 1);
  memcpy(r->v[r->n], line, len + 1);
  r->n++;
  pthread_mutex_unlock(&r->mu);
}

static void replies_init(replies *r) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->mu, NULL);
}

static void replies_free(replies *r) {
  for (size_t i = 0; i < r->n; i++)
    free(r->v[i]);
  free(r->v);
  pthread_mutex_destroy(&r->mu);
}

static size_t replies_count(replies *r) {
  size_t n;
  pthread_mutex_lock(&r->mu);
  n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits (bounded, generously) until r holds n lines; 1 when it does. */
static int wait_replies(replies *r, size_t n) {
  for (uint64_t end = now_ms() + 60000; now_ms() < end; usleep(10 * 1000))
    if (replies_count(r) >= n)
      return 1;
  return replies_count(r) >= n;
}

/* Reads one number from what cmd prints; -1 when it prints none. */
static int number_from(const char *cmd) {
  FILE *p;
  int n = -1;
  if ((p = popen(cmd, "r")) != NULL) { /* NOLINT(cert-env33-c): the testhosts script */
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

/* Files matching pattern (a glob) in host i's mount namespace. */
static int host_files(int i, const char *pattern) {
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- sh -c 'ls -d %s 2>/dev/null | wc -l'",
           th_script(), i, th_dir(), pattern);
  return number_from(cmd);
}

/* FIFO directories (lc-input.*) in host i's /tmp, or in the local runtime's TMPDIR (i < 0). */
static int fifo_dirs(int i) {
  char cmd[4096];
  if (i < 0)
    snprintf(cmd, sizeof(cmd), "ls -d %s/lc-input.* 2>/dev/null | wc -l", local_tmp);
  else
    return host_files(i, "/tmp/lc-input.*");
  return number_from(cmd);
}

/* Processes whose command line holds tag: in host i's namespace, or anywhere here (i < 0). */
static int procs(int i, const char *tag) {
  if (i < 0)
    return th_each_local_proc("cmdline", th_cmdline_matches, tag);
  return th_count_procs(i, tag);
}

/* procs(i, tag) once it is 0, or after a bounded wait (the end is confirmed asynchronously). */
static int procs_left(int i, const char *tag) {
  int n = procs(i, tag);
  for (uint64_t end = now_ms() + 60000; n != 0 && now_ms() < end; n = procs(i, tag))
    usleep(100 * 1000);
  return n;
}

static int make_runtime(lc_runtime **rt, const char *host, const lc_runtime_options *o) {
  if (host == NULL)
    return lc_runtime_new_local(rt, engine, o);
  return lc_runtime_new_ssh(rt, engine, host, o);
}

static int spawn_worker(lc_process **p, lc_runtime *rt, const char *command, const char *tag,
                        replies *r) {
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  eo.on_line = on_line;
  eo.payload = r;
  eo.label = tag;
  eo.input = 1;
  return lc_runtime_spawn(p, rt, command, &eo);
}

static int write_str(lc_process *p, const char *s) {
  return lc_process_write_line(p, s, strlen(s));
}

/* Lines that a shell would mangle if anything on the way parsed them. */
static const char *const odd[] = {
    "a\\b\\\\c\\n \\",
    "it's \"quoted\" 'too'",
    "   leading and trailing blanks   ",
    "$(touch /tmp/lc-input-pwned) `id` $HOME ${x:-y}",
    "tab\there\t",
    "",
    "s",
    "e",
    "h",
    "d",
    "-n",
    "%s %d %%",
    "semi; colon & amp | pipe > gt < lt",
    "cr\rx",
    "utf-8: \xc3\xa9\xe2\x82\xac",
};

/*
 * The round trip on host (NULL: this machine; index: the host's index for counting, -1 here):
 * odd lines, LINES numbered ones and a BIG_LINE line, written before the host has read the
 * script (the gate holds them), echoed in order; close_input then gives EOF after all of them,
 * the worker exits 0; after the end nothing is left.
 */
static void round_trip(const char *host, int index, const char *tag, const char *command) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  replies r;
  size_t nodd = sizeof(odd) / sizeof(odd[0]), total = nodd + LINES + 1, k = 0;
  char *big = malloc(BIG_LINE + 1), num[32];
  int bad = 0;

  replies_init(&r);
  LC_REQUIRE(big != NULL);
  for (size_t i = 0; i < BIG_LINE; i++)
    big[i] = (char)("ab \\'\"$\t"[i % 8]);
  big[BIG_LINE] = '\0';
  LC_REQUIRE_OK(make_runtime(&rt, host, &o));
  LC_REQUIRE_OK(spawn_worker(&p, rt, command, tag, &r));
  for (size_t i = 0; i < nodd; i++)
    LC_CHECK_OK(write_str(p, odd[i]));
  LC_REQUIRE(wait_replies(&r, 1));
  /* it runs: the FIFO's directory went before it started */
  LC_CHECK(fifo_dirs(index) == 0);
  LC_CHECK(procs(index, tag) > 0);
  for (int i = 0; i < LINES; i++) {
    snprintf(num, sizeof(num), "line %d", i);
    LC_CHECK_OK(write_str(p, num));
  }
  LC_CHECK_OK(lc_process_write_line(p, big, BIG_LINE));
  LC_CHECK_OK(lc_process_close_input(p));
  LC_CHECK(lc_process_write_line(p, "late", 4) == -EPIPE);
  LC_CHECK_OK(lc_process_close_input(p)); /* once closed, closing again changes nothing */
  LC_CHECK_OK(lc_process_wait(&res, p, 120000));
  LC_CHECK(res.exit_status == 0 && res.signal == 0);
  LC_CHECK(lc_process_write_line(p, "after", 5) == -EPIPE);
  /* every line back, in order, then EOF after the last one */
  LC_CHECK(r.n == total + 1);
  for (size_t i = 0; i < nodd && k < r.n; i++, k++) {
    char want[256];
    snprintf(want, sizeof(want), "got %s", odd[i]);
    LC_CHECK_STR(r.v[k], want);
  }
  for (int i = 0; i < LINES && k < r.n; i++, k++) {
    snprintf(num, sizeof(num), "got line %d", i);
    bad += strcmp(r.v[k], num) != 0;
  }
  LC_CHECK(bad == 0);
  if (k < r.n) {
    LC_CHECK(strlen(r.v[k]) == BIG_LINE + 4 && strncmp(r.v[k], "got ", 4) == 0 &&
             memcmp(r.v[k] + 4, big, BIG_LINE) == 0);
    k++;
  }
  if (k < r.n) {
    snprintf(num, sizeof(num), "eof %zu", total);
    LC_CHECK_STR(r.v[k], num);
  }
  lc_process_free(p);
  LC_CHECK(procs_left(index, tag) == 0);
  LC_CHECK(fifo_dirs(index) == 0);
  if (index >= 0) /* nothing of the odd lines ran */
    LC_CHECK(host_files(index, "/tmp/lc-input-pwned") == 0);
  lc_runtime_free(rt);
  replies_free(&r);
  free(big);
}

static void test_local(void) { round_trip(NULL, -1, "input-local", WORKER("input-local")); }
static void test_root(void) { round_trip("lab1", HOST, "input-root", WORKER("input-root")); }
static void test_lcbash(void) {
  round_trip("lcbash@lab1", HOST, "input-bash", WORKER("input-bash"));
}
static void test_lcsh(void) { round_trip("lcsh@lab1", HOST, "input-dash", WORKER("input-dash")); }
static void test_lczsh(void) { round_trip("lczsh@lab1", HOST, "input-zsh", WORKER("input-zsh")); }
static void test_lcfish(void) {
  round_trip("lcfish@lab1", HOST, "input-fish", WORKER("input-fish"));
}
static void test_lctcsh(void) {
  round_trip("lctcsh@lab1", HOST, "input-tcsh", WORKER("input-tcsh"));
}

/* Bad calls, here and on a host: no input, a newline or a NUL in the line, after close, after
 * the end. */
static void bad_calls(const char *host) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL, *q = NULL;
  lc_exec_options plain = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res;
  replies r;
  replies_init(&r);
  LC_REQUIRE_OK(make_runtime(&rt, host, &o));
  LC_CHECK(lc_process_write_line(NULL, "x", 1) == -EINVAL);
  LC_CHECK(lc_process_close_input(NULL) == -EINVAL);
  /* without input */
  LC_REQUIRE_OK(lc_runtime_spawn(&p, rt, "exec sleep 4411", &plain));
  LC_CHECK(write_str(p, "x") == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "no input");
  LC_CHECK(lc_process_close_input(p) == -EINVAL);
  lc_process_free(p);
  /* a worker that reads one line and ends */
  LC_REQUIRE_OK(spawn_worker(&q, rt, "IFS= read -r l; echo \"one $l\"", "input-bad", &r));
  LC_CHECK(write_str(q, "a\nb") == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "newline");
  LC_CHECK(lc_process_write_line(q, "a\0b", 3) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "NUL");
  LC_CHECK(lc_process_write_line(q, NULL, 1) == -EINVAL);
  LC_CHECK_OK(write_str(q, "first"));
  LC_CHECK_OK(lc_process_wait(&res, q, 60000));
  LC_CHECK(res.exit_status == 0);
  LC_CHECK(r.n == 1 && strcmp(r.v[0], "one first") == 0);
  LC_CHECK(write_str(q, "second") == LC_ECLOSED);
  LC_CHECK_CONTAINS(lc_error_last(), host != NULL ? host : "localhost");
  LC_CHECK(lc_process_close_input(q) == LC_ECLOSED);
  lc_process_free(q);
  LC_CHECK(procs_left(host != NULL ? HOST : -1, "input-bad") == 0);
  LC_CHECK(fifo_dirs(host != NULL ? HOST : -1) == 0);
  lc_runtime_free(rt);
  replies_free(&r);
}

static void test_bad_calls(void) {
  bad_calls(NULL);
  bad_calls("lab1");
}

/* A worker that answered a line is stopped, or freed without a stop: its lifeline ends it, and
 * neither it nor its FIFO's directory stays. */
static void ended(const char *host, int index, int stop) {
  const char *tag = stop ? "input-stop" : "input-free";
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lc_exec_result res;
  replies r;
  replies_init(&r);
  LC_REQUIRE_OK(make_runtime(&rt, host, &o));
  LC_REQUIRE_OK(spawn_worker(&p, rt, stop ? WORKER("input-stop") : WORKER("input-free"), tag, &r));
  LC_CHECK_OK(write_str(p, "ping"));
  LC_REQUIRE(wait_replies(&r, 1));
  LC_CHECK_STR(r.v[0], "got ping");
  LC_CHECK(procs(index, tag) > 0);
  if (stop) {
    LC_CHECK_OK(lc_process_stop(p));
    LC_CHECK_OK(lc_process_wait(&res, p, 60000));
    LC_CHECK(res.signal == SIGTERM);
    LC_CHECK(write_str(p, "after") == LC_ECLOSED);
  }
  lc_process_free(p);
  LC_CHECK(procs_left(index, tag) == 0);
  LC_CHECK(fifo_dirs(index) == 0);
  lc_runtime_free(rt);
  replies_free(&r);
}

static void test_stop_and_free(void) {
  ended(NULL, -1, 1);
  ended(NULL, -1, 0);
  ended("lab1", HOST, 1);
  ended("lab1", HOST, 0);
  ended("lcfish@lab1", HOST, 1);
}

/* The host's link is cut while a worker waits for its next line: the lifeline's heartbeat ends
 * it; writing fails once the runtime knows the host is lost; after link-up nothing is there. */
static void test_link_cut(void) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  replies r;
  int left = -1, wr = 0;
  replies_init(&r);
  o.heartbeat_timeout_ms = 3000;
  o.kill_grace_ms = 1000;
  o.keepalive_timeout_ms = 3000;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab2", &o));
  LC_REQUIRE_OK(spawn_worker(&p, rt, WORKER("input-cut"), "input-cut", &r));
  LC_CHECK_OK(write_str(p, "before"));
  LC_REQUIRE(wait_replies(&r, 1));
  LC_CHECK(procs(LOSS_HOST, "input-cut") > 0);
  LC_REQUIRE(th_run("link-down %d", LOSS_HOST) == 0);
  left = procs_left(LOSS_HOST, "input-cut");
  for (uint64_t end = now_ms() + 60000; now_ms() < end; usleep(100 * 1000))
    if ((wr = write_str(p, "lost?")) == LC_ECLOSED)
      break;
  th_run("link-up %d", LOSS_HOST);
  LC_CHECK(left == 0);
  LC_CHECK(wr == LC_ECLOSED);
  LC_CHECK(fifo_dirs(LOSS_HOST) == 0);
  LC_CHECK(r.n == 1);
  lc_process_free(p);
  lc_runtime_free(rt);
  LC_CHECK(procs(LOSS_HOST, "input-cut") == 0);
  replies_free(&r);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_local),    LC_TEST(test_root),      LC_TEST(test_lcbash),
      LC_TEST(test_lcsh),     LC_TEST(test_lczsh),     LC_TEST(test_lcfish),
      LC_TEST(test_lctcsh),   LC_TEST(test_bad_calls), LC_TEST(test_stop_and_free),
      LC_TEST(test_link_cut),
  };
  int r;
  signal(SIGPIPE, SIG_IGN);
  th_dir();
  if (mkdtemp(local_tmp) == NULL || setenv("TMPDIR", local_tmp, 1) != 0 ||
      lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  rmdir(local_tmp);
  return r;
}
