lc_unit_test(test_core unit/test_core.c)
lc_unit_test(test_secret unit/test_secret.c)
