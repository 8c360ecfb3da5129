lc_unit_test(test_options unit/test_options.c)
