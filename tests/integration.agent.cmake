lc_integration_test(test_agent 300 integration/test_agent.c)
