lc_integration_test(test_scale 300 integration/test_scale.c)
