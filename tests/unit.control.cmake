lc_unit_test(test_control unit/test_control.c)
