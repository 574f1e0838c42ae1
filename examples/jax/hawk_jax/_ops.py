"""hawk's kernels as JAX functions: ``rglru`` and ``gate_residual`` (differentiable, ``jax.custom_vjp``) and
``rglru_decode`` (a decode step against a state pool), each an ``jax.ffi.ffi_call`` of a handler in csrc/.

Every function checks shapes and dtypes in Python first (_checks.py), so that a mistake raises a ValueError or
TypeError naming the argument at trace time. What only the device can check (the values of cu_seqlens,
state_index, idx) is checked there with ``validate=True`` (the default): the call then waits for the verdict
(one stream synchronisation, only in calls that have such an input) and a bad value raises an XlaRuntimeError
naming the argument, with nothing written. ``validate=False`` skips those checks: the kernels still never read or
write outside their buffers, but the results for a bad value are unspecified.

Batching (``jax.vmap``): the RG-LRU forward, vmapped over a leading axis of a dense batch with the weights shared,
runs as one call over all the sequences (the kernels are batch-invariant: the same bits as one call per element).
Everything else batches by running the call once per batch element (``vmap_method="sequential"``), which is always
correct: a packed batch, vmapped weights, and the calls that gradients need (the forward that saves checkpoints, the
backward, whose parameter gradients must stay per element).
"""

from __future__ import annotations

import functools
from functools import partial
from typing import NamedTuple, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks as checks
from ._library import library

Array = jax.Array

# hawk::DType values, for the size queries
_HAWK_DTYPE = {jnp.dtype(jnp.float32): 0, jnp.dtype(jnp.float16): 1, jnp.dtype(jnp.bfloat16): 2}


def _empty(dtype) -> Array:
    """An absent optional input: the handlers take an array with no elements for it (csrc/ffi_support.h)."""
    return jnp.zeros((0,), dtype)


def _or_empty(a: Optional[Array], dtype) -> Array:
    return _empty(dtype) if a is None else a


#: hawk wants a 256-byte aligned workspace and XLA aligns buffers less strictly: each workspace output is this
#: much larger than the library's size, and the handler starts at the first 256-byte boundary in it (ffi_support.h)
WORKSPACE_SLACK = 255


def _workspace(count: int) -> jax.ShapeDtypeStruct:
    """The workspace output of a call that needs `count` bytes (none for 0)."""
    count = int(count)
    return jax.ShapeDtypeStruct((count + WORKSPACE_SLACK if count > 0 else 0,), jnp.uint8)


def time_chunk() -> int:
    """Tokens per checkpoint chunk of every shipped configuration (hawk::rglru::kDefaultTimeChunk)."""
    return int(library().hawk_jax_rglru_time_chunk())


# ---------------------------------------------------------------------------------------------------------------
# RG-LRU
# ---------------------------------------------------------------------------------------------------------------


class _RGLRUConfig(NamedTuple):
    """The static part of an RG-LRU call (hashable: custom_vjp's nondiff argument)."""

    fused: bool
    num_blocks: int
    reset_mode: int
    validate: bool
    #: the most bytes the backward's workspace may take (None: the one pass's, whatever it is)
    backward_workspace_limit: Optional[int] = None


def _gate_args(x, w_x, b_x, w_a, b_a, g_x, g_a, config: _RGLRUConfig):
    """The seven gate operands as the handlers take them: fused weights rounded to x's dtype once here (the
    projections run in x's dtype with fp32 accumulation), biases fp32 [H, w]; absent ones empty."""
    if config.fused:
        h = config.num_blocks
        w = x.shape[-1] // h
        return (w_x.astype(x.dtype), b_x.astype(jnp.float32).reshape(h, w), w_a.astype(x.dtype),
                b_a.astype(jnp.float32).reshape(h, w), _empty(x.dtype), _empty(x.dtype))
    return (_empty(x.dtype), _empty(jnp.float32), _empty(x.dtype), _empty(jnp.float32), g_x, g_a)


