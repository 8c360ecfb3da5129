/*
 * test_plugin_load.c - lc_cluster_type_load called directly: what each refused plug-in returns
 * (the code, *out NULL, the detail), a good one's struct (borrowed, the same on a second load),
 * lc_version_number and lc_error_set. This program links the static library and exports none of
 * it, so a plug-in that calls the API (libmytype.so) cannot load here: the detail says why.
 * The plug-ins' paths come from the environment (tests/integration.plugin.cmake).
 */
#include "lc_test.h"

#include <lazycluster.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env(const char *name) {
  const char *v = getenv(name);
  if (v == NULL) {
    fprintf(stderr, "  %s is not set: run through ctest\n", name);
    lc_test_failed_now = 1;
  }
  return v;
}

/* Loads path, expecting code; *out must come back NULL and the detail name the file. */
static void refused(const char *var, int code, const char *detail) {
  const char *path = env(var);
  const lc_cluster_type *t = (const lc_cluster_type *)&t; /* not NULL: the call must reset it */
  int r;
  if (path == NULL)
    return;
  r = lc_cluster_type_load(&t, path);
  fprintf(stderr, "  %s: %d %s\n", var, r, lc_error_last());
  LC_CHECK(r == code);
  LC_CHECK(t == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), path);
  LC_CHECK_CONTAINS(lc_error_last(), detail);
}

static void test_refused(void) {
  char want[128];
  refused("LC_PLUGIN_NOENTRY", LC_ECONFIG, "it exports no lc_cluster_type_entry");
  snprintf(want, sizeof(want),
           "built for cluster type version 3; this library (lazycluster %s) "
           "knows 1 to %d",
           lc_version(), LC_CLUSTER_TYPE_VERSION);
  refused("LC_PLUGIN_NEWER", LC_ECONFIG, want);
  refused("LC_PLUGIN_V1ONLY", LC_ECONFIG, "built for the version-1 cluster type interface");
  /* (the refusing plug-in calls lc_error_set, so it loads only where the API is exported:
   * test_plugin_refused checks it through lazyclusterctl) */
  refused("LC_PLUGIN_NOMAKE", LC_ECONFIG, "has no make");
}

static void test_missing_file(void) {
  const lc_cluster_type *t = NULL;
  LC_CHECK(lc_cluster_type_load(&t, "/nonexistent/libnothing.so") == -ENOENT);
  LC_CHECK(t == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "cannot load the cluster type /nonexistent/libnothing.so");
  LC_CHECK(lc_cluster_type_load(&t, NULL) == -EINVAL);
}

/* libmytype.so calls lc_* functions that this program does not export. */
static void test_api_not_exported(void) {
  const char *path = env("LC_PLUGIN");
  const lc_cluster_type *t = NULL;
  if (path == NULL)
    return;
  LC_CHECK(lc_cluster_type_load(&t, path) == -ENOENT);
  LC_CHECK(t == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "undefined symbol: lc_");
  LC_CHECK_CONTAINS(lc_error_last(), "load it from a program that exports it");
}

/* A plug-in that calls nothing of ours loads here; its struct is its own, and stays. */
static void test_good(void) {
  const char *path = env("LC_PLUGIN_LIMITS");
  const lc_cluster_type *t = NULL, *again = NULL;
  if (path == NULL)
    return;
  LC_REQUIRE_OK(lc_cluster_type_load(&t, path));
  LC_REQUIRE(t != NULL);
  LC_CHECK(t->version == LC_CLUSTER_TYPE_VERSION);
  LC_CHECK_STR(t->name, "limits");
  LC_CHECK(t->make != NULL && t->release != NULL);
  LC_REQUIRE_OK(lc_cluster_type_load(&again, path));
  LC_CHECK(again == t);
  LC_CHECK(lc_cluster_type_find("limits") == NULL); /* find knows the built-ins only */
}

