# cmake --install: the public headers, the libraries an embedder links (core
# and event: the engine), the vigil program, a CMake package (find_package(vigil)
# gives vigil::vigil, vigil::event, vigil::core) and vigil.pc for pkg-config.
# The upper layers (upstream, http, stream, server) have no public headers:
# they are the server's insides, built into the vigil program, not installed.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vigil
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
if(EXISTS ${PROJECT_BINARY_DIR}/generated/include/vigil/version.h)
  install(FILES ${PROJECT_BINARY_DIR}/generated/include/vigil/version.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vigil)
endif()

install(TARGETS vigil_core vigil_event vigil_vigil EXPORT vigilTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS vigil RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(VIGIL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vigil)
install(EXPORT vigilTargets NAMESPACE vigil:: DESTINATION ${VIGIL_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vigilConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/vigilConfig.cmake
                              INSTALL_DESTINATION ${VIGIL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vigilConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vigilConfig.cmake ${PROJECT_BINARY_DIR}/vigilConfigVersion.cmake
        DESTINATION ${VIGIL_CMAKE_DIR})

# pkg-config: static archives need their dependencies on the link line, so
# they are in Libs.private (pkg-config --static); a shared build needs only Libs.
set(VIGIL_PC_PRIVATE "-pthread -lssl -lcrypto -lpcre2-8 -lz")
if(VIGIL_HAVE_URING)
  string(APPEND VIGIL_PC_PRIVATE " -luring")
endif()
if(VIGIL_PC_EXTRA_PRIVATE)
  string(APPEND VIGIL_PC_PRIVATE " ${VIGIL_PC_EXTRA_PRIVATE}")
endif()
# prefix is found from the .pc file's own place, so `cmake --install --prefix`
# anywhere gives a working file.
file(RELATIVE_PATH VIGIL_PC_UP /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/vigil.pc.in ${PROJECT_BINARY_DIR}/vigil.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vigil.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