def _sequences_tokens_width(x, cu_seqlens) -> Tuple[int, int, int]:
    """(N, T, W) of checked operands: dense x [B, L, W], or packed x [T, W] with cu_seqlens [N + 1]."""
    if cu_seqlens is None:
        return x.shape[0], x.shape[0] * x.shape[1], x.shape[2]
    return cu_seqlens.shape[0] - 1, x.shape[0], x.shape[1]


def _rglru_forward_call(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, config: _RGLRUConfig,
                        save_checkpoints: bool):
    lib = library()
    n, t, width = _sequences_tokens_width(x, cu_seqlens)
    rows = checks.checkpoint_rows(t, n, time_chunk()) if save_checkpoints else 0
    workspace = lib.hawk_jax_rglru_forward_workspace_bytes(n, t, width, n, int(cu_seqlens is not None), 0,
                                                           int(config.validate))
    out_types = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((n, width), jnp.float32),
                 jax.ShapeDtypeStruct((rows, width), jnp.float32), _workspace(workspace))
    call = jax.ffi.ffi_call("hawk_rglru_forward", out_types, vmap_method="sequential")
    y, h_final, checkpoints, _ = call(
        x, *_gate_args(x, w_x, b_x, w_a, b_a, g_x, g_a, config), a_param.astype(jnp.float32),
        _or_empty(reset, jnp.uint8), _or_empty(None if h0 is None else h0.astype(jnp.float32), jnp.float32),
        _or_empty(cu_seqlens, jnp.int32), fused=np.bool_(config.fused), reset_mode=np.int64(config.reset_mode),
        validate=np.bool_(config.validate))
    return y, h_final, checkpoints


def _backward_workspace_bytes(lib, size_arguments, limit: Optional[int]) -> int:
    """The backward's workspace: the one pass's, or under `limit` what hawk::rglru::backward_workspace_size_within
    gives (the handler computes the same from the same arguments). A limit that nothing fits within is refused here,
    at trace time, before XLA allocates anything."""
    if limit is None:
        return lib.hawk_jax_rglru_backward_workspace_bytes(*size_arguments)
    workspace = lib.hawk_jax_rglru_backward_capped_workspace_bytes(*size_arguments, limit)
    if workspace == 0:
        least = lib.hawk_jax_rglru_backward_least_workspace_bytes(*size_arguments)
        one_pass = lib.hawk_jax_rglru_backward_workspace_bytes(*size_arguments)
        sliced = least < one_pass
        checks.fail("hawk_jax.rglru", f"backward_workspace_limit={limit} bytes is below the least workspace this "
                    f"backward runs with: {least} bytes" + (f" (time slices; the one pass takes {one_pass})" if sliced
                    else " (the one pass: only one dense sequence longer than 1024 tokens in fused mode takes time "
                         "slices)"))
    return workspace


def _rglru_backward_call(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, checkpoints, dy,
                         dh_final, config: _RGLRUConfig, want_dh0: bool):
    lib = library()
    n, t, width = _sequences_tokens_width(x, cu_seqlens)
    h = config.num_blocks
    w = width // h
    workspace = _backward_workspace_bytes(lib, (n, t, width, h, int(config.fused), int(cu_seqlens is not None),
                                                int(config.validate)), config.backward_workspace_limit)
    f32 = jnp.float32
    weights = (h, w, w) if config.fused else (0,)
    biases = (h, w) if config.fused else (0,)
    logits = (0,) if config.fused else x.shape
    out_types = (jax.ShapeDtypeStruct(x.shape, x.dtype),
                 jax.ShapeDtypeStruct(weights, f32), jax.ShapeDtypeStruct(biases, f32),
                 jax.ShapeDtypeStruct(weights, f32), jax.ShapeDtypeStruct(biases, f32),
                 jax.ShapeDtypeStruct(logits, x.dtype), jax.ShapeDtypeStruct(logits, x.dtype),
                 jax.ShapeDtypeStruct((width,), f32), jax.ShapeDtypeStruct((n if want_dh0 else 0, width), f32),
                 _workspace(workspace))
    call = jax.ffi.ffi_call("hawk_rglru_backward", out_types, vmap_method="sequential")
    dx, dw_x, db_x, dw_a, db_a, dg_x, dg_a, da_param, dh0, _ = call(
        x, *_gate_args(x, w_x, b_x, w_a, b_a, g_x, g_a, config), a_param.astype(f32), _or_empty(reset, jnp.uint8),
        _or_empty(None if h0 is None else h0.astype(f32), f32), _or_empty(cu_seqlens, jnp.int32), checkpoints,
        dy.astype(x.dtype), dh_final.astype(f32), fused=np.bool_(config.fused),
        reset_mode=np.int64(config.reset_mode), validate=np.bool_(config.validate),
        workspace_limit=np.int64(-1 if config.backward_workspace_limit is None else config.backward_workspace_limit))
    return dx, dw_x, db_x, dw_a, db_a, dg_x, dg_a, da_param, dh0


