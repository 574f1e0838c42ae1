#!/usr/bin/env python3
"""hawk against what PyTorch users run today, in one process on one GPU.

RG-LRU: hawk_torch.rglru (fused projections, bf16 activations, fp32 master weights, a reset at every
sequence start) against the canonical PyTorch RG-LRU (recurrentgemma's formulation under bf16 autocast:
einsum block-diagonal projections, then a Python loop over time with an fp32 carry), at the shapes of
../shared/GPU.md and across L = 512 ... 65536 for B = 1 and 16 at RecurrentGemma-2B's W = 2560, H = 10.
The PyTorch loop's time is linear in L and it is slow, so it is timed only up to --loop-max-len (forward)
and --loop-backward-max-len (forward + backward); longer rows are recorded as skipped.

Gate-residual: hawk_torch.gate_residual against the composed `residual + gate.index_select(0, idx) * y`
(bf16, bf16 gate, uniform idx) at GPU.md's shapes, with d gate's relative error against float64 and whether
it is bitwise repeatable.

Timing: CUDA events around each call, warm-up first, inputs rotated over enough copies to exceed the 60 MB L2,
median of the repetitions. Writes JSON (with "gpu", "date", "commit") and a PNG of time against L.

    python bench/compare_torch.py --json bench/results/compare_torch-YYYY-MM-DD.json \
        --png bench/results/compare_torch-YYYY-MM-DD.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples" / "torch"))

torch = None  # imported by load_backends(), so that --plot-from runs without torch or a GPU
hawk_torch = None


def load_backends():
    global torch, hawk_torch
    import torch as torch_module
    import hawk_torch as hawk_torch_module  # builds / loads the operator library

    torch, hawk_torch = torch_module, hawk_torch_module

L2_BYTES = 60 * 1024 * 1024
C = 8.0


# ---------------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------------


def rotation_count(bytes_per_set: int, limit: int = 8) -> int:
    """Copies of the inputs so that one rotation touches more than 3x the L2 (1 for large inputs)."""
    return max(1, min(limit, math.ceil(3 * L2_BYTES / max(1, bytes_per_set))))


def time_ms(calls, budget_s: float = 1.0, min_reps: int = 3, max_reps: int = 50) -> float:
    """Median milliseconds of calls[k % len(calls)]() over repetitions after warm-up (CUDA events)."""
    calls[0]()  # first call: lazy loading, allocator growth
    torch.cuda.synchronize()
    first = time.perf_counter()
    calls[0]()
    torch.cuda.synchronize()
    once = time.perf_counter() - first
    if once < 0.05:  # cheap: warm every rotated copy up a few times
        for k in range(3 * len(calls)):
            calls[k % len(calls)]()
        torch.cuda.synchronize()
    reps = int(max(min_reps, min(max_reps, budget_s / max(once, 1e-6))))
    times = []
    for k in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        calls[k % len(calls)]()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def free_memory():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------------------
# the PyTorch implementations people use today
# ---------------------------------------------------------------------------------------------------------------


_sqrt_capped_function = None


def sqrt_capped(z):
    """sqrt with its derivative capped at 1000 (recurrentgemma's SqrtBoundDerivative)."""
    global _sqrt_capped_function
    if _sqrt_capped_function is None:  # defined on first use: torch is imported late (load_backends)

        class SqrtCappedGradient(torch.autograd.Function):
            @staticmethod
            def forward(ctx, z):
                ctx.save_for_backward(z)
                return torch.sqrt(z)

            @staticmethod
            def backward(ctx, grad):
                (z,) = ctx.saved_tensors
                return grad / torch.sqrt(torch.clamp(4.0 * z, min=1e-6))

        _sqrt_capped_function = SqrtCappedGradient
    return _sqrt_capped_function.apply(z)


def pytorch_block_diagonal(x, w, b):
    h = w.shape[0]
    return (torch.einsum("...hi,hij->...hj", x.unflatten(-1, (h, w.shape[1])), w) + b).flatten(-2)


def pytorch_rglru_loop(x, a_param, Wx, bx, Wa, ba, reset):
    """The canonical PyTorch RG-LRU: recurrentgemma's torch layer, under bf16 autocast."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        gate_x = torch.sigmoid(pytorch_block_diagonal(x, Wx, bx))
        gate_a = torch.sigmoid(pytorch_block_diagonal(x, Wa, ba))
        log_a = -C * gate_a * torch.nn.functional.softplus(a_param)
        a = torch.exp(log_a)
        a_square = torch.exp(2 * log_a)
        gated_x = x * gate_x
        multiplier = sqrt_capped(1 - a_square)
        multiplier = reset[..., None] + ~reset[..., None] * multiplier
        normalized_x = gated_x * multiplier.type(x.dtype)
        a = a * ~reset[..., None]
        h = torch.zeros(x.shape[0], x.shape[2], dtype=torch.float32, device=x.device)
        ys = []
        for t in range(x.shape[1]):
            h = a[:, t].float() * h + normalized_x[:, t].float()
            ys.append(h.to(x.dtype))
        return torch.stack(ys, dim=1), h


def pytorch_gate_residual(residual, y, gate, idx):
    return residual + gate.index_select(0, idx) * y


# ---------------------------------------------------------------------------------------------------------------
# RG-LRU
# ---------------------------------------------------------------------------------------------------------------


def rglru_parameters(W, H):
    w = W // H
    radius = torch.empty(W, device="cuda").uniform_(0.9, 0.999)
    a_param = torch.log(torch.expm1(-torch.log(radius)))
    Wx = torch.randn(H, w, w, device="cuda") / math.sqrt(w)
    Wa = torch.randn(H, w, w, device="cuda") / math.sqrt(w)
    bx = 0.1 * torch.randn(H, w, device="cuda")
    ba = 0.1 * torch.randn(H, w, device="cuda")
    return [p.requires_grad_(True) for p in (a_param, Wx, bx, Wa, ba)]


def measure_rglru(B, L, W, H, loop_max_len, loop_backward_max_len, budget_s):
    """One row: hawk forward and forward+backward; the PyTorch loop where it is not capped."""
    row = dict(B=B, L=L, W=W, H=H, dtype="bf16", reset="sequence_start")
    params = rglru_parameters(W, H)
    element_bytes = B * L * W * 2
    sets = rotation_count(2 * element_bytes)
    xs = [(torch.rand(B, L, W, device="cuda") * 2 - 1).to(torch.bfloat16).requires_grad_(True) for _ in range(sets)]
    dys = [(torch.rand(B, L, W, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(sets)]
    row["rotated_input_sets"] = sets

    def hawk_forward(x):
        with torch.no_grad():
            return hawk_torch.rglru(x, *params, validate=False)

    def hawk_forward_backward(x, dy):
        y, _ = hawk_torch.rglru(x, *params, validate=False)
        return torch.autograd.grad(y, [x, *params], dy)

    row["hawk_forward_ms"] = time_ms([lambda x=x: hawk_forward(x) for x in xs], budget_s)
    free_memory()
    row["hawk_forward_backward_ms"] = time_ms(
        [lambda x=x, dy=dy: hawk_forward_backward(x, dy) for x, dy in zip(xs, dys)], budget_s)
    free_memory()

    reset = torch.zeros(B, L, dtype=torch.bool, device="cuda")
    reset[:, 0] = True
    if L <= loop_max_len:
        def loop_forward(x):
            with torch.no_grad():
                return pytorch_rglru_loop(x, *params, reset)

        row["pytorch_loop_forward_ms"] = time_ms([lambda x=x: loop_forward(x) for x in xs], budget_s)
        with torch.no_grad():  # agreement of the two at this shape (bf16 outputs)
            y_hawk, h_hawk = hawk_forward(xs[0])
            y_loop, h_loop = loop_forward(xs[0])
            row["relative_l2_hawk_vs_loop_y"] = float(
                torch.linalg.vector_norm((y_hawk - y_loop).float()) / torch.linalg.vector_norm(y_loop.float()))
        free_memory()
    else:
        row["pytorch_loop_forward_ms"] = None
        row["pytorch_loop_forward_skipped"] = f"L > {loop_max_len}: the loop's time is linear in L"
    if L <= loop_backward_max_len:
        def loop_forward_backward(x, dy):
            y, _ = pytorch_rglru_loop(x, *params, reset)
            return torch.autograd.grad(y, [x, *params], dy)

        row["pytorch_loop_forward_backward_ms"] = time_ms(
            [lambda x=x, dy=dy: loop_forward_backward(x, dy) for x, dy in zip(xs, dys)], budget_s)
        free_memory()
    else:
        row["pytorch_loop_forward_backward_ms"] = None
        row["pytorch_loop_forward_backward_skipped"] = f"L > {loop_backward_max_len}"
    del xs, dys, params
    free_memory()
    if row.get("pytorch_loop_forward_ms"):
        row["speedup_forward"] = row["pytorch_loop_forward_ms"] / row["hawk_forward_ms"]
    if row.get("pytorch_loop_forward_backward_ms"):
        row["speedup_forward_backward"] = row["pytorch_loop_forward_backward_ms"] / row["hawk_forward_backward_ms"]
    return row


# ---------------------------------------------------------------------------------------------------------------
# gate-residual
# ---------------------------------------------------------------------------------------------------------------


def measure_gate_residual(N, D, S, budget_s):
    """One row at N rows of width D, S rows per gate row (idx[r] = r // S): bf16 activations and gate."""
    G = (N + S - 1) // S
    row = dict(N=N, D=D, rows_per_gate_row=S, G=G, dtype="bf16", gate_dtype="bf16", index="int64 uniform")
    sets = rotation_count(5 * N * D * 2)
    row["rotated_input_sets"] = sets

    def make():
        residual = (torch.rand(N, D, device="cuda") * 2 - 1).to(torch.bfloat16).requires_grad_(True)
        y = (torch.rand(N, D, device="cuda") * 2 - 1).to(torch.bfloat16).requires_grad_(True)
        gate = (torch.rand(G, D, device="cuda") * 2 - 1).to(torch.bfloat16).requires_grad_(True)
        dout = (torch.rand(N, D, device="cuda") * 2 - 1).to(torch.bfloat16)
        return residual, y, gate, dout

    inputs = [make() for _ in range(sets)]
    idx = torch.arange(N, device="cuda") // S

    def hawk(residual, y, gate, layout, validate):
        return hawk_torch.gate_residual(residual, y, gate, idx, layout=layout, rows_per_group=S, validate=validate)

    variants = {
        "hawk": dict(layout="uniform", validate=False),
        "hawk_arbitrary_layout": dict(layout="arbitrary", validate=False),
        "hawk_validated": dict(layout="uniform", validate=True),
    }
    for name, kw in variants.items():
        with torch.no_grad():
            row[f"{name}_forward_us"] = 1e3 * time_ms([lambda i=i: hawk(*i[:3], **kw) for i in inputs], budget_s,
                                                      min_reps=20, max_reps=200)
        row[f"{name}_forward_backward_us"] = 1e3 * time_ms(
            [lambda i=i: torch.autograd.grad(hawk(*i[:3], **kw), i[:3], i[3]) for i in inputs], budget_s,
            min_reps=20, max_reps=200)
    with torch.no_grad():
        row["pytorch_forward_us"] = 1e3 * time_ms([lambda i=i: pytorch_gate_residual(*i[:3], idx) for i in inputs],
                                                  budget_s, min_reps=20, max_reps=200)
    row["pytorch_forward_backward_us"] = 1e3 * time_ms(
        [lambda i=i: torch.autograd.grad(pytorch_gate_residual(*i[:3], idx), i[:3], i[3]) for i in inputs],
        budget_s, min_reps=20, max_reps=200)

    # d gate: error against float64 and run-to-run repeatability
    residual, y, gate, dout = inputs[0]
    want = torch.zeros(G, D, dtype=torch.float64, device="cuda").index_add_(0, idx, dout.double() * y.double())
    norm = torch.linalg.vector_norm(want)
    for name, fn in [("hawk", lambda: hawk(residual, y, gate, "uniform", False)),
                     ("pytorch", lambda: pytorch_gate_residual(residual, y, gate, idx))]:
        first = torch.autograd.grad(fn(), gate, dout)[0]
        second = torch.autograd.grad(fn(), gate, dout)[0]
        row[f"{name}_dgate_relative_l2"] = float(torch.linalg.vector_norm(first.double() - want) / norm)
        row[f"{name}_dgate_bitwise_repeatable"] = bool(torch.equal(first, second))
    row["speedup_forward"] = row["pytorch_forward_us"] / row["hawk_forward_us"]
    row["speedup_forward_backward"] = row["pytorch_forward_backward_us"] / row["hawk_forward_backward_us"]
    del inputs, want
    free_memory()
    return row


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------


def plot(sweep, path, gpu):
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed: no {path}; make it later with --plot-from the JSON", flush=True)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({r["B"] for r in sweep})
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    series = [("hawk_forward_ms", "hawk forward", "C0", "-"),
              ("hawk_forward_backward_ms", "hawk forward+backward", "C0", "--"),
              ("pytorch_loop_forward_ms", "PyTorch loop forward", "C3", "-"),
              ("pytorch_loop_forward_backward_ms", "PyTorch loop forward+backward", "C3", "--")]
    for ax, B in zip(axes[0], batches):
        rows = sorted((r for r in sweep if r["B"] == B), key=lambda r: r["L"])
        for key, label, color, style in series:
            points = [(r["L"], r[key]) for r in rows if r.get(key)]
            if points:
                ax.plot(*zip(*points), style, marker="o", color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel("time (ms, median)")
        ax.set_title(f"RG-LRU, B = {B}, W = {rows[0]['W']}, H = {rows[0]['H']}, bf16")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"hawk vs the canonical PyTorch RG-LRU on {gpu}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def print_tables(report):
    """The short tables printed last."""

    def fmt(v, digits=3):
        return "—" if v is None else f"{v:.{digits}f}"

    print("\nRG-LRU, bf16, median ms        hawk fwd  hawk f+b  loop fwd  loop f+b")
    for r in report["rglru_shapes"] + report["rglru_sweep"]:
        print(f"  B={r['B']:<3} L={r['L']:<6} W={r['W']:<5} H={r['H']:<3}  {fmt(r['hawk_forward_ms']):>8}  "
              f"{fmt(r['hawk_forward_backward_ms']):>8}  {fmt(r.get('pytorch_loop_forward_ms')):>8}  "
              f"{fmt(r.get('pytorch_loop_forward_backward_ms')):>8}")
    print("\nGate-residual, bf16, median us   hawk fwd  hawk f+b  torch fwd torch f+b  dgate err hawk / torch")
    for r in report["gate_residual"]:
        print(f"  N={r['N']:<7} D={r['D']:<5} S={r['rows_per_gate_row']:<4} {r['hawk_forward_us']:>8.1f}  "
              f"{r['hawk_forward_backward_us']:>8.1f}  {r['pytorch_forward_us']:>8.1f}  "
              f"{r['pytorch_forward_backward_us']:>8.1f}  {r['hawk_dgate_relative_l2']:.1e} / "
              f"{r['pytorch_dgate_relative_l2']:.1e}")


def main():
    today = datetime.date.today().isoformat()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=str(REPO / "bench" / "results" / f"compare_torch-{today}.json"))
    parser.add_argument("--png", default=str(REPO / "bench" / "results" / f"compare_torch-{today}.png"))
    parser.add_argument("--lengths", default="512,1024,2048,4096,8192,16384,32768,65536")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--loop-max-len", type=int, default=8192)
    parser.add_argument("--loop-backward-max-len", type=int, default=2048)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of repetitions per measurement")
    parser.add_argument("--quick", action="store_true", help="a smoke run: two lengths, short budgets")
    parser.add_argument("--plot-from", metavar="JSON", help="only draw --png from a JSON this script wrote")
    args = parser.parse_args()
    if args.plot_from:
        report = json.loads(pathlib.Path(args.plot_from).read_text())
        plot(report["rglru_sweep"], args.png, report["gpu"])
        print_tables(report)
        return
    load_backends()
    if args.quick:
        args.lengths, args.budget = "512,2048", 0.1
        args.loop_max_len = args.loop_backward_max_len = 512

    started = time.time()
    report = dict(
        benchmark="compare_torch",
        gpu=torch.cuda.get_device_name(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        commit=os.environ.get("HAWK_COMMIT", "unknown"),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        timing="CUDA events per call, warm-up, inputs rotated beyond 60 MB of L2, median",
        notes=["hawk forward rows run under torch.no_grad() (no checkpoints saved); forward+backward rows save "
               "them and take every gradient (x and the five parameters)",
               "hawk RG-LRU rows reset at each sequence start (training); GPU.md's Fattori rows use the "
               "restricted no-reset contract",
               "hawk gate-residual rows pass validate=False (the caller guarantees idx); hawk_validated_* include "
               "the device-side idx check (a small kernel; no synchronisation)"],
        rglru_shapes=[], rglru_sweep=[], gate_residual=[],
    )
    torch.manual_seed(int(os.environ.get("HAWK_BENCH_SEED", "20261129")))

    for B, L, W, H in [(4, 2048, 2048, 16), (1, 8192, 2560, 10), (16, 1024, 1024, 16)]:
        row = measure_rglru(B, L, W, H, args.loop_max_len, args.loop_backward_max_len, args.budget)
        report["rglru_shapes"].append(row)
        print(json.dumps(row), flush=True)
    for B in [int(b) for b in args.batches.split(",")]:
        for L in [int(n) for n in args.lengths.split(",")]:
            row = measure_rglru(B, L, 2560, 10, args.loop_max_len, args.loop_backward_max_len, args.budget)
            report["rglru_sweep"].append(row)
            print(json.dumps(row), flush=True)
    for N, D, S in [(4097, 3072, 3), (32768, 3072, 3), (131072, 3072, 256), (32768, 1152, 256)]:
        row = measure_gate_residual(N, D, S, args.budget)
        report["gate_residual"].append(row)
        print(json.dumps(row), flush=True)
    report["wall_s"] = round(time.time() - started, 1)

    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    plot(report["rglru_sweep"], args.png, report["gpu"])

    print_tables(report)
    print(f"\nwrote {args.json} and {args.png} in {report['wall_s']} s")


if __name__ == "__main__":
    main()
