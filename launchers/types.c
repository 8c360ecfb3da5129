/*
 * types.c - finding a cluster type: a built-in one by name, or one from a shared object through
 * its versioned entry point (see lc_cluster_type in lazycluster/cluster.h), loaded only from a
 * path that nobody but this user (or root) can write, as ssh checks a key.
 */
#include "launchers.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The dlopen error, with a hint when what is missing is the library itself. */
static int load_error(const char *path, const char *why) {
  const char *hint = strstr(why, "undefined symbol: lc_") != NULL
                         ? " (the plug-in calls the lazycluster API: load it from a program that "
                           "exports it, such as lazyclusterctl or one linked against "
                           "liblazycluster.so)"
                         : "";
  return lc__error_set(-ENOENT, "cannot load the cluster type %s: %s%s", path, why, hint);
}

/*
 * Checks the struct a plug-in's entry point returned: its version first, and nothing else of it
 * unless this library knows that version (a newer struct may be longer than ours, or laid out
 * otherwise).
 */
static int check_type(const lc_cluster_type *t, const char *path) {
  unsigned int v = t->version;
  if (v < 1 || v > LC_CLUSTER_TYPE_VERSION)
    return lc__error_set(LC_ECONFIG,
                         "%s: built for cluster type version %u; this library (lazycluster %s) "
                         "knows 1 to %d",
                         path, v, lc_version(), LC_CLUSTER_TYPE_VERSION);
  if (t->name == NULL || t->name[0] == '\0' || t->make == NULL)
    return lc__error_set(LC_ECONFIG, "%s: its cluster type has %s: it needs a name and make", path,
                         t->make != NULL                         ? "no name"
                         : t->name != NULL && t->name[0] != '\0' ? "no make"
                                                                 : "no name and no make");
  return 0;
}

/* Whether st (the file or a directory at real, for the plug-in asked as path) may hold code we
 * run: this user's or root's, and writable by nobody else; a directory others may write into is
 * allowed only with the sticky bit (/tmp), where they cannot rename or remove what is not theirs
 * (ssh refuses those too). Else -EPERM naming it, its owner and its mode. */
static int plugin_check(const struct stat *st, const char *path, const char *real,
                        const char *what) {
  uid_t me = geteuid();
  int writable = (st->st_mode & 022) != 0 && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX));
  if ((st->st_uid == me || st->st_uid == 0) && !writable)
    return 0;
  return lc__error_set(-EPERM,
                       "refused the cluster type %s: its %s %s is owned by uid %u with mode %04o "
                       "(it must be owned by uid %u or root, and not writable by group or others)",
                       path, what, real, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                       (unsigned)me);
}

/*
 * Opens the plug-in at path for loading, as ssh checks a key: the real file and every directory
 * above it up to / (check_owner_mode). *fd is the opened file: what is loaded is what was checked.
 */
static int open_checked(int *fd, const char *path) {
  char *real = NULL;
  struct stat st;
  int r = LC_EINTERNAL;

  *fd = -1;
  if ((real = realpath(path, NULL)) == NULL) {
    r = lc__error_set(-errno, "cannot load the cluster type %s: %s", path, strerror(errno));
    goto out;
  }
  if ((*fd = open(real, O_RDONLY | O_CLOEXEC)) < 0 || fstat(*fd, &st) < 0) {
    r = lc__error_set(-errno, "cannot load the cluster type %s: %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    r = lc__error_set(-EINVAL, "cannot load the cluster type %s: not a regular file", path);
    goto out;
  }
  if ((r = plugin_check(&st, path, real, "file")) < 0)
    goto out;
  for (char *slash = strrchr(real, '/'); slash != NULL; slash = strrchr(real, '/')) {
    slash[slash == real ? 1 : 0] = '\0'; /* its directory; "/" keeps its slash */
    if (stat(real, &st) < 0) {
      r = lc__error_set(-errno, "cannot load the cluster type %s: %s: %s", path, real,
                        strerror(errno));
      goto out;
    }
    if ((r = plugin_check(&st, path, real, "directory")) < 0)
      goto out;
    if (strcmp(real, "/") == 0)
      break;
  }
  r = 0;
out:
  if (r < 0 && *fd >= 0) {
    close(*fd);
    *fd = -1;
  }
  free(real);
  return r;
}

int lc_cluster_type_load(const lc_cluster_type **out, const char *path) {
  lc_cluster_type_entry_fn entry = NULL;
  const lc_cluster_type *t = NULL;
  void *so = NULL;
  char fdpath[64];
  int fd = -1, r = LC_EINTERNAL;

  *out = NULL;
  if (path == NULL) {
    r = lc__error_set(-EINVAL, "cluster type: no path given");
    goto out;
  }
  /* never the library search path: a bare name is a built-in's or a mistake */
  if (strchr(path, '/') == NULL) {
    r = lc__error_set(-ENOENT,
                      "cannot load the cluster type %s: a plug-in is loaded from a path, never "
                      "looked up in the library search path: give ./%s (or its full path)",
                      path, path);
    goto out;
  }
  if ((r = open_checked(&fd, path)) < 0)
    goto out;
  /* the very file checked, through its descriptor (unless /proc is not there) */
  snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
  if ((so = dlopen(access(fdpath, F_OK) == 0 ? fdpath : path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
    r = load_error(path, dlerror());
    goto out;
  }
  *(void **)&entry = dlsym(so, LC_CLUSTER_TYPE_ENTRY);
  if (entry == NULL) {
    if (dlsym(so, "lc_cluster_type_v1") != NULL)
      r = lc__error_set(LC_ECONFIG,
                        "%s was built for the version-1 cluster type interface "
                        "(lc_cluster_type_v1), which lazycluster %s no longer loads: port it to "
                        "`const lc_cluster_type *" LC_CLUSTER_TYPE_ENTRY
                        "(unsigned int library_version)` returning a static struct (see "
                        "lazycluster/cluster.h)",
                        path, lc_version());
    else
      r = lc__error_set(LC_ECONFIG,
                        "%s is not a cluster type: it exports no " LC_CLUSTER_TYPE_ENTRY
                        " (const lc_cluster_type *" LC_CLUSTER_TYPE_ENTRY
                        "(unsigned int library_version))",
                        path);
    goto out;
  }
  lc__error_clear();
  if ((t = entry(LC_VERSION_NUMBER)) == NULL) {
    char why[512]; /* the plug-in's own reason, when it set one with lc_error_set */
    snprintf(why, sizeof(why), "%s", lc_error_last());
    r = lc__error_set(LC_ECONFIG, "%s: the plug-in refused library version %s (%d)%s%s", path,
                      lc_version(), LC_VERSION_NUMBER, why[0] ? ": " : "", why);
    goto out;
  }
  if ((r = check_type(t, path)) < 0)
    goto out;
  *out = t; /* the object stays loaded: its functions and its struct are in use */
  r = 0;
out:
  if (r < 0 && so != NULL)
    dlclose(so);
  if (fd >= 0)
    close(fd);
  return r;
}
