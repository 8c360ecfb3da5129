/*
 * test_discover.c - the manager on real test hosts: candidates from the ssh config, a list and an
 * inventory; 8 hosts of which one has its link down and one refuses the key (the right partition
 * and reasons, within the connect timeout); filters on GPUs, memory, cores and executables.
 */
#include "lc_test.h"
#include "testenv.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static lc_engine *engine;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static size_t find(const lc_discovery *d, const char *host) {
  for (size_t i = 0; i < lc_discovery_count(d); i++)
    if (strcmp(lc_discovery_host(d, i), host) == 0)
      return i;
  return (size_t)-1;
}

/* A copy of the test hosts' config where lab6 offers a key no host accepts, plus a pattern. */
static const char *partition_config(void) {
  static char cfg[4200];
  char cmd[9000];
  snprintf(cfg, sizeof(cfg), "%s/discover_config", th_dir());
  snprintf(cmd, sizeof(cmd),
           "set -e; d=%s; rm -f $d/wrong_key $d/wrong_key.pub; "
           "ssh-keygen -q -t ed25519 -N '' -f $d/wrong_key; "
           "{ printf 'Host *.example\\n  User nobody\\n'; sed '/^Host lab6$/,/^$/ "
           "s|IdentityFile .*|IdentityFile '$d'/wrong_key|' $d/ssh_config; } > %s",
           th_dir(), cfg);
  return system(cmd) == 0 ? cfg : NULL;
}

static void test_partition_from_config(void) {
  lc_runtime_options ro = th_options();
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  uint64_t t0;
  size_t i;
  LC_REQUIRE((ro.ssh_config = partition_config()) != NULL);
  ro.connect_timeout_ms = 2000;
  o.runtime = &ro;
  LC_REQUIRE(th_run("link-down 7") == 0);
  t0 = now_ms();
  LC_CHECK_OK(lc_discover(&g, &d, engine, &o));
  fprintf(stderr, "  discovery of 8 hosts took %.2f s\n", (double)(now_ms() - t0) / 1000.0);
  th_run("link-up 7");
  LC_REQUIRE(d != NULL && g != NULL);
  LC_CHECK(now_ms() - t0 < 2000 + 8000); /* a hang guard, not a timing: one timeout, not 8 */
  LC_CHECK(lc_discovery_count(d) == 8);  /* every lab alias; no pattern */
  LC_CHECK(lc_group_count(g) == 6);
  LC_REQUIRE((i = find(d, "lab7")) != (size_t)-1);
  LC_CHECK(lc_discovery_state(d, i) == LC_HOST_UNREACHABLE);
  LC_CHECK(lc_discovery_error(d, i) == -ETIMEDOUT);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "lab7");
  LC_REQUIRE((i = find(d, "lab6")) != (size_t)-1);
  LC_CHECK(lc_discovery_state(d, i) == LC_HOST_UNREACHABLE);
  LC_CHECK(lc_discovery_error(d, i) == LC_EAUTH);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "authentication");
  LC_REQUIRE((i = find(d, "lab0")) != (size_t)-1);
  LC_CHECK(lc_discovery_state(d, i) == LC_HOST_READY);
  LC_CHECK(lc_discovery_latency(d, i) > 0);
  LC_CHECK(lc_discovery_info(d, i) == NULL); /* no facts asked, none read */
  LC_CHECK(lc_group_find(g, "lab6") == NULL && lc_group_find(g, "lab5") != NULL);
  lc_discovery_free(d);
  lc_group_free(g);
}

static void test_inventory_and_filters(void) {
  lc_runtime_options ro = th_options();
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  char inv[4200], cmd[8600];
  const char *need[] = {"sh", NULL}, *missing[] = {"sh", "no-such-exe", NULL};
  size_t i;
  snprintf(inv, sizeof(inv), "%s/inventory", th_dir());
  snprintf(cmd, sizeof(cmd),
           "printf '# test inventory\\nlab0 gpus=2 slots=4\\nlab1\\n\\nlab2 slots=2\\n' > %s", inv);
  LC_REQUIRE(system(cmd) == 0);
  o.runtime = &ro;
  o.inventory = inv;
  o.min_gpus = 1;
  o.executables = need;
  LC_REQUIRE_OK(lc_discover(&g, &d, engine, &o));
  LC_CHECK(lc_discovery_count(d) == 3);
  LC_CHECK(lc_group_count(g) == 1);
  LC_REQUIRE((i = find(d, "lab0")) != (size_t)-1);
  LC_CHECK(lc_discovery_state(d, i) == LC_HOST_READY);
  LC_CHECK(lc_discovery_declared_gpus(d, i) == 2 && lc_discovery_slots(d, i) == 4);
  LC_CHECK(lc_discovery_info(d, i) != NULL && lc_hostinfo_gpu_count(lc_discovery_info(d, i)) == 2);
  LC_REQUIRE((i = find(d, "lab1")) != (size_t)-1);
  LC_CHECK(lc_discovery_state(d, i) == LC_HOST_FILTERED);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, i), "GPUs");
  LC_CHECK(lc_discovery_info(d, i) != NULL && lc_hostinfo_cores(lc_discovery_info(d, i)) >= 1);
  lc_discovery_free(d);
  lc_group_free(g);

  /* memory, cores and executables */
  o.min_gpus = 0;
  o.hosts = "lab3,lab4";
  o.executables = missing;
  LC_REQUIRE_OK(lc_discover(&g, &d, engine, &o));
  LC_CHECK(lc_group_count(g) == 0);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, 0), "no-such-exe");
  lc_discovery_free(d);
  lc_group_free(g);
  o.executables = NULL;
  o.min_memory_bytes = (uint64_t)1 << 50;
  LC_REQUIRE_OK(lc_discover(&g, &d, engine, &o));
  LC_CHECK(lc_group_count(g) == 0);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, 1), "memory");
  lc_discovery_free(d);
  lc_group_free(g);
  o.min_memory_bytes = 0;
  o.min_cores = 100000;
  LC_REQUIRE_OK(lc_discover(&g, &d, engine, &o));
  LC_CHECK(lc_group_count(g) == 0);
  LC_CHECK_CONTAINS(lc_discovery_reason(d, 0), "cores");
  lc_discovery_free(d);
  lc_group_free(g);
}

static void test_bad_inventory(void) {
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT;
  lc_runtime_options ro = th_options();
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  char inv[4200], cmd[8600];
  snprintf(inv, sizeof(inv), "%s/bad_inventory", th_dir());
  snprintf(cmd, sizeof(cmd), "printf 'lab0\\nlab1 gpus=many\\n' > %s", inv);
  LC_REQUIRE(system(cmd) == 0);
  o.runtime = &ro;
  o.inventory = inv;
  LC_CHECK(lc_discover(&g, &d, engine, &o) == LC_ECONFIG);
  LC_CHECK_CONTAINS(lc_error_last(), ":2:");
  LC_CHECK(g == NULL && d == NULL);
  o.inventory = "/no/such/inventory";
  LC_CHECK(lc_discover(&g, &d, engine, &o) == -ENOENT);
  LC_CHECK_CONTAINS(lc_error_last(), "/no/such/inventory");
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {LC_TEST(test_partition_from_config),
                                       LC_TEST(test_inventory_and_filters),
                                       LC_TEST(test_bad_inventory)};
  int r;
  signal(SIGPIPE, SIG_IGN);
  if (lc_engine_new(&engine, NULL) < 0)
    return 2;
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_engine_free(engine);
  return r;
}
