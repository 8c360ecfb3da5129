/*
 * test_ports.c - listening ports and the common free port on real SSH test hosts: listeners on
 * 0.0.0.0, 127.0.0.1, [::] and [::1] on different hosts (each host is its own network
 * namespace), a port taken only on this machine, ports reserved in this process, LC_ENOPORTS,
 * ports that a connection holds (no listener, yet no listener can bind them), and a host whose
 * listing fails.
 */
#include "lc_test.h"
#include "testenv.h"

#include "../../src/ports_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#ifndef LC_LISTEN
#error "LC_LISTEN: the path of tests/support/listen, set by tests/integration.ports.cmake"
#endif

#define HOSTS 4
#define BASE 23100 /* below ip_local_port_range, so outgoing connections do not take them */

static lc_engine *engine;
static lc_runtime *rts[HOSTS];
/* LC_LISTEN copied into each host's working directory: a build under /tmp is not visible on the
 * hosts, which have their own /tmp */
static char listen_bin[HOSTS][1024];

typedef struct listener {
  lc_process *proc;
  atomic_int ready;  /* it printed "listening" */
  atomic_int failed; /* it wrote to stderr */
} listener;

static void listener_line(const char *line, size_t len, lc_stream stream, void *payload) {
  listener *l = payload;
  (void)len;
  if (stream == LC_STDOUT && strncmp(line, "listening ", 10) == 0)
    atomic_store(&l->ready, 1);
  if (stream == LC_STDERR) {
    fprintf(stderr, "  listen: %s\n", line);
    atomic_store(&l->failed, 1);
  }
}

