/*
 * client.c - what a client of the cluster on this machine needs: the client directory (where a
 * type writes the client's files, such as Dask's CA, certificate and key) and the client
 * environment (lc_cluster_set_client_env / lc_cluster_client_env), and the insecure flag the
 * type reads. A cluster given no client_dir makes a private one (0700, mkdtemp) under
 * $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp, and removes it with what is in it at lc_cluster_free.
 */
#include "cluster_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A directory a client's keys may go into: a directory of this user that neither group nor
 * others may enter or change. */
static int check_private_dir(const char *dir) {
  struct stat st;
  if (stat(dir, &st) < 0)
    return lc__error_set(-errno, "cluster: client_dir %s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return lc__error_set(-ENOTDIR, "cluster: client_dir %s is not a directory", dir);
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
    return lc__error_set(-EPERM,
                         "cluster: client_dir %s is owned by uid %ld with mode %04o: it must be "
                         "this user's (uid %ld) and closed to group and others (0700)",
                         dir, (long)st.st_uid, (unsigned)(st.st_mode & 07777), (long)geteuid());
  return 0;
}

/* The parent of a private client directory: $XDG_RUNTIME_DIR where it is a directory of ours,
 * else $TMPDIR, else /tmp. */
static const char *private_parent(void) {
  const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
  struct stat st;
  if (xdg != NULL && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == geteuid() && access(xdg, W_OK | X_OK) == 0)
    return xdg;
  if (tmp != NULL && tmp[0] == '/' && access(tmp, W_OK | X_OK) == 0)
    return tmp;
  return "/tmp";
}

int lc__client_init(lc_cluster *c) {
  int r = 0;
  pthread_mutex_init(&c->client_mu, NULL);
  c->client_mu_ready = 1;
  if (c->opts.client_dir != NULL) {
    if ((r = check_private_dir(c->opts.client_dir)) < 0)
      goto out;
    if ((c->client_dir = lc__strdup(c->opts.client_dir)) == NULL)
      r = lc__error_set(-ENOMEM, "out of memory");
  } else {
    const char *parent = private_parent();
    if ((c->client_dir = lc__sprintf("%s/lazycluster-client-XXXXXX", parent)) == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    if (mkdtemp(c->client_dir) == NULL) { /* mkdtemp makes it 0700 */
      r = lc__error_set(-errno, "cluster: cannot make a client directory in %s: %s", parent,
                        strerror(errno));
      goto out;
    }
    c->client_dir_own = 1;
  }
out:
  c->opts.client_dir = c->client_dir;
  return r;
}

void lc__client_free(lc_cluster *c) {
  if (c->client_dir_own && c->client_dir != NULL && c->client_dir[0] == '/')
    lc__remove_tree(c->client_dir);
  free(c->client_dir);
  for (size_t i = 0; i < c->nclient_env; i++) {
    /* values may be secrets of the type's: cleared before they go */
    memset(c->client_env[i], 0, strlen(c->client_env[i]));
    free(c->client_env[i]);
  }
  free(c->client_env);
  if (c->client_mu_ready)
    pthread_mutex_destroy(&c->client_mu);
}

int lc_cluster_is_insecure(const lc_cluster *c) { return c != NULL && c->opts.insecure != 0; }

const char *lc_cluster_client_dir(const lc_cluster *c) { return c ? c->client_dir : NULL; }

/* An environment variable's name: a letter or '_', then letters, digits and '_'. */
static int good_env_name(const char *name) {
  if (name == NULL ||
      !((*name >= 'A' && *name <= 'Z') || (*name >= 'a' && *name <= 'z') || *name == '_'))
    return 0;
  for (const char *p = name; *p != '\0'; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
          *p == '_'))
      return 0;
  return 1;
}

int lc_cluster_set_client_env(lc_cluster *c, const char *name, const char *value) {
  size_t len = name ? strlen(name) : 0, at;
  char *entry = NULL;
  int r = 0;

  if (c == NULL || !good_env_name(name))
    return lc__error_set(-EINVAL, "cluster: '%s' is no environment variable name",
                         name ? name : "(null)");
  if (value != NULL && (entry = lc__sprintf("%s=%s", name, value)) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  pthread_mutex_lock(&c->client_mu);
  for (at = 0; at < c->nclient_env; at++)
    if (strncmp(c->client_env[at], name, len) == 0 && c->client_env[at][len] == '=')
      break;
  if (at < c->nclient_env) { /* replaced, or removed (the last one moves into its place) */
    free(c->client_env[at]);
    if (entry != NULL) {
      c->client_env[at] = entry;
    } else {
      c->client_env[at] = c->client_env[--c->nclient_env];
      c->client_env[c->nclient_env] = NULL;
    }
    entry = NULL;
  } else if (entry != NULL) {
    char **v = lc__realloc(c->client_env, (c->nclient_env + 2) * sizeof(*v));
    if (v == NULL) {
      r = lc__error_set(-ENOMEM, "out of memory");
      goto out;
    }
    c->client_env = v;
    v[c->nclient_env++] = entry;
    v[c->nclient_env] = NULL;
    entry = NULL;
  }
out:
  pthread_mutex_unlock(&c->client_mu);
  free(entry);
  return r;
}

const char *const *lc_cluster_client_env(const lc_cluster *c) {
  static const char *const none[] = {NULL};
  const char *const *env = none;
  if (c == NULL)
    return none;
  pthread_mutex_lock((pthread_mutex_t *)&c->client_mu);
  if (c->nclient_env > 0)
    env = (const char *const *)c->client_env;
  pthread_mutex_unlock((pthread_mutex_t *)&c->client_mu);
  return env;
}
