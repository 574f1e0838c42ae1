"""Argument checks done in Python, at trace time, on shapes and dtypes only (they work on tracers and on
``jax.ShapeDtypeStruct``): a clear ValueError / TypeError naming the argument before anything reaches XLA. The
FFI handlers check the same again (their errors reach Python as XlaRuntimeError) for callers of the targets.

What only the device can check (values of ``cu_seqlens``, ``state_index``, ``idx``) is checked there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import jax.numpy as jnp
import numpy as np

#: block widths w = W / H with a shipped fused-mode configuration (larger or other widths: gate-logits mode)
FUSED_BLOCK_WIDTHS = (64, 128, 256)

#: hawk::rglru::ResetMode and the handlers' reset_mode attribute
RESET_NONE, RESET_SEQUENCE_START, RESET_FLAGS = 0, 1, 2

#: hawk::gate_residual::IndexLayout and the handlers' layout attribute
LAYOUTS = {"arbitrary": 0, "uniform": 1, "contiguous": 2}


def _element_dtype_names():
    """The element types hawk computes in (x, y, residual, gate logits)."""
    return (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def fail(where: str, message: str, kind=ValueError):
    raise kind(f"{where}: {message}")


def dtype_of(a) -> np.dtype:
    return jnp.dtype(a.dtype)


def check_workspace_limit(where: str, name: str, limit) -> None:
    """None, or a byte count: a non-negative Python or NumPy integer (not a bool, not a traced array: the limit
    sizes an XLA buffer, so it is static)."""
    if limit is None:
        return
    if isinstance(limit, (bool, np.bool_)) or not isinstance(limit, (int, np.integer)):
        fail(where, f"{name} must be None or a non-negative int (bytes), got {limit!r}", TypeError)
    if limit < 0 or limit >= 2**63:  # the size functions take it as an int64
        fail(where, f"{name} must be None or a non-negative int (bytes) below 2**63, got {limit}")


def check_element_dtype(where: str, name: str, a) -> None:
    if dtype_of(a) not in _element_dtype_names():
        fail(where, f"{name} must be float32, float16 or bfloat16, got {dtype_of(a)}", TypeError)


def check_floating(where: str, name: str, a) -> None:
    if not jnp.issubdtype(dtype_of(a), jnp.floating):
        fail(where, f"{name} must be floating point, got {dtype_of(a)}", TypeError)


def check_shape(where: str, name: str, a, shape) -> None:
    if tuple(a.shape) != tuple(shape):
        fail(where, f"{name} must have shape {list(shape)}, got {list(a.shape)}")


def check_row_bytes(where: str, dtype, width: int) -> None:
    """hawk reads rows in 16-byte vectors: W must be a multiple of 4 (fp32) or 8 (fp16, bf16)."""
    per_vector = 4 if np.dtype(dtype).itemsize == 4 else 8
    if width % per_vector != 0:
        fail(where, f"the width W = {width} must be a multiple of {per_vector} for {np.dtype(dtype).name} "
                    "(rows are read in 16-byte vectors)")


@dataclass(frozen=True)
class RGLRUProblem:
    """What x (and cu_seqlens) say about an RG-LRU call."""

    num_sequences: int  # N
    num_tokens: int     # T
    width: int          # W
    packed: bool


def rglru_problem(where: str, x, cu_seqlens) -> RGLRUProblem:
    """Checks x ([B, L, W] dense, or [T, W] packed with cu_seqlens int32 [N + 1])."""
    check_element_dtype(where, "x", x)
    if cu_seqlens is None:
        if len(x.shape) != 3:
            fail(where, f"x must be [B, L, W] (or packed [T, W] with cu_seqlens), got shape {list(x.shape)}")
        batch, length, width = x.shape
        if batch < 1 or length < 1:
            fail(where, f"x must have B >= 1 and L >= 1, got shape {list(x.shape)}")
        n, t = batch, batch * length
    else:
        if len(x.shape) != 2:
            fail(where, f"with cu_seqlens, x must be packed [T, W], got shape {list(x.shape)}")
        if dtype_of(cu_seqlens) != jnp.dtype(jnp.int32):
            fail(where, f"cu_seqlens must be int32, got {dtype_of(cu_seqlens)}", TypeError)
        if len(cu_seqlens.shape) != 1 or cu_seqlens.shape[0] < 2:
            fail(where, f"cu_seqlens must be [N + 1] with N >= 1, got shape {list(cu_seqlens.shape)}")
        if x.shape[0] < 1:
            fail(where, "x must hold at least one token")
        n, t, width = cu_seqlens.shape[0] - 1, x.shape[0], x.shape[1]
    if width < 1:
        fail(where, "the width W must be >= 1")
    check_row_bytes(where, dtype_of(x), width)
    return RGLRUProblem(num_sequences=n, num_tokens=t, width=width, packed=cu_seqlens is not None)


def gate_mode(where: str, width: int, w_x, b_x, w_a, b_a, g_x, g_a, x) -> tuple[bool, int]:
    """(fused, num_blocks H) after checking the gate operands of one of the two modes."""
    fused_given = [a is not None for a in (w_x, b_x, w_a, b_a)]
    logits_given = [a is not None for a in (g_x, g_a)]
    if any(fused_given) == any(logits_given):
        fail(where, "give either w_x, b_x, w_a, b_a (fused mode: hawk projects x) or g_x, g_a (gate-logits mode)")
    if any(fused_given):
        for name, a in (("w_x", w_x), ("b_x", b_x), ("w_a", w_a), ("b_a", b_a)):
            if a is None:
                fail(where, f"fused mode needs w_x, b_x, w_a and b_a; {name} is missing")
            check_floating(where, name, a)
        if len(w_x.shape) != 3 or w_x.shape[1] != w_x.shape[2]:
            fail(where, f"w_x must be [H, w, w] (block-diagonal, indexed [block, in, out]), got {list(w_x.shape)}")
        num_blocks, block = w_x.shape[0], w_x.shape[1]
        if num_blocks * block != width:
            fail(where, f"w_x is [H, w, w] = {list(w_x.shape)} but H * w = {num_blocks * block} != W = {width}")
        if block not in FUSED_BLOCK_WIDTHS:
            fail(where, f"the block width w = W / H = {block} has no shipped fused configuration (shipped: "
                        f"{', '.join(map(str, FUSED_BLOCK_WIDTHS))}); project the gates yourself and use gate-logits "
                        "mode (g_x, g_a)")
        check_shape(where, "w_a", w_a, w_x.shape)
        for name, a in (("b_x", b_x), ("b_a", b_a)):
            if tuple(a.shape) not in ((num_blocks, block), (width,)):
                fail(where, f"{name} must be [H, w] = [{num_blocks}, {block}] (or [W]), got {list(a.shape)}")
        return True, num_blocks
    for name, a in (("g_x", g_x), ("g_a", g_a)):
        if a is None:
            fail(where, f"gate-logits mode needs g_x and g_a; {name} is missing")
        if dtype_of(a) != dtype_of(x):
            fail(where, f"{name} must have x's dtype {dtype_of(x)}, got {dtype_of(a)}", TypeError)
        check_shape(where, name, a, x.shape)
    return False, 1


def check_a_param(where: str, a_param, width: int) -> None:
    check_floating(where, "a_param", a_param)
    check_shape(where, "a_param", a_param, (width,))


def check_state(where: str, name: str, a, problem: RGLRUProblem) -> None:
    check_floating(where, name, a)
    check_shape(where, name, a, (problem.num_sequences, problem.width))


def reset_flags_shape(x, problem: RGLRUProblem) -> tuple:
    return (problem.num_tokens,) if problem.packed else tuple(x.shape[:2])


def check_reset_flags(where: str, name: str, reset, x, problem: RGLRUProblem) -> None:
    if dtype_of(reset) not in (jnp.dtype(jnp.bool_), jnp.dtype(jnp.uint8)):
        fail(where, f"{name} must be bool or uint8 (nonzero = the token starts a document), got {dtype_of(reset)}",
             TypeError)
    check_shape(where, name, reset, reset_flags_shape(x, problem))


def check_segment_pos(where: str, segment_pos, x, problem: RGLRUProblem) -> None:
    if not jnp.issubdtype(dtype_of(segment_pos), jnp.integer):
        fail(where, f"segment_pos must be an integer array, got {dtype_of(segment_pos)}", TypeError)
    check_shape(where, "segment_pos", segment_pos, reset_flags_shape(x, problem))


def check_state_pool(where: str, state, state_index, problem: RGLRUProblem) -> None:
    if dtype_of(state) != jnp.dtype(jnp.float32):
        fail(where, f"state must be float32 (the RG-LRU state is kept in fp32), got {dtype_of(state)}", TypeError)
    if len(state.shape) != 2 or state.shape[1] != problem.width or state.shape[0] < 1:
        fail(where, f"state must be a pool [S, W] with W = {problem.width}, got {list(state.shape)}")
    if state_index is not None:
        if dtype_of(state_index) != jnp.dtype(jnp.int32):
            fail(where, f"state_index must be int32, got {dtype_of(state_index)}", TypeError)
        check_shape(where, "state_index", state_index, (problem.num_sequences,))
    elif state.shape[0] != problem.num_sequences:
        fail(where, f"without state_index, state must have one row per sequence: [{problem.num_sequences}, "
                    f"{problem.width}], got {list(state.shape)}")


@dataclass(frozen=True)
class GateResidualProblem:
    num_rows: int  # N
    dim: int       # D
    num_gate_rows: int  # G
    layout: int
    rows_per_group: int


def gate_residual_problem(where: str, residual, y, gate, idx, layout: str,
                          rows_per_group: Optional[int]) -> GateResidualProblem:
    """Checks residual, y ``[..., D]``, gate ``[G, D]`` and idx (one entry per row of residual)."""
    check_element_dtype(where, "residual", residual)
    if len(residual.shape) < 2:
        fail(where, f"residual must be [..., D] with at least 2 dims, got {list(residual.shape)}")
    if dtype_of(y) != dtype_of(residual):
        fail(where, f"y must have residual's dtype {dtype_of(residual)}, got {dtype_of(y)}", TypeError)
    check_shape(where, "y", y, residual.shape)
    if dtype_of(gate) not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16)):
        fail(where, f"gate must be float32 or bfloat16, got {dtype_of(gate)}", TypeError)
    dim = residual.shape[-1]
    if len(gate.shape) != 2 or gate.shape[1] != dim or gate.shape[0] < 1:
        fail(where, f"gate must be [G, D] with G >= 1 and D = {dim}, got {list(gate.shape)}")
    if dtype_of(idx) not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        fail(where, f"idx must be int32 or int64, got {dtype_of(idx)}", TypeError)
    rows = math.prod(residual.shape[:-1])
    if rows < 1 or dim < 1:
        fail(where, f"residual must have at least one row and one column, got {list(residual.shape)}")
    if tuple(idx.shape) != (rows,):
        fail(where, f"idx must be [N] with N = {rows} (one gate row per row of residual), got {list(idx.shape)}")
    if layout not in LAYOUTS:
        fail(where, f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    if layout == "uniform":
        if rows_per_group is None or int(rows_per_group) < 1:
            fail(where, "layout='uniform' needs rows_per_group >= 1 (idx[r] == r // rows_per_group)")
        rows_per_group = int(rows_per_group)
    else:
        rows_per_group = 0
    return GateResidualProblem(num_rows=rows, dim=dim, num_gate_rows=gate.shape[0], layout=LAYOUTS[layout],
                               rows_per_group=rows_per_group)


def checkpoint_rows(num_tokens: int, num_sequences: int, chunk: int) -> int:
    """Rows of the forward's fp32 checkpoint matrix (hawk::rglru::checkpoint_rows): T // chunk + N."""
    return num_tokens // chunk + num_sequences
