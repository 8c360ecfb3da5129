lc_unit_test(test_core unit/test_core.c)
