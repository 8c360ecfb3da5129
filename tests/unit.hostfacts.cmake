# Host facts in one round trip without a host: the parser on recorded script output (cgroup v1,
# v2, hybrid, unlimited; executables; listening ports; the probe's JSON; nvidia-smi's CSV and its
# error texts), the script run by this machine's shells (also with fake GPU tools on its PATH),
# declared GPUs, and inventory files and host lists with every message they give.
lc_unit_test(test_hostfacts_unit unit/test_hostfacts.c)
