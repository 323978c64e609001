"""$MLA_PASS_OPTIONS hands MLIR's pass-manager options to the JIT compiles of the C and Python APIs.

Each case runs in a fresh interpreter: the options are parsed once per process, at the first compile.
"""

import os
import subprocess
import sys

DECODE = r"""
import numpy as np
import mla
rng = np.random.default_rng(0)
q = rng.standard_normal((1, 1, 2, 24)).astype(np.float32)
cache = rng.standard_normal((2, 16, 24)).astype(np.float32)
try:
    mla.decode(q, cache, np.array([[0, 1]], np.int32), np.array([20], np.int32), head_dim_v=16,
               softmax_scale=0.25)
except RuntimeError as error:
    print("RuntimeError:", error)
else:
    print("decode ok")
"""


def run_decode(options):
    env = dict(os.environ, MLA_PASS_OPTIONS=options)
    return subprocess.run([sys.executable, "-c", DECODE], env=env, capture_output=True, text=True,
                          timeout=300)


def test_timing_reports_every_pass_of_the_compile():
    result = run_decode("-mlir-timing")
    assert "decode ok" in result.stdout, result.stdout + result.stderr
    assert "Execution time report" in result.stderr
    assert "MLAPlanSplits" in result.stderr and "ConvertMLAToLinalg" in result.stderr


def test_print_ir_after_a_named_pass():
    result = run_decode("--mlir-print-ir-after=mla-plan-splits")
    assert "decode ok" in result.stdout, result.stdout + result.stderr
    assert "IR Dump After MLAPlanSplits (mla-plan-splits)" in result.stderr
    assert "IR Dump After ConvertMLAToLinalg" not in result.stderr


def test_unknown_option_fails_the_compile_and_names_the_variable():
    result = run_decode("-mlir-timing -no-such-option")
    assert "RuntimeError: MLA_PASS_OPTIONS:" in result.stdout, result.stdout + result.stderr
    assert "no-such-option" in result.stdout


def test_without_the_variable_nothing_is_printed():
    env = {k: v for k, v in os.environ.items() if k != "MLA_PASS_OPTIONS"}
    result = subprocess.run([sys.executable, "-c", DECODE], env=env, capture_output=True, text=True,
                            timeout=300)
    assert "decode ok" in result.stdout, result.stdout + result.stderr
    assert "Execution time report" not in result.stderr
