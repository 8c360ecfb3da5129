# The library inside a program that did not prepare for it (tests/integration/test_embed.c):
# SIGPIPE at its default while forwarded clients reset, lc_engine_free with a runtime, a process
# and a forward still open.
lc_integration_test(test_embed 600 integration/test_embed.c)
