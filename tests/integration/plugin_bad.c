/*
 * plugin_bad.c - broken cluster type plug-ins for test_plugin.sh, one source built twice:
 *   PLUGIN_NO_ENTRY     a valid shared object without lc_cluster_type_v1
 *   PLUGIN_BAD_VERSION  lc_cluster_type_v1 fills in a version this library does not know (99)
 */
#include <lazycluster/cluster.h>

#include <string.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

static int make(lc_master_launcher **master, lc_worker_launcher **worker, const char *const *args) {
  (void)args;
  *master = NULL;
  *worker = NULL;
  return -1;
}

#if defined(PLUGIN_NO_ENTRY)
/* exported, but not the entry point */
PLUGIN_EXPORT int lc_cluster_type_v0(lc_cluster_type *out);
int lc_cluster_type_v0(lc_cluster_type *out) {
  memset(out, 0, sizeof(*out));
  out->make = make;
  return 0;
}
#elif defined(PLUGIN_BAD_VERSION)
PLUGIN_EXPORT int lc_cluster_type_v1(lc_cluster_type *out);
int lc_cluster_type_v1(lc_cluster_type *out) {
  memset(out, 0, sizeof(*out));
  out->version = 99;
  out->name = "from-the-future";
  out->make = make;
  return 0;
}
#else
#error "define PLUGIN_NO_ENTRY or PLUGIN_BAD_VERSION"
#endif
