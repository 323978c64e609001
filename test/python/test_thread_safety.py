"""Concurrency of the CPU runtime: clear_kernel_cache() while other threads are inside mla.decode.

ctypes releases the GIL around C calls, so worker threads really run compiled kernels while the main
thread drops the cache. A cache that owned its kernels alone freed them under running calls (a
segfault in most runs), so the stress runs in a subprocess: a crash fails this test instead of
killing the suite. Each worker checks its answers against the numpy reference.
"""

import os
import subprocess
import sys
import textwrap

import pytest

_STRESS = textwrap.dedent(
    """
    import sys, threading, time
    import numpy as np
    import mla
    import mla_reference as ref

    workers, seconds = int(sys.argv[1]), float(sys.argv[2])
    rng = np.random.default_rng(7)
    L, R, N = 64, 16, 2
    cache = ref.make_paged_cache(rng, [40, 17], 16, L, R, num_pages=8, cols=4)
    q = rng.standard_normal((2, 1, N, L + R)).astype(np.float32)
    want_out, want_lse = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, L, 0.25)
    stop = threading.Event()
    errors, calls = [], [0] * workers

    def work(i):
        try:
            while not stop.is_set():
                out, lse = mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens,
                                      head_dim_v=L, softmax_scale=0.25)
                np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
                calls[i] += 1
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))
            stop.set()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    clears, end = 0, time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        mla.clear_kernel_cache()
        clears += 1
        time.sleep(0.002)
    stop.set()
    for t in threads:
        t.join()
    print("calls", sum(calls), "clears", clears, "errors", errors)
    sys.exit(1 if errors or sum(calls) == 0 else 0)
    """
)


@pytest.mark.parametrize("workers", [1, 4])
def test_clear_kernel_cache_during_decode(workers):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", _STRESS, str(workers), "3"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-4000:])
