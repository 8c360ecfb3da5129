/*
 * test_input.c - a spawned command's stdin (lc_exec_options.input): lines written with
 * lc_process_write_line reach a `while read` worker through its lifeline's channel and come back
 * in order, byte for byte, on this machine and on an SSH host as root and as the plain users
 * whose login shells are bash, dash, zsh, fish and tcsh; lc_process_close_input gives the worker
 * EOF after everything before it; bad calls are refused with their codes; and nothing is left on
 * the host (no process, no FIFO directory in its /tmp) after a normal end, a stop, a free, and a
 * cut link (the lifeline's heartbeat ends it). The engine-thread calls (lc__proc_input_line, as
 * the job queue uses them) work from inside output callbacks, across processes, connections and
 * backends.
 */
#include "lc_test.h"
#include "runtime_internal.h"
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
    if (res.signal != SIGTERM)
      fprintf(stderr, "  %s: stopped worker: exit %d, signal %d\n", host ? host : "localhost",
              res.exit_status, res.signal);
    LC_CHECK(res.signal == SIGTERM); /* a stop, not an EOF it answered by exiting */
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

/*
 * The engine-thread calls from inside line callbacks, as a job queue sends the next job when a
 * result arrives: a ring of workers (two on lab1's one connection, one on lab3, one here), each
 * answer making the next line for the next worker, RING_LINES in all, then every input closed
 * from a callback. Each worker gets its lines in order, and all end with status 0.
 */
#define RING 4
#define RING_LINES 400

typedef struct ring_worker {
  lc_process *p;
  replies r;
  int index;
} ring_worker;

static ring_worker ring[RING];
static int ring_errors; /* engine thread only, read after every worker ended */

static void ring_line(const char *line, size_t len, lc_stream stream, void *payload) {
  ring_worker *w = payload;
  long n;
  char next[32];
  on_line(line, len, stream, &w->r);
  if (stream != LC_STDOUT || strncmp(line, "got ", 4) != 0)
    return;
  n = strtol(line + 4, NULL, 10) + 1;
  if (n < RING_LINES) {
    lc__err err = {0};
    snprintf(next, sizeof(next), "%ld", n);
    ring_errors += lc__proc_input_line(ring[n % RING].p, next, strlen(next), &err) != 0;
  } else {
    for (int i = 0; i < RING; i++) {
      lc__err err = {0};
      ring_errors += lc__proc_input_close(ring[i].p, &err) != 0;
    }
  }
}

static void test_engine_thread_calls(void) {
  static const char *const hosts[RING] = {"lab1", "lab1", "lab3", NULL};
  lc_runtime_options o = th_options();
  lc_runtime *rt[3] = {NULL, NULL, NULL};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt[0], engine, "lab1", &o));
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt[1], engine, "lab3", &o));
  LC_REQUIRE_OK(lc_runtime_new_local(&rt[2], engine, &o));
  eo.on_line = ring_line;
  eo.label = "input-ring";
  eo.input = 1;
  for (int i = 0; i < RING; i++) {
    replies_init(&ring[i].r);
    ring[i].index = i;
    eo.payload = &ring[i];
    LC_REQUIRE_OK(lc_runtime_spawn(&ring[i].p, rt[i < 2 ? 0 : i - 1], WORKER("input-ring"), &eo));
  }
  LC_CHECK_OK(write_str(ring[0].p, "0"));
  for (int i = 0; i < RING; i++) {
    int bad = 0, k = 0;
    char want[32];
    res.exit_status = -1;
    LC_CHECK_OK(lc_process_wait(&res, ring[i].p, 120000));
    LC_CHECK(res.exit_status == 0);
    for (int n = i; n < RING_LINES; n += RING, k++) {
      snprintf(want, sizeof(want), "got %d", n);
      bad += k >= (int)ring[i].r.n || strcmp(ring[i].r.v[k], want) != 0;
    }
    snprintf(want, sizeof(want), "eof %d", k);
    LC_CHECK(bad == 0);
    LC_CHECK(ring[i].r.n == (size_t)k + 1);
    if (ring[i].r.n == (size_t)k + 1)
      LC_CHECK_STR(ring[i].r.v[k], want);
    fprintf(stderr, "  worker %d on %s: %zu lines back\n", i, hosts[i] ? hosts[i] : "localhost",
            ring[i].r.n);
    lc_process_free(ring[i].p);
    replies_free(&ring[i].r);
  }
  LC_CHECK(ring_errors == 0);
  for (int i = 0; i < 3; i++)
    lc_runtime_free(rt[i]);
  LC_CHECK(procs_left(HOST, "input-ring") == 0);
  LC_CHECK(procs_left(3, "input-ring") == 0);
  LC_CHECK(procs_left(-1, "input-ring") == 0);
}

