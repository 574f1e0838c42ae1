"""Context parallelism with torch.distributed: one long sequence split along time across ranks.

    from hawk_torch.context_parallel import context_parallel_rglru
    y, h_final = context_parallel_rglru(x_piece, a_param, Wx, bx, Wa, ba, reset="sequence_start", mode="fast")

Every rank of `group` holds its piece ``x_piece [B, L_p, W]`` of the sequences (rank order = time order). Both
modes are those of docs/CONTEXT_PARALLEL.md:

``mode="exact"`` (default): state passing. The forward receives the fp32 state from rank - 1, runs
hawk_torch.rglru with it as h0 and sends its final state to rank + 1; the backward receives dh_final from rank + 1
and sends dh0 to rank - 1. y, the final state and the row gradients are bitwise those of one single-GPU call
(SPEC §3 split invariance). The ranks run one after another (blocking send/recv, no micro-batch pipelining here).

``mode="fast"``: all ranks at once. Each rank runs its piece from a zero state and keeps its transfer pair
(A = Π a_bar over the piece, h_end); one all-gather of the pairs; each rank combines the pairs of the ranks
before it, in rank order, into its carry-in. Then the early-exit correction: for one sequence (B = 1) it reruns
only the first ``correction_tokens`` tokens from the carry-in, and keeps the rest of the zero-state run when the
state at their end is bit for bit the zero-state run's (the carry has died out); otherwise, and for B > 1, it
reruns the piece. The backward mirrors it in reverse time (dh from the ranks after it; the last
``correction_tokens`` tokens rerun). Equal to one call within fp32 rounding; bitwise when the corrections stop
early and every A has underflowed to 0, as it does for typical gates within a few hundred tokens. The combine
here is plain torch arithmetic (``A * h + h_end``, the same on every rank); the C++ library's
``combine_carries`` rounds it as one fma, so the two agree bitwise only when A = 0.

Parameter gradients are this piece's share in both modes: all-reduce them as for data parallelism. Keep
NCCL_NVLS_ENABLE=0. examples/torch/context_parallel_check.py runs both modes under torchrun against one call;
tests/test_context_parallel.py runs the fast mode's steps for several pieces on one GPU.
"""

from typing import List, NamedTuple, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable

from ._ops import (RESET_NONE, RESET_SEQUENCE_START, TIME_CHUNK, _as_float32, _check_a_param, _check_shape,
                   _check_tensor, _gate_operands, _problem, _reset_mode, rglru)

__all__ = ["context_parallel_rglru", "corrections", "Piece", "piece_of", "forward_transfer", "carry_in",
           "forward_correct", "backward_transfer", "dh_final_of", "backward_correct"]

#: How the fast mode's corrections went in this process: counts of "stopped_early" and "whole_piece".
corrections = {"stopped_early": 0, "whole_piece": 0}


# ---------------------------------------------------------------------------------------------------------------
# exact mode: state passing through blocking send / recv
# ---------------------------------------------------------------------------------------------------------------


class _ReceiveState(torch.autograd.Function):
    """Forward: the state from rank - 1. Backward: its gradient (dh0 of this piece) goes back to rank - 1."""

    @staticmethod
    def forward(ctx, anchor: Tensor, shape, device, previous: int, group):
        ctx.previous, ctx.group = previous, group
        state = torch.empty(shape, dtype=torch.float32, device=device)
        dist.recv(state, src=previous, group=group)
        return state

    @staticmethod
    def backward(ctx, dstate: Tensor):
        dist.send(dstate.to(torch.float32).contiguous(), dst=ctx.previous, group=ctx.group)
        return None, None, None, None, None


class _SendState(torch.autograd.Function):
    """Forward: this piece's final state goes to rank + 1; y passes through. Backward: dh_final comes back from
    rank + 1 and becomes the gradient of the final state."""

    @staticmethod
    def forward(ctx, y: Tensor, h_final: Tensor, following: int, group):
        ctx.following, ctx.group = following, group
        ctx.state_shape = h_final.shape
        dist.send(h_final.detach().contiguous(), dst=following, group=group)
        return y.view_as(y)

    @staticmethod
    def backward(ctx, dy: Tensor):
        dh_final = torch.empty(ctx.state_shape, dtype=torch.float32, device=dy.device)
        dist.recv(dh_final, src=ctx.following, group=ctx.group)
        return dy, dh_final, None, None


