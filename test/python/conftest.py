"""pytest setup for the Python tests: makes the numpy reference importable and declares markers.

`mla` itself is not put on the path here: the build (or the caller's PYTHONPATH, e.g.
build/python_packages) decides which package is under test, and a missing package must fail loudly.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: heaviest cases (DeepSeek-V3 at 128 heads, long contexts); deselect with -m 'not slow'"
    )
