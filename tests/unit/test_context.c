/*
 * test_context.c - what a worker's start sends to its host (lc__worker_compose): its size does
 * not grow with the cluster (the cluster-wide part goes once per host, lc__cluster_context_text),
 * and the setup text, run by /bin/sh here against a context file, gives the worker exactly the
 * TF_CONFIG and cluster.json the design describes. No hosts: a cluster record filled by hand.
 */
#include "../../runtimes/local/local_internal.h"
#include "cluster/cluster_internal.h"
#include "lc_test.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int worker_command(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          char **out) {
  (void)self;
  (void)c;
  *out = lc__sprintf("exec serve %d", w->port);
  return *out ? 0 : -ENOMEM;
}

static lc_worker_launcher launcher = {.version = 1, .command = worker_command};
/* a host over SSH, as far as composing a start asks (not this machine: its GPUs in PCI order) */
static const lc__backend_ops remote_ops = {.name = "remote"};
static lc_runtime master_host = {.name = "lab0", .ops = &remote_ops};

/* A cluster record of n workers over 8 hosts, 8 GPUs each, its workdirs under root. */
static void make_cluster(lc_cluster *c, size_t n, const char *root) {
  memset(c, 0, sizeof(*c));
  c->w = &launcher;
  c->master_rt = &master_host;
  c->master_port = 60000;
  c->secret = "s3cr3t-0123456789abcdef";
  c->workers = lc__calloc(n + 1, sizeof(*c->workers));
  c->nworkers = n;
  for (size_t i = 0; i < n; i++) {
    lc__worker *w = &c->workers[i];
    w->host = lc__sprintf("lab%zu", i % 8);
    w->workdir = lc__sprintf("%s/worker-%zu", root, i);
    w->info.index = (int)i;
    w->info.count = (int)n;
    w->info.port = 60001 + (int)i;
    w->info.gpu = (int)(i / 8 % 8);
    w->info.host = w->host;
    w->info.workdir = w->workdir;
    w->rt = &master_host;
  }
}

static void free_cluster(lc_cluster *c) {
  for (size_t i = 0; i < c->nworkers; i++) {
    free(c->workers[i].host);
    free(c->workers[i].workdir);
  }
  free(c->workers);
}

/* Bytes that worker `which`'s start sends (command line and script), in a cluster of n. */
static size_t start_bytes(size_t n, size_t which) {
  lc_cluster c;
  lc__buf line = {0}, script = {0};
  size_t bytes = 0;
  make_cluster(&c, n, "/home/user/.cache/lazycluster/lc-lab0-1234-abcdef");
  if (lc__worker_compose(&c, &c.workers[which], &line, &script, NULL) == 0)
    bytes = line.len + script.len;
  else
    fprintf(stderr, "  compose: %s\n", lc_error_last());
  lc__buf_free(&line);
  lc__buf_free(&script);
  free_cluster(&c);
  return bytes;
}

static void test_start_size_does_not_grow(void) {
  size_t b10 = start_bytes(10, 0), b1000 = start_bytes(1000, 0);
  fprintf(stderr, "  bytes sent to start worker 0:");
  for (size_t n = 16; n <= 1024; n *= 4)
    fprintf(stderr, " N=%zu: %zu;", n, start_bytes(n, 0));
  fprintf(stderr, "\n");
  LC_CHECK(b10 > 0 && b1000 > 0);
  /* only digits may grow (the count, "1000" against "10") */
  if (b1000 > b10 + 16)
    fprintf(stderr, "  N=10: %zu bytes, N=1000: %zu bytes\n", b10, b1000);
  LC_CHECK(b1000 <= b10 + 16);
}

/* The whole of a file, or "" (a static buffer). */
static const char *slurp(const char *path) {
  static char text[8192];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[n] = '\0';
  if (f)
    fclose(f);
  return text;
}

/* Runs worker `which`'s setup text in /bin/sh (its context file where the host would have it),
 * then writes its TF_CONFIG into tf.txt in its directory; returns sh's exit status. */
static int run_setup(lc_cluster *c, size_t which, const char *root) {
  lc__buf line = {0}, script = {0}, setup = {0};
  char path[4200], cmd[8600];
  FILE *f;
  int st = -1;
  snprintf(path, sizeof(path), "%s/run.sh", root);
  if (lc__worker_compose(c, &c->workers[which], &line, &script, &setup) == 0 &&
      (f = fopen(path, "w")) != NULL) {
    fprintf(f, "%s\nprintf '%%s' \"$TF_CONFIG\" > tf.txt\n", setup.data);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "/bin/sh '%s' 2>'%s/err.txt'", path, root);
    st = system(cmd);
    st = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  lc__buf_free(&line);
  lc__buf_free(&script);
  lc__buf_free(&setup);
  return st;
}

