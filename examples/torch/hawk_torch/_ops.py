"""The Python face of the ``hawk::`` operators: argument checks, fake (meta) implementations.

The C++ library (csrc/ops.cpp) defines the operators, their CUDA implementations and their autograd formulas.
This module

* registers a fake implementation for each, so that ``torch.compile(fullgraph=True)`` traces through them;
* offers the functional entry points ``rglru``, ``rglru_decode_`` and ``gate_residual``, which check shapes,
  dtypes, devices and contiguity and raise clear Python errors before anything reaches a kernel;
* offers the device-check controls ``check_device_errors``, ``set_sync_checks`` and ``sync_checks_enabled``.

Host cost. The autograd formulas are registered in C++ (csrc/ops.cpp), so an eager call runs no Python past the
checks of its entry point: no Python autograd kernel boxing every argument, and a backward that runs on the
autograd engine's thread without the GIL. The fused forward rounds fp32 master weights to x's dtype once and keeps
the rounded copy for the backward; an output nobody differentiates (an unused ``h_final``, the checkpoints) gets no
zero-filled gradient. Outside sync mode (below), nothing in an eager call synchronises the host.

Device checks. What only the device can check (``cu_seqlens``, ``state_index``, gate-residual ``idx`` and its
declared layout) is checked by small kernels on the call's stream, without a host synchronisation, also inside
CUDA-graph capture (``validate=True``, the default). A call whose checks fail writes nothing: the tensors it
returned hold unspecified values and a decode state pool is unchanged. By default the call returns before its
checks have run, and the RuntimeError naming the argument comes later, from the device's sticky report word:

* at the start of the next hawk operator call on that device (forward, backward or decode; that call then does
  not run). This is a host memory read, no synchronisation, so it only sees verdicts the device has already
  published;
* from ``check_device_errors(device)``, which synchronises the device first (call it where an error must be
  caught, e.g. once per step, or after replaying a CUDA graph: a replay runs no Python and raises nothing).

In sync mode (``set_sync_checks(True)`` or ``HAWK_TORCH_SYNC_CHECKS=1`` in the environment) every validating
call synchronises once and raises at once (debugging, tests); during CUDA-graph capture it never synchronises, and
the replays report as in the default mode.
"""

from __future__ import annotations

import math
import operator
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ._build import load_library

load_library()

_ops = torch.ops.hawk

# The overloads themselves: calling them skips the packet's overload resolution (host cost per call).
_RGLRU_FORWARD = _ops.rglru_forward.default
_GATE_RESIDUAL_FORWARD = _ops.gate_residual_forward.default

#: reset modes of hawk::rglru::ResetMode (the operators take them as int)
RESET_NONE, RESET_SEQUENCE_START, RESET_FLAGS = 0, 1, 2
_RESET_NAMES = {"none": RESET_NONE, "sequence_start": RESET_SEQUENCE_START}

#: hawk::gate_residual::IndexLayout
_LAYOUTS = {"arbitrary": 0, "uniform": 1, "contiguous": 2}

#: hawk::rglru::kDefaultTimeChunk: tokens per checkpoint chunk of every shipped configuration
TIME_CHUNK = int(_ops.rglru_time_chunk())

#: block widths w = W / H with a shipped fused-mode configuration
FUSED_BLOCK_WIDTHS = (64, 128, 256)

_ELEMENT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------------------------
# argument checks: clear Python errors before anything reaches a kernel
# ---------------------------------------------------------------------------------------------------------------


def _fail(where: str, message: str, kind=ValueError):
    raise kind(f"{where}: {message}")


