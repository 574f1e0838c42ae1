"""Checks hawk_torch.context_parallel against one single-GPU call; run under torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 2 examples/torch/context_parallel_check.py

Every rank builds the same random problem (a fixed seed; B = 2, L = 3001, W = 512, H = 2, bf16, fused, reset at
each sequence start), runs the whole sequence on its own GPU as the reference, then its time piece through
context_parallel_rglru. y, dx and (rank 0) dh0 must be bitwise the reference's piece, the last rank's h_final
bitwise the reference's, and the fp32 parameter gradients, all-reduced over ranks, within 1e-5 relative. Exit status 0
when every rank agrees, 1 otherwise.
"""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hawk_torch  # noqa: E402
from hawk_torch.context_parallel import context_parallel_rglru  # noqa: E402


def main() -> int:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    dist.init_process_group("nccl")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    B, L, W, H = 2, 3001, 512, 2
    w = W // H
    generator = torch.Generator().manual_seed(1234)

    def rand(*shape, scale=1.0):
        return ((torch.rand(*shape, generator=generator) * 2 - 1) * scale).to(device)

    x = rand(B, L, W).to(torch.bfloat16)
    dy = rand(B, L, W).to(torch.bfloat16)
    # Weights held in fp32 with bf16 values: the projections round them to x's dtype (exactly), and their
    # gradients come back in fp32, so the all-reduced pieces can be held to fp32 rounding.
    Wx = rand(H, w, w, scale=2 / w**0.5).to(torch.bfloat16).float()
    Wa = rand(H, w, w, scale=2 / w**0.5).to(torch.bfloat16).float()
    bx, ba, a_param = rand(H, w, scale=0.5), rand(H, w, scale=0.5), rand(W)
    dh_final = rand(B, W)

    def leaves():
        return [t.detach().clone().requires_grad_(True) for t in (x, a_param, Wx, bx, Wa, ba)]

    # The reference: one call over the whole sequence.
    whole = leaves()
    y_whole, h_whole = hawk_torch.rglru(*whole, reset="sequence_start")
    torch.autograd.backward([y_whole, h_whole], [dy, dh_final])

    # This rank's piece.
    start, stop = L * rank // ranks, L * (rank + 1) // ranks
    mine = leaves()
    x_piece = mine[0][:, start:stop].detach().clone().requires_grad_(True)
    y, h_final = context_parallel_rglru(x_piece, *mine[1:], reset="sequence_start")
    outputs, grads = [y], [dy[:, start:stop]]
    if rank + 1 == ranks:  # only the last piece's final state is the sequence's
        outputs.append(h_final)
        grads.append(dh_final)
    torch.autograd.backward(outputs, grads)

    failures = []

    def same(name, got, want):
        if not torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8)):  # bitwise
            failures.append(f"{name} differs (max abs {float((got.float() - want.float()).abs().max()):.3e})")

    same("y", y.detach(), y_whole.detach()[:, start:stop])
    same("dx", x_piece.grad, whole[0].grad[:, start:stop])
    if rank + 1 == ranks:
        same("h_final", h_final.detach(), h_whole.detach())
    for name, got, want in zip(("a_param", "Wx", "bx", "Wa", "ba"), mine[1:], whole[1:]):
        grad = got.grad.float().clone()
        dist.all_reduce(grad)
        error = float((grad - want.grad.float()).norm() / want.grad.float().norm())
        if not error <= 1e-5:
            failures.append(f"d{name}: relative L2 {error:.3e} after the all-reduce")
    # Negative control: a piece run alone (no state from the previous rank) is not the reference's piece.
    if rank > 0:
        alone, _ = hawk_torch.rglru(x_piece.detach(), *[t.detach() for t in mine[1:]], reset="sequence_start")
        if torch.equal(alone.view(torch.uint8), y_whole.detach()[:, start:stop].contiguous().view(torch.uint8)):
            failures.append("negative control: the piece alone equals the reference (the check cannot fail)")

    verdict = torch.tensor([len(failures)], device=device)
    dist.all_reduce(verdict)
    print(f"rank {rank}/{ranks}: tokens [{start}, {stop}): " + ("; ".join(failures) if failures else
          "y, dx" + (", h_final" if rank + 1 == ranks else "") + " bitwise equal to one call; parameter "
          "gradients within 1e-5 after the all-reduce"), flush=True)
    dist.destroy_process_group()
    return 0 if int(verdict.item()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
