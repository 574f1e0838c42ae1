"""Hugging Face transformers' RecurrentGemma RG-LRU names load into hawk_torch.RGLRU: the renaming and shape checks
(no GPU: ``cpu``), and on a GPU the converted layer computes what transformers' formula computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from reference import relative_l2
from support import STATE_TOLERANCE, STORAGE_TOLERANCE, a_param_values, load_standalone, requires_cuda, uniform

checkpoints = load_standalone("_checkpoints")

W, H = 256, 2  # block width 128


def transformers_layer(width, heads, device="cpu", prefix=""):
    """A state dict laid out as transformers' RecurrentGemmaRglru saves it (random values; no download)."""
    w = width // heads
    return {
        prefix + "recurrent_param": a_param_values(width, device),
        prefix + "input_gate_weight": torch.randn(heads, w, w, device=device) / w**0.5,
        prefix + "input_gate_bias": 0.1 * torch.randn(heads, w, device=device),
        prefix + "recurrent_gate_weight": torch.randn(heads, w, w, device=device) / w**0.5,
        prefix + "recurrent_gate_bias": 0.1 * torch.randn(heads, w, device=device),
    }


def transformers_rglru(sd, x, position_ids):
    """transformers' RecurrentGemmaRglru.forward, written out in float64: the gates are batched products
    ``baddbmm(bias, x[H, tokens, w], weight)``, so weight is indexed [head, in, out]. Returns (y, final state)."""
    B, L, width = x.shape
    heads, w = sd["input_gate_weight"].shape[:2]
    x = x.double()
    per_head = x.reshape(B * L, heads, w).permute(1, 0, 2)

    def gate(weight, bias):
        out = torch.baddbmm(bias.double()[:, None, :], per_head, weight.double())
        return torch.sigmoid(out.transpose(0, 1).reshape(B, L, width))

    input_gate = gate(sd["input_gate_weight"], sd["input_gate_bias"])
    recurrent_gate = gate(sd["recurrent_gate_weight"], sd["recurrent_gate_bias"])
    log_a = -8.0 * recurrent_gate * nn.functional.softplus(sd["recurrent_param"].double())
    reset = (position_ids == 0)[:, :, None]
    multiplier = torch.where(reset, torch.ones_like(log_a), torch.sqrt(1 - torch.exp(2 * log_a)))
    normalized = x * input_gate * multiplier
    a = torch.exp(log_a) * ~reset
    h = torch.zeros(B, width, dtype=torch.float64, device=x.device)
    ys = []
    for t in range(L):
        h = a[:, t] * h + normalized[:, t]
        ys.append(h)
    return torch.stack(ys, dim=1), h


# ---- names and shapes, no GPU -----------------------------------------------------------------------------------


@pytest.mark.cpu
def test_transformers_names_become_recurrentgemmas_and_values_are_untouched():
    prefix = "model.layers.0.temporal_block.rg_lru."
    sd = {**transformers_layer(W, H, prefix=prefix), **transformers_layer(W, H, prefix=prefix.replace("0", "1")),
          "model.layers.0.temporal_block.linear_x.weight": torch.zeros(3)}
    renamed = checkpoints.rename_transformers_keys(sd, prefix)
    for theirs, ours in [("recurrent_param", "a_param"), ("input_gate_weight", "input_gate.w"),
                         ("input_gate_bias", "input_gate.b"), ("recurrent_gate_weight", "a_gate.w"),
                         ("recurrent_gate_bias", "a_gate.b")]:
        assert prefix + theirs not in renamed
        assert renamed[prefix + ours] is sd[prefix + theirs]
    other = {k: v for k, v in renamed.items() if not k.startswith(prefix)}  # other layers and modules: unchanged
    assert other == {k: v for k, v in sd.items() if not k.startswith(prefix)}
    assert len(renamed) == len(sd)
    assert checkpoints.transformers_layer_shape(sd, prefix) == (W, H)
    assert checkpoints.transformers_layer_shape(transformers_layer(3 * 64, 3), "") == (192, 3)


@pytest.mark.cpu
def test_bad_transformers_state_dicts_are_clear_errors():
    sd = transformers_layer(W, H)
    with pytest.raises(ValueError, match="both 'input_gate_bias' .* and 'input_gate.b'"):
        checkpoints.rename_transformers_keys({**sd, "input_gate.b": sd["input_gate_bias"]})
    with pytest.raises(ValueError, match="no 'recurrent_param' in the state dict .*prefix="):
        checkpoints.transformers_layer_shape({k: v for k, v in sd.items() if k != "recurrent_param"})
    with pytest.raises(ValueError, match=r"recurrent_gate_bias must be \[2, 128\] .* got \[2, 64\]"):
        checkpoints.transformers_layer_shape({**sd, "recurrent_gate_bias": torch.zeros(2, 64)})
    with pytest.raises(ValueError, match=r"input_gate_weight must be \[H, W/H, W/H\] with W = 256"):
        checkpoints.transformers_layer_shape({**sd, "input_gate_weight": torch.zeros(4, 64, 64).transpose(0, 1)})


# ---- the converted layer computes transformers' RG-LRU (GPU) ---------------------------------------------------


@requires_cuda
def test_a_converted_layer_computes_what_transformers_computes(seed):
    import hawk_torch

    prefix = "model.layers.3.temporal_block.rg_lru."
    sd = transformers_layer(W, H, "cuda", prefix)
    layer = hawk_torch.RGLRU.from_transformers_state_dict(sd, prefix=prefix)
    assert (layer.width, layer.num_heads) == (W, H)

    B, L = 2, 150
    x = uniform((B, L, W), torch.float32)
    position_ids = torch.arange(L, device="cuda").repeat(B, 1)
    position_ids[1, 90:] -= 90  # a second document starts at token 90 of sequence 1
    y, last_h = layer(x, position_ids)
    own = {k[len(prefix):]: v for k, v in sd.items()}
    y64, h64 = transformers_rglru(own, x, position_ids)
    assert relative_l2(y, y64) <= STORAGE_TOLERANCE[torch.float32], seed
    assert relative_l2(last_h, h64) <= STATE_TOLERANCE, seed
    # a wrong orientation of the block weights would be caught: transposed blocks give other outputs
    flipped = {**own, "input_gate_weight": own["input_gate_weight"].transpose(1, 2),
               "recurrent_gate_weight": own["recurrent_gate_weight"].transpose(1, 2)}
    assert relative_l2(y, transformers_rglru(flipped, x, position_ids)[0]) > 100 * STORAGE_TOLERANCE[torch.float32]


@requires_cuda
def test_load_state_dict_takes_either_naming_scheme_inside_a_model(seed):
    import hawk_torch

    sd = transformers_layer(W, H, "cuda")
    model = nn.ModuleDict({"rg_lru": hawk_torch.RGLRU(W, H, device="cuda")})
    model.load_state_dict({f"rg_lru.{k}": v for k, v in sd.items()}, strict=True)
    layer = model["rg_lru"]
    assert torch.equal(layer.a_param, sd["recurrent_param"])
    assert torch.equal(layer.a_gate.w, sd["recurrent_gate_weight"])
    assert torch.equal(layer.input_gate.b, sd["input_gate_bias"])
    again = hawk_torch.RGLRU(W, H, device="cuda")
    again.load_state_dict(layer.state_dict(), strict=True)  # recurrentgemma's names still load as before
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), layer.parameters()))
    with pytest.raises(RuntimeError, match="size mismatch"):  # shapes are still checked by load_state_dict
        hawk_torch.RGLRU(2 * W, H, device="cuda").load_state_dict(sd)
