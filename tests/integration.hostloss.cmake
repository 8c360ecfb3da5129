lc_integration_test(test_hostloss 400 integration/test_hostloss.c)
