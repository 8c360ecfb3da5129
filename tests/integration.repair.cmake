lc_integration_test(test_repair 300 integration/test_repair.c)
