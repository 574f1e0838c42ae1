"""Stand-ins for hawk_jax's four kernel calls (hawk_jax/_ops.py ``_*_call``) with the same signatures and
results, computed by the float64 references (reference64.py) through ``jax.pure_callback``: on the CPU, in CI,
the whole Python layer above the FFI (argument checks, custom_vjp, casts, resets from segment_pos, h0, parameter
trees, the flax module, jit, grad, vmap) runs against them. Checkpoints are zeros: only the real backward reads
them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import reference64 as ref
from hawk_jax import _checks as checks

TIME_CHUNK = 64  # the shipped configurations' chunk; only the checkpoints' shape depends on it

#: the shape of x of every forward call traced (tests look at how vmap reached the kernels)
forward_x_shapes = []


def _sequences(x, cu_seqlens):
    """(list of [L_n, W] float64 sequences, how to put per-token results back together)."""
    x = np.asarray(x, np.float64)
    if cu_seqlens is None or np.asarray(cu_seqlens).size == 0:
        return [row for row in x], lambda parts: np.stack(parts)
    return ref.split_packed(x, cu_seqlens), lambda parts: np.concatenate(parts)


def _resets(config, flags, lengths):
    """Per-sequence bool reset flags [L_n] for the reset mode of `config`."""
    if config.reset_mode == checks.RESET_FLAGS:
        flat = np.asarray(flags).reshape(-1) != 0
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return [flat[offsets[n]:offsets[n + 1]] for n in range(len(lengths))]
    out = []
    for length in lengths:
        r = np.zeros(length, bool)
        r[0] = config.reset_mode == checks.RESET_SEQUENCE_START
        out.append(r)
    return out


def _gate_logits(xs, w_x, b_x, w_a, b_a, g_x, g_a, config, cu_seqlens):
    if config.fused:
        w_x, b_x, w_a, b_a = (np.asarray(v, np.float64) for v in (w_x, b_x, w_a, b_a))
        return [ref.block_diagonal(s, w_x, b_x) for s in xs], [ref.block_diagonal(s, w_a, b_a) for s in xs]
    gx, _ = _sequences(g_x, cu_seqlens)
    ga, _ = _sequences(g_a, cu_seqlens)
    return gx, ga


def _forward_numpy(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, config):
    xs, join = _sequences(x, cu_seqlens)
    gxs, gas = _gate_logits(xs, w_x, b_x, w_a, b_a, g_x, g_a, config, cu_seqlens)
    resets = _resets(config, reset, [len(s) for s in xs])
    ys, finals = [], []
    for n, s in enumerate(xs):
        state = None if h0 is None else np.asarray(h0, np.float64)[n:n + 1]
        y, h_final, _, _ = ref.rglru_forward(s[None], gxs[n][None], gas[n][None], a_param, resets[n][None], state)
        ys.append(y[0])
        finals.append(h_final[0])
    return join(ys), np.stack(finals)


def _cast_inputs(x, w_x, w_a):
    """The rounding the real call does before the kernel: fused weights to x's dtype."""
    return (None if w_x is None else w_x.astype(x.dtype)), (None if w_a is None else w_a.astype(x.dtype))


def rglru_forward_call(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, config, save_checkpoints):
    forward_x_shapes.append(tuple(x.shape))
    w_x, w_a = _cast_inputs(x, w_x, w_a)
    n = x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    t = x.shape[0] * x.shape[1] if cu_seqlens is None else x.shape[0]
    width = x.shape[-1]
    operands = (x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens)

    def host(*values):
        y, h_final = _forward_numpy(*values, config)
        return y.astype(x.dtype), h_final.astype(np.float32)

    y, h_final = jax.pure_callback(
        host, (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((n, width), jnp.float32)), *operands,
        vmap_method="sequential")
    rows = checks.checkpoint_rows(t, n, TIME_CHUNK) if save_checkpoints else 0
    return y, h_final, jnp.zeros((rows, width), jnp.float32)


