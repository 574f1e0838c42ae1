"""hawk_torch.gate_residual against the float64 SPEC implementation, its layouts, and its bitwise properties."""

from __future__ import annotations

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from reference import gate_residual_reference, relative_l2  # noqa: E402
from support import STORAGE_TOLERANCE, requires_cuda, uniform  # noqa: E402

pytestmark = requires_cuda

DGATE_TOLERANCE = 1e-5  # fp32 accumulation, in a fixed order


def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def _problem(N, D, G, dtype, gate_dtype, index_dtype, idx=None):
    residual, y = _leaf(uniform((N, D), dtype)), _leaf(uniform((N, D), dtype))
    gate = _leaf(uniform((G, D), gate_dtype))
    if idx is None:
        idx = torch.randint(0, G, (N,), device="cuda")
    return residual, y, gate, idx.to(index_dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("gate_dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_output_and_gradients_match_float64_reference(dtype, gate_dtype, index_dtype, seed):
    N, D, G = 1031, 1152 + 8, 7  # a tail in N and in D
    residual, y, gate, idx = _problem(N, D, G, dtype, gate_dtype, index_dtype)
    out = hawk_torch.gate_residual(residual, y, gate, idx)
    dout = uniform((N, D), dtype)
    (out.float() * dout.float()).sum().backward()

    r64, y64, g64 = (_leaf(t.detach().double()) for t in (residual, y, gate))
    want = gate_residual_reference(r64, y64, g64, idx)
    (want * dout.double()).sum().backward()

    assert out.dtype == dtype and out.shape == (N, D)
    for name, got, ref, tol in [("out", out, want, STORAGE_TOLERANCE[dtype]),
                                ("dresidual", residual.grad, r64.grad, 0.0),
                                ("dy", y.grad, y64.grad, STORAGE_TOLERANCE[dtype]),
                                ("dgate", gate.grad, g64.grad,
                                 DGATE_TOLERANCE if gate_dtype == torch.float32 else STORAGE_TOLERANCE[gate_dtype])]:
        error = relative_l2(got, ref)
        assert error <= tol, f"{name}: relative L2 {error:.3e} > {tol:.1e} (HAWK_TORCH_SEED={seed})"
    assert gate.grad.dtype == gate_dtype


def test_leading_dimensions_are_rows(seed):
    B, S, D, G = 3, 50, 256, 3
    residual, y = uniform((B, S, D), torch.bfloat16), uniform((B, S, D), torch.bfloat16)
    gate = uniform((G, D), torch.float32)
    idx = torch.arange(B, device="cuda").repeat_interleave(S)
    out = hawk_torch.gate_residual(residual, y, gate, idx)
    flat = hawk_torch.gate_residual(residual.view(-1, D), y.view(-1, D), gate, idx)
    assert out.shape == (B, S, D) and torch.equal(out.view(-1, D), flat)


def test_every_index_layout_gives_the_same_bits(seed):
    S, G, D = 37, 24, 3072  # uniform: S rows per gate row
    N = S * G
    idx = torch.arange(N, device="cuda") // S
    residual, y, gate, idx = _problem(N, D, G, torch.bfloat16, torch.float32, torch.int64, idx)
    dout = uniform((N, D), torch.bfloat16)
    results = {}
    for layout in ["arbitrary", "uniform", "contiguous"]:
        leaves = [_leaf(t) for t in (residual, y, gate)]
        out = hawk_torch.gate_residual(*leaves, idx, layout=layout, rows_per_group=S)
        out.backward(dout)
        results[layout] = [out.detach()] + [t.grad for t in leaves]
    for layout in ["uniform", "contiguous"]:
        for a, b in zip(results["arbitrary"], results[layout]):
            assert torch.equal(a, b), f"layout {layout} differs from arbitrary"


def test_rows_and_dgate_are_bitwise_batch_invariant_and_repeatable(seed):
    N, D, G = 4096, 2048, 5
    residual, y, gate, idx = _problem(N, D, G, torch.bfloat16, torch.bfloat16, torch.int32)
    dout = uniform((N, D), torch.bfloat16)

    def run(rows):
        leaves = [_leaf(t[rows]) for t in (residual, y)] + [_leaf(gate)]
        out = hawk_torch.gate_residual(*leaves, idx[rows].contiguous())
        out.backward(dout[rows])
        return out.detach(), leaves[1].grad, leaves[2].grad

    everything = torch.arange(N, device="cuda")
    out, dy, dgate = run(everything)
    out2, dy2, dgate2 = run(everything)
    assert torch.equal(out, out2) and torch.equal(dy, dy2) and torch.equal(dgate, dgate2)
    some = torch.tensor([17, 4000, 5], device="cuda")
    out_s, dy_s, _ = run(some)
    assert torch.equal(out_s, out[some]) and torch.equal(dy_s, dy[some])
    # negative control: a different dout changes dgate's bits
    leaves = [_leaf(residual), _leaf(y), _leaf(gate)]
    hawk_torch.gate_residual(*leaves, idx).backward(dout * 2 - 1)
    assert not torch.equal(leaves[2].grad, dgate)


def test_unused_gate_rows_get_zero_gradient(seed):
    N, D, G = 64, 512, 9
    idx = torch.randint(0, 4, (N,), device="cuda")  # rows 4..8 unused
    residual, y, gate, idx = _problem(N, D, G, torch.float32, torch.float32, torch.int64, idx)
    hawk_torch.gate_residual(residual, y, gate, idx).sum().backward()
    assert torch.count_nonzero(gate.grad[4:]) == 0 and torch.count_nonzero(gate.grad[:4]) > 0


def _step(residual, y, gate, idx, dout, **layout):
    leaves = [_leaf(t) for t in (residual, y, gate)]
    out = hawk_torch.gate_residual(*leaves, idx, **layout)
    out.backward(dout)
    return [out.detach()] + [t.grad for t in leaves]


def test_default_layout_takes_the_uniform_hint_of_an_earlier_call_with_the_same_bits(seed):
    """The default call remembers an earlier call's on-device verdict for the same unmodified idx and declares the
    uniform layout itself (csrc/ops.cpp, LayoutHints): the same bits as before and as layout='uniform'."""
    S, G, D = 3, 1093, 512
    N = S * G - 1  # a short last group
    idx = torch.arange(N, device="cuda") // S
    residual, y, gate, idx = _problem(N, D, G, torch.bfloat16, torch.bfloat16, torch.int64, idx)
    dout = uniform((N, D), torch.bfloat16)
    hint = torch.ops.hawk.gate_residual_layout_hint
    assert hint(idx, G) == 0  # never seen
    first = _step(residual, y, gate, idx, dout)
    torch.cuda.synchronize()  # the verdict's copy has landed
    assert hint(idx, G) == S
    assert hint(idx, G + 1) == 0  # another G is another key
    second = _step(residual, y, gate, idx, dout)  # now declared uniform on the host
    explicit = _step(residual, y, gate, idx, dout, layout="uniform", rows_per_group=S)
    for a, b, c in zip(first, second, explicit):
        assert torch.equal(a, b) and torch.equal(a, c)
    # negative control: a different dout changes the bits
    assert not torch.equal(_step(residual, y, gate, idx, dout * 2 - 1)[3], first[3])

    # A non-uniform idx is remembered as such; an in-place change (a version bump) or a copy is a new key.
    shuffled = idx[torch.randperm(N, device="cuda")]
    _step(residual, y, gate, shuffled, dout)
    torch.cuda.synchronize()
    assert hint(shuffled, G) == 0
    idx.add_(0)
    assert hint(idx, G) == 0 and hint(idx.clone(), G) == 0


def test_a_stale_layout_hint_fails_the_call_instead_of_computing_from_it(seed):
    """idx changed behind PyTorch's back (through .data: no version bump) after its verdict was remembered: the
    hinted uniform layout is checked on the device, so the call reports idx instead of giving wrong gradients."""
    S, G, D = 4, 64, 256
    N = S * G
    idx = torch.arange(N, device="cuda") // S
    residual, y, gate, idx = _problem(N, D, G, torch.float32, torch.float32, torch.int64, idx)
    dout = uniform((N, D), torch.float32)
    _step(residual, y, gate, idx, dout)
    torch.cuda.synchronize()
    assert torch.ops.hawk.gate_residual_layout_hint(idx, G) == S
    idx.data.copy_(idx[torch.randperm(N, device="cuda")])  # same tensor, same version, other contents
    previous = hawk_torch.set_sync_checks(True)
    try:
        with pytest.raises(RuntimeError, match="(?i)uniform"):
            _step(residual, y, gate, idx, dout)
    finally:
        hawk_torch.set_sync_checks(previous)