/* Loads path, expecting -EPERM with a detail that contains want. */
static void unsafe(const char *path, const char *want) {
  const lc_cluster_type *t = (const lc_cluster_type *)&t;
  int r = lc_cluster_type_load(&t, path);
  fprintf(stderr, "  %s: %d %s\n", path, r, lc_error_last());
  LC_CHECK(r == -EPERM);
  LC_CHECK(t == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), path);
  LC_CHECK_CONTAINS(lc_error_last(), want);
}

/* A plug-in others could have written is refused, as ssh refuses such a key: a group- or
 * world-writable file, one in a world-writable directory (not sticky), one of another user; a
 * name without a slash is never looked up in the library search path, even where
 * LD_LIBRARY_PATH would find it. A sticky world-writable directory (/tmp) is fine. */
static void test_unsafe_paths(void) {
  const char *good = env("LC_PLUGIN_LIMITS");
  char dir[] = "/tmp/lc-plugin-XXXXXX", sub[64], so[128], cmd[1024], want[256];
  const lc_cluster_type *t = NULL;
  if (good == NULL)
    return;
  LC_REQUIRE(mkdtemp(dir) != NULL);
  snprintf(sub, sizeof(sub), "%s/d", dir);
  snprintf(so, sizeof(so), "%s/libsafe.so", sub);
  snprintf(cmd, sizeof(cmd), "mkdir -m 0755 '%s' && cp '%s' '%s' && chmod 0644 '%s'", sub, good,
           so, so);
  LC_REQUIRE(system(cmd) == 0);
  LC_CHECK_OK(lc_cluster_type_load(&t, so)); /* in /tmp (sticky), a directory of ours: fine */
  LC_CHECK(chmod(so, 0666) == 0);
  snprintf(want, sizeof(want), "its file %s is owned by uid %u with mode 0666", so,
           (unsigned)geteuid());
  unsafe(so, want);
  LC_CHECK(chmod(so, 0664) == 0);
  unsafe(so, "with mode 0664");
  LC_CHECK(chmod(so, 0644) == 0);
  LC_CHECK(chmod(sub, 0777) == 0);
  snprintf(want, sizeof(want), "its directory %s is owned by uid %u with mode 0777", sub,
           (unsigned)geteuid());
  unsafe(so, want);
  LC_CHECK(chmod(sub, 0755) == 0);
  if (geteuid() == 0) { /* another owner: only root can make one */
    LC_CHECK(chown(so, 65534, 65534) == 0);
    unsafe(so, "owned by uid 65534");
    LC_CHECK(chown(so, 0, 0) == 0);
  }
  /* no slash: never the search path, though LD_LIBRARY_PATH names the directory */
  setenv("LD_LIBRARY_PATH", sub, 1);
  t = (const lc_cluster_type *)&t;
  LC_CHECK(lc_cluster_type_load(&t, "libsafe.so") == -ENOENT);
  LC_CHECK(t == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "never looked up in the library search path: give "
                                     "./libsafe.so");
  unsetenv("LD_LIBRARY_PATH");
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  LC_CHECK(system(cmd) == 0);
}

static void test_version_and_error_set(void) {
  char v[32];
  snprintf(v, sizeof(v), "%d.%d.%d", LC_VERSION_MAJOR, LC_VERSION_MINOR, LC_VERSION_PATCH);
  LC_CHECK_STR(lc_version(), v);
  LC_CHECK(lc_version_number() == LC_VERSION_NUMBER);
  LC_CHECK(LC_VERSION_NUMBER ==
           LC_VERSION_MAJOR * 1000000 + LC_VERSION_MINOR * 1000 + LC_VERSION_PATCH);
  LC_CHECK(lc_error_set(-EIO, "lab%d: %s", 3, "disk on fire") == -EIO);
  LC_CHECK_STR(lc_error_last(), "lab3: disk on fire");
}

LC_TEST_MAIN(LC_TEST(test_refused), LC_TEST(test_missing_file), LC_TEST(test_api_not_exported),
             LC_TEST(test_good), LC_TEST(test_unsafe_paths),
             LC_TEST(test_version_and_error_set))