# ---------------------------------------------------------------------------------------------------------------
# fast mode, step by step (no communication: the steps take and return what the all-gathers move)
# ---------------------------------------------------------------------------------------------------------------


class Piece(NamedTuple):
    """One rank's operands, checked and in the form the hawk:: operators take (x dense [B, L_p, W])."""

    x: Tensor
    Wx: Optional[Tensor]
    bx: Optional[Tensor]
    Wa: Optional[Tensor]
    ba: Optional[Tensor]
    gx: Optional[Tensor]
    ga: Optional[Tensor]
    a_param: Tensor
    flags: Optional[Tensor]
    num_blocks: int
    reset_mode: int

    def rows(self, start: int, stop: int) -> "Piece":
        """Tokens [start, stop) of every sequence, as a call of its own: a sequence-start reset stays with the
        piece's first token."""
        def cut(t):
            return None if t is None else t[:, start:stop].contiguous()  # no copy for B = 1
        mode = RESET_NONE if (start > 0 and self.reset_mode == RESET_SEQUENCE_START) else self.reset_mode
        return self._replace(x=cut(self.x), gx=cut(self.gx), ga=cut(self.ga), flags=cut(self.flags), reset_mode=mode)


class Gradients(NamedTuple):
    """What one backward call returns: row gradients [B, rows, W], fp32 parameter gradients, dh0 (or None)."""

    dx: Tensor
    dgx: Tensor
    dga: Tensor
    parameters: List[Tensor]  # dWx, dbx, dWa, dba, da_param (empty tensors where the mode has none)
    dh0: Optional[Tensor]


def piece_of(where: str, x: Tensor, a_param: Tensor, Wx=None, bx=None, Wa=None, ba=None, *, gx=None, ga=None,
             reset, h0=None, first: bool):
    """Checks one rank's operands as hawk_torch.rglru does; returns (Piece, h0 in fp32 or None). ``reset`` is
    the piece's own: "none" for a piece that continues the state of the ones before it."""
    _, tokens, width = _problem(where, x, None)
    num_blocks, Wx, bx, Wa, ba, gx, ga = _gate_operands(where, x, width, Wx, bx, Wa, ba, gx, ga)
    a_param = _check_a_param(where, a_param, x, width)
    reset_mode, flags = _reset_mode(where, reset, h0, x, None, tokens)
    if not first:
        h0 = None  # the carry-in comes from the pieces before
    elif h0 is not None:
        _check_tensor(where, "h0", h0, x.get_device(), contiguous=False)
        _check_shape(where, "h0", h0, (x.shape[0], width))
        h0 = _as_float32(h0)
    return Piece(x, Wx, bx, Wa, ba, gx, ga, a_param, flags, num_blocks, reset_mode), h0


def _forward(piece: Piece, h0: Optional[Tensor], with_decay: bool = False):
    op = torch.ops.hawk.rglru_forward_decay if with_decay else torch.ops.hawk.rglru_forward
    return op(piece.x, piece.Wx, piece.bx, piece.Wa, piece.ba, piece.gx, piece.ga, piece.a_param, piece.flags, h0,
              None, piece.num_blocks, piece.reset_mode, True, True)


def _backward(piece: Piece, h0: Optional[Tensor], checkpoints: Tensor, dy: Tensor,
              dh_final: Optional[Tensor]) -> Gradients:
    want_dh0 = h0 is not None
    dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0 = torch.ops.hawk.rglru_backward(
        piece.x, piece.Wx, piece.bx, piece.Wa, piece.ba, piece.gx, piece.ga, piece.a_param, piece.flags, h0, None,
        checkpoints, dy, dh_final, piece.num_blocks, piece.reset_mode, want_dh0, True)
    return Gradients(dx, dgx, dga, [dWx, dbx, dWa, dba, da_param], dh0 if want_dh0 else None)


def _join(prefix: Gradients, suffix: Gradients) -> Gradients:
    """The gradients of a piece run as a prefix and a suffix: rows side by side, parameter gradients summed in
    that order (a split's parameter gradients equal one call's to fp32 rounding, as in any split)."""
    def rows(a, b):
        return torch.cat([a, b], dim=1) if a.numel() > 0 else a
    return Gradients(rows(prefix.dx, suffix.dx), rows(prefix.dgx, suffix.dgx), rows(prefix.dga, suffix.dga),
                     [p + s for p, s in zip(prefix.parameters, suffix.parameters)], prefix.dh0)


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))  # synchronises


