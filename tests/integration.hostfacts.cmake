# Host facts in one round trip on real test hosts: lab1's facts, the local runtime against
# lc_hostinfo_local, a link that goes down, and a host whose sshd is moved into a cgroup with a
# CPU quota and a memory limit (needs root and a cgroup file system with the cpu and memory
# controllers, v1 or v2).
lc_integration_test(test_hostfacts 300 integration/test_hostfacts.c)