def rglru_backward_call(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, checkpoints, dy, dh_final,
                        config, want_dh0):
    w_x, w_a = _cast_inputs(x, w_x, w_a)
    n = x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    width = x.shape[-1]
    heads = config.num_blocks
    block = width // heads
    operands = (x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, dy, dh_final)

    def host(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, dy, dh_final):
        xs, join = _sequences(x, cu_seqlens)
        dys, _ = _sequences(dy, cu_seqlens)
        gxs, gas = _gate_logits(xs, w_x, b_x, w_a, b_a, g_x, g_a, config, cu_seqlens)
        resets = _resets(config, reset, [len(s) for s in xs])
        totals = {}
        dxs, dgxs, dgas, dh0s = [], [], [], []
        for i, s in enumerate(xs):
            state = None if h0 is None else np.asarray(h0, np.float64)[i:i + 1]
            final = np.asarray(dh_final, np.float64)[i:i + 1]
            if config.fused:
                g = ref.rglru_backward_fused(s[None], w_x, b_x, w_a, b_a, a_param, resets[i][None], state,
                                             dys[i][None], final)
                for key in ("dw_x", "db_x", "dw_a", "db_a"):
                    totals[key] = totals.get(key, 0.0) + g[key]
            else:
                g = ref.rglru_backward(s[None], gxs[i][None], gas[i][None], a_param, resets[i][None], state,
                                       dys[i][None], final)
                dgxs.append(g["dg_x"][0])
                dgas.append(g["dg_a"][0])
            totals["da_param"] = totals.get("da_param", 0.0) + g["da_param"]
            dxs.append(g["dx"][0])
            dh0s.append(g["dh0"][0])
        f32 = np.float32
        if config.fused:
            weights = [totals[k].astype(f32) for k in ("dw_x", "db_x", "dw_a", "db_a")]
            logits = [np.zeros((0,), x.dtype), np.zeros((0,), x.dtype)]
        else:
            weights = [np.zeros((0,), f32)] * 4
            logits = [join(dgxs).astype(x.dtype), join(dgas).astype(x.dtype)]
        dh0 = np.stack(dh0s).astype(f32) if want_dh0 else np.zeros((0, width), f32)
        return (join(dxs).astype(x.dtype), weights[0], weights[1], weights[2], weights[3], logits[0], logits[1],
                totals["da_param"].astype(f32), dh0)

    f32 = jnp.float32
    wshape = (heads, block, block) if config.fused else (0,)
    bshape = (heads, block) if config.fused else (0,)
    lshape = (0,) if config.fused else x.shape
    out = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(wshape, f32), jax.ShapeDtypeStruct(bshape, f32),
           jax.ShapeDtypeStruct(wshape, f32), jax.ShapeDtypeStruct(bshape, f32), jax.ShapeDtypeStruct(lshape, x.dtype),
           jax.ShapeDtypeStruct(lshape, x.dtype), jax.ShapeDtypeStruct((width,), f32),
           jax.ShapeDtypeStruct((n if want_dh0 else 0, width), f32))
    return jax.pure_callback(host, out, *operands, vmap_method="sequential")


def gate_residual_forward_call(residual, y, gate, idx, config):
    def host(residual, y, gate, idx):
        return ref.gate_residual_forward(residual, y, gate, idx).astype(residual.dtype)

    return jax.pure_callback(host, jax.ShapeDtypeStruct(residual.shape, residual.dtype), residual, y, gate, idx,
                             vmap_method="sequential")


def gate_residual_backward_call(dout, y, gate, idx, config):
    def host(dout, y, gate, idx):
        dy, dgate = ref.gate_residual_backward(dout, y, gate, idx)
        return dy.astype(y.dtype), dgate.astype(np.float32)

    return jax.pure_callback(host, (jax.ShapeDtypeStruct(y.shape, y.dtype),
                                    jax.ShapeDtypeStruct(gate.shape, jnp.float32)), dout, y, gate, idx,
                             vmap_method="sequential")
