# Placement (spread, pack, per-host cap, CPU-only hosts, the master's host excluded; also through
# lazyclusterctl start with GPUs declared in an inventory) and staging (prepare_host once per
# host, prepare_worker per worker, a failing step named and undone) on the test hosts.
lc_integration_test(test_cluster_place 300 integration/test_cluster_place.c)
