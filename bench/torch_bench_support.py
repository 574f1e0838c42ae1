"""What the PyTorch benchmark scripts (compare_torch.py, compare_peers.py, host_cost_breakdown.py) share: the input
rotation that keeps timings out of the L2, CUDA-graph capture, the host cost of issuing calls, freeing memory
between rows, and the commit a result names.

torch is imported inside the functions, so that a script can import this module before (or without) torch.
"""

from __future__ import annotations

import math
import os
import pathlib
import statistics
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

#: The H200's L2 (50 MB) rounded up: one rotation of inputs touches more than 3x it.
L2_BYTES = 60 * 2**20


def rotation_count(bytes_per_set: int, limit: int = 8) -> int:
    """Copies of the inputs so that one rotation touches more than 3x the L2 (1 for large inputs)."""
    return max(1, min(limit, math.ceil(3 * L2_BYTES / max(1, bytes_per_set))))


def capture_graph(step, warmups: int = 3):
    """step() captured in a CUDA graph after `warmups` calls on a side stream (torch.cuda.graph's recipe); returns
    the graph and step's outputs, which must stay alive as long as the graph is replayed."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmups):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    torch.cuda.synchronize()
    return graph, outputs


def issue_cost_us(calls, reps: int, per_rep: int) -> tuple:
    """(process CPU µs, calling thread's CPU µs, wall µs) to issue one call: medians over reps of per_rep calls
    (calls[k % len(calls)]) issued back to back, the clocks read before and after the loop with nothing
    synchronised in between. Process time counts every thread (the autograd engine's too)."""
    import torch

    process, thread, wall = [], [], []
    for r in range(reps):
        torch.cuda.synchronize()
        p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        for k in range(per_rep):
            calls[(r * per_rep + k) % len(calls)]()
        p1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
        process.append((p1 - p0) / per_rep * 1e6)
        thread.append((t1 - t0) / per_rep * 1e6)
        wall.append((w1 - w0) / per_rep * 1e6)
    torch.cuda.synchronize()
    return statistics.median(process), statistics.median(thread), statistics.median(wall)


def free_memory():
    """Waits for the GPU and returns the caching allocator's free blocks (between rows of different sizes)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def commit_id() -> str:
    """HAWK_COMMIT (the GPU scripts set it), else the checkout's HEAD (marked when the tree has changes)."""
    if os.environ.get("HAWK_COMMIT"):
        return os.environ["HAWK_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
