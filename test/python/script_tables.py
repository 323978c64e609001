"""Helpers of the tests of scripts/*-table.py (the markdown tables docs/benchmarks.md quotes): run a
script on the CPU and read one row of the table it prints."""
import os
import subprocess
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")


def run_script(name, *args):
    """The standard output of `python3 scripts/NAME ARGS`, which must exit 0."""
    result = subprocess.run([sys.executable, os.path.join(SCRIPTS, name), *map(str, args)],
                            capture_output=True, text=True, check=True)
    return result.stdout


def table_row(text, start):
    """The cells of the first table row of `text` that starts with `start`."""
    for line in text.splitlines():
        if line.startswith(start):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {start!r} in:\n{text}")
