"""hawk_torch.rglru against the float64 SPEC implementation (outputs and gradients), and its bitwise
properties (batch invariance, split invariance down to decoding, determinism) through the Python API."""

from __future__ import annotations

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import (  # noqa: E402
    PARAMETER_TOLERANCE, STATE_TOLERANCE, STORAGE_TOLERANCE, a_param_values, fused_parameters, requires_cuda,
    reset_flags, uniform)
from reference import relative_l2, rglru_reference  # noqa: E402

pytestmark = requires_cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def _check(name, got, want, tolerance, seed):
    error = relative_l2(got, want)
    assert error <= tolerance, f"{name}: relative L2 {error:.3e} > {tolerance:.1e} (HAWK_TORCH_SEED={seed})"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("mode", ["fused", "gate_logits"])
def test_outputs_and_gradients_match_float64_reference(dtype, mode, seed):
    B, L = 3, 131  # L: two full time chunks and a tail
    if mode == "fused":
        W, H = 128, 2  # w = 64
        a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
        gates = dict(Wx=_leaf(Wx), bx=_leaf(bx), Wa=_leaf(Wa), ba=_leaf(ba))
    else:
        W = 96  # any width in gate-logits mode
        a_param = a_param_values(W)
        gates = dict(gx=_leaf(uniform((B, L, W), dtype, -2, 2)), ga=_leaf(uniform((B, L, W), dtype, -2, 2)))
    x = _leaf(uniform((B, L, W), dtype))
    a_param = _leaf(a_param)
    h0 = _leaf(uniform((B, W)))
    reset = reset_flags(B, L)
    reset[0, 0] = True  # one sequence drops h0 at once, the others continue it (unless reset[b, 0] is drawn)
    reset[1, 0] = False
    dy = uniform((B, L, W), dtype)
    dh = uniform((B, W))

    y, h = hawk_torch.rglru(x, a_param, **gates, reset=reset, h0=h0)
    assert y.dtype == dtype and y.shape == x.shape and h.dtype == torch.float32 and h.shape == (B, W)
    ((y.float() * dy.float()).sum() + (h * dh).sum()).backward()

    # the reference sees what the kernel sees: weights rounded to x's dtype, everything else as given
    ref = {k: _leaf(v.detach().to(dtype).double() if k in ("Wx", "Wa") else v.detach().double())
           for k, v in gates.items()}
    x64, a64, h064 = _leaf(x.detach().double()), _leaf(a_param.detach().double()), _leaf(h0.detach().double())
    y64, h64 = rglru_reference(x64, a64, **ref, reset=reset, h0=h064)
    ((y64 * dy.double()).sum() + (h64 * dh.double()).sum()).backward()

    _check("y", y, y64, STORAGE_TOLERANCE[dtype], seed)
    _check("h_final", h, h64, STATE_TOLERANCE, seed)
    _check("dx", x.grad, x64.grad, STORAGE_TOLERANCE[dtype], seed)
    _check("d a_param", a_param.grad, a64.grad, PARAMETER_TOLERANCE[dtype], seed)
    _check("dh0", h0.grad, h064.grad, STATE_TOLERANCE, seed)
    for name, leaf in gates.items():
        tolerance = STORAGE_TOLERANCE[dtype] if name in ("gx", "ga") else PARAMETER_TOLERANCE[dtype]
        assert leaf.grad.dtype == leaf.dtype
        _check(f"d{name}", leaf.grad, ref[name].grad, tolerance, seed)


@pytest.mark.parametrize("block_width", [128, 256])
def test_wider_blocks_match_float64_reference(block_width, seed):
    B, L, H = 2, 70, 2
    W = block_width * H
    a_param, Wx, bx, Wa, ba = (_leaf(t) for t in fused_parameters(W, H))
    x = _leaf(uniform((B, L, W), torch.bfloat16))
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba)  # default: each sequence starts with a reset
    dy = uniform((B, L, W), torch.bfloat16)
    (y.float() * dy.float()).sum().backward()
    refs = [_leaf(t.detach().to(torch.bfloat16).double()) for t in (Wx, Wa)]
    x64, a64 = _leaf(x.detach().double()), _leaf(a_param.detach().double())
    y64, h64 = rglru_reference(x64, a64, refs[0], bx.detach(), refs[1], ba.detach(), reset_mode="sequence_start")
    (y64 * dy.double()).sum().backward()
    _check("y", y, y64, STORAGE_TOLERANCE[torch.bfloat16], seed)
    _check("h_final", h, h64, STATE_TOLERANCE, seed)
    _check("dx", x.grad, x64.grad, STORAGE_TOLERANCE[torch.bfloat16], seed)
    _check("dWx", Wx.grad, refs[0].grad, PARAMETER_TOLERANCE[torch.bfloat16], seed)
    _check("dWa", Wa.grad, refs[1].grad, PARAMETER_TOLERANCE[torch.bfloat16], seed)


