"""hawk_torch: hawk's batch-invariant RG-LRU and gate-residual CUDA kernels as PyTorch operators.

    import hawk_torch
    y, h = hawk_torch.rglru(x, a_param, Wx, bx, Wa, ba)          # fused RG-LRU, differentiable
    out = hawk_torch.gate_residual(residual, y, gate, idx)        # residual + gate[idx] * y
    layer = hawk_torch.RGLRU(width=2560, num_heads=10)            # recurrentgemma's RGLRU, same state dict

Importing loads the operator library (compiled into the package by ``pip install``, or in a checkout compiled on
first import and cached; see _build.py) and registers torch.ops.hawk.* with fake implementations and autograd, so
torch.compile(fullgraph=True) traces through them. Without a visible CUDA GPU, or on a GPU the library holds no
code for, the import raises ImportError naming the GPU and the library's architectures (``build_info()``).

Index tensors (cu_seqlens, state_index, idx) are checked on the device without a host synchronisation: a bad one
makes the call write nothing, and the RuntimeError naming it comes at the next hawk call on that device or from
``hawk_torch.check_device_errors()`` (which synchronises); ``hawk_torch.set_sync_checks(True)`` (or
HAWK_TORCH_SYNC_CHECKS=1) makes the faulting call raise at once. See _ops.py's docstring.
"""

from ._build import BuildInfo, build_info, get_include, load_library

__version__ = load_library().version  # checks the GPUs first: ImportError without one it can run on

from ._ops import (FUSED_BLOCK_WIDTHS, TIME_CHUNK, backward_workspace_limit, check_device_errors, gate_residual,
                   rglru, rglru_decode_, set_backward_workspace_limit, set_sync_checks, sync_checks_enabled)
from .modules import RGLRU, BlockDiagonalLinear

__all__ = [
    "BuildInfo",
    "FUSED_BLOCK_WIDTHS",
    "TIME_CHUNK",
    "BlockDiagonalLinear",
    "RGLRU",
    "backward_workspace_limit",
    "build_info",
    "check_device_errors",
    "gate_residual",
    "get_include",
    "load_library",
    "rglru",
    "rglru_decode_",
    "set_backward_workspace_limit",
    "set_sync_checks",
    "sync_checks_enabled",
]
