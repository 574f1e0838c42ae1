#!/usr/bin/env python3
"""Where the host time of one hawk_torch call goes, stage by stage (issue 14).

compare_torch.py --host-cost-only measures the whole forward+backward step; this script measures the stages it is
made of, each issued back to back with nothing synchronised inside the timed loop, and the same stages of a plain
PyTorch step as a yardstick for what the framework itself costs on this machine:

  torch_mul_grad        y = x * s; torch.autograd.grad(y, x, dy)          (PyTorch's own floor for a fwd+bwd step)
  hawk_forward_nograd   hawk_torch.rglru(...) under torch.no_grad()         (Python checks + one op + its kernel)
  hawk_forward_grad     the same with autograd recording (the saved tensors, the rounded weights)
  hawk_step             forward + torch.autograd.grad (what compare_torch.py reports)
  hawk_forward_op       torch.ops.hawk.rglru_forward called directly under torch.no_grad() (the wrapper's
                        arguments, fp32 master weights: no Python checks, the operator and its kernel)
  hawk_backward_op      torch.ops.hawk.rglru_backward called directly under torch.no_grad() with a saved forward's
                        inputs (weights rounded, fp32 checkpoints): the backward operator alone, through the
                        dispatcher (Autograd key, then CUDA) as a traced backward calls it
  hawk_backward_graph   torch.autograd.grad(retain_graph=True) on one recorded forward: the autograd node, the
                        engine and the backward as an eager step runs it (the formula calls the CUDA
                        implementation directly)
  torch_mul_backward    the same for y = x * s (PyTorch's floor for the backward alone)
  gate_residual_*       the same split for hawk_torch.gate_residual (default call and uniform layout)

Each row gives CPU time (time.process_time, every thread), the main thread's CPU time (time.thread_time) and wall
time per call, medians over repetitions. A gap between process and thread time is work on other threads (the
autograd engine's device thread, the CUDA driver's).

    python bench/host_cost_breakdown.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
if os.environ.get("HAWK_TORCH_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "examples" / "torch"))

import torch  # noqa: E402

import hawk_torch  # noqa: E402
from torch_bench_support import issue_cost_us  # noqa: E402 (bench/)

PER_REP = 8


def issue_cost(call, reps):
    """(process µs, thread µs, wall µs) per call after three warm-up calls (torch_bench_support.issue_cost_us)."""
    for _ in range(3):
        call()
    return issue_cost_us([call], reps, PER_REP)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=None)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    B, L, W, H = 4, 2048, 2048, 16
    w = W // H
    dev = "cuda"

    def bf16(*shape, grad=False):
        return (torch.rand(*shape, device=dev) * 2 - 1).to(torch.bfloat16).requires_grad_(grad)

    x, dy = bf16(B, L, W, grad=True), bf16(B, L, W)
    radius = torch.empty(W, device=dev).uniform_(0.9, 0.999)
    a_param = torch.log(torch.expm1(-torch.log(radius))).requires_grad_(True)
    Wx = (torch.randn(H, w, w, device=dev) / w ** 0.5).requires_grad_(True)
    Wa = (torch.randn(H, w, w, device=dev) / w ** 0.5).requires_grad_(True)
    bx = (0.1 * torch.randn(H, w, device=dev)).requires_grad_(True)
    ba = (0.1 * torch.randn(H, w, device=dev)).requires_grad_(True)
    params = [a_param, Wx, bx, Wa, ba]
    s = torch.rand(W, device=dev).to(torch.bfloat16).requires_grad_(True)

    def torch_mul_grad():
        y = x * s
        return torch.autograd.grad(y, [x, s], dy)

    def hawk_forward_nograd():
        with torch.no_grad():
            return hawk_torch.rglru(x, *params)

    def hawk_forward_grad():
        return hawk_torch.rglru(x, *params)

    def hawk_step():
        y, _ = hawk_torch.rglru(x, *params)
        return torch.autograd.grad(y, [x, *params], dy)

    # The operators called directly, with the arguments hawk_torch.rglru passes (reset at each sequence start).
    reset_sequence_start = 1
    op_args = (x, Wx, bx, Wa, ba, None, None, a_param, None, None, None, H, reset_sequence_start)

    def hawk_forward_op():
        with torch.no_grad():
            return torch.ops.hawk.rglru_forward.default(*op_args, False, True)

    with torch.no_grad():  # a saved forward: the rounded weights and the checkpoints the backward reads
        wx, wa = Wx.detach().to(x.dtype), Wa.detach().to(x.dtype)
        saved_args = (x.detach(), wx, bx.detach(), wa, ba.detach(), None, None, a_param.detach(), None, None, None)
        _, _, checkpoints = torch.ops.hawk.rglru_forward.default(*saved_args, H, reset_sequence_start, True, True)

    def hawk_backward_op():
        with torch.no_grad():
            return torch.ops.hawk.rglru_backward.default(*saved_args, checkpoints, dy, None, H, reset_sequence_start,
                                                         False, True)

    y_kept, _ = hawk_torch.rglru(x, *params)

    def hawk_backward_graph():
        return torch.autograd.grad(y_kept, [x, *params], dy, retain_graph=True)

    y_mul = x * s

    def torch_mul_backward():
        return torch.autograd.grad(y_mul, [x, s], dy, retain_graph=True)

    N, D, S = 32768, 3072, 3
    G = (N + S - 1) // S  # every row's gate row exists
    idx = torch.arange(N, device=dev) // S
    residual, yy, gate, dout = bf16(N, D, grad=True), bf16(N, D, grad=True), bf16(G, D, grad=True), bf16(N, D)

    def gr_default_nograd():
        with torch.no_grad():
            return hawk_torch.gate_residual(residual, yy, gate, idx)

    def gr_default_step():
        out = hawk_torch.gate_residual(residual, yy, gate, idx)
        return torch.autograd.grad(out, (residual, yy, gate), dout)

    def gr_uniform_step():
        out = hawk_torch.gate_residual(residual, yy, gate, idx, layout="uniform", rows_per_group=S, validate=False)
        return torch.autograd.grad(out, (residual, yy, gate), dout)

    stages = [("torch_mul_grad", torch_mul_grad), ("hawk_forward_nograd", hawk_forward_nograd),
              ("hawk_forward_grad", hawk_forward_grad), ("hawk_step", hawk_step),
              ("hawk_forward_op", hawk_forward_op), ("hawk_backward_op", hawk_backward_op),
              ("hawk_backward_graph", hawk_backward_graph), ("torch_mul_backward", torch_mul_backward),
              ("gate_residual_default_nograd", gr_default_nograd), ("gate_residual_default_step", gr_default_step),
              ("gate_residual_uniform_step", gr_uniform_step)]
    results = []
    print(f"{'stage':<30} {'process us':>11} {'thread us':>10} {'wall us':>9}")
    for name, call in stages:
        p, t, wl = issue_cost(call, args.reps)
        results.append(dict(stage=name, process_us=p, thread_us=t, wall_us=wl))
        print(f"{name:<30} {p:11.1f} {t:10.1f} {wl:9.1f}", flush=True)
    if args.json:
        report = dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"),
                      commit=os.environ.get("HAWK_COMMIT", "unknown"), torch=torch.__version__,
                      per_rep=PER_REP, reps=args.reps, shape_rglru=[B, L, W, H], shape_gate_residual=[N, D, S],
                      stages=results)
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