def _cast_like(gradient, primal):
    """A gradient in its primal's dtype and shape (None where the primal is absent)."""
    if primal is None:
        return None
    return gradient.astype(primal.dtype).reshape(primal.shape)


def _forward_without_checkpoints(config, *operands):
    y, h_final, _ = _rglru_forward_call(*operands, config, save_checkpoints=False)
    return y, h_final


def _fold_leading_axis(axis_size, operand, batched):
    """A row operand ([B, ...]) of a vmapped call as [V * B, ...], broadcast first when it is not batched."""
    if operand is None:
        return None
    if not batched:
        operand = jnp.broadcast_to(operand, (axis_size,) + operand.shape)
    return operand.reshape((axis_size * operand.shape[1],) + operand.shape[2:])


@functools.lru_cache(maxsize=None)
def _batchable_forward(config: _RGLRUConfig):
    """The forward without checkpoints (no gradient wanted) with a vmap rule: vmapped over a leading axis with the
    weights and a_param shared, a dense batch [V, B, L, W] runs as one call over V * B sequences (the same bits:
    the kernels are batch-invariant). Anything else (a packed batch, vmapped weights) runs one call per element."""

    @jax.custom_batching.custom_vmap
    def forward(*operands):
        return _forward_without_checkpoints(config, *operands)

    @forward.def_vmap
    def forward_vmap(axis_size, in_batched, *operands):
        batched = [bool(b) for b in in_batched]
        x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens = operands
        weights_batched = any(batched[i] for i in (1, 2, 3, 4, 7))
        if cu_seqlens is not None or weights_batched:
            in_axes = tuple(0 if b else None for b in batched)
            return jax.vmap(partial(_forward_without_checkpoints, config), in_axes=in_axes)(*operands), (True, True)
        rows = {i: _fold_leading_axis(axis_size, operands[i], batched[i]) for i in (0, 5, 6, 8, 9)}
        y, h_final = _forward_without_checkpoints(config, rows[0], w_x, b_x, w_a, b_a, rows[5], rows[6], a_param,
                                                  rows[8], rows[9], None)
        return (y.reshape((axis_size, -1) + y.shape[1:]), h_final.reshape((axis_size, -1) + h_final.shape[1:])), \
            (True, True)

    return forward


@partial(jax.custom_vjp, nondiff_argnums=(11,))
def _rglru_core(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, config):
    return _batchable_forward(config)(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens)


def _rglru_core_fwd(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, config):
    # Saves the inputs and the fp32 checkpoints (the state entering every 64-token chunk), not h: the backward
    # recomputes h inside each chunk.
    y, h_final, checkpoints = _rglru_forward_call(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens,
                                                  config, save_checkpoints=True)
    return (y, h_final), (x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, checkpoints)


def _rglru_core_bwd(config, saved, cotangents):
    x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, checkpoints = saved
    dy, dh_final = cotangents
    dx, dw_x, db_x, dw_a, db_a, dg_x, dg_a, da_param, dh0 = _rglru_backward_call(
        x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, h0, cu_seqlens, checkpoints, dy, dh_final, config,
        want_dh0=h0 is not None)
    return (dx, _cast_like(dw_x, w_x), _cast_like(db_x, b_x), _cast_like(dw_a, w_a), _cast_like(db_a, b_a),
            _cast_like(dg_x, g_x), _cast_like(dg_a, g_a), _cast_like(da_param, a_param), None,
            _cast_like(dh0, h0), None)


