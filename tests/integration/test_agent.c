/*
 * test_agent.c - a host's processes through its agent (runtimes/ssh/agent.c): one process there
 * that starts and watches them over one channel, once the runtime has a working directory.
 *
 * - the same commands give the same exit status, signal, stdout and stderr lines through the
 *   agent as through a channel each, for root with bash and for plain users whose login shells
 *   are fish and tcsh; one lc-agent runs on the host meanwhile and none after the runtime's free;
 * - 30 processes at once through a host whose sshd allows 2 session channels per connection
 *   (MaxSessions 2: 30 channels would need 15 connections) open 2 session channels in all (sshd's
 *   own log counts them), where the same without a working directory opens 30 or more;
 * - stdin: 1 MB of input lines (eight times the agent's window) arrive whole while another
 *   command never reads the 1 MB fed to it (the agent holds at most its window for that one and
 *   never waits on it); 2,000,000 lines of output arrive whole while another process's lines
 *   come through;
 * - the agent killed (SIGKILL): its processes end on the host (their lifelines read EOF), each
 *   reports an error that names the agent, and the next process starts through a new agent;
 * - an idle agent (nothing to run, nothing heard for the heartbeat limit) ends by itself, and the
 *   next process starts a new one;
 * - the lifeline's 3.9 KB head reaches the agent once: 20 commands cost it under 2,000 bytes each;
 * - a login whose soft descriptor limit is 64: 40 processes at once through its agent (which
 *   runs with the hard limit), each with the login's 64;
 * - a host without perl (hidden by a bind mount in its mount namespace): every process still
 *   runs, through a channel each, and no lc-agent is left.
 */
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

static char remove_extra_host[8400];

/* ---- helpers ---- */

typedef struct lines {
  char **v;
  size_t n, cap;
} lines;

static void lines_add(lines *l, const char *s, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->v = realloc(l->v, l->cap * sizeof(*l->v));
  }
  l->v[l->n] = malloc(len + 1);
  memcpy(l->v[l->n], s, len);
  l->v[l->n][len] = '\0';
  l->n++;
}

static void lines_free(lines *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof(*l));
}

typedef struct output {
  lines out, err;
  unsigned long count; /* stdout lines, when not kept */
  int keep;
} output;

static void on_line(const char *line, size_t len, lc_stream stream, void *payload) {
  output *o = payload;
  if (stream == LC_STDOUT && !o->keep) {
    o->count++;
    return;
  }
  lines_add(stream == LC_STDOUT ? &o->out : &o->err, line, len);
}

static void output_free(output *o) {
  lines_free(&o->out);
  lines_free(&o->err);
}

static lc_runtime *connect_to(lc_engine *engine, const char *host, const lc_runtime_options *o) {
  lc_runtime *rt = NULL;
  if (lc_runtime_new_ssh(&rt, engine, host, o) < 0)
    fprintf(stderr, "  cannot connect to %s: %s\n", host, lc_error_last());
  return rt;
}

/* A runtime that runs its processes through its agent: one with a working directory. */
static lc_runtime *agent_runtime(lc_engine *engine, const char *host, const lc_runtime_options *o) {
  lc_runtime *rt = connect_to(engine, host, o);
  const char *dir = NULL;
  if (rt != NULL && lc_runtime_workdir(&dir, rt) < 0) {
    fprintf(stderr, "  %s: no working directory: %s\n", host, lc_error_last());
    lc_runtime_free(rt);
    return NULL;
  }
  return rt;
}

/* lc-agent processes on host i, waiting up to ms for the count to become want (-1: any). */
static int agents_on(int i, int want, int ms) {
  int n = th_count_procs(i, "^lc-agent");
  for (int t = 0; t < ms / 100 && want >= 0 && n != want; t++) {
    usleep(100 * 1000);
    n = th_count_procs(i, "^lc-agent");
  }
  return n;
}

static int count_until(int i, const char *pattern, int want, int ms) {
  int n = th_count_procs(i, pattern);
  for (int t = 0; t < ms / 100 && n != want; t++) {
    usleep(100 * 1000);
    n = th_count_procs(i, pattern);
  }
  return n;
}

