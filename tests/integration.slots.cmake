# Many long-running processes on one host (48 workers, slots=48; a host with MaxSessions 2):
# more session channels than a few connections carry, through the API and lazyclusterctl start.
lc_integration_test(test_slots 900 integration/test_slots.c)