_rglru_core.defvjp(_rglru_core_fwd, _rglru_core_bwd)


def _reset_operand(where, reset, segment_pos, h0, x, problem) -> Tuple[int, Optional[Array]]:
    """(reset mode, uint8 flags or None) from ``reset`` / ``segment_pos`` (SPEC §1: reset = segment_pos == 0)."""
    if segment_pos is not None:
        if reset is not None:
            checks.fail(where, "give reset or segment_pos, not both")
        checks.check_segment_pos(where, segment_pos, x, problem)
        return checks.RESET_FLAGS, (segment_pos == 0).astype(jnp.uint8)
    if reset is None:
        return (checks.RESET_NONE if h0 is not None else checks.RESET_SEQUENCE_START), None
    if isinstance(reset, str):
        names = {"none": checks.RESET_NONE, "sequence_start": checks.RESET_SEQUENCE_START}
        if reset not in names:
            checks.fail(where, f"reset must be a bool/uint8 array, 'sequence_start', 'none' or None; got {reset!r}")
        return names[reset], None
    checks.check_reset_flags(where, "reset", reset, x, problem)
    return checks.RESET_FLAGS, reset.astype(jnp.uint8)


def rglru(
    x: Array,
    a_param: Array,
    w_x: Optional[Array] = None,
    b_x: Optional[Array] = None,
    w_a: Optional[Array] = None,
    b_a: Optional[Array] = None,
    *,
    g_x: Optional[Array] = None,
    g_a: Optional[Array] = None,
    segment_pos: Optional[Array] = None,
    reset: Union[Array, str, None] = None,
    h0: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    validate: bool = True,
    backward_workspace_limit: Optional[int] = None,
) -> Tuple[Array, Array]:
    """The RG-LRU (docs/SPEC.md §1) on hawk's kernels; differentiable. Returns ``(y, h_final)``.

    x: ``[B, L, W]`` (float32, float16 or bfloat16), or packed ``[T, W]`` with ``cu_seqlens`` (int32 ``[N + 1]``,
    offsets of the sequences). Fused mode: ``w_x, w_a [H, w, w]`` (indexed [block, in, out], recurrentgemma's
    ``input_gate.w`` / ``a_gate.w``; any float dtype, rounded to x's dtype for the projections, gradients in their
    own dtype) and ``b_x, b_a [H, w]``; shipped block widths w = W / H: 64, 128, 256. Gate-logits mode: ``g_x,
    g_a`` shaped and typed like x (projected already, bias included). ``a_param [W]``.

    Resets: ``segment_pos`` (integer, x's leading shape) makes every token with ``segment_pos == 0`` start a new
    document, as recurrentgemma does; or ``reset`` flags (bool / uint8, nonzero = reset), or ``"sequence_start"``
    (the default without h0) or ``"none"`` (the default with h0, whose state the sequences then continue).
    ``h0 [N, W]`` is used in fp32. ``y`` has x's dtype, ``h_final [N, W]`` is fp32.

    ``backward_workspace_limit`` (bytes, or None) caps the backward's workspace, an XLA buffer of the one pass's
    size otherwise (2.4 GB in fused mode at one sequence of 65536 tokens, W = 2560): one dense sequence longer than
    1024 tokens in fused mode then runs its backward in time slices within the cap, slower, with the same bits.
    A cap below the least such workspace, or below the one pass's for any other problem, raises ValueError when the
    gradient is traced, naming both sizes.
    """
    where = "hawk_jax.rglru"
    problem = checks.rglru_problem(where, x, cu_seqlens)
    fused, num_blocks = checks.gate_mode(where, problem.width, w_x, b_x, w_a, b_a, g_x, g_a, x)
    checks.check_a_param(where, a_param, problem.width)
    if h0 is not None:
        checks.check_state(where, "h0", h0, problem)
    reset_mode, flags = _reset_operand(where, reset, segment_pos, h0, x, problem)
    checks.check_workspace_limit(where, "backward_workspace_limit", backward_workspace_limit)
    config = _RGLRUConfig(fused=fused, num_blocks=num_blocks, reset_mode=reset_mode, validate=bool(validate),
                          backward_workspace_limit=(None if backward_workspace_limit is None
                                                    else int(backward_workspace_limit)))
    return _rglru_core(x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, flags, h0, cu_seqlens, config)