static void test_setup_gives_tf_config_and_cluster_json(void) {
  char root[] = "/tmp/lc-test-context.XXXXXX", path[4200], want[4096];
  const char *tf = "{\"cluster\":{\"master\":[\"localhost:60000\"],\"worker\":[\"localhost:60001\","
                   "\"localhost:60002\",\"localhost:60003\"]},\"task\":{\"type\":\"worker\","
                   "\"index\":1}}";
  lc__buf text = {0};
  lc_cluster c;
  struct stat st;
  FILE *f;
  LC_REQUIRE(mkdtemp(root) != NULL);
  make_cluster(&c, 3, root);
  free(c.workers[1].host); /* quotes for the shell and for JSON */
  c.workers[1].host = lc__strdup("la'b\"1");
  c.workers[1].info.host = c.workers[1].host;
  c.workers[2].info.gpu = -1;
  /* no context file yet: the worker does not start, and says which file it lacks */
  LC_CHECK(run_setup(&c, 1, root) == 125);
  snprintf(want, sizeof(want),
           "lazycluster: %s/cluster-context: the cluster's context is not there", root);
  LC_CHECK_CONTAINS(slurp((snprintf(path, sizeof(path), "%s/err.txt", root), path)), want);
  LC_REQUIRE_OK(lc__cluster_context_text(&c, &text));
  LC_CHECK_STR(
      text.data,
      "{\"master\":[\"localhost:60000\"],\"worker\":[\"localhost:60001\",\"localhost:60002\","
      "\"localhost:60003\"]}\n[{\"index\":0,\"host\":\"lab0\",\"port\":60001,\"gpu\":0},"
      "{\"index\":1,\"host\":\"la'b\\\"1\",\"port\":60002,\"gpu\":0},{\"index\":2,"
      "\"host\":\"lab2\",\"port\":60003,\"gpu\":-1}]\n");
  snprintf(path, sizeof(path), "%s/cluster-context", root);
  LC_REQUIRE((f = fopen(path, "w")) != NULL);
  fwrite(text.data, 1, text.len, f);
  fclose(f);
  LC_CHECK(run_setup(&c, 1, root) == 0);
  snprintf(path, sizeof(path), "%s/worker-1/tf.txt", root);
  LC_CHECK_STR(slurp(path), tf);
  snprintf(
      want, sizeof(want),
      "{\"master\":{\"addr\":\"localhost\",\"port\":60000,\"host\":\"lab0\"},\"worker_index\":1,"
      "\"worker_count\":3,\"host\":\"la'b\\\"1\",\"port\":60002,\"gpu\":0,\"workdir\":\"%s/"
      "worker-1\",\"secret\":\"s3cr3t-0123456789abcdef\",\"workers\":[{\"index\":0,\"host\":"
      "\"lab0\",\"port\":60001,\"gpu\":0},{\"index\":1,\"host\":\"la'b\\\"1\",\"port\":60002,"
      "\"gpu\":0},{\"index\":2,\"host\":\"lab2\",\"port\":60003,\"gpu\":-1}],\"tf_config\":%s}\n",
      root, tf);
  snprintf(path, sizeof(path), "%s/worker-1/cluster.json", root);
  LC_CHECK_STR(slurp(path), want);
  LC_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  snprintf(path, sizeof(path), "%s/worker-1/secret", root);
  LC_CHECK_STR(slurp(path), "s3cr3t-0123456789abcdef\n");
  snprintf(path, sizeof(path), "%s/worker-1", root);
  LC_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
  lc__buf_free(&text);
  free_cluster(&c);
  snprintf(path, sizeof(path), "rm -rf '%s'", root);
  LC_CHECK(system(path) == 0);
}

/* More than 1,024 runtimes: every one's working directory is begun (the cluster's lists of its
 * runtimes had room for 1,024 and dropped the rest silently). Local runtimes under other names,
 * their directories kept (one process each to make them, none to remove them). */
static void test_more_than_1024_hosts(void) {
  enum { NRT = 1100 };
  char root[] = "/tmp/lc-test-hosts.XXXXXX", name[32], cmd[64];
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_engine *e = NULL;
  lc_group *g = NULL;
  lc_cluster c;
  lc_runtime **rts;
  size_t n = 0, begun = 0;
  signal(SIGPIPE, SIG_IGN); /* a local child that ended before its stdin was written */
  LC_REQUIRE(mkdtemp(root) != NULL);
  ro.workdir_root = root;
  ro.keep_workdir = 1;
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  LC_REQUIRE_OK(lc_group_new(&g, e, NULL));
  for (int i = 0; i < NRT; i++) {
    lc_runtime *rt = NULL;
    snprintf(name, sizeof(name), "h%d", i);
    LC_REQUIRE_OK(lc__runtime_make(&rt, &lc__local_ops, e, name, NULL, &ro, 1));
    LC_REQUIRE_OK(lc_group_add(g, rt));
  }
  memset(&c, 0, sizeof(c));
  c.group = g;
  LC_REQUIRE((rts = lc__cluster_runtimes(&c, &n)) != NULL);
  LC_CHECK(n == NRT);
  free(rts);
  lc__cluster_workdirs_begin(&c);
  for (size_t i = 0; i < lc_group_count(g); i++) {
    lc_runtime *rt = lc_group_at(g, i);
    pthread_mutex_lock(&rt->workdir_mu);
    begun += rt->workdir_making != NULL || rt->workdir != NULL;
    pthread_mutex_unlock(&rt->workdir_mu);
  }
  if (begun != NRT)
    fprintf(stderr, "  %zu of %d working directories begun\n", begun, NRT);
  LC_CHECK(begun == NRT);
  lc_group_free(g); /* frees its runtimes */
  lc_engine_free(e);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  LC_CHECK(system(cmd) == 0);
}

LC_TEST_MAIN(LC_TEST(test_start_size_does_not_grow), LC_TEST(test_more_than_1024_hosts),
             LC_TEST(test_setup_gives_tf_config_and_cluster_json))
