"""pytest setup for the Python tests: makes the numpy reference importable and declares markers.

`mla` itself is not put on the path here: the build (or the caller's PYTHONPATH, e.g.
build/python_packages) decides which package is under test, and a missing package must fail loudly.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: heaviest cases (DeepSeek-V3 at 128 heads, long contexts); deselect with -m 'not slow'"
    )


# The sm_90a decode kernels besides the default tiling: the cp.async-fed wgmma kernel, its
# warp-specialised TMA build and that build's seesaw schedule. test_gpu_decode.py and test_gpu_graphs.py run every test once per variant
# (plus once with the default) by setting MLA_DECODE_TILE, which mla.gpu reads when a call names no tile.
SM90_DECODE_TILES = ("64x2x64x2w", "64x2x64x2p", "64x2x64x2s")


@pytest.fixture(params=(None,) + SM90_DECODE_TILES, ids=lambda tile: tile or "default-tile")
def decode_tile(request, monkeypatch):
    if request.param is None:
        monkeypatch.delenv("MLA_DECODE_TILE", raising=False)
        return None
    import torch

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"tile {request.param} is an sm_90a kernel")
    monkeypatch.setenv("MLA_DECODE_TILE", request.param)
    return request.param
