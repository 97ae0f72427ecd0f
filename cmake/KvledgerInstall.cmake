# `cmake --install` puts the cost model and accounting libraries, their headers (under include/lib/
# and include/kvledger/v1/) and a CMake package in the prefix, so a C++ scheduler can link the cost
# model in-process:
#   find_package(kvledger CONFIG REQUIRED)
#   target_link_libraries(scheduler PRIVATE kvledger::cost_model kvledger::accounting)
# Unless built with -DKVLEDGER_LIB_ONLY=ON, it also installs the component `reporter` (needs gRPC):
# kvledger::reporter with client/reporter.h and the generated service code it links,
#   find_package(kvledger CONFIG REQUIRED COMPONENTS reporter)
#   target_link_libraries(scheduler PRIVATE kvledger::reporter)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVLEDGER_INSTALLED_LIBS kvledger_base kvledger_proto_messages kvledger_cost_model kvledger_profiles kvledger_capacity
    kvledger_accounting kvledger_advice kvledger_planning kvledger_wire)
install(TARGETS ${KVLEDGER_INSTALLED_LIBS} EXPORT kvledgerTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lib
        FILES_MATCHING PATTERN "*.h")
install(FILES ${KVLEDGER_GEN_DIR}/lib/accounting/record_facts.gen.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lib/accounting)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/kvledger/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvledger
        FILES_MATCHING PATTERN "*.pb.h" PATTERN "*.grpc.pb.h" EXCLUDE)
install(EXPORT kvledgerTargets NAMESPACE kvledger:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvledger)
if(NOT KVLEDGER_LIB_ONLY)
  install(TARGETS kvledger_proto_grpc kvledger_reporter EXPORT kvledgerReporterTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/client/reporter.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/client)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/kvledger/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvledger
          FILES_MATCHING PATTERN "*.grpc.pb.h")
  install(EXPORT kvledgerReporterTargets NAMESPACE kvledger:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvledger)
endif()
# Everything `cmake --install` puts in the prefix, built: `cmake --build DIR --target kvledger_installable`
# before `cmake --install DIR` needs no other target (docs/integration.md).
add_custom_target(kvledger_installable)
add_dependencies(kvledger_installable ${KVLEDGER_INSTALLED_LIBS})
if(NOT KVLEDGER_LIB_ONLY)
  add_dependencies(kvledger_installable kvledger_proto_grpc kvledger_reporter)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvledgerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvledgerConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvledger)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvledgerConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvledgerConfig.cmake ${PROJECT_BINARY_DIR}/kvledgerConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvledger)