def _suffix_start(length: int, tokens: int) -> int:
    """The backward's split: length - tokens rounded down to a chunk boundary (0: no split)."""
    start = length - tokens
    return 0 if start <= 0 else start // TIME_CHUNK * TIME_CHUNK


def forward_transfer(piece: Piece, h0: Optional[Tensor], first: bool):
    """Pass 1 of the forward. Returns (y, h_end, checkpoints, pair [2, B, W]). The first piece runs from its h0,
    so its pair (0, h_final) is exact; the others run from a zero state and give (A, h_end)."""
    if first:
        y, h_final, checkpoints = _forward(piece, h0)
        return y, h_final, checkpoints, torch.stack([torch.zeros_like(h_final), h_final])
    y, h_end, checkpoints, decay = _forward(piece, None, with_decay=True)
    return y, h_end, checkpoints, torch.stack([decay, h_end])


def _through(decay: Tensor, carry: Tensor, own: Tensor) -> Tensor:
    """A piece's transfer: decay * carry + own, or own alone where the piece holds a reset. hawk marks a reset
    inside the decay as -0.0 (gate_math.hpp, decay_step), and a reset drops the incoming state by selection: a
    NaN or Inf carry of an earlier piece never crosses it, as in one call."""
    reset = (decay == 0) & torch.signbit(decay)
    return torch.where(reset, own, decay * carry + own)


def carry_in(pairs: Tensor, rank: int) -> Tensor:
    """The state entering piece `rank`: the pairs [P, 2, B, W] of the pieces before it, combined in order."""
    state = torch.zeros_like(pairs[0, 1])
    for j in range(rank):
        state = _through(pairs[j, 0], state, pairs[j, 1])
    return state


def forward_correct(piece: Piece, y: Tensor, h_end: Tensor, checkpoints: Tensor, carry: Tensor, tokens: int):
    """Pass 2 of the forward from `carry`. Returns (y, h_final, checkpoints, stopped_early); when it stops early,
    y and the checkpoints of pass 1 are completed in place."""
    length = piece.x.shape[1]
    if piece.x.shape[0] == 1 and tokens < length:
        y_prefix, h_prefix, checkpoints_prefix = _forward(piece.rows(0, tokens), carry)
        chunk = tokens // TIME_CHUNK
        if _same_bits(h_prefix, checkpoints[chunk:chunk + 1]):  # the zero-state run's state entering `tokens`
            y[:, :tokens] = y_prefix
            checkpoints[:chunk] = checkpoints_prefix[:chunk]
            return y, h_end, checkpoints, True
    y, h_final, checkpoints = _forward(piece, carry)
    return y, h_final, checkpoints, False


class BackwardPass1(NamedTuple):
    gradients: Gradients          # the whole piece's (last piece: final) or the prefix's
    boundary_dh: Optional[Tensor]  # the dh the suffix handed to the prefix (None: no split)
    start: int                     # the suffix's first token (0: no split)
    final: bool                    # the last piece: nothing left to correct


def backward_transfer(piece: Piece, h0: Optional[Tensor], checkpoints: Tensor, dy: Tensor,
                      dh_final: Optional[Tensor], decay: Tensor, last: bool, tokens: int):
    """Pass 1 of the backward. Returns (BackwardPass1, triple [3, B, W] = (A, g, u)): g is the piece's dh0 for
    dh_final = 0 (the last piece: its true dh0, with A = 0), u this rank's own dh_final (0 if None)."""
    batch, length, width = piece.x.shape
    zeros = torch.zeros((batch, width), dtype=torch.float32, device=piece.x.device)
    u = zeros if dh_final is None else dh_final
    if last:
        whole = _backward(piece, h0, checkpoints, dy, dh_final)
        g = zeros if whole.dh0 is None else whole.dh0
        return BackwardPass1(whole, None, 0, True), torch.stack([zeros, g, u])
    start = _suffix_start(length, tokens) if batch == 1 else 0
    if start > 0:
        chunk = start // TIME_CHUNK
        suffix = _backward(piece.rows(start, length), checkpoints[chunk:chunk + 1], checkpoints[chunk:],
                           dy[:, start:], None)
        prefix = _backward(piece.rows(0, start), h0, checkpoints[:chunk + 1], dy[:, :start], suffix.dh0)
        g = zeros if prefix.dh0 is None else prefix.dh0
        return BackwardPass1(prefix, suffix.dh0, start, False), torch.stack([decay, g, u])
    whole = _backward(piece, h0, checkpoints, dy, None)
    g = zeros if whole.dh0 is None else whole.dh0
    return BackwardPass1(whole, None, 0, False), torch.stack([decay, g, u])


