/*
 * test_stall.c - the SSH transport under a stalled host and short blips (issue 16), on real test
 * hosts lab0..lab2.
 *
 * - local_children_hold_no_ssh_socket: with SSH runtimes connected, a command of the local
 *   runtime lists its own descriptors: none is a socket (the dup of every SSH socket is
 *   close-on-exec).
 * - stalled_host_does_not_stall_others: bulk data to lab0 through a -L forward (8 connections,
 *   more than the kernel buffers hold), then every sshd of lab0 SIGSTOPped for 40 s (its kernel
 *   still acknowledges TCP). Meanwhile lab1's and lab2's commands, which print a line every
 *   200 ms, keep arriving (no gap of 5 s), and lab0 is declared lost by the keepalive (a request
 *   sshd must answer) before SIGCONT. After SIGCONT lab0 comes back (its forward reconnects) and
 *   nothing of the old session is left there; nothing is left on lab1 and lab2 either.
 * - short_blip_keeps_processes: with the default limits, lab1's link down for 20 s: the same
 *   process (same pid) still runs afterwards and its output still arrives.
 * - long_blip_ends_processes: a keepalive limit of 5 s (heartbeat limit 10 s by default), lab2's
 *   link down for 25 s: the process has ended and nothing is left on the host.
 * - late_engine_keeps_host: the engine thread held up longer than lab1's keepalive limit of 2 s
 *   (lab2's line callback sleeps 2.5 s, twice; a machine under heavy load starves the engine the
 *   same way) right after lab1's keepalive went out: lab1 answered, and is not counted lost for
 *   an answer that waited unread in its socket; its command lives on.
 * - keepalive_only_when_silent: a host that prints a line every 20 ms is sent no keepalive (its
 *   bytes prove it alive); once it is silent, one goes out about every sixth of the limit, and it
 *   answers them.
 */
#include "lc_test.h"
#include "runtime_internal.h" /* lc__ssh_keepalives_sent */
#include "testenv.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#ifndef LC_TCPTOOL
#error "LC_TCPTOOL: the path of tests/support/tcptool, set by tests/integration.stall.cmake"
#endif

#define CLIENTS 8
#define STOP_S 40

static lc_engine *engine;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Lines of one process, counted on the engine thread: how many, when the last came, and the
 * longest gap between two while watched. */
typedef struct ticks {
  pthread_mutex_t mu;
  long count;
  long long last_ms, max_gap_ms;
  int watching;
  int port; /* a "port N" line (tcptool listen) */
  char last[256];
} ticks;

static void ticks_init(ticks *t) {
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
}

static void on_tick(const char *line, size_t len, lc_stream stream, void *payload) {
  ticks *t = payload;
  long long now = now_ms();
  (void)len;
  pthread_mutex_lock(&t->mu);
  if (stream == LC_STDOUT) {
    t->count++;
    if (t->watching && t->last_ms > 0 && now - t->last_ms > t->max_gap_ms)
      t->max_gap_ms = now - t->last_ms;
    t->last_ms = now;
    if (strncmp(line, "port ", 5) == 0)
      t->port = atoi(line + 5);
    snprintf(t->last, sizeof(t->last), "%s", line);
  }
  pthread_mutex_unlock(&t->mu);
}

static long ticks_count(ticks *t) {
  long n;
  pthread_mutex_lock(&t->mu);
  n = t->count;
  pthread_mutex_unlock(&t->mu);
  return n;
}

static void ticks_watch(ticks *t, int on) {
  pthread_mutex_lock(&t->mu);
  t->watching = on;
  if (on) {
    t->max_gap_ms = 0;
    t->last_ms = now_ms();
  } else if (now_ms() - t->last_ms > t->max_gap_ms) {
    t->max_gap_ms = now_ms() - t->last_ms; /* the gap up to the end counts too */
  }
  pthread_mutex_unlock(&t->mu);
}

