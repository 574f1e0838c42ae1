"""``hawk_torch.RGLRU``: a drop-in for recurrentgemma's PyTorch ``RGLRU`` layer, running on hawk's kernels.

Same constructor, parameter names and shapes (``input_gate.w [H, w, w]``, ``input_gate.b [H, w]``,
``a_gate.w``, ``a_gate.b``, ``a_param [W]``), so a recurrentgemma state dict loads with ``load_state_dict``;
so does a Hugging Face transformers one (``input_gate_weight``, ``recurrent_param``, ...: see _checkpoints.py), and
``RGLRU.from_transformers_state_dict`` builds the layer from one;
same call, ``forward(x, segment_pos, cache=None, return_cache=True) -> (y, last_h)``, where a token with
``segment_pos == 0`` starts a new document and ``cache`` (fp32 ``[B, W]``) is the state to continue.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import _checkpoints
from ._ops import rglru, rglru_decode_


class BlockDiagonalLinear(nn.Module):
    """``y[..., h, j] = sum_i x[..., h, i] * w[h, i, j] + b[h, j]`` over H diagonal blocks of width w = W / H.

    hawk's RG-LRU fuses these projections into its kernel; this module holds the parameters (recurrentgemma's
    names and layout) and can also be called on its own.
    """

    def __init__(self, width: int, num_blocks: int, w_init_variance_scale: float = 1.0,
                 device: Optional[torch.device] = None, dtype: Optional[torch.dtype] = None):
        super().__init__()
        if width % num_blocks != 0:
            raise ValueError(f"BlockDiagonalLinear: width {width} is not divisible by num_blocks {num_blocks}")
        self.width = width
        self.num_blocks = num_blocks
        self.w_init_variance_scale = w_init_variance_scale
        self.block_width = width // num_blocks
        self.w = nn.Parameter(torch.empty(num_blocks, self.block_width, self.block_width, device=device, dtype=dtype))
        self.b = nn.Parameter(torch.empty(num_blocks, self.block_width, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.w, mean=0.0, std=math.sqrt(self.w_init_variance_scale / self.block_width))
        nn.init.zeros_(self.b)

    def forward(self, x: Tensor) -> Tensor:
        blocks = x.unflatten(-1, (self.num_blocks, self.block_width))
        y = torch.einsum("...hi,hij->...hj", blocks, self.w) + self.b
        return y.flatten(-2)


def _accept_transformers_names(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                               error_msgs) -> None:
    """load_state_dict pre-hook of RGLRU: transformers' names under this layer's prefix become ours."""
    renamed = _checkpoints.rename_transformers_keys(state_dict, prefix)
    if renamed.keys() != state_dict.keys():  # load_state_dict hands its hooks its own copy: edit it in place
        state_dict.clear()
        state_dict.update(renamed)


class RGLRU(nn.Module):
    """The Real-Gated Linear Recurrent Unit (Griffin / Hawk) on hawk's fused kernels.

    ``num_heads`` is the number of diagonal blocks H of the gate projections; hawk ships fused kernels for
    block widths W / H of 64, 128 and 256 (RecurrentGemma 2B and 9B use 256).
    """

    def __init__(self, width: int, num_heads: int, w_init_variance_scale: float = 1.0,
                 device: Optional[torch.device] = None, dtype: Optional[torch.dtype] = None):
        super().__init__()
        self.width = width
        self.num_heads = num_heads
        self.w_init_variance_scale = w_init_variance_scale
        self.a_param = nn.Parameter(torch.empty(width, device=device, dtype=dtype))
        self.input_gate = BlockDiagonalLinear(width, num_heads, w_init_variance_scale, device=device, dtype=dtype)
        self.a_gate = BlockDiagonalLinear(width, num_heads, w_init_variance_scale, device=device, dtype=dtype)
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(_accept_transformers_names)

    @classmethod
    def from_transformers_state_dict(cls, state_dict, prefix: str = "", device: Optional[torch.device] = None,
                                     dtype: Optional[torch.dtype] = None) -> "RGLRU":
        """The layer holding the RG-LRU of a Hugging Face transformers RecurrentGemma state dict.

        ``prefix`` selects one layer of a whole model, e.g. ``"model.layers.0.temporal_block.rg_lru."``; width and
        heads come from the tensors' shapes. The layer is made on ``device``, else on the device the state dict's
        tensors are on (a CUDA state dict gives a layer ready to run). ``load_state_dict`` on an existing layer
        accepts transformers' names as well (the values need no change: see hawk_torch/_checkpoints.py)."""
        width, num_heads = _checkpoints.transformers_layer_shape(state_dict, prefix)
        own = {name[len(prefix):]: value for name, value in state_dict.items() if name.startswith(prefix)}
        if device is None:
            device = next((value.device for value in own.values() if isinstance(value, Tensor)), None)
        layer = cls(width, num_heads, device=device, dtype=dtype)
        layer.load_state_dict(_checkpoints.rename_transformers_keys(own))
        return layer

    def reset_parameters(self) -> None:
        self.input_gate.reset_parameters()
        self.a_gate.reset_parameters()
        self.a_param_init_(self.a_param)

    @staticmethod
    def a_param_init_(a_param: Tensor, min_rad: float = 0.9, max_rad: float = 0.999, eps: float = 1e-8) -> Tensor:
        """Recurrence radii uniform in area on the ring [min_rad, max_rad]: softplus(a_param) = -log(radius)."""
        with torch.no_grad():
            radius_squared = torch.empty_like(a_param, dtype=torch.float32).uniform_(min_rad**2 + eps,
                                                                                      max_rad**2 + eps)
            softplus_value = -0.5 * torch.log(radius_squared)  # -log(radius) > 0
            a_param.copy_(torch.log(torch.expm1(softplus_value)))  # softplus^-1
        return a_param

    def forward(self, x: Tensor, segment_pos: Tensor, cache: Optional[Tensor] = None,
                return_cache: bool = True) -> Tuple[Tensor, Optional[Tensor]]:
        """x ``[B, T, W]``, segment_pos ``[B, T]`` (0 starts a document), cache ``[B, W]`` or None.

        Returns ``(y [B, T, W] in x's dtype, last_h [B, W] fp32 or None)``.
        """
        if segment_pos.shape != x.shape[:2]:
            raise ValueError(f"hawk_torch.RGLRU: segment_pos must be [B, T] = {list(x.shape[:2])}, "
                             f"got {list(segment_pos.shape)}")
        reset = (segment_pos == 0).contiguous()
        y, last_h = rglru(x.contiguous(), self.a_param, self.input_gate.w, self.input_gate.b, self.a_gate.w,
                          self.a_gate.b, reset=reset, h0=cache)
        return y, (last_h if return_cache else None)

    def decode_(self, x: Tensor, state: Tensor, state_index: Optional[Tensor] = None,
                segment_pos: Optional[Tensor] = None) -> Tensor:
        """One or a few tokens per sequence continue states kept in a pool ``state [S, W]`` (fp32, updated in
        place; sequence n uses row ``state_index[n]``, -1 for a padding sequence: see hawk_torch.rglru_decode_).
        x ``[N, L, W]``. Returns y (no gradient)."""
        reset = None if segment_pos is None else (segment_pos == 0).contiguous()
        with torch.no_grad():
            return rglru_decode_(x.contiguous(), self.a_param, self.input_gate.w, self.input_gate.b, self.a_gate.w,
                                 self.a_gate.b, state=state, state_index=state_index, reset=reset)

    @classmethod
    def init_cache(cls, batch_size: int, width: int, device: Optional[torch.device] = None) -> Tensor:
        """A zero state ``[batch_size, width]`` fp32 (the RG-LRU state is always fp32)."""
        return torch.zeros((batch_size, width), dtype=torch.float32, device=device)
