"""The gate-residual kernels through JAX on a GPU: float64 references, gradients, layouts, determinism, batch
invariance of the row results."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hawk_jax
import reference64 as ref
from gpu_support import as64, assert_bitwise_equal, assert_close_to_reference, assert_gradient_close

pytestmark = pytest.mark.gpu


def _problem(seed, rows, dim, groups, dtype, gate_dtype):
    rng = np.random.default_rng(seed)
    residual = jnp.asarray(rng.normal(size=(rows, dim)), dtype)
    y = jnp.asarray(rng.normal(size=(rows, dim)), dtype)
    gate = jnp.asarray(rng.normal(size=(groups, dim)), gate_dtype)
    # int32: JAX makes int64 arrays only with jax_enable_x64 (the handler takes both)
    idx = jnp.asarray(rng.integers(0, groups, size=rows), jnp.int32)
    return residual, y, gate, idx


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("gate_dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("dim", [1152, 3072, 100])  # 100: no 16-byte vector path
def test_forward_and_backward_match_reference(dtype, gate_dtype, dim):
    residual, y, gate, idx = _problem(1, 300, dim, 7, dtype, gate_dtype)
    out, vjp = jax.vjp(jax.jit(lambda r, y, g: hawk_jax.gate_residual(r, y, g, idx)), residual, y, gate)
    assert out.dtype == jnp.dtype(dtype)
    assert_close_to_reference(out, ref.gate_residual_forward(as64(residual), as64(y), as64(gate), np.asarray(idx)),
                              dtype, "out")
    dout = jax.random.normal(jax.random.PRNGKey(2), out.shape, jnp.float32).astype(dtype)
    dres, dy, dgate = vjp(dout)
    dy_ref, dgate_ref = ref.gate_residual_backward(as64(dout), as64(y), as64(gate), np.asarray(idx))
    assert_bitwise_equal(dres, dout, "d residual is d out")
    assert dgate.dtype == jnp.dtype(gate_dtype)
    assert_close_to_reference(dy, dy_ref, dtype, "dy")
    # d gate: fp32 sums rounded once to gate's dtype.
    assert_gradient_close(dgate, dgate_ref, jnp.float32 if gate_dtype == jnp.float32 else jnp.bfloat16, "dgate")


def test_every_layout_gives_the_same_bits():
    residual, y, gate, _ = _problem(3, 256, 1152, 8, jnp.bfloat16, jnp.float32)
    idx = jnp.arange(256, dtype=jnp.int32) // 32  # uniform, contiguous and arbitrary all at once
    results = {}
    for layout, extra in (("arbitrary", {}), ("uniform", {"rows_per_group": 32}), ("contiguous", {})):
        f = jax.jit(jax.value_and_grad(
            lambda r, y, g: jnp.sum(hawk_jax.gate_residual(r, y, g, idx, layout=layout, **extra).astype(jnp.float32)
                                    * jnp.cos(r.astype(jnp.float32))), argnums=(0, 1, 2)))
        results[layout] = f(residual, y, gate)
    for layout in ("uniform", "contiguous"):
        for a, b in zip(jax.tree_util.tree_leaves(results[layout]), jax.tree_util.tree_leaves(results["arbitrary"])):
            assert_bitwise_equal(a, b, f"{layout} vs arbitrary")


def test_bitwise_determinism_and_row_invariance():
    residual, y, gate, idx = _problem(4, 513, 2048, 5, jnp.bfloat16, jnp.bfloat16)
    f = jax.jit(lambda r, y, g, i: hawk_jax.gate_residual(r, y, g, i))
    out = f(residual, y, gate, idx)
    assert_bitwise_equal(f(residual, y, gate, idx), out, "repeated forward")
    # A row's result does not depend on the rows around it.
    assert_bitwise_equal(f(residual[100:101], y[100:101], gate, idx[100:101])[0], out[100], "row 100 alone")
    grad = jax.jit(jax.grad(lambda g: jnp.sum(hawk_jax.gate_residual(residual, y, g, idx).astype(jnp.float32))))
    assert_bitwise_equal(grad(gate), grad(gate), "repeated d gate")


def test_leading_dimensions_and_vmap():
    residual, y, gate, _ = _problem(5, 24, 64, 3, jnp.float32, jnp.float32)
    idx = jnp.asarray(np.random.default_rng(6).integers(0, 3, size=24), jnp.int32)
    out = hawk_jax.gate_residual(residual.reshape(2, 12, 64), y.reshape(2, 12, 64), gate, idx)
    assert_bitwise_equal(out.reshape(24, 64), hawk_jax.gate_residual(residual, y, gate, idx), "[2, 12, D] vs [24, D]")
    stacked = jax.vmap(lambda r: hawk_jax.gate_residual(r, y, gate, idx))(jnp.stack([residual, -residual]))
    assert_bitwise_equal(stacked[1], hawk_jax.gate_residual(-residual, y, gate, idx), "vmapped")
