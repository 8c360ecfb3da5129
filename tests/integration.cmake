# Integration tests on real sshd test hosts (see tests/support/testhosts).
lc_integration_test(test_exec 300 integration/test_exec.c)
