# libpfm4 (perfmon2's event encoder), which ships no CMake or pkg-config files: finds the header
# and library and defines the imported target Pfm::pfm. Installed beside pacerConfig.cmake so a
# consumer of pacer::hwcounters finds it the same way.
find_path(PFM_INCLUDE_DIR perfmon/pfmlib_perf_event.h)
find_library(PFM_LIBRARY pfm)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Pfm REQUIRED_VARS PFM_LIBRARY PFM_INCLUDE_DIR)
if(Pfm_FOUND AND NOT TARGET Pfm::pfm)
  add_library(Pfm::pfm UNKNOWN IMPORTED)
  set_target_properties(Pfm::pfm PROPERTIES IMPORTED_LOCATION "${PFM_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${PFM_INCLUDE_DIR}")
endif()
mark_as_advanced(PFM_INCLUDE_DIR PFM_LIBRARY)
