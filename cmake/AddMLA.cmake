# Thin helpers shared by the mla CMake files.

# Every mla library and tool links the shared libMLIR.so / libLLVM.so from the
# installed toolchain instead of hundreds of static archives: links take seconds
# and the CI build stays short on a 2-core machine.
function(mla_link_mlir target)
  target_link_libraries(${target} PRIVATE MLIR)
endfunction()