def rglru_decode(
    x: Array,
    a_param: Array,
    w_x: Optional[Array] = None,
    b_x: Optional[Array] = None,
    w_a: Optional[Array] = None,
    b_a: Optional[Array] = None,
    *,
    state: Array,
    state_index: Optional[Array] = None,
    g_x: Optional[Array] = None,
    g_a: Optional[Array] = None,
    segment_pos: Optional[Array] = None,
    reset: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    validate: bool = True,
) -> Tuple[Array, Array]:
    """A decode step: a few new tokens per sequence continue the cached states of a pool. Returns
    ``(y, new_state)``; not differentiable (inference).

    ``state`` is a pool ``[S, W]`` float32; sequence n continues row ``state_index[n]`` (int32 ``[N]``), or row n
    when ``state_index`` is None (then S = N). ``state_index[n] == -1`` marks a padding sequence: no row of the
    pool is read or written for it and its rows of y are zero. ``new_state`` is the pool with the rows of the
    batch's sequences advanced; the kernel writes it in place of ``state`` (input_output_aliases), so under
    ``jax.jit(..., donate_argnums=...)`` with the pool donated no copy of the pool is made. Two sequences naming
    the same row raise (with ``validate``; they would race on it). x is ``[N, L, W]`` (L = 1 for
    token-by-token decoding) or packed ``[T, W]`` with ``cu_seqlens``; ``segment_pos`` / ``reset`` flags start a
    new document at a token. Token-by-token decoding gives bitwise the y and final state of one ``rglru`` call.
    """
    where = "hawk_jax.rglru_decode"
    problem = checks.rglru_problem(where, x, cu_seqlens)
    fused, num_blocks = checks.gate_mode(where, problem.width, w_x, b_x, w_a, b_a, g_x, g_a, x)
    checks.check_a_param(where, a_param, problem.width)
    checks.check_state_pool(where, state, state_index, problem)
    if isinstance(reset, str):
        checks.fail(where, "reset must be a bool/uint8 array or None (a decode step continues the cached states)")
    reset_mode, flags = _reset_operand(where, reset, segment_pos, state, x, problem)
    config = _RGLRUConfig(fused=fused, num_blocks=num_blocks, reset_mode=reset_mode, validate=bool(validate))
    lib = library()
    workspace = lib.hawk_jax_rglru_forward_workspace_bytes(
        problem.num_sequences, problem.num_tokens, problem.width, state.shape[0], int(problem.packed),
        int(state_index is not None), int(config.validate))
    out_types = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(state.shape, jnp.float32),
                 _workspace(workspace))
    state_position = 9  # the state's place among the handler's inputs (csrc/rglru_forward_ffi.cu)
    call = jax.ffi.ffi_call("hawk_rglru_decode", out_types, vmap_method="sequential",
                            input_output_aliases={state_position: 1})
    y, new_state, _ = call(
        x, *_gate_args(x, w_x, b_x, w_a, b_a, g_x, g_a, config), a_param.astype(jnp.float32),
        _or_empty(flags, jnp.uint8), state, _or_empty(state_index, jnp.int32), _or_empty(cu_seqlens, jnp.int32),
        fused=np.bool_(config.fused), reset_mode=np.int64(config.reset_mode), validate=np.bool_(config.validate))
    return y, new_state


# ---------------------------------------------------------------------------------------------------------------
# gate-residual
# ---------------------------------------------------------------------------------------------------------------


class _GateResidualConfig(NamedTuple):
    layout: int
    rows_per_group: int
    validate: bool


def _index_bits(idx) -> int:
    return 32 if jnp.dtype(idx.dtype) == jnp.dtype(jnp.int32) else 64


