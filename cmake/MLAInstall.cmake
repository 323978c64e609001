# `cmake --install <build> --prefix P`: the tools, the public headers (with
# the TableGen-generated .inc files they include), the libraries and a CMake
# package, so that a downstream project's find_package(MLA) links MLA::CAPI
# (the C API, libMLACAPI.so) or MLA::MLAIR (the dialect, for C++ users).
include(CMakePackageConfigHelpers)

# The same lib/ that add_mlir_library installs the static libraries into.
set(MLA_INSTALL_LIBDIR lib${LLVM_LIBDIR_SUFFIX})
set(MLA_INSTALL_CMAKEDIR ${MLA_INSTALL_LIBDIR}/cmake/mla)
# Installed binaries find mla's libraries next to them and libMLIR.so/libLLVM.so
# where the toolchain keeps them (Debian's /usr/lib/llvm-22/lib is not on the
# loader's default path).
set(MLA_INSTALL_RPATH "\$ORIGIN/../${MLA_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")

# Shared libraries carry mla's version, not LLVM's (add_llvm_library would
# name them .so.22.1): libMLACAPI.so.<major> -> libMLACAPI.so.<version>.
set(MLA_SHARED_LIBRARIES MLACAPI)
if(TARGET MLAGpuCAPI)
  list(APPEND MLA_SHARED_LIBRARIES MLAGpuCAPI)
endif()
foreach(lib ${MLA_SHARED_LIBRARIES})
  set_target_properties(${lib} PROPERTIES
    VERSION ${MLA_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH "${MLA_INSTALL_RPATH}")
  target_include_directories(${lib} INTERFACE $<INSTALL_INTERFACE:include>)
endforeach()
set_target_properties(MLACAPI PROPERTIES EXPORT_NAME CAPI)
if(TARGET MLAGpuCAPI)
  set_target_properties(MLAGpuCAPI PROPERTIES EXPORT_NAME GpuCAPI)
endif()
target_include_directories(MLAIR INTERFACE $<INSTALL_INTERFACE:include>)

install(TARGETS ${MLA_SHARED_LIBRARIES} MLAIR
  EXPORT MLATargets
  LIBRARY DESTINATION ${MLA_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${MLA_INSTALL_LIBDIR}
  RUNTIME DESTINATION bin)

set(MLA_TOOLS mla-aot mla-opt mla-run)
foreach(tool mla-bench mla-gpu-smoke)
  if(TARGET ${tool})
    list(APPEND MLA_TOOLS ${tool})
  endif()
endforeach()
set_target_properties(mla-aot mla-opt mla-run PROPERTIES
  INSTALL_RPATH "${MLA_INSTALL_RPATH}")
install(TARGETS ${MLA_TOOLS} RUNTIME DESTINATION bin)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mla ${PROJECT_SOURCE_DIR}/include/mla-c
  DESTINATION include
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/mla
  DESTINATION include
  FILES_MATCHING PATTERN "*.inc"
  PATTERN "CMakeFiles" EXCLUDE)

install(EXPORT MLATargets
  NAMESPACE MLA::
  DESTINATION ${MLA_INSTALL_CMAKEDIR})
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/MLAConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/MLAConfig.cmake
  INSTALL_DESTINATION ${MLA_INSTALL_CMAKEDIR})
# 0.x releases may change the C API between minor versions.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/MLAConfigVersion.cmake
  VERSION ${MLA_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/MLAConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/MLAConfigVersion.cmake
  DESTINATION ${MLA_INSTALL_CMAKEDIR})
