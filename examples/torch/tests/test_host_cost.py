"""The C++ autograd formulas of hawk::rglru_forward and hawk::gate_residual_forward (csrc/ops.cpp), which keep the
host cost of an eager call low: they are what an eager hawk_torch call records, their gradients are bitwise what
the backward operators compute from the same inputs (weights rounded once, dtypes and shapes of the caller's
parameters, no zero-filled gradient for an unused output), and an eager forward + backward, device checks
included, never synchronises the host."""

from __future__ import annotations

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import fused_parameters, uniform  # noqa: E402

RESET_SEQUENCE_START, RESET_NONE = 1, 0


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


@pytest.mark.parametrize("mode", ["fused fp32 master weights", "fused bf16 weights", "gate_logits"])
@pytest.mark.parametrize("use_h_final", [False, True], ids=["h_final unused", "h_final used"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["no h0", "h0"])
def test_rglru_gradients_are_the_backward_operators(seed, mode, use_h_final, with_h0):
    B, L, W, H, dtype = 2, 150, 256, 2, torch.bfloat16
    x, dy, dh = uniform((B, L, W), dtype), uniform((B, L, W), dtype), uniform((B, W))
    h0 = uniform((B, W)) if with_h0 else None
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    if mode == "fused bf16 weights":
        Wx, Wa = Wx.to(dtype), Wa.to(dtype)
    gx, ga = uniform((B, L, W), dtype, -2, 2), uniform((B, L, W), dtype, -2, 2)
    fused = mode != "gate_logits"

    # through autograd
    leaves = _leaves(x, a_param, *((Wx, bx, Wa, ba) if fused else (gx, ga)))
    h0_leaf = _leaves(h0)[0] if with_h0 else None
    if fused:
        y, h = hawk_torch.rglru(leaves[0], leaves[1], *leaves[2:], h0=h0_leaf)
    else:
        y, h = hawk_torch.rglru(leaves[0], leaves[1], gx=leaves[2], ga=leaves[3], h0=h0_leaf)
    assert "RGLRUForwardFunction" in y.grad_fn.name()  # the C++ formula, no Python autograd kernel
    loss = (y.float() * dy.float()).sum() + ((h * dh).sum() if use_h_final else 0.0)
    grads = torch.autograd.grad(loss, leaves + ([h0_leaf] if with_h0 else []))

    # the operators called directly with what the formula should pass them
    wx, wa = (Wx.to(dtype), Wa.to(dtype)) if fused else (None, None)
    gates = (wx, bx, wa, ba, None, None) if fused else (None, None, None, None, gx, ga)
    reset_mode = RESET_NONE if with_h0 else RESET_SEQUENCE_START
    num_blocks = H if fused else 1
    args = (x, *gates, a_param, None, h0, None)
    y_op, h_op, checkpoints = torch.ops.hawk.rglru_forward(*args, num_blocks, reset_mode, True, True)
    assert torch.equal(y.detach(), y_op) and torch.equal(h.detach(), h_op)
    dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0 = torch.ops.hawk.rglru_backward(
        *args, checkpoints, dy, dh if use_h_final else None, num_blocks, reset_mode, with_h0, True)
    want = [dx, da_param] + ([dWx, dbx, dWa, dba] if fused else [dgx, dga]) + ([dh0] if with_h0 else [])
    names = ["dx", "da_param"] + (["dWx", "dbx", "dWa", "dba"] if fused else ["dgx", "dga"]) + ["dh0"]
    for name, leaf, got, expected in zip(names, leaves + [h0_leaf], grads, want):
        assert got.dtype == leaf.dtype and got.shape == leaf.shape, f"{name}: {got.dtype} {got.shape}"
        assert torch.equal(got, expected.to(leaf.dtype).view(leaf.shape)), f"{name} differs"


def test_an_unused_h_final_gives_the_bits_of_a_zero_dh_final(seed):
    """The formula passes None for an output nobody differentiates, where autograd used to pass zeros."""
    B, L, W, H, dtype = 2, 130, 128, 2, torch.bfloat16
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x, dy = uniform((B, L, W), dtype), uniform((B, L, W), dtype)
    args = (x, Wx.to(dtype), bx, Wa.to(dtype), ba, None, None, a_param, None, None, None)
    _, _, checkpoints = torch.ops.hawk.rglru_forward(*args, H, RESET_SEQUENCE_START, True, True)
    zero = torch.ops.hawk.rglru_backward(*args, checkpoints, dy, torch.zeros(B, W, device="cuda"), H,
                                         RESET_SEQUENCE_START, False, True)
    none = torch.ops.hawk.rglru_backward(*args, checkpoints, dy, None, H, RESET_SEQUENCE_START, False, True)
    for i, (a, b) in enumerate(zip(zero, none)):
        assert torch.equal(a, b), f"gradient {i} differs"


@pytest.mark.parametrize("layout", ["arbitrary", "uniform"])
@pytest.mark.parametrize("gate_dtype", [torch.float32, torch.bfloat16], ids=["fp32 gate", "bf16 gate"])
def test_gate_residual_gradients_are_the_backward_operators(seed, layout, gate_dtype):
    N, D, G, dtype = 300, 256, 5, torch.bfloat16
    S = (N + G - 1) // G
    residual, y, dout = uniform((N, D), dtype), uniform((N, D), dtype), uniform((N, D), dtype)
    gate = uniform((G, D), gate_dtype)
    idx = torch.arange(N, device="cuda") // S if layout == "uniform" else torch.randint(0, G, (N,), device="cuda")
    code = 1 if layout == "uniform" else 0
    rows_per_group = S if layout == "uniform" else 0

    leaves = _leaves(residual, y, gate)
    out = hawk_torch.gate_residual(*leaves, idx, layout=layout, rows_per_group=S)
    assert "GateResidualForwardFunction" in out.grad_fn.name()  # [N, D] in: the operator's output itself
    d_residual, d_y, d_gate = torch.autograd.grad(out, leaves, dout)

    assert torch.equal(out.detach(), torch.ops.hawk.gate_residual_forward(residual, y, gate, idx, code,
                                                                          rows_per_group, True))
    dy_op, dgate_op = torch.ops.hawk.gate_residual_backward(dout, y, gate, idx, code, rows_per_group, True)
    assert torch.equal(d_residual, dout)
    assert torch.equal(d_y, dy_op)
    assert d_gate.dtype == gate_dtype and torch.equal(d_gate, dgate_op.to(gate_dtype))


def test_gate_residual_keeps_leading_dimensions(seed):
    """[B, T, D] in, [B, T, D] out, the same bits and gradients as the [B * T, D] call."""
    B, T, D, G, dtype = 3, 50, 128, 4, torch.bfloat16
    residual, y, dout = uniform((B, T, D), dtype), uniform((B, T, D), dtype), uniform((B, T, D), dtype)
    gate, idx = uniform((G, D)), torch.randint(0, G, (B * T,), device="cuda")
    shaped = _leaves(residual, y, gate)
    flat = _leaves(residual.view(B * T, D), y.view(B * T, D), gate)
    out_shaped = hawk_torch.gate_residual(*shaped, idx)
    out_flat = hawk_torch.gate_residual(*flat, idx)
    assert out_shaped.shape == (B, T, D) and torch.equal(out_shaped.view(B * T, D), out_flat)
    for a, b in zip(torch.autograd.grad(out_shaped, shaped, dout), torch.autograd.grad(out_flat, flat,
                                                                                       dout.view(B * T, D))):
        assert torch.equal(a.reshape(b.shape), b)


def test_eager_forward_and_backward_never_synchronise(seed):
    """torch's sync debug mode raises on any synchronising CUDA call made through torch (.item(), a blocking
    copy, torch.cuda.synchronize): none may happen in an eager step, device checks on (the default)."""
    W, H, dtype = 256, 2, torch.bfloat16
    params = [p.requires_grad_(True) for p in fused_parameters(W, H)]
    x = uniform((2, 100, W), dtype).requires_grad_(True)
    cu = torch.tensor([0, 60, 200], dtype=torch.int32, device="cuda")
    xp = uniform((200, W), dtype).requires_grad_(True)
    residual, y2 = uniform((64, W), dtype).requires_grad_(True), uniform((64, W), dtype).requires_grad_(True)
    gate = uniform((4, W)).requires_grad_(True)
    idx = torch.randint(0, 4, (64,), device="cuda")
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        y, h = hawk_torch.rglru(x, *params)
        torch.autograd.grad((y.float().sum() + h.sum(),), [x, *params])
        yp, _ = hawk_torch.rglru(xp, *params, cu_seqlens=cu)
        torch.autograd.grad((yp.float().sum(),), [xp, *params])
        out = hawk_torch.gate_residual(residual, y2, gate, idx)
        torch.autograd.grad((out.float().sum(),), [residual, y2, gate])
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    hawk_torch.check_device_errors()


def test_parameter_gradients_are_separate_contiguous_tensors(seed):
    """The eager formula carves the fp32 parameter gradients from one allocation: each is still contiguous, shaped
    like its parameter, overlapping no other, and .backward() accumulates them as separate tensors (bitwise what
    torch.autograd.grad returns)."""
    B, L, W, H, dtype = 2, 130, 256, 2, torch.bfloat16
    params = [p.requires_grad_(True) for p in fused_parameters(W, H)]
    x, dy = uniform((B, L, W), dtype).requires_grad_(True), uniform((B, L, W), dtype)
    y, _ = hawk_torch.rglru(x, *params)
    grads = torch.autograd.grad(y, params, dy)
    ranges = []
    for p, g in zip(params, grads):
        assert g.shape == p.shape and g.dtype == p.dtype and g.is_contiguous()
        ranges.append((g.data_ptr(), g.data_ptr() + g.numel() * g.element_size()))
    ranges.sort()
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), "two parameter gradients overlap"
    y, _ = hawk_torch.rglru(x, *params)
    y.backward(dy)
    for p, g in zip(params, grads):
        assert torch.equal(p.grad, g)
