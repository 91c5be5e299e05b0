# Writes pacer/version.h with the current git sha, at every build (the pacer_version target in the
# top-level CMakeLists.txt), so an incremental build after a commit or a checkout does not carry
# the sha of the tree it was configured from. A tree with uncommitted changes to tracked files
# gets "-dirty" after the sha: an event log or results row from such a build says so.
# configure_file rewrites the header only when its text changes, so nothing rebuilds otherwise.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DPACER_VERSION=... -P git_version.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE PACER_GIT_SHA OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT PACER_GIT_SHA)
  set(PACER_GIT_SHA unknown)
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND PACER_GIT_SHA "-dirty")
  endif()
endif()
set(PROJECT_VERSION ${PACER_VERSION})
configure_file(${SOURCE_DIR}/cmake/version.h.in ${OUTPUT} @ONLY)
