# Integration tests on real sshd test hosts (see tests/support/testhosts).
lc_integration_test(test_exec 300 integration/test_exec.c)
lc_integration_test(test_files 300 integration/test_files.c)
lc_integration_test(test_connect 300 integration/test_connect.c)
lc_integration_test(test_lifeline 180 integration/test_lifeline.c)
lc_integration_test(test_shells 600 integration/test_shells.c)