def _check_tensor(where: str, name: str, t, device: Optional[int] = None, contiguous: bool = True):
    """``device``: the CUDA index of x (``x.get_device()``): an int comparison, where ``t.device`` would build a
    torch.device object per check (per-call host cost)."""
    if not isinstance(t, Tensor):
        _fail(where, f"{name} must be a torch.Tensor, got {type(t).__name__}", TypeError)
    if not t.is_cuda:  # a property read; t.device would build a torch.device per check
        _fail(where, f"{name} must be on a CUDA device, got {t.device}")
    if device is not None and t.get_device() != device:
        _fail(where, f"{name} is on {t.device} but x is on cuda:{device}")
    if contiguous and not t.is_contiguous():
        _fail(where, f"{name} must be contiguous (call .contiguous() on it)")


def _check_element_dtype(where: str, name: str, t: Tensor):
    if t.dtype not in _ELEMENT_DTYPES:
        _fail(where, f"{name} must be float32, float16 or bfloat16, got {t.dtype}", TypeError)


def _check_shape(where: str, name: str, t: Tensor, shape: Sequence[int]):
    if tuple(t.shape) != tuple(shape):
        _fail(where, f"{name} must have shape {list(shape)}, got {list(t.shape)}")


def _check_row_bytes(where: str, x: Tensor, width: int):
    per_vector = 4 if x.dtype == torch.float32 else 8
    if width % per_vector != 0:
        _fail(where, f"the width W = {width} must be a multiple of {per_vector} for {x.dtype} "
                     "(rows are read in 16-byte vectors)")


