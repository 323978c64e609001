# Thin helpers shared by the mla CMake files.

# Every mla library and tool links the shared libMLIR.so / libLLVM.so from the
# installed toolchain instead of hundreds of static archives: links take seconds
# and the CI build stays short on a 2-core machine.
function(mla_link_mlir target)
  target_link_libraries(${target} PRIVATE MLIR)
endfunction()

# LLVM Support for the MLIR-free libraries (mla/Contract, mla/GpuRuntime) and
# what links them. SHARED: the toolchain's libLLVM.so, as everything else in a
# build with MLIR. STATIC: the archives, for what is deployed to machines
# without LLVM (mla-bench, libMLAGpuCAPI.so): zlib and zstd stay dynamic since
# every such system has them; LLVMSupport's imported target is not used
# because it also drags in libz3.
function(mla_link_llvm_support target mode)
  if(mode STREQUAL "SHARED")
    target_link_libraries(${target} PRIVATE LLVM)
  elseif(mode STREQUAL "STATIC")
    target_link_libraries(${target} PRIVATE
      ${LLVM_LIBRARY_DIR}/libLLVMSupport.a
      ${LLVM_LIBRARY_DIR}/libLLVMDemangle.a
      z zstd ${CMAKE_DL_LIBS} pthread)
  else()
    message(FATAL_ERROR "mla_link_llvm_support: mode must be SHARED or STATIC")
  endif()
endfunction()

# Hides every symbol of a deployed shared library but those matching the
# C API's `pattern` (e.g. "mlaGpu*"), including the statically linked LLVM
# Support's, so that it coexists with a libLLVM.so in the same process.
function(mla_export_only target pattern)
  set(map ${CMAKE_CURRENT_BINARY_DIR}/${target}.exports.map)
  file(WRITE ${map} "{ global: ${pattern}; local: *; };\n")
  target_link_options(${target} PRIVATE
    -Wl,--version-script=${map} -Wl,--exclude-libs,ALL)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
endfunction()
