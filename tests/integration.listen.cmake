# Issue 14: what sshd really bound for -R forwards (GatewayPorts), and readiness that a stranger's
# listener cannot pass (port squatting).
lc_integration_test(test_listen_safety 300 integration/test_listen_safety.c)