/* Processes in host i's namespaces other than sshd (ours: lifelines, commands, tcptool). */
static int others_on(int i) {
  char cmd[1024];
  FILE *p;
  int n = -1;
  snprintf(cmd, sizeof(cmd),
           "for p in $(%s pids %d --dir %s); do c=$(cat /proc/$p/comm 2>/dev/null) || continue; "
           "[ \"$c\" = sshd ] || echo \"$p $c\"; done | tee /dev/stderr | wc -l",
           th_script(), i, th_dir());
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

/* Waits (generously) until nothing but sshd is left on host i; the count left. */
static int wait_nothing_on(int i, int limit_s) {
  int n = -1;
  for (int k = 0; k < limit_s; k++) {
    if ((n = others_on(i)) == 0)
      return 0;
    sleep_ms(1000);
  }
  fprintf(stderr, "  lab%d: %d processes left after %d s\n", i, n, limit_s);
  return n;
}

/* Sends sig to every sshd of host i (the listener and every session's): the count signalled. */
static int signal_sshd(int i, const char *sig) {
  char cmd[1024];
  FILE *p;
  int n = -1;
  snprintf(cmd, sizeof(cmd),
           "n=0; for p in $(%s pids %d --dir %s); do [ \"$(cat /proc/$p/comm 2>/dev/null)\" = "
           "sshd ] && kill -%s $p && n=$((n+1)); done; echo $n",
           th_script(), i, th_dir(), sig);
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

static lc_runtime *connect_host(const char *alias, int keepalive_ms) {
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  o.keepalive_timeout_ms = keepalive_ms;
  if (lc_runtime_new_ssh(&rt, engine, alias, &o) < 0) {
    fprintf(stderr, "  connect %s: %s\n", alias, lc_error_last());
    return NULL;
  }
  return rt;
}

static lc_process *spawn_ticker(lc_runtime *rt, ticks *t, const char *cmd) {
  lc_process *p = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  eo.on_line = on_tick;
  eo.payload = t;
  eo.label = "stall-test";
  if (lc_runtime_spawn(&p, rt, cmd, &eo) < 0) {
    fprintf(stderr, "  spawn on %s: %s\n", lc_runtime_name(rt), lc_error_last());
    return NULL;
  }
  return p;
}

/* ---- descriptors ---------------------------------------------------------------------------- */

static void on_fd_line(const char *line, size_t len, lc_stream stream, void *payload) {
  int *sockets = payload;
  (void)len;
  const char *target = strchr(line, ' ');
  /* "FD TARGET": 0-2 are the local backend's stdio (libuv makes them socketpairs) */
  if (stream == LC_STDOUT && target != NULL && atoi(line) > 2 &&
      strncmp(target + 1, "socket:", 7) == 0) {
    fprintf(stderr, "  a local child holds %s\n", line);
    (*sockets)++;
  }
}

static void local_children_hold_no_ssh_socket(void) {
  lc_runtime *a = connect_host("lab0", 0), *b = connect_host("lab1", 0), *local = NULL;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc_exec_result res;
  int sockets = 0;
  LC_REQUIRE(a != NULL && b != NULL);
  LC_CHECK_OK(lc_runtime_new_local(&local, engine, NULL));
  eo.on_line = on_fd_line;
  eo.payload = &sockets;
  /* the shell's own descriptors: what it inherited through the lifeline from this process */
  if (local != NULL)
    LC_CHECK_OK(lc_runtime_exec(
        &res, local, "for f in /proc/$$/fd/*; do echo \"${f##*/} $(readlink \"$f\")\"; done", &eo));
  LC_CHECK(sockets == 0);
  lc_runtime_free(local);
  lc_runtime_free(a);
  lc_runtime_free(b);
}

/* ---- a stalled host ------------------------------------------------------------------------- */

static pid_t spawn_client(int port) {
  char portstr[16];
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    snprintf(portstr, sizeof(portstr), "%d", port);
    dup2(null, 1);
    dup2(null, 2);
    execl(LC_TCPTOOL, "tcptool", "--timeout", "150", "connect", "127.0.0.1", portstr, "flood",
          (char *)NULL);
    _exit(127);
  }
  return pid;
}

static void stalled_host_does_not_stall_others(void) {
  /* lab0's keepalive limit 20 s: lost within 20 s + a sixth of the keepalive of the 40 s stop */
  lc_runtime *a = connect_host("lab0", 20000), *b = connect_host("lab1", 0),
             *c = connect_host("lab2", 0);
  lc_process *sink = NULL, *pb = NULL, *pc = NULL;
  lc_forward *f = NULL;
  ticks tsink, tb, tc;
  pid_t clients[CLIENTS] = {0};
  long long stopped_at, lost_ms = -1, back_ms = -1;
  char cmd[4200], tool[1024];
  const char *wd = NULL;
  int port = 0, r;

  ticks_init(&tsink);
  ticks_init(&tb);
  ticks_init(&tc);
  LC_REQUIRE(a != NULL && b != NULL && c != NULL);
  pb = spawn_ticker(b, &tb, "while :; do echo tick; sleep 0.2; done");
  pc = spawn_ticker(c, &tc, "while :; do echo tick; sleep 0.2; done");
  /* the tool goes to lab0 first: the hosts have their own /tmp, where a checkout may be */
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, a));
  snprintf(tool, sizeof(tool), "%s/tcptool", wd);
  LC_REQUIRE_OK(lc_runtime_send_file(a, LC_TCPTOOL, tool, 30000));
  snprintf(cmd, sizeof(cmd), "exec '%s' --timeout 200 --conns 0 listen 127.0.0.1 0 sink", tool);
  sink = spawn_ticker(a, &tsink, cmd);
  LC_REQUIRE(pb != NULL && pc != NULL && sink != NULL);
  for (int k = 0; k < 100 && (port = tsink.port) == 0; k++)
    sleep_ms(100);
  LC_REQUIRE(port > 0);
  LC_REQUIRE_OK(lc_forward_new(&f, a, LC_FORWARD_LOCAL, 0, "127.0.0.1", port, NULL));
  for (int k = 0; k < CLIENTS; k++)
    clients[k] = spawn_client(lc_forward_port(f));
  sleep_ms(3000); /* the forward runs at full speed */

  ticks_watch(&tb, 1);
  ticks_watch(&tc, 1);
  LC_CHECK(signal_sshd(0, "STOP") >= 2); /* the listener and our session's */
  stopped_at = now_ms();
  while (now_ms() - stopped_at < STOP_S * 1000LL) {
    if (lost_ms < 0 && !lc_runtime_is_connected(a))
      lost_ms = now_ms() - stopped_at;
    sleep_ms(200);
  }
  ticks_watch(&tb, 0);
  ticks_watch(&tc, 0);
  LC_CHECK(signal_sshd(0, "CONT") >= 1);
  fprintf(stderr,
          "  during the stop: lab1 %ld lines (longest gap %lld ms), lab2 %ld lines "
          "(longest gap %lld ms); lab0 lost after %lld ms\n",
          ticks_count(&tb), tb.max_gap_ms, ticks_count(&tc), tc.max_gap_ms, lost_ms);
  /* the other hosts' output kept coming (a line every 200 ms; 5 s is a generous bound) */
  LC_CHECK(tb.max_gap_ms < 5000);
  LC_CHECK(tc.max_gap_ms < 5000);
  /* the wedged host was noticed by the keepalive (TCP alone never would: its kernel ACKs) */
  LC_CHECK(lost_ms >= 0);

  for (int k = 0; k < CLIENTS; k++)
    if (clients[k] > 0) {
      kill(clients[k], SIGKILL);
      waitpid(clients[k], NULL, 0);
    }
  /* the forward brings the connection back once sshd runs again (backoff up to 30 s) */
  for (long long t0 = now_ms(); now_ms() - t0 < 90000; sleep_ms(200))
    if (lc_runtime_is_connected(a)) {
      back_ms = now_ms() - t0;
      break;
    }
  fprintf(stderr, "  lab0 back %lld ms after SIGCONT\n", back_ms);
  LC_CHECK(back_ms >= 0);
  /* the sink was on the old session: its lifeline ended it (channel closed or heartbeat) */
  r = lc_process_wait(NULL, sink, 90000);
  LC_CHECK(r == 0 || r == LC_ECLOSED);
  lc_process_free(sink);
  lc_forward_free(f);
  LC_CHECK_OK(lc_process_stop(pb));
  LC_CHECK_OK(lc_process_stop(pc));
  lc_process_free(pb);
  lc_process_free(pc);
  lc_runtime_free(a);
  lc_runtime_free(b);
  lc_runtime_free(c);
  LC_CHECK(wait_nothing_on(0, 90) == 0);
  LC_CHECK(wait_nothing_on(1, 30) == 0);
  LC_CHECK(wait_nothing_on(2, 30) == 0);
}

