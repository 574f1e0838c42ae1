"""RG-LRU parameter names of Hugging Face transformers' RecurrentGemma, mapped to hawk_torch.RGLRU's.

``hawk_torch.RGLRU`` stores its parameters under recurrentgemma's PyTorch names. transformers'
``RecurrentGemmaRglru`` (``model.layers.N.temporal_block.rg_lru.*``) names the same five tensors differently:

=================  ==========================  ==============
hawk_torch.RGLRU   transformers                shape
=================  ==========================  ==============
``a_param``        ``recurrent_param``         ``[W]``
``input_gate.w``   ``input_gate_weight``       ``[H, w, w]``
``input_gate.b``   ``input_gate_bias``         ``[H, w]``
``a_gate.w``       ``recurrent_gate_weight``   ``[H, w, w]``
``a_gate.b``       ``recurrent_gate_bias``     ``[H, w]``
=================  ==========================  ==============

with w = W / H. The values need no change: transformers computes each gate as ``baddbmm(bias[:, None, :],
x[H, tokens, w], weight)``, i.e. ``gate[h, j] = sum_i x[h, i] * weight[h, i, j] + bias[h, j]``, the orientation of
recurrentgemma's ``einsum("...hi,hij->...hj")`` that hawk uses, and both take ``log a = -8 * r *
softplus(a_param)``. tests/test_checkpoints.py checks this numerically against the transformers formula.

No torch and no relative import here (the CPU tests load this file on its own): tensors are only moved between
dictionaries and their ``.shape`` read.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

#: transformers' name -> hawk_torch.RGLRU's (recurrentgemma's), relative to the layer's prefix
TRANSFORMERS_TO_HAWK = {
    "recurrent_param": "a_param",
    "input_gate_weight": "input_gate.w",
    "input_gate_bias": "input_gate.b",
    "recurrent_gate_weight": "a_gate.w",
    "recurrent_gate_bias": "a_gate.b",
}


def rename_transformers_keys(state_dict: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A new state dict in which every ``prefix + <transformers name>`` is ``prefix + <hawk name>``; other keys
    (and all values) are kept as they are. A layer given under both names is a ValueError naming both."""
    renamed = dict(state_dict)
    for theirs, ours in TRANSFORMERS_TO_HAWK.items():
        if prefix + theirs not in renamed:
            continue
        if prefix + ours in renamed:
            raise ValueError(f"hawk_torch.RGLRU: the state dict holds both {prefix + theirs!r} (transformers' name) "
                             f"and {prefix + ours!r} (recurrentgemma's); keep one")
        renamed[prefix + ours] = renamed.pop(prefix + theirs)
    return renamed


def transformers_layer_shape(state_dict: Mapping[str, Any], prefix: str = "") -> Tuple[int, int]:
    """(width W, num_heads H) of the transformers RG-LRU under ``prefix``, from its tensors' shapes, which are
    checked against each other (ValueError naming the key)."""
    missing = [prefix + name for name in TRANSFORMERS_TO_HAWK if prefix + name not in state_dict]
    if missing:
        raise ValueError(f"hawk_torch.RGLRU.from_transformers_state_dict: no {', '.join(map(repr, missing))} in the "
                         "state dict" + (f" (keys under prefix {prefix!r})" if prefix else
                                         " (for a whole model pass prefix='model.layers.N.temporal_block.rg_lru.')"))
    shapes = {name: tuple(state_dict[prefix + name].shape) for name in TRANSFORMERS_TO_HAWK}
    if len(shapes["recurrent_param"]) != 1:
        raise ValueError(f"hawk_torch.RGLRU: {prefix}recurrent_param must be [W], "
                         f"got {list(shapes['recurrent_param'])}")
    width = shapes["recurrent_param"][0]
    weight = shapes["input_gate_weight"]
    if len(weight) != 3 or weight[1] != weight[2] or weight[0] * weight[1] != width:
        raise ValueError(f"hawk_torch.RGLRU: {prefix}input_gate_weight must be [H, W/H, W/H] with W = {width} "
                         f"(the length of recurrent_param), got {list(weight)}")
    heads, block = weight[0], weight[1]
    expected = {"recurrent_gate_weight": (heads, block, block), "input_gate_bias": (heads, block),
                "recurrent_gate_bias": (heads, block)}
    for name, shape in expected.items():
        if shapes[name] != shape:
            raise ValueError(f"hawk_torch.RGLRU: {prefix}{name} must be {list(shape)} (H = {heads}, W/H = {block}), "
                             f"got {list(shapes[name])}")
    return width, heads
