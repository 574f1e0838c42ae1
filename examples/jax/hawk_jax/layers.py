"""recurrentgemma's JAX ``RGLRU`` layer on hawk's kernels: the parameter tree, the call and a flax module.

The parameter tree is recurrentgemma's (``recurrentgemma.jax.layers.RGLRU``)::

    {"a_param": [W], "input_gate": {"w": [H, w, w], "b": [H, w]}, "a_gate": {"w": [H, w, w], "b": [H, w]}}

so a recurrentgemma checkpoint's ``rg_lru`` subtree runs here unchanged. ``rglru_layer(params, x, segment_pos,
cache, return_cache)`` is the layer's call as a plain function of that tree (no flax needed); ``RGLRU`` (needs
flax) is a drop-in for the flax module: same attributes, same parameters (names, shapes, initialisers) and the
same call ``(x, segment_pos, cache=None, return_cache=True) -> (y, last_h)``.

Dtypes follow recurrentgemma: the computation dtype is the layer's ``dtype`` or, when None, the promotion of x's
and the parameters' dtypes (bf16 x with fp32 parameters computes, and returns y, in fp32, as recurrentgemma
does); the state ``last_h`` is fp32. hawk does the gate math and the recurrence in fp32 whatever that dtype is
(recurrentgemma does the gate math in the computation dtype), so results agree to that dtype's rounding.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp

from . import _checks as checks
from ._ops import rglru

Array = jax.Array


def rglru_arguments(params: Mapping[str, Any]) -> dict:
    """hawk's RG-LRU weights from recurrentgemma's parameter tree: ``{w_x, b_x, w_a, b_a, a_param}``.

    Raises a ValueError naming the missing or misshapen entry; the values themselves are passed through (no
    copy, no cast: casts happen in ``rglru``, where their gradients are handled)."""
    where = "hawk_jax.rglru_arguments"
    try:
        arguments = {"w_x": params["input_gate"]["w"], "b_x": params["input_gate"]["b"],
                     "w_a": params["a_gate"]["w"], "b_a": params["a_gate"]["b"], "a_param": params["a_param"]}
    except (KeyError, TypeError) as error:
        checks.fail(where, f"params must be recurrentgemma's RGLRU tree {{'a_param', 'input_gate': {{'w', 'b'}}, "
                           f"'a_gate': {{'w', 'b'}}}}; missing {error}")
    w_x = arguments["w_x"]
    if len(w_x.shape) != 3 or w_x.shape[1] != w_x.shape[2]:
        checks.fail(where, f"input_gate.w must be [H, w, w], got {list(w_x.shape)}")
    heads, block = w_x.shape[0], w_x.shape[1]
    for name, key, shape in (("a_gate.w", "w_a", (heads, block, block)), ("input_gate.b", "b_x", (heads, block)),
                             ("a_gate.b", "b_a", (heads, block)), ("a_param", "a_param", (heads * block,))):
        checks.check_shape(where, name, arguments[key], shape)
    return arguments


def computation_dtype(x, params: Mapping[str, Any], dtype=None):
    """The dtype recurrentgemma's layer computes in: ``dtype``, or the promotion of x's and the parameters'."""
    if dtype is not None:
        return jnp.dtype(dtype)
    leaves = [params["a_param"], params["input_gate"]["w"], params["input_gate"]["b"], params["a_gate"]["w"],
              params["a_gate"]["b"]]
    return jnp.result_type(x, *leaves)


def _block_diagonal(x, w, b):
    """``x[..., h, i] · w[h, i, j] + b[h, j]``, flattened back to [..., W]: the gate logits, when hawk has no fused
    configuration for the block width."""
    heads, block = w.shape[0], w.shape[1]
    blocks = x.reshape(*x.shape[:-1], heads, block)
    return (jnp.einsum("...hi,hij->...hj", blocks, w) + b).reshape(x.shape)


def rglru_layer(params: Mapping[str, Any], x: Array, segment_pos: Array, cache: Optional[Array] = None,
                return_cache: bool = True, *, dtype=None, validate: bool = True,
                backward_workspace_limit: Optional[int] = None) -> Tuple[Array, Optional[Array]]:
    """recurrentgemma's ``RGLRU.__call__`` as a function of its parameter tree.

    x ``[B, L, W]``, segment_pos ``[B, L]`` (a token with segment_pos 0 starts a new document: the state is
    dropped there), cache ``[B, W]`` (the state to continue) or None. Returns ``(y [B, L, W], last_h [B, W] fp32
    or None)``. Block widths W / H of 64, 128 and 256 run fully fused; others project the gates with XLA first
    (gate-logits mode). ``backward_workspace_limit``: see hawk_jax.rglru.
    """
    where = "hawk_jax.rglru_layer"
    arguments = rglru_arguments(params)
    compute = computation_dtype(x, params, dtype)
    if compute not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
        checks.fail(where, f"hawk computes in float32, float16 or bfloat16; this layer would compute in {compute} "
                           "(set the layer's dtype)", TypeError)
    if len(x.shape) != 3:
        checks.fail(where, f"x must be [B, L, W], got {list(x.shape)}")
    if tuple(segment_pos.shape) != tuple(x.shape[:2]):
        checks.fail(where, f"segment_pos must be [B, L] = {list(x.shape[:2])}, got {list(segment_pos.shape)}")
    x = x.astype(compute)
    block = arguments["w_x"].shape[1]
    if block in checks.FUSED_BLOCK_WIDTHS:
        y, last_h = rglru(x, arguments["a_param"], arguments["w_x"], arguments["b_x"], arguments["w_a"],
                          arguments["b_a"], segment_pos=segment_pos, h0=cache, validate=validate,
                          backward_workspace_limit=backward_workspace_limit)
    else:
        g_x = _block_diagonal(x, arguments["w_x"].astype(compute), arguments["b_x"].astype(compute))
        g_a = _block_diagonal(x, arguments["w_a"].astype(compute), arguments["b_a"].astype(compute))
        y, last_h = rglru(x, arguments["a_param"], g_x=g_x, g_a=g_a, segment_pos=segment_pos, h0=cache,
                          validate=validate, backward_workspace_limit=backward_workspace_limit)
    return y, (last_h if return_cache else None)


