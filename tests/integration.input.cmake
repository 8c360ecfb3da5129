lc_integration_test(test_input 600 integration/test_input.c)