static int host_sh(int i, const char *dir, const char *text) {
  char cmd[8400];
  int st;
  snprintf(cmd, sizeof(cmd), "%s exec %d --dir %s -- sh -c '%s'", th_script(), i, dir, text);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- the same results both ways ---- */

static const char *const parity_cmds[] = {
    "echo out; echo err >&2; exit 3",
    "printf 'no newline'",
    "kill -TERM $$",
    "echo \"$HOME\" \"$(id -un)\"; pwd; umask",
    "head -c 300000 /dev/zero | tr '\\0' x; echo; echo second",
    "exec 1>&-; sleep 0.2; echo late >&2",
    "for i in 1 2 3; do echo o$i; echo e$i >&2; done; exit 0",
    "exec /nonexistent/command",
};

static int same_lines(const lines *a, const lines *b) {
  if (a->n != b->n)
    return 0;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->v[i], b->v[i]) != 0)
      return 0;
  return 1;
}

static void parity_on(lc_engine *engine, const char *host, int index) {
  lc_runtime_options o = th_options();
  lc_runtime *plain = connect_to(engine, host, &o), *agent = agent_runtime(engine, host, &o);
  LC_CHECK(plain != NULL && agent != NULL);
  if (plain == NULL || agent == NULL)
    goto out;
  LC_CHECK(agents_on(index, 1, 5000) == 1);
  for (size_t c = 0; c < sizeof(parity_cmds) / sizeof(parity_cmds[0]); c++) {
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    lc_exec_result ra = {0}, rb = {0};
    output a = {.keep = 1}, b = {.keep = 1};
    int xa, xb;
    eo.on_line = on_line;
    eo.payload = &a;
    xa = lc_runtime_exec(&ra, plain, parity_cmds[c], &eo);
    eo.payload = &b;
    xb = lc_runtime_exec(&rb, agent, parity_cmds[c], &eo);
    fprintf(stderr,
            "  %s: [%s] channel: exit %d signal %d, %zu+%zu lines; agent: exit %d "
            "signal %d, %zu+%zu lines\n",
            host, parity_cmds[c], ra.exit_status, ra.signal, a.out.n, a.err.n, rb.exit_status,
            rb.signal, b.out.n, b.err.n);
    LC_CHECK(xa == 0 && xb == 0);
    LC_CHECK(ra.exit_status == rb.exit_status && ra.signal == rb.signal);
    LC_CHECK(same_lines(&a.out, &b.out));
    LC_CHECK(same_lines(&a.err, &b.err));
    output_free(&a);
    output_free(&b);
  }
out:
  lc_runtime_free(plain);
  lc_runtime_free(agent);
  LC_CHECK(agents_on(index, 0, 5000) == 0);
}

static void test_parity(void) {
  lc_engine *engine = NULL;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  parity_on(engine, "lab1", 1);
  parity_on(engine, "lcfish@lab2", 2);
  parity_on(engine, "lctcsh@lab3", 3);
  lc_engine_free(engine);
}

/* ---- session channels on a host with MaxSessions 2 ---- */

#define MANY 30

/* MANY processes at once on rt, each saying its number once it has all of them started: the
 * sessions that sshd's log counted meanwhile. */
