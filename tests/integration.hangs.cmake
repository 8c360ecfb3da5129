# Bounded waits and bounded memory (issue 16, "Nothing hangs"): a group exec's per-host timeout,
# a group report under 1 GB of output, discovery with a host whose nvidia-smi hangs.
lc_integration_test(test_hangs 600 integration/test_hangs.c)
