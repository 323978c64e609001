"""Whether torch and a CUDA GPU are here, and the skip marks of the test files that take torch tensors.

Debian's python3-torch is CPU-only; the GPU checks run where torch sees a device (the H200 of
docs/gpu-runs.md, through scripts/gpu-verify.sh)."""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
if HAS_TORCH:
    import torch

    HAS_GPU = torch.cuda.is_available()
else:
    torch = None
    HAS_GPU = False

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: these checks take torch tensors")


def needs_gpu_for(what):
    """Skips unless torch sees a CUDA GPU; `what` says which tests need which device."""
    return pytest.mark.skipif(
        not HAS_GPU,
        reason="torch is not installed" if not HAS_TORCH else f"no CUDA GPU visible to torch: {what}")
