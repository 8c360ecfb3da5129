# `lazyclusterctl forward` on a real test host (the binary comes through LC_CTL).
lc_integration_test(test_cli_forward 180 integration/test_cli_forward.c)
add_dependencies(test_cli_forward lazyclusterctl)
