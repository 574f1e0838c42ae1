"""Context parallelism, `exact` mode, with torch.distributed: one long sequence split along time across ranks.

    from hawk_torch.context_parallel import context_parallel_rglru
    y, h_final = context_parallel_rglru(x_piece, a_param, Wx, bx, Wa, ba, reset="sequence_start")

Every rank of `group` holds its piece ``x_piece [B, L_p, W]`` of the sequences (rank order = time order). The
forward receives the fp32 state from rank - 1, runs hawk_torch.rglru with it as h0, and sends its final state to
rank + 1; the backward receives dh_final from rank + 1 and sends dh0 to rank - 1. This is plain state passing, so
y, the final state and the row gradients are bitwise those of one single-GPU call (SPEC §3 split invariance).
Parameter gradients are this piece's share: all-reduce them as for data parallelism.

Sends and receives are blocking point-to-point calls (no micro-batch pipelining here: see
examples/context_parallel.cu for the pipelined and the `fast` variants). Keep NCCL_NVLS_ENABLE=0.
examples/torch/context_parallel_check.py runs it under torchrun against one call.
"""

from typing import Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch import Tensor

from ._ops import rglru

__all__ = ["context_parallel_rglru"]


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
) -> Tuple[Tensor, Tensor]:
    """hawk_torch.rglru on this rank's piece ``[B, L_p, W]`` of sequences split along time over ``group``.

    ``reset`` as in hawk_torch.rglru for the whole sequence: ``"sequence_start"`` applies to rank 0 only (later
    pieces continue the state); a flag tensor is this rank's slice ``[B, L_p]``; ``h0`` (rank 0 only) starts the
    sequence. Returns this piece's ``(y, h_final)``; the last rank's h_final is the sequence's.
    """
    rank = dist.get_rank(group)
    ranks = dist.get_world_size(group)
    previous = dist.get_global_rank(group, rank - 1) if group is not None and rank > 0 else rank - 1
    following = dist.get_global_rank(group, rank + 1) if group is not None and rank + 1 < ranks else rank + 1
    if x.dim() != 3:
        raise ValueError(f"context_parallel_rglru: x must be [B, L_p, W], got {tuple(x.shape)}")
    batch, width = x.shape[0], x.shape[2]
    if rank > 0:
        # The anchor requires grad so that autograd calls _ReceiveState.backward (which sends dh0 back).
        anchor = torch.empty(0, device=x.device, requires_grad=torch.is_grad_enabled())
        h0 = _ReceiveState.apply(anchor, (batch, width), x.device, previous, group)
        if isinstance(reset, str) and reset == "sequence_start":
            reset = "none"
        elif reset is None:
            reset = "none"
    y, h_final = rglru(x, a_param, Wx, bx, Wa, ba, gx=gx, ga=ga, reset=reset, h0=h0)
    if rank + 1 < ranks:
        y = _SendState.apply(y, h_final, following, group)
    return y, h_final
