/*
 * test_options.c - options structs as libgit2 does them: every public call that takes one refuses
 * a version it does not know (0: never initialised; CURRENT + 1: a caller built against a newer
 * header) with -EINVAL and a detail naming the struct, and accepts every version it knows. An
 * older version's struct is only as long as that version: the tests build it as a smaller struct
 * on the heap with its exact size, so that under ASan a library that copied or read the whole
 * current struct would fail here. Only this machine: the local runtime, loopback forwards.
 */
#include "lc_test.h"
#include "runtime_internal.h"

#include <lazycluster.h>

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* lc_exec_options as version 1 declared it (before label). */
typedef struct exec_options_v1 {
  unsigned int version;
  const char *const *env;
  const char *cwd;
  lc_line_cb on_line;
  void *payload;
  int timeout_ms;
} exec_options_v1;

/* A heap copy of size bytes of src (the exact length of a caller's struct of that version). */
static void *exact(const void *src, size_t size) {
  void *p = malloc(size);
  if (p != NULL)
    memcpy(p, src, size);
  return p;
}

/* A version-1 lc_exec_options, size up to the end of timeout_ms, nothing after. */
static const lc_exec_options *exec_v1(const char *const *env, const char *cwd, lc_line_cb on_line,
                                      void *payload) {
  exec_options_v1 v1;
  memset(&v1, 0, sizeof(v1));
  v1.version = 1;
  v1.env = env;
  v1.cwd = cwd;
  v1.on_line = on_line;
  v1.payload = payload;
  v1.timeout_ms = 20000;
  return exact(&v1, offsetof(exec_options_v1, timeout_ms) + sizeof(v1.timeout_ms));
}

