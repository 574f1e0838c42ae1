"""Bad input gives a clear Python error before anything reaches a kernel (shape, dtype, device, contiguity), and
what only the device can check (cu_seqlens, idx and its declared layout, state_index) comes back from the library
as a RuntimeError naming the argument, with nothing written: at once in sync mode, and in the default (deferred)
mode from hawk_torch.check_device_errors() or at the next hawk call, the faulting call having returned without a
host synchronisation. Also: an in-place output may not overlap an input, and a double backward is a clear error.
"""

from __future__ import annotations

import pytest
import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from support import fused_parameters, requires_cuda, uniform  # noqa: E402

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


# ---------------------------------------------------------------------------------------------------------------
# what only the device can check: sync mode raises at the call, deferred mode later; nothing is written
# ---------------------------------------------------------------------------------------------------------------


def _expect_device_error(mode, call, message):
    """``call()`` fails its device checks with an error matching ``message``: at once in sync mode; in deferred
    mode the call returns (no synchronisation) and hawk_torch.check_device_errors() raises. Either way the
    failure is reported once: raising clears the device's report word."""
    if mode == "sync":
        with pytest.raises(RuntimeError, match=message):
            call()
    else:
        call()
        with pytest.raises(RuntimeError, match=message) as caught:
            hawk_torch.check_device_errors()
        assert "asynchronous hawk call" in str(caught.value)
    hawk_torch.check_device_errors()


T = B * L

BAD_CU_SEQLENS = [
    ("first offset not 0", [1, 7, T], r"cu_seqlens\[0\] must be 0"),
    ("decreasing offsets", [0, 12, 7, T], "cu_seqlens must not decrease"),
    ("last offset short of T", [0, 7, T - 1], r"cu_seqlens\[N\] must equal num_tokens"),
    ("last offset past T", [0, 7, T + 5], r"cu_seqlens\[N\] must equal num_tokens"),
]


def _offsets(values):
    return torch.tensor(values, dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("case, offsets, message", BAD_CU_SEQLENS, ids=[c[0] for c in BAD_CU_SEQLENS])
def test_rglru_reports_bad_cu_seqlens(check_mode, case, offsets, message):
    args = _rglru_case(x=uniform((T, W), torch.bfloat16), cu_seqlens=_offsets(offsets))
    _expect_device_error(check_mode, lambda: hawk_torch.rglru(**args), message)


def test_rglru_backward_reports_bad_cu_seqlens(check_mode):
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    x, dy = uniform((T, W), torch.bfloat16), uniform((T, W), torch.bfloat16)
    _, _, checkpoints = torch.ops.hawk.rglru_forward(x, Wx, bx, Wa, ba, None, None, a_param, None, None,
                                                     _offsets([0, 7, T]), H, 1, True, True)
    bad = _offsets([0, 7, T - 1])
    _expect_device_error(
        check_mode,
        lambda: torch.ops.hawk.rglru_backward(x, Wx, bx, Wa, ba, None, None, a_param, None, None, bad, checkpoints,
                                              dy, None, H, 1, False, True),
        r"cu_seqlens\[N\] must equal num_tokens")


def test_decode_with_bad_cu_seqlens_leaves_the_pool_unchanged(check_mode):
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    pool = uniform((4, W))
    before = pool.clone()
    x = uniform((6, W), torch.bfloat16)  # two sequences packed, T = 6
    slots = torch.tensor([2, 0], dtype=torch.int32, device="cuda")
    _expect_device_error(
        check_mode,
        lambda: hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool, state_index=slots,
                                         cu_seqlens=_offsets([0, 4, 5])),
        r"cu_seqlens\[N\] must equal num_tokens")
    assert torch.equal(pool, before)


BAD_SLOTS = [
    ("a slot past the pool", [0, 4], r"state_index holds a row outside \[0, num_state_rows\)"),
    ("a negative slot other than -1", [-2, 1], r"state_index holds a row outside \[0, num_state_rows\)"),
    ("the same slot twice", [1, 1], "state_index names the same state row for two sequences"),
]


