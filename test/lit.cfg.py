# lit configuration for the mla regression tests.
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MLA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "mutate_inputs.py", "python"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mla_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mla_src_root", config.mla_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(
    ("%mla_unittests", os.path.join(config.mla_obj_root, "unittests", "MLAUnitTests")))

# Strict FileCheck everywhere: no variable leaks between CHECK-LABELs, no
# prefixes that nothing checks.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.mla_tools_dir, config.llvm_tools_dir]
tools = ["mla-aot", "mla-opt", "mla-run", "mlir-runner", "not"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# Built only where cuda.h was found; its tests are REQUIRES: cuda-sm90 anyway.
llvm_config.add_tool_substitutions(
    [ToolSubst("mla-gpu-smoke", unresolved="ignore"),
     ToolSubst("mla-bench", unresolved="ignore"),
     ToolSubst("mla-prefill-bench", unresolved="ignore")], tool_dirs)

# Execution tests run the CPU pipeline's output with mlir-runner and print
# through MLIR's runner utilities.
config.substitutions.append(
    ("%mlir_runner_libs",
     ",".join(os.path.join(config.llvm_tools_dir, "..", "lib", lib)
              for lib in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))))

# GPU features: a test that needs an H200 says `REQUIRES: cuda-sm90` and is
# reported UNSUPPORTED (not passed) on machines without one.
def _gpu_compute_capabilities():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]

for cap in _gpu_compute_capabilities():
    if cap.startswith("9."):
        config.available_features.add("cuda-sm90")
    if cap.startswith("10."):
        config.available_features.add("cuda-sm100")

# The formatting check needs the clang-format of the LLVM mla builds with
# (scripts/install-deps.sh installs it); older ones format differently.
if shutil.which("clang-format-22"):
    config.available_features.add("clang-format")

if shutil.which("ptxas", path=os.environ.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"):
    config.available_features.add("ptxas")

# The MLIR-free GPU runtime (mla-bench, libMLAGpuCAPI.so) is built where
# cuda.h was found.
if os.path.exists(os.path.join(config.mla_tools_dir, "mla-bench")):
    config.available_features.add("gpu-runtime")
config.substitutions.append(("%mla_obj_root", config.mla_obj_root))
