#!/bin/sh
# Fails when any of the given binaries would load libLLVM or libMLIR at run
# time, or when a shared library among them exports more than the C API
# (mlaGpu*): the deployed GPU runtime must run where neither is installed.
status=0
for f in "$@"; do
  if ldd "$f" | grep -Ei 'libllvm|libmlir'; then
    echo "error: $f loads LLVM or MLIR at run time" >&2
    status=1
  fi
  case "$f" in
    *.so)
      extra=$(nm -D --defined-only "$f" | awk '$2 ~ /[TDBRW]/ {print $3}' | grep -v '^mlaGpu' | grep -v '^_' || true)
      if [ -n "$extra" ]; then
        echo "error: $f exports more than mlaGpu*: $(echo $extra | head -c 300)" >&2
        status=1
      fi ;;
  esac
done
exit $status