@pytest.mark.parametrize("case, slots, message", BAD_SLOTS, ids=[c[0] for c in BAD_SLOTS])
@pytest.mark.parametrize("length", [1, 3], ids=["one token", "three tokens"])
def test_decode_reports_bad_state_index_and_leaves_the_pool_unchanged(check_mode, case, slots, message, length):
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    pool = uniform((4, W))
    before = pool.clone()
    x = uniform((B, length, W), torch.bfloat16)
    state_index = torch.tensor(slots, dtype=torch.int32, device="cuda")
    _expect_device_error(
        check_mode,
        lambda: hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool, state_index=state_index),
        message)
    assert torch.equal(pool, before)


GATE_N, GATE_D, GATE_G, GROUP = 16, 64, 4, 4  # uniform layout: GROUP rows per gate row


def _index(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype, device="cuda")


BAD_IDX = [
    ("an index equal to G", lambda: _index([0] * 5 + [GATE_G] + [1] * 10), "arbitrary",
     r"idx holds a value outside \[0, num_gate_rows\)"),
    ("a negative int32 index", lambda: _index([0] * 3 + [-1] + [2] * 12, torch.int32), "arbitrary",
     r"idx holds a value outside \[0, num_gate_rows\)"),
    ("a false uniform layout", lambda: _index([r // GROUP for r in range(GATE_N)][::-1]), "uniform",
     "idx does not follow the declared layout kUniform"),
    ("a false contiguous layout", lambda: _index([r % GATE_G for r in range(GATE_N)]), "contiguous",
     "idx does not follow the declared layout kContiguousSegments"),
]
_LAYOUT_CODES = {"arbitrary": 0, "uniform": 1, "contiguous": 2}


@pytest.mark.parametrize("case, make_idx, layout, message", BAD_IDX, ids=[c[0] for c in BAD_IDX])
def test_gate_residual_forward_reports_bad_idx(check_mode, case, make_idx, layout, message):
    residual, y = uniform((GATE_N, GATE_D), torch.bfloat16), uniform((GATE_N, GATE_D), torch.bfloat16)
    gate, idx = uniform((GATE_G, GATE_D)), make_idx()
    _expect_device_error(
        check_mode,
        lambda: hawk_torch.gate_residual(residual, y, gate, idx, layout=layout, rows_per_group=GROUP),
        message)


@pytest.mark.parametrize("case, make_idx, layout, message", BAD_IDX, ids=[c[0] for c in BAD_IDX])
def test_gate_residual_backward_reports_bad_idx(check_mode, case, make_idx, layout, message):
    dout, y = uniform((GATE_N, GATE_D), torch.bfloat16), uniform((GATE_N, GATE_D), torch.bfloat16)
    gate, idx = uniform((GATE_G, GATE_D)), make_idx()
    rows_per_group = GROUP if layout == "uniform" else 0
    _expect_device_error(
        check_mode,
        lambda: torch.ops.hawk.gate_residual_backward(dout, y, gate, idx, _LAYOUT_CODES[layout], rows_per_group,
                                                      True),
        message)


def test_a_deferred_failure_is_raised_by_the_next_hawk_call():
    previous = hawk_torch.set_sync_checks(False)
    try:
        residual, y = uniform((GATE_N, GATE_D), torch.bfloat16), uniform((GATE_N, GATE_D), torch.bfloat16)
        gate = uniform((GATE_G, GATE_D))
        bad = torch.full((GATE_N,), GATE_G, dtype=torch.int64, device="cuda")
        args = _rglru_case()
        hawk_torch.gate_residual(residual, y, gate, bad)  # returns: its checks run later, on the stream
        torch.cuda.synchronize()  # now the verdict is in the report word; the next call reads it without a sync
        with pytest.raises(RuntimeError, match=r"earlier asynchronous hawk call on cuda:\d+ failed its device "
                                               r"checks: device check failed: idx holds a value outside"):
            hawk_torch.rglru(**args)  # another operator on the same device: it raises instead of running
        hawk_torch.rglru(**args)  # raising cleared the word: this one runs
        hawk_torch.check_device_errors(args["x"].device)

        # without synchronising, check_device_errors sees the verdicts the device has published
        hawk_torch.gate_residual(residual, y, gate, bad)
        torch.cuda.synchronize()
        with pytest.raises(RuntimeError, match="idx holds a value outside"):
            hawk_torch.check_device_errors("cuda", synchronize=False)
        hawk_torch.check_device_errors()
    finally:
        hawk_torch.set_sync_checks(previous)


def test_sync_mode_switch():
    previous = hawk_torch.set_sync_checks(True)
    try:
        assert hawk_torch.sync_checks_enabled()
        assert hawk_torch.set_sync_checks(False) is True
        assert not hawk_torch.sync_checks_enabled()
    finally:
        hawk_torch.set_sync_checks(previous)


def test_without_validation_nothing_is_checked_or_reported(check_mode):
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    pool = uniform((4, W))
    before = pool.clone()
    x = uniform((B, 1, W), torch.bfloat16)
    slots = torch.tensor([0, 4], dtype=torch.int32, device="cuda")  # sequence 1's slot is outside the pool
    hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool, state_index=slots, validate=False)
    hawk_torch.check_device_errors()  # nothing was checked, so nothing is reported
    assert torch.equal(pool[1:], before[1:])  # the out-of-range sequence was skipped; only row 0 was written


# ---------------------------------------------------------------------------------------------------------------
# overlap of the in-place output with an input
# ---------------------------------------------------------------------------------------------------------------


def test_decode_state_may_not_overlap_an_input():
    a_param, Wx, bx, Wa, ba = fused_parameters(W, H)
    pool = uniform((4, W))
    before = pool.clone()
    x = uniform((B, 1, W))  # fp32, so that a view of the pool can stand in for it
    slots = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    cases = {
        "x": lambda: hawk_torch.rglru_decode_(pool[2:4].view(B, 1, W), a_param, Wx, bx, Wa, ba, state=pool,
                                              state_index=slots),
        "a_param": lambda: hawk_torch.rglru_decode_(x, pool[3], Wx, bx, Wa, ba, state=pool, state_index=slots),
        "bx": lambda: hawk_torch.rglru_decode_(x, a_param, Wx, pool[3].view(H, W // H), Wa, ba, state=pool,
                                               state_index=slots),
        "state_index": lambda: hawk_torch.rglru_decode_(x, a_param, Wx, bx, Wa, ba, state=pool,
                                                        state_index=pool.view(torch.int32)[3, :B]),
    }
    for name, call in cases.items():
        with pytest.raises(ValueError, match=rf"state \(written in place\) shares memory with {name};"):
            call()
        assert torch.equal(pool, before), name


# ---------------------------------------------------------------------------------------------------------------
# double backward: a clear error, never silently missing terms
# ---------------------------------------------------------------------------------------------------------------


def test_double_backward_through_rglru_is_a_clear_error(seed):
    master = fused_parameters(W, H)
    x, dy = uniform((B, L, W)), uniform((B, L, W))

    def first_order(create_graph):
        params = [p.detach().clone().requires_grad_(True) for p in master]
        xl = x.clone().requires_grad_(True)
        y, h = hawk_torch.rglru(xl, *params)
        grads = torch.autograd.grad((y * dy).sum() + h.sum(), [xl, *params], create_graph=create_graph)
        return [xl, *params], grads

    leaves, grads = first_order(create_graph=True)
    assert all(g.requires_grad for g in grads)
    for g in grads:
        with pytest.raises(RuntimeError, match="hawk_torch: double backward through hawk_torch.rglru is not "
                                               "supported"):
            torch.autograd.grad(g.sum(), leaves, retain_graph=True, allow_unused=True)
    # create_graph=True does not change the first-order bits
    _, plain = first_order(create_graph=False)
    for a, b in zip(grads, plain):
        assert torch.equal(a.detach(), b)


def test_double_backward_through_gate_residual_is_a_clear_error(seed):
    residual = uniform((GATE_N, GATE_D)).requires_grad_(True)
    y = uniform((GATE_N, GATE_D)).requires_grad_(True)
    gate = uniform((GATE_G, GATE_D)).requires_grad_(True)
    idx = torch.randint(0, GATE_G, (GATE_N,), device="cuda")
    dout = uniform((GATE_N, GATE_D))
    out = hawk_torch.gate_residual(residual, y, gate, idx)
    dy, dgate = torch.autograd.grad((out * dout).sum(), (y, gate), create_graph=True)
    for first, wrt in ((dgate, y), (dy, gate)):
        with pytest.raises(RuntimeError, match="hawk_torch: double backward through hawk_torch.gate_residual is "
                                               "not supported"):
            torch.autograd.grad(first.sum(), wrt, retain_graph=True)