static int run_many(lc_runtime *rt, const char *log) {
  lc_process *p[MANY] = {0};
  output o[MANY];
  int before = th_lines_with(log, "ctype session"), ok = 0;
  for (int i = 0; i < MANY; i++) {
    lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
    char cmd[128];
    memset(&o[i], 0, sizeof(o[i]));
    o[i].keep = 1;
    eo.on_line = on_line;
    eo.payload = &o[i];
    /* each waits until all MANY are up (their marker files), so they run at once */
    snprintf(cmd, sizeof(cmd),
             "touch /tmp/lc-many.%d; while [ $(ls /tmp/lc-many.* | wc -l) -lt %d ]; do sleep "
             "0.1; done; echo n%d",
             i, MANY, i);
    LC_CHECK_OK(lc_runtime_spawn(&p[i], rt, cmd, &eo));
  }
  for (int i = 0; i < MANY; i++) {
    lc_exec_result r = {0};
    if (p[i] == NULL)
      continue;
    if (lc_process_wait(&r, p[i], 60000) == 0 && r.exit_status == 0 && o[i].out.n == 1) {
      char want[16];
      snprintf(want, sizeof(want), "n%d", i);
      ok += strcmp(o[i].out.v[0], want) == 0;
    } else {
      fprintf(stderr, "  process %d: %s\n", i, lc_error_last());
    }
    lc_process_free(p[i]);
    output_free(&o[i]);
  }
  LC_CHECK(ok == MANY);
  return th_lines_with(log, "ctype session") - before;
}

static void test_sessions(void) {
  char dir[4096], cmd[8400], config[4200], log[4200];
  lc_engine *engine = NULL;
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  lc_runtime *rt;
  int n;
  snprintf(dir, sizeof(dir), "%s-agent", th_dir());
  snprintf(cmd, sizeof(cmd),
           "%s up 1 --dir %s --sshd-option 'LogLevel DEBUG1' --sshd-option 'MaxSessions 2' "
           ">/dev/null",
           th_script(), dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  LC_REQUIRE(system(cmd) == 0); /* NOLINT(cert-env33-c): the testhosts script */
  snprintf(config, sizeof(config), "%s/ssh_config", dir);
  snprintf(log, sizeof(log), "%s/hosts/0/sshd.log", dir);
  o.ssh_config = config;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  /* through the agent: its channel, and the working directory's making (before the agent) */
  LC_CHECK(host_sh(0, dir, "rm -f /tmp/lc-many.*") == 0);
  if ((rt = agent_runtime(engine, "lab0", &o)) != NULL) {
    n = run_many(rt, log);
    fprintf(stderr, "  %d processes through the agent: %d session channels\n", MANY, n);
    LC_CHECK(n >= 0 && n <= 2);
    lc_runtime_free(rt);
  }
  /* a channel each */
  LC_CHECK(host_sh(0, dir, "rm -f /tmp/lc-many.*") == 0);
  if ((rt = connect_to(engine, "lab0", &o)) != NULL) {
    n = run_many(rt, log);
    fprintf(stderr, "  %d processes, a channel each: %d session channels\n", MANY, n);
    LC_CHECK(n >= MANY);
    lc_runtime_free(rt);
  }
  LC_CHECK(host_sh(0, dir, "rm -f /tmp/lc-many.*") == 0);
  lc_engine_free(engine);
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
}

/* ---- stdin and output ---- */

static void test_streams(void) {
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_process *cat = NULL, *deaf = NULL, *flood = NULL, *quick = NULL;
  output oc = {.keep = 1}, od = {.keep = 1}, of = {0}, oq = {.keep = 1};
  lc_exec_result r = {0};
  char line[64];
  o.keepalive_timeout_ms = 3000; /* the heartbeat limit 6 s: the deaf one's end */
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = agent_runtime(engine, "lab4", &o)) != NULL);
  /* a command that never reads its stdin, fed more than the agent's window */
  eo.input = 1;
  eo.on_line = on_line;
  eo.payload = &od;
  LC_CHECK_OK(lc_runtime_spawn(&deaf, rt, "sleep 4421; echo deaf", &eo));
  for (int i = 0; i < 20000 && deaf != NULL; i++) {
    snprintf(line, sizeof(line), "%045d", i);
    LC_CHECK_OK(lc_process_write_line(deaf, line, strlen(line)));
  }
  /* 1 MB of lines into one that reads them */
  eo.payload = &oc;
  LC_CHECK_OK(lc_runtime_spawn(&cat, rt, "wc -lc", &eo));
  for (int i = 0; i < 20000 && cat != NULL; i++) {
    snprintf(line, sizeof(line), "%045d", i);
    LC_CHECK_OK(lc_process_write_line(cat, line, strlen(line)));
  }
  if (cat != NULL)
    LC_CHECK_OK(lc_process_close_input(cat));
  /* 2,000,000 lines out of one, a few lines out of another meanwhile */
  eo.input = 0;
  eo.payload = &of;
  LC_CHECK_OK(lc_runtime_spawn(&flood, rt, "yes 0123456789 | head -n 2000000", &eo));
  eo.payload = &oq;
  LC_CHECK_OK(lc_runtime_spawn(&quick, rt, "echo one; sleep 0.5; echo two", &eo));
  if (quick != NULL) {
    LC_CHECK_OK(lc_process_wait(&r, quick, 60000));
    LC_CHECK(r.exit_status == 0 && oq.out.n == 2);
  }
  if (cat != NULL) {
    LC_CHECK_OK(lc_process_wait(&r, cat, 60000));
    LC_CHECK(r.exit_status == 0 && oc.out.n == 1);
    if (oc.out.n == 1) {
      fprintf(stderr, "  wc -lc: %s\n", oc.out.v[0]);
      LC_CHECK(strstr(oc.out.v[0], "20000") != NULL && strstr(oc.out.v[0], "920000") != NULL);
    }
  }
  if (flood != NULL) {
    LC_CHECK_OK(lc_process_wait(&r, flood, 120000));
    fprintf(stderr, "  flood: %lu lines\n", of.count);
    LC_CHECK(r.exit_status == 0 && of.count == 2000000ul);
  }
  /* the deaf one: its lifeline's reader waits on the full FIFO, its heartbeats with it, so its
   * watchdog ends it after the heartbeat limit (command.c); a stop waits behind the lines too */
  if (deaf != NULL) {
    lc_process_stop(deaf);
    LC_CHECK(lc_process_wait(&r, deaf, 60000) != -ETIMEDOUT);
  }
  LC_CHECK(count_until(4, "sleep 4421", 0, 10000) == 0);
  lc_process_free(deaf);
  lc_process_free(cat);
  lc_process_free(flood);
  lc_process_free(quick);
  output_free(&oc);
  output_free(&od);
  output_free(&of);
  output_free(&oq);
  lc_runtime_free(rt);
  LC_CHECK(agents_on(4, 0, 5000) == 0);
  lc_engine_free(engine);
}

