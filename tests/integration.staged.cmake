# examples/staged_type.c linked in as a static type: staging, spread and pack, one worker stopped,
# restarted and killed, on real test hosts.
lc_integration_test(test_staged_type 300 integration/test_staged_type.c
  ${PROJECT_SOURCE_DIR}/examples/staged_type.c)
