# Cluster type plug-ins: `lazyclusterctl start --type PATH.so` with examples/plugin_type.c
# (libmytype.so, which calls the public API) on this machine and on test hosts; plug-ins the
# loader refuses (no entry point, a newer struct version, only the version-1 entry point, one that
# refuses the library, no make) and one whose make fails, built here from integration/plugin_bad.c;
# launcher struct versions (a plug-in with the older layouts, one stating its own start limits)
# from integration/plugin_versions.c. Only when the examples are built.
if(TARGET mytype)
  set(LC_PLUGIN_ENV "")
  foreach(bad noentry newer v1only refuse nomake makefail)
    add_library(plugin_${bad} MODULE integration/plugin_bad.c)
    target_include_directories(plugin_${bad} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(plugin_${bad} PRIVATE ${LC_WARNINGS})
    string(TOUPPER ${bad} BAD)
    list(APPEND LC_PLUGIN_ENV "LC_PLUGIN_${BAD}=$<TARGET_FILE:plugin_${bad}>")
  endforeach()
  target_compile_definitions(plugin_noentry PRIVATE PLUGIN_NO_ENTRY)
  target_compile_definitions(plugin_newer PRIVATE PLUGIN_NEWER)
  target_compile_definitions(plugin_v1only PRIVATE PLUGIN_V1_ONLY)
  target_compile_definitions(plugin_refuse PRIVATE PLUGIN_REFUSE)
  target_compile_definitions(plugin_nomake PRIVATE PLUGIN_NO_MAKE)
  target_compile_definitions(plugin_makefail PRIVATE PLUGIN_MAKE_FAIL)
  foreach(v old limits)
    add_library(plugin_${v} MODULE integration/plugin_versions.c)
    target_include_directories(plugin_${v} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(plugin_${v} PRIVATE ${LC_WARNINGS})
  endforeach()
  target_compile_definitions(plugin_old PRIVATE PLUGIN_OLD_LAUNCHERS)
  target_compile_definitions(plugin_limits PRIVATE PLUGIN_TYPE_LIMITS)
  list(APPEND LC_PLUGIN_ENV "LC_PLUGIN_OLD=$<TARGET_FILE:plugin_old>"
    "LC_PLUGIN_LIMITS=$<TARGET_FILE:plugin_limits>" "LC_PLUGIN_STAGED=$<TARGET_FILE:staged>")
  add_test(NAME test_plugin COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_plugin.sh)
  set_tests_properties(test_plugin PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>;LC_PLUGIN=$<TARGET_FILE:mytype>;${LC_PLUGIN_ENV}")
  # lc_cluster_type_load called directly, from a program that does not export the API.
  lc_test_executable(test_plugin_load integration/test_plugin_load.c)
  add_dependencies(test_plugin_load mytype plugin_noentry plugin_newer plugin_v1only plugin_nomake
    plugin_limits)
  add_test(NAME test_plugin_load COMMAND test_plugin_load)
  set_tests_properties(test_plugin_load PROPERTIES LABELS unit TIMEOUT 60
    ENVIRONMENT "LC_PLUGIN=$<TARGET_FILE:mytype>;${LC_PLUGIN_ENV}")
  # The loader's refusals alone, on this machine (no test hosts): what the ASan build runs.
  add_test(NAME test_plugin_refused COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_plugin.sh refused)
  set_tests_properties(test_plugin_refused PROPERTIES LABELS unit TIMEOUT 120
    ENVIRONMENT "LC_CTL=$<TARGET_FILE:lazyclusterctl>;LC_PLUGIN=$<TARGET_FILE:mytype>;${LC_PLUGIN_ENV}")
endif()

# lazyclusterctl exports every public function (and nothing else named lc_) to plug-ins.
add_test(NAME test_plugin_exports COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_plugin_exports.sh
  $<TARGET_FILE:lazyclusterctl> ${PROJECT_SOURCE_DIR}/include)
set_tests_properties(test_plugin_exports PROPERTIES LABELS unit TIMEOUT 60)