def test_restricted_contract_without_resets_matches_reference(seed):
    """reset='none' and no h0: Fattori's contract (m applied at t = 0 too)."""
    B, L, W, H = 2, 65, 128, 2
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x = uniform((B, L, W), torch.float32)
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba, reset="none")
    y64, h64 = rglru_reference(x, a_param, Wx, bx, Wa, ba, reset_mode="none")
    _check("y", y, y64, STORAGE_TOLERANCE[torch.float32], seed)
    _check("h_final", h, h64, STATE_TOLERANCE, seed)


@pytest.mark.parametrize("reset_mode", ["sequence_start", "none"])
def test_packed_batch_matches_reference_per_sequence(reset_mode, seed):
    lengths = [1, 64, 97, 5, 130]
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    T, W, H, dtype = offsets[-1], 128, 2, torch.bfloat16
    a_param, Wx, bx, Wa, ba = (_leaf(t) for t in fused_parameters(W, H))
    x = _leaf(uniform((T, W), dtype))
    h0 = _leaf(uniform((len(lengths), W))) if reset_mode == "none" else None
    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba, reset=reset_mode, h0=h0, cu_seqlens=cu)
    dy = uniform((T, W), dtype)
    (y.float() * dy.float()).sum().backward()
    refs = [_leaf(t.detach().to(dtype).double()) for t in (Wx, Wa)]
    x64 = _leaf(x.detach().double())
    h064 = None if h0 is None else _leaf(h0.detach().double())
    y64, h64 = rglru_reference(x64, a_param.detach(), refs[0], bx.detach(), refs[1], ba.detach(),
                               reset_mode=reset_mode, h0=h064, cu_seqlens=offsets)
    (y64 * dy.double()).sum().backward()
    _check("y", y, y64, STORAGE_TOLERANCE[dtype], seed)
    _check("h_final", h, h64, STATE_TOLERANCE, seed)
    _check("dx", x.grad, x64.grad, STORAGE_TOLERANCE[dtype], seed)
    _check("dWx", Wx.grad, refs[0].grad, PARAMETER_TOLERANCE[dtype], seed)
    if h0 is not None:
        _check("dh0", h0.grad, h064.grad, STATE_TOLERANCE, seed)


def _forward_backward(x, params, dy, **kwargs):
    x = _leaf(x)
    y, h = hawk_torch.rglru(x, *params, **kwargs)
    (y.float() * dy.float()).sum().backward()
    return y.detach(), h.detach(), x.grad


