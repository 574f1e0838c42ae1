"""hawk_torch: hawk's batch-invariant RG-LRU and gate-residual CUDA kernels as PyTorch operators.

    import hawk_torch
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba)          # fused RG-LRU, differentiable
    out = hawk_torch.gate_residual(residual, y, gate, idx)        # residual + gate[idx] * y
    layer = hawk_torch.RGLRU(width=2560, num_heads=10)            # recurrentgemma's RGLRU, same state dict

Importing builds the operator library on first use (torch.utils.cpp_extension, cached; see _build.py) and
registers torch.ops.hawk.* with fake implementations and autograd, so torch.compile(fullgraph=True) traces
through them.
"""

from ._build import load_library
from ._ops import (FUSED_BLOCK_WIDTHS, TIME_CHUNK, gate_residual, rglru, rglru_decode_)
from .modules import RGLRU, BlockDiagonalLinear

__all__ = [
    "FUSED_BLOCK_WIDTHS",
    "TIME_CHUNK",
    "BlockDiagonalLinear",
    "RGLRU",
    "gate_residual",
    "load_library",
    "rglru",
    "rglru_decode_",
]
