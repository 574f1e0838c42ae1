#!/usr/bin/env python3
"""hawk_jax's RGLRU layer against recurrentgemma's own JAX RGLRU layer (its lax.scan), in one process on one GPU.

Both are the flax module with recurrentgemma's parameter tree, bf16 computation (``dtype=bfloat16``, fp32
parameters), called as ``apply(params, x, segment_pos)`` with a document start at t = 0 of every row, jit-compiled:

  forward:           y = layer(x)
  forward+backward:  the gradients of sum(y · dy) with respect to the parameters and x

at (B, L, W, H) = (16, 1024, 1024, 16) and (1, 65536, 2560, 10) (RecurrentGemma-2B's width) unless --shapes says
otherwise. Timing: compile and warm up first; then, per repetition, K calls issued back to back on rotated input
copies (together larger than the H200's 60 MB L2) and one wait at the end, divided by K (the GPU-bound steady state
of a training loop: the host's dispatch overlaps the device); the median over the repetitions is reported, with the
first and third quartiles. "synced" is one call then a wait, per repetition (dispatch latency included).

    python3 bench/compare_jax.py --json bench/results/compare_jax-YYYY-MM-DD.json

Needs: a GPU, jax with CUDA, hawk_jax (examples/jax; its library built) and recurrentgemma[jax] (flax).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
if os.environ.get("HAWK_JAX_TEST_INSTALLED") != "1":  # else the installed package
    sys.path.insert(0, str(REPO / "examples" / "jax"))

DEFAULT_SHAPES = [(16, 1024, 1024, 16), (1, 65536, 2560, 10)]
L2_BYTES = 60 * 2**20


def parse_shape(text):
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 4:
        raise argparse.ArgumentTypeError(f"a shape is B,L,W,H; got {text!r}")
    return values


def commit():
    """HAWK_COMMIT (the GPU scripts set it: the device's copy of the tree may carry another HEAD), else git's HEAD."""
    if os.environ.get("HAWK_COMMIT"):
        return os.environ["HAWK_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def quartiles(samples):
    q = statistics.quantiles(samples, n=4)
    return {"median_ms": statistics.median(samples), "q1_ms": q[0], "q3_ms": q[2], "repetitions": len(samples)}


def time_calls(function, argument_sets, repetitions, calls_per_repetition, warmup):
    """(pipelined, synced) per-call times in ms: see the module docstring."""
    import jax

    for i in range(warmup):
        jax.block_until_ready(function(*argument_sets[i % len(argument_sets)]))
    pipelined, synced = [], []
    for _ in range(repetitions):
        start = time.perf_counter()
        results = [function(*argument_sets[k % len(argument_sets)]) for k in range(calls_per_repetition)]
        jax.block_until_ready(results)
        pipelined.append((time.perf_counter() - start) * 1e3 / calls_per_repetition)
        del results
        start = time.perf_counter()
        jax.block_until_ready(function(*argument_sets[0]))
        synced.append((time.perf_counter() - start) * 1e3)
    return quartiles(pipelined), quartiles(synced)


def measure_shape(shape, args, hawk_jax, layers, common):
    import jax
    import jax.numpy as jnp

    batch, length, width, heads = shape
    dtype = jnp.bfloat16
    ours = hawk_jax.RGLRU(width=width, num_heads=heads, dtype=dtype)
    theirs = layers.RGLRU(width=width, num_heads=heads, dtype=dtype, scan_type=common.ScanType.LINEAR_NATIVE)
    pos = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    key = jax.random.PRNGKey(0)
    params = theirs.init(key, jnp.zeros((batch, min(length, 8), width), dtype), pos[:, :min(length, 8)])["params"]
    copies = max(1, min(args.max_copies, -(-2 * L2_BYTES // (batch * length * width * 2))))
    inputs = [jax.random.normal(jax.random.fold_in(key, c), (batch, length, width), jnp.float32).astype(dtype)
              for c in range(copies)]
    dy = jax.random.normal(jax.random.fold_in(key, 99), (batch, length, width), jnp.float32).astype(dtype)

    def forward(module):
        return jax.jit(lambda p, x: module.apply({"params": p}, x, pos, None, False)[0])

    def forward_backward(module):
        def loss(p, x):
            y = module.apply({"params": p}, x, pos, None, False)[0]
            return jnp.sum(y.astype(jnp.float32) * dy.astype(jnp.float32))
        return jax.jit(jax.grad(loss, argnums=(0, 1)))

    row = {"B": batch, "L": length, "W": width, "H": heads, "dtype": "bfloat16", "input_copies": copies}
    sets = [(params, x) for x in inputs]
    for name, module in (("hawk_jax", ours), ("recurrentgemma_scan", theirs)):
        for mode, build in (("forward", forward), ("forward_backward", forward_backward)):
            if mode == "forward_backward" and name == "recurrentgemma_scan" and length > args.scan_backward_max_len:
                row[f"{name}_{mode}"] = {"skipped": f"L > --scan-backward-max-len {args.scan_backward_max_len}"}
                continue
            function = build(module)
            pipelined, synced = time_calls(function, sets, args.repetitions, args.calls, args.warmup)
            row[f"{name}_{mode}"] = {"pipelined": pipelined, "synced": synced}
            print(f"  {name:20s} {mode:17s} {pipelined['median_ms']:9.3f} ms (synced {synced['median_ms']:.3f})",
                  flush=True)
    for mode in ("forward", "forward_backward"):
        ours_ms = row[f"hawk_jax_{mode}"]["pipelined"]["median_ms"]
        theirs_entry = row[f"recurrentgemma_scan_{mode}"]
        if "pipelined" in theirs_entry:
            row[f"speedup_{mode}"] = theirs_entry["pipelined"]["median_ms"] / ours_ms
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=parse_shape, nargs="+", default=DEFAULT_SHAPES, help="B,L,W,H ...")
    parser.add_argument("--repetitions", type=int, default=30)
    parser.add_argument("--calls", type=int, default=10, help="calls per repetition (pipelined)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--max-copies", type=int, default=8, help="input copies rotated to defeat the L2")
    parser.add_argument("--scan-backward-max-len", type=int, default=1 << 20,
                        help="skip recurrentgemma's forward+backward above this L")
    parser.add_argument("--json", type=pathlib.Path, help="write the results here")
    args = parser.parse_args(argv)

    import jax

    import hawk_jax
    from recurrentgemma import common
    from recurrentgemma.jax import layers

    device = jax.devices()[0]
    if device.platform != "gpu":
        sys.exit(f"compare_jax.py needs a GPU; JAX's first device is {device}")
    result = {
        "gpu": device.device_kind,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "jax": jax.__version__,
        "hawk_jax": hawk_jax.__version__,
        "timing": "jit; warm-up; median over repetitions of K back-to-back calls on rotated inputs / K",
        "rows": [],
    }
    for shape in args.shapes:
        print(f"(B, L, W, H) = {shape}", flush=True)
        result["rows"].append(measure_shape(shape, args, hawk_jax, layers, common))
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
