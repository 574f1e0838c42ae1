"""Bad input gives a clear Python error before anything reaches a kernel (shape, dtype, device, contiguity), and
what only the device can check (cu_seqlens, idx, state_index) comes back from the library as a RuntimeError
carrying its message, with nothing written."""

from __future__ import annotations

import pytest
import torch

import hawk_torch
from support import fused_parameters, requires_cuda, uniform

pytestmark = requires_cuda

B, L, W, H = 2, 10, 128, 2


def _rglru_case(**overrides):
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    args = dict(x=uniform((B, L, W), torch.bfloat16), a_param=a_param, Wx=Wx, bx=bx, Wa=Wa, ba=ba)
    args.update(overrides)
    return {k: v for k, v in args.items() if v is not None or k in ("Wx", "bx", "Wa", "ba")}


def _no_weights():
    return dict(Wx=None, bx=None, Wa=None, ba=None)


RGLRU_CASES = [
    ("x on the CPU", lambda: _rglru_case(x=uniform((B, L, W), torch.bfloat16, device="cpu")), ValueError,
     "x must be on a CUDA device"),
    ("x without a time axis", lambda: _rglru_case(x=uniform((B * L, W), torch.bfloat16)), ValueError,
     r"x must be \[B, L, W\]"),
    ("integer x", lambda: _rglru_case(x=torch.ones(B, L, W, dtype=torch.int32, device="cuda")), TypeError,
     "x must be float32, float16 or bfloat16"),
    ("non-contiguous x", lambda: _rglru_case(x=uniform((B, W, L), torch.bfloat16).transpose(1, 2)), ValueError,
     "x must be contiguous"),
    ("width not a multiple of 8", lambda: _rglru_case(x=uniform((B, L, 100), torch.bfloat16), **_no_weights(),
                                                      gx=uniform((B, L, 100), torch.bfloat16),
                                                      ga=uniform((B, L, 100), torch.bfloat16)),
     ValueError, "multiple of 8"),
    ("no gates at all", lambda: _rglru_case(**_no_weights()), ValueError, "give either Wx, bx, Wa, ba"),
    ("both gate modes", lambda: _rglru_case(gx=uniform((B, L, W), torch.bfloat16),
                                            ga=uniform((B, L, W), torch.bfloat16)), ValueError, "give either"),
    ("a missing bias", lambda: _rglru_case(ba=None), ValueError, "ba is missing"),
    ("an unshipped block width", lambda: _rglru_case(**dict(zip(("a_param", "Wx", "bx", "Wa", "ba"),
                                                                fused_parameters(W, 4)))),
     ValueError, "block width w = W / H = 32 has no shipped fused configuration"),
    ("Wa unlike Wx", lambda: _rglru_case(Wa=torch.randn(H, 64, 32, device="cuda")), ValueError,
     "Wa must have shape"),
    ("bx of the wrong size", lambda: _rglru_case(bx=torch.randn(H, 32, device="cuda")), ValueError,
     r"bx must be \[H, w\]"),
    ("gx in another dtype", lambda: _rglru_case(**_no_weights(), gx=uniform((B, L, W)),
                                                ga=uniform((B, L, W), torch.bfloat16)), TypeError,
     "gx must have x's dtype"),
    ("a_param of the wrong size", lambda: _rglru_case(a_param=torch.randn(W + 1, device="cuda")), ValueError,
     r"a_param must be \[W\]"),
    ("float reset flags", lambda: _rglru_case(reset=torch.zeros(B, L, device="cuda")), TypeError,
     "reset must be bool or uint8"),
    ("reset flags of the wrong shape", lambda: _rglru_case(reset=torch.zeros(B, L + 1, dtype=torch.bool,
                                                                             device="cuda")),
     ValueError, "reset must have shape"),
    ("an unknown reset mode", lambda: _rglru_case(reset="documents"), ValueError, "reset must be a bool/uint8"),
    ("h0 of the wrong shape", lambda: _rglru_case(h0=torch.zeros(B + 1, W, device="cuda")), ValueError,
     "h0 must have shape"),
    ("int64 cu_seqlens", lambda: _rglru_case(x=uniform((B * L, W), torch.bfloat16),
                                             cu_seqlens=torch.tensor([0, 7, B * L], device="cuda")),
     TypeError, "cu_seqlens must be int32"),
    ("cu_seqlens that do not end at T (checked on the device by the library)",
     lambda: _rglru_case(x=uniform((B * L, W), torch.bfloat16),
                         cu_seqlens=torch.tensor([0, 7, B * L - 1], dtype=torch.int32, device="cuda")),
     RuntimeError, r"cu_seqlens\[N\] must equal num_tokens"),
    ("x not 16-byte aligned (checked by the library)",
     lambda: _rglru_case(x=uniform((B * L * W + 1,), torch.bfloat16)[1:].view(B, L, W)), RuntimeError,
     "16-byte aligned"),
]


