/*
 * test_cluster_place.c - placement and staging of command clusters on real test hosts.
 * Placement: spread and pack on two hosts with 8 declared GPUs each (what each worker sees in
 * CUDA_VISIBLE_DEVICES, written by the worker into its directory), the per-host cap (also for
 * workers added later), a CPU-only host beside a GPU host (never a GPU worker), the master's host
 * excluded, and lazyclusterctl start's --placement, --max-workers-per-host,
 * --no-worker-on-master-host with GPUs declared in an inventory (gpus=8).
 * Staging: prepare_host runs once per host over two starts, prepare_worker once per worker before
 * it starts (in its directory), and a failing step fails the start naming the host and the step,
 * with nothing left on any host (no process, no worker directory).
 */
#include "clusterenv.h"
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

static lc_engine *engine;
static char ctl[4096];
static char master_tmpl[4200];

/* A worker writes its GPU environment into its directory, then serves. */
static const char *worker_tmpl =
    "(env | grep -E '^CUDA_VISIBLE_DEVICES=' || echo unset) > gpu.txt; "
    "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}";
static const char *remote_master_tmpl = "exec ~/lcbin/lazyclusterctl serve {master_port} master";

/* A group of the named test hosts (NULL-terminated). */
static lc_group *group_of(const char *const *names) {
  lc_group *g = NULL;
  lc_group_report *rep = NULL;
  lc_runtime_options ro = th_options();
  size_t n = 0;
  while (names[n] != NULL)
    n++;
  if (lc_group_new(&g, engine, NULL) < 0 || lc_group_connect(&rep, g, names, n, &ro) < 0 ||
      lc_group_report_failures(rep) != 0) {
    fprintf(stderr, "  group: %s %s\n", lc_error_last(),
            rep ? lc_group_report_message(rep, 0) : "");
    lc_group_report_free(rep);
    lc_group_free(g);
    return NULL;
  }
  lc_group_report_free(rep);
  return g;
}

/* The output of command on runtime rt, first line, or "". */
static void exec_on(char *out, size_t size, lc_runtime *rt, const char *command) {
  collect col = {0};
  lc_exec_result res;
  out[0] = '\0';
  if (rt != NULL && collect_exec(&col, &res, rt, command, NULL) == 0 && col.text[0] != NULL)
    snprintf(out, size, "%s", col.text[0]);
  collect_free(&col);
}

/* What worker i of c wrote into gpu.txt. */
static void worker_gpu_env(char *out, size_t size, lc_group *g, lc_cluster *c, size_t i) {
  const lc_worker_info *w = lc_cluster_worker(c, i);
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "cat '%s/gpu.txt'", w->workdir);
  exec_on(out, size, lc_group_find(g, w->host), cmd);
}

/* Worker i of c is on host with gpu, and its environment says so. */
static void check_worker(lc_group *g, lc_cluster *c, size_t i, const char *host, int gpu) {
  const lc_worker_info *w = lc_cluster_worker(c, i);
  char text[512], want[64];
  LC_REQUIRE(w != NULL);
  if (strcmp(w->host, host) != 0 || w->gpu != gpu)
    fprintf(stderr, "  worker %zu: %s gpu %d, want %s gpu %d\n", i, w->host, w->gpu, host, gpu);
  LC_CHECK_STR(w->host, host);
  LC_CHECK(w->gpu == gpu);
  worker_gpu_env(text, sizeof(text), g, c, i);
  if (gpu >= 0) {
    snprintf(want, sizeof(want), "CUDA_VISIBLE_DEVICES=%d\n", gpu);
    LC_CHECK_STR(text, want);
  } else if (strcmp(text, "unset\n") != 0) { /* a CPU worker sees no GPU */
    LC_CHECK_STR(text, "CUDA_VISIBLE_DEVICES=-1\n");
  }
}

/* Processes of the cluster's serve on ports starting with port_prefix, here and on every test
 * host (they share this machine's pid namespace). */
