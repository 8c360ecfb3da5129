/*
 * plugin_versions.c - cluster type plug-ins for test_plugin.sh that exercise the launcher structs'
 * versions, one source built twice:
 *   PLUGIN_OLD_LAUNCHERS  type "old": launchers laid out as a plug-in built against the headers of
 *                         before the start limits had them (master version 1, worker version 2),
 *                         followed in memory by bytes 0x01: a library that read the newer fields
 *                         (timeout_ms, type_name) would get a 4.7-hour limit and a wild pointer;
 *   PLUGIN_TYPE_LIMITS    type "limits": current launchers stating their own start limits
 *                         (master 1.5 s, workers 1 s).
 * Both take the shell commands to run from --type-arg master=CMD and worker=CMD (their ports are
 * in LAZYCLUSTER_MASTER_PORT and LAZYCLUSTER_WORKER_PORT).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <lazycluster/cluster.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))
PLUGIN_EXPORT const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version);

#if defined(PLUGIN_OLD_LAUNCHERS)
#define TYPE_NAME "old"
/* The layouts of lc_master_launcher version 1 and lc_worker_launcher version 2. */
typedef struct old_master {
  unsigned int version;
  void *data;
  int (*command)(lc_master_launcher *self, lc_cluster *cluster, int port, char **out);
  int (*wait_ready)(lc_master_launcher *self, lc_cluster *cluster, int port, int timeout_ms);
} old_master;
typedef struct old_worker {
  unsigned int version;
  void *data;
  int (*command)(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                 char **out);
  int (*wait_ready)(lc_worker_launcher *self, lc_cluster *cluster, int n, int timeout_ms);
  int mesh;
  int portless;
  int aux_port;
  int early;
} old_worker;
#elif defined(PLUGIN_TYPE_LIMITS)
#define TYPE_NAME "limits"
#else
#error "define PLUGIN_OLD_LAUNCHERS or PLUGIN_TYPE_LIMITS"
#endif

typedef struct cmds {
  char *master, *worker;
} cmds;

static int master_command(lc_master_launcher *self, lc_cluster *cluster, int port, char **out) {
  (void)cluster;
  (void)port;
  *out = strdup(((cmds *)self->data)->master);
  return *out != NULL ? 0 : -ENOMEM;
}

static int worker_command(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                          char **out) {
  (void)cluster;
  (void)w;
  *out = strdup(((cmds *)self->data)->worker);
  return *out != NULL ? 0 : -ENOMEM;
}

static const char *arg(const char *const *args, const char *key) {
  size_t n = strlen(key);
  for (; args != NULL && *args != NULL; args++)
    if (strncmp(*args, key, n) == 0 && (*args)[n] == '=')
      return *args + n + 1;
  return NULL;
}

/* One block: the commands, then the two launchers, then (old layouts) the 0x01 bytes. */
typedef struct block {
  cmds c;
#if defined(PLUGIN_OLD_LAUNCHERS)
  old_master master;
  unsigned char after_master[sizeof(lc_master_launcher)];
  old_worker worker;
  unsigned char after_worker[sizeof(lc_worker_launcher)];
#else
  lc_master_launcher master;
  lc_worker_launcher worker;
#endif
} block;

static int make(lc_master_launcher **master, lc_worker_launcher **worker, const char *const *args) {
  const char *m = arg(args, "master"), *w = arg(args, "worker");
  block *b;
  *master = NULL;
  *worker = NULL;
  if (m == NULL || w == NULL || (b = calloc(1, sizeof(*b))) == NULL)
    return -EINVAL;
  b->c.master = strdup(m);
  b->c.worker = strdup(w);
#if defined(PLUGIN_OLD_LAUNCHERS)
  memset(b->after_master, 0x01, sizeof(b->after_master));
  memset(b->after_worker, 0x01, sizeof(b->after_worker));
  b->master.version = 1;
  b->worker.version = 2;
#else
  b->master.version = LC_MASTER_LAUNCHER_VERSION;
  b->worker.version = LC_WORKER_LAUNCHER_VERSION;
  b->master.timeout_ms = 1500;
  b->master.type_name = TYPE_NAME;
  b->worker.timeout_ms = 1000;
#endif
  b->master.data = &b->c;
  b->master.command = master_command;
  b->worker.data = &b->c;
  b->worker.command = worker_command;
  *master = (lc_master_launcher *)(void *)&b->master;
  *worker = (lc_worker_launcher *)(void *)&b->worker;
  return 0;
}

static void release(lc_master_launcher *master, lc_worker_launcher *worker) {
  cmds *c = master != NULL ? master->data : worker != NULL ? worker->data : NULL;
  if (c == NULL)
    return;
  free(c->master);
  free(c->worker);
  free(c); /* the block: cmds come first */
}

static const lc_cluster_type type = {
    .version = LC_CLUSTER_TYPE_VERSION, .name = TYPE_NAME, .make = make, .release = release};

const lc_cluster_type *lc_cluster_type_entry(unsigned int library_version) {
  (void)library_version;
  return &type;
}
