# A worker's context (src/cluster/context.c): the bytes of a worker's start do not grow with the
# cluster, and the setup text run by /bin/sh gives the exact TF_CONFIG and cluster.json. No hosts.
lc_unit_test(test_context unit/test_context.c)
