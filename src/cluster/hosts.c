/*
 * hosts.c - lost hosts and their workers. A stub until host loss is built: no host is ever
 * taken for lost, so every end goes to the restart policy (repair.c).
 */
#include "cluster_internal.h"

int lc__hosts_tick(lc_cluster *c) {
  (void)c;
  return 0;
}

int lc__hosts_took(lc_cluster *c, lc__worker *w) {
  (void)c;
  (void)w;
  return 0;
}