static int serving(const char *port_prefix) {
  char pattern[128];
  snprintf(pattern, sizeof(pattern), "lazyclusterctl serve %s", port_prefix);
  return th_each_local_proc("cmdline", th_cmdline_matches, pattern);
}

/* Whether every such process has ended (a stopped process ends after its lifeline's grace). */
static int gone(const char *port_prefix) {
  for (int i = 0; i < 100 && serving(port_prefix) > 0; i++)
    usleep(100 * 1000);
  return serving(port_prefix) == 0;
}

/* Four workers on two hosts with 8 GPUs each, by policy. */
static void test_spread_and_pack(void) {
  const char *names[] = {"lab0", "lab1", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL);
  lc_runtime_set_resources(lc_group_find(g, "lab0"), 8, 0);
  lc_runtime_set_resources(lc_group_find(g, "lab1"), 8, 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 62000;
  o.worker_ports = "62001-62100";
  /* spread, the default: 2 + 2, GPUs 0 and 1 of each */
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 4));
  check_worker(g, c, 0, "lab0", 0);
  check_worker(g, c, 1, "lab1", 0);
  check_worker(g, c, 2, "lab0", 1);
  check_worker(g, c, 3, "lab1", 1);
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-3 goes to GPU 1 of lab1 (spread)");
  /* workers added later continue the policy */
  LC_REQUIRE_OK(lc_cluster_start_workers(c, 1));
  check_worker(g, c, 4, "lab0", 2);
  lc_cluster_free(c);
  LC_CHECK(gone("620"));
  /* pack: 4 on the first */
  o.placement = LC_PLACE_PACK;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 4));
  for (size_t i = 0; i < 4; i++)
    check_worker(g, c, i, "lab0", (int)i);
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-2 goes to GPU 2 of lab0 (pack)");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* pack with a cap of 3 per host: 3 + 1; more than the cap allows is refused, naming it. */
static void test_cap_per_host(void) {
  const char *names[] = {"lab0", "lab1", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL);
  lc_runtime_set_resources(lc_group_find(g, "lab0"), 8, 0);
  lc_runtime_set_resources(lc_group_find(g, "lab1"), 8, 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 62100;
  o.worker_ports = "62101-62200";
  o.placement = LC_PLACE_PACK;
  o.max_workers_per_host = 3;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 4));
  for (size_t i = 0; i < 3; i++)
    check_worker(g, c, i, "lab0", (int)i);
  check_worker(g, c, 3, "lab1", 0);
  LC_CHECK(lc_cluster_start_workers(c, 3) == -ENOSPC);
  LC_CHECK_CONTAINS(lc_error_last(),
                    "no host may take worker 6: every host has the cap of 3 "
                    "workers (max_workers_per_host 3; workers now: lab0 3, lab1 3)");
  LC_CHECK(lc_cluster_worker_count(c) == 4);
  LC_CHECK(serving("621") == 5); /* the master and 4 workers: the refused start left nothing */
  LC_CHECK(lc_cluster_wait(c, 0) == -ETIMEDOUT);
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* A CPU-only host beside a GPU host: its workers never get a GPU, also once GPUs are shared. */
static void test_cpu_host_never_gets_gpu(void) {
  const char *names[] = {"lab0", "lab2", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL);
  lc_runtime_set_resources(lc_group_find(g, "lab0"), 1, 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  o.master_port = 62200;
  o.worker_ports = "62201-62300";
  o.placement = LC_PLACE_PACK;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 4));
  check_worker(g, c, 0, "lab0", 0);
  check_worker(g, c, 1, "lab2", -1);
  check_worker(g, c, 2, "lab0", 0); /* round 2: the GPU is shared, and the log says so */
  check_worker(g, c, 3, "lab2", -1);
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-2 goes to GPU 0 of lab0 (pack; shared with 1 "
                                       "other worker: every slot has one)");
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-1 goes to lab2, no GPU (pack)");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* The master on lab0 and its host excluded: every worker on lab1; with lab0 alone, refused. */
static void test_master_host_excluded(void) {
  const char *names[] = {"lab0", "lab1", NULL}, *one[] = {"lab0", NULL};
  lc_group *g = group_of(names), *g1 = group_of(one);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE(g != NULL && g1 != NULL);
  LC_REQUIRE_OK(th_command_type(&m, &w, remote_master_tmpl, worker_tmpl));
  o.master_host = "lab0";
  o.master_port = 62300;
  o.worker_ports = "62301-62400";
  o.exclude_master_host = 1;
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, w, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 3));
  LC_CHECK_STR(lc_cluster_master_host(c), "lab0");
  for (size_t i = 0; i < 3; i++)
    check_worker(g, c, i, "lab1", -1);
  lc_cluster_free(c);
  LC_REQUIRE_OK(lc_cluster_new(&c, g1, m, w, &o));
  LC_CHECK(lc_cluster_start(c, 1) == -ENOSPC);
  LC_CHECK_STR(lc_error_last(), "cluster: no host may take worker 0: the master's host lab0 is "
                                "excluded (exclude_master_host) and the group has no other host");
  LC_CHECK(gone("623")); /* the master it had started is gone */
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
  lc_group_free(g1);
}

