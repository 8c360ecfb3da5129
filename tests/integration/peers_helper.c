/*
 * peers_helper.c - a small program of test_peers, run as a plain user (nobody): makes a local
 * forward on the local runtime to 127.0.0.1:TPORT under the peer policy MODE, prints "port N",
 * prints every notice of its engine as "notice: TEXT", and ends at EOF on stdin.
 *
 *   peers_helper MODE TPORT
 *
 * MODE: null (no engine options), v1 (version-1 engine options: no peers field), owner,
 * owner+root, any (the engine's peers), fwd-any (engine owner, the forward's peers any),
 * fwd-owner (engine any, the forward's peers owner).
 */
#include "lazycluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_notice(const char *message, void *payload) {
  (void)payload;
  printf("notice: %s\n", message);
  fflush(stdout);
}

int main(int argc, char **argv) {
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  lc_forward *f = NULL;
  const char *mode;
  char buf[256];
  int rc = 1;
  if (argc != 3) {
    fprintf(stderr, "usage: peers_helper MODE TPORT\n");
    return 2;
  }
  mode = argv[1];
  eo.on_notice = on_notice;
  if (strcmp(mode, "v1") == 0) {
    /* a caller built against the version-1 header: only version and flags exist */
    struct {
      unsigned int version, flags;
    } *v1 = malloc(sizeof(*v1));
    v1->version = 1;
    v1->flags = 0;
    if (lc_engine_new(&engine, (const lc_engine_options *)v1) < 0)
      goto out;
    free(v1);
  } else {
    if (strcmp(mode, "owner+root") == 0)
      eo.peers = LC_PEERS_OWNER_AND_ROOT;
    else if (strcmp(mode, "any") == 0 || strcmp(mode, "fwd-owner") == 0)
      eo.peers = LC_PEERS_ANY;
    if (strcmp(mode, "fwd-any") == 0)
      fo.peers = LC_PEERS_ANY + 1;
    else if (strcmp(mode, "fwd-owner") == 0)
      fo.peers = LC_PEERS_OWNER + 1;
    if (lc_engine_new(&engine, strcmp(mode, "null") == 0 ? NULL : &eo) < 0)
      goto out;
  }
  if (lc_runtime_new_local(&rt, engine, NULL) < 0 ||
      lc_forward_new(&f, rt, LC_FORWARD_LOCAL, 0, "127.0.0.1", atoi(argv[2]), &fo) < 0)
    goto out;
  printf("port %d\n", lc_forward_port(f));
  fflush(stdout);
  while (read(0, buf, sizeof(buf)) > 0)
    ;
  rc = 0;
out:
  if (rc != 0)
    fprintf(stderr, "peers_helper: %s\n", lc_error_last());
  lc_forward_free(f);
  lc_runtime_free(rt);
  lc_engine_free(engine);
  return rc;
}