/* ---- the agent killed ---- */

static void test_agent_killed(void) {
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_process *p[3] = {0};
  lc_exec_result r = {0};
  output out = {.keep = 1};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = agent_runtime(engine, "lab5", &o)) != NULL);
  LC_CHECK_OK(lc_runtime_spawn(&p[0], rt, "sleep 4431", NULL));
  LC_CHECK_OK(lc_runtime_spawn(&p[1], rt, "sh -c 'sleep 4432 & sleep 4433'", NULL));
  LC_CHECK_OK(lc_runtime_spawn(&p[2], rt, "trap '' TERM; sleep 4434 & wait", NULL));
  LC_CHECK(count_until(5, "^sleep 443", 4, 10000) == 4);
  LC_CHECK(agents_on(5, 1, 5000) == 1);
  LC_CHECK(th_kill_procs(5, "lc-agent", SIGKILL) == 1);
  for (int i = 0; i < 3; i++) {
    if (p[i] == NULL)
      continue;
    LC_CHECK(lc_process_wait(&r, p[i], 30000) < 0);
    fprintf(stderr, "  after the kill: %s\n", lc_error_last());
    LC_CHECK_CONTAINS(lc_error_last(), "agent");
    LC_CHECK_CONTAINS(lc_error_last(), "lab5");
    lc_process_free(p[i]);
  }
  /* their lifelines read EOF: everything ends, the one that ignores SIGTERM after the grace */
  LC_CHECK(count_until(5, "sleep 443", 0, 20000) == 0);
  /* the next one starts a new agent */
  eo.on_line = on_line;
  eo.payload = &out;
  LC_CHECK_OK(lc_runtime_exec(&r, rt, "echo again", &eo));
  LC_CHECK(r.exit_status == 0 && out.out.n == 1);
  LC_CHECK(agents_on(5, 1, 5000) == 1);
  output_free(&out);
  lc_runtime_free(rt);
  LC_CHECK(agents_on(5, 0, 5000) == 0);
  lc_engine_free(engine);
}