/* A type's place: the last slot it is offered; or a position that is no slot. */
typedef struct placing {
  lc_worker_launcher own; /* the command type's, copied, with place */
  int bad;
} placing;

static int place_last(lc_worker_launcher *self, lc_cluster *cluster, int index,
                      const lc_slot *slots, size_t nslots) {
  placing *p = (placing *)self;
  (void)cluster;
  (void)index;
  (void)slots;
  return p->bad ? (int)nslots + 5 : (int)nslots - 1;
}

/* The worker launcher's place decides; an index that is no slot fails the start, naming it. */
static void test_place_hook(void) {
  const char *names[] = {"lab0", "lab1", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  placing p;
  LC_REQUIRE(g != NULL);
  lc_runtime_set_resources(lc_group_find(g, "lab1"), 4, 0);
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  memset(&p, 0, sizeof(p));
  p.own = *w;
  p.own.version = LC_WORKER_LAUNCHER_VERSION;
  p.own.place = place_last;
  o.master_port = 62700;
  o.worker_ports = "62701-62800";
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, &p.own, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 2));
  check_worker(g, c, 0, "lab1", 3);
  check_worker(g, c, 1, "lab1", 3);
  LC_CHECK_CONTAINS(lc_cluster_log(c), "worker-1 goes to GPU 3 of lab1 (the type's place; shared "
                                       "with 1 other worker");
  p.bad = 1;
  LC_CHECK(lc_cluster_start_workers(c, 1) == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "cluster: the worker launcher's place returned 10 for worker 2, "
                                "which is not a slot (there are 5: 0-4)");
  LC_CHECK(lc_cluster_worker_count(c) == 2);
  lc_cluster_free(c);
  LC_CHECK(gone("627"));
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* ---- staging -------------------------------------------------------------------------------- */

/* The command type's worker launcher with staging hooks of this test. */
typedef struct staging {
  lc_worker_launcher own; /* the command type's, copied, with our hooks */
  int host_calls, worker_calls;
  int fail_worker;    /* prepare_worker of this index adds a failing step; -1: none */
  int fail_host_send; /* prepare_host sends a file that does not exist */
  char marker[64];    /* the file in ~ that prepare_host appends to */
} staging;

static int prepare_host(lc_worker_launcher *self, lc_cluster *cluster, const char *host,
                        const char *workdir, lc_task *task) {
  staging *s = (staging *)self; /* own is the first member */
  char cmd[4400], path[4200];
  (void)cluster;
  s->host_calls++;
  snprintf(cmd, sizeof(cmd), "echo %s >> ~/%s", host, s->marker);
  snprintf(path, sizeof(path), "%s/host-staged.txt", workdir);
  if (s->fail_host_send && strcmp(host, "lab1") == 0)
    return lc_task_add_send(task, "/nonexistent/lc-staging-file", path);
  if (lc_task_add_run(task, cmd) < 0)
    return -ENOMEM;
  return lc_task_add_write(task, path, host, strlen(host), 0644);
}

