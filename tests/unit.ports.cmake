# Port lists (parsing, errors, merging, formatting), /proc/net/tcp listings from recorded text,
# the process-wide reservation (also under threads) and the bind test on this machine.
lc_unit_test(test_ports_unit unit/test_ports.c)
