"""hawk_jax: hawk's batch-invariant, deterministic RG-LRU and gate-residual CUDA kernels for JAX (XLA FFI).

* ``rglru`` / ``rglru_decode`` / ``gate_residual``: the kernels as JAX functions (jit, grad, vmap);
* ``rglru_layer`` / ``RGLRU``: recurrentgemma's JAX ``RGLRU`` layer (its parameter tree and call) on them;
  ``RGLRU`` is a flax module and needs flax.

The CUDA library is loaded on first use (hawk_jax/_library.py says where it is looked for).
"""

from ._checks import FUSED_BLOCK_WIDTHS
from ._library import LibraryNotFoundError, library_path
from ._ops import gate_residual, rglru, rglru_decode, time_chunk
from ._version import __version__
from .layers import computation_dtype, init_cache, rglru_arguments, rglru_layer, rnn_param_init

__all__ = [
    "FUSED_BLOCK_WIDTHS",
    "LibraryNotFoundError",
    "__version__",
    "computation_dtype",
    "gate_residual",
    "init_cache",
    "library_path",
    "rglru",
    "rglru_arguments",
    "rglru_decode",
    "rglru_layer",
    "rnn_param_init",
    "time_chunk",
]

try:
    from .layers import RGLRU, BlockDiagonalLinear

    __all__ += ["BlockDiagonalLinear", "RGLRU"]
except ImportError:  # no flax: the functional API above works without it
    pass