static int prepare_worker(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                          lc_task *task) {
  staging *s = (staging *)self;
  char path[4200], text[64];
  (void)cluster;
  s->worker_calls++;
  if (w->index == s->fail_worker)
    return lc_task_add_run(task, "echo no staging today >&2; exit 3");
  snprintf(path, sizeof(path), "%s/staged.txt", w->workdir);
  snprintf(text, sizeof(text), "worker-%d gpu %d", w->index, w->gpu);
  return lc_task_add_write(task, path, text, strlen(text), 0600);
}

static void staging_init(staging *s, const lc_worker_launcher *base, const char *marker) {
  memset(s, 0, sizeof(*s));
  s->own = *base;
  s->own.version = LC_WORKER_LAUNCHER_VERSION;
  s->own.prepare_host = prepare_host;
  s->own.prepare_worker = prepare_worker;
  s->fail_worker = -1;
  snprintf(s->marker, sizeof(s->marker), "%s", marker);
}

/* Lines of ~/marker on host i. */
static int marker_lines(lc_group *g, const char *host, const char *marker) {
  char cmd[256], out[64];
  snprintf(cmd, sizeof(cmd), "cat ~/%s 2>/dev/null | wc -l", marker);
  exec_on(out, sizeof(out), lc_group_find(g, host), cmd);
  return atoi(out);
}

/* Worker directories of c's hosts: "worker-*" under each runtime's working directory. */
static int worker_dirs(lc_group *g) {
  int n = 0;
  for (size_t i = 0; i < lc_group_count(g); i++) {
    const char *wd = NULL;
    char cmd[4200], out[64];
    if (lc_runtime_workdir(&wd, lc_group_at(g, i)) < 0)
      return -1;
    snprintf(cmd, sizeof(cmd), "ls -d '%s'/worker-* 2>/dev/null | wc -l", wd);
    exec_on(out, sizeof(out), lc_group_at(g, i), cmd);
    n += atoi(out);
  }
  return n;
}

/* prepare_host once per host over two starts; prepare_worker once per worker, before it runs. */
static void test_prepare_hooks(void) {
  const char *names[] = {"lab0", "lab1", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  staging s;
  char text[512], cmd[4400];
  LC_REQUIRE(g != NULL);
  exec_on(text, sizeof(text), lc_group_find(g, "lab0"), "rm -f ~/lc-staged-ok");
  exec_on(text, sizeof(text), lc_group_find(g, "lab1"), "rm -f ~/lc-staged-ok");
  /* the worker shows what its staging left before it started */
  LC_REQUIRE_OK(
      th_command_type(&m, &w, master_tmpl,
                      "cat staged.txt > seen.txt 2>&1; cat ../host-staged.txt >> seen.txt; "
                      "exec ~/lcbin/lazyclusterctl serve {worker_port} w{worker_index}"));
  staging_init(&s, w, "lc-staged-ok");
  o.master_port = 62400;
  o.worker_ports = "62401-62500";
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, &s.own, &o));
  LC_REQUIRE_OK(lc_cluster_start(c, 1)); /* lab0 only */
  LC_CHECK(s.host_calls == 1 && s.worker_calls == 1);
  LC_CHECK(marker_lines(g, "lab0", s.marker) == 1);
  LC_CHECK(marker_lines(g, "lab1", s.marker) == 0);
  LC_REQUIRE_OK(lc_cluster_start_workers(c, 3)); /* lab1, lab0, lab1: lab1 prepared now */
  LC_CHECK(s.host_calls == 2 && s.worker_calls == 4);
  LC_CHECK(marker_lines(g, "lab0", s.marker) == 1);
  LC_CHECK(marker_lines(g, "lab1", s.marker) == 1);
  for (size_t i = 0; i < 4; i++) {
    const lc_worker_info *wi = lc_cluster_worker(c, i);
    char want[128];
    snprintf(cmd, sizeof(cmd), "cat '%s/seen.txt'", wi->workdir);
    exec_on(text, sizeof(text), lc_group_find(g, wi->host), cmd);
    snprintf(want, sizeof(want), "worker-%d gpu -1%s\n", wi->index, wi->host);
    LC_CHECK_STR(text, want);
  }
  LC_CHECK_CONTAINS(lc_cluster_log(c), "lab1: prepare_host done in");
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* A failing prepare_worker step, then a failing prepare_host step: the start fails naming host
 * and step, and leaves no process and no worker directory; the next start prepares again. */
