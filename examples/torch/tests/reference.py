"""Pure-PyTorch float64 implementations of ../shared/SPEC.md §1 and §2, written plainly from the spec.

Gradients come from PyTorch autograd through these float64 ops; the one non-standard derivative (the sqrt
whose derivative is capped at 1000, SPEC §1) is a small autograd.Function.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

C = 8.0  # log_a = -C * r * softplus(a_param)
MAX_SQRT_GRADIENT = 1000.0


class _CappedSqrt(torch.autograd.Function):
    """sqrt(z) whose derivative is 1 / (2 sqrt(max(z, 1 / (4 * 1000^2))))."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return torch.sqrt(z)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        floor = 1.0 / (4.0 * MAX_SQRT_GRADIENT**2)
        return grad / (2.0 * torch.sqrt(torch.clamp(z, min=floor)))


def block_diagonal(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """x [..., W] with w [H, w, w] indexed [block, in, out], b [H, w] -> [..., W]."""
    h = w.shape[0]
    blocks = x.unflatten(-1, (h, w.shape[1]))
    return (torch.einsum("...hi,hio->...ho", blocks, w) + b).flatten(-2)


def rglru_dense(x: Tensor, a_param: Tensor, gx: Tensor, ga: Tensor, reset: Tensor,
                h0: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """SPEC §1 forward for a dense batch, float64. x, gx, ga [B, L, W]; reset bool [B, L]."""
    i = torch.sigmoid(gx)
    r = torch.sigmoid(ga)
    log_a = -C * r * nn.functional.softplus(a_param)
    a = torch.exp(log_a)
    a2 = torch.exp(2.0 * log_a)
    is_reset = reset[..., None]
    m = torch.where(is_reset, torch.ones_like(a2), _CappedSqrt.apply(1.0 - a2))
    u = x * i * m
    a_bar = torch.where(is_reset, torch.zeros_like(a), a)
    h = torch.zeros_like(x[:, 0]) if h0 is None else h0
    ys = []
    for t in range(x.shape[1]):
        h = a_bar[:, t] * h + u[:, t]
        ys.append(h)
    return torch.stack(ys, dim=1), h


def rglru_reference(x: Tensor, a_param: Tensor, Wx=None, bx=None, Wa=None, ba=None, *, gx=None, ga=None,
                    reset: Optional[Tensor] = None, reset_mode: str = "flags", h0: Optional[Tensor] = None,
                    cu_seqlens: Optional[List[int]] = None) -> Tuple[Tensor, Tensor]:
    """float64 RG-LRU. Inputs of any dtype are promoted to float64 (pass the values the kernel sees: x's
    dtype for x, gx, ga and the weights). reset_mode: "flags" (reset given), "sequence_start" or "none".
    Packed: x [T, W] and cu_seqlens a Python list of offsets; returns (y [T, W], h_final [N, W])."""
    x = x.double()
    a_param = a_param.double()
    if Wx is not None:
        gx = block_diagonal(x, Wx.double(), bx.double())
        ga = block_diagonal(x, Wa.double(), ba.double())
    else:
        gx, ga = gx.double(), ga.double()
    h0 = None if h0 is None else h0.double()

    def flags_for(shape_bl, flags):
        if reset_mode == "flags":
            return flags.bool()
        out = torch.zeros(shape_bl, dtype=torch.bool, device=x.device)
        if reset_mode == "sequence_start":
            out[:, 0] = True
        return out

    if cu_seqlens is None:
        return rglru_dense(x, a_param, gx, ga, flags_for(x.shape[:2], reset), h0)
    ys, hs = [], []
    for n in range(len(cu_seqlens) - 1):
        s, e = cu_seqlens[n], cu_seqlens[n + 1]
        flags = None if reset is None else reset[s:e][None]
        h0_n = None if h0 is None else h0[n:n + 1]
        if e == s:
            ys.append(x[s:e])
            hs.append(torch.zeros_like(x[0:1]) if h0_n is None else h0_n)
            continue
        y, h = rglru_dense(x[None, s:e], a_param, gx[None, s:e], ga[None, s:e], flags_for((1, e - s), flags), h0_n)
        ys.append(y[0])
        hs.append(h)
    return torch.cat(ys, dim=0), torch.cat(hs, dim=0)


def gate_residual_reference(residual: Tensor, y: Tensor, gate: Tensor, idx: Tensor) -> Tensor:
    """SPEC §2 in float64: residual + gate[idx] * y."""
    return residual.double() + gate.double().index_select(0, idx.long()) * y.double()


class ReferenceBlockDiagonalLinear(nn.Module):
    """The parameter layout of recurrentgemma's torch BlockDiagonalLinear (w [H, w, w], b [H, w])."""

    def __init__(self, width: int, num_blocks: int, device=None, dtype=None):
        super().__init__()
        block = width // num_blocks
        self.w = nn.Parameter(torch.randn(num_blocks, block, block, device=device, dtype=dtype) / block**0.5)
        self.b = nn.Parameter(0.1 * torch.randn(num_blocks, block, device=device, dtype=dtype))


class ReferenceRGLRU(nn.Module):
    """A float64 RG-LRU with recurrentgemma's parameter names, to produce state dicts and expected outputs."""

    def __init__(self, width: int, num_heads: int, device=None, dtype=torch.float64):
        super().__init__()
        self.a_param = nn.Parameter(torch.empty(width, device=device, dtype=dtype).uniform_(0.5, 4.0))
        self.input_gate = ReferenceBlockDiagonalLinear(width, num_heads, device, dtype)
        self.a_gate = ReferenceBlockDiagonalLinear(width, num_heads, device, dtype)

    def forward(self, x, segment_pos, cache=None, return_cache=True):
        y, h = rglru_reference(x, self.a_param, self.input_gate.w, self.input_gate.b, self.a_gate.w,
                               self.a_gate.b, reset=segment_pos == 0, reset_mode="flags", h0=cache)
        return y, (h if return_cache else None)


def relative_l2(got: Tensor, want: Tensor) -> float:
    got, want = got.double(), want.double()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-300))
