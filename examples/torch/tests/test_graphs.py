"""CUDA graphs: hawk's device checks run inside every replay, with no host synchronisation. A training step
(RG-LRU and gate-residual, forward and backward) and a decode step are captured with validate=True, in deferred
and in sync mode (sync mode never synchronises during capture). Replays with good index tensors equal eager calls
bitwise; after bad values are written into a captured index tensor in place, a replay writes none of the hawk
outputs (they keep the previous replay's values) and hawk_torch.check_device_errors() raises, naming the
argument."""

from __future__ import annotations

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import fused_parameters, requires_cuda, uniform  # noqa: E402

pytestmark = requires_cuda


def _capture(step, warmup=3):
    """torch.cuda.graph's recipe: warm up on a side stream, then capture. Returns (graph, static outputs)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    return graph, outputs


def _replay(graph):
    graph.replay()
    torch.cuda.synchronize()


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_training_step_replays_check_cu_seqlens_and_idx(check_mode, seed):
    W, H, dtype = 128, 2, torch.bfloat16
    T = 128
    cu = torch.tensor([0, 70, 75, T], dtype=torch.int32, device="cuda")  # sequences of 70, 5 and 53 tokens
    x = uniform((T, W), dtype).requires_grad_(True)
    params = [p.requires_grad_(True) for p in fused_parameters(W, H)]
    dy = uniform((T, W), dtype)
    N, D, G = 96, 256, 5
    residual = uniform((N, D), dtype).requires_grad_(True)
    y2 = uniform((N, D), dtype).requires_grad_(True)
    gate = uniform((G, D)).requires_grad_(True)
    idx = torch.randint(0, G, (N,), device="cuda")
    dout = uniform((N, D), dtype)
    leaves = [x, *params, residual, y2, gate]
    good_cu, good_idx = cu.clone(), idx.clone()

    def step():
        # The two families are independent here, so that each bad index reaches one family only.
        y, h = hawk_torch.rglru(x, *params, cu_seqlens=cu)
        out = hawk_torch.gate_residual(residual, y2, gate, idx)
        loss = (y.float() * dy.float()).sum() + h.sum() + (out.float() * dout.float()).sum()
        return [y, h, out, *torch.autograd.grad(loss, leaves)]

    eager = [t.detach().clone() for t in step()]
    hawk_torch.check_device_errors()
    graph, static = _capture(step)
    _replay(graph)
    assert _same(static, eager)
    hawk_torch.check_device_errors()

    bad_values = [
        (cu, 3, T - 1, r"cu_seqlens\[N\] must equal num_tokens"),
        (cu, 1, 80, "cu_seqlens must not decrease"),
        (idx, 7, G, r"idx holds a value outside \[0, num_gate_rows\)"),
        (idx, 0, -1, r"idx holds a value outside \[0, num_gate_rows\)"),
    ]
    for tensor, position, value, message in bad_values:
        tensor[position] = value  # in place: the captured kernels read it at the next replay
        _replay(graph)  # no exception: a replay runs no Python
        with pytest.raises(RuntimeError, match=message):
            hawk_torch.check_device_errors()
        # What the failing replay returned is unspecified: hawk wrote none of its outputs, but those are tensors
        # the ops allocate, and inside a graph their memory is shared with other temporaries of the step (the
        # H200 run of 2026-11-30 saw a result of the RG-LRU half change after a bad cu_seqlens replay). Only
        # buffers the caller owns keep their values (test_decode_step_replays_check_state_index: the pool).
        cu.copy_(good_cu)
        idx.copy_(good_idx)
        _replay(graph)
        assert _same(static, eager)
        hawk_torch.check_device_errors()


def test_decode_step_replays_check_state_index(check_mode, seed):
    W, H = 128, 2
    params = fused_parameters(W, H)
    S = 6
    pool = uniform((S, W))
    slots = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    x = uniform((3, 1, W), torch.bfloat16)

    def step():
        with torch.no_grad():
            return hawk_torch.rglru_decode_(x, *params, state=pool, state_index=slots)

    graph, y = _capture(step)  # the warm-up steps advance the pool, as decode steps do

    def eager_step():
        """What the next step gives from the pool as it is now (on copies)."""
        pool_now = pool.clone()
        with torch.no_grad():
            y_now = hawk_torch.rglru_decode_(x, *params, state=pool_now, state_index=slots.clone())
        return y_now, pool_now

    y_want, pool_want = eager_step()
    _replay(graph)
    assert torch.equal(y, y_want) and torch.equal(pool, pool_want)
    hawk_torch.check_device_errors()

    for bad, message in [([4, S, 2], r"state_index holds a row outside \[0, num_state_rows\)"),
                         ([4, -3, 2], r"state_index holds a row outside \[0, num_state_rows\)"),
                         ([4, 0, 4], "state_index names the same state row for two sequences")]:
        pool_before, y_before = pool.clone(), y.clone()
        slots.copy_(torch.tensor(bad, dtype=torch.int32, device="cuda"))
        _replay(graph)
        with pytest.raises(RuntimeError, match=message):
            hawk_torch.check_device_errors()
        assert torch.equal(pool, pool_before) and torch.equal(y, y_before), f"slots {bad} wrote something"

    # a graph captured for three sequences serves two: the padding slot -1 touches no pool row
    slots.copy_(torch.tensor([4, -1, 2], dtype=torch.int32, device="cuda"))
    pool_before = pool.clone()
    y_want, pool_want = eager_step()
    _replay(graph)
    hawk_torch.check_device_errors()
    assert torch.equal(pool, pool_want)
    assert torch.equal(pool[[0, 1, 3, 5]], pool_before[[0, 1, 3, 5]])
    assert torch.equal(y[[0, 2]], y_want[[0, 2]])