static void test_prepare_failures(void) {
  const char *names[] = {"lab0", "lab1", NULL};
  lc_group *g = group_of(names);
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  staging s;
  char text[64];
  LC_REQUIRE(g != NULL);
  exec_on(text, sizeof(text), lc_group_find(g, "lab0"), "rm -f ~/lc-staged-fail");
  exec_on(text, sizeof(text), lc_group_find(g, "lab1"), "rm -f ~/lc-staged-fail");
  LC_REQUIRE_OK(th_command_type(&m, &w, master_tmpl, worker_tmpl));
  staging_init(&s, w, "lc-staged-fail");
  s.fail_worker = 1;
  o.master_port = 62500;
  o.worker_ports = "62501-62600";
  LC_REQUIRE_OK(lc_cluster_new(&c, g, m, &s.own, &o));
  LC_CHECK(lc_cluster_start(c, 2) == LC_EREMOTE);
  LC_CHECK_STR(lc_error_last(), "cluster: staging on lab1 failed: step 1 of prepare_worker-1: "
                                "lab1: 'echo no staging today >&2; exit 3' exited with status 3");
  LC_CHECK(lc_cluster_worker_count(c) == 0);
  LC_CHECK(gone("625"));
  LC_CHECK(worker_dirs(g) == 0);
  /* the hosts of the failed start are prepared again, and a send that fails is named */
  s.fail_worker = -1;
  s.fail_host_send = 1;
  LC_CHECK(lc_cluster_start(c, 2) < 0);
  LC_CHECK_CONTAINS(lc_error_last(), "cluster: staging on lab1 failed: step 1 of prepare_host: ");
  LC_CHECK_CONTAINS(lc_error_last(), "/nonexistent/lc-staging-file");
  LC_CHECK(s.host_calls == 4);
  LC_CHECK(gone("625"));
  LC_CHECK(worker_dirs(g) == 0);
  /* and the same cluster starts once staging works */
  s.fail_host_send = 0;
  LC_CHECK_OK(lc_cluster_start(c, 2));
  LC_CHECK(s.host_calls == 6);
  LC_CHECK(marker_lines(g, "lab0", s.marker) == 3);
  LC_CHECK(worker_dirs(g) == 2);
  lc_cluster_free(c);
  th_command_type_free(m, w);
  lc_group_free(g);
}

/* lazyclusterctl to the three hosts' ~/lcbin. */
static int ship_binary(void) {
  const char *names[] = {"lab0", "lab1", "lab2", NULL};
  lc_group *g = group_of(names);
  int r = th_ship_ctl(g, ctl);
  lc_group_free(g);
  return r;
}

/* ---- lazyclusterctl ------------------------------------------------------------------------- */

/* lazyclusterctl start -F CONFIG args..., stopped with SIGINT once ready; its exit status. */
static int run_start(const char *const *args, char *out, size_t size) {
  const char *argv[64] = {"start", "-F", th_config()};
  int n = 3;
  for (; *args != NULL && n < 63; args++)
    argv[n++] = *args;
  argv[n] = NULL;
  return th_run_ctl(ctl, argv, 1, out, size);
}

/* run_start of n workers over the inventory inv with the master's command master, the test's
 * worker template and ports, and extra flags (NULL-terminated). */