def _gate_residual_forward_call(residual, y, gate, idx, config: _GateResidualConfig):
    n, d = residual.shape
    workspace = library().hawk_jax_gate_residual_forward_workspace_bytes(
        n, d, gate.shape[0], _HAWK_DTYPE[jnp.dtype(residual.dtype)], _HAWK_DTYPE[jnp.dtype(gate.dtype)],
        _index_bits(idx), config.layout, config.rows_per_group, int(config.validate))
    call = jax.ffi.ffi_call("hawk_gate_residual_forward",
                            (jax.ShapeDtypeStruct(residual.shape, residual.dtype), _workspace(workspace)),
                            vmap_method="sequential")
    out, _ = call(residual, y, gate, idx, layout=np.int64(config.layout),
                  rows_per_group=np.int64(config.rows_per_group), validate=np.bool_(config.validate))
    return out


def _gate_residual_backward_call(dout, y, gate, idx, config: _GateResidualConfig):
    n, d = y.shape
    workspace = library().hawk_jax_gate_residual_backward_workspace_bytes(
        n, d, gate.shape[0], _HAWK_DTYPE[jnp.dtype(y.dtype)], _HAWK_DTYPE[jnp.dtype(gate.dtype)], _index_bits(idx),
        config.layout, config.rows_per_group, int(config.validate))
    call = jax.ffi.ffi_call("hawk_gate_residual_backward",
                            (jax.ShapeDtypeStruct(y.shape, y.dtype), jax.ShapeDtypeStruct(gate.shape, jnp.float32),
                             _workspace(workspace)),
                            vmap_method="sequential")
    dy, dgate, _ = call(dout.astype(y.dtype), y, gate, idx, layout=np.int64(config.layout),
                        rows_per_group=np.int64(config.rows_per_group), validate=np.bool_(config.validate))
    return dy, dgate


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def _gate_residual_core(residual, y, gate, idx, config):
    return _gate_residual_forward_call(residual, y, gate, idx, config)


def _gate_residual_core_fwd(residual, y, gate, idx, config):
    return _gate_residual_forward_call(residual, y, gate, idx, config), (y, gate, idx)


def _gate_residual_core_bwd(config, saved, dout):
    y, gate, idx = saved
    dy, dgate = _gate_residual_backward_call(dout, y, gate, idx, config)
    # d residual is d out itself (SPEC §2); d gate is accumulated in fp32 and rounded once to gate's dtype.
    return dout, dy, dgate.astype(gate.dtype), None


_gate_residual_core.defvjp(_gate_residual_core_fwd, _gate_residual_core_bwd)


def gate_residual(
    residual: Array,
    y: Array,
    gate: Array,
    idx: Array,
    *,
    layout: str = "arbitrary",
    rows_per_group: Optional[int] = None,
    validate: bool = True,
) -> Array:
    """``residual + gate[idx] * y`` (docs/SPEC.md §2) on hawk's kernels; differentiable.

    residual, y: ``[..., D]`` (float32, float16 or bfloat16, the same); gate: ``[G, D]`` float32 or bfloat16;
    idx: int32 or int64 with one entry per row (``residual.size // D`` rows), 0 <= idx < G. One fp32 fused
    multiply-add per element, one rounding. ``layout`` tells the backward how idx is laid out: ``"arbitrary"``
    (always correct), ``"uniform"`` (idx[r] == r // rows_per_group) or ``"contiguous"`` (each gate row's rows form
    one run); every layout gives the same bits. d gate is accumulated in fp32 in a fixed order (bitwise
    repeatable, batch-invariant) and returned in gate's dtype.
    """
    where = "hawk_jax.gate_residual"
    problem = checks.gate_residual_problem(where, residual, y, gate, idx, layout, rows_per_group)
    config = _GateResidualConfig(layout=problem.layout, rows_per_group=problem.rows_per_group,
                                 validate=bool(validate))
    rows = (problem.num_rows, problem.dim)
    out = _gate_residual_core(residual.reshape(rows), y.reshape(rows), gate, idx, config)
    return out.reshape(residual.shape)