/* r is -EINVAL and the detail names type and version, with the hint for that kind of version. */
static void check_refused(int r, const char *type, unsigned int version) {
  char want[96];
  snprintf(want, sizeof(want), "%s version %u is unknown", type, version);
  LC_CHECK(r == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK_CONTAINS(lc_error_last(), version == 0 ? "_init()" : "newer lazycluster header");
}

/* A call that should have been refused made obj: free it, so a regression fails, not hangs. */
#define DROP(obj, free_fn)                                                                         \
  do {                                                                                             \
    LC_CHECK((obj) == NULL);                                                                       \
    free_fn(obj);                                                                                  \
    (obj) = NULL;                                                                                  \
  } while (0)

static lc_engine *engine_or_null(void) {
  lc_engine *e = NULL;
  if (lc_engine_new(&e, NULL) < 0)
    return NULL;
  return e;
}

static void test_version_check_detail(void) {
  LC_CHECK(lc__check_version(1, 1, "lc_x_options") == 0);
  LC_CHECK(lc__check_version(2, 2, "lc_x_options") == 0);
  LC_CHECK(lc__check_version(9, 2, "lc_exec_options") == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "lc_exec_options version 9 is unknown: this library knows "
                                "versions 1 to 2 (built against a newer lazycluster header?)");
  LC_CHECK(lc__check_version(0, 1, "lc_group_options") == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "lc_group_options version 0 is unknown: this library knows "
                                "version 1 (not initialised with its INIT macro or "
                                "lc_group_options_init()?)");
}

static void test_engine_options(void) {
  lc_engine_options o = LC_ENGINE_OPTIONS_INIT;
  lc_engine_options *heap;
  lc_engine *e = (lc_engine *)&o; /* must be reset to NULL on refusal */
  o.version = LC_ENGINE_OPTIONS_VERSION + 1;
  check_refused(lc_engine_new(&e, &o), "lc_engine_options", LC_ENGINE_OPTIONS_VERSION + 1);
  DROP(e, lc_engine_free);
  o.version = 0;
  check_refused(lc_engine_new(&e, &o), "lc_engine_options", 0);
  DROP(e, lc_engine_free);
  o.version = 1;
  /* a version-1 caller's struct ends at flags: nothing after it is read (peers: the default) */
  LC_REQUIRE((heap = exact(&o, LC__FIELD_END(lc_engine_options, flags))) != NULL);
  LC_CHECK_OK(lc_engine_new(&e, heap));
  lc_engine_free(e);
  free(heap);
  o.version = LC_ENGINE_OPTIONS_VERSION;
  o.peers = LC_PEERS_ANY + 1;
  e = (lc_engine *)&o;
  LC_CHECK(lc_engine_new(&e, &o) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "lc_engine_options.peers 3");
  DROP(e, lc_engine_free);
  o.peers = LC_PEERS_OWNER_AND_ROOT;
  LC_CHECK_OK(lc_engine_new(&e, &o));
  lc_engine_free(e);
}

static void test_runtime_options(void) {
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT, *heap = NULL;
  lc_engine *e = engine_or_null();
  lc_runtime *rt = NULL;
  LC_REQUIRE(e != NULL);
  o.ssh_config = "/dev/null"; /* were it tried: a refused connection on loopback */
  o.version = LC_RUNTIME_OPTIONS_VERSION + 1;
  check_refused(lc_runtime_new_local(&rt, e, &o), "lc_runtime_options",
                LC_RUNTIME_OPTIONS_VERSION + 1);
  DROP(rt, lc_runtime_free);
  /* refused before any name is looked up or any connection is tried */
  check_refused(lc_runtime_new_ssh(&rt, e, "127.0.0.1:1", &o), "lc_runtime_options",
                LC_RUNTIME_OPTIONS_VERSION + 1);
  DROP(rt, lc_runtime_free);
  o.version = 0;
  check_refused(lc_runtime_new_local(&rt, e, &o), "lc_runtime_options", 0);
  DROP(rt, lc_runtime_free);
  check_refused(lc_runtime_new_ssh(&rt, e, "127.0.0.1:1", &o), "lc_runtime_options", 0);
  DROP(rt, lc_runtime_free);
  o.version = 1;
  o.kill_grace_ms = 500;
  if ((heap = exact(&o, sizeof(o))) != NULL && lc_runtime_new_local(&rt, e, heap) == 0)
    LC_CHECK(lc_runtime_is_connected(rt));
  else
    LC_CHECK(!"a version-1 lc_runtime_options is accepted");
  lc_runtime_free(rt);
  free(heap);
  lc_engine_free(e);
}

typedef struct lines {
  char text[512];
} lines;

static void collect(const char *line, size_t len, lc_stream stream, void *payload) {
  lines *l = payload;
  (void)stream;
  snprintf(l->text + strlen(l->text), sizeof(l->text) - strlen(l->text), "%.*s;", (int)len, line);
}

static void test_exec_options(void) {
  static const char *const env[] = {"LC_T_OPT=from-v1", NULL};
  lc_exec_options o = LC_EXEC_OPTIONS_INIT;
  const lc_exec_options *v1 = NULL;
  lc_engine *e = engine_or_null();
  lc_runtime *rt = NULL;
  lc_process *p = (lc_process *)&o;
  lc_exec_result res = {.exit_status = -1};
  lines got = {{0}};
  LC_REQUIRE(e != NULL);
  if (lc_runtime_new_local(&rt, e, NULL) < 0) {
    LC_CHECK(!"a local runtime");
    lc_engine_free(e);
    return;
  }
  o.version = LC_EXEC_OPTIONS_VERSION + 1;
  check_refused(lc_runtime_exec(&res, rt, "true", &o), "lc_exec_options",
                LC_EXEC_OPTIONS_VERSION + 1);
  check_refused(lc_runtime_spawn(&p, rt, "true", &o), "lc_exec_options",
                LC_EXEC_OPTIONS_VERSION + 1);
  DROP(p, lc_process_free);
  o.version = 0;
  check_refused(lc_runtime_exec(&res, rt, "true", &o), "lc_exec_options", 0);
  check_refused(lc_runtime_spawn(&p, rt, "true", &o), "lc_exec_options", 0);
  DROP(p, lc_process_free);

  /* version 1 (no label): every field it has is used */
  v1 = exec_v1(env, "/tmp", collect, &got);
  LC_REQUIRE(v1 != NULL);
  LC_CHECK_OK(lc_runtime_exec(&res, rt, "pwd; echo \"$LC_T_OPT\"", v1));
  LC_CHECK(res.exit_status == 0);
  LC_CHECK_STR(got.text, "/tmp;from-v1;");
  memset(&got, 0, sizeof(got));
  if (lc_runtime_spawn(&p, rt, "echo spawned", v1) == 0) {
    LC_CHECK_OK(lc_process_wait(&res, p, 20000));
    LC_CHECK_STR(got.text, "spawned;");
  } else {
    LC_CHECK(!"spawn with a version-1 lc_exec_options");
  }
  lc_process_free(p);
  free((void *)v1);
  lc_runtime_free(rt);
  lc_engine_free(e);
}

static void group_collect(const char *host, const char *line, size_t len, lc_stream stream,
                          void *payload) {
  (void)host;
  collect(line, len, stream, payload);
}

static void test_group_options(void) {
  static const char *const env[] = {"LC_T_OPT=group-v1", NULL};
  static const char *const hosts[] = {"127.0.0.1:1"};
  lc_group_options go = LC_GROUP_OPTIONS_INIT, *go_heap = NULL;
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  const lc_exec_options *v1 = NULL;
  lc_engine *e = engine_or_null();
  lc_group *g = (lc_group *)&go;
  lc_runtime *rt = NULL;
  lc_group_report *rep = (lc_group_report *)&go;
  lines got = {{0}};
  LC_REQUIRE(e != NULL);
  go.version = LC_GROUP_OPTIONS_VERSION + 1;
  check_refused(lc_group_new(&g, e, &go), "lc_group_options", LC_GROUP_OPTIONS_VERSION + 1);
  DROP(g, lc_group_free);
  go.version = 0;
  check_refused(lc_group_new(&g, e, &go), "lc_group_options", 0);
  DROP(g, lc_group_free);
  go.version = 1;
  go.fanout = 2;
  LC_REQUIRE((go_heap = exact(&go, sizeof(go))) != NULL);
  LC_CHECK_OK(lc_group_new(&g, e, go_heap));
  free(go_heap);
  if (g == NULL || lc_runtime_new_local(&rt, e, NULL) < 0 || lc_group_add(g, rt) < 0) {
    LC_CHECK(!"a group with the local runtime");
    lc_group_free(g);
    lc_engine_free(e);
    return;
  }

  /* the runtime options of a connect: the whole call is refused, no host is tried */
  ro.ssh_config = "/dev/null";
  ro.version = LC_RUNTIME_OPTIONS_VERSION + 1;
  check_refused(lc_group_connect(&rep, g, hosts, 1, &ro), "lc_runtime_options",
                LC_RUNTIME_OPTIONS_VERSION + 1);
  DROP(rep, lc_group_report_free);
  ro.version = 0;
  check_refused(lc_group_connect(&rep, g, hosts, 1, &ro), "lc_runtime_options", 0);
  DROP(rep, lc_group_report_free);

  eo.version = LC_EXEC_OPTIONS_VERSION + 1;
  check_refused(lc_group_exec(&rep, g, "true", &eo, NULL, NULL), "lc_exec_options",
                LC_EXEC_OPTIONS_VERSION + 1);
  DROP(rep, lc_group_report_free);
  eo.version = 0;
  check_refused(lc_group_exec(&rep, g, "true", &eo, NULL, NULL), "lc_exec_options", 0);
  DROP(rep, lc_group_report_free);

  /* version 1: the group copies it per host, as far as version 1 goes */
  v1 = exec_v1(env, "/tmp", NULL, NULL);
  LC_REQUIRE(v1 != NULL);
  LC_CHECK_OK(lc_group_exec(&rep, g, "pwd; echo \"$LC_T_OPT\"", v1, group_collect, &got));
  LC_CHECK(rep != NULL && lc_group_report_failures(rep) == 0);
  LC_CHECK_STR(got.text, "/tmp;group-v1;");
  lc_group_report_free(rep);
  free((void *)v1);
  lc_group_free(g);
  lc_engine_free(e);
}

static void test_forward_options(void) {
  lc_forward_options o = LC_FORWARD_OPTIONS_INIT, *heap = NULL;
  lc_engine *e = engine_or_null();
  lc_runtime *rt = NULL;
  lc_forward *f = (lc_forward *)&o;
  LC_REQUIRE(e != NULL);
  if (lc_runtime_new_local(&rt, e, NULL) < 0) {
    LC_CHECK(!"a local runtime");
    lc_engine_free(e);
    return;
  }
  o.version = LC_FORWARD_OPTIONS_VERSION + 1;
  check_refused(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, &o),
                "lc_forward_options", LC_FORWARD_OPTIONS_VERSION + 1);
  DROP(f, lc_forward_free);
  o.version = 0;
  check_refused(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, &o),
                "lc_forward_options", 0);
  DROP(f, lc_forward_free);
  o.version = 1;
  o.bind_address = "127.0.0.1";
  /* a version-1 caller's struct ends at payload: peers is not read */
  LC_REQUIRE((heap = exact(&o, LC__FIELD_END(lc_forward_options, payload))) != NULL);
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, heap));
  LC_CHECK(f != NULL && lc_forward_port(f) > 0);
  lc_forward_free(f);
  free(heap);
  o.version = LC_FORWARD_OPTIONS_VERSION;
  o.peers = LC_PEERS_ANY + 2;
  f = (lc_forward *)&o;
  LC_CHECK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, &o) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "peers 4");
  DROP(f, lc_forward_free);
  /* a version-2 caller's struct ends at peers: max_connections is not read */
  o.version = 2;
  o.peers = 0;
  LC_REQUIRE((heap = exact(&o, LC__FIELD_END(lc_forward_options, peers))) != NULL);
  LC_CHECK_OK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, heap));
  LC_CHECK(f != NULL && lc_forward_port(f) > 0);
  lc_forward_free(f);
  free(heap);
  o.version = LC_FORWARD_OPTIONS_VERSION;
  o.max_connections = -5;
  f = (lc_forward *)&o;
  LC_CHECK(lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", 9, &o) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "max_connections -5");
  DROP(f, lc_forward_free);
  lc_runtime_free(rt);
  lc_engine_free(e);
}

