"""PEP 517 build backend of the `mla` Python package: CMake builds it, this packs it.

`pip install --no-build-isolation --target T .` (or `pip wheel`) calls build_wheel here. The package is
ctypes over libMLACAPI.so (and libMLAGpuCAPI.so where cuda.h was found), which only the CMake build
can make, so the backend drives that build instead of compiling anything itself:

  * the build directory is $MLA_BUILD_DIR, else ./build; one that holds a CMakeCache.txt is reused
    as configured (a fresh build of the compiler takes about 20 minutes on 2 cores), otherwise it is
    configured with the README's options ($MLIR_DIR, default /usr/lib/llvm-22/lib/cmake/mlir);
  * the `mla-python` target assembles <build>/python_packages/mla, whose files become the wheel.

It is in-tree and uses only the standard library, so it works offline and needs no setuptools (whose
own `build/` directory would collide with CMake's). The wheel is tagged py3-none-<platform>: it holds
native libraries but no CPython extension.
"""

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

_SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = "mla"


def _version():
    with open(os.path.join(_SOURCE_DIR, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"^set\(MLA_VERSION\s+([0-9A-Za-z.+-]+)\)", f.read(), re.MULTILINE)
    if not match:
        raise RuntimeError("mla: no set(MLA_VERSION ...) in CMakeLists.txt")
    return match.group(1)


def _project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    with open(os.path.join(_SOURCE_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata():
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {_version()}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    return "\n".join(lines) + "\n"


def _tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _wheel_file():
    return f"Wheel-Version: 1.0\nGenerator: mla_build_backend\nRoot-Is-Purelib: false\nTag: {_tag()}\n"


def _dist_info():
    return f"{_NAME}-{_version()}.dist-info"


def _build_dir():
    return os.path.abspath(os.environ.get("MLA_BUILD_DIR") or os.path.join(_SOURCE_DIR, "build"))


def _run(command):
    # pip shows the backend's output with -v; the build's progress goes to stderr.
    print("mla_build_backend: " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr)


def _build_package():
    """Builds the `mla-python` target and returns <build>/python_packages/mla."""
    build = _build_dir()
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        llvm = os.environ.get("LLVM_DIR_PREFIX", "/usr/lib/llvm-22")
        _run(["cmake", "-S", _SOURCE_DIR, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
              "-DMLIR_DIR=" + os.environ.get("MLIR_DIR", os.path.join(llvm, "lib/cmake/mlir")),
              "-DLLVM_EXTERNAL_LIT=" + os.path.join(llvm, "bin/lit"),
              "-DMLA_TEST_PYTHON=" + sys.executable])
    _run(["cmake", "--build", build, "--target", "mla-python"])
    package = os.path.join(build, "python_packages", _NAME)
    if not os.path.exists(os.path.join(package, "_lib", "libMLACAPI.so")):
        raise RuntimeError(f"mla: the build did not produce {package}/_lib/libMLACAPI.so")
    return package


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    path = os.path.join(metadata_directory, _dist_info())
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(path, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_package()
    files = []
    for root, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            path = os.path.join(root, name)
            files.append((os.path.join(_NAME, os.path.relpath(path, package)), path))
    wheel_name = f"{_NAME}-{_version()}-{_tag()}.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, path in files:
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            # Keep the libraries' execute bits (0o100000: a regular file).
            info.external_attr = (0o100000 | os.stat(path).st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
            record.append(_record_line(name, data))
        for name, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file())):
            arcname = f"{_dist_info()}/{name}"
            wheel.writestr(arcname, text)
            record.append(_record_line(arcname, text.encode()))
        record.append(f"{_dist_info()}/RECORD,,")
        wheel.writestr(f"{_dist_info()}/RECORD", "\n".join(record) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks, under mla-<version>/ (an sdist builds with this backend, too)."""
    listed = subprocess.run(["git", "-C", _SOURCE_DIR, "ls-files", "-z"], check=True,
                            capture_output=True).stdout.decode().split("\0")
    base = f"{_NAME}-{_version()}"
    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz") as sdist:
        for name in filter(None, listed):
            sdist.add(os.path.join(_SOURCE_DIR, name), arcname=f"{base}/{name}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    return base + ".tar.gz"