/* ---- blips ---------------------------------------------------------------------------------- */

static long remote_alive(int i, long pid) {
  return th_run("exec %d -- sh -c 'kill -0 %ld 2>/dev/null'", i, pid) == 0;
}

static void short_blip_keeps_processes(void) {
  lc_runtime *b = connect_host("lab1", 0); /* the default limits */
  lc_process *p = NULL;
  ticks t;
  long pid = -1, before;
  int arrived = 0;
  ticks_init(&t);
  LC_REQUIRE(b != NULL);
  p = spawn_ticker(b, &t, "i=0; while :; do echo \"n$i\"; i=$((i+1)); sleep 1; done");
  LC_REQUIRE(p != NULL);
  for (int k = 0; k < 100 && (pid = lc_process_pid(p)) <= 0; k++)
    sleep_ms(100);
  LC_REQUIRE(pid > 0);
  LC_CHECK(th_run("link-down 1") == 0);
  sleep_ms(20000);
  LC_CHECK(th_run("link-up 1") == 0);
  before = ticks_count(&t);
  /* TCP retransmits with backoff: the held lines and new ones come within a generous bound */
  for (int k = 0; k < 600 && !arrived; k++) {
    sleep_ms(100);
    arrived = ticks_count(&t) > before + 2;
  }
  fprintf(stderr, "  after the 20 s blip: pid %ld %s, %ld lines, last \"%s\", connected %d\n", pid,
          remote_alive(1, pid) ? "alive" : "gone", ticks_count(&t), t.last,
          lc_runtime_is_connected(b));
  LC_CHECK(arrived);
  LC_CHECK(lc_process_pid(p) == pid);
  LC_CHECK(remote_alive(1, pid));
  LC_CHECK(lc_runtime_is_connected(b));
  LC_CHECK_OK(lc_process_stop(p));
  lc_process_free(p);
  lc_runtime_free(b);
  LC_CHECK(wait_nothing_on(1, 30) == 0);
}

