# Open files for a start (src/cluster/nofile.c): a hard RLIMIT_NOFILE too low fails before
# anything starts with a message naming the limit; a low soft limit is raised and the start works.
lc_integration_test(test_nofile 300 integration/test_nofile.c)