def dh_final_of(triples: Tensor, rank: int) -> Tensor:
    """dh entering piece `rank` from the right: the triples [P, 3, B, W] of the pieces after it, in reverse order."""
    last = triples.shape[0] - 1
    dh = triples[last, 2].clone()
    for j in range(last - 1, rank - 1, -1):
        dh = triples[j, 2] + _through(triples[j + 1, 0], dh, triples[j + 1, 1])
    return dh


def backward_correct(piece: Piece, h0: Optional[Tensor], checkpoints: Tensor, dy: Tensor, pass1: BackwardPass1,
                     dh_final: Tensor):
    """Pass 2 of the backward with the combined dh_final. Returns (Gradients, stopped_early or None when pass 1
    was final)."""
    if pass1.final:
        return pass1.gradients, None
    if pass1.start > 0:
        length, chunk = piece.x.shape[1], pass1.start // TIME_CHUNK
        suffix = _backward(piece.rows(pass1.start, length), checkpoints[chunk:chunk + 1], checkpoints[chunk:],
                           dy[:, pass1.start:], dh_final)
        if _same_bits(suffix.dh0, pass1.boundary_dh):  # the prefix saw this very dh: its gradients stand
            return _join(pass1.gradients, suffix), True
    return _backward(piece, h0, checkpoints, dy, dh_final), False


# ---------------------------------------------------------------------------------------------------------------
# fast mode over a process group
# ---------------------------------------------------------------------------------------------------------------


class _Setup(NamedTuple):
    group: object
    rank: int
    ranks: int
    tokens: int
    num_blocks: int
    reset_mode: int

    def all_gather(self, t: Tensor) -> Tensor:
        out = torch.empty((self.ranks,) + tuple(t.shape), dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(out, t.contiguous(), group=self.group)
        return out


def _count(stopped_early: Optional[bool]):
    if stopped_early is not None:
        corrections["stopped_early" if stopped_early else "whole_piece"] += 1


class _FastContextParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, Wx, bx, Wa, ba, gx, ga, a_param, h0, flags, setup: _Setup):
        piece = Piece(x, Wx, bx, Wa, ba, gx, ga, a_param, flags, setup.num_blocks, setup.reset_mode)
        first = setup.rank == 0
        y, h, checkpoints, pair = forward_transfer(piece, h0, first)
        pairs = setup.all_gather(pair)
        if first:
            carry, h_final = h0, h
        else:
            carry = carry_in(pairs, setup.rank)
            y, h_final, checkpoints, stopped = forward_correct(piece, y, h, checkpoints, carry, setup.tokens)
            _count(stopped)
        ctx.save_for_backward(x, Wx, bx, Wa, ba, gx, ga, a_param, flags)
        ctx.carry, ctx.checkpoints, ctx.decay, ctx.setup = carry, checkpoints, pair[0], setup
        return y, h_final

    @staticmethod
    @once_differentiable  # hawk's backward is not differentiable: a double backward raises instead of dropping terms
    def backward(ctx, dy, dh_final):
        x, Wx, bx, Wa, ba, gx, ga, a_param, flags = ctx.saved_tensors
        setup = ctx.setup
        piece = Piece(x, Wx, bx, Wa, ba, gx, ga, a_param, flags, setup.num_blocks, setup.reset_mode)
        dy = torch.zeros_like(x) if dy is None else dy.to(x.dtype).contiguous()
        if dh_final is not None:
            dh_final = dh_final.to(torch.float32).contiguous()
        last = setup.rank + 1 == setup.ranks
        pass1, triple = backward_transfer(piece, ctx.carry, ctx.checkpoints, dy, dh_final, ctx.decay, last,
                                          setup.tokens)
        triples = setup.all_gather(triple)
        grads, stopped = backward_correct(piece, ctx.carry, ctx.checkpoints, dy, pass1,
                                          dh_final_of(triples, setup.rank))
        _count(stopped)
        dWx, dbx, dWa, dba, da_param = grads.parameters
        fused = Wx is not None
        return (grads.dx,
                dWx.to(Wx.dtype) if fused else None,
                dbx.view(bx.shape) if fused else None,
                dWa.to(Wa.dtype) if fused else None,
                dba.view(ba.shape) if fused else None,
                None if fused else grads.dgx,
                None if fused else grads.dga,
                da_param.view(a_param.shape),
                grads.dh0 if (setup.rank == 0 and ctx.needs_input_grad[8]) else None,
                None, None)