static void test_discover_options(void) {
  char config[] = "/tmp/lc_test_options_XXXXXX";
  lc_discover_options o = LC_DISCOVER_OPTIONS_INIT, *heap = NULL;
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_engine *e = engine_or_null();
  lc_group *g = NULL;
  lc_discovery *d = NULL;
  int fd = mkstemp(config); /* an empty ssh config: no aliases, so no candidate */
  LC_REQUIRE(e != NULL);
  LC_REQUIRE(fd >= 0);
  close(fd);
  ro.ssh_config = config;
  o.runtime = &ro;
  o.version = LC_DISCOVER_OPTIONS_VERSION + 1;
  check_refused(lc_discover(&g, &d, e, &o), "lc_discover_options", LC_DISCOVER_OPTIONS_VERSION + 1);
  DROP(g, lc_group_free);
  DROP(d, lc_discovery_free);
  o.version = 0;
  check_refused(lc_discover(&g, &d, e, &o), "lc_discover_options", 0);
  DROP(g, lc_group_free);
  DROP(d, lc_discovery_free);
  /* the runtime options it points at are checked too */
  o.version = 1;
  ro.version = LC_RUNTIME_OPTIONS_VERSION + 1;
  check_refused(lc_discover(&g, &d, e, &o), "lc_runtime_options", LC_RUNTIME_OPTIONS_VERSION + 1);
  DROP(g, lc_group_free);
  DROP(d, lc_discovery_free);
  ro.version = 0;
  check_refused(lc_discover(&g, &d, e, &o), "lc_runtime_options", 0);
  DROP(g, lc_group_free);
  DROP(d, lc_discovery_free);
  ro.version = 1;
  o.facts = 1;
  LC_REQUIRE((heap = exact(&o, sizeof(o))) != NULL);
  LC_CHECK_OK(lc_discover(&g, &d, e, heap));
  LC_CHECK(g != NULL && lc_group_count(g) == 0);
  LC_CHECK(d != NULL && lc_discovery_count(d) == 0);
  lc_group_free(g);
  lc_discovery_free(d);
  free(heap);
  unlink(config);
  lc_engine_free(e);
}

