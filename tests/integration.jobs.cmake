# The job queue (lazycluster/jobs.h) on real test hosts: command jobs over GPU slots, retries,
# cancel, joblog and resume, a host lost while its jobs run (link cut) and back, returns, the
# give-up clock (every link cut), a pool and lc_jobs_update past its timeout.
lc_integration_test(test_jobs 900 integration/test_jobs.c)
