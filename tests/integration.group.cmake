lc_integration_test(test_group 300 integration/test_group.c)
