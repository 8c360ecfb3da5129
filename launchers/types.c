/*
 * types.c - finding a cluster type: a built-in one by name, or one from a shared object.
 */
#include "launchers.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

static const lc_cluster_type *const builtin[] = {&lc__command_type, &lc__dask_type};

const char *lc_cluster_type_arg(const char *const *args, const char *key) {
  return lc__type_arg(args, key);
}

const char *lc__type_arg(const char *const *args, const char *key) {
  size_t n = strlen(key);
  for (; args != NULL && *args != NULL; args++)
    if (strncmp(*args, key, n) == 0 && (*args)[n] == '=')
      return *args + n + 1;
  return NULL;
}

void lc__launchers_init(lc_master_launcher *m, lc_worker_launcher *w, void *data, const char *name,
                        lc__master_command_fn mc, lc__worker_command_fn wc) {
  m->version = LC_MASTER_LAUNCHER_VERSION;
  m->data = data;
  m->command = mc;
  m->type_name = name;
  w->version = LC_WORKER_LAUNCHER_VERSION;
  w->data = data;
  w->command = wc;
}

void *lc__launchers_data(lc_master_launcher *m, lc_worker_launcher *w) {
  return m != NULL ? m->data : w != NULL ? w->data : NULL;
}

const lc_cluster_type *lc_cluster_type_find(const char *name) {
  for (size_t i = 0; name != NULL && i < LC_ARRAY_SIZE(builtin); i++)
    if (strcmp(builtin[i]->name, name) == 0)
      return builtin[i];
  return NULL;
}

int lc_cluster_type_load(lc_cluster_type *out, const char *path) {
  int (*entry)(lc_cluster_type *);
  void *so;
  int r;
  memset(out, 0, sizeof(*out));
  if (path == NULL)
    return lc__error_set(-EINVAL, "cluster type: no path given");
  if ((so = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
    return lc__error_set(-ENOENT, "cannot load the cluster type %s: %s", path, dlerror());
  *(void **)&entry = dlsym(so, "lc_cluster_type_v1");
  if (entry == NULL)
    return lc__error_set(LC_ECONFIG, "%s is not a cluster type: it exports no lc_cluster_type_v1",
                         path);
  if ((r = entry(out)) < 0)
    return lc__error_set(r, "%s: lc_cluster_type_v1 failed: %s", path, lc_error_last());
  if (out->version != LC_CLUSTER_TYPE_VERSION || out->make == NULL || out->name == NULL)
    return lc__error_set(LC_ECONFIG,
                         "%s: cluster type version %u, name %s, make %s: this "
                         "library knows version %d with a name and make",
                         path, out->version, out->name ? out->name : "(none)",
                         out->make ? "set" : "missing", LC_CLUSTER_TYPE_VERSION);
  return 0; /* the library stays loaded: its functions are in use */
}
