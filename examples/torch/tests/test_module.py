"""hawk_torch.RGLRU: recurrentgemma's parameter names, state dict and call signature."""

from __future__ import annotations

import torch

from support import skip_module_without_cuda

skip_module_without_cuda()  # before importing hawk_torch, which needs a GPU

import hawk_torch  # noqa: E402
from reference import ReferenceRGLRU, relative_l2, rglru_reference  # noqa: E402
from support import PARAMETER_TOLERANCE, STATE_TOLERANCE, STORAGE_TOLERANCE, requires_cuda, uniform  # noqa: E402

pytestmark = requires_cuda

W, H = 512, 2  # w = 256


def _segment_positions(B, L, starts):
    """segment_pos [B, L]: positions within documents that start at the given token indices (and at 0)."""
    pos = torch.empty(B, L, dtype=torch.int32, device="cuda")
    for b in range(B):
        p = 0
        for t in range(L):
            if t in starts[b]:
                p = 0
            pos[b, t] = p
            p += 1
    return pos


def test_parameters_have_recurrentgemma_names_and_shapes():
    layer = hawk_torch.RGLRU(W, H, device="cuda")
    shapes = {name: tuple(p.shape) for name, p in layer.named_parameters()}
    w = W // H
    assert shapes == {"a_param": (W,), "input_gate.w": (H, w, w), "input_gate.b": (H, w), "a_gate.w": (H, w, w),
                      "a_gate.b": (H, w)}
    cache = hawk_torch.RGLRU.init_cache(3, W, device="cuda")
    assert cache.shape == (3, W) and cache.dtype == torch.float32 and torch.count_nonzero(cache) == 0


def test_a_recurrentgemma_state_dict_loads_and_gives_its_outputs(seed):
    reference = ReferenceRGLRU(W, H, device="cuda")
    layer = hawk_torch.RGLRU(W, H, device="cuda")
    layer.load_state_dict(reference.state_dict(), strict=True)
    ReferenceRGLRU(W, H, device="cuda").load_state_dict(layer.state_dict(), strict=True)  # and back

    B, L, dtype = 2, 100, torch.bfloat16
    x = uniform((B, L, W), dtype).requires_grad_(True)
    segment_pos = _segment_positions(B, L, [{0, 40}, {77}])  # sequence 1 continues the cache until token 77
    cache = uniform((B, W))
    y, last_h = layer(x, segment_pos, cache)
    dy = uniform((B, L, W), dtype)
    (y.float() * dy.float()).sum().backward()

    # the reference sees what the kernel sees: the projection weights rounded to x's dtype
    p = {name: (t.detach().to(dtype) if name.endswith(".w") else t.detach()).double().requires_grad_(True)
         for name, t in layer.named_parameters()}
    x64 = x.detach().double().requires_grad_(True)
    y64, h64 = rglru_reference(x64, p["a_param"], p["input_gate.w"], p["input_gate.b"], p["a_gate.w"],
                               p["a_gate.b"], reset=segment_pos == 0, h0=cache.double())
    (y64 * dy.double()).sum().backward()
    assert relative_l2(y, y64) <= STORAGE_TOLERANCE[dtype], seed
    assert relative_l2(last_h, h64) <= STATE_TOLERANCE, seed
    assert relative_l2(x.grad, x64.grad) <= STORAGE_TOLERANCE[dtype], seed
    for name, param in layer.named_parameters():
        assert param.grad.dtype == torch.float32
        assert relative_l2(param.grad, p[name].grad) <= PARAMETER_TOLERANCE[dtype], (name, seed)

    y2, none = layer(x.detach(), segment_pos, cache, return_cache=False)
    assert none is None and torch.equal(y2, y.detach())


def test_decoding_after_a_prefill_is_bitwise_one_forward(seed):
    layer = hawk_torch.RGLRU(W, H, device="cuda")
    B, L, P = 3, 40, 25  # prefill P tokens, decode the rest one by one
    x = uniform((B, L, W), torch.bfloat16)
    segment_pos = _segment_positions(B, L, [{0}, {0, 30}, {0, 25}])
    with torch.no_grad():
        y, h = layer(x, segment_pos)
        y_prefill, cache = layer(x[:, :P], segment_pos[:, :P])
        assert torch.equal(y_prefill, y[:, :P])
        pool = torch.zeros(8, W, device="cuda")
        slots = torch.tensor([6, 0, 3], dtype=torch.int32, device="cuda")
        pool[slots.long()] = cache
        for t in range(P, L):
            y_t = layer.decode_(x[:, t:t + 1], pool, slots, segment_pos[:, t:t + 1])
            assert torch.equal(y_t, y[:, t:t + 1]), f"token {t}"
    assert torch.equal(pool[slots.long()], h)