/* The library's own copy helper: what lies beyond the caller's version keeps its default. */
static void test_options_copy_stops_at_the_version(void) {
  lc_exec_options dst = LC_EXEC_OPTIONS_INIT;
  const lc_exec_options *v1 = exec_v1(NULL, "/srv", NULL, NULL);
  LC_REQUIRE(v1 != NULL);
  dst.label = "kept";
  LC_CHECK(lc__exec_options_size(v1) == offsetof(exec_options_v1, timeout_ms) + sizeof(int));
  lc__options_copy(&dst, v1, lc__exec_options_size(v1));
  LC_CHECK_STR(dst.cwd, "/srv");
  LC_CHECK(dst.timeout_ms == 20000);
  LC_CHECK_STR(dst.label, "kept");
  free((void *)v1);
  dst.version = 2; /* version 2 ends with label */
  LC_CHECK(lc__exec_options_size(&dst) == offsetof(lc_exec_options, label) + sizeof(dst.label));
  dst.version = 3;
  LC_CHECK(lc__exec_options_size(&dst) == sizeof(dst));
}

static int no_master(lc_master_launcher *self, lc_cluster *c, int port, char **out) {
  (void)self, (void)c, (void)port;
  *out = NULL;
  return -EINVAL;
}

static int no_worker(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w, char **out) {
  (void)self, (void)c, (void)w;
  *out = NULL;
  return -EINVAL;
}

