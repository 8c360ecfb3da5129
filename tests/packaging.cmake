# Packaging: cmake --install into a prefix under the build tree, then build and run
# tests/consumer against it with find_package(lazycluster) and with pkg-config, shared and static.
# Needs the whole project built, which ctest runs after.

set(LC_CONSUMER_FLAGS "")
if(LC_SANITIZE STREQUAL "thread")
  # The installed libraries carry the sanitizer runtime; the consumer must link it too.
  set(LC_CONSUMER_FLAGS "-fsanitize=thread")
elseif(LC_SANITIZE OR LC_FUZZ)
  set(LC_CONSUMER_FLAGS "-fsanitize=address,undefined")
endif()

add_test(NAME packaging
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh
    ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/packaging ${CMAKE_INSTALL_LIBDIR})
set_tests_properties(packaging PROPERTIES LABELS unit TIMEOUT 300
  ENVIRONMENT "CC=${CMAKE_C_COMPILER};CMAKE_GENERATOR=${CMAKE_GENERATOR};LC_CONSUMER_FLAGS=${LC_CONSUMER_FLAGS}")
