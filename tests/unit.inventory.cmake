# Host ranges (pdsh/ClusterShell "node[01-16],gpu[1-4,7]"): the expander and its messages, and
# ranges in host lists and inventory files, without a host.
lc_unit_test(test_inventory unit/test_inventory.c)
