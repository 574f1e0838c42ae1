"""What runs without a GPU (CI): version, argument checks, parameter trees, the float64 references against finite
differences and against recurrentgemma's own JAX layer, and the whole Python layer over fake kernels."""

from __future__ import annotations

import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import griffin_support
import hawk_jax
import reference64 as ref
from hawk_jax import _checks, _library

pytestmark = pytest.mark.cpu


@pytest.fixture(autouse=True)
def on_the_cpu():
    """The comparisons here are on the CPU even where a GPU is visible (the whole suite runs on the GPU machine
    too): XLA's GPU matmuls may round fp32 through TF32, which the tolerances below do not allow for."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield

REPO = pathlib.Path(__file__).resolve().parents[3]


def _recurrentgemma_layers():
    """recurrentgemma's JAX layers module, or a clean skip (an optional test dependency)."""
    pytest.importorskip("flax")
    return pytest.importorskip("recurrentgemma.jax.layers")


def _random_params(key, width, heads, dtype=jnp.float32, scale=1.0):
    block = width // heads
    k = jax.random.split(key, 5)
    return {"a_param": (jax.random.normal(k[0], (width,)) * 0.5 + 1.0).astype(dtype),
            "input_gate": {"w": (jax.random.normal(k[1], (heads, block, block)) * scale / np.sqrt(block)).astype(dtype),
                           "b": (jax.random.normal(k[2], (heads, block)) * 0.1).astype(dtype)},
            "a_gate": {"w": (jax.random.normal(k[3], (heads, block, block)) * scale / np.sqrt(block)).astype(dtype),
                       "b": (jax.random.normal(k[4], (heads, block)) * 0.1).astype(dtype)}}


# ---- packaging --------------------------------------------------------------------------------------------------


