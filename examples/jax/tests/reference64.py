"""float64 numpy references of the RG-LRU and the gate-residual, written from docs/SPEC.md (§1, §2).

Plain loops over time, one sequence row at a time vectorised over the batch: slow and obviously right, for the
small shapes the tests use. Everything is float64; callers round to the dtype they compare in.

Sequences are dense ``[B, L, W]`` with per-token reset flags ``[B, L]``; a packed batch is checked by cutting it
into its sequences (``split_packed``) and running them as a dense batch each.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

C = 8.0  # log a_t = -C · r_t · softplus(a_param)
MAX_SQRT_GRADIENT = 1000.0  # the derivative of sqrt(1 - a²) is capped here (SPEC §1, recurrentgemma)


def softplus(z):
    return np.logaddexp(0.0, z)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def block_diagonal(x, w, b):
    """x [..., W] · block-diagonal w [H, w, w] (indexed [block, in, out]) + b [H, w] -> [..., W]."""
    heads, block = w.shape[0], w.shape[1]
    blocks = x.reshape(*x.shape[:-1], heads, block)
    return (np.einsum("...hi,hij->...hj", blocks, w) + b.reshape(heads, block)).reshape(x.shape)


@dataclass
class Gates:
    """Per-token quantities of the forward, kept for the backward: all [B, L, W] float64."""

    i: np.ndarray       # input gate sigmoid(gx)
    r: np.ndarray       # a gate sigmoid(ga)
    a: np.ndarray       # exp(log a)
    a2: np.ndarray      # exp(2 log a)
    m: np.ndarray       # 1 at a reset, else sqrt(1 - a²)
    a_bar: np.ndarray   # 0 at a reset, else a


def gates(g_x, g_a, a_param, reset):
    """The gate math of SPEC §1 from the gate logits g_x, g_a [B, L, W] and reset flags [B, L] (bool)."""
    i = sigmoid(g_x)
    r = sigmoid(g_a)
    log_a = -C * r * softplus(a_param)
    a = np.exp(log_a)
    a2 = np.exp(2.0 * log_a)
    flags = reset[..., None]
    m = np.where(flags, 1.0, np.sqrt(1.0 - a2))
    a_bar = np.where(flags, 0.0, a)
    return Gates(i=i, r=r, a=a, a2=a2, m=m, a_bar=a_bar)


def rglru_forward(x, g_x, g_a, a_param, reset, h0=None):
    """y [B, L, W], h_final [B, W], h [B, L, W] and the Gates, from gate logits (float64 throughout)."""
    x, g_x, g_a, a_param = (np.asarray(v, np.float64) for v in (x, g_x, g_a, a_param))
    batch, length, width = x.shape
    g = gates(g_x, g_a, a_param, np.asarray(reset, bool))
    u = x * g.i * g.m
    h = np.zeros_like(x)
    state = np.zeros((batch, width)) if h0 is None else np.asarray(h0, np.float64)
    for t in range(length):
        # A reset selects u alone: a NaN or Inf in the state never reaches it (SPEC: "drops" means selection).
        state = np.where(reset[:, t, None], u[:, t], g.a_bar[:, t] * state + u[:, t])
        h[:, t] = state
    return h, state, h, g


def rglru_forward_fused(x, w_x, b_x, w_a, b_a, a_param, reset, h0=None):
    """The fused mode: the gate logits projected from x first. Returns (y, h_final)."""
    x = np.asarray(x, np.float64)
    g_x = block_diagonal(x, np.asarray(w_x, np.float64), np.asarray(b_x, np.float64))
    g_a = block_diagonal(x, np.asarray(w_a, np.float64), np.asarray(b_a, np.float64))
    y, h_final, _, _ = rglru_forward(x, g_x, g_a, a_param, reset, h0)
    return y, h_final


def _sqrt_gradient(z):
    return 1.0 / (2.0 * np.sqrt(np.maximum(z, 1.0 / (4.0 * MAX_SQRT_GRADIENT**2))))


def rglru_backward(x, g_x, g_a, a_param, reset, h0, dy, dh_final=None):
    """Gradients of SPEC §1 in gate-logits mode: dict of dx, dg_x, dg_a, da_param [W], dh0 [B, W]."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    a_param = np.asarray(a_param, np.float64)
    reset = np.asarray(reset, bool)
    batch, length, width = x.shape
    _, _, h, g = rglru_forward(x, g_x, g_a, a_param, reset, h0)
    h_prev = np.concatenate([(np.zeros((batch, 1, width)) if h0 is None else np.asarray(h0, np.float64)[:, None]),
                             h[:, :-1]], axis=1)
    dh = np.zeros_like(x)
    carry = np.zeros((batch, width)) if dh_final is None else np.asarray(dh_final, np.float64)
    for t in reversed(range(length)):
        carry = dy[:, t] + carry
        dh[:, t] = carry
        # Into token t - 1 only through a_bar_t, selected away at a reset (a NaN never crosses it backwards).
        carry = np.where(reset[:, t, None], 0.0, g.a_bar[:, t] * carry)
    dh0 = np.where(reset[:, 0, None], 0.0, g.a_bar[:, 0] * dh[:, 0])
    flags = reset[..., None]
    dx = dh * g.i * g.m
    di = dh * x * g.m
    dm = np.where(flags, 0.0, dh * x * g.i)
    da_bar = dh * h_prev
    dlog_a = np.where(flags, 0.0, da_bar * g.a) - 2.0 * g.a2 * _sqrt_gradient(1.0 - g.a2) * dm
    dlog_a = np.where(flags, 0.0, dlog_a)
    sp = softplus(a_param)
    dg_a = dlog_a * (-C * sp) * g.r * (1.0 - g.r)
    dg_x = di * g.i * (1.0 - g.i)
    da_param = sigmoid(a_param) * np.sum(dlog_a * (-C * g.r), axis=(0, 1))
    return {"dx": dx, "dg_x": dg_x, "dg_a": dg_a, "da_param": da_param, "dh0": dh0}


