/*
 * test_control_cluster.c - the control layer with a real cluster attached: the command type on
 * this machine alone (a local runtime in a group, as `lazyclusterctl start` without hosts makes
 * it), its output in the logs, status json and env through the socket, stop through the socket,
 * and nothing left afterwards (processes, listeners, the entry).
 */
#include "lazycluster.h"
#include "lc_test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static lc_engine *engine;
static lc_group *group;
static char ctl_path[4096];

typedef struct asker {
  const char *state, *name, *request;
  int rc, done;
  char *reply, error[1024];
} asker;

static void *ask(void *arg) {
  asker *a = arg;
  a->rc = lc_control_request(&a->reply, a->state, a->name, a->request, 20000);
  snprintf(a->error, sizeof(a->error), "%s", lc_error_last());
  __atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Asks in another thread while this one serves; the last serve's return. */
static int serve_ask(lc_control *ctl, asker *a, pthread_t *t) {
  time_t start = time(NULL);
  int r = 0;
  pthread_create(t, NULL, ask, a);
  while (!__atomic_load_n(&a->done, __ATOMIC_SEQ_CST) && time(NULL) - start < 20)
    if ((r = lc_control_serve(ctl, 50)) == LC_CONTROL_STOP)
      return r;
  pthread_join(*t, NULL);
  return r;
}

static void on_output(lc_cluster *c, int index, const char *host, const char *line, size_t len,
                      lc_stream stream, void *payload) {
  (void)c;
  lc_control_log_line(payload, index, host, line, len, stream);
}

static int count_procs(const char *pattern) {
  char cmd[512];
  int n = -1;
  FILE *p;
  snprintf(cmd, sizeof(cmd), "pgrep -fc '%s' || true", pattern);
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%d", &n) != 1)
      n = -1;
    pclose(p);
  }
  return n;
}

/* Runs a python3 check of the JSON text: 0 when it holds. */
static int py_check(const char *json, const char *program) {
  char path[] = "/tmp/lc-test-control-json-XXXXXX", cmd[8192];
  int fd = mkstemp(path), r;
  if (fd < 0 || write(fd, json, strlen(json)) != (ssize_t)strlen(json))
    return -1;
  close(fd);
  snprintf(cmd, sizeof(cmd), "python3 -c '%s' < %s", program, path);
  r = system(cmd);
  unlink(path);
  return r;
}

