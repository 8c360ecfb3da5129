/*
 * plugin_bad.c - cluster type plug-ins that the loader must refuse, or whose make fails, for
 * test_plugin.sh; one source built once per case:
 *   PLUGIN_NO_ENTRY    a valid shared object whose only export is not the entry point
 *                      (lc_cluster_type_v3, a name that does not exist)
 *   PLUGIN_NEWER       the entry point returns a struct of a future version (3) that holds only
 *                      its version: a loader reading past `version` overflows it (ASan sees that)
 *   PLUGIN_V1_ONLY     only the version-1 entry point lc_cluster_type_v1; the loader must not
 *                      call it (it aborts)
 *   PLUGIN_REFUSE      the entry point refuses every library, with a reason set by lc_error_set
 *   PLUGIN_NO_MAKE     a current struct without make
 *   PLUGIN_MAKE_FAIL   type "makefail": make fails with -EIO and a detail set by lc_error_set,
 *                      or, given --type-arg quiet=1, with no detail at all
 */
#include <lazycluster.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

/* Calls nothing of ours: the cases other than PLUGIN_MAKE_FAIL load also in a program that does
 * not export the API (test_plugin_load). */
static int make(lc_master_launcher **master, lc_worker_launcher **worker, const char *const *args) {
  (void)args;
  *master = NULL;
  *worker = NULL;
  return -EIO;
}

#if defined(PLUGIN_NO_ENTRY)
PLUGIN_EXPORT int lc_cluster_type_v3(void);
int lc_cluster_type_v3(void) {
  (void)make;
  return 0;
}

#elif defined(PLUGIN_NEWER)
/* All that a version-3 struct promises to a loader that does not know version 3. */
static const unsigned int future_type = 3;
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);
const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  (void)library_version;
  (void)make;
  return (const lc_cluster_type *)(const void *)&future_type;
}

#elif defined(PLUGIN_V1_ONLY)
PLUGIN_EXPORT int lc_cluster_type_v1(lc_cluster_type *out);
int lc_cluster_type_v1(lc_cluster_type *out) {
  (void)out;
  (void)make;
  abort(); /* the loader must not call the version-1 entry point */
}

#elif defined(PLUGIN_REFUSE)
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);
const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  (void)make;
  lc_error_set(-ENOTSUP, "refuse: needs lazycluster 99.0.0 (99000000), got %u", library_version);
  return NULL;
}

#elif defined(PLUGIN_NO_MAKE)
static const lc_cluster_type nomake = {.version = LC_CLUSTER_TYPE_VERSION, .name = "nomake"};
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);
const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  (void)library_version;
  (void)make;
  return &nomake;
}

#elif defined(PLUGIN_MAKE_FAIL)
static int make_fail(lc_master_launcher **master, lc_worker_launcher **worker,
                     const char *const *args) {
  for (const char *const *a = args; a != NULL && *a != NULL; a++)
    if (strcmp(*a, "quiet=1") == 0)
      return make(master, worker, args);
  *master = NULL;
  *worker = NULL;
  return lc_error_set(-EIO, "makefail: the licence server lic.invalid:27000 did not answer");
}
static const lc_cluster_type makefail = {
    .version = LC_CLUSTER_TYPE_VERSION, .name = "makefail", .make = make_fail};
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);
const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  return library_version == lc_version_number() ? &makefail : NULL;
}

#else
#error "define one of the PLUGIN_* cases"
#endif