static int run_placed(const char *inv, const char *n, const char *master, const char *const *extra,
                      char *out, size_t size) {
  const char *args[32] = {"--inventory",   inv,     "--workers",    n,
                          "--master-port", "62600", "--ports",      "62601-62700",
                          "--master-cmd",  master,  "--worker-cmd", worker_tmpl};
  int k = 12;
  for (; *extra != NULL && k < 31; extra++)
    args[k++] = *extra;
  args[k] = NULL;
  return run_start(args, out, size);
}

/* GPUs declared in an inventory; the placement flags, their defaults and their bad values. */
static void test_cli_placement(void) {
  static const char *const none[] = {NULL};
  static const char *const pack_cap3[] = {"--placement", "pack", "--max-workers-per-host", "3",
                                          NULL};
  static const char *const off_master[] = {"--master-host", "lab0", "--no-worker-on-master-host",
                                           NULL};
  static const char *const cap4[] = {"--max-workers-per-host", "4", NULL};
  char inv[4200], out[16384];
  FILE *f;
  snprintf(inv, sizeof(inv), "%s/place-inventory", th_dir());
  LC_REQUIRE((f = fopen(inv, "w")) != NULL);
  fprintf(f, "lab0 gpus=8\nlab1 gpus=8\n");
  fclose(f);
  LC_CHECK(run_placed(inv, "4", master_tmpl, none, out, sizeof(out)) == 0);
  LC_CHECK_CONTAINS(out, "worker-0   localhost:");
  LC_CHECK(strstr(out, " on lab0 gpu 0\nworker-1 ") != NULL);
  LC_CHECK(strstr(out, " on lab1 gpu 0\nworker-2 ") != NULL);
  LC_CHECK(strstr(out, " on lab0 gpu 1\nworker-3 ") != NULL);
  LC_CHECK(strstr(out, " on lab1 gpu 1\nready:") != NULL);
  LC_CHECK(run_placed(inv, "4", master_tmpl, pack_cap3, out, sizeof(out)) == 0);
  LC_CHECK(strstr(out, " on lab0 gpu 2\nworker-3 ") != NULL);
  LC_CHECK(strstr(out, " on lab1 gpu 0\nready:") != NULL);
  LC_CHECK(run_placed(inv, "2", remote_master_tmpl, off_master, out, sizeof(out)) == 0);
  LC_CHECK(strstr(out, " on lab1 gpu 0\nworker-1 ") != NULL);
  LC_CHECK(strstr(out, " on lab1 gpu 1\nready:") != NULL);
  LC_CHECK(run_placed(inv, "9", master_tmpl, cap4, out, sizeof(out)) == 1);
  LC_CHECK_CONTAINS(out, "no host may take worker 8: every host has the cap of 4 workers");
  {
    const char *args[] = {"--workers", "1", "--placement", "round-robin", NULL};
    LC_CHECK(run_start(args, out, sizeof(out)) == 2);
    LC_CHECK_CONTAINS(out, "--placement round-robin: want spread or pack");
  }
  {
    const char *args[] = {"--workers", "1", "--max-workers-per-host", "0", NULL};
    LC_CHECK(run_start(args, out, sizeof(out)) == 2);
    LC_CHECK_CONTAINS(out, "--max-workers-per-host 0: want a number, 1 or more");
  }
  {
    const char *args[] = {"--help", NULL};
    LC_CHECK(run_start(args, out, sizeof(out)) == 0);
    LC_CHECK_CONTAINS(out, "--placement P           spread (default");
    LC_CHECK_CONTAINS(out, "--max-workers-per-host N  at most N workers on one host (default: "
                           "no cap)");
    LC_CHECK_CONTAINS(out, "--no-worker-on-master-host");
  }
  LC_CHECK(gone("626"));
  unlink(inv);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_spread_and_pack),
      LC_TEST(test_cap_per_host),
      LC_TEST(test_cpu_host_never_gets_gpu),
      LC_TEST(test_master_host_excluded),
      LC_TEST(test_place_hook),
      LC_TEST(test_prepare_hooks),
      LC_TEST(test_prepare_failures),
      LC_TEST(test_cli_placement),
  };
  int r;
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  if (lc_engine_new(&engine, NULL) < 0 || ship_binary() < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
