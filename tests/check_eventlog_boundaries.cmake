# The event-log schema sits below both of its users: eventlog/ includes nothing of pacer, the
# writer (runtime/) includes nothing of the reader (analysis/), and the reader nothing of the
# writer. Run as: cmake -DSOURCE_DIR=<repo> -P check_eventlog_boundaries.cmake
set(violations "")
function(check_folder folder pattern what)
  file(GLOB files ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.cpp)
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"${pattern}")
    if(lines)
      string(REPLACE "${SOURCE_DIR}/" "" rel ${f})
      list(APPEND violations "${rel} includes ${what}: ${lines}")
    endif()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()
# eventlog/ includes only its own headers.
check_folder(eventlog "(analysis|runtime|ops|loader|hwcounters|tools|bench|tests)/"
             "a pacer header outside eventlog/")
check_folder(runtime "analysis/" "the reader (analysis/)")
check_folder(analysis "(runtime|ops|loader|hwcounters)/" "the writer's side")
if(violations)
  string(REPLACE ";" "\n" msg "${violations}")
  message(FATAL_ERROR "event-log boundaries broken:\n${msg}")
endif()
message(STATUS "event-log boundaries hold")