def test_row_outputs_and_gradients_are_bitwise_batch_invariant(seed):
    B, L, W, H, dtype = 6, 150, 256, 2, torch.bfloat16
    params = fused_parameters(W, H)
    x, dy, reset = uniform((B, L, W), dtype), uniform((B, L, W), dtype), reset_flags(B, L)
    y, h, dx = _forward_backward(x, params, dy, reset=reset)
    row = 3
    y1, h1, dx1 = _forward_backward(x[row:row + 1], params, dy[row:row + 1], reset=reset[row:row + 1].contiguous())
    assert torch.equal(y1, y[row:row + 1]) and torch.equal(h1, h[row:row + 1]) and torch.equal(dx1, dx[row:row + 1])
    perm = torch.randperm(B, device="cuda")
    yp, hp, dxp = _forward_backward(x[perm], params, dy[perm], reset=reset[perm])
    assert torch.equal(yp, y[perm]) and torch.equal(hp, h[perm]) and torch.equal(dxp, dx[perm])
    # the same sequences packed with cu_seqlens give the same bits as the dense batch
    cu = torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device="cuda")
    yk, hk, dxk = _forward_backward(x.reshape(B * L, W), params, dy.reshape(B * L, W), reset=reset.reshape(-1),
                                    cu_seqlens=cu)
    assert torch.equal(yk.view(B, L, W), y) and torch.equal(hk, h) and torch.equal(dxk.view(B, L, W), dx)
    # negative control: one changed input element of that row changes its bits
    x_changed = x[row:row + 1].clone()
    x_changed[0, L // 2, 5] = -x_changed[0, L // 2, 5] + 0.5
    y2, _, _ = _forward_backward(x_changed, params, dy[row:row + 1], reset=reset[row:row + 1].contiguous())
    assert not torch.equal(y2, y[row:row + 1])


def test_split_and_token_by_token_decode_are_bitwise_equal_to_one_call(seed):
    B, L, W, H, dtype = 2, 150, 256, 1, torch.bfloat16  # w = 256: RecurrentGemma's block width
    params = fused_parameters(W, H)
    x, reset, h0 = uniform((B, L, W), dtype), reset_flags(B, L), uniform((B, W))
    with torch.no_grad():
        y, h = hawk_torch.rglru(x, *params, reset=reset, h0=h0)
        state = h0
        for a, b in [(0, 1), (1, 64), (64, 101), (101, L)]:
            y_piece, state = hawk_torch.rglru(x[:, a:b].contiguous(), *params, reset=reset[:, a:b].contiguous(),
                                              h0=state)
            assert torch.equal(y_piece, y[:, a:b]), f"piece [{a}, {b}) differs"
        assert torch.equal(state, h)

        # decoding one token at a time from a state pool, rows 4 and 1 of 6
        pool = uniform((6, W))
        slots = torch.tensor([4, 1], dtype=torch.int32, device="cuda")
        pool[slots.long()] = h0
        untouched = pool[[0, 2, 3, 5]].clone()
        for t in range(L):
            y_t = hawk_torch.rglru_decode_(x[:, t:t + 1].contiguous(), *params, state=pool, state_index=slots,
                                           reset=reset[:, t:t + 1].contiguous())
            assert torch.equal(y_t, y[:, t:t + 1]), f"decode step {t} differs"
        assert torch.equal(pool[slots.long()], h)
        assert torch.equal(pool[[0, 2, 3, 5]], untouched)

        # negative control: a state one fp32 ulp away gives other bits of the (fp32) final state
        nudged = torch.nextafter(h0, torch.full_like(h0, 2.0))
        _, h_nudged = hawk_torch.rglru(x[:, :8].contiguous(), *params, reset="none", h0=nudged)
        _, h_plain = hawk_torch.rglru(x[:, :8].contiguous(), *params, reset="none", h0=h0)
        assert not torch.equal(h_nudged, h_plain)


@pytest.mark.parametrize("length", [1, 3], ids=["one token", "three tokens"])
@pytest.mark.parametrize("pool_rows, slots", [(6, [4, -1, 1]), (2, [-1, 1, -1, 0])],
                         ids=["a spare pool", "fewer rows than sequences"])
def test_decode_padding_slots_touch_no_pool_row(pool_rows, slots, length, seed):
    """state_index -1 marks a padding sequence: no pool row is read or written for it, and the other sequences
    get bitwise the y and states of a call without it. The padded sequences' rows of y are unspecified."""
    W, H, dtype = 128, 2, torch.bfloat16
    params = fused_parameters(W, H)
    n = len(slots)
    x = uniform((n, length, W), dtype)
    pool = uniform((pool_rows, W))
    original = pool.clone()
    real = [i for i, slot in enumerate(slots) if slot >= 0]
    with torch.no_grad():
        y = hawk_torch.rglru_decode_(x, *params, state=pool,
                                     state_index=torch.tensor(slots, dtype=torch.int32, device="cuda"))
        expected = original.clone()
        y_real = hawk_torch.rglru_decode_(x[real].contiguous(), *params, state=expected,
                                          state_index=torch.tensor([slots[i] for i in real], dtype=torch.int32,
                                                                   device="cuda"))
    hawk_torch.check_device_errors()  # -1 is no error
    assert torch.equal(pool, expected)
    assert torch.equal(y[real], y_real)
    used = {slots[i] for i in real}
    unused = [r for r in range(pool_rows) if r not in used]
    if unused:
        assert torch.equal(pool[unused], original[unused])
    assert not torch.equal(pool[sorted(used)], original[sorted(used)])  # negative control: the real rows moved


def test_all_gradients_are_bitwise_repeatable(seed):
    B, L, W, H, dtype = 4, 300, 256, 2, torch.bfloat16
    master = fused_parameters(W, H)
    x, dy = uniform((B, L, W), dtype), uniform((B, L, W), dtype)

    def grads(dy):
        params = [_leaf(p) for p in master]
        xl = _leaf(x)
        y, _ = hawk_torch.rglru(xl, *params)
        (y.float() * dy.float()).sum().backward()
        return [xl.grad] + [p.grad for p in params]

    first, second = grads(dy), grads(dy)
    for i, (a, b) in enumerate(zip(first, second)):
        assert torch.equal(a, b), f"gradient {i} differs between two runs"
    other = grads(dy * -1)  # negative control
    assert not torch.equal(first[1], other[1])
