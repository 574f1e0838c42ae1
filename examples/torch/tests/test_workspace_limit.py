"""hawk_torch.set_backward_workspace_limit: under a cap, the backward of one long sequence runs in time slices with
every gradient's bits and its workspace within the cap; a problem no workspace within the cap runs raises, naming the
cap and what it needs, and writes nothing."""

from __future__ import annotations

import gc
import re

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import (  # noqa: E402
    PARAMETER_TOLERANCE, STATE_TOLERANCE, STORAGE_TOLERANCE, fused_parameters, requires_cuda, reset_flags, uniform)
from reference import relative_l2, rglru_reference  # noqa: E402

pytestmark = requires_cuda

UNIT = 1024  # the library's time-slice unit (kBackwardTimeSliceTokens)
SLICED = re.compile(r"needs: (\d+) bytes at least, in time slices \((\d+) in one pass\)")
UNSLICED = re.compile(r"needs: (\d+) bytes \(only one long dense sequence")


@pytest.fixture(autouse=True)
def restore_limit():
    previous = hawk_torch.backward_workspace_limit()
    yield
    hawk_torch.set_backward_workspace_limit(previous)


def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def _forward(x, master, cap, kwargs):
    """Leaves for x, h0 (when given) and the parameters, and the forward's y and h, with the cap set."""
    hawk_torch.set_backward_workspace_limit(cap)
    kwargs = dict(kwargs)
    leaves = [_leaf(x)] + ([_leaf(kwargs.pop("h0"))] if "h0" in kwargs else []) + [_leaf(p) for p in master]
    h0 = leaves[1] if len(leaves) > 1 + len(master) else None
    y, h = hawk_torch.rglru(leaves[0], *leaves[len(leaves) - len(master):], h0=h0, **kwargs)
    return leaves, y, h


def _requested_peak(run):
    """run() and the peak of the bytes requested from the caching allocator during it beyond those held before it
    (requested, not allocated: the allocator may hand out a cached block up to 1 MiB larger than asked for)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["requested_bytes.all.current"]
    torch.cuda.reset_peak_memory_stats()
    try:
        run()
    finally:
        torch.cuda.synchronize()
    return torch.cuda.memory_stats()["requested_bytes.all.peak"] - before


def _backward(x, master, dy, dh, cap, **kwargs):
    """One forward and backward under `cap` (None: no cap): every gradient (x, h0 when given, the parameters) and the
    backward's peak request beyond what was held before it (y and h take dy and dh directly: no request but
    hawk's)."""
    leaves, y, h = _forward(x, master, cap, kwargs)
    peak = _requested_peak(lambda: torch.autograd.backward([y, h], [dy, dh]))
    return [leaf.grad for leaf in leaves], peak


def _refused(x, master, dy, dh, cap, pattern, **kwargs):
    """A backward under `cap` that must raise before it takes any workspace (its peak request stays below the
    cap's shortfall, so nothing was launched into one): the numbers its message names."""
    leaves, y, h = _forward(x, master, cap, kwargs)
    caught = []

    def run():
        with pytest.raises(RuntimeError, match="set_backward_workspace_limit") as error:
            torch.autograd.backward([y, h], [dy, dh])
        caught.append(error.value)

    peak = _requested_peak(run)
    message = str(caught[0])
    assert f"limit of {cap} bytes" in message
    assert all(leaf.grad is None for leaf in leaves), "a refused backward wrote a gradient"
    found = pattern.search(message)
    assert found, f"the message does not say what the backward needs: {message}"
    needs = [int(group) for group in found.groups()]
    # the gradients it allocates before the refusal: dx (and dgx, dga in gate-logits mode), the fp32 parameter
    # gradients, dh0 where h0 is given; a few padded bytes between them
    row_gradients = 3 if "gx" in kwargs else 1
    outputs = row_gradients * x.numel() * x.element_size() + sum(4 * t.numel() for t in master)
    outputs += 4 * h.numel() if "h0" in kwargs else 0
    assert peak <= outputs + 4096, f"a refused backward requested {peak} bytes (its gradients: {outputs}); needs {needs}"
    return needs


