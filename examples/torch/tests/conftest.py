"""pytest setup for hawk_torch: import paths, a fresh seed per test, the device-check modes (sync, deferred) and
the check that no test leaves a device-check failure unreported."""

from __future__ import annotations

import os
import pathlib
import random
import sys

import pytest
import torch

# HAWK_TORCH_TEST_INSTALLED=1 (run_wheel_check_on_gpu.sh): test the installed package, not this checkout's.
if os.environ.get("HAWK_TORCH_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/torch: hawk_torch
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # reference.py, support.py


@pytest.fixture
def seed(request):
    """A fresh seed per test (HAWK_TORCH_SEED replays one); reported in the test's output on failure."""
    value = int(os.environ.get("HAWK_TORCH_SEED", random.randrange(2**31)))
    torch.manual_seed(value)
    print(f"{request.node.name}: HAWK_TORCH_SEED={value}")
    return value


@pytest.fixture(params=["sync", "deferred"])
def check_mode(request):
    """Runs a test in both device-check modes: "sync" (hawk_torch.set_sync_checks(True): a bad index tensor makes
    the call raise at once) and "deferred" (the default: the call returns, the error comes later)."""
    import hawk_torch

    previous = hawk_torch.set_sync_checks(request.param == "sync")
    try:
        hawk_torch.check_device_errors()
    except RuntimeError as error:  # left behind by an earlier failed test, which reported it already
        print(f"cleared a device-check failure left by an earlier test: {error}")
    yield request.param
    hawk_torch.set_sync_checks(previous)


@pytest.fixture(autouse=True)
def no_device_check_failure_left_behind():
    """After every test: no hawk call may have left a device-check failure unreported (it would make the next
    test's first hawk call raise). Synchronises the current device; the error names the argument."""
    yield
    hawk_torch = sys.modules.get("hawk_torch")
    if hawk_torch is not None and torch.cuda.is_available():
        hawk_torch.check_device_errors()
