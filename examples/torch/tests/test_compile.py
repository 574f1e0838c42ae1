"""torch.compile(fullgraph=True) traces through the hawk operators (fake implementations, autograd), and
torch.library.opcheck finds their schemas, fake implementations and autograd registrations consistent."""

from __future__ import annotations

import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import fused_parameters, requires_cuda, reset_flags, uniform  # noqa: E402

pytestmark = requires_cuda


def _block(x, a_param, Wx, bx, Wa, ba, reset, residual, gate, idx):
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba, reset=reset)
    out = hawk_torch.gate_residual(residual, torch.nn.functional.gelu(y), gate, idx)
    return out, h


def test_compiled_fullgraph_forward_and_backward_equal_eager(seed):
    torch._dynamo.reset()
    B, L, W, H, dtype = 2, 96, 256, 1, torch.bfloat16
    params = fused_parameters(W, H)
    x, reset = uniform((B, L, W), dtype), reset_flags(B, L)
    residual, gate = uniform((B, L, W), dtype), uniform((4, W), torch.float32)
    idx = torch.randint(0, 4, (B * L,), device="cuda")
    dout = uniform((B, L, W), dtype)

    def run(fn):
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, *params, residual, gate)]
        xl, a, wx, bx, wa, ba, res, g = leaves
        out, h = fn(xl, a, wx, bx, wa, ba, reset, res, g, idx)
        ((out.float() * dout.float()).sum() + h.sum()).backward()
        return [out.detach(), h.detach()] + [t.grad for t in leaves]

    eager = run(_block)
    compiled = run(torch.compile(_block, fullgraph=True))
    names = ["out", "h", "dx", "da_param", "dWx", "dbx", "dWa", "dba", "dresidual", "dgate"]
    for name, a, b in zip(names, eager, compiled):
        assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2), name
    # the hawk operators' own results do not depend on compilation
    assert torch.equal(eager[1], compiled[1])


def test_compiled_module_forward_and_backward_equal_eager(seed):
    """The layer traced whole (fake implementations, autograd formula) by dynamo and AOTAutograd; the
    aot_eager backend keeps it quick and leaves every op's bits as in eager mode."""
    torch._dynamo.reset()
    layer = hawk_torch.RGLRU(256, 2, device="cuda")
    x = uniform((2, 70, 256), torch.bfloat16)
    segment_pos = torch.arange(70, device="cuda").repeat(2, 1)
    segment_pos[1, 30:] -= 30  # a second document in sequence 1
    dy = uniform((2, 70, 256), torch.bfloat16)

    def run(fn):
        xl = x.clone().requires_grad_(True)
        layer.zero_grad(set_to_none=True)
        y, h = fn(xl, segment_pos)
        (y.float() * dy.float()).sum().backward()
        return [y.detach(), h.detach(), xl.grad] + [p.grad.clone() for p in layer.parameters()]

    eager = run(layer)
    compiled = run(torch.compile(layer, fullgraph=True, backend="aot_eager"))
    for i, (a, b) in enumerate(zip(eager, compiled)):
        assert torch.equal(a, b), f"result {i} differs"


def test_opcheck_finds_the_operators_consistent(seed):
    B, L, W, H, dtype = 2, 70, 128, 2, torch.bfloat16
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x = uniform((B, L, W), dtype)
    reset = reset_flags(B, L)
    h0 = uniform((B, W))
    wx, wa = Wx.to(dtype), Wa.to(dtype)
    forward_args = (x, wx, bx, wa, ba, None, None, a_param, reset, h0, None, H, 2, True, True)
    leaves = [t.clone().requires_grad_(True) for t in (x, wx, bx, wa, ba, a_param, h0)]
    grad_args = (leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], None, None, leaves[5], reset, leaves[6], None,
                 H, 2, True, True)
    torch.library.opcheck(torch.ops.hawk.rglru_forward.default, forward_args)
    torch.library.opcheck(torch.ops.hawk.rglru_forward.default, grad_args)
    _, _, checkpoints = torch.ops.hawk.rglru_forward(*forward_args)
    torch.library.opcheck(torch.ops.hawk.rglru_backward.default,
                          (x, wx, bx, wa, ba, None, None, a_param, reset, h0, None, checkpoints,
                           uniform((B, L, W), dtype), uniform((B, W)), H, 2, True, True))
    gx, ga = uniform((B, L, W), dtype), uniform((B, L, W), dtype)
    torch.library.opcheck(torch.ops.hawk.rglru_forward.default,
                          (x, None, None, None, None, gx, ga, a_param, None, None, None, 1, 1, True, True))
    state = uniform((5, W))
    slots = torch.tensor([4, 2], dtype=torch.int32, device="cuda")
    torch.library.opcheck(torch.ops.hawk.rglru_decode_.default,
                          (x[:, :1].contiguous(), wx, bx, wa, ba, None, None, a_param, None, state, slots, None, H,
                           True))
    N, D, G = 300, 1152, 6
    residual, y, gate = uniform((N, D), dtype), uniform((N, D), dtype), uniform((G, D), torch.float32)
    idx = torch.randint(0, G, (N,), device="cuda")
    gr_leaves = [t.clone().requires_grad_(True) for t in (residual, y, gate)]
    torch.library.opcheck(torch.ops.hawk.gate_residual_forward.default, (*gr_leaves, idx, 0, 0, True))
    torch.library.opcheck(torch.ops.hawk.gate_residual_backward.default,
                          (uniform((N, D), dtype), y, gate, idx, 0, 0, True))
