"""Context parallelism in the PyTorch binding.

* On one GPU: the fast mode's steps (hawk_torch.context_parallel: forward_transfer, carry_in, forward_correct,
  backward_transfer, dh_final_of, backward_correct) run for P pieces of one sequence, with the all-gathers
  replaced by stacking, against one hawk_torch.rglru call. When the carry dies out within the corrected tokens,
  the corrections stop early and y, h_final, dx and dh0 are bitwise one call's; with long memories they rerun
  the piece and stay within fp32 rounding.
* On two GPUs: examples/torch/context_parallel_check.py under torchrun (both modes, through NCCL)."""

import os
import pathlib
import subprocess
import sys

import pytest
import torch

import hawk_torch
from hawk_torch import context_parallel as cp
from support import a_param_values, requires_cuda, uniform

CORRECTION_TOKENS = 512


def _same_bits(a, b):
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _relative_l2(got, want):
    return float((got.double() - want.double()).norm() / want.double().norm())


def _problem(lengths, a_param, width=256, num_blocks=2):
    """One sequence (B = 1) of sum(lengths) bf16 tokens; fp32 master weights holding bf16 values, so their
    gradients are fp32 and comparable to fp32 rounding."""
    w = width // num_blocks
    L = sum(lengths)
    x = uniform((1, L, width), torch.bfloat16)
    dy = uniform((1, L, width), torch.bfloat16)
    Wx = (torch.randn(num_blocks, w, w, device="cuda") / w**0.5).to(torch.bfloat16).float()
    Wa = (torch.randn(num_blocks, w, w, device="cuda") / w**0.5).to(torch.bfloat16).float()
    bx = 0.5 * uniform((num_blocks, w))
    ba = 0.5 * uniform((num_blocks, w))
    dh_final = uniform((1, width))
    return x, dy, dh_final, [a_param, Wx, bx, Wa, ba]


def _one_call(x, dy, dh_final, params):
    leaves = [t.detach().clone().requires_grad_(True) for t in [x] + params]
    y, h_final = hawk_torch.rglru(*leaves, reset="sequence_start")
    torch.autograd.backward([y, h_final], [dy, dh_final])
    return y.detach(), h_final.detach(), [t.grad for t in leaves]


def _simulated_fast_mode(x, dy, dh_final, params, lengths):
    """The fast mode's steps for every piece, the all-gathers replaced by stacking. Returns y, the last h_final,
    dx, the parameter gradients summed over pieces in rank order, and the outcomes of the corrections."""
    starts = [sum(lengths[:r]) for r in range(len(lengths))]
    P = len(lengths)
    pieces = [cp.piece_of("test", x[:, s:s + n].contiguous(), *params, gx=None, ga=None,
                          reset="sequence_start" if r == 0 else "none", h0=None, first=r == 0)[0]
              for r, (s, n) in enumerate(zip(starts, lengths))]
    firsts = [cp.forward_transfer(piece, None, r == 0) for r, piece in enumerate(pieces)]
    pairs = torch.stack([pass1[3] for pass1 in firsts])
    outcomes = {"forward": [], "backward": []}
    forwards, carries = [], []
    for r, (piece, (y, h_end, checkpoints, pair)) in enumerate(zip(pieces, firsts)):
        if r == 0:
            forwards.append((y, h_end, checkpoints))
            carries.append(None)
            continue
        carry = cp.carry_in(pairs, r)
        y, h_final, checkpoints, stopped = cp.forward_correct(piece, y, h_end, checkpoints, carry, CORRECTION_TOKENS)
        outcomes["forward"].append(stopped)
        forwards.append((y, h_final, checkpoints))
        carries.append(carry)
    pass1s, triples = [], []
    for r, piece in enumerate(pieces):
        dy_piece = dy[:, starts[r]:starts[r] + lengths[r]].contiguous()
        last = r == P - 1
        pass1, triple = cp.backward_transfer(piece, carries[r], forwards[r][2], dy_piece,
                                             dh_final if last else None, firsts[r][3][0], last, CORRECTION_TOKENS)
        pass1s.append(pass1)
        triples.append(triple)
    triples = torch.stack(triples)
    gradients = []
    for r, piece in enumerate(pieces):
        dy_piece = dy[:, starts[r]:starts[r] + lengths[r]].contiguous()
        grads, stopped = cp.backward_correct(piece, carries[r], forwards[r][2], dy_piece, pass1s[r],
                                             cp.dh_final_of(triples, r))
        if stopped is not None:
            outcomes["backward"].append(stopped)
        gradients.append(grads)
    y = torch.cat([f[0] for f in forwards], dim=1)
    dx = torch.cat([g.dx for g in gradients], dim=1)
    parameter_sums = []
    for i in range(5):
        total = gradients[0].parameters[i].clone()
        for g in gradients[1:]:
            total += g.parameters[i]
        parameter_sums.append(total)
    return y, forwards[-1][1], dx, parameter_sums, outcomes


