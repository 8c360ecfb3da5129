/*
 * test_placement.c - where workers go (lc__place, a pure function): spread and pack over GPU
 * hosts, mixed GPU and CPU hosts, declared slots, another round once every slot is used, the cap
 * per host, the master's host excluded, workers added to those placed already, a type's place
 * hook (a valid index, one out of range, an error), and the messages of each refusal. No hosts.
 */
#include "cluster/cluster_internal.h"
#include "lc_test.h"

#include <errno.h>

#define N 16

/* Places n workers after first placed ones; returns lc__place's result. */
static int place(lc__place_in *in, lc__place_spot *spots, size_t first, size_t n,
                 char (*why)[LC__PLACE_WHY]) {
  return lc__place(in, spots, first, n, why);
}

/* spots[i] is host h, GPU g. */
static void check_spot(const lc__place_spot *spots, size_t i, int h, int g) {
  if (spots[i].host != h || spots[i].gpu != g)
    fprintf(stderr, "  worker %zu: host %d gpu %d, want host %d gpu %d\n", i, spots[i].host,
            spots[i].gpu, h, g);
  LC_CHECK(spots[i].host == h && spots[i].gpu == g);
}

static const lc__place_host two_gpu_hosts[] = {{"lab1", 8, 0, 0}, {"lab2", 8, 0, 0}};

static void test_spread_two_gpu_hosts(void) {
  lc__place_in in = {.hosts = two_gpu_hosts, .nhosts = 2, .policy = LC_PLACE_SPREAD};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  LC_REQUIRE_OK(place(&in, spots, 0, 4, why));
  check_spot(spots, 0, 0, 0);
  check_spot(spots, 1, 1, 0);
  check_spot(spots, 2, 0, 1);
  check_spot(spots, 3, 1, 1);
  LC_CHECK_STR(why[0], "GPU 0 of lab1 (spread)");
  LC_CHECK_STR(why[3], "GPU 1 of lab2 (spread)");
}

static void test_pack_two_gpu_hosts(void) {
  lc__place_in in = {.hosts = two_gpu_hosts, .nhosts = 2, .policy = LC_PLACE_PACK};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  LC_REQUIRE_OK(place(&in, spots, 0, 10, why));
  for (int i = 0; i < 8; i++)
    check_spot(spots, (size_t)i, 0, i);
  check_spot(spots, 8, 1, 0);
  check_spot(spots, 9, 1, 1);
  LC_CHECK_STR(why[2], "GPU 2 of lab1 (pack)");
}

/* Workers added later continue the policy, counting those placed already. */
static void test_added_workers_continue(void) {
  lc__place_in in = {.hosts = two_gpu_hosts, .nhosts = 2, .policy = LC_PLACE_SPREAD};
  lc__place_spot spots[N];
  LC_REQUIRE_OK(place(&in, spots, 0, 3, NULL));
  LC_REQUIRE_OK(place(&in, spots, 3, 2, NULL));
  check_spot(spots, 3, 1, 1);
  check_spot(spots, 4, 0, 2);
  /* placed by hand (a type's place earlier): the next ones fill around them */
  spots[0] = (lc__place_spot){1, 0};
  spots[1] = (lc__place_spot){1, 1};
  LC_REQUIRE_OK(place(&in, spots, 2, 2, NULL));
  check_spot(spots, 2, 0, 0);
  check_spot(spots, 3, 0, 1);
}

/* A CPU host has CPU slots (gpu -1), never a GPU slot, also when GPU slots run out. */
static void test_mixed_gpu_and_cpu_hosts(void) {
  static const lc__place_host hosts[] = {{"gpu1", 2, 0, 0}, {"cpu1", 0, 0, 0}, {"cpu2", 0, 3, 0}};
  lc__place_in in = {.hosts = hosts, .nhosts = 3, .policy = LC_PLACE_SPREAD};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  LC_REQUIRE_OK(place(&in, spots, 0, 6, why));
  check_spot(spots, 0, 0, 0);
  check_spot(spots, 1, 1, -1);
  check_spot(spots, 2, 2, -1);
  check_spot(spots, 3, 0, 1);
  check_spot(spots, 4, 2, -1); /* cpu2's second slot: cpu1's one slot is used */
  check_spot(spots, 5, 2, -1);
  LC_CHECK_STR(why[1], "cpu1, no GPU (spread)");
  LC_CHECK_STR(why[4], "CPU slot 1 of cpu2 (spread)");
  in.policy = LC_PLACE_PACK;
  LC_REQUIRE_OK(place(&in, spots, 0, 12, why));
  for (int i = 0; i < 12; i++)
    LC_CHECK(spots[i].gpu == -1 || spots[i].host == 0);
  check_spot(spots, 2, 1, -1);
  check_spot(spots, 3, 2, -1);
  check_spot(spots, 6, 0, 0); /* every slot used: the second round starts at the first */
  LC_CHECK_CONTAINS(why[6], "GPU 0 of gpu1 (pack; shared with 1 other worker");
}

/* More workers than slots: another round, the GPU shared, and said so. */
static void test_more_workers_than_slots(void) {
  static const lc__place_host hosts[] = {{"lab1", 2, 0, 0}, {"lab2", 1, 0, 0}};
  lc__place_in in = {.hosts = hosts, .nhosts = 2, .policy = LC_PLACE_SPREAD};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  LC_REQUIRE_OK(place(&in, spots, 0, 7, why));
  check_spot(spots, 0, 0, 0);
  check_spot(spots, 1, 1, 0);
  check_spot(spots, 2, 0, 1);
  check_spot(spots, 3, 1, 0); /* round 2: lab2 has fewer workers */
  check_spot(spots, 4, 0, 0);
  check_spot(spots, 5, 0, 1);
  check_spot(spots, 6, 1, 0);
  LC_CHECK_STR(why[2], "GPU 1 of lab1 (spread)");
  LC_CHECK_STR(why[3], "GPU 0 of lab2 (spread; shared with 1 other worker: every slot has one)");
  LC_CHECK_CONTAINS(why[6], "shared with 2 other workers");
}