def context_parallel_rglru(
    x: Tensor,
    a_param: Tensor,
    Wx: Optional[Tensor] = None,
    bx: Optional[Tensor] = None,
    Wa: Optional[Tensor] = None,
    ba: Optional[Tensor] = None,
    *,
    gx: Optional[Tensor] = None,
    ga: Optional[Tensor] = None,
    reset: Union[Tensor, str, None] = "sequence_start",
    h0: Optional[Tensor] = None,
    group=None,
    mode: str = "exact",
    correction_tokens: int = 512,
) -> Tuple[Tensor, Tensor]:
    """hawk_torch.rglru on this rank's piece ``[B, L_p, W]`` of sequences split along time over ``group``.

    ``reset`` as in hawk_torch.rglru for the whole sequence: ``"sequence_start"`` applies to rank 0 only (later
    pieces continue the state); a flag tensor is this rank's slice ``[B, L_p]``; ``h0`` (rank 0 only) starts the
    sequence. Returns this piece's ``(y, h_final)``; the last rank's h_final is the sequence's. ``mode`` is
    ``"exact"`` or ``"fast"`` (module docstring); ``correction_tokens`` (fast mode; a positive multiple of 64)
    is how much of a piece the early-exit corrections rerun.
    """
    where = "hawk_torch.context_parallel_rglru"
    if mode not in ("exact", "fast"):
        raise ValueError(f"{where}: mode must be 'exact' or 'fast', got {mode!r}")
    if x.dim() != 3:
        raise ValueError(f"{where}: x must be [B, L_p, W], got {tuple(x.shape)}")
    rank = dist.get_rank(group)
    ranks = dist.get_world_size(group)
    batch, width = x.shape[0], x.shape[2]
    if rank > 0 and (reset is None or (isinstance(reset, str) and reset == "sequence_start")):
        reset = "none"  # later pieces continue the state of the ones before them
    if mode == "exact":
        previous = dist.get_global_rank(group, rank - 1) if group is not None and rank > 0 else rank - 1
        following = dist.get_global_rank(group, rank + 1) if group is not None and rank + 1 < ranks else rank + 1
        if rank > 0:
            # The anchor requires grad so that autograd calls _ReceiveState.backward (which sends dh0 back).
            anchor = torch.empty(0, device=x.device, requires_grad=torch.is_grad_enabled())
            h0 = _ReceiveState.apply(anchor, (batch, width), x.device, previous, group)
        y, h_final = rglru(x, a_param, Wx, bx, Wa, ba, gx=gx, ga=ga, reset=reset, h0=h0)
        if rank + 1 < ranks:
            y = _SendState.apply(y, h_final, following, group)
        return y, h_final

    if not (isinstance(correction_tokens, int) and correction_tokens > 0 and correction_tokens % TIME_CHUNK == 0):
        raise ValueError(f"{where}: correction_tokens must be a positive multiple of {TIME_CHUNK}, "
                         f"got {correction_tokens!r}")
    piece, h0 = piece_of(where, x, a_param, Wx, bx, Wa, ba, gx=gx, ga=ga, reset=reset, h0=h0, first=rank == 0)
    setup = _Setup(group, rank, ranks, correction_tokens, piece.num_blocks, piece.reset_mode)
    return _FastContextParallel.apply(piece.x, piece.Wx, piece.bx, piece.Wa, piece.ba, piece.gx, piece.ga,
                                      piece.a_param, h0, piece.flags, setup)