def rglru_backward_fused(x, w_x, b_x, w_a, b_a, a_param, reset, h0, dy, dh_final=None):
    """Gradients in fused mode: dx (direct path plus through both projections), dw_x, db_x, dw_a, db_a,
    da_param, dh0 (w [H, w, w], b [H, w])."""
    x = np.asarray(x, np.float64)
    w_x, b_x, w_a, b_a = (np.asarray(v, np.float64) for v in (w_x, b_x, w_a, b_a))
    heads, block = w_x.shape[0], w_x.shape[1]
    g_x = block_diagonal(x, w_x, b_x)
    g_a = block_diagonal(x, w_a, b_a)
    grads = rglru_backward(x, g_x, g_a, a_param, reset, h0, dy, dh_final)
    xb = x.reshape(-1, heads, block)
    dgx = grads["dg_x"].reshape(-1, heads, block)
    dga = grads["dg_a"].reshape(-1, heads, block)
    dx = grads["dx"] + (np.einsum("hij,nhj->nhi", w_x, dgx) + np.einsum("hij,nhj->nhi", w_a, dga)).reshape(x.shape)
    return {"dx": dx, "dw_x": np.einsum("nhi,nhj->hij", xb, dgx), "db_x": dgx.sum(axis=0),
            "dw_a": np.einsum("nhi,nhj->hij", xb, dga), "db_a": dga.sum(axis=0), "da_param": grads["da_param"],
            "dh0": grads["dh0"]}


def split_packed(values, cu_seqlens):
    """The sequences of a packed [T, ...] array as a list, cut at cu_seqlens [N + 1]."""
    offsets = np.asarray(cu_seqlens)
    return [values[offsets[n]:offsets[n + 1]] for n in range(len(offsets) - 1)]


def gate_residual_forward(residual, y, gate, idx):
    """out[r] = residual[r] + gate[idx[r]] · y[r] (SPEC §2), float64."""
    residual, y, gate = (np.asarray(v, np.float64) for v in (residual, y, gate))
    return residual + gate[np.asarray(idx)] * y


def gate_residual_backward(dout, y, gate, idx):
    """(dy, dgate): dy[r] = dout[r] · gate[idx[r]], dgate[g] = Σ_{idx[r] = g} dout[r] · y[r] (0 for unused g)."""
    dout, y, gate = (np.asarray(v, np.float64) for v in (dout, y, gate))
    idx = np.asarray(idx)
    dgate = np.zeros_like(gate)
    np.add.at(dgate, idx, dout * y)
    return dout * gate[idx], dgate


def reset_from_segment_pos(segment_pos) -> np.ndarray:
    return np.asarray(segment_pos) == 0