def test_capped_backward_of_one_long_sequence_gives_the_same_bits_within_the_cap(seed):
    L, W, H, dtype = 4 * UNIT + 300, 256, 2, torch.bfloat16  # w = 128; a partial last slice at every slice length
    master = fused_parameters(W, H)
    x, dy, dh, h0 = uniform((1, L, W), dtype), uniform((1, L, W), dtype), uniform((1, W)), uniform((1, W))
    reset = reset_flags(1, L, probability=0.002)
    reset[0, [UNIT - 1, UNIT, 2 * UNIT, 2 * UNIT + 1]] = True  # at and beside slice edges, consecutive
    kwargs = dict(reset=reset, h0=h0)

    grads, peak = _backward(x, master, dy, dh, None, **kwargs)
    # the uncapped gradients against float64 (the reference sees the weights rounded to x's dtype)
    a_param, Wx, bx, Wa, ba = (_leaf(p) for p in master)
    Wx64, Wa64 = _leaf(Wx.detach().to(dtype).double()), _leaf(Wa.detach().to(dtype).double())
    x64, h064, a64 = _leaf(x.double()), _leaf(h0.double()), _leaf(a_param.detach().double())
    y64, h64 = rglru_reference(x64, a64, Wx64, bx.detach(), Wa64, ba.detach(), reset=reset, h0=h064)
    torch.autograd.backward([y64, h64], [dy.double(), dh.double()])
    for name, got, want, tolerance in [("dx", grads[0], x64.grad, STORAGE_TOLERANCE[dtype]),
                                       ("dh0", grads[1], h064.grad, STATE_TOLERANCE),
                                       ("d a_param", grads[2], a64.grad, PARAMETER_TOLERANCE[dtype]),
                                       ("dWx", grads[3], Wx64.grad, PARAMETER_TOLERANCE[dtype]),
                                       ("dWa", grads[5], Wa64.grad, PARAMETER_TOLERANCE[dtype])]:
        error = relative_l2(got, want)
        assert error <= tolerance, f"{name}: relative L2 {error:.3e} > {tolerance:.1e} (HAWK_TORCH_SEED={seed})"

    least, one_pass = _refused(x, master, dy, dh, 0, SLICED, **kwargs)
    assert 0 < least < one_pass
    assert _refused(x, master, dy, dh, least - 1, SLICED, **kwargs) == [least, one_pass]
    for cap in [least, (least + one_pass) // 2, one_pass - 1, one_pass, 2 * one_pass]:
        capped, capped_peak = _backward(x, master, dy, dh, cap, **kwargs)
        for i, (a, b) in enumerate(zip(grads, capped)):
            assert torch.equal(a, b), f"gradient {i} under a cap of {cap} bytes differs from the uncapped one"
        # the workspace within the cap: at least one_pass - cap bytes less at the peak; the one pass where it fits
        saving = max(one_pass - cap, 0)
        assert capped_peak <= peak - saving, (
            f"peak {capped_peak} bytes under a cap of {cap}, uncapped {peak}, one pass {one_pass}")
    # negative control: one changed element of dy changes dx
    dy_changed = dy.clone()
    dy_changed[0, L // 2, 7] = -dy_changed[0, L // 2, 7] + 0.5
    changed, _ = _backward(x, master, dy_changed, dh, least, **kwargs)
    assert not torch.equal(changed[0], grads[0])


@pytest.mark.parametrize("mode", ["fused, two sequences", "fused, one packed sequence", "fused, one slice long",
                                  "gate_logits"])
def test_capped_backward_that_cannot_slice_raises_and_writes_nothing(mode, seed):
    B, L, W, H, dtype = 2, 2 * UNIT + 5, 128, 2, torch.bfloat16
    if mode == "fused, one slice long":
        B, L = 1, UNIT  # one dense sequence of one slice's tokens: no slices
    x, dy, dh = uniform((B, L, W), dtype), uniform((B, L, W), dtype), uniform((B, W))
    master, gates = fused_parameters(W, H), {}
    if mode == "gate_logits":
        master = master[:1]  # a_param
        gates = dict(gx=uniform((B, L, W), dtype, -2, 2), ga=uniform((B, L, W), dtype, -2, 2))
    if mode == "fused, one packed sequence":  # one long sequence, packed: packed batches take no slices
        x, dy, dh = x[0], dy[0], dh[:1]
        gates = dict(cu_seqlens=torch.tensor([0, L], dtype=torch.int32, device="cuda"))
    (one_pass,) = _refused(x, master, dy, dh, 1, UNSLICED, **gates)
    assert _refused(x, master, dy, dh, one_pass - 1, UNSLICED, **gates) == [one_pass]
    uncapped, _ = _backward(x, master, dy, dh, None, **gates)
    capped, _ = _backward(x, master, dy, dh, one_pass, **gates)
    for i, (a, b) in enumerate(zip(uncapped, capped)):
        assert torch.equal(a, b), f"gradient {i} under a cap of the one-pass size differs from the uncapped one"


def test_a_cuda_graph_captured_under_a_cap_replays_the_uncapped_bits(seed):
    """Captured the way test_graphs.py captures a training step: a scalar loss made inside the step, gradients of the
    leaves. The leaves are never in a graph that outlives its step: a first version learned the least size from a
    refused step of these leaves and kept its exception, whose traceback kept that step's autograd graph alive, and
    with it the leaves' AccumulateGrad nodes and the (legacy) stream they were made on; its capture then failed with
    cudaErrorStreamCaptureImplicit (PyTorch's stale-stream case: pytorch/pytorch#164302, #180090)."""
    L, W, H, dtype = 2 * UNIT + 77, 128, 1, torch.bfloat16
    x = uniform((1, L, W), dtype).requires_grad_(True)
    params = [p.requires_grad_(True) for p in fused_parameters(W, H)]
    dy, dh = uniform((1, L, W), dtype), uniform((1, W))
    leaves = [x, *params]

    def step():
        y, h = hawk_torch.rglru(x, *params)
        loss = (y.float() * dy.float()).sum() + (h * dh).sum()
        return list(torch.autograd.grad(loss, leaves))

    # what the slices need, from a refusal of copies of the leaves (their graph dies with the helper's frame)
    least, _ = _refused(x.detach(), [p.detach() for p in params], dy, dh, 0, SLICED)
    gc.collect()  # the refusal's exception and its frames form a cycle: free that graph now, not at some later capture
    hawk_torch.set_backward_workspace_limit(None)
    eager = [t.detach().clone() for t in step()]
    hawk_torch.set_backward_workspace_limit(least)
    stream = torch.cuda.Stream()  # torch.cuda.graph's recipe: warm up on a side stream, then capture
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    hawk_torch.set_backward_workspace_limit(None)  # the capture keeps the workspace of its cap
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        for i, (a, b) in enumerate(zip(eager, static)):
            assert torch.equal(a, b), f"gradient {i} of a replay captured under the cap differs from eager"
    dy.neg_()  # negative control: the captured step reads dy in place
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(static[0], eager[0])


def test_set_backward_workspace_limit_checks_its_argument():
    hawk_torch.set_backward_workspace_limit(None)  # the fixture restores what came before
    assert hawk_torch.backward_workspace_limit() is None
    assert hawk_torch.set_backward_workspace_limit(12345) is None
    assert hawk_torch.backward_workspace_limit() == 12345
    class Seven:  # any integer type (numpy's too): what operator.index accepts
        def __index__(self):
            return 7

    assert hawk_torch.set_backward_workspace_limit(Seven()) == 12345
    assert hawk_torch.set_backward_workspace_limit(12345) == 7
    for bad, kind in [(-1, ValueError), (2**63, ValueError), (1.5, TypeError), (True, TypeError), ("1", TypeError)]:
        with pytest.raises(kind, match="max_bytes"):
            hawk_torch.set_backward_workspace_limit(bad)
        assert hawk_torch.backward_workspace_limit() == 12345, f"a refused {bad!r} changed the cap"
    assert hawk_torch.set_backward_workspace_limit(0) == 12345
    assert hawk_torch.set_backward_workspace_limit(None) == 0
    assert hawk_torch.backward_workspace_limit() is None