/* lc_cluster_new: its options and both launcher structs (a type built against newer headers);
 * a version-3 options struct (before on_output) of its exact size is taken. */
static void test_cluster_options(void) {
  lc_engine *e = engine_or_null();
  lc_group *g = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT, *heap;
  lc_master_launcher m = {.version = LC_MASTER_LAUNCHER_VERSION, .command = no_master};
  lc_worker_launcher w = {.version = LC_WORKER_LAUNCHER_VERSION, .command = no_worker};
  LC_REQUIRE(e != NULL);
  LC_REQUIRE_OK(lc_group_new(&g, e, NULL));
  o.version = LC_CLUSTER_OPTIONS_VERSION + 1;
  check_refused(lc_cluster_new(&c, g, &m, &w, &o), "lc_cluster_options",
                LC_CLUSTER_OPTIONS_VERSION + 1);
  DROP(c, lc_cluster_free);
  o.version = 0;
  check_refused(lc_cluster_new(&c, g, &m, &w, &o), "lc_cluster_options", 0);
  DROP(c, lc_cluster_free);
  m.version = LC_MASTER_LAUNCHER_VERSION + 1;
  check_refused(lc_cluster_new(&c, g, &m, &w, NULL), "lc_master_launcher",
                LC_MASTER_LAUNCHER_VERSION + 1);
  DROP(c, lc_cluster_free);
  m.version = LC_MASTER_LAUNCHER_VERSION;
  w.version = LC_WORKER_LAUNCHER_VERSION + 1;
  check_refused(lc_cluster_new(&c, g, &m, &w, NULL), "lc_worker_launcher",
                LC_WORKER_LAUNCHER_VERSION + 1);
  DROP(c, lc_cluster_free);
  w.version = LC_WORKER_LAUNCHER_VERSION;
  o.version = 3;
  o.master_port = 61234;
  LC_REQUIRE((heap = exact(&o, offsetof(lc_cluster_options, on_output))) != NULL);
  LC_CHECK_OK(lc_cluster_new(&c, g, &m, &w, heap));
  free(heap);
  lc_cluster_free(c);
  c = NULL;
  /* version 5 ends with ttl_ms: nothing after it is read (insecure, client_dir) */
  o.version = 5;
  LC_REQUIRE((heap = exact(&o, offsetof(lc_cluster_options, insecure))) != NULL);
  LC_CHECK_OK(lc_cluster_new(&c, g, &m, &w, heap));
  free(heap);
  LC_CHECK(c != NULL && !lc_cluster_is_insecure(c) && lc_cluster_client_dir(c) != NULL);
  lc_cluster_free(c);
  lc_group_free(g);
  lc_engine_free(e);
}

/*
 * The client side of a cluster: a private client directory (0700, this user's) when none is
 * given, removed with its files at lc_cluster_free; a given one that others may enter refused,
 * naming it; a given private one kept; the client env set, replaced, removed, names checked.
 */
