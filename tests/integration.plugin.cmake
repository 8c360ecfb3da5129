# Cluster type plug-ins: `lazyclusterctl start --type PATH.so` with examples/plugin_type.c
# (libmytype.so) on this machine and on test hosts, and broken plug-ins (no entry point, an
# unknown version) built here from integration/plugin_bad.c; launcher struct versions (a plug-in
# with the older layouts, one stating its own start limits) from integration/plugin_versions.c.
# Only when the examples are built.
if(TARGET mytype)
  foreach(bad noentry badversion)
    add_library(plugin_${bad} MODULE integration/plugin_bad.c)
    target_include_directories(plugin_${bad} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(plugin_${bad} PRIVATE ${LC_WARNINGS})
  endforeach()
  target_compile_definitions(plugin_noentry PRIVATE PLUGIN_NO_ENTRY)
  target_compile_definitions(plugin_badversion PRIVATE PLUGIN_BAD_VERSION)
  foreach(v old limits)
    add_library(plugin_${v} MODULE integration/plugin_versions.c)
    target_include_directories(plugin_${v} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(plugin_${v} PRIVATE ${LC_WARNINGS})
  endforeach()
  target_compile_definitions(plugin_old PRIVATE PLUGIN_OLD_LAUNCHERS)
  target_compile_definitions(plugin_limits PRIVATE PLUGIN_TYPE_LIMITS)
  add_test(NAME test_plugin COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_plugin.sh)
  set_tests_properties(test_plugin PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>;LC_PLUGIN=$<TARGET_FILE:mytype>;LC_PLUGIN_NOENTRY=$<TARGET_FILE:plugin_noentry>;LC_PLUGIN_BADVERSION=$<TARGET_FILE:plugin_badversion>;LC_PLUGIN_OLD=$<TARGET_FILE:plugin_old>;LC_PLUGIN_LIMITS=$<TARGET_FILE:plugin_limits>")
endif()
