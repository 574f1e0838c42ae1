"""Shared by the hawk_torch tests: tolerances, input factories, the CUDA marker."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def skip_module_without_cuda() -> None:
    """Called by a test module before it imports hawk_torch, whose import raises ImportError without a GPU: the
    module's tests are then reported skipped. With a GPU a failing import stays an error (never skipped)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (importing hawk_torch needs one)", allow_module_level=True)

#: relative L2 tolerances against float64, as in the C++ suite: outputs / row gradients in storage precision
#: (a few ulps), parameter gradients accumulated in fp32 (tf32 products for 16-bit inputs).
STORAGE_TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 5e-3}
PARAMETER_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-3}
STATE_TOLERANCE = 1e-4  # fp32 states (h_final, dh0)


def uniform(shape, dtype=torch.float32, low=-1.0, high=1.0, device="cuda"):
    """Fresh uniform values (never zeros), rounded to dtype."""
    return (torch.rand(shape, device=device, dtype=torch.float32) * (high - low) + low).to(dtype)


def a_param_values(width, device="cuda"):
    """a_param with recurrence radii in [0.6, 0.999] (softplus(a_param) = -log(radius)), as trained models have:
    long memories, and 1 - a^2 near 0 where the sqrt's capped derivative matters."""
    radius = torch.empty(width, device=device).uniform_(0.6, 0.999)
    return torch.log(torch.expm1(-torch.log(radius)))


def fused_parameters(width, num_blocks, device="cuda"):
    """fp32 master parameters (a_param, Wx, bx, Wa, ba) of a fused RG-LRU: hawk_torch.rglru's argument order."""
    w = width // num_blocks
    Wx = torch.randn(num_blocks, w, w, device=device) / w**0.5
    Wa = torch.randn(num_blocks, w, w, device=device) / w**0.5
    bx = 0.1 * torch.randn(num_blocks, w, device=device)
    ba = 0.1 * torch.randn(num_blocks, w, device=device)
    return a_param_values(width, device), Wx, bx, Wa, ba


def reset_flags(batch, length, probability=0.05, device="cuda"):
    return torch.rand(batch, length, device=device) < probability


def load_standalone(name: str):
    """hawk_torch/<name>.py loaded on its own, without importing the package (whose import needs a GPU): for the
    CPU tests of the modules written to allow it (_buildconf, _checkpoints, _build_info). From the package the
    tests import: the checkout's, or the installed one under HAWK_TORCH_TEST_INSTALLED=1."""
    package = importlib.util.find_spec("hawk_torch")  # finds the package without running its __init__
    path = pathlib.Path(package.submodule_search_locations[0]) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"hawk_torch_standalone_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
