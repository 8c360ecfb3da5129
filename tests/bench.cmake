# Benchmarks: programs that print a table. Label bench only: never run by default (.ci/run
# excludes the label). Run one with `ctest -L bench -R bench_tunnel -V` or the driver script.
#
# tests/bench/tunnel: our forwards against OpenSSH's; tests/bench/tcpbench is its data source, sink
# and ping server. tests/bench/run_tunnel.sh brings up two test hosts, checks the negotiated
# cipher, runs tunnel and tears the hosts down.
add_executable(lc_tcpbench bench/tcpbench.c)
target_compile_options(lc_tcpbench PRIVATE ${LC_WARNINGS})
target_link_libraries(lc_tcpbench PRIVATE Threads::Threads)
set_target_properties(lc_tcpbench PROPERTIES OUTPUT_NAME tcpbench
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench)

add_executable(lc_bench_tunnel bench/tunnel.c)
target_compile_definitions(lc_bench_tunnel PRIVATE _GNU_SOURCE)
target_compile_options(lc_bench_tunnel PRIVATE ${LC_WARNINGS})
set_target_properties(lc_bench_tunnel PROPERTIES OUTPUT_NAME tunnel
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench)
add_dependencies(lc_bench_tunnel lc_tcpbench lazyclusterctl)

add_test(NAME bench_tunnel
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench/run_tunnel.sh $<TARGET_FILE:lc_bench_tunnel>
          $<TARGET_FILE:lc_tcpbench> $<TARGET_FILE:lazyclusterctl>)
set_tests_properties(bench_tunnel PROPERTIES LABELS bench TIMEOUT 1800 RUN_SERIAL TRUE)

# tests/bench/portprobe: waits until every given local port answers a line, all probed at once
# (the cluster-start benchmarks' "every worker answers here").
add_executable(lc_portprobe bench/portprobe.c)
target_compile_options(lc_portprobe PRIVATE ${LC_WARNINGS})
set_target_properties(lc_portprobe PROPERTIES OUTPUT_NAME portprobe
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench)

# tests/bench/wrapcost: the host-side CPU and wall time of one command (the lifeline around
# `true`) under a given login shell; built from the library's own objects (lc__command_compose).
add_executable(lc_wrapcost bench/wrapcost.c $<TARGET_OBJECTS:lc_objects>)
target_include_directories(lc_wrapcost PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(lc_wrapcost PRIVATE _GNU_SOURCE)
target_compile_options(lc_wrapcost PRIVATE ${LC_WARNINGS})
target_link_libraries(lc_wrapcost PRIVATE ${LC_DEPS})
set_target_properties(lc_wrapcost PROPERTIES OUTPUT_NAME wrapcost
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench)

# tests/bench/peercheck: the peer check of our listeners (issue 14): one NETLINK_SOCK_DIAG lookup,
# and connections per second through a local forward with the check and without it (peers any).
add_executable(lc_peercheck bench/peercheck.c $<TARGET_OBJECTS:lc_objects>)
target_include_directories(lc_peercheck PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(lc_peercheck PRIVATE _GNU_SOURCE)
target_compile_options(lc_peercheck PRIVATE ${LC_WARNINGS})
target_link_libraries(lc_peercheck PRIVATE ${LC_DEPS})
set_target_properties(lc_peercheck PROPERTIES OUTPUT_NAME peercheck
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/bench)
add_test(NAME bench_peercheck COMMAND lc_peercheck)
set_tests_properties(bench_peercheck PROPERTIES LABELS bench TIMEOUT 600)

# tests/bench/map.sh (issue 15): 1000 jobs of `true` over 16 hosts x 4 slots, `lazyclusterctl map`
# against GNU parallel --sshlogin (plain, with ControlMaster, with curve25519), and a pool's jobs
# per second on 1 and 16 hosts. Brings up its own 16 test hosts; needs GNU parallel (.ci/deps).
add_test(NAME bench_map
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench/map.sh --lc $<TARGET_FILE:lazyclusterctl>)
set_tests_properties(bench_map PROPERTIES LABELS bench TIMEOUT 3600 RUN_SERIAL TRUE)

# tests/bench/scale.sh (issue 16): 64 and 256 test hosts: exec -- true (against pdsh and an ssh
# loop), a light start of 4 workers per host with the mesh, a Dask start of 1 worker per host
# (against SSHCluster at 64); wall, our CPU and RSS per host, the hosts' sshd CPU, PASS/MISS per
# target. Runs itself in a network namespace of its own; fails when anything is left on a host.
add_test(NAME bench_scale
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench/scale.sh --lc $<TARGET_FILE:lazyclusterctl>)
set_tests_properties(bench_scale PROPERTIES LABELS bench TIMEOUT 5400 RUN_SERIAL TRUE)