/* Starts tests/support/listen on host i for address:port and waits until it listens. */
static int listener_start(listener *l, int i, const char *address, int port) {
  lc_runtime *rt = rts[i];
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  char cmd[1024];
  int r;
  atomic_store(&l->ready, 0);
  atomic_store(&l->failed, 0);
  eo.on_line = listener_line;
  eo.payload = l;
  snprintf(cmd, sizeof(cmd), "exec '%s' '%s' %d 240", listen_bin[i], address, port);
  if ((r = lc_runtime_spawn(&l->proc, rt, cmd, &eo)) < 0) {
    fprintf(stderr, "  spawn on %s: %s\n", lc_runtime_name(rt), lc_error_last());
    return r;
  }
  for (int k = 0; k < 1000 && !atomic_load(&l->ready) && !atomic_load(&l->failed); k++)
    usleep(10000);
  if (!atomic_load(&l->ready)) {
    fprintf(stderr, "  %s: no listener on %s port %d\n", lc_runtime_name(rt), address, port);
    return -1;
  }
  return 0;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A listening socket on this machine's 127.0.0.1:port. */
static int listen_here(int port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

static int connect_all(void) {
  lc_runtime_options o = th_options();
  for (int i = 0; i < HOSTS; i++) {
    const char *dir = NULL;
    char name[16];
    int r;
    snprintf(name, sizeof(name), "lab%d", i);
    if (rts[i] != NULL)
      continue;
    if ((r = lc_runtime_new_ssh(&rts[i], engine, name, &o)) < 0) {
      fprintf(stderr, "  connect %s: %s: %s\n", name, lc_err_name(r), lc_error_last());
      return r;
    }
    if ((r = lc_runtime_workdir(&dir, rts[i])) == 0) {
      snprintf(listen_bin[i], sizeof(listen_bin[i]), "%s/listen", dir);
      r = lc_runtime_send_file(rts[i], LC_LISTEN, listen_bin[i], 60000);
    }
    if (r < 0) {
      fprintf(stderr, "  %s: cannot send %s: %s\n", name, LC_LISTEN, lc_error_last());
      return r;
    }
  }
  return 0;
}

static void free_all(void) {
  for (int i = 0; i < HOSTS; i++) {
    lc_runtime_free(rts[i]);
    rts[i] = NULL;
  }
}

static void check_text(const lc_ports *p, const char *want) {
  char *text = NULL;
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, want);
  lc_free(text);
}

/*
 * lab0 listens on 0.0.0.0:BASE, lab1 on 127.0.0.1:BASE+1, lab2 on [::]:BASE+2, lab3 on
 * [::1]:BASE+3 and this machine on 127.0.0.1:BASE+4: each listing shows its own listener (and
 * sshd's 22) and nothing of the others; the common free port of BASE-BASE+10 is BASE+5.
 */
static void test_listeners_everywhere(void) {
  static const char *const addrs[HOSTS] = {"0.0.0.0", "127.0.0.1", "::", "::1"};
  listener ls[HOSTS];
  lc_ports *range = NULL, *got = NULL;
  char spec[64], want[64];
  int here = -1, p1 = 0, p2 = 0, p3 = 0;
  uint64_t t0, sequential = 0;

  memset(ls, 0, sizeof(ls));
  LC_REQUIRE(connect_all() == 0);
  for (int i = 0; i < HOSTS; i++)
    LC_CHECK(listener_start(&ls[i], i, addrs[i], BASE + i) == 0);
  LC_CHECK((here = listen_here(BASE + 4)) >= 0);
  if (lc_test_failed_now)
    goto out;

  for (int i = 0; i < HOSTS; i++) {
    t0 = now_ms();
    LC_CHECK_OK(lc_ports_listening(&got, rts[i], 0));
    sequential += now_ms() - t0;
    if (got == NULL)
      continue;
    snprintf(want, sizeof(want), "22,%d", BASE + i);
    check_text(got, want);
    lc_ports_free(got);
    got = NULL;
  }

  snprintf(spec, sizeof(spec), "%d-%d", BASE, BASE + 10);
  LC_REQUIRE_OK(lc_ports_parse(&range, spec));
  t0 = now_ms();
  LC_CHECK_OK(lc_ports_common_free(&p1, rts, HOSTS, range));
  fprintf(stderr,
          "  one common free port over %d hosts: %llu ms (their listings one after the "
          "other: %llu ms)\n",
          HOSTS, (unsigned long long)(now_ms() - t0), (unsigned long long)sequential);
  LC_CHECK(p1 == BASE + 5);
  LC_CHECK(lc_port_is_reserved(p1));
  /* the service found BASE+5 in use after all: the next call gives the next port */
  LC_CHECK_OK(lc_ports_common_free(&p2, rts, HOSTS, range));
  LC_CHECK(p2 == BASE + 6);
  LC_CHECK_OK(lc_port_release(p1));
  LC_CHECK_OK(lc_ports_common_free(&p3, rts, HOSTS, range));
  LC_CHECK(p3 == BASE + 5);
  LC_CHECK_OK(lc_port_release(p2));
  LC_CHECK_OK(lc_port_release(p3));

  /* one host at a time sees only its own listener */
  for (int i = 0; i < HOSTS; i++) {
    int p = 0;
    LC_CHECK_OK(lc_ports_common_free(&p, &rts[i], 1, range));
    LC_CHECK(p == (i == 0 ? BASE + 1 : BASE));
    LC_CHECK_OK(lc_port_release(p));
  }

  /* the only port of the range taken somewhere: none left, and the message says where looked */
  for (int i = 0; i <= HOSTS; i++) {
    lc_ports *one = NULL;
    int p = -1;
    snprintf(spec, sizeof(spec), "%d", BASE + i);
    LC_REQUIRE_OK(lc_ports_parse(&one, spec));
    LC_CHECK(lc_ports_common_free(&p, rts, HOSTS, one) == LC_ENOPORTS);
    LC_CHECK(p == 0);
    LC_CHECK_CONTAINS(lc_error_last(), spec);
    LC_CHECK_CONTAINS(lc_error_last(), "on 4 hosts");
    LC_CHECK_CONTAINS(lc_error_last(),
                      i < HOSTS ? "taken on a host: 1" : "in use on this machine: 1");
    lc_ports_free(one);
  }

  /* a listener stopped (and its end awaited: listings no longer pay for a wrapper, so one could
   * come before the listener is gone): its port is free again */
  LC_CHECK_OK(lc_process_stop(ls[2].proc));
  lc_process_wait(NULL, ls[2].proc, 10000);
  lc_process_free(ls[2].proc);
  ls[2].proc = NULL;
  {
    lc_ports *one = NULL;
    int p = 0;
    snprintf(spec, sizeof(spec), "%d", BASE + 2);
    LC_REQUIRE_OK(lc_ports_parse(&one, spec));
    LC_CHECK_OK(lc_ports_common_free(&p, rts, HOSTS, one));
    LC_CHECK(p == BASE + 2);
    if (p > 0)
      LC_CHECK_OK(lc_port_release(p));
    lc_ports_free(one);
  }

out:
  for (int i = 0; i < HOSTS; i++)
    lc_process_free(ls[i].proc);
  for (int i = 0; i < HOSTS; i++) { /* and no listener is left on any host (ended async.) */
    int left = 1;
    for (int k = 0; k < 500 && (left = th_count_procs(i, listen_bin[i])) != 0; k++)
      usleep(10000);
    if (left != 0)
      fprintf(stderr, "  lab%d: %d listener processes left\n", i, left);
    LC_CHECK(left == 0);
  }
  if (here >= 0)
    close(here);
  lc_ports_free(range);
}

/* Many listeners on one host, IPv4 and IPv6, in one round trip; the local runtime too. */
static void test_many_listeners_and_local(void) {
  enum { N = 8 }; /* with the listing: 9 channels, within sshd's MaxSessions of 10 */
  listener ls[N];
  lc_runtime *local = NULL;
  lc_ports *got = NULL;
  int here;
  memset(ls, 0, sizeof(ls));
  LC_REQUIRE(connect_all() == 0);
  for (int i = 0; i < N && !lc_test_failed_now; i++)
    LC_CHECK(listener_start(&ls[i], 1, i % 2 ? "::" : "0.0.0.0", BASE + 20 + i) == 0);
  if (!lc_test_failed_now)
    LC_CHECK_OK(lc_ports_listening(&got, rts[1], 5000));
  if (got != NULL) {
    char want[64];
    snprintf(want, sizeof(want), "22,%d-%d", BASE + 20, BASE + 20 + N - 1);
    check_text(got, want);
    lc_ports_free(got);
    got = NULL;
  }
  for (int i = 0; i < N; i++)
    lc_process_free(ls[i].proc);

  /* this machine, through the local runtime */
  LC_REQUIRE((here = listen_here(BASE + 40)) >= 0);
  LC_REQUIRE_OK(lc_runtime_new_local(&local, engine, NULL));
  LC_CHECK_OK(lc_ports_listening(&got, local, 0));
  LC_CHECK(lc_ports_contains(got, BASE + 40));
  lc_ports_free(got);
  close(here);
  lc_runtime_free(local);
}

/* Many threads ask for common free ports over the same hosts at once: never the same port. */
typedef struct asker {
  const lc_ports *range;
  int port, rc;
} asker;

static void *asker_main(void *arg) {
  asker *a = arg;
  a->rc = lc_ports_common_free(&a->port, rts, HOSTS, a->range);
  return NULL;
}

static void test_concurrent_callers(void) {
  enum { N = 8 };
  pthread_t th[N];
  asker as[N];
  lc_ports *range = NULL;
  char spec[64];
  LC_REQUIRE(connect_all() == 0);
  snprintf(spec, sizeof(spec), "%d-%d", BASE + 50, BASE + 69);
  LC_REQUIRE_OK(lc_ports_parse(&range, spec));
  for (int i = 0; i < N; i++) {
    as[i].range = range;
    as[i].port = 0;
    pthread_create(&th[i], NULL, asker_main, &as[i]);
  }
  for (int i = 0; i < N; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < N; i++) {
    LC_CHECK_OK(as[i].rc);
    LC_CHECK(lc_ports_contains(range, as[i].port));
    for (int j = 0; j < i; j++)
      LC_CHECK(as[i].port != as[j].port);
  }
  for (int i = 0; i < N; i++)
    if (as[i].rc == 0)
      LC_CHECK_OK(lc_port_release(as[i].port));
  lc_ports_free(range);
}

/* SIGKILLs every sshd process in host i's network namespace; returns how many. */
static int kill_sshd(int i) {
  char cmd[4096], line[64];
  const char *script = th_script();
  FILE *p;
  int killed = 0;
  snprintf(cmd, sizeof(cmd), "%s pids %d --dir %s", script, i, th_dir());
  if ((p = popen(cmd, "r")) == NULL)
    return -1;
  while (fgets(line, sizeof(line), p) != NULL) {
    char path[128], comm[64] = "";
    int pid = atoi(line);
    FILE *c;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    if (pid <= 1 || (c = fopen(path, "r")) == NULL)
      continue;
    if (fgets(comm, sizeof(comm), c) != NULL && strcmp(comm, "sshd\n") == 0 &&
        kill(pid, SIGKILL) == 0)
      killed++;
    fclose(c);
  }
  pclose(p);
  return killed;
}

/* What a host's facts read a moment ago serves the next scan of it, once, without a round trip;
 * then a real listing again. */
static void test_fresh_listing(void) {
  lc_ports *facts = NULL, *held = NULL, *range = NULL;
  int p = 0;
  LC_REQUIRE(connect_all() == 0);
  LC_REQUIRE_OK(lc_ports_parse(&facts, "23190")); /* nothing listens there in fact */
  LC_REQUIRE_OK(lc_ports_parse(&held, "23191"));  /* nor holds this */
  LC_REQUIRE_OK(lc_ports_parse(&range, "23190-23192"));
  LC_REQUIRE_OK(lc__ports_keep_fresh(rts[1], facts, held));
  LC_CHECK_OK(lc_ports_common_free(&p, rts, HOSTS, range));
  LC_CHECK(p == 23192); /* lab1's facts said 23190 listens and 23191 is held */
  if (p > 0)
    LC_CHECK_OK(lc_port_release(p));
  LC_CHECK_OK(lc_ports_common_free(&p, rts, HOSTS, range));
  LC_CHECK(p == 23190); /* taken once: lab1 was asked this time */
  if (p > 0)
    LC_CHECK_OK(lc_port_release(p));
  lc_ports_free(facts);
  lc_ports_free(held);
  lc_ports_free(range);
}

/* A port that a connection on a host holds as its local end, as one given from the ephemeral
 * range: nothing listens there, yet a master or worker could not bind it, so it is not free (one
 * on lab2, one on lab3). The listing of listening ports still leaves it out. */
static void test_held_ports(void) {
  int h2[2], h3[2];
  lc_ports *range = NULL, *l = NULL;
  int p = 0, r;
  LC_REQUIRE(connect_all() == 0);
  LC_REQUIRE(th_hold_port_by_connection(2, BASE + 70, h2) == 0);
  LC_REQUIRE(th_hold_port_by_connection(3, BASE + 71, h3) == 0);
  LC_REQUIRE_OK(lc_ports_parse(&range, "23170-23172"));
  LC_CHECK_OK(lc_ports_common_free(&p, rts, HOSTS, range));
  LC_CHECK(p == BASE + 72);
  if (p > 0)
    LC_CHECK_OK(lc_port_release(p));
  lc_ports_free(range);
  range = NULL;
  /* the held ports alone: none is free, and the count says where they were taken */
  LC_REQUIRE_OK(lc_ports_parse(&range, "23170-23171"));
  r = lc_ports_common_free(&p, rts, HOSTS, range);
  LC_CHECK(r == LC_ENOPORTS && p == 0);
  LC_CHECK_CONTAINS(lc_error_last(), "taken on a host: 2");
  /* a listing of listening ports: they do not listen */
  LC_CHECK_OK(lc_ports_listening(&l, rts[2], 0));
  LC_CHECK(l != NULL && !lc_ports_contains(l, BASE + 70));
  lc_ports_free(l);
  /* the connections end (their TIME-WAIT on the other ends' ports): the ports are free again */
  for (int k = 1; k >= 0; k--) {
    close(h2[k]);
    close(h3[k]);
  }
  LC_CHECK_OK(lc_ports_common_free(&p, rts, HOSTS, range));
  LC_CHECK(p == BASE + 70);
  if (p > 0)
    LC_CHECK_OK(lc_port_release(p));
  lc_ports_free(range);
}

/* A host whose connection is gone: the call fails and the detail names it. */
static void test_host_down(void) {
  lc_ports *range = NULL, *got = NULL;
  int p = 0, r;
  LC_REQUIRE(connect_all() == 0);
  LC_REQUIRE_OK(lc_ports_parse(&range, "23180-23189"));
  /* kill lab3's sshd processes (the listener and this connection's session); only processes
   * of its network namespace, since the hosts share this machine's process table */
  LC_REQUIRE(kill_sshd(3) > 0);
  for (int i = 0; i < 500 && lc_runtime_is_connected(rts[3]); i++)
    usleep(10000);
  r = lc_ports_common_free(&p, rts, HOSTS, range);
  LC_CHECK(r < 0 && r != LC_ENOPORTS);
  LC_CHECK(p == 0);
  LC_CHECK_CONTAINS(lc_error_last(), "lab3");
  LC_CHECK_CONTAINS(lc_error_last(), "listening ports");
  fprintf(stderr, "  with lab3 gone: %s: %s\n", lc_err_name(r), lc_error_last());
  for (int port = 23180; port <= 23189; port++)
    LC_CHECK(!lc_port_is_reserved(port)); /* nothing was handed out */
  r = lc_ports_listening(&got, rts[3], 0);
  LC_CHECK(r < 0 && got == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab3");
  /* the other hosts still answer */
  LC_CHECK_OK(lc_ports_common_free(&p, rts, 3, range));
  if (p > 0)
    LC_CHECK_OK(lc_port_release(p));
  LC_CHECK(th_run("start-sshd 3 >/dev/null") == 0);
  lc_runtime_free(rts[3]);
  rts[3] = NULL;
  lc_ports_free(range);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_listeners_everywhere), LC_TEST(test_many_listeners_and_local),
      LC_TEST(test_concurrent_callers),   LC_TEST(test_fresh_listing),
      LC_TEST(test_held_ports),           LC_TEST(test_host_down),
  };
  int r;
  th_dir(); /* no test hosts: fail loudly */
  if (lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  free_all();
  lc_engine_free(engine);
  return r;
}
