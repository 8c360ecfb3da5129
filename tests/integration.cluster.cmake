lc_integration_test(test_cluster 300 integration/test_cluster.c)