static void long_blip_ends_processes(void) {
  lc_runtime *d = connect_host("lab2", 5000); /* heartbeat limit 10 s by default */
  lc_process *p = NULL;
  ticks t;
  long pid = -1;
  int r;
  ticks_init(&t);
  LC_REQUIRE(d != NULL);
  p = spawn_ticker(d, &t, "while :; do echo tick; sleep 1; done");
  LC_REQUIRE(p != NULL);
  for (int k = 0; k < 100 && (pid = lc_process_pid(p)) <= 0; k++)
    sleep_ms(100);
  LC_REQUIRE(pid > 0);
  LC_CHECK(th_run("link-down 2") == 0);
  sleep_ms(25000);
  LC_CHECK(!lc_runtime_is_connected(d)); /* lost by the keepalive */
  /* its lifeline, cut off, ended the process group: gone while the link is still down */
  LC_CHECK(!remote_alive(2, pid));
  LC_CHECK(th_run("link-up 2") == 0);
  r = lc_process_wait(NULL, p, 30000);
  LC_CHECK(r == LC_ECLOSED || r == 0);
  lc_process_free(p);
  lc_runtime_free(d);
  LC_CHECK(wait_nothing_on(2, 60) == 0);
}

/* ---- a flooding host ----------------------------------------------------------------------- */

