"""One version everywhere: MLA_VERSION in CMakeLists.txt, mla.__version__ and both C libraries."""

import ctypes
import os
import re

import pytest

import mla
from mla import _capi

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_version_matches_cmake_and_the_c_api():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        expected = re.search(r"^set\(MLA_VERSION (\S+)\)", f.read(), re.MULTILINE).group(1)
    assert mla.__version__ == expected
    assert _capi.lib.mlaGetVersion().decode() == expected


def test_gpu_library_reports_the_same_version():
    path = os.path.join(os.path.dirname(mla.__file__), "_lib", "libMLAGpuCAPI.so")
    if not os.path.exists(path):
        pytest.skip("libMLAGpuCAPI.so is built only where cuda.h was found")
    lib = ctypes.CDLL(path)  # Needs no driver: nothing here touches the GPU.
    lib.mlaGpuGetVersion.restype = ctypes.c_char_p
    assert lib.mlaGpuGetVersion().decode() == mla.__version__
