# The SSH transport under a stalled host (every sshd of lab0 SIGSTOPped for 40 s during bulk data
# through a forward: the other hosts go on, the keepalive notices it), 20 s and 25 s link blips
# against the heartbeat and keepalive limits, and local children holding no SSH socket.
lc_integration_test(test_stall 600 integration/test_stall.c)
add_dependencies(test_stall lc_tcptool)
target_compile_definitions(test_stall PRIVATE LC_TCPTOOL="$<TARGET_FILE:lc_tcptool>")