# Pieces of 700, 900 and 300 tokens: the first two longer than the corrected 512 (and not multiples of 64), the
# last shorter, so its forward correction reruns it whole, and the last piece's backward needs none.
LENGTHS = [700, 900, 300]


@requires_cuda
def test_fast_mode_steps_stop_early_and_equal_one_call_bitwise(seed):
    # Radii softplus^-1 in (0.27, 0.73): the carry's weight A underflows to 0 within a few hundred tokens.
    a_param = uniform((256,))
    x, dy, dh_final, params = _problem(LENGTHS, a_param)
    y_ref, h_ref, grads_ref = _one_call(x, dy, dh_final, params)
    y, h_final, dx, parameter_sums, outcomes = _simulated_fast_mode(x, dy, dh_final, params, LENGTHS)
    assert outcomes == {"forward": [True, False], "backward": [True, True]}, outcomes
    assert _same_bits(y, y_ref)
    assert _same_bits(h_final, h_ref)
    assert _same_bits(dx, grads_ref[0])
    # dWx, dbx, dWa, dba, da_param against a_param, Wx, bx, Wa, ba's gradients (one call sums differently)
    for got, want in zip(parameter_sums, [grads_ref[2], grads_ref[3], grads_ref[4], grads_ref[5], grads_ref[1]]):
        assert _relative_l2(got.view(want.shape), want) <= 1e-5
    # Negative control: the middle piece run alone (zero carry-in) is not one call's piece.
    alone, _ = hawk_torch.rglru(x[:, 700:1600].contiguous(), *params, reset="none")
    assert not _same_bits(alone, y_ref[:, 700:1600])


@requires_cuda
def test_fast_mode_steps_rerun_the_piece_when_the_carry_lives_on(seed):
    # Radii up to 0.999: the carry is still alive after 512 tokens, so the corrections rerun their pieces.
    a_param = a_param_values(256)
    x, dy, dh_final, params = _problem(LENGTHS, a_param)
    y_ref, h_ref, grads_ref = _one_call(x, dy, dh_final, params)
    y, h_final, dx, parameter_sums, outcomes = _simulated_fast_mode(x, dy, dh_final, params, LENGTHS)
    assert outcomes == {"forward": [False, False], "backward": [False, False]}, outcomes
    # The combine rounds A·h + h_end once per piece where one call rounds once per token: fp32 rounding on the
    # states, which can move a bf16 output by one rounding step here and there.
    assert _relative_l2(h_final, h_ref) <= 1e-5
    assert _relative_l2(y, y_ref) <= 1e-3
    assert _relative_l2(dx, grads_ref[0]) <= 1e-3
    for got, want in zip(parameter_sums, [grads_ref[2], grads_ref[3], grads_ref[4], grads_ref[5], grads_ref[1]]):
        assert _relative_l2(got.view(want.shape), want) <= 1e-4


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="context parallelism over NCCL needs 2 GPUs")
def test_both_modes_over_two_gpus_equal_one_call():
    script = pathlib.Path(__file__).resolve().parents[1] / "context_parallel_check.py"
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")  # NVLink multicast off
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script)], capture_output=True, text=True, env=env, timeout=600)
    print(done.stdout[-4000:], done.stderr[-4000:])
    assert done.returncode == 0
    assert done.stdout.count("bitwise equal to one call") == 4  # exact and fast, on each rank