/* ---- an idle agent ends by itself ---- */

static void test_idle_agent(void) {
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_exec_result r = {0};
  output out = {.keep = 1};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  o.heartbeat_timeout_ms = 2000;
  o.keepalive_timeout_ms = 1000;
  o.keep_workdir = 1; /* no keeper: the agent has nothing to run once the directory is made */
  eo.on_line = on_line;
  eo.payload = &out;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = agent_runtime(engine, "lab6", &o)) != NULL);
  LC_CHECK_OK(lc_runtime_exec(&r, rt, "echo first", &eo));
  LC_CHECK(agents_on(6, 1, 0) == 1);
  /* the limit (2 s, counted in whole seconds) and a loop's turn */
  LC_CHECK(agents_on(6, 0, 8000) == 0);
  for (int i = 0; i < 3; i++) { /* each starts a new one (or finds it still there) */
    LC_CHECK_OK(lc_runtime_exec(&r, rt, "echo again", &eo));
    LC_CHECK(r.exit_status == 0);
    usleep(1000 * 1000 * (unsigned)i);
  }
  LC_CHECK(out.out.n == 4);
  output_free(&out);
  lc_runtime_free(rt);
  LC_CHECK(agents_on(6, 0, 5000) == 0);
  lc_engine_free(engine);
}

/* ---- the lifeline's head, once per agent ---- */

/* What the sshd session that runs the agent (its parent) read: the connection's bytes (all of it
 * the agent's channel here, and its keepalives) and the agent's output: rchar of /proc/PID/io,
 * which would also count the agent's own reaped children (the commands and what they read). */
static int agent_sshd_rchar(long pid, const char *cmdline, const void *arg) {
  long long *rchar = (long long *)arg;
  char path[64], line[512];
  long ppid = 0;
  FILE *f;
  if (strncmp(cmdline, "lc-agent", 8) != 0)
    return 0;
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  if ((f = fopen(path, "r")) == NULL)
    return 0;
  if (fgets(line, sizeof(line), f) != NULL && strrchr(line, ')') != NULL)
    sscanf(strrchr(line, ')') + 2, "%*c %ld", &ppid);
  fclose(f);
  snprintf(path, sizeof(path), "/proc/%ld/io", ppid);
  if (ppid <= 1 || (f = fopen(path, "r")) == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "rchar: ", 7) == 0)
      *rchar = strtoll(line + 7, NULL, 10);
  fclose(f);
  return 1;
}

/* Every process under a lifeline begins its script with the lifeline itself (3.9 KB, the same
 * for all): through the agent it crosses once, not once per process. What the agent's sshd reads
 * while 20 commands run one after another: their own lines and scripts, under 2,000 bytes each. */
static void test_head_once(void) {
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  long long before = -1, after = -1;
  int ran = 0;
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  LC_REQUIRE((rt = agent_runtime(engine, "lab3", &o)) != NULL);
  LC_REQUIRE(th_each_proc(3, "cmdline", agent_sshd_rchar, &before) == 1);
  for (int i = 0; i < 20; i++) {
    lc_exec_result r = {0};
    ran += lc_runtime_exec(&r, rt, "echo \"$0\" >/dev/null", &eo) == 0 && r.exit_status == 0;
  }
  LC_CHECK(ran == 20);
  LC_REQUIRE(th_each_proc(3, "cmdline", agent_sshd_rchar, &after) == 1);
  fprintf(stderr, "  lab3: the agent's sshd read %lld bytes for 20 commands\n", after - before);
  LC_CHECK(after - before > 20 * 100 && after - before < 20 * 2000);
  lc_runtime_free(rt);
  LC_CHECK(agents_on(3, 0, 5000) == 0);
  lc_engine_free(engine);
}

