# Installs the pacer build BUILD_DIR into a fresh prefix under WORK_DIR, then configures, builds
# and runs the consumer project CONSUMER_DIR against it with find_package(pacer) alone (no path
# into pacer's source or build tree). Run as:
#   cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... -DGENERATOR=...
#         [-DLINK_FLAGS=<sanitizer link flags of a sanitized pacer>] -P check_consumer.cmake
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok\n${out}")
endfunction()
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(GLOB config ${prefix}/lib*/cmake/pacer/pacerConfig.cmake)
if(NOT config
   OR NOT EXISTS ${prefix}/include/pacer/version.h
   OR NOT EXISTS ${prefix}/include/runtime/session.h)
  message(FATAL_ERROR "the install under ${prefix} lacks the config or headers")
endif()
run("configure" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
run("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("run" ${WORK_DIR}/build/pacer_consumer)
file(REMOVE_RECURSE ${WORK_DIR})
