"""The lean eager path of hawk_torch.rglru and gate_residual (hawk_torch/_ops.py, "Host cost"): it gives bitwise
what the operators' registered autograd formulas give (the path torch.compile and direct callers of
torch.ops.hawk.* take), it really is the path eager calls take, and an eager forward + backward, device checks
included, never synchronises the host."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():  # before importing hawk_torch, which needs a GPU
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import hawk_torch  # noqa: E402
from hawk_torch import _ops  # noqa: E402
from support import fused_parameters, uniform  # noqa: E402


def _registered_path(monkeypatch):
    """Makes the entry points call the operators as torch.compile's graphs do (registered formulas)."""
    monkeypatch.setattr(_ops, "_eager", lambda: False)


def _rglru_step(x, params, gates, h0, use_h_final, dy, dh):
    """Outputs and every gradient of one forward + backward on fresh leaves."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (x, *params, *gates.values())]
    h0_leaf = None if h0 is None else h0.detach().clone().requires_grad_(True)
    xl, rest = leaves[0], leaves[1:]
    named = dict(zip(gates, rest[len(params):]))
    y, h = hawk_torch.rglru(xl, *rest[:len(params)], **named, h0=h0_leaf)
    loss = (y.float() * dy.float()).sum() + ((h * dh).sum() if use_h_final else 0.0)
    wrt = leaves + ([h0_leaf] if h0_leaf is not None else [])
    return [y, h, *torch.autograd.grad(loss, wrt)], y.grad_fn


@pytest.mark.parametrize("mode", ["fused fp32 master weights", "fused bf16 weights", "gate_logits"])
@pytest.mark.parametrize("use_h_final", [False, True], ids=["h_final unused", "h_final used"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["no h0", "h0"])
def test_rglru_eager_path_equals_the_registered_formula(monkeypatch, seed, mode, use_h_final, with_h0):
    B, L, W, H, dtype = 2, 150, 256, 2, torch.bfloat16
    x, dy, dh = uniform((B, L, W), dtype), uniform((B, L, W), dtype), uniform((B, W))
    h0 = uniform((B, W)) if with_h0 else None
    if mode == "gate_logits":
        params = [fused_parameters(W, H)[0]]
        gates = dict(gx=uniform((B, L, W), dtype, -2, 2), ga=uniform((B, L, W), dtype, -2, 2))
    else:
        a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
        if mode == "fused bf16 weights":
            Wx, Wa = Wx.to(dtype), Wa.to(dtype)
        params, gates = [a_param, Wx, bx, Wa, ba], {}

    eager, eager_node = _rglru_step(x, params, gates, h0, use_h_final, dy, dh)
    assert type(eager_node).__name__ == "_RGLRUEagerBackward"  # the eager path was taken
    _registered_path(monkeypatch)
    registered, registered_node = _rglru_step(x, params, gates, h0, use_h_final, dy, dh)
    assert type(registered_node).__name__ != "_RGLRUEagerBackward"
    assert len(eager) == len(registered)
    for i, (a, b) in enumerate(zip(eager, registered)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"result {i}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        assert torch.equal(a, b), f"result {i} differs between the eager path and the registered formula"
    # the weights' gradients come back in the weights' own dtype (fp32 master weights: fp32)
    if mode != "gate_logits":
        assert eager[4].dtype == params[1].dtype and eager[6].dtype == params[3].dtype


def test_an_unused_h_final_gives_the_bits_of_a_zero_dh_final(seed):
    """The backward now gets None for an output nobody differentiates, where autograd used to pass zeros."""
    B, L, W, H, dtype = 2, 130, 128, 2, torch.bfloat16
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    wx, wa = Wx.to(dtype), Wa.to(dtype)
    x, dy = uniform((B, L, W), dtype), uniform((B, L, W), dtype)
    args = (x, wx, bx, wa, ba, None, None, a_param, None, None, None)
    _, _, checkpoints = torch.ops.hawk.rglru_forward(*args, H, 1, True, True)
    zero = torch.ops.hawk.rglru_backward(*args, checkpoints, dy, torch.zeros(B, W, device="cuda"), H, 1, False, True)
    none = torch.ops.hawk.rglru_backward(*args, checkpoints, dy, None, H, 1, False, True)
    for i, (a, b) in enumerate(zip(zero, none)):
        assert torch.equal(a, b), f"gradient {i} differs"


@pytest.mark.parametrize("layout", ["arbitrary", "uniform"])
def test_gate_residual_eager_path_equals_the_registered_formula(monkeypatch, seed, layout):
    N, D, G, dtype = 300, 256, 5, torch.bfloat16
    S = (N + G - 1) // G
    residual, y, dout = uniform((N, D), dtype), uniform((N, D), dtype), uniform((N, D), dtype)
    gate = uniform((G, D), torch.bfloat16)
    idx = torch.arange(N, device="cuda") // S if layout == "uniform" else torch.randint(0, G, (N,), device="cuda")

    def step():
        leaves = [t.detach().clone().requires_grad_(True) for t in (residual, y, gate)]
        out = hawk_torch.gate_residual(*leaves, idx, layout=layout, rows_per_group=S)
        node = out.grad_fn  # gate_residual returns a view of the operator's [N, D] result
        node = node.next_functions[0][0] if type(node).__name__ == "ViewBackward0" else node
        return [out, *torch.autograd.grad(out, leaves, dout)], node

    eager, eager_node = step()
    assert type(eager_node).__name__ == "_GateResidualEagerBackward"
    _registered_path(monkeypatch)
    registered, _ = step()
    for i, (a, b) in enumerate(zip(eager, registered)):
        assert a.dtype == b.dtype and torch.equal(a, b), f"result {i} differs"


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