static void flooding_host_does_not_starve_others(void) {
  /* lab1: keepalive limit 5 s, so that an engine held up past it by lab2 would lose lab1 */
  lc_runtime *a = connect_host("lab1", 5000), *b = connect_host("lab2", 0);
  lc_process *pa = NULL, *pb = NULL;
  lc_exec_result res;
  ticks ta, tb;
  long long t0;
  ticks_init(&ta);
  ticks_init(&tb);
  LC_REQUIRE(a != NULL && b != NULL);
  pa = spawn_ticker(a, &ta, "while :; do echo tick; sleep 0.2; done");
  LC_REQUIRE(pa != NULL);
  sleep_ms(1000);
  ticks_watch(&ta, 1);
  t0 = now_ms();
  /* lab2: 400 MB of 100-byte lines as fast as the host can write them */
  pb = spawn_ticker(b, &tb, "head -c 400000000 /dev/zero | tr '\\0' x | fold -w 99");
  LC_REQUIRE(pb != NULL);
  memset(&res, 0, sizeof(res));
  LC_CHECK_OK(lc_process_wait(&res, pb, 300000));
  ticks_watch(&ta, 0);
  fprintf(stderr,
          "  lab2 wrote %ld lines in %lld ms (exit %d); meanwhile lab1 %ld lines, longest "
          "gap %lld ms, %s\n",
          ticks_count(&tb), now_ms() - t0, res.exit_status, ticks_count(&ta), ta.max_gap_ms,
          lc_runtime_is_connected(a) ? "connected" : "lost");
  LC_CHECK(res.exit_status == 0);
  LC_CHECK(ticks_count(&tb) == 4040405); /* 400,000,000 bytes in lines of 99 and a last of 4 */
  /* lab1's lines kept coming (one every 200 ms; 5 s is a generous bound) */
  LC_CHECK(ta.max_gap_ms < 5000);
  LC_CHECK(lc_runtime_is_connected(a));
  LC_CHECK_OK(lc_process_stop(pa));
  lc_process_free(pa);
  lc_process_free(pb);
  lc_runtime_free(a);
  lc_runtime_free(b);
  LC_CHECK(wait_nothing_on(1, 30) == 0);
  LC_CHECK(wait_nothing_on(2, 30) == 0);
}

/* ---- the keepalive asks only a silent host -------------------------------------------------- */

static void keepalive_only_when_silent(void) {
  /* keepalive limit 6 s: a request once the host has said nothing for a second */
  lc_runtime *a = connect_host("lab1", 6000);
  lc_process *p = NULL;
  unsigned long k0, talking, silent;
  ticks t;
  ticks_init(&t);
  LC_REQUIRE(a != NULL);
  p = spawn_ticker(a, &t, "while :; do echo tick; sleep 0.02; done");
  LC_REQUIRE(p != NULL);
  sleep_ms(500);
  ticks_watch(&t, 1);
  k0 = lc__ssh_keepalives_sent();
  sleep_ms(3000);
  talking = lc__ssh_keepalives_sent() - k0;
  ticks_watch(&t, 0);
  LC_CHECK_OK(lc_process_stop(p));
  lc_process_free(p);
  sleep_ms(200);
  k0 = lc__ssh_keepalives_sent();
  sleep_ms(4500);
  silent = lc__ssh_keepalives_sent() - k0;
  fprintf(stderr,
          "  keepalives: %lu in 3 s of a line every 20 ms (%ld lines, longest gap %lld ms), "
          "%lu in 4.5 s of silence; %s\n",
          talking, ticks_count(&t), t.max_gap_ms, silent,
          lc_runtime_is_connected(a) ? "connected" : "lost");
  /* the host spoke all the time: nothing to ask, unless this machine held its lines up for the
   * second after which a keepalive is due */
  LC_CHECK(talking == 0 || t.max_gap_ms >= 1000);
  /* silent: asked about once a second, and it answered each time */
  LC_CHECK(silent >= 2);
  LC_CHECK(lc_runtime_is_connected(a));
  lc_runtime_free(a);
  LC_CHECK(wait_nothing_on(1, 30) == 0);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(local_children_hold_no_ssh_socket),    LC_TEST(stalled_host_does_not_stall_others),
      LC_TEST(short_blip_keeps_processes),           LC_TEST(long_blip_ends_processes),
      LC_TEST(flooding_host_does_not_starve_others), LC_TEST(keepalive_only_when_silent),
  };
  int r;
  signal(SIGPIPE, SIG_IGN);
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  /* whatever happened: the hosts run again */
  signal_sshd(0, "CONT");
  th_run("link-up 1");
  th_run("link-up 2");
  lc_engine_free(engine);
  return r;
}
