# install.cmake - what `cmake --install` puts where: headers, the shared and static library, the
# CLI, a pkg-config file and a relocatable CMake package (lazycluster::lazycluster and
# lazycluster::lazycluster_static).
#
# Included from the top-level CMakeLists.txt after the targets are defined.

include(CMakePackageConfigHelpers)

set(LC_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lazycluster)

# Headers: lazycluster.h and lazycluster/*.h, keeping the layout.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT Development
  FILES_MATCHING PATTERN "*.h")

# Libraries. The shared library carries its SONAME (liblazycluster.so.MAJOR); the unversioned
# liblazycluster.so link is a development file. The static library links libssh, libuv, pthread
# and dl PRIVATE, which CMake exports as $<LINK_ONLY:...>: the package config recreates the
# PkgConfig::LIBSSH, PkgConfig::LIBUV and Threads::Threads targets those entries name.
install(TARGETS lazycluster lazycluster_static
  EXPORT lazyclusterTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)

if(TARGET lazyclusterctl)
  install(TARGETS lazyclusterctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
endif()

# CMake package: <libdir>/cmake/lazycluster/lazycluster{Config,ConfigVersion,Targets}.cmake.
install(EXPORT lazyclusterTargets
  NAMESPACE lazycluster::
  FILE lazyclusterTargets.cmake
  DESTINATION ${LC_CMAKE_INSTALL_DIR}
  COMPONENT Development)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/lazyclusterConfig.cmake.in
  ${PROJECT_BINARY_DIR}/lazyclusterConfig.cmake
  INSTALL_DESTINATION ${LC_CMAKE_INSTALL_DIR})

# Before 1.0 a minor release may break the API, so only the same MAJOR.MINOR is compatible.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(LC_VERSION_COMPAT SameMinorVersion)
else()
  set(LC_VERSION_COMPAT SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lazyclusterConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ${LC_VERSION_COMPAT})

install(FILES
  ${PROJECT_BINARY_DIR}/lazyclusterConfig.cmake
  ${PROJECT_BINARY_DIR}/lazyclusterConfigVersion.cmake
  DESTINATION ${LC_CMAKE_INSTALL_DIR}
  COMPONENT Development)

# pkg-config file. It is written at install time, so that `cmake --install --prefix DIR` gets
# prefix=DIR rather than the prefix configured at build time; DESTDIR is not part of the prefix.
# Absolute paths (not ${pcfiledir}) keep -I/usr/include recognisable as a system directory.
set(LC_PC_FILE ${PROJECT_BINARY_DIR}/pkgconfig/lazycluster.pc)
install(CODE "
  set(LC_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(LC_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(LC_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  if(NOT IS_ABSOLUTE \"\${LC_PC_LIBDIR}\")
    set(LC_PC_LIBDIR \"\\\${exec_prefix}/\${LC_PC_LIBDIR}\")
  endif()
  if(NOT IS_ABSOLUTE \"\${LC_PC_INCLUDEDIR}\")
    set(LC_PC_INCLUDEDIR \"\\\${prefix}/\${LC_PC_INCLUDEDIR}\")
  endif()
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/lazycluster.pc.in\" \"${LC_PC_FILE}\" @ONLY)
" COMPONENT Development)
install(FILES ${LC_PC_FILE}
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT Development)
