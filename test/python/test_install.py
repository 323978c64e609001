"""`pip install --no-build-isolation --target T .` gives a working `mla` package outside the build tree.

The backend (_build_backend/mla_build_backend.py) reuses the build directory of the package under test
($MLA_BUILD_DIR, else the build that holds build/python_packages/mla), so this only re-runs the
`mla-python` target instead of a fresh 20-minute build. The installed package then runs a CPU decode in a
separate interpreter whose path holds only the target directory (and numpy's site-packages).
"""

import os
import subprocess
import sys

import pytest

import mla

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build_dir():
    build = os.environ.get("MLA_BUILD_DIR") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(mla.__file__))))
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        pytest.skip(f"mla was not imported from a CMake build ({mla.__file__}); set MLA_BUILD_DIR")
    return build


DECODE = r"""
import os, sys
import numpy as np
import mla
from mla import _capi
import mla_reference as ref

assert os.path.dirname(mla.__file__) == os.path.join(sys.argv[1], "mla"), mla.__file__
assert mla.__version__ == _capi.lib.mlaGetVersion().decode(), mla.__version__
rng = np.random.default_rng(7)
B, N, L, R, page = 2, 4, 32, 8, 16
q = rng.standard_normal((B, 1, N, L + R)).astype(np.float32)
cache = rng.standard_normal((4, page, L + R)).astype(np.float32)
table = np.array([[0, 1], [3, 2]], np.int32)
lens = np.array([20, 5], np.int32)
out, lse = mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=0.25)
ref_out, ref_lse = ref.decode_ref(q, cache, table, lens, L, 0.25)
np.testing.assert_allclose(out, ref_out, rtol=1e-4, atol=1e-5)
np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
print("installed", mla.__version__, "decode ok")
"""


def test_pip_install_target_runs_a_cpu_decode(tmp_path):
    target = tmp_path / "target"
    env = dict(os.environ, MLA_BUILD_DIR=_build_dir())
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                    "--no-cache-dir", "--quiet", "--target", str(target), SOURCE_DIR],
                   check=True, env=env)
    assert (target / "mla" / "_lib" / "libMLACAPI.so").exists()
    assert list(target.glob("mla-*.dist-info/RECORD"))

    # Only the installed package (and the reference next to this file) on the path.
    run_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), os.path.dirname(__file__)]))
    result = subprocess.run([sys.executable, "-c", DECODE, str(target)], cwd=tmp_path, env=run_env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"installed {mla.__version__} decode ok" in result.stdout