@pytest.mark.parametrize("case, make, error, message", RGLRU_CASES, ids=[c[0] for c in RGLRU_CASES])
def test_rglru_rejects(case, make, error, message):
    with pytest.raises(error, match=message):
        hawk_torch.rglru(**make())


def test_backward_without_checkpoints_is_a_clear_error():
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x = uniform((B, L, W), torch.bfloat16).requires_grad_(True)
    y, _, _ = torch.ops.hawk.rglru_forward(x, Wx, bx, Wa, ba, None, None, a_param, None, None, None, H, 1, False,
                                           True)
    with pytest.raises(RuntimeError, match="save_checkpoints=False"):
        y.float().sum().backward()


def test_decode_rejects_bad_states_and_writes_nothing():
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x = uniform((B, 1, W), torch.bfloat16)
    pool = uniform((4, W))
    before = pool.clone()
    with pytest.raises(TypeError, match="state must be float32"):
        hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool.half())
    with pytest.raises(TypeError, match="state_index must be int32"):
        hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool, state_index=torch.tensor([0, 1],
                                                                                                  device="cuda"))
    with pytest.raises(ValueError, match="one row per sequence"):
        hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool)
    with pytest.raises(RuntimeError, match="state_index holds a row outside"):
        hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool,
                                 state_index=torch.tensor([0, 4], dtype=torch.int32, device="cuda"))
    assert torch.equal(pool, before)


def _gate_case(**overrides):
    N, D, G = 16, 64, 3
    args = dict(residual=uniform((N, D), torch.bfloat16), y=uniform((N, D), torch.bfloat16),
                gate=uniform((G, D)), idx=torch.randint(0, G, (N,), device="cuda"))
    args.update(overrides)
    return args


GATE_CASES = [
    ("residual on the CPU", lambda: _gate_case(residual=uniform((16, 64), torch.bfloat16, device="cpu")), ValueError,
     "residual must be on a CUDA device"),
    ("non-contiguous y", lambda: _gate_case(y=uniform((64, 16), torch.bfloat16).t()), ValueError,
     "y must be contiguous"),
    ("y in another dtype", lambda: _gate_case(y=uniform((16, 64))), TypeError, "y must have residual's dtype"),
    ("a float16 gate", lambda: _gate_case(gate=uniform((3, 64), torch.float16)), TypeError,
     "gate must be float32 or bfloat16"),
    ("a gate of another width", lambda: _gate_case(gate=uniform((3, 32))), ValueError, r"gate must be \[G, D\]"),
    ("float indices", lambda: _gate_case(idx=torch.zeros(16, device="cuda")), TypeError, "idx must be int32 or int64"),
    ("too few indices", lambda: _gate_case(idx=torch.zeros(15, dtype=torch.int64, device="cuda")), ValueError,
     r"idx must be \[N\] with N = 16"),
    ("an index out of range (checked on the device by the library)",
     lambda: _gate_case(idx=torch.full((16,), 3, dtype=torch.int64, device="cuda")), RuntimeError,
     r"idx holds a value outside \[0, num_gate_rows\)"),
]


@pytest.mark.parametrize("case, make, error, message", GATE_CASES, ids=[c[0] for c in GATE_CASES])
def test_gate_residual_rejects(case, make, error, message):
    with pytest.raises(error, match=message):
        hawk_torch.gate_residual(**make())


def test_gate_residual_layout_arguments_are_checked():
    with pytest.raises(ValueError, match="layout must be one of"):
        hawk_torch.gate_residual(**_gate_case(), layout="sorted")
    with pytest.raises(ValueError, match="needs rows_per_group"):
        hawk_torch.gate_residual(**_gate_case(), layout="uniform")