/*
 * The same from a worker's own callback, as a pool gives a worker its next job when it answered
 * the last: each answer ("got N", then "more N" on stdout and "log N" on stderr, so that more of
 * its output waits while the callback runs) makes its next line, SELF_LINES in all; every line
 * comes back once and in order, here and on lab1.
 */
#define SELF_LINES 300

typedef struct self_worker {
  lc_process *p;
  replies r;
  int logs, errors;
} self_worker;

static void self_line(const char *line, size_t len, lc_stream stream, void *payload) {
  self_worker *w = payload;
  lc__err err = {0};
  char next[32];
  long n;
  if (stream == LC_STDERR) {
    w->logs += strncmp(line, "log ", 4) == 0;
    return;
  }
  on_line(line, len, stream, &w->r);
  if (strncmp(line, "got ", 4) != 0)
    return;
  n = strtol(line + 4, NULL, 10) + 1;
  snprintf(next, sizeof(next), "%ld", n);
  if (n < SELF_LINES)
    w->errors += lc__proc_input_line(w->p, next, strlen(next), &err) != 0;
  else
    w->errors += lc__proc_input_close(w->p, &err) != 0;
}

static void self_feed(const char *host, int index) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res = {.exit_status = -1};
  self_worker w = {0};
  char want[32];
  int bad = 0;
  replies_init(&w.r);
  eo.on_line = self_line;
  eo.payload = &w;
  eo.label = "input-self";
  eo.input = 1;
  LC_REQUIRE_OK(make_runtime(&rt, host, &o));
  LC_REQUIRE_OK(lc_runtime_spawn(&w.p, rt,
                                 ": input-self; while IFS= read -r l; do "
                                 "printf 'got %s\\nmore %s\\n' \"$l\" \"$l\"; "
                                 "echo \"log $l\" >&2; done; echo eof",
                                 &eo));
  LC_CHECK_OK(write_str(w.p, "0"));
  LC_CHECK_OK(lc_process_wait(&res, w.p, 120000));
  LC_CHECK(res.exit_status == 0);
  LC_CHECK(w.r.n == 2 * SELF_LINES + 1);
  for (int n = 0; n < SELF_LINES && (size_t)(2 * n + 1) < w.r.n; n++) {
    snprintf(want, sizeof(want), "got %d", n);
    bad += strcmp(w.r.v[2 * n], want) != 0;
    snprintf(want, sizeof(want), "more %d", n);
    bad += strcmp(w.r.v[2 * n + 1], want) != 0;
  }
  LC_CHECK(bad == 0);
  LC_CHECK(w.logs == SELF_LINES);
  LC_CHECK(w.errors == 0);
  lc_process_free(w.p);
  lc_runtime_free(rt);
  LC_CHECK(procs_left(index, "input-self") == 0);
  replies_free(&w.r);
}

static void test_engine_thread_self(void) {
  self_feed("lab1", HOST);
  self_feed(NULL, -1);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_local),
      LC_TEST(test_root),
      LC_TEST(test_lcbash),
      LC_TEST(test_lcsh),
      LC_TEST(test_lczsh),
      LC_TEST(test_lcfish),
      LC_TEST(test_lctcsh),
      LC_TEST(test_bad_calls),
      LC_TEST(test_stop_and_free),
      LC_TEST(test_link_cut),
      LC_TEST(test_engine_thread_calls),
      LC_TEST(test_engine_thread_self),
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
