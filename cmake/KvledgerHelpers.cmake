# kvledger_library(NAME <name> SRCS <files...> [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Defines target kvledger_<name> with alias kvledger::<name>, the project's warning flags and the
# repository root on the include path, so every folder's CMakeLists reads the same.
function(kvledger_apply_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(KVLEDGER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(kvledger_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kvledger_${ARG_NAME} STATIC ${ARG_SRCS})
  add_library(kvledger::${ARG_NAME} ALIAS kvledger_${ARG_NAME})
  target_include_directories(kvledger_${ARG_NAME} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                        $<INSTALL_INTERFACE:include>)
  set_target_properties(kvledger_${ARG_NAME} PROPERTIES EXPORT_NAME ${ARG_NAME})
  target_link_libraries(kvledger_${ARG_NAME} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  kvledger_apply_warnings(kvledger_${ARG_NAME})
endfunction()

# kvledger_executable(NAME <name> SRCS <files...> DEPS ...)
function(kvledger_executable)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  kvledger_apply_warnings(${ARG_NAME})
endfunction()