static void test_status_of_a_live_cluster(void) {
  char state[] = "/tmp/lc-test-control-cluster-XXXXXX", mt[4300], wt[4300], path[512], want[128];
  lc_control_options co = LC_CONTROL_OPTIONS_INIT;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_control *ctl = NULL;
  lc_cluster *c = NULL;
  asker a;
  pthread_t t;
  char args0[4400], args1[4400];
  const char *args[] = {args0, args1, NULL};
  int port;
  LC_REQUIRE(mkdtemp(state) != NULL);
  snprintf(mt, sizeof(mt), "exec '%s' serve {master_port} master", ctl_path);
  snprintf(wt, sizeof(wt), "exec '%s' serve {worker_port} w{worker_index}", ctl_path);
  snprintf(args0, sizeof(args0), "master=%s", mt);
  snprintf(args1, sizeof(args1), "worker=%s", wt);
  LC_REQUIRE_OK(lc_cluster_type_find("command")->make(&m, &w, args));

  co.name = "live";
  co.state_dir = state;
  co.type_name = "command";
  LC_REQUIRE_OK(lc_control_new(&ctl, &co));
  o.master_port = 62400;
  o.worker_ports = "62401-62499";
  o.on_output = on_output;
  o.payload = ctl;
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  lc_control_attach(ctl, c);
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  lc_control_set_state(ctl, "running", NULL);
  lc_control_log_event(ctl, "3 workers up");
  port = lc_cluster_master_port(c);
  LC_CHECK(port > 0);

  a = (asker){.state = state, .name = "live", .request = "status json"};
  LC_CHECK(serve_ask(ctl, &a, &t) == 0);
  LC_CHECK(a.rc == 0);
  LC_REQUIRE(a.reply != NULL);
  fprintf(stderr, "  status json: %s", a.reply);
  {
    char prog[4096];
    snprintf(prog, sizeof(prog),
             "import json, sys, os\n"
             "s = json.load(sys.stdin)\n"
             "assert s[\"name\"] == \"live\" and s[\"state\"] == \"running\", s\n"
             "assert s[\"type\"] == \"command\" and s[\"supervisor_pid\"] == %ld, s\n"
             "assert s[\"time_left_s\"] == -1 and s[\"age_s\"] >= 0, s\n"
             "mm = s[\"master\"]\n"
             "assert mm[\"host\"] == \"localhost\" and mm[\"port\"] == %d, mm\n"
             "assert mm[\"state\"] == \"running\" and mm[\"pid\"] > 0, mm\n"
             "os.kill(mm[\"pid\"], 0)\n"
             "ws = s[\"workers\"]\n"
             "assert len(ws) == 3, ws\n"
             "for i, w in enumerate(ws):\n"
             "  assert w[\"index\"] == i and w[\"host\"] == \"localhost\", w\n"
             "  assert 62401 <= w[\"port\"] <= 62499 and w[\"gpu\"] is None, w\n"
             "  assert w[\"state\"] == \"running\" and w[\"pid\"] > 0, w\n"
             "  assert open(\"/proc/%%d/cmdline\" %% w[\"pid\"]).read().find(\"serve\") >= 0, w\n"
             "assert len(s[\"hosts\"]) == 1 and s[\"hosts\"][0][\"workers\"] == 3, s\n"
             "assert s[\"events\"][-1].endswith(\" c [- cluster] 3 workers up\"), s\n",
             (long)getpid(), port);
    LC_CHECK(py_check(a.reply, prog) == 0);
  }
  free(a.reply);

  a = (asker){.state = state, .name = NULL, .request = "env"};
  LC_CHECK(serve_ask(ctl, &a, &t) == 0);
  snprintf(want, sizeof(want), "export LAZYCLUSTER_MASTER_PORT=%d\n", port);
  LC_CHECK(a.rc == 0 && a.reply && strstr(a.reply, want) &&
           strstr(a.reply, "export LAZYCLUSTER_MASTER_ADDR=localhost\n"));
  free(a.reply);

  a = (asker){.state = state, .name = "live", .request = "status"};
  LC_CHECK(serve_ask(ctl, &a, &t) == 0);
  LC_CHECK(a.rc == 0 && a.reply && strstr(a.reply, "workers     3/3 running") &&
           strstr(a.reply, "worker-2"));
  if (a.reply)
    fprintf(stderr, "%s", a.reply);
  free(a.reply);

  /* the processes' output is in their logs */
  {
    FILE *f;
    char line[512] = "";
    snprintf(path, sizeof(path), "%s/master.log", lc_control_logs_dir(ctl));
    LC_CHECK((f = fopen(path, "r")) != NULL);
    if (f != NULL) {
      if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
      fclose(f);
    }
    snprintf(want, sizeof(want), " o [localhost master] master listening on 127.0.0.1:%d\n", port);
    LC_CHECK_CONTAINS(line, want);
    snprintf(path, sizeof(path), "%s/worker-1.log", lc_control_logs_dir(ctl));
    LC_CHECK((f = fopen(path, "r")) != NULL);
    if (f != NULL) {
      if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
      fclose(f);
    }
    LC_CHECK_CONTAINS(line, " o [localhost worker-1] w1 listening on 127.0.0.1:");
  }
  LC_CHECK(count_procs("^[^ ]*lazyclusterctl serve 624") == 4);

  /* scale through the socket: the reply comes once it is done */
  a = (asker){.state = state, .name = "live", .request = "scale 1"};
  LC_CHECK(serve_ask(ctl, &a, &t) == 0);
  LC_CHECK(a.rc == 0);
  LC_CHECK_STR(a.reply, "scaled to 1 workers\n");
  free(a.reply);
  LC_CHECK(lc_cluster_worker_count(c) == 1);
  a = (asker){.state = state, .name = "live", .request = "summary json"};
  LC_CHECK(serve_ask(ctl, &a, &t) == 0);
  LC_CHECK(a.rc == 0 && a.reply && strstr(a.reply, "\"workers_up\":1,\"workers_wanted\":1,"));
  free(a.reply);
  for (int i = 0; i < 100 && count_procs("^[^ ]*lazyclusterctl serve 624") != 2; i++)
    usleep(100000);
  LC_CHECK(count_procs("^[^ ]*lazyclusterctl serve 624") == 2);

  /* stop through the socket: the cluster goes, then the answer comes */
  a = (asker){.state = state, .name = "live", .request = "stop"};
  LC_CHECK(serve_ask(ctl, &a, &t) == LC_CONTROL_STOP);
  lc_control_set_state(ctl, "stopping", NULL);
  lc_cluster_free(c);
  lc_control_free(ctl, NULL);
  pthread_join(t, NULL);
  LC_CHECK(a.rc == 0);
  LC_CHECK_STR(a.reply, "stopped\n");
  free(a.reply);
  /* the lifelines end their groups (SIGTERM, then a grace period): a bound of 10 s */
  for (int i = 0; i < 100 && count_procs("^[^ ]*lazyclusterctl serve 624") != 0; i++)
    usleep(100000);
  if (count_procs("^[^ ]*lazyclusterctl serve 624") != 0 &&
      system("pgrep -fa 'lazyclusterctl serve 624' >&2") != 0) /* what is left, for the log */
    fprintf(stderr, "  pgrep failed\n");
  LC_CHECK(count_procs("^[^ ]*lazyclusterctl serve 624") == 0);
  {
    struct stat st;
    snprintf(path, sizeof(path), "%s/live", state);
    LC_CHECK(stat(path, &st) < 0 && errno == ENOENT);
  }
  lc_cluster_type_find("command")->release(m, w);
  rmdir(state);
  LC_CHECK(access(state, F_OK) < 0); /* nothing else was in it */
}

int main(void) {
  static const lc_test_case tests[] = {LC_TEST(test_status_of_a_live_cluster)};
  lc_runtime *local = NULL;
  int r;
  signal(SIGPIPE, SIG_IGN);
  if (getenv("LC_CTL") == NULL || realpath(getenv("LC_CTL"), ctl_path) == NULL) {
    fprintf(stderr, "FATAL: LC_CTL must name lazyclusterctl\n");
    return 2;
  }
  if (lc_engine_new(&engine, NULL) < 0 || lc_group_new(&group, engine, NULL) < 0 ||
      lc_runtime_new_local(&local, engine, NULL) < 0 || lc_group_add(group, local) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), 0, NULL);
  lc_group_free(group);
  lc_engine_free(engine);
  return r;
}
