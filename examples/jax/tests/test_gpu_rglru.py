"""The RG-LRU kernels through JAX on a GPU: float64 references, recurrentgemma's own layer, bitwise determinism,
batch and split invariance, packed batches, decode against a state pool, jit / grad / vmap."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import griffin_support
import hawk_jax
import reference64 as ref
from gpu_support import (as64, assert_bitwise_equal, assert_close_to_reference, assert_gradient_close, cotangents,
                         random_rglru, reference_fused, weights64)

pytestmark = pytest.mark.gpu

DTYPES = [jnp.float32, jnp.bfloat16]


def _call(params, x, pos, h0, **kwargs):
    w = hawk_jax.rglru_arguments(params)
    return hawk_jax.rglru(x, w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"], segment_pos=pos, h0=h0, **kwargs)


# ---- against the float64 reference ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + [jnp.float16])
@pytest.mark.parametrize("heads, width", [(4, 256), (2, 256), (1, 256)])  # w = 64, 128, 256
@pytest.mark.parametrize("with_h0", [True, False])
def test_fused_forward_matches_reference(dtype, heads, width, with_h0):
    x, params, pos, h0 = random_rglru(1, 3, 150, width, heads, dtype, with_h0=with_h0)
    y, h_final = jax.jit(_call)(params, x, pos, h0)
    y_ref, h_ref = reference_fused(x, params, pos, h0)
    assert y.dtype == jnp.dtype(dtype) and h_final.dtype == jnp.dtype(jnp.float32)
    assert_close_to_reference(y, y_ref, dtype, "y")
    # h_final is fp32 whatever x's dtype: the reference runs on the kernel's own (rounded) inputs.
    assert_close_to_reference(h_final, h_ref, jnp.float32, "h_final")


@pytest.mark.parametrize("dtype", DTYPES)
def test_gate_logits_forward_and_backward_match_reference(dtype):
    rng = np.random.default_rng(2)
    batch, length, width = 2, 130, 96
    x, g_x, g_a = (jnp.asarray(rng.normal(size=(batch, length, width)), dtype) for _ in range(3))
    a_param = jnp.asarray(rng.normal(size=width) * 0.5 + 1.0, jnp.float32)
    reset = jnp.asarray(rng.random((batch, length)) < 0.05)
    h0 = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)

    def f(x, g_x, g_a, a_param, h0):
        return hawk_jax.rglru(x, a_param, g_x=g_x, g_a=g_a, reset=reset, h0=h0)

    (y, h_final), vjp = jax.vjp(jax.jit(f), x, g_x, g_a, a_param, h0)
    y_ref, h_ref, _, _ = ref.rglru_forward(as64(x), as64(g_x), as64(g_a), as64(a_param), np.asarray(reset), as64(h0))
    assert_close_to_reference(y, y_ref, dtype, "y")
    dy, dh = cotangents(3, y.shape, dtype, h_final.shape)
    dx, dg_x, dg_a, da_param, dh0 = vjp((dy, dh))
    grads = ref.rglru_backward(as64(x), as64(g_x), as64(g_a), as64(a_param), np.asarray(reset), as64(h0), as64(dy),
                               as64(dh))
    for name, value in (("dx", dx), ("dg_x", dg_x), ("dg_a", dg_a), ("da_param", da_param), ("dh0", dh0)):
        assert_gradient_close(value, grads[name], dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [2, 1])  # w = 128, 256
def test_fused_backward_matches_reference(dtype, heads):
    x, params, pos, h0 = random_rglru(4, 2, 200, 256, heads, dtype)

    def f(params, x, h0):
        return _call(params, x, pos, h0)

    (y, h_final), vjp = jax.vjp(jax.jit(f), params, x, h0)
    dy, dh = cotangents(5, y.shape, dtype, h_final.shape)
    d_params, dx, dh0 = vjp((dy, dh))
    _, _, grads = reference_fused(x, params, pos, h0, dy, dh)
    assert dx.dtype == jnp.dtype(dtype)
    assert all(leaf.dtype == jnp.dtype(jnp.float32) for leaf in jax.tree_util.tree_leaves(d_params))
    pairs = {"dx": dx, "dh0": dh0, "da_param": d_params["a_param"], "dw_x": d_params["input_gate"]["w"],
             "db_x": d_params["input_gate"]["b"], "dw_a": d_params["a_gate"]["w"], "db_a": d_params["a_gate"]["b"]}
    for name, value in pairs.items():
        assert_gradient_close(value, grads[name], dtype, name)


def test_packed_batch_equals_its_sequences_bitwise():
    x, params, _, _ = random_rglru(6, 1, 300, 256, 2, jnp.bfloat16, with_h0=False)
    lengths = [1, 64, 100, 135]  # chunk-aligned and not, a single token
    cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]), jnp.int32)
    packed = x[0]
    w = hawk_jax.rglru_arguments(params)
    args = (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])

    def loss(packed, *args):
        y, h = hawk_jax.rglru(packed, *args, cu_seqlens=cu)
        return jnp.sum(y.astype(jnp.float32) * jnp.cos(packed.astype(jnp.float32))) + jnp.sum(h), (y, h)

    (_, (y, h)), (d_packed,) = jax.value_and_grad(loss, has_aux=True, argnums=(0,))(packed, *args)
    for n, length in enumerate(lengths):
        start = int(cu[n])
        piece = packed[None, start:start + length]
        (_, (yn, hn)), (dn,) = jax.value_and_grad(
            lambda p, *a: loss_dense(p, *a), has_aux=True, argnums=(0,))(piece, *args)
        assert_bitwise_equal(y[start:start + length], yn[0], f"y of sequence {n}")
        assert_bitwise_equal(h[n], hn[0], f"h_final of sequence {n}")
        assert_bitwise_equal(d_packed[start:start + length], dn[0], f"dx of sequence {n}")


def loss_dense(x, *args):
    y, h = hawk_jax.rglru(x, *args)
    return jnp.sum(y.astype(jnp.float32) * jnp.cos(x.astype(jnp.float32))) + jnp.sum(h), (y, h)


# ---- recurrentgemma's own layer ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_module_matches_recurrentgemma(dtype):
    layers = pytest.importorskip("recurrentgemma.jax.layers")
    width, heads = 512, 2
    x, params, pos, h0 = random_rglru(7, 2, 256, width, heads, jnp.float32)
    x = x.astype(dtype)
    theirs = layers.RGLRU(width=width, num_heads=heads, dtype=dtype)
    ours = hawk_jax.RGLRU(width=width, num_heads=heads, dtype=dtype)

    def loss(module):
        def f(p, x, c):
            y, last_h = module.apply({"params": p}, x, pos, c)
            return jnp.sum(y.astype(jnp.float32) ** 2) + jnp.sum(last_h), (y, last_h)
        return jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))

    (_, (y1, h1)), g1 = loss(ours)(params, x, h0)
    with jax.default_matmul_precision("highest"):  # fp32 projections in fp32, not TF32, on recurrentgemma's side
        (_, (y2, h2)), g2 = loss(theirs)(params, x, h0)
    assert y1.dtype == y2.dtype and h1.dtype == h2.dtype
    # recurrentgemma computes the gates in `dtype`, hawk in fp32: they agree to dtype's rounding.
    tolerance = 1e-4 if dtype == jnp.float32 else 4e-2
    scale = float(jnp.max(jnp.abs(y2.astype(jnp.float32))))
    np.testing.assert_allclose(as64(y1) / scale, as64(y2) / scale, atol=tolerance)
    np.testing.assert_allclose(as64(h1) / scale, as64(h2) / scale, atol=tolerance)
    gradient_tolerance = 1e-3 if dtype == jnp.float32 else 1e-1
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
        b64 = as64(b)
        scale = np.max(np.abs(b64)) + 1e-30
        np.testing.assert_allclose(as64(a) / scale, b64 / scale, atol=gradient_tolerance)


# ---- determinism and invariance (bitwise) ---------------------------------------------------------------------------


def _forward_and_gradients(params, x, pos, h0):
    def loss(params, x, h0):
        y, h = _call(params, x, pos, h0)
        return jnp.sum(y.astype(jnp.float32) * jnp.sin(x.astype(jnp.float32))) + jnp.sum(h * h), (y, h)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(params, x, h0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_run_to_run_bitwise_determinism(dtype):
    x, params, pos, h0 = random_rglru(8, 4, 333, 512, 2, dtype)
    first = _forward_and_gradients(params, x, pos, h0)
    for _ in range(3):
        again = _forward_and_gradients(params, x, pos, h0)
        for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(again)):
            assert_bitwise_equal(a, b, "repeated call")


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_invariance(dtype):
    x, params, pos, h0 = random_rglru(9, 6, 200, 256, 2, dtype)
    permutation = np.array([3, 0, 5, 1, 4, 2])
    (_, (y, h)), (_, dx, dh0) = _forward_and_gradients(params, x, pos, h0)
    (_, (yp, hp)), (_, dxp, dh0p) = _forward_and_gradients(params, x[permutation], pos[permutation], h0[permutation])
    for row in range(6):
        (_, (y1, h1)), (_, dx1, dh01) = _forward_and_gradients(params, x[row:row + 1], pos[row:row + 1],
                                                                 h0[row:row + 1])
        where = int(np.flatnonzero(permutation == row)[0])
        for batched, permuted, alone, name in ((y, yp, y1, "y"), (h, hp, h1, "h_final"), (dx, dxp, dx1, "dx"),
                                               (dh0, dh0p, dh01, "dh0")):
            assert_bitwise_equal(batched[row], alone[0], f"{name} of row {row} in the batch vs alone")
            assert_bitwise_equal(permuted[where], alone[0], f"{name} of row {row} permuted vs alone")


def test_capped_backward_workspace_gives_the_uncapped_bits():
    """One dense sequence of 2 * 1024 + 77 tokens in fused mode: under caps from the least workspace (time slices of
    1024 tokens) to the one pass, the gradients are the uncapped ones bit for bit and XLA's workspace output is the
    capped size; a cap below the least is refused when the gradient is traced."""
    from hawk_jax import _library, _ops

    length, width = 2 * 1024 + 77, 128
    x, params, pos, h0 = random_rglru(12, 1, length, width, 1, jnp.bfloat16)
    lib = _library.library()
    sizes = (1, length, width, 1, 1, 0, 1)  # (N, T, W, H, fused, packed, validate)
    one_pass = lib.hawk_jax_rglru_backward_workspace_bytes(*sizes)
    least = lib.hawk_jax_rglru_backward_least_workspace_bytes(*sizes)
    assert 0 < least < one_pass

    def step(limit, h0=h0):
        def loss(params, x, h0):
            y, h = _call(params, x, pos, h0, backward_workspace_limit=limit)
            return jnp.sum(y.astype(jnp.float32) * jnp.sin(x.astype(jnp.float32))) + jnp.sum(h * h)

        gradient = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
        workspace = re.findall(r"tensor<(\d+)xui8>", gradient.lower(params, x, h0).as_text())
        return gradient(params, x, h0), sorted(int(w) for w in workspace)

    uncapped, workspaces = step(None)
    assert one_pass + _ops.WORKSPACE_SLACK in workspaces
    for limit in (least, (least + one_pass) // 2, one_pass - 1, one_pass):
        capped, workspaces = step(limit)
        expected = lib.hawk_jax_rglru_backward_capped_workspace_bytes(*sizes, limit)
        assert least <= expected <= limit and expected + _ops.WORKSPACE_SLACK in workspaces
        assert all(w <= one_pass + _ops.WORKSPACE_SLACK for w in workspaces)
        for a, b in zip(jax.tree_util.tree_leaves(uncapped), jax.tree_util.tree_leaves(capped)):
            assert_bitwise_equal(a, b, f"gradient under a cap of {limit} bytes vs uncapped")
    # negative control: the comparison sees a change of the input state
    other, _ = step(least, h0 * 2)
    assert not np.array_equal(np.asarray(other[1]), np.asarray(uncapped[1]))
    with pytest.raises(ValueError, match=f"backward_workspace_limit={least - 1} bytes is below the least workspace"):
        step(least - 1)


@pytest.mark.parametrize("split", [1, 63, 64, 100])
def test_split_invariance(split):
    x, params, _, h0 = random_rglru(10, 2, 160, 256, 2, jnp.bfloat16)
    w = hawk_jax.rglru_arguments(params)
    args = (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])
    y, h = hawk_jax.rglru(x, *args, h0=h0)  # no resets: h0 continued
    y1, h1 = hawk_jax.rglru(x[:, :split], *args, h0=h0)
    y2, h2 = hawk_jax.rglru(x[:, split:], *args, h0=h1)
    assert_bitwise_equal(jnp.concatenate([y1, y2], axis=1), y, "y of the pieces")
    assert_bitwise_equal(h2, h, "final state of the pieces")


def test_token_by_token_decode_equals_prefill():
    x, params, _, h0 = random_rglru(11, 3, 40, 256, 1, jnp.bfloat16)
    w = hawk_jax.rglru_arguments(params)
    args = (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])
    y, h = hawk_jax.rglru(x, *args, h0=h0)
    step = jax.jit(lambda x, state: hawk_jax.rglru_decode(x, *args, state=state), donate_argnums=(1,))
    state = jnp.array(h0)
    ys = []
    for t in range(x.shape[1]):
        yt, state = step(x[:, t:t + 1], state)
        ys.append(yt)
    assert_bitwise_equal(jnp.concatenate(ys, axis=1), y, "decoded y")
    assert_bitwise_equal(state, h, "decoded state")


def test_decode_against_a_state_pool_with_padding():
    x, params, _, _ = random_rglru(12, 4, 1, 256, 2, jnp.bfloat16)
    w = hawk_jax.rglru_arguments(params)
    args = (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])
    pool = jax.random.normal(jax.random.PRNGKey(13), (10, 256), jnp.float32)
    slots = jnp.array([7, -1, 2, 4], jnp.int32)
    y, new_pool = jax.jit(lambda x, pool: hawk_jax.rglru_decode(x, *args, state=pool, state_index=slots))(x, pool)
    live = np.array([0, 2, 3])
    y_dense, h_dense = hawk_jax.rglru(x[live], *args, h0=pool[np.array([7, 2, 4])])
    assert_bitwise_equal(y[live], y_dense, "y of the live sequences")
    assert_bitwise_equal(new_pool[np.array([7, 2, 4])], h_dense, "advanced pool rows")
    untouched = np.array([0, 1, 3, 5, 6, 8, 9])
    assert_bitwise_equal(new_pool[untouched], pool[untouched], "rows no sequence names")
    assert not np.any(np.asarray(y[1].astype(jnp.float32))), "a padding sequence's y is zero"


# ---- transformations ----------------------------------------------------------------------------------------------


def test_vmap_over_a_leading_axis():
    x, params, pos, h0 = random_rglru(14, 2, 70, 256, 2, jnp.bfloat16)
    stacked = jnp.stack([x, x[::-1], x * 0.5])
    layer = lambda x: hawk_jax.rglru_layer(params, x, pos, h0)  # noqa: E731
    y, h = jax.jit(jax.vmap(layer))(stacked)
    for v in range(3):
        yv, hv = layer(stacked[v])
        assert_bitwise_equal(y[v], yv, f"vmapped y {v}")
        assert_bitwise_equal(h[v], hv, f"vmapped h {v}")


def test_grad_of_the_flax_module_under_jit():
    x, params, pos, h0 = random_rglru(15, 2, 64, 256, 1, jnp.float32)
    module = hawk_jax.RGLRU(width=256, num_heads=1)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(module.apply({"params": p}, x, pos, h0)[0] ** 2)))(params)
    assert jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) and bool(jnp.any(g != 0)) for g in jax.tree_util.tree_leaves(grads))


def test_non_shipped_block_width_runs_in_gate_logits_mode():
    x, params, pos, h0 = random_rglru(16, 2, 50, 256, 8, jnp.float32)  # w = 32: projected by XLA
    with jax.default_matmul_precision("highest"):  # XLA's fp32 projection in fp32, not TF32
        y, h = jax.jit(lambda p, x: hawk_jax.rglru_layer(p, x, pos, h0))(params, x)
    y_ref, h_ref = ref.rglru_forward_fused(as64(x), *weights64(params, jnp.float32)[:4],
                                           as64(params["a_param"]), ref.reset_from_segment_pos(pos), as64(h0))
    assert_close_to_reference(y, y_ref, jnp.float32, "y")
    assert_close_to_reference(h, h_ref, jnp.float32, "h_final")


def test_decode_reset_flag_starts_a_new_document():
    x, params, _, h0 = random_rglru(17, 3, 1, 256, 1, jnp.bfloat16)
    w = hawk_jax.rglru_arguments(params)
    args = (w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])
    pos = jnp.array([[5], [0], [9]], jnp.int32)  # sequence 1 starts a new document at this token
    y, state = hawk_jax.rglru_decode(x, *args, state=h0, segment_pos=pos)
    fresh_y, fresh_h = hawk_jax.rglru(x[1:2], *args)  # a sequence start: the state is dropped
    assert_bitwise_equal(y[1], fresh_y[0], "y at the reset")
    assert_bitwise_equal(state[1], fresh_h[0], "state after the reset")
    continued_y, continued_h = hawk_jax.rglru(x[0:1], *args, h0=h0[0:1])
    assert_bitwise_equal(y[0], continued_y[0], "y of a continued sequence")
    assert_bitwise_equal(state[0], continued_h[0], "state of a continued sequence")


def test_griffin_with_hawks_rglru(monkeypatch):
    """recurrentgemma's whole model with hawk_jax's RGLRU: the same logits and cache, prefill and a decode step."""
    with jax.default_matmul_precision("highest"):  # the rest of the model in fp32, not TF32, on both sides
        theirs, ours = griffin_support.griffin_outputs_both_ways(monkeypatch)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        scale = float(jnp.max(jnp.abs(b))) + 1e-12
        np.testing.assert_allclose(as64(a) / scale, as64(b) / scale, atol=1e-3)
