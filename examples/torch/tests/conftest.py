"""pytest setup for hawk_torch: import paths and a fresh seed per test."""

from __future__ import annotations

import os
import pathlib
import random
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/torch: hawk_torch
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # reference.py, support.py


@pytest.fixture
def seed(request):
    """A fresh seed per test (HAWK_TORCH_SEED replays one); reported in the test's output on failure."""
    value = int(os.environ.get("HAWK_TORCH_SEED", random.randrange(2**31)))
    torch.manual_seed(value)
    print(f"{request.node.name}: HAWK_TORCH_SEED={value}")
    return value