static void test_cluster_client(void) {
  lc_engine *e = engine_or_null();
  lc_group *g = NULL;
  lc_cluster *c = NULL;
  lc_cluster_options o = LC_CLUSTER_OPTIONS_INIT;
  lc_master_launcher m = {.version = LC_MASTER_LAUNCHER_VERSION, .command = no_master};
  lc_worker_launcher w = {.version = LC_WORKER_LAUNCHER_VERSION, .command = no_worker};
  char given[] = "/tmp/lc_test_client_XXXXXX", own[4096], file[4200];
  const char *const *env;
  struct stat st;
  FILE *f;
  LC_REQUIRE(e != NULL);
  LC_REQUIRE_OK(lc_group_new(&g, e, NULL));

  LC_REQUIRE_OK(lc_cluster_new(&c, g, &m, &w, NULL));
  snprintf(own, sizeof(own), "%s", lc_cluster_client_dir(c));
  LC_CHECK_CONTAINS(own, "/lazycluster-client-");
  LC_REQUIRE(stat(own, &st) == 0);
  LC_CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == geteuid());
  snprintf(file, sizeof(file), "%s/key.pem", own);
  LC_REQUIRE((f = fopen(file, "w")) != NULL);
  fclose(f);
  LC_CHECK(!lc_cluster_is_insecure(c));
  env = lc_cluster_client_env(c);
  LC_CHECK(env != NULL && env[0] == NULL);
  LC_CHECK_OK(lc_cluster_set_client_env(c, "DASK_SCHEDULER_ADDRESS", "tls://127.0.0.1:1"));
  LC_CHECK_OK(lc_cluster_set_client_env(c, "A_B", "x y"));
  LC_CHECK_OK(lc_cluster_set_client_env(c, "DASK_SCHEDULER_ADDRESS", "tls://127.0.0.1:2"));
  env = lc_cluster_client_env(c);
  LC_CHECK(env[0] != NULL && env[1] != NULL && env[2] == NULL);
  LC_CHECK_STR(env[0], "DASK_SCHEDULER_ADDRESS=tls://127.0.0.1:2");
  LC_CHECK_STR(env[1], "A_B=x y");
  LC_CHECK_OK(lc_cluster_set_client_env(c, "DASK_SCHEDULER_ADDRESS", NULL));
  env = lc_cluster_client_env(c);
  LC_CHECK(env[0] != NULL && env[1] == NULL);
  LC_CHECK_STR(env[0], "A_B=x y");
  LC_CHECK_OK(lc_cluster_set_client_env(c, "NOT_THERE", NULL));
  LC_CHECK(lc_cluster_set_client_env(c, "1X", "v") == -EINVAL);
  LC_CHECK(lc_cluster_set_client_env(c, "A=B", "v") == -EINVAL);
  LC_CHECK(lc_cluster_set_client_env(c, "", "v") == -EINVAL);
  LC_CHECK(lc_cluster_set_client_env(c, NULL, "v") == -EINVAL);
  lc_cluster_free(c);
  c = NULL;
  LC_CHECK(stat(own, &st) < 0 && errno == ENOENT); /* gone, with the file in it */

  LC_REQUIRE(mkdtemp(given) != NULL);
  LC_REQUIRE(chmod(given, 0750) == 0);
  o.client_dir = given;
  o.insecure = 1;
  LC_CHECK(lc_cluster_new(&c, g, &m, &w, &o) == -EPERM);
  LC_CHECK(c == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), given);
  LC_CHECK_CONTAINS(lc_error_last(), "0750");
  LC_REQUIRE(chmod(given, 0700) == 0);
  LC_REQUIRE_OK(lc_cluster_new(&c, g, &m, &w, &o));
  LC_CHECK_STR(lc_cluster_client_dir(c), given);
  LC_CHECK(lc_cluster_is_insecure(c));
  lc_cluster_free(c);
  LC_CHECK(stat(given, &st) == 0); /* the caller's: it stays */
  rmdir(given);
  o.client_dir = "/nonexistent/lc_test_client";
  c = NULL;
  LC_CHECK(lc_cluster_new(&c, g, &m, &w, &o) == -ENOENT);
  lc_group_free(g);
  lc_engine_free(e);
}

LC_TEST_MAIN(LC_TEST(test_version_check_detail), LC_TEST(test_cluster_options),
             LC_TEST(test_cluster_client), LC_TEST(test_engine_options),
             LC_TEST(test_runtime_options), LC_TEST(test_exec_options), LC_TEST(test_group_options),
             LC_TEST(test_forward_options), LC_TEST(test_discover_options),
             LC_TEST(test_options_copy_stops_at_the_version))