/* ---- the login's descriptor limit ---- */

/* A login whose soft descriptor limit is 64 (its ~/.bashrc says so): 40 processes at once through
 * the agent (120 pipe ends there: it runs with the hard limit), and each of them has the login's
 * limit of 64, as a channel of its own would give it. */
static void test_nofile(void) {
  char path[4096];
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_process *p[40] = {0};
  output out[40];
  FILE *f;
  int ok = 0;
  snprintf(path, sizeof(path), "%s/hosts/6/users/lcbash/.bashrc", th_dir());
  LC_REQUIRE(access(path, F_OK) != 0); /* none there: the file is this test's */
  LC_REQUIRE((f = fopen(path, "w")) != NULL);
  fputs("ulimit -Sn 64\n", f);
  fclose(f);
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  if ((rt = agent_runtime(engine, "lcbash@lab6", &o)) != NULL) {
    for (int i = 0; i < 40; i++) {
      lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
      memset(&out[i], 0, sizeof(out[i]));
      out[i].keep = 1;
      eo.on_line = on_line;
      eo.payload = &out[i];
      LC_CHECK_OK(lc_runtime_spawn(&p[i], rt, "ulimit -n; sleep 4451", &eo));
    }
    LC_CHECK(count_until(6, "^sleep 4451", 40, 20000) == 40);
    for (int i = 0; i < 40; i++)
      if (p[i] != NULL)
        lc_process_stop(p[i]);
    for (int i = 0; i < 40; i++) {
      lc_exec_result r = {0};
      if (p[i] == NULL)
        continue;
      LC_CHECK_OK(lc_process_wait(&r, p[i], 30000));
      ok += out[i].out.n == 1 && strcmp(out[i].out.v[0], "64") == 0;
      lc_process_free(p[i]);
      output_free(&out[i]);
    }
    fprintf(stderr, "  %d of 40 ran at once and saw the limit of 64\n", ok);
    LC_CHECK(ok == 40);
    LC_CHECK(count_until(6, "sleep 4451", 0, 10000) == 0);
    lc_runtime_free(rt);
  }
  LC_CHECK(unlink(path) == 0);
  lc_engine_free(engine);
}

/* ---- no perl ---- */

static void test_no_perl(void) {
  lc_engine *engine = NULL;
  lc_runtime_options o = th_options();
  lc_runtime *rt;
  lc_process *p = NULL;
  lc_exec_result r = {0};
  output out = {.keep = 1};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  eo.on_line = on_line;
  eo.payload = &out;
  LC_REQUIRE(host_sh(7, th_dir(), "mount --bind /dev/null /usr/bin/perl") == 0);
  LC_REQUIRE_OK(lc_engine_new(&engine, NULL));
  if ((rt = agent_runtime(engine, "lab7", &o)) != NULL) {
    LC_CHECK_OK(lc_runtime_spawn(&p, rt, "sleep 4441", NULL));
    LC_CHECK_OK(lc_runtime_exec(&r, rt, "echo without; exit 4", &eo));
    LC_CHECK(r.exit_status == 4 && out.out.n == 1);
    LC_CHECK(count_until(7, "^sleep 4441", 1, 5000) == 1);
    LC_CHECK(agents_on(7, 0, 0) == 0);
    if (p != NULL) {
      LC_CHECK_OK(lc_process_stop(p));
      LC_CHECK_OK(lc_process_wait(&r, p, 30000));
      lc_process_free(p);
    }
    LC_CHECK(count_until(7, "sleep 4441", 0, 10000) == 0);
    lc_runtime_free(rt);
  }
  LC_CHECK(host_sh(7, th_dir(), "umount /usr/bin/perl") == 0);
  output_free(&out);
  lc_engine_free(engine);
}

LC_TEST_MAIN(LC_TEST(test_parity), LC_TEST(test_sessions), LC_TEST(test_streams),
             LC_TEST(test_agent_killed), LC_TEST(test_idle_agent), LC_TEST(test_head_once),
             LC_TEST(test_nofile), LC_TEST(test_no_perl))
