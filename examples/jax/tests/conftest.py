"""Test setup: the package from this checkout, markers, the GPU / library skips, and the fake kernels.

Markers: ``cpu`` tests need no GPU and no built library (CI runs them: ctest python:jax-cpu, run_cpu_tests.sh);
``gpu`` tests need a CUDA device visible to JAX and the built library (skipped cleanly otherwise).
"""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
# The package of this checkout, unless the installed one is asked for (HAWK_JAX_TEST_INSTALLED=1: a wheel check).
if os.environ.get("HAWK_JAX_TEST_INSTALLED", "0") != "1":
    sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import jax  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu: needs no GPU and no built library; runs in CI")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU visible to JAX and libhawk_jax_ffi.so")


def _gpu_reason():
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        return "no CUDA GPU visible to JAX"
    from hawk_jax import _library

    if _library.library_path() is None:
        return "libhawk_jax_ffi.so is not built (cmake -S examples/jax -B build-jax -G Ninja && cmake --build build-jax)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" not in item.keywords:
            continue
        if not checked:
            reason, checked = _gpu_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def fake_kernels(monkeypatch):
    """hawk_jax's kernel calls replaced by the float64 numpy references (fake_kernels.py), so that the Python
    layer (checks, custom_vjp, casts, resets, parameter trees, the flax module) runs on the CPU."""
    import fake_kernels as fake
    from hawk_jax import _ops

    monkeypatch.setattr(_ops, "_rglru_forward_call", fake.rglru_forward_call)
    monkeypatch.setattr(_ops, "_rglru_backward_call", fake.rglru_backward_call)
    monkeypatch.setattr(_ops, "_gate_residual_forward_call", fake.gate_residual_forward_call)
    monkeypatch.setattr(_ops, "_gate_residual_backward_call", fake.gate_residual_backward_call)
    fake.forward_x_shapes.clear()
    return fake
