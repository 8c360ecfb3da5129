lc_integration_test(test_discover 300 integration/test_discover.c)