static void test_cap_per_host(void) {
  lc__place_in in = {
      .hosts = two_gpu_hosts, .nhosts = 2, .policy = LC_PLACE_PACK, .max_per_host = 3};
  lc__place_spot spots[N];
  LC_REQUIRE_OK(place(&in, spots, 0, 6, NULL));
  check_spot(spots, 2, 0, 2);
  check_spot(spots, 3, 1, 0);
  check_spot(spots, 5, 1, 2);
  LC_CHECK(place(&in, spots, 6, 1, NULL) == -ENOSPC);
  LC_CHECK_CONTAINS(lc_error_last(), "no host may take worker 6");
  LC_CHECK_CONTAINS(lc_error_last(), "max_workers_per_host 3");
  LC_CHECK_CONTAINS(lc_error_last(), "lab1 3, lab2 3");
  /* a cap above one host's slots on CPU hosts: a second round there, within the cap */
  static const lc__place_host cpu[] = {{"cpu1", 0, 0, 0}};
  lc__place_in one = {.hosts = cpu, .nhosts = 1, .max_per_host = 2};
  LC_REQUIRE_OK(place(&one, spots, 0, 2, NULL));
  LC_CHECK(place(&one, spots, 0, 3, NULL) == -ENOSPC);
  LC_CHECK_CONTAINS(lc_error_last(), "cpu1 2");
}

static void test_exclude_master_host(void) {
  static const lc__place_host hosts[] = {{"lab1", 2, 0, 1}, {"lab2", 0, 0, 0}};
  lc__place_in in = {.hosts = hosts, .nhosts = 2, .exclude_master = 1};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  LC_REQUIRE_OK(place(&in, spots, 0, 3, why));
  for (int i = 0; i < 3; i++)
    check_spot(spots, (size_t)i, 1, -1);
  LC_CHECK_CONTAINS(why[1], "shared");
  /* with the cap too: the message names both */
  in.max_per_host = 1;
  LC_CHECK(place(&in, spots, 1, 1, NULL) == -ENOSPC);
  LC_CHECK_CONTAINS(lc_error_last(), "lab2 1");
  LC_CHECK_CONTAINS(lc_error_last(), "the master's host lab1 is excluded");
  /* one host, the master's */
  in.nhosts = 1;
  in.max_per_host = 0;
  LC_CHECK(place(&in, spots, 0, 1, NULL) == -ENOSPC);
  LC_CHECK_STR(lc_error_last(), "cluster: no host may take worker 0: the master's host lab1 is "
                                "excluded (exclude_master_host) and the group has no other host");
  in.exclude_master = 0;
  LC_REQUIRE_OK(place(&in, spots, 0, 1, NULL));
  check_spot(spots, 0, 0, 0);
}

static void test_no_hosts(void) {
  lc__place_in in = {.nhosts = 0};
  lc__place_spot spots[N];
  LC_CHECK(place(&in, spots, 0, 1, NULL) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "no host to place workers on");
}

/* A type's place: returns the last slot (checks what it is offered), or what arg says. */
static int hook_calls;
static int hook(void *arg, int index, const lc_slot *slots, size_t nslots) {
  int want = *(int *)arg;
  hook_calls++;
  if (want == -100)
    return lc__error_set(-EPERM, "worker %d may not start today", index);
  if (want >= 0)
    return want;
  /* every slot is offered, with its use; lab1 is the master's and excluded */
  for (size_t s = 0; s < nslots; s++)
    LC_CHECK_STR(slots[s].host, "lab2");
  return (int)nslots - 1;
}

static void test_place_hook(void) {
  static const lc__place_host hosts[] = {{"lab1", 2, 0, 1}, {"lab2", 4, 0, 0}};
  int want = -1;
  lc__place_in in = {
      .hosts = hosts, .nhosts = 2, .exclude_master = 1, .hook = hook, .hook_arg = &want};
  lc__place_spot spots[N];
  char why[N][LC__PLACE_WHY];
  hook_calls = 0;
  LC_REQUIRE_OK(place(&in, spots, 0, 2, why));
  LC_CHECK(hook_calls == 2);
  check_spot(spots, 0, 1, 3);
  check_spot(spots, 1, 1, 3);
  LC_CHECK_STR(why[0], "GPU 3 of lab2 (the type's place)");
  LC_CHECK_CONTAINS(why[1], "shared with 1 other worker");
  want = 4;
  LC_CHECK(place(&in, spots, 2, 1, NULL) == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "cluster: the worker launcher's place returned 4 for worker 2, "
                                "which is not a slot (there are 4: 0-3)");
  want = -100;
  LC_CHECK(place(&in, spots, 2, 1, NULL) == -EPERM);
  LC_CHECK_STR(lc_error_last(), "cluster: the worker launcher's place failed for worker 2: "
                                "worker 2 may not start today");
}

LC_TEST_MAIN(LC_TEST(test_spread_two_gpu_hosts), LC_TEST(test_pack_two_gpu_hosts),
             LC_TEST(test_added_workers_continue), LC_TEST(test_mixed_gpu_and_cpu_hosts),
             LC_TEST(test_more_workers_than_slots), LC_TEST(test_cap_per_host),
             LC_TEST(test_exclude_master_host), LC_TEST(test_no_hosts), LC_TEST(test_place_hook))
