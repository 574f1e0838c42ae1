"""Context parallelism through torch.distributed: examples/torch/context_parallel_check.py under torchrun, one
process per GPU, must find y, dx and h_final bitwise equal to one call. Needs 2 GPUs; skipped otherwise."""

import os
import pathlib
import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="context parallelism needs 2 GPUs")
def test_context_parallel_exact_mode_equals_one_call_bitwise_over_two_gpus():
    script = pathlib.Path(__file__).resolve().parents[1] / "context_parallel_check.py"
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")  # NVLink multicast off
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script)], capture_output=True, text=True, env=env, timeout=600)
    print(done.stdout[-4000:], done.stderr[-4000:])
    assert done.returncode == 0
    assert done.stdout.count("bitwise equal to one call") == 2