def _contiguous_in(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t.to(dtype).contiguous()``; t itself, as those would return it, without two dispatcher round trips when
    it already is (per-call host cost)."""
    if t.dtype == dtype and t.is_contiguous():
        return t
    return t.to(dtype).contiguous()


def _as_float32(t: Optional[Tensor]) -> Optional[Tensor]:
    """Small fp32 operands (biases, a_param, states): cast and made contiguous here, tracked by autograd."""
    return None if t is None else _contiguous_in(t, torch.float32)


def _problem(where: str, x: Tensor, cu_seqlens: Optional[Tensor]) -> Tuple[int, int, int]:
    """(N sequences, T tokens, W) of a dense [B, L, W] or packed [T, W] x, after checking x."""
    _check_tensor(where, "x", x)
    _check_element_dtype(where, "x", x)
    if cu_seqlens is None:
        if x.dim() != 3:
            _fail(where, f"x must be [B, L, W] (or [T, W] with cu_seqlens), got shape {list(x.shape)}")
        if x.shape[0] < 1 or x.shape[1] < 1:
            _fail(where, f"x must have B >= 1 and L >= 1, got shape {list(x.shape)}")
        n, t = x.shape[0], x.shape[0] * x.shape[1]
    else:
        if x.dim() != 2:
            _fail(where, f"with cu_seqlens, x must be packed [T, W], got shape {list(x.shape)}")
        _check_tensor(where, "cu_seqlens", cu_seqlens, x.get_device())
        if cu_seqlens.dtype != torch.int32:
            _fail(where, f"cu_seqlens must be int32 (as flash-attention's), got {cu_seqlens.dtype}; use .int()",
                  TypeError)
        if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
            _fail(where, f"cu_seqlens must be [N + 1] with N >= 1, got shape {list(cu_seqlens.shape)}")
        if x.shape[0] < 1:
            _fail(where, "x must hold at least one token")
        n, t = cu_seqlens.shape[0] - 1, x.shape[0]
    width = x.shape[-1]
    if width < 1:
        _fail(where, "the width W must be >= 1")
    _check_row_bytes(where, x, width)
    return n, t, width


def _gate_operands(where, x, width, Wx, bx, Wa, ba, gx, ga):
    """Checks the gate operands; returns (num_blocks, Wx, bx, Wa, ba, gx, ga) ready for the operator."""
    fused = Wx is not None or Wa is not None or bx is not None or ba is not None
    logits = gx is not None or ga is not None
    if fused == logits:
        _fail(where, "give either Wx, bx, Wa, ba (fused mode: hawk projects x) or gx, ga (gate-logits mode)")
    if fused:
        for name, t in (("Wx", Wx), ("bx", bx), ("Wa", Wa), ("ba", ba)):
            if t is None:
                _fail(where, f"fused mode needs Wx, bx, Wa and ba; {name} is missing")
            _check_tensor(where, name, t, x.get_device(), contiguous=False)
            if not t.is_floating_point():
                _fail(where, f"{name} must be floating point, got {t.dtype}", TypeError)
        if Wx.dim() != 3 or Wx.shape[1] != Wx.shape[2]:
            _fail(where, f"Wx must be [H, w, w] (block-diagonal, indexed [block, in, out]), got {list(Wx.shape)}")
        num_blocks, block = Wx.shape[0], Wx.shape[1]
        if num_blocks * block != width:
            _fail(where, f"Wx is [H, w, w] = {list(Wx.shape)} but H * w = {num_blocks * block} != W = {width}")
        if block not in FUSED_BLOCK_WIDTHS:
            _fail(where, f"the block width w = W / H = {block} has no shipped fused configuration "
                         f"(shipped: {', '.join(map(str, FUSED_BLOCK_WIDTHS))}); project the gates yourself and "
                         "use gate-logits mode (gx, ga)")
        _check_shape(where, "Wa", Wa, Wx.shape)
        for name, t in (("bx", bx), ("ba", ba)):
            if t.numel() != width:
                _fail(where, f"{name} must be [H, w] = [{num_blocks}, {block}], got {list(t.shape)}")
        return num_blocks, Wx, _as_float32(bx), Wa, _as_float32(ba), None, None
    for name, t in (("gx", gx), ("ga", ga)):
        if t is None:
            _fail(where, f"gate-logits mode needs gx and ga; {name} is missing")
        _check_tensor(where, name, t, x.get_device())
        if t.dtype != x.dtype:
            _fail(where, f"{name} must have x's dtype {x.dtype}, got {t.dtype}", TypeError)
        _check_shape(where, name, t, x.shape)
    return 1, None, None, None, None, gx, ga


def _check_a_param(where, a_param, x, width) -> Tensor:
    _check_tensor(where, "a_param", a_param, x.get_device(), contiguous=False)
    if not a_param.is_floating_point():
        _fail(where, f"a_param must be floating point, got {a_param.dtype}", TypeError)
    if a_param.numel() != width or a_param.dim() != 1:
        _fail(where, f"a_param must be [W] = [{width}], got {list(a_param.shape)}")
    return _as_float32(a_param)


def _check_reset_flags(where, reset: Tensor, x: Tensor, cu_seqlens, num_tokens) -> Tensor:
    _check_tensor(where, "reset", reset, x.get_device())
    if reset.dtype not in (torch.bool, torch.uint8):
        _fail(where, f"reset must be bool or uint8 (nonzero = the token starts a document), got {reset.dtype}",
              TypeError)
    expected = [num_tokens] if cu_seqlens is not None else list(x.shape[:2])
    if list(reset.shape) != expected:
        _fail(where, f"reset must have shape {expected} (one flag per token), got {list(reset.shape)}")
    return reset


def _reset_mode(where, reset, h0, x: Tensor, cu_seqlens, num_tokens):
    """(reset mode, flags or None) of rglru's ``reset`` argument; None means a sequence start unless h0 is given."""
    if isinstance(reset, Tensor):
        return RESET_FLAGS, _check_reset_flags(where, reset, x, cu_seqlens, num_tokens)
    if reset is None:
        return (RESET_NONE if h0 is not None else RESET_SEQUENCE_START), None
    if isinstance(reset, str) and reset in _RESET_NAMES:
        return _RESET_NAMES[reset], None
    _fail(where, f"reset must be a bool/uint8 tensor, 'sequence_start', 'none' or None; got {reset!r}")


# ---------------------------------------------------------------------------------------------------------------
# fake implementations (shapes only): torch.compile and meta tensors
# ---------------------------------------------------------------------------------------------------------------


def _sequences_and_tokens(x: Tensor, cu_seqlens: Optional[Tensor]):
    if cu_seqlens is not None:
        return cu_seqlens.shape[0] - 1, x.shape[0]
    return x.shape[0], x.shape[0] * x.shape[1]


@torch.library.register_fake("hawk::rglru_forward")
def _rglru_forward_fake(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                        save_checkpoints, validate):
    n, t = _sequences_and_tokens(x, cu_seqlens)
    width = x.shape[-1]
    rows = t // TIME_CHUNK + n if save_checkpoints else 0
    return (torch.empty_like(x), x.new_empty((n, width), dtype=torch.float32),
            x.new_empty((rows, width), dtype=torch.float32))


@torch.library.register_fake("hawk::rglru_forward_decay")
def _rglru_forward_decay_fake(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                              save_checkpoints, validate):
    y, h_final, checkpoints = _rglru_forward_fake(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens,
                                                  num_blocks, reset_mode, save_checkpoints, validate)
    return y, h_final, checkpoints, torch.empty_like(h_final)


@torch.library.register_fake("hawk::rglru_backward")
def _rglru_backward_fake(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, checkpoints, dy, dh_final,
                         num_blocks, reset_mode, want_dh0, validate):
    n, _ = _sequences_and_tokens(x, cu_seqlens)
    width = x.shape[-1]
    f32 = dict(dtype=torch.float32)
    if Wx is not None:
        h = num_blocks
        w = width // h
        dWx, dWa = x.new_empty((h, w, w), **f32), x.new_empty((h, w, w), **f32)
        dbx, dba = x.new_empty((h, w), **f32), x.new_empty((h, w), **f32)
        dgx, dga = x.new_empty((0,)), x.new_empty((0,))
    else:
        dWx, dWa, dbx, dba = (x.new_empty((0,), **f32) for _ in range(4))
        dgx, dga = torch.empty_like(x), torch.empty_like(x)
    dh0 = x.new_empty((n if want_dh0 else 0, width), **f32)
    return torch.empty_like(x), dWx, dbx, dWa, dba, dgx, dga, x.new_empty((width,), **f32), dh0


@torch.library.register_fake("hawk::rglru_decode_")
def _rglru_decode_fake(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, state, state_index, cu_seqlens, num_blocks,
                       validate):
    return torch.empty_like(x)


@torch.library.register_fake("hawk::gate_residual_forward")
def _gate_residual_forward_fake(residual, y, gate, idx, layout, rows_per_group, validate):
    return torch.empty_like(residual)


@torch.library.register_fake("hawk::gate_residual_backward")
def _gate_residual_backward_fake(dout, y, gate, idx, layout, rows_per_group, validate):
    return torch.empty_like(y), gate.new_empty(gate.shape, dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------------------
# autograd: registered in C++ (csrc/ops.cpp, the Autograd key), so that an eager call runs no Python autograd
# kernel and its backward no Python at all. The forward operators' formulas save x, the parameters (fp32 master
# weights rounded once to x's dtype) and the fp32 chunk checkpoints, not h; the backward operators raise on a
# second derivative ("double backward ... is not supported") instead of silently dropping terms.
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# device checks: deferred verdicts and sync mode (the module docstring says what a caller sees and when)
# ---------------------------------------------------------------------------------------------------------------


def _cuda_index(where: str, device) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "cuda":
        _fail(where, f"device must be a CUDA device, got {device}")
    return torch.cuda.current_device() if device.index is None else device.index


def check_device_errors(device: Union[torch.device, str, int, None] = None, *, synchronize: bool = True) -> None:
    """Raises the device-check failure of any earlier hawk call on ``device`` (default: the current CUDA device)
    that has not been raised yet; returns None when there is none.

    With ``synchronize=True`` (the default) it first waits for all work queued on the device, so that every hawk
    call made so far has published its verdict: the one place to catch a bad ``cu_seqlens``, ``state_index`` or
    ``idx`` exactly (e.g. once per step, or after replaying a CUDA graph). ``synchronize=False`` only reads the
    report word (no synchronisation; it sees the verdicts the device has already published). The RuntimeError
    names the argument at fault (several, when several calls failed); raising clears the word. Refused during
    CUDA-graph capture on the current stream (nothing may synchronise then): call it after a replay.
    """
    where = "hawk_torch.check_device_errors"
    index = _cuda_index(where, device)
    if synchronize:
        with torch.cuda.device(index):
            if torch.cuda.is_current_stream_capturing():
                _fail(where, "the current stream is being captured into a CUDA graph, which may not be "
                             "synchronised; call it after replaying the graph", RuntimeError)
        torch.cuda.synchronize(index)
    bits = int(_ops.take_device_check_bits(index))
    if bits:
        raise RuntimeError(
            f"hawk: an asynchronous hawk call on cuda:{index} failed its device checks: "
            f"{_ops.device_check_message(bits)}. It wrote none of its outputs (the tensors it returned hold "
            "unspecified values, a decode state pool is unchanged, and a replayed CUDA graph's output buffers keep "
            "what they held).")


def set_sync_checks(enabled: bool = True) -> bool:
    """Sync mode on (True) or off (False) for every later hawk call in this process; returns the previous mode.

    In sync mode every call that validates (``validate=True``) waits for its device checks (one synchronisation)
    and raises at once, a RuntimeError naming the argument, with nothing written: for debugging and tests. During
    CUDA-graph capture nothing synchronises even then; the replays report through ``check_device_errors``. The
    default (off) never synchronises: see ``check_device_errors``. ``HAWK_TORCH_SYNC_CHECKS=1`` in the
    environment turns sync mode on when the library loads.
    """
    return bool(_ops.set_sync_checks(bool(enabled)))


def sync_checks_enabled() -> bool:
    """Whether sync mode is on (``set_sync_checks``)."""
    return bool(_ops.set_sync_checks(None))


def set_backward_workspace_limit(max_bytes: Optional[int]) -> Optional[int]:
    """Caps the workspace of every later RG-LRU backward in this process at ``max_bytes`` (None: no cap); returns the
    previous cap.

    A backward whose one-pass workspace fits the cap is unchanged. Above it, one long dense sequence in fused mode
    (one sequence of more than 1024 tokens, not packed: the shape of long-context training) runs in time slices whose
    workspace fits the cap, with the same bits and more time, down to its least workspace (about 12 * 1024 * W bytes
    of rows): at (1, 8192, 2560, 10) the one pass takes 298 MB, the least 41 MB (1.39x the fused forward+backward's
    time on an H100), half the one pass 149 MB (1.13x). Below the least, or for any other problem (a batch of several
    sequences, a packed batch, a sequence of at most 1024 tokens, gate-logits mode) whose one-pass workspace exceeds
    the cap, the backward raises a RuntimeError naming the cap and what it needs, and writes nothing. The cap is read
    each time a backward runs, on every path (eager autograd, ``torch.ops.hawk.rglru_backward``); a CUDA graph keeps
    the workspace of the cap in force when it was captured.
    """
    where = "hawk_torch.set_backward_workspace_limit"
    if max_bytes is not None:
        if isinstance(max_bytes, bool):
            _fail(where, "max_bytes must be an int or None, got bool", TypeError)
        try:
            max_bytes = operator.index(max_bytes)
        except TypeError:
            _fail(where, f"max_bytes must be an int or None, got {type(max_bytes).__name__}", TypeError)
        if not 0 <= max_bytes < 2**63:
            _fail(where, f"max_bytes must be in [0, 2**63), got {max_bytes}")
    previous = int(_ops.set_backward_workspace_limit(-1 if max_bytes is None else int(max_bytes)))
    return None if previous < 0 else previous


def backward_workspace_limit() -> Optional[int]:
    """The RG-LRU backward's workspace cap in bytes (``set_backward_workspace_limit``), None when there is none."""
    limit = int(_ops.backward_workspace_limit())
    return None if limit < 0 else limit


# ---------------------------------------------------------------------------------------------------------------
# functional entry points
# ---------------------------------------------------------------------------------------------------------------


def rglru(
    x: Tensor,
    a_param: Tensor,
    Wx: Optional[Tensor] = None,
    bx: Optional[Tensor] = None,
    Wa: Optional[Tensor] = None,
    ba: Optional[Tensor] = None,
    *,
    gx: Optional[Tensor] = None,
    ga: Optional[Tensor] = None,
    reset: Union[Tensor, str, None] = None,
    h0: Optional[Tensor] = None,
    cu_seqlens: Optional[Tensor] = None,
    validate: bool = True,
) -> Tuple[Tensor, Tensor]:
    """The RG-LRU (SPEC §1) with hawk's kernels; differentiable. Returns ``(y, h_final)``.

    x: ``[B, L, W]`` (fp32, fp16 or bf16, contiguous), or packed ``[T, W]`` with ``cu_seqlens`` (int32 [N+1]).
    Fused mode: ``Wx, Wa [H, w, w]`` (indexed [block, in, out], any float dtype: rounded to x's dtype for the
    projections, gradients returned in their own dtype) and ``bx, ba [H, w]``. Gate-logits mode: ``gx, ga``
    shaped and typed like x (already projected, bias included).
    ``a_param [W]``, ``bx, ba`` and ``h0 [N, W]`` are used in fp32 (cast here).
    ``reset``: a bool/uint8 tensor ``[B, L]`` (``[T]`` packed), nonzero where a token starts a document (that is
    ``segment_pos == 0``); or ``"sequence_start"`` (the first token of each sequence; the default without h0),
    or ``"none"`` (no resets; the default with h0, which the state then continues).
    ``h_final`` is ``[N, W]`` fp32.

    ``validate=True`` (the default) checks ``cu_seqlens`` on the device (``cu_seqlens[0] == 0``, never
    decreasing, ``cu_seqlens[N] == T``) in the forward and in the backward, without a host synchronisation and
    inside CUDA-graph capture too. A bad ``cu_seqlens`` makes the call write nothing (y, h_final and the
    gradients hold unspecified values); the RuntimeError naming ``cu_seqlens`` comes from the next hawk call on
    the device or from ``hawk_torch.check_device_errors()``, or at once in sync mode
    (``hawk_torch.set_sync_checks(True)``). ``validate=False`` skips the check: the kernels still never read or
    write outside their buffers (a sequence whose offsets are out of range is skipped), but its results are
    then unspecified.
    """
    where = "hawk_torch.rglru"
    n, t, width = _problem(where, x, cu_seqlens)
    num_blocks, Wx, bx, Wa, ba, gx, ga = _gate_operands(where, x, width, Wx, bx, Wa, ba, gx, ga)
    a_param = _check_a_param(where, a_param, x, width)
    reset_mode, flags = _reset_mode(where, reset, h0, x, cu_seqlens, t)
    if h0 is not None:
        _check_tensor(where, "h0", h0, x.get_device(), contiguous=False)
        _check_shape(where, "h0", h0, (n, width))
        h0 = _as_float32(h0)
    args = (x, Wx, bx, Wa, ba, gx, ga, a_param, flags, h0, cu_seqlens, num_blocks, reset_mode)
    inputs = (x, Wx, bx, Wa, ba, gx, ga, a_param, h0)
    save = torch.is_grad_enabled() and any(v is not None and v.requires_grad for v in inputs)
    y, h_final, _ = _RGLRU_FORWARD(*args, save, validate)
    return y, h_final


def rglru_decode_(
    x: Tensor,
    a_param: Tensor,
    Wx: Optional[Tensor] = None,
    bx: Optional[Tensor] = None,
    Wa: Optional[Tensor] = None,
    ba: Optional[Tensor] = None,
    *,
    state: Tensor,
    state_index: Optional[Tensor] = None,
    gx: Optional[Tensor] = None,
    ga: Optional[Tensor] = None,
    reset: Optional[Tensor] = None,
    cu_seqlens: Optional[Tensor] = None,
    validate: bool = True,
) -> Tensor:
    """A decode step: a few new tokens per sequence continue the cached states in ``state``, updated in place.

    ``state`` is a pool ``[S, W]`` (fp32, contiguous); sequence n reads and writes row ``state_index[n]``
    (int32 [N]) or row n when ``state_index`` is None (then S = N). ``state_index[n] == -1`` marks a padding
    sequence (a batch padded to a captured graph's size): no pool row is read or written for it, and its rows
    of the returned y are unspecified (y is not zeroed); the other sequences get bitwise what a call without it
    gives. ``state`` is the only tensor written in place: it may not share memory with any other argument
    (ValueError). ``x`` is ``[N, L, W]`` (L = 1 for token-by-token decoding) or packed ``[T, W]`` with
    ``cu_seqlens``. ``reset`` flags (optional) start a new document at a token. Returns y; not differentiable
    (inference). Token-by-token decoding gives bitwise the y and final state of one prefill call.

    ``validate=True`` (the default) checks on the device, without a host synchronisation (CUDA graphs too),
    that every ``state_index`` is -1 or in [0, S), that no pool row is named twice, and ``cu_seqlens`` as
    ``rglru`` does. A failed check makes the call write nothing (the pool is unchanged, y is unspecified); the
    RuntimeError naming the argument comes from the next hawk call on the device or from
    ``hawk_torch.check_device_errors()``, or at once in sync mode (``hawk_torch.set_sync_checks(True)``).
    ``validate=False`` skips the checks: an out-of-range slot is skipped, but two sequences naming the same row
    race on it.
    """
    where = "hawk_torch.rglru_decode_"
    n, t, width = _problem(where, x, cu_seqlens)
    num_blocks, Wx, bx, Wa, ba, gx, ga = _gate_operands(where, x, width, Wx, bx, Wa, ba, gx, ga)
    a_param = _check_a_param(where, a_param, x, width)
    _check_tensor(where, "state", state, x.get_device())
    if state.dtype != torch.float32:
        _fail(where, f"state must be float32 (it is updated in place), got {state.dtype}", TypeError)
    if state.dim() != 2 or state.shape[1] != width:
        _fail(where, f"state must be a pool [S, W] with W = {width}, got {list(state.shape)}")
    if state_index is not None:
        _check_tensor(where, "state_index", state_index, x.get_device())
        if state_index.dtype != torch.int32:
            _fail(where, f"state_index must be int32, got {state_index.dtype}", TypeError)
        _check_shape(where, "state_index", state_index, (n,))
    elif state.shape[0] != n:
        _fail(where, f"without state_index, state must have one row per sequence: [{n}, {width}], "
                     f"got {list(state.shape)}")
    flags = None if reset is None else _check_reset_flags(where, reset, x, cu_seqlens, t)
    return _ops.rglru_decode_(x, Wx, bx, Wa, ba, gx, ga, a_param, flags, state, state_index, cu_seqlens,
                              num_blocks, validate)


def gate_residual(
    residual: Tensor,
    y: Tensor,
    gate: Tensor,
    idx: Tensor,
    *,
    layout: str = "arbitrary",
    rows_per_group: Optional[int] = None,
    validate: bool = True,
) -> Tensor:
    """``residual + gate[idx] * y`` (SPEC §2) with hawk's kernels; differentiable.

    residual, y: ``[..., D]`` (fp32, fp16 or bf16, same dtype, contiguous); gate: ``[G, D]`` fp32 or bf16;
    idx: int32 or int64 with one entry per row of residual (``residual.numel() // D`` rows), 0 <= idx < G.
    ``layout`` tells the backward how idx is laid out: ``"arbitrary"`` (always correct), ``"uniform"``
    (idx[r] == r // rows_per_group) or ``"contiguous"`` (each gate row's rows form one run); every layout gives
    the same bits. d gate is accumulated in fp32, in a fixed order (bitwise repeatable), and returned in
    gate's dtype. With ``"arbitrary"`` the backward finds out on the device whether idx is uniform after all (a
    DiT's ``idx = row // tokens_per_sample``) and remembers the answer for this idx tensor: a later call on the
    same, unmodified idx (same storage, same version counter) declares ``"uniform"`` itself, with the same bits
    and without the chunk table's sort, and checks that layout on the device. An idx whose memory was changed
    behind PyTorch's back (through ``.data`` or a raw pointer, which do not bump its version) then fails that call
    with the layout error below rather than give wrong gradients; pass a fresh tensor, or change idx in place
    through PyTorch.

    ``validate=True`` (the default) checks on the device, in the forward and in the backward, without a host
    synchronisation (CUDA graphs too), that 0 <= idx < G and that idx follows the declared ``layout``. A failed
    check makes the call write nothing (out, or d y and d gate, hold unspecified values); the RuntimeError
    naming ``idx`` comes from the next hawk call on the device or from ``hawk_torch.check_device_errors()``, or
    at once in sync mode (``hawk_torch.set_sync_checks(True)``). ``validate=False`` skips the checks (the caller
    guarantees idx and its layout): the kernels still never read or write outside their buffers (the forward
    skips a row whose idx is out of range), but the results for a bad idx or a false layout are then
    unspecified. Even then the backward's index plan (layouts "arbitrary" and "contiguous") finds an
    out-of-range idx or a false "contiguous" claim as a by-product: it then writes nothing and reports as above.
    """
    where = "hawk_torch.gate_residual"
    _check_tensor(where, "residual", residual)
    _check_tensor(where, "y", y, residual.get_device())
    _check_tensor(where, "gate", gate, residual.get_device())
    _check_tensor(where, "idx", idx, residual.get_device())
    _check_element_dtype(where, "residual", residual)
    if y.dtype != residual.dtype:
        _fail(where, f"y must have residual's dtype {residual.dtype}, got {y.dtype}", TypeError)
    _check_shape(where, "y", y, residual.shape)
    if residual.dim() < 2:
        _fail(where, f"residual must be [..., D] with at least 2 dims, got {list(residual.shape)}")
    if gate.dtype not in (torch.float32, torch.bfloat16):
        _fail(where, f"gate must be float32 or bfloat16, got {gate.dtype}", TypeError)
    dim = residual.shape[-1]
    if gate.dim() != 2 or gate.shape[1] != dim or gate.shape[0] < 1:
        _fail(where, f"gate must be [G, D] with D = {dim}, got {list(gate.shape)}")
    if idx.dtype not in (torch.int32, torch.int64):
        _fail(where, f"idx must be int32 or int64, got {idx.dtype}", TypeError)
    rows = math.prod(residual.shape[:-1])
    if idx.dim() != 1 or idx.shape[0] != rows:
        _fail(where, f"idx must be [N] with N = {rows} (one gate row per row of residual), got {list(idx.shape)}")
    if rows < 1:
        _fail(where, "residual must have at least one row")
    if layout not in _LAYOUTS:
        _fail(where, f"layout must be one of {sorted(_LAYOUTS)}, got {layout!r}")
    if layout == "uniform":
        if rows_per_group is None or rows_per_group < 1:
            _fail(where, "layout='uniform' needs rows_per_group >= 1 (idx[r] == r // rows_per_group)")
    else:
        rows_per_group = 0
    if residual.dim() == 2:  # already [N, D]: no reshapes and views (dispatcher calls, autograd nodes) per call
        return _GATE_RESIDUAL_FORWARD(residual, y, gate, idx, _LAYOUTS[layout], int(rows_per_group), validate)
    out = _GATE_RESIDUAL_FORWARD(residual.reshape(rows, dim), y.reshape(rows, dim), gate, idx, _LAYOUTS[layout],
                                 int(rows_per_group), validate)
    return out.view(residual.shape)
