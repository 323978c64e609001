# Writes OUT: a header defining MLA_CODEGEN_FINGERPRINT, the SHA-256 of the
# sources that decide what a kernel spec compiles to (ROOT's codegen
# directories), so that a kernel cache filled by one build of mla never
# serves another build's kernels for the same spec. Run as
#   cmake -DROOT=<source dir> -DOUT=<header> -P CodegenFingerprint.cmake
# OUT is rewritten only when the fingerprint changes.
set(dirs Contract Dialect GPUCodegen Conversion Pipelines)
set(globs)
foreach(dir ${dirs})
  list(APPEND globs ${ROOT}/include/mla/${dir}/*.h ${ROOT}/include/mla/${dir}/*.td
       ${ROOT}/lib/${dir}/*.cpp ${ROOT}/lib/${dir}/*.h ${ROOT}/lib/${dir}/*.td)
endforeach()
file(GLOB_RECURSE files ${globs})
list(SORT files)
set(digests "")
foreach(file ${files})
  file(SHA256 ${file} digest)
  file(RELATIVE_PATH name ${ROOT} ${file})
  string(APPEND digests "${name} ${digest}\n")
endforeach()
string(SHA256 fingerprint "${digests}")
string(SUBSTRING ${fingerprint} 0 16 fingerprint)
set(content "#define MLA_CODEGEN_FINGERPRINT \"${fingerprint}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
