/*
 * test_nofile.c - open files for a start (src/cluster/nofile.c): with RLIMIT_NOFILE at 64:64 a
 * start of 30 workers with the mesh on 2 hosts fails before anything starts, naming the limit,
 * the need and how to raise it, and nothing is left on any host; at soft 64 / hard 4096 the soft
 * limit is raised to 4096 and the same start works, then everything goes. The tunnel mesh of
 * the command type (expose=mesh): every worker's port on every host. Each case runs in a child
 * process that sets its limits before its engine starts (lowering a hard limit is for good).
 */
#include "clusterenv.h"
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define HOSTS 2
#define WORKERS 30

static lc_engine *engine;
static lc_group *group;
static char ctl[4096], master_tmpl[4200], worker_tmpl[4200];
static const char *hosts[] = {"lab0", "lab1"};

/* Runs fn in a child whose RLIMIT_NOFILE is soft:hard from its start, with its own engine and
 * group; returns its failures (the child's exit status). */
static int in_child(void (*fn)(void), rlim_t soft, rlim_t hard) {
  int st = -1;
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      _exit(3);
    th_group_setup(&engine, &group, hosts, HOSTS, ctl);
    fn();
    lc_group_free(group);
    lc_engine_free(engine);
    _exit(lc_test_failed_now ? 1 : 0);
  }
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_hard_limit_too_low(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  LC_REQUIRE_OK(th_command_type_with(&m, &w, master_tmpl, worker_tmpl, "expose=mesh"));
  o.master_port = 61500;
  o.worker_ports = "61501-61599";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  LC_CHECK(lc_cluster_start(c, WORKERS) == -EMFILE);
  fprintf(stderr, "  %s\n", lc_error_last());
  LC_CHECK_CONTAINS(lc_error_last(), "30 workers on 2 hosts need about ");
  LC_CHECK_CONTAINS(lc_error_last(), "RLIMIT_NOFILE: soft 64, hard 64");
  LC_CHECK_CONTAINS(lc_error_last(), "ulimit -n ");
  LC_CHECK_CONTAINS(lc_error_last(), "limits.conf");
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 615") == 0); /* nothing started */
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 615") == 0);
  th_command_type_free(m, w);
}

static void test_soft_limit_raised(void) {
  lc_master_launcher *m = NULL;
  lc_worker_launcher *w = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  struct rlimit now;
  int r;
  LC_REQUIRE_OK(th_command_type_with(&m, &w, master_tmpl, worker_tmpl, "expose=mesh"));
  o.master_port = 61600;
  o.worker_ports = "61601-61699";
  LC_REQUIRE_OK(lc_cluster_new(&c, group, m, w, &o));
  if ((r = lc_cluster_start(c, WORKERS)) != 0)
    fprintf(stderr, "  start: %s\n", lc_error_last());
  LC_CHECK(r == 0);
  LC_CHECK(getrlimit(RLIMIT_NOFILE, &now) == 0 && now.rlim_cur == 4096 && now.rlim_max == 4096);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == WORKERS + 1);
  lc_cluster_free(c);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == 0);
  th_command_type_free(m, w);
}

static void test_64_64(void) {
  LC_CHECK(in_child(test_hard_limit_too_low, 64, 64) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 615") == 0);
}

static void test_64_4096(void) {
  LC_CHECK(in_child(test_soft_limit_raised, 64, 4096) == 0);
  LC_CHECK(th_count_everywhere(HOSTS, "^serve 616") == 0);
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_64_64),
      LC_TEST(test_64_4096),
  };
  th_ctl_setup(ctl, master_tmpl, sizeof(master_tmpl));
  snprintf(worker_tmpl, sizeof(worker_tmpl), "exec ~/lcbin/lazyclusterctl serve {worker_port} w");
  return lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
