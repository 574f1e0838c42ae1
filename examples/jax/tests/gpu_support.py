"""Inputs and comparisons shared by the GPU tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import reference64 as ref

#: normalised tolerance (of the largest reference magnitude) per dtype, for gradients
GRADIENT_TOLERANCE = {jnp.dtype(jnp.float32): 2e-4, jnp.dtype(jnp.bfloat16): 2e-2, jnp.dtype(jnp.float16): 5e-3}


def as64(a) -> np.ndarray:
    return np.asarray(jnp.asarray(a).astype(jnp.float32), np.float64)


def bits(a) -> np.ndarray:
    """The bytes of an array, for bitwise comparisons (NaN included)."""
    # Flattened first: numpy refuses to view a 0-d array (a loss) as bytes of another size.
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)


def assert_bitwise_equal(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    assert np.array_equal(bits(a), bits(b)), f"{what}: not bitwise equal"


#: relative tolerance of results per dtype: two roundings of the dtype, plus what the fp32 gate math loses where
#: sqrt(1 - a²) cancels (a near 1 amplifies fp32's error in 1 - a² a few hundred times)
RESULT_TOLERANCE = {jnp.dtype(jnp.float32): 2e-4, jnp.dtype(jnp.float16): 2 * 2.0**-10 + 2e-4,
                    jnp.dtype(jnp.bfloat16): 2 * 2.0**-7 + 2e-4}


def assert_close_to_reference(value, reference, dtype, what=""):
    """Within RESULT_TOLERANCE of the float64 reference, element by element (relative, with a floor of 5% of the
    largest magnitude for values near zero)."""
    value = as64(value)
    rtol = RESULT_TOLERANCE[jnp.dtype(dtype)]
    tolerance = rtol * (np.abs(reference) + 0.05 * np.max(np.abs(reference)))
    error = np.abs(value - reference)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (f"{what}: |hawk - float64 reference| = {error[worst]:.3g} at {worst} "
                                        f"(reference {reference[worst]:.6g}) exceeds {tolerance[worst]:.3g}")


def assert_gradient_close(value, reference, dtype, what=""):
    """Normalised by the reference's largest magnitude: gradients sum many products (fp32 or tf32)."""
    value = as64(value).reshape(reference.shape)
    scale = np.max(np.abs(reference)) + 1e-30
    error = np.max(np.abs(value - reference)) / scale
    assert error <= GRADIENT_TOLERANCE[jnp.dtype(dtype)], f"{what}: normalised error {error:.3g}"


def random_rglru(seed, batch, length, width, heads, dtype, with_h0=True, reset_fraction=0.05):
    """x, recurrentgemma-style fp32 parameters, segment_pos (document starts at t = 0 and at random tokens; rows
    with h0 continue it until their first start), h0."""
    rng = np.random.default_rng(seed)
    block = width // heads
    x = jnp.asarray(rng.normal(size=(batch, length, width)), dtype)
    params = {"a_param": jnp.asarray(rng.normal(size=width) * 0.5 + 1.0, jnp.float32),
              "input_gate": {"w": jnp.asarray(rng.normal(size=(heads, block, block)) / np.sqrt(block), jnp.float32),
                             "b": jnp.asarray(rng.normal(size=(heads, block)) * 0.1, jnp.float32)},
              "a_gate": {"w": jnp.asarray(rng.normal(size=(heads, block, block)) / np.sqrt(block), jnp.float32),
                         "b": jnp.asarray(rng.normal(size=(heads, block)) * 0.1, jnp.float32)}}
    starts = rng.random((batch, length)) < reset_fraction
    if not with_h0:
        starts[:, 0] = True
    pos = np.zeros((batch, length), np.int32)
    for b in range(batch):
        count = 1  # a row without a start at t = 0 continues h0: its positions do not start at 0
        for t in range(length):
            count = 0 if starts[b, t] else count
            pos[b, t] = count
            count += 1
    h0 = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32) if with_h0 else None
    return x, params, jnp.asarray(pos), h0


def weights64(params, dtype):
    """The weights as the kernel sees them (w rounded to x's dtype), in float64."""
    return (as64(params["input_gate"]["w"].astype(dtype)), as64(params["input_gate"]["b"]),
            as64(params["a_gate"]["w"].astype(dtype)), as64(params["a_gate"]["b"]), as64(params["a_param"]))


def reference_fused(x, params, pos, h0, dy=None, dh_final=None):
    """float64 (y, h_final) and, with dy, the gradients of the fused RG-LRU on exactly the kernel's inputs."""
    w_x, b_x, w_a, b_a, a_param = weights64(params, x.dtype)
    reset = ref.reset_from_segment_pos(pos)
    h = None if h0 is None else as64(h0)
    y, h_final = ref.rglru_forward_fused(as64(x), w_x, b_x, w_a, b_a, a_param, reset, h)
    if dy is None:
        return y, h_final
    grads = ref.rglru_backward_fused(as64(x), w_x, b_x, w_a, b_a, a_param, reset, h, as64(dy),
                                     None if dh_final is None else as64(dh_final))
    return y, h_final, grads


def cotangents(seed, y_shape, y_dtype, h_shape):
    key = jax.random.split(jax.random.PRNGKey(seed), 2)
    return (jax.random.normal(key[0], y_shape, jnp.float32).astype(y_dtype),
            jax.random.normal(key[1], h_shape, jnp.float32))