def rnn_param_init(min_rad: float, max_rad: float, eps: float = 1e-8):
    """recurrentgemma's initialiser of ``a_param``: radii a = exp(-softplus(a_param)) with a² uniform on
    [min_rad², max_rad²] (uniform in area on the ring), so that a_param = softplus⁻¹(-½ log a²)."""

    def init(key, shape, dtype=jnp.float32):
        u = jax.random.uniform(key, shape=shape)
        log_radius = 0.5 * jnp.log(u * (max_rad**2 - min_rad**2) + min_rad**2 + eps)  # log a, negative
        return jnp.log(jnp.exp(-log_radius) - 1.0).astype(dtype)  # softplus⁻¹(-log a)

    return init


def init_cache(batch_size: int, width: int) -> Array:
    """A zero RG-LRU state ``[batch_size, width]`` (always fp32)."""
    return jnp.zeros((batch_size, width), dtype=jnp.float32)


try:
    import flax.linen as nn
except ImportError:  # the module needs flax; the functions above do not
    nn = None

if nn is not None:

    class BlockDiagonalLinear(nn.Module):
        """recurrentgemma's block-diagonal linear layer (parameters ``w [H, i, o]``, ``b [H, o]``). Inside
        ``RGLRU`` it only holds the gate parameters (hawk fuses the projection); called, it projects."""

        width_input: int
        num_blocks: int
        width_output: Optional[int] = None
        w_init_variance_scale: float = 1.0
        dtype: Any = None
        param_dtype: Any = jnp.float32

        def setup(self):
            width_output = self.width_input if self.width_output is None else self.width_output
            if self.width_input % self.num_blocks or width_output % self.num_blocks:
                raise ValueError(f"BlockDiagonalLinear: widths {self.width_input}, {width_output} are not "
                                 f"divisible by num_blocks {self.num_blocks}")
            block_in, block_out = self.width_input // self.num_blocks, width_output // self.num_blocks
            kernel_init = nn.initializers.variance_scaling(scale=self.w_init_variance_scale, mode="fan_in",
                                                           distribution="normal")
            self.w = self.param("w", kernel_init, [self.num_blocks, block_in, block_out], self.param_dtype)
            self.b = self.param("b", nn.initializers.zeros_init(), [self.num_blocks, block_out], self.param_dtype)

        def __call__(self, x):
            x, w, b = nn.dtypes.promote_dtype(x, self.w, self.b, dtype=self.dtype)
            return _block_diagonal(x, w, b)

    class RGLRU(nn.Module):
        """Drop-in for ``recurrentgemma.jax.layers.RGLRU`` running hawk's kernels.

        Attributes as recurrentgemma's. ``scan_type`` and ``scan_sharding_spec`` are accepted and unused (hawk
        is the scan); ``only_real`` must be True (hawk implements the real RG-LRU, recurrentgemma's default).
        """

        width: int
        num_heads: int
        scan_type: Any = None
        w_init_variance_scale: float = 1.0
        scan_sharding_spec: Any = None
        dtype: Any = None
        param_dtype: Any = jnp.float32
        only_real: bool = True
        min_rad: float = 0.9
        #: hawk's device checks (see hawk_jax.rglru); nothing to check for dense batches
        validate: bool = True
        #: the most bytes the backward's workspace may take (see hawk_jax.rglru); None: the one pass's
        backward_workspace_limit: Optional[int] = None

        def setup(self):
            if not self.only_real:
                raise NotImplementedError("hawk_jax.RGLRU: only_real=False (the complex RG-LRU) is not implemented")
            self.a_param = self.param("a_param", rnn_param_init(self.min_rad, 0.999), [self.width], self.param_dtype)
            gate = dict(width_input=self.width, num_blocks=self.num_heads,
                        w_init_variance_scale=self.w_init_variance_scale, dtype=self.dtype,
                        param_dtype=self.param_dtype)
            self.input_gate = BlockDiagonalLinear(name="input_gate", **gate)
            self.a_gate = BlockDiagonalLinear(name="a_gate", **gate)

        def __call__(self, x, segment_pos, cache=None, return_cache: bool = True):
            params = {"a_param": self.a_param, "input_gate": {"w": self.input_gate.w, "b": self.input_gate.b},
                      "a_gate": {"w": self.a_gate.w, "b": self.a_gate.b}}
            return rglru_layer(params, x, segment_pos, cache, return_cache, dtype=self.dtype,
                               validate=self.validate, backward_workspace_limit=self.backward_workspace_limit)

        @classmethod
        def init_cache(cls, batch_size: int, width: int) -> Array:
            return init_cache(batch_size, width)
