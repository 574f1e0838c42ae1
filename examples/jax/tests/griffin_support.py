"""recurrentgemma's whole Griffin model run twice: as shipped, and with its RGLRU class swapped for hawk_jax's
(the drop-in, in the model it is meant for). Needs flax and recurrentgemma (skips cleanly without them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import hawk_jax


def griffin_outputs_both_ways(monkeypatch):
    """(theirs, ours): each (logits of a 12-token prefill, its cache, logits of one decode step from that cache),
    from the same parameters of a small Griffin (a recurrent and an attention block, lru_width 128, 2 heads)."""
    pytest.importorskip("flax")
    layers = pytest.importorskip("recurrentgemma.jax.layers")
    from recurrentgemma import common
    from recurrentgemma.jax import griffin

    kinds = common.TemporalBlockType
    config = common.GriffinConfig(vocab_size=64, width=128, mlp_expanded_width=256, num_heads=2,
                                  block_types=(kinds.RECURRENT, kinds.ATTENTION), embeddings_scale_by_sqrt_dim=True,
                                  attention_window_size=16, logits_soft_cap=30.0, lru_width=128)
    tokens = jax.random.randint(jax.random.PRNGKey(23), (2, 12), 0, 64)
    pos = jnp.tile(jnp.arange(12), (2, 1))
    params = griffin.Griffin(config).init(jax.random.PRNGKey(24), tokens, pos)

    def run():
        model = griffin.Griffin(config)
        logits, cache = model.apply(params, tokens, pos)
        step_logits, _ = model.apply(params, tokens[:, :1], jnp.full((2, 1), 12), cache)
        return logits, cache, step_logits

    theirs = run()
    monkeypatch.setattr(layers, "RGLRU", hawk_jax.RGLRU)  # recurrentgemma's blocks build layers.RGLRU at setup
    return theirs, run()
