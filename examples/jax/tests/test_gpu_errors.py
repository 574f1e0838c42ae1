"""Bad input on the GPU becomes a Python exception naming the argument: device-side checks of cu_seqlens,
state_index and idx (the call waits for their verdict and writes nothing), and the FFI handlers' own checks for
callers that bypass hawk_jax's Python checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hawk_jax
from gpu_support import assert_bitwise_equal, random_rglru
from hawk_jax import _library

pytestmark = pytest.mark.gpu


def _weights(width=256, heads=2):
    _, params, _, _ = random_rglru(1, 1, 1, width, heads, jnp.bfloat16)
    w = hawk_jax.rglru_arguments(params)
    return (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])


def _raises(message, thunk):
    """The error may come from the call or from waiting for its result: both count."""
    with pytest.raises(RuntimeError, match=message):
        jax.block_until_ready(thunk())


@pytest.mark.parametrize("offsets, message", [
    ([1, 4, 10], "cu_seqlens\\[0\\] must be 0"),
    ([0, 6, 4, 10], "cu_seqlens must not decrease"),
    ([0, 4, 9], "cu_seqlens\\[N\\] must equal num_tokens"),
])
def test_bad_cu_seqlens_raise(offsets, message):
    x = jnp.ones((10, 256), jnp.bfloat16)
    cu = jnp.asarray(offsets, jnp.int32)
    _raises(message, lambda: hawk_jax.rglru(x, *_weights(), cu_seqlens=cu))
    grad = jax.grad(lambda x: jnp.sum(hawk_jax.rglru(x, *_weights(), cu_seqlens=cu)[0].astype(jnp.float32)))
    _raises(message, lambda: grad(x))


def test_bad_cu_seqlens_without_validation_do_not_crash():
    x = jnp.ones((10, 256), jnp.bfloat16)
    cu = jnp.asarray([0, 60, 4, 1000], jnp.int32)
    y, h = hawk_jax.rglru(x, *_weights(), cu_seqlens=cu, validate=False)
    jax.block_until_ready((y, h))  # unspecified values, but no fault and no exception


@pytest.mark.parametrize("slots, message", [
    ([0, 3, 3], "names the same state row for two sequences"),
    ([0, 5, 1], "state_index holds a row outside"),
    ([0, -2, 1], "state_index holds a row outside"),
])
def test_bad_state_index_raises_and_writes_nothing(slots, message):
    x = jnp.ones((3, 1, 256), jnp.bfloat16)
    pool = jax.random.normal(jax.random.PRNGKey(0), (5, 256), jnp.float32)
    before = np.asarray(pool)
    index = jnp.asarray(slots, jnp.int32)
    # Not donated: the pool the caller holds must be unchanged whatever happens.
    _raises(message, lambda: hawk_jax.rglru_decode(x, *_weights(), state=pool, state_index=index))
    assert_bitwise_equal(pool, before, "the pool after a refused decode")


def test_gate_residual_idx_out_of_range_raises():
    residual = jnp.ones((8, 64), jnp.float32)
    gate = jnp.ones((3, 64), jnp.float32)
    idx = jnp.asarray([0, 1, 2, 3, 0, 1, 2, 0], jnp.int32)
    _raises("idx holds a value outside", lambda: hawk_jax.gate_residual(residual, residual, gate, idx))
    grad = jax.grad(lambda g: jnp.sum(hawk_jax.gate_residual(residual, residual, g, idx)))
    _raises("idx holds a value outside", lambda: grad(gate))


def test_gate_residual_false_layout_claim_raises():
    residual = jnp.ones((8, 64), jnp.float32)
    gate = jnp.ones((4, 64), jnp.float32)
    idx = jnp.asarray([0, 0, 1, 1, 2, 2, 3, 3], jnp.int32)
    _raises("kUniform", lambda: hawk_jax.gate_residual(residual, residual, gate, idx, layout="uniform",
                                                         rows_per_group=4))
    scattered = jnp.asarray([0, 1, 0, 1, 2, 2, 3, 3], jnp.int32)
    _raises("kContiguousSegments", lambda: hawk_jax.gate_residual(residual, residual, gate, scattered,
                                                                     layout="contiguous"))


# ---- the handlers' own checks (callers of the FFI targets that skip hawk_jax's Python) ------------------------------


def _forward_target(x, a_param, workspace_bytes=0, h_final_rows=None):
    _library.library()
    n, width = x.shape[0], x.shape[-1]
    out = (jax.ShapeDtypeStruct(x.shape, x.dtype),
           jax.ShapeDtypeStruct((n if h_final_rows is None else h_final_rows, width), jnp.float32),
           jax.ShapeDtypeStruct((0, width), jnp.float32), jax.ShapeDtypeStruct((workspace_bytes,), jnp.uint8))
    empty = lambda dtype: jnp.zeros((0,), dtype)  # noqa: E731
    return jax.ffi.ffi_call("hawk_rglru_forward", out)(
        x, empty(x.dtype), empty(jnp.float32), empty(x.dtype), empty(jnp.float32), x, x, a_param,
        empty(jnp.uint8), empty(jnp.float32), empty(jnp.int32), fused=np.bool_(False), reset_mode=np.int64(1),
        validate=np.bool_(True))


def test_handler_names_a_misshapen_argument():
    x = jnp.ones((2, 5, 64), jnp.float32)
    _raises("hawk_rglru_forward: a_param must have shape \\[64\\]", lambda: _forward_target(x, jnp.ones(32)))
    _raises("hawk_rglru_forward: a_param must be float32", lambda: _forward_target(x, jnp.ones(64, jnp.bfloat16)))
    _raises("hawk_rglru_forward: h_final must have shape \\[2, 64\\]",
            lambda: _forward_target(x, jnp.ones(64), h_final_rows=3))


def test_handler_refuses_a_small_workspace():
    x = jnp.ones((6, 256), jnp.bfloat16)
    cu = jnp.asarray([0, 2, 6], jnp.int32)
    _library.library()
    out = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((2, 256), jnp.float32),
           jax.ShapeDtypeStruct((0, 256), jnp.float32), jax.ShapeDtypeStruct((8,), jnp.uint8))
    a_param, w_x, b_x, w_a, b_a = _weights()
    empty = lambda dtype: jnp.zeros((0,), dtype)  # noqa: E731
    call = jax.ffi.ffi_call("hawk_rglru_forward", out)
    _raises("workspace output holds 8 bytes", lambda: call(
        x, w_x.astype(x.dtype), b_x, w_a.astype(x.dtype), b_a, empty(x.dtype), empty(x.dtype), a_param,
        empty(jnp.uint8), empty(jnp.float32), cu, fused=np.bool_(True), reset_mode=np.int64(1),
        validate=np.bool_(True)))


def test_gate_residual_bad_idx_without_validation_does_not_crash():
    residual = jnp.ones((8, 64), jnp.float32)
    gate = jnp.ones((3, 64), jnp.float32)
    idx = jnp.asarray([0, 1, 2, 7, -5, 1, 2, 0], jnp.int32)
    out = hawk_jax.gate_residual(residual, residual, gate, idx, validate=False)
    jax.block_until_ready(out)  # rows with a bad idx are unspecified; the others are computed
    good = np.array([0, 1, 2, 5, 6, 7])
    np.testing.assert_array_equal(np.asarray(out)[good], np.full((6, 64), 2.0, np.float32))