def test_version_is_hawks():
    text = (REPO / "CMakeLists.txt").read_text()
    match = re.search(r"project\(hawk VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text)
    assert match, "no project(hawk VERSION ...) in the top-level CMakeLists.txt"
    assert hawk_jax.__version__ == match.group(1)


def test_missing_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(_library, "candidate_paths", lambda: [tmp_path / _library.LIBRARY_NAME])
    monkeypatch.setattr(_library, "_library", None)
    x = jnp.zeros((1, 4, 64), jnp.float32)
    params = _random_params(jax.random.PRNGKey(0), 64, 1)
    with pytest.raises(_library.LibraryNotFoundError, match="is not built"):
        hawk_jax.rglru_layer(params, x, jnp.zeros((1, 4), jnp.int32))


def test_checkpoint_rows_formula():
    # hawk::rglru::checkpoint_rows: the chunks of all sequences, one extra row per sequence for its partial chunk.
    assert _checks.checkpoint_rows(2 * 1024, 2, 64) == 34
    assert _checks.checkpoint_rows(100, 3, 64) == 4
    assert _checks.checkpoint_rows(1, 1, 64) == 1


# ---- argument checks (Python, at trace time) ---------------------------------------------------------------------


def _weights(width=128, heads=2, dtype=jnp.float32):
    params = _random_params(jax.random.PRNGKey(1), width, heads, dtype)
    return hawk_jax.rglru_arguments(params)


RGLRU_BAD_CALLS = [
    ("x must be \\[B, L, W\\]", lambda w: dict(x=jnp.zeros((4, 128)))),
    ("x must be float32, float16 or bfloat16", lambda w: dict(x=jnp.zeros((1, 4, 128), jnp.int32))),
    ("multiple of 8", lambda w: dict(x=jnp.zeros((1, 4, 12), jnp.bfloat16), w_x=None, b_x=None, w_a=None, b_a=None,
                                     a_param=jnp.zeros(12), g_x=jnp.zeros((1, 4, 12), jnp.bfloat16),
                                     g_a=jnp.zeros((1, 4, 12), jnp.bfloat16))),
    ("either w_x, b_x, w_a, b_a .* or g_x, g_a", lambda w: dict(g_x=jnp.zeros((1, 4, 128)), g_a=jnp.zeros((1, 4, 128)))),
    ("b_a is missing", lambda w: dict(b_a=None)),
    ("H \\* w = 192 != W = 128", lambda w: dict(w_x=jnp.zeros((3, 64, 64)), w_a=jnp.zeros((3, 64, 64)))),
    ("block width w = W / H = 32 has no shipped fused configuration",
     lambda w: dict(w_x=jnp.zeros((4, 32, 32)), w_a=jnp.zeros((4, 32, 32)), b_x=jnp.zeros((4, 32)),
                    b_a=jnp.zeros((4, 32)))),
    ("a_param must have shape \\[128\\]", lambda w: dict(a_param=jnp.zeros(64))),
    ("h0 must have shape \\[1, 128\\]", lambda w: dict(h0=jnp.zeros((2, 128)))),
    ("segment_pos must have shape \\[1, 4\\]", lambda w: dict(segment_pos=jnp.zeros((1, 5), jnp.int32))),
    ("segment_pos must be an integer array", lambda w: dict(segment_pos=jnp.zeros((1, 4), jnp.float32))),
    ("reset must be bool or uint8", lambda w: dict(reset=jnp.zeros((1, 4), jnp.float32))),
    ("reset or segment_pos, not both", lambda w: dict(reset=jnp.zeros((1, 4), bool),
                                                      segment_pos=jnp.zeros((1, 4), jnp.int32))),
    ("cu_seqlens must be int32", lambda w: dict(x=jnp.zeros((8, 128)), cu_seqlens=jnp.zeros(3, jnp.uint32))),
    ("backward_workspace_limit must be None or a non-negative int .*got -1",
     lambda w: dict(backward_workspace_limit=-1)),
    ("backward_workspace_limit must be None or a non-negative int .*got True",
     lambda w: dict(backward_workspace_limit=True)),
    ("backward_workspace_limit must be None or a non-negative int .*got 1.5",
     lambda w: dict(backward_workspace_limit=1.5)),
    ("backward_workspace_limit must be None or a non-negative int .*below 2\\*\\*63, got 9223372036854775808",
     lambda w: dict(backward_workspace_limit=2**63)),
    ("cu_seqlens must be \\[N \\+ 1\\] with N >= 1", lambda w: dict(x=jnp.zeros((8, 128)),
                                                                   cu_seqlens=jnp.zeros(1, jnp.int32))),
]


@pytest.mark.parametrize("message, change", RGLRU_BAD_CALLS, ids=[m for m, _ in RGLRU_BAD_CALLS])
def test_rglru_argument_errors(message, change):
    w = _weights()
    args = dict(x=jnp.zeros((1, 4, 128)), a_param=w["a_param"], w_x=w["w_x"], b_x=w["b_x"], w_a=w["w_a"],
                b_a=w["b_a"])
    args.update(change(w))
    with pytest.raises((ValueError, TypeError), match=f"hawk_jax.rglru: .*{message}"):
        hawk_jax.rglru(**args)


DECODE_BAD_CALLS = [
    ("state must be float32", lambda: dict(state=jnp.zeros((2, 128), jnp.bfloat16))),
    ("state must be a pool \\[S, W\\] with W = 128", lambda: dict(state=jnp.zeros((2, 64), jnp.float32))),
    ("state_index must be int32", lambda: dict(state=jnp.zeros((5, 128)), state_index=jnp.zeros(2, jnp.uint8))),
    ("state_index must have shape \\[2\\]", lambda: dict(state=jnp.zeros((5, 128)),
                                                          state_index=jnp.zeros(3, jnp.int32))),
    ("without state_index, state must have one row per sequence", lambda: dict(state=jnp.zeros((5, 128)))),
    ("reset must be a bool/uint8 array or None", lambda: dict(state=jnp.zeros((2, 128)), reset="sequence_start")),
]


@pytest.mark.parametrize("message, change", DECODE_BAD_CALLS, ids=[m for m, _ in DECODE_BAD_CALLS])
def test_decode_argument_errors(message, change):
    w = _weights()
    args = dict(x=jnp.zeros((2, 1, 128)), a_param=w["a_param"], w_x=w["w_x"], b_x=w["b_x"], w_a=w["w_a"],
                b_a=w["b_a"])
    args.update(change())
    with pytest.raises((ValueError, TypeError), match=f"hawk_jax.rglru_decode: .*{message}"):
        hawk_jax.rglru_decode(**args)


GATE_RESIDUAL_BAD_CALLS = [
    ("y must have residual's dtype", lambda: dict(y=jnp.zeros((6, 16), jnp.float16))),
    ("y must have shape \\[6, 16\\]", lambda: dict(y=jnp.zeros((6, 8)))),
    ("gate must be float32 or bfloat16", lambda: dict(gate=jnp.zeros((3, 16), jnp.float16))),
    ("gate must be \\[G, D\\] with G >= 1 and D = 16", lambda: dict(gate=jnp.zeros((3, 8)))),
    ("idx must be int32 or int64", lambda: dict(idx=jnp.zeros(6, jnp.float32))),
    ("idx must be \\[N\\] with N = 6", lambda: dict(idx=jnp.zeros(5, jnp.int32))),
    ("layout must be one of", lambda: dict(layout="sorted")),
    ("layout='uniform' needs rows_per_group >= 1", lambda: dict(layout="uniform")),
    ("residual must be \\[..., D\\] with at least 2 dims", lambda: dict(residual=jnp.zeros(16), y=jnp.zeros(16))),
]


@pytest.mark.parametrize("message, change", GATE_RESIDUAL_BAD_CALLS, ids=[m for m, _ in GATE_RESIDUAL_BAD_CALLS])
def test_gate_residual_argument_errors(message, change):
    args = dict(residual=jnp.zeros((6, 16)), y=jnp.zeros((6, 16)), gate=jnp.zeros((3, 16)),
                idx=jnp.zeros(6, jnp.int32))
    args.update(change())
    with pytest.raises((ValueError, TypeError), match=f"hawk_jax.gate_residual: .*{message}"):
        hawk_jax.gate_residual(**args)


# ---- parameter trees ---------------------------------------------------------------------------------------------


def test_rglru_arguments_maps_recurrentgemmas_tree():
    params = _random_params(jax.random.PRNGKey(2), 128, 2)
    arguments = hawk_jax.rglru_arguments(params)
    assert arguments["w_x"] is params["input_gate"]["w"] and arguments["b_x"] is params["input_gate"]["b"]
    assert arguments["w_a"] is params["a_gate"]["w"] and arguments["b_a"] is params["a_gate"]["b"]
    assert arguments["a_param"] is params["a_param"]


def test_rglru_arguments_names_what_is_wrong():
    params = _random_params(jax.random.PRNGKey(2), 128, 2)
    del params["a_gate"]
    with pytest.raises(ValueError, match="missing 'a_gate'"):
        hawk_jax.rglru_arguments(params)
    params = _random_params(jax.random.PRNGKey(2), 128, 2)
    params["a_gate"]["b"] = jnp.zeros((2, 32))
    with pytest.raises(ValueError, match="a_gate.b must have shape \\[2, 64\\]"):
        hawk_jax.rglru_arguments(params)


def test_flax_module_has_recurrentgemmas_parameters(fake_kernels):
    layers = _recurrentgemma_layers()
    width, heads = 256, 2
    x = jax.random.normal(jax.random.PRNGKey(3), (2, 8, width), jnp.float32)
    pos = jnp.tile(jnp.arange(8), (2, 1))
    theirs = layers.RGLRU(width=width, num_heads=heads).init(jax.random.PRNGKey(4), x, pos)
    ours = hawk_jax.RGLRU(width=width, num_heads=heads).init(jax.random.PRNGKey(4), x, pos)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype
        # Same names, same initialisers: the same key gives the same values.
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---- the float64 references --------------------------------------------------------------------------------------


def _problem(seed, batch=2, length=7, width=8, heads=2, reset_at=((0, 3), (1, 0)), with_h0=True):
    rng = np.random.default_rng(seed)
    block = width // heads
    x = rng.normal(size=(batch, length, width))
    w_x, w_a = (rng.normal(size=(heads, block, block)) / np.sqrt(block) for _ in range(2))
    b_x, b_a = (rng.normal(size=(heads, block)) * 0.1 for _ in range(2))
    a_param = rng.normal(size=width) * 0.5 + 1.0
    reset = np.zeros((batch, length), bool)
    for b, t in reset_at:
        reset[b, t] = True
    h0 = rng.normal(size=(batch, width)) if with_h0 else None
    dy = rng.normal(size=(batch, length, width))
    dh_final = rng.normal(size=(batch, width))
    return dict(x=x, w_x=w_x, b_x=b_x, w_a=w_a, b_a=b_a, a_param=a_param, reset=reset, h0=h0), dy, dh_final


def _loss(inputs, dy, dh_final):
    y, h_final = ref.rglru_forward_fused(**inputs)
    return float(np.sum(y * dy) + np.sum(h_final * dh_final))


@pytest.mark.parametrize("with_h0", [True, False])
def test_reference_backward_matches_finite_differences(with_h0):
    inputs, dy, dh_final = _problem(5, with_h0=with_h0)
    grads = ref.rglru_backward_fused(**inputs, dy=dy, dh_final=dh_final)
    names = {"x": "dx", "w_x": "dw_x", "b_x": "db_x", "w_a": "dw_a", "b_a": "db_a", "a_param": "da_param"}
    if with_h0:
        names["h0"] = "dh0"
    step = 1e-6
    for name, grad_name in names.items():
        value = inputs[name]
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            saved = value[index]
            value[index] = saved + step
            up = _loss(inputs, dy, dh_final)
            value[index] = saved - step
            down = _loss(inputs, dy, dh_final)
            value[index] = saved
            numeric[index] = (up - down) / (2 * step)
        np.testing.assert_allclose(grads[grad_name].reshape(value.shape), numeric, rtol=1e-6, atol=1e-7,
                                   err_msg=grad_name)


def test_reference_reset_drops_a_nonfinite_state():
    inputs, _, _ = _problem(6, reset_at=((0, 2), (1, 0)))
    inputs["h0"][0, :] = np.nan
    y, _ = ref.rglru_forward_fused(**inputs)
    assert np.isnan(y[0, :2]).all() and np.isfinite(y[0, 2:]).all() and np.isfinite(y[1]).all()


def _recurrentgemma_apply(layers, params, x, pos, cache):
    module = layers.RGLRU(width=x.shape[-1], num_heads=params["input_gate"]["w"].shape[0])
    return module.apply({"params": params}, x, pos, cache, True)


def _segment_pos(batch, length, starts):
    """segment_pos counting up from 0 at every document start (starts: (row, t) pairs besides t = 0)."""
    pos = np.zeros((batch, length), np.int32)
    for b in range(batch):
        count = 0
        for t in range(length):
            if t > 0 and (b, t) in starts:
                count = 0
            pos[b, t] = count
            count += 1
    return pos


def test_reference_matches_recurrentgemma_forward_and_gradients():
    layers = _recurrentgemma_layers()
    width, heads, batch, length = 128, 2, 2, 9
    params = _random_params(jax.random.PRNGKey(7), width, heads)
    x = jax.random.normal(jax.random.PRNGKey(8), (batch, length, width), jnp.float32)
    cache = jax.random.normal(jax.random.PRNGKey(9), (batch, width), jnp.float32)
    pos = _segment_pos(batch, length, {(0, 4), (1, 6)})
    pos[1, :6] += 3  # row 1 continues its cache until its next document starts at t = 6
    (y, last_h), vjp = jax.vjp(lambda p, x, c: _recurrentgemma_apply(layers, p, x, jnp.asarray(pos), c),
                               params, x, cache)
    dy = np.asarray(jax.random.normal(jax.random.PRNGKey(10), y.shape), np.float64)
    dh = np.asarray(jax.random.normal(jax.random.PRNGKey(11), last_h.shape), np.float64)
    d_params, d_x, d_cache = vjp((jnp.asarray(dy, jnp.float32), jnp.asarray(dh, jnp.float32)))

    w = {k: np.asarray(v, np.float64) for k, v in hawk_jax.rglru_arguments(params).items()}
    reset = ref.reset_from_segment_pos(pos)
    y_ref, h_ref = ref.rglru_forward_fused(np.asarray(x), w["w_x"], w["b_x"], w["w_a"], w["b_a"], w["a_param"],
                                           reset, np.asarray(cache))
    np.testing.assert_allclose(np.asarray(y), y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(last_h), h_ref, rtol=2e-5, atol=2e-5)
    g = ref.rglru_backward_fused(np.asarray(x), w["w_x"], w["b_x"], w["w_a"], w["b_a"], w["a_param"], reset,
                                 np.asarray(cache), dy, dh)
    pairs = [(d_x, g["dx"]), (d_cache, g["dh0"]), (d_params["a_param"], g["da_param"]),
             (d_params["input_gate"]["w"], g["dw_x"]), (d_params["input_gate"]["b"], g["db_x"]),
             (d_params["a_gate"]["w"], g["dw_a"]), (d_params["a_gate"]["b"], g["db_a"])]
    for ours, theirs in pairs:
        scale = np.max(np.abs(theirs)) + 1e-12
        np.testing.assert_allclose(np.asarray(ours, np.float64) / scale, theirs.reshape(ours.shape) / scale,
                                   atol=1e-4)


# ---- the Python layer over fake kernels -----------------------------------------------------------------------------


@pytest.mark.parametrize("x_dtype, layer_dtype, expected", [
    (jnp.float32, None, jnp.float32),
    (jnp.bfloat16, None, jnp.float32),   # promoted with the fp32 parameters, as recurrentgemma does
    (jnp.bfloat16, jnp.bfloat16, jnp.bfloat16),
])
def test_module_dtypes_follow_recurrentgemma(fake_kernels, x_dtype, layer_dtype, expected):
    module = hawk_jax.RGLRU(width=128, num_heads=2, dtype=layer_dtype)
    x = jnp.ones((1, 4, 128), x_dtype)
    pos = jnp.arange(4)[None]
    variables = module.init(jax.random.PRNGKey(0), x, pos)
    y, last_h = module.apply(variables, x, pos)
    assert y.dtype == jnp.dtype(expected) and last_h.dtype == jnp.dtype(jnp.float32)
    assert module.apply(variables, x, pos, return_cache=False)[1] is None


@pytest.mark.parametrize("heads", [2, 4])  # block width 64 (fused) and 32 (gate logits projected by XLA)
def test_module_matches_recurrentgemma_with_fake_kernels(fake_kernels, heads):
    layers = _recurrentgemma_layers()
    width, batch, length = 128, 3, 10
    params = _random_params(jax.random.PRNGKey(12), width, heads)
    x = jax.random.normal(jax.random.PRNGKey(13), (batch, length, width), jnp.float32)
    cache = jax.random.normal(jax.random.PRNGKey(14), (batch, width), jnp.float32)
    pos = _segment_pos(batch, length, {(0, 5), (2, 1)})
    pos[1] += 2  # row 1 never resets: it continues its cache throughout
    pos = jnp.asarray(pos)

    def ours(p, x, c):
        return hawk_jax.RGLRU(width=width, num_heads=heads).apply({"params": p}, x, pos, c)

    def theirs(p, x, c):
        return _recurrentgemma_apply(layers, p, x, pos, c)

    y1, h1 = jax.jit(ours)(params, x, cache)
    y2, h2 = theirs(params, x, cache)
    np.testing.assert_allclose(np.asarray(y1), np.asarray(y2), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(h1), np.asarray(h2), rtol=2e-5, atol=2e-5)

    def loss(f):
        return lambda p, x, c: jnp.sum(f(p, x, c)[0] * jnp.cos(x)) + jnp.sum(f(p, x, c)[1] ** 2)

    g1 = jax.jit(jax.grad(loss(ours), argnums=(0, 1, 2)))(params, x, cache)
    g2 = jax.grad(loss(theirs), argnums=(0, 1, 2))(params, x, cache)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
        assert a.shape == b.shape and a.dtype == b.dtype
        scale = float(jnp.max(jnp.abs(b))) + 1e-12
        np.testing.assert_allclose(np.asarray(a) / scale, np.asarray(b) / scale, atol=1e-4)


def test_vmap_over_a_leading_axis_with_fake_kernels(fake_kernels):
    params = _random_params(jax.random.PRNGKey(15), 128, 2)
    x = jax.random.normal(jax.random.PRNGKey(16), (3, 2, 5, 128), jnp.float32)
    pos = jnp.tile(jnp.arange(5), (2, 1))
    layer = lambda x: hawk_jax.rglru_layer(params, x, pos)  # noqa: E731
    y, h = jax.jit(jax.vmap(layer))(x)
    # Shared weights, a dense batch: one call over the 3 * 2 sequences (the per-element shape is traced too, for
    # the output's shapes).
    assert (6, 5, 128) in fake_kernels.forward_x_shapes
    for v in range(3):
        yv, hv = layer(x[v])
        np.testing.assert_array_equal(np.asarray(y[v]), np.asarray(yv))
        np.testing.assert_array_equal(np.asarray(h[v]), np.asarray(hv))


def test_vmap_over_weights_and_packed_batches_with_fake_kernels(fake_kernels):
    w = _weights(64, 1)
    scales = jnp.array([0.5, 1.0, 2.0])
    x = jax.random.normal(jax.random.PRNGKey(20), (2, 7, 64), jnp.float32)
    # vmapped weights: one call per element.
    f = lambda s: hawk_jax.rglru(x, w["a_param"] * s, w["w_x"] * s, w["b_x"], w["w_a"], w["b_a"])  # noqa: E731
    y, h = jax.vmap(f)(scales)
    for v in range(3):
        yv, hv = f(scales[v])
        np.testing.assert_array_equal(np.asarray(y[v]), np.asarray(yv))
        np.testing.assert_array_equal(np.asarray(h[v]), np.asarray(hv))
    # a packed batch vmapped over its tokens' values: one call per element too.
    cu = jnp.array([0, 3, 7], jnp.int32)
    g = lambda x: hawk_jax.rglru(x, w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"], cu_seqlens=cu)  # noqa: E731
    stacked = jnp.stack([x[0], x[1]])
    y, h = jax.vmap(g)(stacked)
    for v in range(2):
        yv, hv = g(stacked[v])
        np.testing.assert_array_equal(np.asarray(y[v]), np.asarray(yv))
        np.testing.assert_array_equal(np.asarray(h[v]), np.asarray(hv))


def test_vmap_of_gradients_with_fake_kernels(fake_kernels):
    params = _random_params(jax.random.PRNGKey(21), 128, 2)
    x = jax.random.normal(jax.random.PRNGKey(22), (2, 3, 6, 128), jnp.float32)
    pos = jnp.tile(jnp.arange(6), (3, 1))
    loss = lambda p, x: jnp.sum(hawk_jax.rglru_layer(p, x, pos)[0] ** 2)  # noqa: E731
    per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, x)
    for v in range(2):
        one = jax.grad(loss)(params, x[v])
        for a, b in zip(jax.tree_util.tree_leaves(per_example), jax.tree_util.tree_leaves(one)):
            np.testing.assert_array_equal(np.asarray(a[v]), np.asarray(b))


def test_gate_residual_layer_with_fake_kernels(fake_kernels):
    key = jax.random.split(jax.random.PRNGKey(17), 4)
    residual = jax.random.normal(key[0], (2, 3, 16), jnp.float32)
    y = jax.random.normal(key[1], (2, 3, 16), jnp.float32)
    gate = jax.random.normal(key[2], (4, 16), jnp.float32)
    idx = jnp.array([3, 0, 0, 2, 3, 1], jnp.int32)

    def composed(residual, y, gate):
        return residual + gate[idx].reshape(residual.shape) * y

    out = jax.jit(lambda r, y, g: hawk_jax.gate_residual(r, y, g, idx))(residual, y, gate)
    np.testing.assert_allclose(np.asarray(out), np.asarray(composed(residual, y, gate)), rtol=1e-6, atol=1e-6)
    weights = jnp.sin(jnp.arange(residual.size, dtype=jnp.float32)).reshape(residual.shape)
    ours = jax.grad(lambda *a: jnp.sum(hawk_jax.gate_residual(*a, idx) * weights), argnums=(0, 1, 2))
    theirs = jax.grad(lambda *a: jnp.sum(composed(*a) * weights), argnums=(0, 1, 2))
    for a, b in zip(ours(residual, y, gate), theirs(residual, y, gate)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_packed_rglru_equals_its_sequences_with_fake_kernels(fake_kernels):
    w = _weights(64, 1)
    lengths = [3, 5, 1]
    x = jax.random.normal(jax.random.PRNGKey(18), (sum(lengths), 64), jnp.float32)
    cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]), jnp.int32)
    y, h = hawk_jax.rglru(x, w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"], cu_seqlens=cu)
    for n, (start, length) in enumerate(zip(np.asarray(cu[:-1]), lengths)):
        yn, hn = hawk_jax.rglru(x[None, start:start + length], w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"])
        np.testing.assert_array_equal(np.asarray(y[start:start + length]), np.asarray(yn[0]))
        np.testing.assert_array_equal(np.asarray(h[n]), np.asarray(hn[0]))


def test_griffin_with_hawks_rglru_with_fake_kernels(fake_kernels, monkeypatch):
    """The drop-in inside recurrentgemma's whole model (griffin_support.py), over the fake kernels."""
    theirs, ours = griffin_support.griffin_outputs_both_ways(monkeypatch)
    assert {(2, 12, 128), (2, 1, 128)} <= set(fake_kernels.forward_x_shapes), "hawk's layer ran, prefill and step"
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        scale = float(jnp.max(jnp.abs(b))) + 1e-12
        np.testing.assert_allclose(np.asarray(a) / scale, np.asarray(b) / scale, atol=1e-4)


# ---- the calls against the handlers' bindings (the contract between hawk_jax/_ops.py and csrc/) -------------------


class _SizesWithoutLibrary:
    """The library's query functions, for lowering without it (the values only size the workspace outputs)."""

    def hawk_jax_rglru_time_chunk(self):
        return 64

    def __getattr__(self, name):
        if name.endswith("_workspace_bytes"):
            return lambda *arguments: 256
        raise AttributeError(name)


def _handler_bindings():
    """{symbol: (inputs, outputs, sorted (attribute, bool or i64))} read from the XLA_FFI_DEFINE_HANDLER_SYMBOL
    bindings in csrc/."""
    text = "\n".join(p.read_text() for p in sorted((pathlib.Path(__file__).parents[1] / "csrc").iterdir()))

    def body(start):
        end = text.index("\n}\n", start)
        return text[start:end]

    helpers = {name: body(text.index(f"auto {name}(")) for name in
               ("bind_rglru_inputs", "bind_rglru_attributes", "bind_gate_residual_inputs",
                "bind_gate_residual_attributes")}
    bindings = {}
    for match in re.finditer(r"XLA_FFI_DEFINE_HANDLER_SYMBOL\((\w+),", text):
        block = text[match.start():text.index(";", match.start())]
        inputs, outputs = block.count(".Arg<"), block.count(".Ret<")
        attributes = re.findall(r'Attr<([^>]*)>\("(\w+)"\)', block)
        for name, helper in helpers.items():
            if name in block:
                inputs += helper.count("Arg<")
                attributes += re.findall(r'Attr<([^>]*)>\("(\w+)"\)', helper)
        kinds = {"bool": "bool", "std::int64_t": "i64"}
        bindings[match.group(1)] = (inputs, outputs, sorted((name, kinds[t]) for t, name in attributes))
    return bindings


def _custom_calls(lowered_text):
    """{target: (operands, results, sorted (attribute, bool or i64))} of the custom calls in a lowered module."""
    calls = {}
    for line in lowered_text.splitlines():
        match = re.search(r"%[\w#]+(?::(\d+))? = stablehlo.custom_call @(\w+)\(([^)]*)\)", line)
        if not match:
            continue
        config = re.search(r"mhlo.backend_config = \{([^}]*)\}", line)
        attributes = re.findall(r"(\w+) = (true|false|-?\d+ : i64)", config.group(1)) if config else []
        kinds = sorted((name, "bool" if value in ("true", "false") else "i64") for name, value in attributes)
        calls[match.group(2)] = (len(match.group(3).split(",")), int(match.group(1) or 1), kinds)
    return calls


def test_ffi_calls_match_the_handlers(monkeypatch):
    from hawk_jax import _ops

    monkeypatch.setattr(_ops, "library", lambda: _SizesWithoutLibrary())
    params = _random_params(jax.random.PRNGKey(19), 128, 2)
    x = jnp.zeros((2, 8, 128), jnp.bfloat16)
    pos = jnp.zeros((2, 8), jnp.int32)
    w = hawk_jax.rglru_arguments(params)
    lowered = []
    rglru_loss = lambda p, x: jnp.sum(hawk_jax.rglru_layer(p, x, pos)[0].astype(jnp.float32))  # noqa: E731
    lowered.append(jax.jit(jax.grad(rglru_loss)).lower(params, x).as_text())
    decode = lambda x, pool: hawk_jax.rglru_decode(  # noqa: E731
        x, w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"], state=pool, state_index=jnp.zeros(2, jnp.int32))
    lowered.append(jax.jit(decode).lower(x[:, :1], jnp.zeros((5, 128))).as_text())
    gate_loss = lambda r, g: jnp.sum(hawk_jax.gate_residual(r, r, g, jnp.zeros(4, jnp.int32)))  # noqa: E731
    # value_and_grad: under grad alone the forward, whose result nothing needs, is dead code.
    lowered.append(jax.jit(jax.value_and_grad(gate_loss, argnums=(0, 1))).lower(jnp.zeros((4, 16)), jnp.zeros((2, 16))).as_text())
    calls = {}
    for text in lowered:
        calls.update(_custom_calls(text))
    bindings = _handler_bindings()
    assert sorted(calls) == sorted(_library.TARGETS), "every FFI target is called, and nothing else"
    for target, symbol in _library.TARGETS.items():
        assert calls[target] == bindings[symbol], f"{target}: (inputs, outputs, attributes) of the call vs {symbol}"
    # The decode writes the new pool in place of its input `state` (operand 9 = output 1).
    assert "output_tuple_indices = [1], operand_index = 9" in lowered[1]


class _CappedSizes(_SizesWithoutLibrary):
    """Size queries with a backward whose one pass takes ONE_PASS bytes and whose time slices take from LEAST up,
    in steps of STEP (what the library's capped query gives for one long dense sequence in fused mode)."""

    ONE_PASS, LEAST, STEP = 1 << 20, 1 << 16, 4096

    def hawk_jax_rglru_backward_workspace_bytes(self, *arguments):
        return self.ONE_PASS

    def hawk_jax_rglru_backward_least_workspace_bytes(self, *arguments):
        return self.LEAST

    def hawk_jax_rglru_backward_capped_workspace_bytes(self, *arguments):
        limit = arguments[-1]
        if limit >= self.ONE_PASS:
            return self.ONE_PASS
        return limit // self.STEP * self.STEP if limit >= self.LEAST else 0


def _lowered_backward(limit):
    """(workspace output bytes, workspace_limit attribute) of the backward custom call in a lowered training step."""
    params = _random_params(jax.random.PRNGKey(23), 128, 1)
    w = hawk_jax.rglru_arguments(params)
    x = jnp.zeros((1, 8, 128), jnp.bfloat16)

    def loss(x):
        y, h = hawk_jax.rglru(x, w["a_param"], w["w_x"], w["b_x"], w["w_a"], w["b_a"],
                              backward_workspace_limit=limit)
        return jnp.sum(y.astype(jnp.float32)) + jnp.sum(h)

    text = jax.jit(jax.grad(loss)).lower(x).as_text()
    line = next(line for line in text.splitlines() if "stablehlo.custom_call @hawk_rglru_backward" in line)
    workspace = re.findall(r"tensor<(\d+)xui8>", line.split("->")[-1])[-1]
    attribute = re.search(r"workspace_limit = (-?\d+) : i64", line).group(1)
    return int(workspace), int(attribute)


def test_backward_workspace_limit_sizes_the_workspace_output(monkeypatch):
    """The cap reaches the handler as its workspace_limit attribute, and XLA's workspace output is the capped size
    (plus the alignment slack), not the one pass's."""
    from hawk_jax import _ops

    monkeypatch.setattr(_ops, "library", lambda: _CappedSizes())
    slack, one_pass, least = _ops.WORKSPACE_SLACK, _CappedSizes.ONE_PASS, _CappedSizes.LEAST
    assert _lowered_backward(None) == (one_pass + slack, -1)
    assert _lowered_backward(one_pass) == (one_pass + slack, one_pass)
    assert _lowered_backward(4 * one_pass) == (one_pass + slack, 4 * one_pass)
    assert _lowered_backward(least) == (least + slack, least)
    middle = least + 3 * _CappedSizes.STEP + 100
    assert _lowered_backward(middle) == (middle - 100 + slack, middle)


def test_backward_workspace_limit_below_the_least_is_refused_when_the_gradient_is_traced(monkeypatch):
    from hawk_jax import _ops

    monkeypatch.setattr(_ops, "library", lambda: _CappedSizes())
    least, one_pass = _CappedSizes.LEAST, _CappedSizes.ONE_PASS
    with pytest.raises(ValueError, match=f"hawk_jax.rglru: backward_workspace_limit={least - 1} bytes is below the "
                                         f"least workspace this backward runs with: {least} bytes .time slices; "
                                         f"the one pass takes {one_pass}"):
        _lowered_backward(least - 1)


def test_flax_module_passes_its_backward_workspace_limit(fake_kernels, monkeypatch):
    """RGLRU(backward_workspace_limit=...) and rglru_layer(...) reach hawk_jax.rglru's argument."""
    pytest.importorskip("flax")
    from hawk_jax import _ops, layers

    seen = []
    real = _ops.rglru
    monkeypatch.setattr(layers, "rglru", lambda *a, **k: seen.append(k["backward_workspace_limit"]) or real(*a, **k))
    module = hawk_jax.RGLRU(width=128, num_heads=2, backward_workspace_limit=12345)
    x = jnp.ones((1, 4, 128), jnp.float32)
    pos = jnp.arange(4)[None]
    variables = module.init(jax.random.PRNGKey(0), x, pos)
    module.apply(variables, x, pos)
    hawk_jax.rglru_layer(variables["params"], x, pos, backward_workspace_limit=777)
    assert seen[-2:] == [12345, 777]


# ---- the built library's query functions (skipped where it is not built: they need no GPU) -------------------------


def _built_library():
    if _library.library_path() is None:
        pytest.skip("libhawk_jax_ffi.so is not built (cmake -S examples/jax -B build-jax -G Ninja && cmake --build "
                    "build-jax)")
    import ctypes

    lib = ctypes.CDLL(str(_library.library_path()))
    _library._declare(lib)
    return lib


def test_library_version_and_workspace_queries():
    lib = _built_library()
    assert lib.hawk_jax_version().decode() == hawk_jax.__version__
    assert lib.hawk_jax_rglru_time_chunk() == 64
    forward = lib.hawk_jax_rglru_forward_workspace_bytes
    # (N, T, W, S, packed, state_index, validate): the device checks' words, then, for sequences longer than one
    # chunk of 128 tokens on average, the chunked forward's carries (a ticket counter, then 8 + 4 bytes per
    # channel and chunk row, rows = T / 128 + N; each region a multiple of 256 bytes).
    def carries(n, t, w):
        rows = t // 128 + n
        return 256 + -(-rows * w * 8 // 256) * 256 + -(-rows * w * 4 // 256) * 256
    assert forward(4, 4096, 1024, 4, 0, 0, 1) == carries(4, 4096, 1024)
    assert forward(4, 4096, 1024, 4, 1, 0, 0) == carries(4, 4096, 1024)
    assert forward(4, 4096, 1024, 4, 1, 0, 1) == 256 + carries(4, 4096, 1024)  # the check word first
    assert forward(4, 512, 1024, 4, 0, 0, 1) == 0                  # one chunk per sequence: nothing to chain
    assert forward(4, 4, 1024, 100, 0, 1, 1) == 256 + 256          # the check word and a claim table of ceil(100 / 32) words
    backward = lib.hawk_jax_rglru_backward_workspace_bytes
    # (N, T, W, H, fused, packed, validate): fused mode keeps fp32 dgx, dga and the direct dx, [T, W] each.
    fused = backward(2, 2048, 1024, 4, 1, 0, 1)
    logits = backward(2, 2048, 1024, 1, 0, 0, 1)
    assert fused >= 3 * 2048 * 1024 * 4 and logits >= 2 * 1024 * 4 and logits < fused
    assert backward(2, 2048, 1024, 4, 1, 1, 1) > fused             # packed: the check word first
    gate_forward = lib.hawk_jax_gate_residual_forward_workspace_bytes
    # (N, D, G, dtype, gate dtype, index bits, layout, rows per group, validate)
    assert gate_forward(1024, 1152, 8, 2, 2, 32, 0, 0, 0) == 0
    assert gate_forward(1024, 1152, 8, 2, 2, 32, 0, 0, 1) >= 256
    gate_backward = lib.hawk_jax_gate_residual_backward_workspace_bytes
    # uniform idx: the check word and fp32 partial sums, whatever the machine
    assert gate_backward(1024, 1152, 8, 2, 0, 32, 1, 128, 1) > 256
    # arbitrary idx: plus a chunk table sized by CUB's sort, which asks the CUDA device (0 without one: the handler
    # then reports the size it needs)
    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    assert (gate_backward(1024, 1152, 8, 2, 0, 32, 0, 0, 1) > 256) == has_gpu


def test_library_capped_backward_workspace_queries():
    """hawk_jax_rglru_backward_least/capped_workspace_bytes (hawk::rglru::backward_min_workspace_size and
    backward_workspace_size_within; the C++ CPU fuzz checks those against the operator's slices)."""
    lib = _built_library()
    one_pass_of = lib.hawk_jax_rglru_backward_workspace_bytes
    least_of = lib.hawk_jax_rglru_backward_least_workspace_bytes
    capped = lib.hawk_jax_rglru_backward_capped_workspace_bytes
    long_sequence = (1, 8192, 2560, 10, 1, 0, 1)  # (N, T, W, H, fused, packed, validate): takes time slices
    one_pass, least = one_pass_of(*long_sequence), least_of(*long_sequence)
    assert 12 * 1024 * 2560 <= least < one_pass // 4  # one slice's fp32 rows, against 8192 tokens' of them
    assert capped(*long_sequence, one_pass) == one_pass and capped(*long_sequence, 3 * one_pass) == one_pass
    assert capped(*long_sequence, least) == least
    assert capped(*long_sequence, least - 1) == 0 and capped(*long_sequence, -1) == 0
    sizes = [capped(*long_sequence, least + k * (one_pass - least) // 16) for k in range(16)]
    assert all(least <= size <= least + k * (one_pass - least) // 16 for k, size in enumerate(sizes))
    assert sizes == sorted(sizes) and sizes[-1] > least  # more room, longer slices
    for no_slices in ((2, 8192, 2560, 10, 1, 0, 1),   # two sequences
                      (1, 8192, 2560, 10, 1, 1, 1),   # packed
                      (1, 8192, 2560, 1, 0, 0, 1),    # gate-logits mode
                      (1, 1024, 2560, 10, 1, 0, 1)):  # one slice's tokens at most
        whole = one_pass_of(*no_slices)
        assert least_of(*no_slices) == whole, no_slices
        assert capped(*no_slices, whole) == whole and capped(*no_slices, whole - 1) == 0, no_slices

